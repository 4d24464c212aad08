"""Optimization core: losses, the l1 ball, Frank-Wolfe baselines and a certified reference optimum.

Objective (paper 004, eq. (4), Definition 5, Table V):  f(x) = (1/n) sum_i loss(a_i^T x, y_i)
over one l1 ball {||x||_1 <= eta} or the product of per-block l1 balls (one per party).
See docs/optim.md.
"""
from .losses import LOSSES, ClippedLoss, LogisticLoss, SmoothedHingeLoss, SquaredLoss, get_loss
from .l1ball import (check_blocks, check_radii, fw_gap, lmo_l1_ball, lmo_l1_balls, project_l1_ball,
                     project_l1_balls)
from .frank_wolfe import FWResult, dp_frank_wolfe, frank_wolfe, noisy_lmo, score_sensitivity
from .reference import ReferenceNotCertified, ReferenceResult, reference_optimum

__all__ = [
    "SquaredLoss", "LogisticLoss", "SmoothedHingeLoss", "ClippedLoss", "LOSSES", "get_loss",
    "project_l1_ball", "project_l1_balls", "lmo_l1_ball", "lmo_l1_balls", "fw_gap",
    "check_blocks", "check_radii", "frank_wolfe", "dp_frank_wolfe", "FWResult",
    "score_sensitivity", "noisy_lmo", "reference_optimum", "ReferenceResult", "ReferenceNotCertified",
]
