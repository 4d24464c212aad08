"""Horizontal sparse federated learning on numpy/scipy (never torch): Fed-HT, FedIter-HT,
Distributed-IHT (paper 000), FedGradMP exact and inexact (paper 003), the baselines FedMid,
FedDualAvg and FedAvg, metered messages and an optional (epsilon, delta)-DP mode.

Modules: :mod:`.runtime` (round loop, participation, batches, weights), :mod:`.shards` (client
data, batched or looped), :mod:`.algorithms` (one short module per method), :mod:`.losses`,
:mod:`.data` (generators, k-means non-IID partition, dictionaries), :mod:`.wire` (encodings and
metering), :mod:`.privacy` (record- and client-level DP), :mod:`.config` (``SparseConfig``: every
option of a run, checked once), :mod:`.api` (``fit``, one call), :mod:`.remote` (the server
and client roles on a Flower backend) and :mod:`.hosted` (a run hosted there).
"""
from .algorithms import ALGORITHMS, make_strategy
from .config import SparseConfig
from .losses import get_loss
from .runtime import BatchSchedule, Participation, SparseResult, run

__all__ = ["ALGORITHMS", "make_strategy", "SparseConfig", "get_loss", "BatchSchedule",
           "Participation", "SparseResult", "run"]
