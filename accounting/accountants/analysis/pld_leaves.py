"""Single-release PLDs built here, with every mass computed to a few ulps of itself (so their
float error is a proven relative bound, ``analysis.pld_error``): randomized response for (eps, delta)-DP,
the Laplace mechanism, the pair that dominates every eps-bounded-range selection, and the Gaussian
mechanism.  Each is the loss distribution under P of the worst pair; the pairs are symmetric (the
loss under Q, negated, has the same law), so one side serves both.

* (eps, delta0)-DP, randomized response (Kairouz, Oh, Viswanath 2015): loss +inf w.p. delta0,
  +eps w.p. (1 - delta0) / (1 + e^-eps), -eps w.p. (1 - delta0) / (1 + e^eps).
* Laplace(b) with sensitivity s, eps = s / b: loss +eps w.p. 1/2, -eps w.p. e^-eps / 2, and on
  (-eps, eps) the density e^{-eps/2} e^{l/2} / 4.
* eps-bounded range (``bounded_range``): survival S(l) = (e^eps - e^{(eps + l)/2}) / expm1(eps)
  on [-eps, eps], i.e. the density e^{eps/2} e^{l/2} / (2 expm1(eps)), no atoms.
* Gaussian, mu = sensitivity / sigma: L ~ N(mu^2 / 2, mu^2).

The first three are put on the grid by **connect the dots** (Doroshenko, Ghazi, Kamath, Kumar,
Manurangsi 2022): a loss l = g + t between grid points g and g + h sends the share
w = (1 - e^-t) / (1 - e^-h) of its mass up to g + h and the rest down to g, which keeps the mass
and E_P[e^-L]; delta(eps) = E_P[(1 - e^eps e^-L)_+] is convex in e^-L, so this mean-preserving
spread can only raise every delta of every composition (Jensen).  Rounding every loss *up*
instead would add about n h / 2 to an n-fold composition (0.3 for 1e11 releases of 1e-9-DP);
connect the dots adds only a spread of order h per release.  For a density C e^{l/2} on a cell
[g + ta, g + tc] the two shares integrate in closed form with positive factors only:

    up   = 8 C e^{g/2} sinh((ta + tc)/4) sinh((tc - ta)/4) / (1 - e^-h),
    down = 8 C e^{(g - h)/2} sinh((2h - ta - tc)/4) sinh((tc - ta)/4) / (1 - e^-h),

and the offsets t of the atoms +-eps from the grid are computed exactly (rational arithmetic on
the doubles), so each mass is within a few ulps of itself.  The Gaussian keeps "privacy buckets"
(each loss rounded up, Meiser & Mohammadi 2018): it is one release after the exact merge of all
Gaussians, so its drift of one interval does not add up; cell masses are differences of normal
tails taken on the side of the mean where they are small, and their error, a few ulps of the
larger tail, is stated relative to each cell's mass (about 1e-9).
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from . import pld_grid as grid
from .pld_error import U, ceil_index

#: relative error of one connect-the-dots mass: a handful of 1-ulp library operations (exp,
#: expm1, sinh, products), at most four terms summed into one grid point, and e^{g/2} at a grid
#: point g = j h computed within |g| / 2 ulps (|g| <= 2 MAX_PURE_EPSILON = 100): 128 ulps covers it
REL = 128 * U


def _grid(eps: float, base: float):
    """(k, h) for a release whose losses span [-eps, eps]."""
    k = grid.interval_exponent(2.0 * eps, base)
    return k, math.ldexp(base, k)


def _offset(loss: float, h: float):
    """(j, t, h - t) with loss = j h + t, 0 <= t < h, t and h - t computed exactly then rounded."""
    fl, fh = Fraction(loss), Fraction(h)
    j = math.floor(fl / fh)
    t = fl - j * fh
    return j, float(t), float(fh - t)


def _split_atom(probs: np.ndarray, start: int, loss: float, mass: float, h: float) -> None:
    """Connect the dots for an atom: add its two shares to ``probs`` (index 0 is grid ``start``)."""
    j, t, rest = _offset(loss, h)
    if t == 0.0:
        probs[j - start] += mass
        return
    den = -math.expm1(-h)
    probs[j - start + 1] += mass * -math.expm1(-t) / den
    probs[j - start] += mass * math.exp(-t) * -math.expm1(-rest) / den


def _density_cells(probs: np.ndarray, start: int, eps: float, h: float, c: float) -> None:
    """Connect the dots for the density c e^{l/2} on (-eps, eps)."""
    j_lo, t_lo, _ = _offset(-eps, h)
    j_hi, t_hi, _ = _offset(eps, h)
    j = np.arange(j_lo, j_hi + 1)
    ta = np.zeros(j.size)
    tc = np.full(j.size, h)
    ta[0] = t_lo
    tc[-1] = t_hi if t_hi > 0 else 0.0
    if t_hi == 0.0:            # eps on a grid point: the last cell is empty
        tc[-1] = 0.0
    width = np.maximum(tc - ta, 0.0)
    den = -math.expm1(-h)
    g = j * h
    with np.errstate(under="ignore"):
        common = 8.0 * c * np.sinh(width / 4) / den
        up = common * np.exp(g / 2) * np.sinh((ta + tc) / 4)
        down = common * np.exp((g - h) / 2) * np.sinh((2 * h - ta - tc) / 4)
    np.add.at(probs, j - start + 1, up)
    np.add.at(probs, j - start, down)


def _frame(eps: float, h: float):
    start = _offset(-eps, h)[0]
    stop = _offset(eps, h)[0] + 1
    return start, np.zeros(stop - start + 1)


def rr(eps: float, delta0: float, base: float) -> grid.GridPmf:
    """Randomized response of (eps, delta0)-DP on the grid base 2^k chosen for width 2 eps."""
    k, h = _grid(eps, base)
    start, probs = _frame(eps, h)
    keep = 1.0 - delta0
    _split_atom(probs, start, eps, keep / (1.0 + math.exp(-eps)), h)
    _split_atom(probs, start, -eps, keep / (1.0 + math.exp(eps)), h)
    return grid._trim(grid.GridPmf(base, k, start, probs, float(delta0), 0.0, REL))


def laplace(eps: float, base: float) -> grid.GridPmf:
    """The Laplace mechanism with eps = sensitivity / scale."""
    k, h = _grid(eps, base)
    start, probs = _frame(eps, h)
    _density_cells(probs, start, eps, h, math.exp(-eps / 2) / 4)
    _split_atom(probs, start, eps, 0.5, h)
    _split_atom(probs, start, -eps, 0.5 * math.exp(-eps), h)
    return grid._trim(grid.GridPmf(base, k, start, probs, 0.0, 0.0, REL))


def bounded_range(eps: float, base: float) -> grid.GridPmf:
    """The pair that dominates every eps-bounded-range selection (``bounded_range``)."""
    k, h = _grid(eps, base)
    start, probs = _frame(eps, h)
    _density_cells(probs, start, eps, h, math.exp(eps / 2) / (2 * math.expm1(eps)))
    return grid._trim(grid.GridPmf(base, k, start, probs, 0.0, 0.0, REL))


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
    # a cell's error is at most 2 slack(z) times the larger tail at its ends, slack(z) the bound
    # above at the cell's own |z|: relative to the cell's mass, 2 slack(z) tail / mass (a few
    # 1e-10 at an interval of 1e-4 mu)
    zmax = np.maximum(np.abs(za), np.abs(zc))
    cell_slack = 16 * U * (zmax + 2.0) * (zmax + 2.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(probs > 0, tails / probs, np.inf)
    rel = float(np.max(2.0 * cell_slack * ratio)) if probs.size else 0.0
    if not rel < 0.5:                       # a cell too thin to bound relatively: absolute
        return grid.GridPmf(base, k, j0, probs, inf, slack * (2.0 * float(np.sum(tails)) + 1.0))
    return grid.GridPmf(base, k, j0, probs, inf, 0.0, rel * (1 + 8 * U))
