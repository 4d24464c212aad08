"""Bounded-range selections past the adaptive optimum's cost cap: blocks of the exact adaptive
optimum, each replaced by a pair that dominates it, composed as privacy loss distributions.

``bounded_range.adaptive_curve`` computes, from above, the profile W_B(s) of B adaptively composed
eps-BR selections; its cost grows like B^2, so past ``bounded_range.adaptive_cells``' cap (about
1369 selections) it is not computed.  Any mechanism's profile is convex and decreasing in v = e^s,
and a convex decreasing curve with the right limits is the profile of a pair (Zhu, Dong, Wang 2022,
Lemma 21); a pair whose profile is pointwise above a mechanism's dominates it, and dominating
pairs of the steps of an adaptive composition dominate the composition (their Thm 10).  So k
selections are cut into m blocks of B and one of r < B, each block replaced by a dominating
pair, and the pairs composed by the PLD accountant's machinery (``analysis.pld_grid``, with its proven
error bounds).  The answer then grows smoothly with k: at k = B + 1 it is the block's optimum
composed with one selection.

**The pair of one block.**  W is known at the grid points s_i = i h, h = eps / cells, for s >= 0
(upper bounds); for s < 0 the family of eps-BR selections is closed under swapping P and Q (M_t
swapped is M_{eps - t}, and so for adaptive compositions), so W(-s) = 1 - e^-s + e^-s W(s) (the
identity delta_{P,Q}(-s) = 1 - e^-s + e^-s delta_{Q,P}(s)), again an upper bound.  The lower
convex hull C of the points (e^{s_i}, W_i) lies above the true (convex) W.  A loss measure mu on
the grid, mu = sum_i p_i [l = s_i] + eta [l = +inf], has delta_mu(v) = eta + sum_i p_i
(1 - v e^{-s_i})_+, piecewise linear in v with knots at the grid points; p_i = e^{s_i} (slope
change of C at e^{s_i}) reproduces C.  In floating point the p_i are approximate, so eta is then
chosen as the largest shortfall of delta_mu below W_i at the grid points (and at v = 0), each
delta_mu evaluated with a bound on its rounding: delta_mu >= W there, and since W is convex and
delta_mu linear between grid points, everywhere.  Composing with mu in place of the pair's loss law
can only raise every delta (the composed delta is a positive combination of the functions
(1 - e^{e - l})_+, increasing in each loss), so the result is a proven upper bound.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from . import pld_grid as grid
from .pld_error import U
from ..bounded_range import adaptive_cells, adaptive_curve

#: block length: the largest count whose adaptive curve fits the cost cap with at least this many
#: cells per selection (more cells: a tighter block, fewer blocks: less loss from blocking)
BLOCK_CELLS = 4


def block_size(k: int) -> int:
    """Selections per block for k selections past the cap."""
    b = 1
    while adaptive_cells(2 * b) is not None and adaptive_cells(2 * b) >= BLOCK_CELLS and 2 * b < k:
        b *= 2
    lo, hi = b, min(k, 2 * b)
    while hi - lo > 1:                         # largest B with at least BLOCK_CELLS cells
        mid = (lo + hi) // 2
        cells = adaptive_cells(mid)
        if cells is not None and cells >= BLOCK_CELLS:
            lo = mid
        else:
            hi = mid
    return lo


def _lower_hull(x: np.ndarray, y: np.ndarray) -> list[int]:
    """Indices of the lower convex hull of points sorted by x (Andrew's monotone chain)."""
    hull: list[int] = []
    for i in range(x.size):
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            # drop b if it lies on or above the segment a -> i
            if (y[b] - y[a]) * (x[i] - x[a]) >= (y[i] - y[a]) * (x[b] - x[a]):
                hull.pop()
            else:
                break
        hull.append(i)
    return hull


@lru_cache(maxsize=8)
def block_pmf(eps: float, size: int, cells: int) -> grid.GridPmf:
    """A loss measure on the grid (eps / cells) Z whose delta is above the adaptive optimum of
    ``size`` eps-BR selections at every epsilon (module docstring)."""
    s, w = adaptive_curve(eps, size, cells)
    h = eps / cells
    zero = int(np.searchsorted(s, 0.0))
    n = s.size - 1 - zero                       # grid points above 0
    idx = np.arange(-n, n + 1)
    w_pos = np.asarray(w[zero:], dtype=np.float64)
    t = idx[n + 1:] * h
    with np.errstate(under="ignore"):
        w_neg = -np.expm1(-t) + np.exp(-t) * w_pos[1:]
    w_neg = np.minimum(1.0, w_neg * (1 + 4 * U) + 4 * U)
    values = np.concatenate((w_neg[::-1], w_pos))          # W at s = idx h, an upper bound
    losses = idx * h
    v = np.exp(losses)
    # the hull, with the exact left end (v = 0, delta = 1) as its first knot
    xs = np.concatenate(([0.0], v))
    ys = np.concatenate(([1.0], values))
    knots = _lower_hull(xs, ys)
    probs = np.zeros(idx.size)
    slopes = np.diff(ys[knots]) / np.diff(xs[knots])
    slopes = np.append(slopes, 0.0)                         # delta = 0 past the last knot
    for j, knot in enumerate(knots[1:], start=1):
        probs[knot - 1] = max(0.0, xs[knot] * (slopes[j] - slopes[j - 1]))
    # delta_mu at every grid point from the tail sums A_i = sum_{l > s_i} p, B_i = sum p e^-l:
    # delta_mu(v_i) = A_i - v_i B_i, with its rounding bounded by (N + 8) u (A_i + v_i B_i)
    with np.errstate(under="ignore"):
        pe = probs * np.exp(-losses)
    tail_a = np.concatenate((np.cumsum(probs[::-1])[::-1][1:], [0.0]))
    tail_b = np.concatenate((np.cumsum(pe[::-1])[::-1][1:], [0.0]))
    rounding = (idx.size + 16) * U * (tail_a + v * tail_b)
    computed = tail_a - v * tail_b
    # (the curve's values bound W at the real points i h: its recursion runs on grid indices, and
    # its own slack covers the rounding of the exponentials it uses)
    shortfall = values - (computed - rounding)
    total = math.fsum(probs)
    eta = max(0.0, float(np.max(shortfall)), (1.0 - total) + (idx.size + 8) * U)
    eta = eta * (1 + 4 * U) + 1e-300 if eta > 0 else 0.0
    lower = int(idx[0])
    return grid._trim(grid.GridPmf(h, 0, lower, probs, eta, 0.0, 0.0))


def blocks_pmf(eps: float, k: int, points=None) -> grid.GridPmf:
    """The composed measure of k eps-BR selections past the cap: m blocks and a remainder."""
    size = block_size(k)
    cells = adaptive_cells(size)
    m, r = divmod(k, size)
    out = grid.self_compose(block_pmf(eps, size, cells), m, points)
    if r:
        out = grid.convolve(out, block_pmf(eps, r, cells), points or grid.DIRECT_POINTS)
    return out
