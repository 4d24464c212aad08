"""Per-sample losses of the sparse methods, written on the predictor u = z^T x.

Every loss gives the per-sample value ``value(u, y)`` and derivative ``derivative(u, y)`` (with
respect to u), vectorized over any shape, and ``curvature``: a bound on the second derivative, so
that the smoothness of ``f_i`` is ``curvature * lambda_max(Z_i^T Z_i) / n_i`` (+ ``l2``).

Decisions (notes P000-7, B3):

* ``squared``: 003's form ``f_i(x) = ||Z_i x - y_i||^2 / (2 n_i)``.  000 writes it without the 1/2;
  the two differ by a factor 2 in the objective and in the step size only.  Objectives reported by
  the engine are always in this form.
* ``logistic``: labels in {-1, +1} (a two-valued label vector is mapped, the larger value to +1),
  ``log(1 + exp(-y u))``: the standard sign (000's appendix sign is wrong for +-1 labels; 003's
  factor 2 is dropped).  ``l2`` (000's lambda, unstated in the paper) defaults to 0.
"""
from __future__ import annotations

import numpy as np


class Loss:
    name = "loss"
    curvature = 1.0

    def __init__(self, l2: float = 0.0):
        if not (l2 >= 0 and np.isfinite(l2)):
            raise ValueError(f"l2 must be a finite number >= 0, got {l2!r}")
        self.l2 = float(l2)

    def value(self, u, y):
        raise NotImplementedError

    def derivative(self, u, y):
        raise NotImplementedError

    def labels(self, y):
        return np.asarray(y, dtype=float)


class SquaredLoss(Loss):
    name = "squared"
    curvature = 1.0

    def value(self, u, y):
        r = u - y
        return 0.5 * r * r

    def derivative(self, u, y):
        return u - y


class LogisticLoss(Loss):
    name = "logistic"
    curvature = 0.25

    def value(self, u, y):
        return np.logaddexp(0.0, -y * u)

    def derivative(self, u, y):
        # -y * sigmoid(-y u), written with expit-free stable arithmetic
        t = -y * u
        return -y * np.exp(-np.logaddexp(0.0, -t))

    def labels(self, y):
        y = np.asarray(y, dtype=float)
        vals = np.unique(y)
        if vals.shape[0] != 2:
            raise ValueError(f"the logistic loss needs two label values, found {vals.shape[0]}")
        if set(vals.tolist()) == {-1.0, 1.0}:
            return y
        return np.where(y == vals[1], 1.0, -1.0)


LOSSES = {"squared": SquaredLoss, "logistic": LogisticLoss}


def get_loss(name: str, l2: float = 0.0) -> Loss:
    if name not in LOSSES:
        raise ValueError(f"--loss must be one of {', '.join(LOSSES)}, got {name!r}")
    return LOSSES[name](l2)
