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

from abc import ABC, abstractmethod

import numpy as np


class Loss(ABC):
    name = "loss"
    curvature = 1.0

    def __init__(self, l2: float = 0.0):
        if not (l2 >= 0 and np.isfinite(l2)):
            raise ValueError(f"l2 must be a finite number >= 0, got {l2!r}")
        self.l2 = float(l2)

    @abstractmethod
    def value(self, u, y):
        ...

    @abstractmethod
    def derivative(self, u, y):
        ...

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


class SoftmaxLoss(Loss):
    """Multiclass softmax cross-entropy (000's MNIST loss; 003's FEMNIST loss with its typo read as
    the log-sum-exp, notes B3).  The model is c class vectors of length d, stored class-major as
    one vector of length c d; the predictor of a sample is the row u = (z^T x_1, ..., z^T x_c) and
    ``derivative`` is softmax(u) - onehot(y) (rows of length c).  The Hessian of the cross-entropy
    in u is diag(p) - p p^T, whose largest eigenvalue is at most 1/2: ``curvature``.  Labels are
    mapped to 0..c-1 in sorted order.  Sparsity is per class (000: tau per class column)."""

    name = "softmax"
    curvature = 0.5

    def __init__(self, l2: float = 0.0, classes: int | None = None):
        super().__init__(l2)
        self.classes = classes

    def _probs(self, u):
        m = u.max(axis=-1, keepdims=True)
        e = np.exp(u - m)
        return e / e.sum(axis=-1, keepdims=True)

    def value(self, u, y):
        m = u.max(axis=-1, keepdims=True)
        lse = (m + np.log(np.exp(u - m).sum(axis=-1, keepdims=True)))[..., 0]
        return lse - np.take_along_axis(u, y.astype(np.int64)[..., None], axis=-1)[..., 0]

    def derivative(self, u, y):
        p = self._probs(u)
        np.put_along_axis(p, y.astype(np.int64)[..., None],
                          np.take_along_axis(p, y.astype(np.int64)[..., None], axis=-1) - 1.0,
                          axis=-1)
        return p

    def labels(self, y):
        y = np.asarray(y, dtype=float)
        vals = np.unique(y)
        if not 2 <= vals.shape[0] <= 1000:
            raise ValueError(f"the softmax loss needs between 2 and 1000 label values (classes), "
                             f"found {vals.shape[0]}")
        if self.classes is None:
            self.classes = int(vals.shape[0])
        return np.searchsorted(vals, y).astype(float)


LOSSES = {"squared": SquaredLoss, "logistic": LogisticLoss, "softmax": SoftmaxLoss}


def get_loss(name: str, l2: float = 0.0) -> Loss:
    if name not in LOSSES:
        raise ValueError(f"--loss must be one of {', '.join(LOSSES)}, got {name!r}")
    return LOSSES[name](l2)
