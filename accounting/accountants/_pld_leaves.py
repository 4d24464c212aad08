"""Single-release PLDs built here, with every mass computed to a few ulps (so their float error
is proven, ``_pld_error``): randomized response for (eps, delta)-DP, the Laplace mechanism, the
pair that dominates every eps-bounded-range selection, and the Gaussian mechanism.

All are *pessimistic* ("privacy buckets", Meiser & Mohammadi 2018): the mass of losses in
(x_{j-1}, x_j] goes to the grid point x_j = j h, so every loss is rounded up and every delta of
every composition can only grow (delta(eps) = E_P[(1 - e^{eps - L})_+] increases with each L).
Each is the loss distribution under P of the worst pair; the pairs are symmetric (the loss under
Q, negated, has the same law), so one side serves both.

* (eps, delta0)-DP, randomized response (Kairouz, Oh, Viswanath 2015): loss +inf w.p. delta0,
  +eps w.p. (1 - delta0) / (1 + e^-eps), -eps w.p. (1 - delta0) / (1 + e^eps).
* Laplace(b) with sensitivity s, eps = s / b: loss +eps w.p. 1/2, -eps w.p. e^-eps / 2, and on
  (-eps, eps) the density e^{-(eps - l)/2} / 4, whose mass on (a, c] is
  e^{-(eps - c)/2} (-expm1(-(c - a)/2)) / 2.
* eps-bounded range (``bounded_range``): survival S(l) = (e^eps - e^{(eps + l)/2}) / expm1(eps)
  on [-eps, eps], so the mass on (a, c] is e^{(eps + a)/2} expm1((c - a)/2) / expm1(eps).
* Gaussian, mu = sensitivity / sigma: L ~ N(mu^2 / 2, mu^2); cell masses are differences of
  normal tails taken on the side of the mean where they are small (each within a few ulps of
  itself), so a cell's error is a few ulps of the larger tail; the sum of those tails is
  accumulated into ``err``.  Mass beyond Z_WIDTH standard deviations: below goes to the first
  point (rounded up), above to +inf.
"""
from __future__ import annotations

import math

import numpy as np

from . import _pld_grid as grid
from ._pld_error import U, ceil_index


def _cells(lo_loss: float, hi_loss: float, h: float):
    """Grid indices j0..j1 covering (lo_loss, hi_loss], and each cell's (a, c] clipped to it,
    with c placed at or below the real j h (so no mass goes to a point below it)."""
    j0, j1 = ceil_index(lo_loss, h), ceil_index(hi_loss, h)
    j = np.arange(j0, j1 + 1)
    top = j * h
    top = np.where(top > 0, top * (1 - 2 * U), top * (1 + 2 * U))
    c = np.minimum(hi_loss, top)
    a = np.concatenate(([lo_loss], c[:-1]))
    return j0, a, c


def rr(eps: float, delta0: float, base: float) -> grid.GridPmf:
    """Randomized response of (eps, delta0)-DP on the grid base 2^k chosen for width 2 eps."""
    k = grid.interval_exponent(2.0 * eps, base)
    h = math.ldexp(base, k)
    lo, hi = ceil_index(-eps, h), ceil_index(eps, h)
    probs = np.zeros(hi - lo + 1)
    keep = 1.0 - delta0
    probs[-1] += keep / (1.0 + math.exp(-eps))
    probs[0] += keep / (1.0 + math.exp(eps))
    return grid.GridPmf(base, k, lo, probs, float(delta0), 16 * U)


def laplace(eps: float, base: float) -> grid.GridPmf:
    """The Laplace mechanism with eps = sensitivity / scale."""
    k = grid.interval_exponent(2.0 * eps, base)
    h = math.ldexp(base, k)
    j0, a, c = _cells(-eps, eps, h)
    with np.errstate(under="ignore"):
        probs = 0.5 * np.exp(-(eps - c) / 2) * -np.expm1(-(c - a) / 2)
    probs[0] += 0.5 * math.exp(-eps)
    probs[-1] += 0.5
    return grid.GridPmf(base, k, j0, probs, 0.0, 16 * U * float(np.sum(probs)) + 16 * U)


def bounded_range(eps: float, base: float) -> grid.GridPmf:
    """The pair that dominates every eps-bounded-range selection (``bounded_range``)."""
    k = grid.interval_exponent(2.0 * eps, base)
    h = math.ldexp(base, k)
    j0, a, c = _cells(-eps, eps, h)
    probs = np.exp((eps + a) / 2) * np.expm1((c - a) / 2) / math.expm1(eps)
    return grid.GridPmf(base, k, j0, probs, 0.0, 16 * U * float(np.sum(probs)) + 16 * U)


def gaussian(mu: float, base: float) -> grid.GridPmf:
    """The mu-Gaussian mechanism (loss N(mu^2/2, mu^2) under P), pessimistically rounded."""
    from scipy.special import ndtr

    mean, z = mu * mu / 2, grid.Z_WIDTH
    lo_loss, hi_loss = mean - z * mu, mean + z * mu
    k = grid.interval_exponent(hi_loss - lo_loss, base)
    h = math.ldexp(base, k)
    j0, a, c = _cells(lo_loss, hi_loss, h)
    za, zc = (a - mean) / mu, (c - mean) / mu
    # below the mean: Phi(zc) - Phi(za); above: Phi(-za) - Phi(-zc); both small-tail differences
    below = zc <= 0
    probs = np.where(below, ndtr(zc) - ndtr(za), ndtr(-za) - ndtr(-zc))
    probs = np.maximum(probs, 0.0)
    tails = np.where(below, ndtr(zc), ndtr(-za))
    probs[0] += float(ndtr(-z))                      # losses below the range: rounded up
    inf = float(ndtr(-z)) * (1 + 8 * U)              # losses above it: to +inf
    # each tail value within 8 ulps of itself (scipy's ndtr), the z's within a few ulps of
    # (l - mean) / mu, whose effect on a tail is at most |z| + 1 times as many ulps (Mills)
    slack = 16 * U * (z + 2.0) * (z + 2.0)
    err = slack * (2.0 * float(np.sum(tails)) + 1.0)
    return grid.GridPmf(base, k, j0, probs, inf, err)
