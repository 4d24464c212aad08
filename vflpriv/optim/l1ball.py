"""The l1 ball and products of l1 balls: exact projection and linear minimization oracle.

Feasible sets:

* one ball   B(eta) = {x in R^d : ||x||_1 <= eta};
* a product  M = B_1(eta_1) x ... x B_K(eta_K), where ``blocks`` is a partition of the coordinates
  [d] into K disjoint index sets P_k (the parties' columns in the vertical setting) and the
  constraint is ||x_{P_k}||_1 <= eta_k for every k.  Paper 004's Algorithm 2 adds one vertex per
  party per iteration, so its iterates live in this product (docs/vertical.md, "Threat model
  and problem").

Projection onto B(eta): Duchi, Shalev-Shwartz, Singer & Chandra (2008), "Efficient projections
onto the l1-ball for learning in high dimensions", Figure 1 (the O(d log d) sort version): with
u = |v| sorted decreasingly and rho = max{j : u_j - (sum_{r<=j} u_r - eta) / j > 0}, the
projection is sign(v) * max(|v| - theta, 0) with theta = (sum_{r<=rho} u_r - eta) / rho.
The projection onto a product of balls is the product of the blockwise projections.

Linear minimization oracle (Jaggi 2013, Section 4.1): argmin_{s in B(eta)} <s, g> is the vertex
-eta * sign(g_j) e_j with j = argmax_j |g_j|; over a product it is that vertex in every block.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import InputError


def _check_radius(eta, name="eta"):
    if isinstance(eta, bool) or not isinstance(eta, (int, float, np.integer, np.floating)):
        raise InputError(f"{name} (l1 radius) must be a number, got {eta!r}")
    eta = float(eta)
    if not (eta >= 0.0 and math.isfinite(eta)):
        raise InputError(f"{name} (l1 radius) must be a finite number >= 0, got {eta!r}")
    return eta


def _check_vector(v, name="v"):
    v = np.asarray(v, dtype=float)
    if v.ndim != 1:
        raise InputError(f"{name} must be a 1-d vector, got shape {v.shape}")
    if not np.all(np.isfinite(v)):
        raise InputError(f"{name} contains non-finite values")
    return v


def check_blocks(blocks, d):
    """Normalize ``blocks`` to a list of int64 index arrays that partition range(d).

    ``None`` means one block holding every coordinate.  Raises InputError naming the problem
    (empty block, index out of range, overlap, coordinate not covered)."""
    d = int(d)
    if blocks is None:
        return [np.arange(d, dtype=np.int64)]
    if isinstance(blocks, dict):
        blocks = list(blocks.values())
    out, seen = [], np.zeros(d, dtype=bool)
    for k, b in enumerate(blocks):
        idx = np.asarray(b)
        if idx.ndim != 1 or idx.size == 0:
            raise InputError(f"block {k} must be a non-empty 1-d list of column indices, got {b!r}")
        if not np.issubdtype(idx.dtype, np.integer):
            raise InputError(f"block {k} must hold integer column indices, got dtype {idx.dtype}")
        idx = idx.astype(np.int64)
        if idx.min() < 0 or idx.max() >= d:
            bad = int(idx[(idx < 0) | (idx >= d)][0])
            raise InputError(f"block {k} has column index {bad} outside [0, {d})")
        vals, counts = np.unique(idx, return_counts=True)
        clash = np.concatenate([idx[seen[idx]], vals[counts > 1]])
        if clash.size:
            raise InputError(f"column {int(clash[0])} appears more than once (block {k})")
        seen[idx] = True
        out.append(idx)
    if not out:
        raise InputError("blocks must hold at least one block")
    if not np.all(seen):
        raise InputError(f"column {int(np.flatnonzero(~seen)[0])} belongs to no block")
    return out


def check_radii(eta, n_blocks):
    """A float array of one radius per block from a scalar or a sequence."""
    if np.ndim(eta) == 0:
        return np.full(n_blocks, _check_radius(eta))
    radii = [_check_radius(e, f"eta[{k}]") for k, e in enumerate(np.asarray(eta).ravel())]
    if len(radii) != n_blocks:
        raise InputError(f"eta has {len(radii)} radii for {n_blocks} blocks")
    return np.asarray(radii, dtype=float)


def project_l1_ball(v, eta=1.0):
    """Euclidean projection of ``v`` onto {x : ||x||_1 <= eta} (Duchi et al. 2008, Fig. 1)."""
    v = _check_vector(v)
    eta = _check_radius(eta)
    return _project(v, eta)


def _project(v, eta):
    a = np.abs(v)
    if a.sum() <= eta:
        return v.copy()
    if eta == 0.0:
        return np.zeros_like(v)
    u = np.sort(a)[::-1]
    css = np.cumsum(u)
    j = np.arange(1, u.size + 1)
    # rho: the last j with u_j > (css_j - eta) / j; the condition holds for j = 1 and is
    # monotone (Duchi et al., Lemma 2), so the last True is the count of True.
    # In floating point an eta below the rounding of css - eta (1e-20 against entries near 1)
    # can leave no True at all: j = 1 is then taken, as in exact arithmetic, and a result that
    # rounding left outside the ball is scaled into it.
    rho = max(int(np.count_nonzero(u * j > css - eta)), 1)
    theta = (css[rho - 1] - eta) / rho
    out = np.sign(v) * np.maximum(a - theta, 0.0)
    s = np.abs(out).sum()
    return out if s <= eta else out * (eta / s)


def project_l1_balls(v, blocks, eta):
    """Projection onto the product of per-block l1 balls (blockwise Duchi projections)."""
    v = _check_vector(v)
    blocks = check_blocks(blocks, v.size)
    radii = check_radii(eta, len(blocks))
    out = np.empty_like(v)
    for idx, r in zip(blocks, radii):
        out[idx] = _project(v[idx], r)
    return out


def lmo_l1_ball(g, eta=1.0):
    """argmin_{||s||_1 <= eta} <s, g>: returns (j, sign) with s = sign * eta * e_j.

    j = argmax |g_j| (the first on ties) and sign = -1 if g_j >= 0 else +1, so
    <s, g> = -eta * ||g||_inf."""
    g = _check_vector(g, "g")
    _check_radius(eta)
    j = int(np.argmax(np.abs(g)))
    return j, (-1.0 if g[j] >= 0 else 1.0)


def lmo_l1_balls(g, blocks, eta):
    """LMO over the product of per-block balls: one vertex per block.

    Returns (coords, signs, radii) arrays of length K: s = sum_k signs[k] radii[k] e_{coords[k]}.
    ``blocks`` must already be normalized with ``check_blocks`` when called in a loop."""
    g = _check_vector(g, "g")
    blocks = check_blocks(blocks, g.size)
    radii = check_radii(eta, len(blocks))
    coords, signs = _lmo_blocks(g, blocks)
    return coords, signs, radii


def _lmo_blocks(g, blocks):
    coords = np.empty(len(blocks), dtype=np.int64)
    signs = np.empty(len(blocks), dtype=float)
    for k, idx in enumerate(blocks):
        gb = g[idx]
        j = int(np.argmax(np.abs(gb)))
        coords[k] = idx[j]
        signs[k] = -1.0 if gb[j] >= 0 else 1.0
    return coords, signs


def fw_gap(x, g, blocks, radii):
    """Frank-Wolfe duality gap <x - s, g> = <x, g> + sum_k eta_k ||g_{P_k}||_inf >= f(x) - f*.

    (Jaggi 2013, Section 2: for convex f and any x in M, the gap upper-bounds the suboptimality.)"""
    return float(x @ g + sum(r * np.max(np.abs(g[idx])) for idx, r in zip(blocks, radii)))
