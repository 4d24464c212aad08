"""The unpenalized intercept b, fitted jointly with the l1-constrained coefficients.

Model: margins z_i = a_i^T x + b, objective f(x, b) = (1/n) sum_i loss(z_i, y_i), x in the product
of l1 balls (Frank-Wolfe moves it), b outside every ball.  Each round, from the same derivatives
l'_i = loss'(z_i, y_i) that give the coefficients' gradient, the intercept's partial derivative is

    g_b = df/db = (1/n) sum_i l'_i,

and b takes a damped Newton step, updated in the same round as x (a block-coordinate method: the
x block by a Frank-Wolfe step, the b block by a scaled gradient step; Wright 2015, "Coordinate
descent algorithms", section 4, for the convergence of such mixed block updates on smooth f):

    b <- clip(b - rho_t g_b / h(b), -B_b, B_b).

* h(b) is the curvature of f in b at the intercept-only model: 1 for the squared and the smoothed
  hinge loss (d^2 loss / dz^2 <= 1, so the step never overshoots), sigma(b) (1 - sigma(b)) for the
  logistic loss, floored at ``H_MIN``.  A function of b alone, never of the data, so in a private
  run the step is a post-processing of the released g_b.
* rho_t = 2 / (t + 2), the Frank-Wolfe step of the same round: a full Newton step at t = 0, then
  damped, which keeps the step stable where the data's curvature exceeds h(b) (up to 2 h(b) at
  any t, more as rho_t shrinks) and, when g_b is noisy, averages the noise over the rounds as in
  stochastic approximation.
* B_b (``bound``) is public: ``INTERCEPT_BOUND`` for the logistic loss (a logit of +-8 is a
  probability of 3e-4..1 - 3e-4), the label bound B_y for least squares in a private run (the
  intercept of labels in [-B_y, B_y]).  Private runs use it in the margins' bound
  |z| <= B_a sum_k eta_k + B_b, hence in every sensitivity that depends on z (docs/sensitivity.md).
"""
from __future__ import annotations

import math

import numpy as np

from .losses import expit

#: the logistic intercept's public range: |b| <= 8 (probabilities 3.4e-4 .. 1 - 3.4e-4)
INTERCEPT_BOUND = 8.0
#: floor of the logistic curvature sigma(b)(1 - sigma(b)) (its value at |b| ~ 4.6)
H_MIN = 0.01


def bound(loss, label_bound=None) -> float:
    """B_b: the public range of the intercept for ``loss`` (module docstring)."""
    if loss.name == "squared":
        return math.inf if label_bound is None else float(label_bound)
    return INTERCEPT_BOUND


def curvature(loss, b) -> float:
    """h(b): the curvature of f in b at the intercept-only model (module docstring)."""
    if loss.name == "logistic":
        s = float(expit(b))
        return max(s * (1.0 - s), H_MIN)
    return 1.0


def update(loss, b, g_b, t, bound_b=math.inf) -> float:
    """The intercept after round t's step from its (possibly noisy) derivative ``g_b``."""
    b = float(b) - 2.0 / (t + 2.0) * float(g_b) / curvature(loss, b)
    return float(np.clip(b, -bound_b, bound_b))


def reference_bound(loss, label_bound, A, y, radii) -> float:
    """The intercept's range for the certified reference optimum (``reference_optimum``'s
    ``intercept_bound``): the fit's own B_b where it is finite; for least squares without a
    label bound, max |y| + max |a_ij| sum_k eta_k, which contains mean(y - A x) for every
    feasible x, so the box does not bind at the optimum (an evaluation of the data, not a
    release)."""
    B_b = bound(loss, label_bound)
    if math.isfinite(B_b):
        return B_b
    from ._checks import max_abs

    return max_abs(y) + max_abs(A) * float(np.sum(radii)) + 1.0
