"""Exact one-dimensional minimization for the non-private Frank-Wolfe step (``step="line"``).

Jaggi (2013), "Revisiting Frank-Wolfe", Algorithm 1 and its line-search variant (section 2,
"gamma := argmin_{gamma in [0, 1]} f((1 - gamma) x + gamma s)"; Theorem 1's rate holds for it,
since the line-search step does at least as well as 2 / (t + 2) every round).  With margins
z = A x + b and the direction's margins d = A s - A x, the step minimizes

    phi(gamma) = (1/n) sum_i loss(z_i + gamma d_i, y_i)  over gamma in [0, 1],

a convex function of one variable whose derivative phi'(gamma) = (1/n) sum_i loss'(z_i + gamma
d_i, y_i) d_i is non-decreasing (every loss here is convex in its margin).  So the minimizer is
0 if phi'(0) >= 0, 1 if phi'(1) <= 0, else the root of phi' in (0, 1), found by the Illinois
variant of regula falsi (Dowell & Jarratt 1971), which keeps a bracket, so it cannot leave
[0, 1], and converges superlinearly on the smooth phi' of these losses.

The unpenalized intercept (``vflpriv.optim.intercept``) is then moved to its exact minimizer
given x, b = argmin_{|b| <= B_b} (1/n) sum_i loss(A x + b, y_i), by the same root finder on
(1/n) sum_i loss'(A x + b, y_i) (closed form mean(y - A x) for least squares): exact block
coordinate minimization in b, the step the damped Newton update of private runs approximates
with noisy derivatives.  Only non-private runs use either: both read the data freely.
"""
from __future__ import annotations

import math

import numpy as np

from .losses import SquaredLoss

#: the root finder stops when the bracket is this narrow (in the step's own units) ...
TOL = 1e-10
#: ... or after this many derivative evaluations
MAX_EVALS = 100


def _root(fp, lo, hi, f_lo=None, f_hi=None):
    """The minimizer on [lo, hi] of a convex function whose derivative is ``fp`` (monotone);
    ``f_lo``, ``f_hi``: fp at the ends when the caller has them."""
    f_lo = fp(lo) if f_lo is None else f_lo
    f_hi = fp(hi) if f_hi is None else f_hi
    if f_lo >= 0.0:
        return lo
    if f_hi <= 0.0:
        return hi
    side = 0
    for _ in range(MAX_EVALS):
        if hi - lo <= TOL * max(1.0, abs(lo), abs(hi)):
            break
        m = (lo * f_hi - hi * f_lo) / (f_hi - f_lo)
        if not lo < m < hi:                     # round-off at a tiny bracket: bisect
            m = 0.5 * (lo + hi)
        f_m = fp(m)
        if f_m == 0.0:
            return m
        if f_m > 0.0:
            hi, f_hi = m, f_m
            if side == 1:                       # Illinois: halve the stale end's value
                f_lo *= 0.5
            side = 1
        else:
            lo, f_lo = m, f_m
            if side == -1:
                f_hi *= 0.5
            side = -1
    return 0.5 * (lo + hi)


def fw_step(loss, z, d, y) -> float:
    """gamma in [0, 1] minimizing (1/n) sum_i loss(z_i + gamma d_i, y_i) (module docstring)."""
    if isinstance(loss, SquaredLoss):
        dd = float(d @ d)
        if dd == 0.0:
            return 0.0
        return float(np.clip(-float((z - y) @ d) / dd, 0.0, 1.0))
    n = z.shape[0]
    return _root(lambda g: float(loss.derivative(z + g * d, y) @ d) / n, 0.0, 1.0)


def best_intercept(loss, margins, y, bound=math.inf, start=None) -> float:
    """b in [-bound, bound] minimizing (1/n) sum_i loss(margins_i + b, y_i), margins = A x.
    ``start`` (the previous round's b): the search begins in a bracket of width 0.5 around it,
    widened 4-fold until it holds the minimizer, so a round whose b barely moves costs a few
    evaluations instead of a search over the whole range."""
    if isinstance(loss, SquaredLoss):
        return float(np.clip(np.mean(y - margins), -bound, bound))
    lo, hi = -bound, bound
    if not math.isfinite(bound):                # the classification losses' B_b is finite; a
        lo, hi = -1e3, 1e3                      # caller without one gets a wide finite box

    def fp(b):
        return float(np.mean(loss.derivative(margins + b, y)))

    if start is None or not lo < start < hi:
        return _root(fp, lo, hi)
    w = 0.25
    while True:
        a, c = max(lo, start - w), min(hi, start + w)
        f_a, f_c = fp(a), fp(c)
        if (a == lo or f_a < 0.0) and (c == hi or f_c > 0.0):
            return _root(fp, a, c, f_a, f_c)
        w *= 4.0
