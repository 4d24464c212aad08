"""The vertical (featurewise) engine: parties, server, protocol, BCFW-AS / DP-BCFW-AS / dFW.

Paper 004 (Lou & Cheung 2021), Algorithms 1 and 2; see docs/vertical.md and docs/sensitivity.md.
"""
from .api import ALGORITHMS, Solution, solve
from .config import VerticalConfig
from .engine import Party, RunResult, Server, run_vertical
from .messages import (HEADER_BYTES, Feature, FeatureRequest, Index, IndexGap, Round, Setup,
                       decode, encode)
from .privacy import MemoryLedger, NoisePlan, calibrate_accountant, calibrate_paper, sensitivities
from .sampling import Sampling, parse_sampling
from .sketch import Sketch
from .transport import DOWN, UP, InProcessTransport, Meter, Transport

__all__ = ["solve", "VerticalConfig", "Solution", "ALGORITHMS", "run_vertical", "RunResult", "Party", "Server", "Sampling",
           "parse_sampling", "Sketch", "Transport", "InProcessTransport", "Meter", "UP", "DOWN",
           "encode", "decode", "HEADER_BYTES", "Setup", "Round", "Index", "FeatureRequest",
           "Feature", "IndexGap", "MemoryLedger", "NoisePlan", "sensitivities",
           "calibrate_accountant", "calibrate_paper"]
