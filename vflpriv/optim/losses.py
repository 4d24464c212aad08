"""Smooth convex losses for sparse empirical risk minimization (small skglm-style datafits).

Objective (paper 004, eq. (4) with Definition 5's normalization and Table V's losses)::

    f(x) = (1/n) * sum_{i=1}^n loss(a_i^T x, y_i)

where a_i^T is row i of A (n x d).  The three losses of paper 004, Table V, per sample with
z = a_i^T x:

* ``SquaredLoss``:        loss(z, y) = (1/2) (z - y)^2             (Table V: (1/2n) sum (y_j - D_j x)^2)
* ``LogisticLoss``:       loss(z, y) = log(1 + exp(-y z))          (Table V: (1/n) sum log(1 + exp(-y_j D_j x)))
* ``SmoothedHingeLoss``:  loss(z, y) = (1/2) max(0, 1 - y z)^2     (Table V: (1/2n) sum max{0, 1 - y_j D_j x}^2;
  the paper calls this squared hinge "smoothed hinge"; we keep its name and its formula)

Each datafit exposes the elementwise ``value(z, y)`` and ``derivative(z, y)`` (d loss / d z), so the
gradient is ``grad f(x) = A^T derivative(A x, y) / n`` (``gradient``).  ``smoothness(label_bound)``
is the Lipschitz constant of z -> derivative(z, y) over |y| <= label_bound, hence f is
``smoothness * ||A||_2^2 / n``-smooth.  ``derivative_bound(z_bound, label_bound)`` bounds
|derivative(z, y)| over |z| <= z_bound, |y| <= label_bound: the DP engines derive score
sensitivities from it and from declared bounds, never from the data.

A may be a dense numpy array or any scipy.sparse matrix (CSC is what the engines use).
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import InputError


_EXPIT = None


def expit(x):
    """``scipy.special.expit``, imported on first use: importing scipy.special takes about a
    quarter of a second, which every ``vflpriv`` process (and every ClientApp process of a
    deployment) would otherwise pay for the logistic loss alone."""
    global _EXPIT
    if _EXPIT is None:
        from scipy.special import expit as _EXPIT
    return _EXPIT(x)


def _check_bound(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise InputError(f"{name} must be a number, got {value!r}")
    value = float(value)
    if not (value >= 0.0 and math.isfinite(value)):
        raise InputError(f"{name} must be a finite number >= 0, got {value!r}")
    return value


class _Loss:
    name = "loss"

    def value(self, z, y):  # pragma: no cover - overridden
        raise TypeError("abstract")

    def derivative(self, z, y):  # pragma: no cover - overridden
        raise TypeError("abstract")

    def objective(self, A, x, y, Ax=None):
        """f(x) = (1/n) sum_i loss(a_i^T x, y_i); pass ``Ax`` when already known."""
        z = A @ x if Ax is None else Ax
        z = np.asarray(z, dtype=float).ravel()
        return float(np.mean(self.value(z, y)))

    def gradient(self, A, x, y, Ax=None):
        """grad f(x) = A^T derivative(A x, y) / n (a dense vector of length d)."""
        z = A @ x if Ax is None else Ax
        z = np.asarray(z, dtype=float).ravel()
        g = A.T @ self.derivative(z, y)
        return np.asarray(g, dtype=float).ravel() / z.shape[0]

    def lipschitz(self, A, label_bound=1.0):
        """An upper bound on the gradient Lipschitz constant of f: smoothness * ||A||_2^2 / n.

        ||A||_2 is the largest singular value (dense: LAPACK; sparse: ARPACK with a 1e-6 safety
        margin on the Ritz value's relative accuracy)."""
        n = A.shape[0]
        if hasattr(A, "tocsc"):
            from scipy.sparse.linalg import svds
            if min(A.shape) <= 2:
                s = float(np.linalg.norm(A.toarray(), 2))
            else:
                s = float(svds(A.astype(float), k=1, return_singular_vectors=False, tol=1e-8)[0])
                s *= 1.0 + 1e-6
        else:
            s = float(np.linalg.norm(np.asarray(A, dtype=float), 2))
        return self.smoothness(label_bound) * s * s / n

    def __repr__(self):
        return f"{type(self).__name__}()"

    def __eq__(self, other):
        return type(self) is type(other)

    def __hash__(self):
        return hash(type(self).__name__)


class SquaredLoss(_Loss):
    """loss(z, y) = (z - y)^2 / 2; derivative z - y; 1-smooth in z.

    |derivative| <= |z| + |y| <= z_bound + label_bound.
    """

    name = "squared"

    def value(self, z, y):
        r = np.asarray(z, dtype=float) - y
        return 0.5 * r * r

    def derivative(self, z, y):
        return np.asarray(z, dtype=float) - y

    def smoothness(self, label_bound=1.0):
        _check_bound("label_bound", label_bound)
        return 1.0

    def derivative_bound(self, z_bound, label_bound):
        return _check_bound("z_bound", z_bound) + _check_bound("label_bound", label_bound)


class LogisticLoss(_Loss):
    """loss(z, y) = log(1 + exp(-y z)), computed stably as logaddexp(0, -y z).

    derivative = -y * sigmoid(-y z); second derivative y^2 sigmoid(y z) sigmoid(-y z) <= y^2 / 4,
    so the smoothness is label_bound^2 / 4 (1/4 for labels in {-1, +1}).
    |derivative| = |y| / (1 + exp(y z)) <= |y| / (1 + exp(-|y| z_bound)), increasing in |y|, so
    the bound is label_bound / (1 + exp(-label_bound * z_bound)) (< label_bound).
    """

    name = "logistic"

    def value(self, z, y):
        return np.logaddexp(0.0, -np.asarray(y, dtype=float) * np.asarray(z, dtype=float))

    def derivative(self, z, y):
        y = np.asarray(y, dtype=float)
        return -y * expit(-y * np.asarray(z, dtype=float))

    def smoothness(self, label_bound=1.0):
        b = _check_bound("label_bound", label_bound)
        return b * b / 4.0

    def derivative_bound(self, z_bound, label_bound):
        zb = _check_bound("z_bound", z_bound)
        yb = _check_bound("label_bound", label_bound)
        return float(yb * expit(yb * zb))


class SmoothedHingeLoss(_Loss):
    """loss(z, y) = max(0, 1 - y z)^2 / 2 (paper 004, Table V; also called squared hinge).

    derivative = -y max(0, 1 - y z), Lipschitz in z with constant y^2, so the smoothness is
    label_bound^2.  |derivative| <= |y| (1 + |y| |z|) <= label_bound (1 + label_bound z_bound).
    """

    name = "smoothed-hinge"

    def value(self, z, y):
        m = np.maximum(0.0, 1.0 - np.asarray(y, dtype=float) * np.asarray(z, dtype=float))
        return 0.5 * m * m

    def derivative(self, z, y):
        y = np.asarray(y, dtype=float)
        return -y * np.maximum(0.0, 1.0 - y * np.asarray(z, dtype=float))

    def smoothness(self, label_bound=1.0):
        b = _check_bound("label_bound", label_bound)
        return b * b

    def derivative_bound(self, z_bound, label_bound):
        zb = _check_bound("z_bound", z_bound)
        yb = _check_bound("label_bound", label_bound)
        return yb * (1.0 + yb * zb)


class ClippedLoss(_Loss):
    """A loss whose per-sample derivative is clipped to [-c, c] (for DP sensitivity).

    ``value`` is the wrapped loss's; ``derivative`` is clip(loss.derivative, -c, c), so the
    gradient A^T derivative / n is that of a robustified objective (the clipping is a no-op
    wherever |loss'| <= c)."""

    def __init__(self, loss, clip):
        self.loss = get_loss(loss)
        self.clip = _check_bound("derivative_clip", clip)
        self.name = f"{self.loss.name}-clipped"

    def value(self, z, y):
        return self.loss.value(z, y)

    def derivative(self, z, y):
        return np.clip(self.loss.derivative(z, y), -self.clip, self.clip)

    def smoothness(self, label_bound=1.0):
        return self.loss.smoothness(label_bound)

    def derivative_bound(self, z_bound, label_bound):
        return min(self.clip, self.loss.derivative_bound(z_bound, label_bound))

    def __repr__(self):
        return f"ClippedLoss({self.loss!r}, {self.clip!r})"

    def __eq__(self, other):
        return isinstance(other, ClippedLoss) and other.loss == self.loss and other.clip == self.clip

    def __hash__(self):
        return hash((self.name, self.clip))


LOSSES = {"squared": SquaredLoss, "logistic": LogisticLoss, "smoothed-hinge": SmoothedHingeLoss}


def get_loss(loss) -> _Loss:
    """A loss object from a loss object or one of the names in ``LOSSES``."""
    if isinstance(loss, _Loss):
        return loss
    if isinstance(loss, str) and loss in LOSSES:
        return LOSSES[loss]()
    raise InputError(f"loss must be one of {sorted(LOSSES)} or a loss object, got {loss!r}")
