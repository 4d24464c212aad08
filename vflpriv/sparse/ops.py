"""Sparse primitives shared by every algorithm: hard thresholding, top-k selection, l2-ball, metrics.

Decisions where the papers are silent (notes P000-6, section 0):

* **Ties**: among entries of equal magnitude the lower index wins.  The rule is implemented by a
  threshold (the k-th largest magnitude, ``np.partition``) and a cumulative count of the entries
  equal to it, so it is deterministic and vectorized over rows.
* **Fewer than tau nonzeros**: :func:`hard_threshold` keeps the zeros as zeros, so the support is
  smaller than tau (the support of a vector is its nonzeros, nothing is padded).
  :func:`topk_mask` (used where an index *set* of exact size is needed, e.g. FedGradMP's
  ``approx_2tau`` of a gradient) fills the set with the lowest-index zeros.
* No intercept: every coordinate is thresholded (neither paper has one).
"""
from __future__ import annotations

import numpy as np


def _topk_dense(a2, k, exact):
    rows, d = a2.shape
    thr = np.partition(a2, d - k, axis=1)[:, d - k][:, None]
    gt = a2 > thr
    need = k - gt.sum(axis=1, keepdims=True)
    eq = a2 == thr
    if not exact:
        eq &= thr > 0                  # ties at zero do not matter to H_k: zeros stay zero
        need = np.where(thr > 0, need, 0)
    if (eq.sum(axis=1, keepdims=True) == need).all():    # no tie to break (the usual case)
        return gt | eq
    return gt | (eq & (np.cumsum(eq, axis=1) <= need))


def _topk_rows_sparse(a2, k, exact):
    """The same rule on each row's nonzeros only (rows far sparser than d)."""
    rows, d = a2.shape
    out = np.zeros(a2.shape, dtype=bool)
    for r in range(rows):
        nz = np.flatnonzero(a2[r])
        if nz.shape[0] > k:
            vals = a2[r, nz]
            keep = _topk_dense(vals[None, :], k, exact)[0]
            out[r, nz[keep]] = True
        else:
            out[r, nz] = True
            if exact and nz.shape[0] < k:   # fill with the lowest-index zeros
                need = k - nz.shape[0]
                out[r, np.setdiff1d(np.arange(min(d, k + nz.shape[0])), nz)[:need]] = True
    return out


def topk_mask(a, k: int, exact: bool = True) -> np.ndarray:
    """Boolean mask of the k largest ``|a|`` per row, ties to the lower index.  ``a`` is (d,) or
    (rows, d).  ``exact=True``: exactly ``min(k, d)`` True per row (zeros fill the set, lowest
    index first); ``exact=False``: zeros are never selected (what :func:`hard_threshold` needs)."""
    a = np.abs(np.asarray(a, dtype=float))
    one = a.ndim == 1
    a2 = a[None, :] if one else a
    rows, d = a2.shape
    k = int(k)
    if k >= d:
        out = np.ones_like(a2, dtype=bool) if exact else a2 > 0
    elif k <= 0:
        out = np.zeros_like(a2, dtype=bool)
    elif d >= 4096 and np.count_nonzero(a2) < 0.05 * a2.size:
        out = _topk_rows_sparse(a2, k, exact)
    else:
        out = _topk_dense(a2, k, exact)
    return out[0] if one else out


def hard_threshold(x, k: int) -> np.ndarray:
    """H_k: keep the k entries of largest magnitude (ties to the lower index), zero the rest.
    Row-wise for a 2-D array."""
    x = np.asarray(x, dtype=float)
    return np.where(topk_mask(x, k, exact=False), x, 0.0)


def support(x) -> np.ndarray:
    """Indices of the nonzeros of a vector."""
    return np.flatnonzero(np.asarray(x))


def project_l2_ball(x, radius):
    """Pi_R(x): x if ||x|| <= R else R x / ||x|| (row-wise for 2-D input); ``None`` = no ball."""
    if radius is None:
        return x
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    scale = np.minimum(1.0, radius / np.maximum(norms, 1e-300))
    return x * scale


def support_scores(x, x_true):
    """(precision, recall) of supp(x) against supp(x_true); None when x_true is unknown.
    Precision of an empty support is 1.0 (it claims nothing wrong)."""
    if x_true is None:
        return None, None
    s, t = set(support(x).tolist()), set(support(x_true).tolist())
    hit = len(s & t)
    precision = hit / len(s) if s else 1.0
    recall = hit / len(t) if t else 1.0
    return precision, recall


def relative_error(x, x_true):
    """||x - x#|| / ||x#|| (notes P003-11: undefined, hence None, when x# = 0 or unknown)."""
    if x_true is None:
        return None
    den = float(np.linalg.norm(x_true))
    if den == 0.0:
        return None
    return float(np.linalg.norm(np.asarray(x) - x_true) / den)
