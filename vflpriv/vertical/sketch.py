"""Seeded sketches J (m x n) for the private active feature a_hat = J a + xi (paper 004, eq. 16).

J is never shipped: the server broadcasts ``(kind, m, seed)`` in the Setup message and every party
regenerates the same J.  Three kinds:

* ``identity``: J = I_n (m = n).  Exact per-sample predictors; needed by the logistic and smoothed
  hinge losses (docs/vertical.md, "Logistic and smoothed-hinge losses with a sketch").  Column norms 1.
* ``gaussian``: J_ij ~ N(0, 1/m) i.i.d. (the paper's Gaussian sketch, E[J^T J] = I), from the
  counter-based generator of :mod:`vflpriv.kernels` keyed by the seed
  (``kernels.reference.sketch_operator``), rebuilt once per process (m x n floats, the O(m n)
  memory allowed).  Both J a and J^T q (per-sample predictors) use this one explicit J, so they
  are exact adjoints whatever build of the compiled kernels is installed.
* ``countsketch``: column j has one entry s_j in {-1, +1} at row h_j (Charikar et al. 2002;
  E[J^T J] = I).  Column norms exactly 1; O(n) memory.

``column_norms()`` are public (a function of the seed), so the L2 sensitivity of J a to one row of
a is ``2 B_a max_j ||J e_j||`` (docs/sensitivity.md section 2: tighter than the paper's leading
singular value, which ``spectral_norm()`` gives for the paper's closed-form calibration).
"""
from __future__ import annotations

import threading
from functools import lru_cache

import numpy as np

from .. import kernels
from ..errors import InputError
from ..kernels import reference as kref
from ..kernels._common import sketch_key
from .messages import SKETCH_KINDS


@lru_cache(maxsize=4)
def _gaussian(n, m, seed):
    # The very J that vflpriv.kernels.sketch_columns applies (counter-based, keyed by the seed).
    J = kref.sketch_operator(n, m, seed, "gaussian")
    J.setflags(write=False)
    return J


_LAST_JTQ: dict = {}
_JTQ_LOCK = threading.Lock()


@lru_cache(maxsize=4)
def _countsketch(n, m, seed):
    h, s = kref.countsketch_cells(np.arange(n), m, sketch_key(seed, "countsketch"))
    h.setflags(write=False)
    s.setflags(write=False)
    return h, s


class Sketch:
    def __init__(self, kind: str, n: int, m: int | None, seed: int):
        if kind not in SKETCH_KINDS:
            raise InputError(f"sketch must be one of {SKETCH_KINDS}, got {kind!r}")
        if kind == "identity":
            if m not in (None, n):
                raise InputError(f"the identity sketch has m = n = {n}; got sketch dimension {m}")
            m = n
        if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
            raise InputError(f"sketch dimension m must be a positive integer, got {m!r}")
        if m > n:
            raise InputError(f"sketch dimension m (--sketch-dim) must be at most the number of rows n = {n} "
                             f"(a sketch compresses the n rows), got {m!r}")
        self.kind, self.n, self.m, self.seed = kind, int(n), int(m), int(seed)

    # -- party side: J a for the selected columns --------------------------------------------
    def apply_column(self, A, j: int) -> np.ndarray:
        """J a_j for column j of A (CSC), as a dense m-vector."""
        if self.kind == "identity":
            out = np.zeros(self.n)
            lo, hi = A.indptr[j], A.indptr[j + 1]
            out[A.indices[lo:hi]] = A.data[lo:hi]
            return out
        lo, hi = A.indptr[j], A.indptr[j + 1]
        rows, vals = A.indices[lo:hi], A.data[lo:hi]
        if self.kind == "gaussian":
            return _gaussian(self.n, self.m, self.seed)[:, rows] @ vals
        h, s = _countsketch(self.n, self.m, self.seed)
        return np.bincount(h[rows], weights=s[rows] * vals, minlength=self.m).astype(float)

    def transpose_apply(self, q: np.ndarray) -> np.ndarray:
        """J^T q (an n-vector): the per-sample predictor estimate from the aggregate q = J A x."""
        if self.kind == "identity":
            return q
        if self.kind == "gaussian":
            # In-process, all K parties receive the same q in a round (each would compute J^T q
            # in parallel on its own machine); a one-slot memo keeps the simulation from paying
            # it K times.  Equal content -> bitwise equal result, so runs are unaffected.
            key = (self.n, self.m, self.seed)
            with _JTQ_LOCK:      # parties may run in threads (InProcessTransport workers)
                hit = _LAST_JTQ.get(key)
                if hit is not None and np.array_equal(hit[0], q):
                    return hit[1]
                out = _gaussian(self.n, self.m, self.seed).T @ q
                _LAST_JTQ.clear()
                _LAST_JTQ[key] = (q.copy(), out)
                return out
        h, s = _countsketch(self.n, self.m, self.seed)
        return s * q[h]

    # -- public constants ----------------------------------------------------------------------
    def column_norms(self) -> np.ndarray:
        if self.kind == "gaussian":
            return np.linalg.norm(_gaussian(self.n, self.m, self.seed), axis=0)
        return np.ones(self.n)

    def max_column_norm(self) -> float:
        return float(self.column_norms().max())

    def spectral_norm(self) -> float:
        """Leading singular value sigma(J) (used only by the paper's closed forms, eq. 17)."""
        if self.kind == "identity":
            return 1.0
        if self.kind == "gaussian":
            return float(np.linalg.norm(_gaussian(self.n, self.m, self.seed), 2))
        h, _ = _countsketch(self.n, self.m, self.seed)
        # J J^T is diagonal with the bucket sizes: sigma(J) = sqrt(largest bucket).
        return float(np.sqrt(np.bincount(h, minlength=self.m).max()))


def signed_argmax(scores, noise=None, scale=0.0, rng=None):
    """(i, sign) maximizing sign * scores_i (+ noise): the signed vertex of the l1 ball.

    With ``noise`` the compiled report-noisy-max kernel (``vflpriv.kernels.signed_noisy_argmax``);
    without, the exact argmax over the same candidate order (+s_0, -s_0, +s_1, ...; first on ties)
    and no random numbers are drawn, so a non-private run consumes no noise stream.
    """
    if noise is not None and scale > 0:
        return kernels.signed_noisy_argmax(scores, noise, scale, rng)
    i = int(np.argmax(np.abs(scores)))
    return i, (1 if scores[i] >= 0 else -1)
