"""Fast paths of the engine: fused report-noisy-max and seeded sketches of sparse columns.

The kernels are compiled from ``_ext/noisy_argmax.pyx`` and ``_ext/sketch.pyx``.  Every kernel has
a pure-numpy twin in :mod:`vflpriv.kernels.reference` with the same signature, the same checks and
the same random words; it is used when the extension is not built or when the environment variable
``VFLPRIV_FORCE_REFERENCE=1`` is set at import time (the accounting package honours the same name).
:data:`compiled` says which path is in use.

API used by the engine (DP-BCFW-AS, paper 004, Algorithm 2):

* ``noisy_argmax(scores, noise, scale, rng) -> int``
* ``signed_noisy_argmax(scores, noise, scale, rng) -> (index, sign)``
* ``sketch_columns(A_csc, columns, m, seed, kind) -> ndarray (m, len(columns))``
* ``sketch_column_norms(n, m, seed, kind, columns=None) -> ndarray``
* ``sketch_matrix(A, m, seed, kind) -> ndarray (m, A.shape[1])`` (whole-matrix sketch)

Scores and matrix entries may be float32 or float64 (other real dtypes are converted to float64);
all arithmetic is done in float64 and results are float64.
"""
from __future__ import annotations

import os

import numpy as np

from . import reference
from ._common import (NOISES, SKETCHES, check_columns, check_csc, check_kind, check_m, check_n,
                      check_noise, check_rng, check_rows, check_scale, check_scores, csc_row_check,
                      nonfinite_error, sketch_key)

__all__ = ["compiled", "noisy_argmax", "signed_noisy_argmax", "sketch_columns", "sketch_matrix",
           "sketch_column_norms", "max_sketch_column_norm", "NOISES", "SKETCHES", "reference"]

compiled = False
if os.environ.get("VFLPRIV_FORCE_REFERENCE", "") not in ("1", "true", "yes"):
    try:
        from . import _noisy_argmax, _sketch  # type: ignore[attr-defined]
        compiled = True
    except ImportError:  # extension not built: stay correct, only slower
        pass


def noisy_argmax(scores, noise, scale, rng) -> int:
    """Report-noisy-max: argmax_i (scores_i + Z_i) with Z_i iid noise of the given ``scale``.

    ``noise``: ``"laplace"`` (Z ~ Lap(scale); (2D/scale)-DP for scores of sensitivity D, Dwork &
    Roth 2014, Claim 3.9), ``"gumbel"`` (Z ~ Gumbel(0, scale); returns i with probability exactly
    softmax(scores / scale)_i, the exponential mechanism, McSherry & Talwar 2007) or
    ``"exponential"`` (Z ~ Exp(scale); permute-and-flip, Ding et al. 2021).  The privacy event is
    ``accounting.ReportNoisyMax(noise, scale, sensitivity)``; charge it before calling.

    Noise comes from ``rng``'s bit generator, one 64-bit word per candidate, through the inverse
    CDF U -> Z documented in ``_ext/noisy_argmax.pyx`` (U is never 0 or 1, so no log(0)).  The
    compiled path reads ``scores`` once and stores no noise vector; both paths leave ``rng`` in the
    same state and return the same index.  Ties keep the first index.

    ``scores``: 1-D, float32 or float64 (any stride), finite; a NaN or infinite score raises
    ValueError naming its index (on the compiled path the noise of the candidates before it has
    already been drawn).  ``scale`` > 0.  ``rng``: a ``numpy.random.Generator``.
    """
    if not compiled:
        return reference.noisy_argmax(scores, noise, scale, rng)
    s = check_scores(scores)
    k = _noisy_argmax.noisy_argmax(s, check_scale(scale), check_noise(noise), check_rng(rng), False)
    if k < 0:
        raise nonfinite_error(s, -k - 1)
    return int(k)


def signed_noisy_argmax(scores, noise, scale, rng) -> tuple[int, int]:
    """Report-noisy-max over the 2d signed candidates +scores_i and -scores_i.

    Returns (i, sign) with sign = +1 or -1, the argmax of sign * scores_i + Z over all (i, sign):
    the Frank-Wolfe vertex selection of DP-BCFW-AS (paper 004, Algorithm 2, over the l1 ball the
    vertex is sign * eta * e_i).  Candidates are visited as +s_0, -s_0, +s_1, -s_1, ..., each with
    its own noise word; otherwise as :func:`noisy_argmax` (same noises, same guarantees with the
    2d candidates).
    """
    if not compiled:
        return reference.signed_noisy_argmax(scores, noise, scale, rng)
    s = check_scores(scores)
    k = _noisy_argmax.noisy_argmax(s, check_scale(scale), check_noise(noise), check_rng(rng), True)
    if k < 0:
        raise nonfinite_error(s, -k - 1)
    return int(k // 2), (1 if k % 2 == 0 else -1)


def sketch_columns(A_csc, columns, m, seed, kind="gaussian") -> np.ndarray:
    """Sketch columns of a sparse matrix: ``J @ A[:, columns]`` without materializing J.

    J is the m x n sketch (n = A.shape[0]) regenerated from ``seed`` (an integer in [0, 2**64)):

    * ``"gaussian"``: J_ri ~ N(0, 1/m) iid, each a function of (seed, r, i) alone (a SplitMix64
      counter-based stream and the inverse normal CDF, see ``_ext/sketch.pyx``), so
      E||J a||^2 = ||a||^2 (Johnson-Lindenstrauss; paper 004's sketch).  O(m nnz) time.
    * ``"countsketch"``: J[:, i] = s(i) e_{h(i)}, bucket h(i) in [0, m) and sign s(i) = +-1 hashed
      from (seed, i) (Charikar, Chen, Farach-Colton 2002; Clarkson & Woodruff 2013).  O(nnz) time.

    Any party holding the seed rebuilds the same J (:func:`reference.sketch_operator`), in any
    process.  ``A_csc``: scipy CSC matrix/array (other sparse formats and dense arrays are
    converted, which copies), float32 or float64 data, int32 or int64 indices.  Returns a float64
    Fortran-ordered array of shape (m, len(columns)); memory is O(m * len(columns)) whatever n.
    """
    A = check_csc(A_csc)
    if not compiled:
        return reference.sketch_columns(A, columns, m, seed, kind)
    cols = check_columns(columns, A.shape[1])
    m = check_m(m)
    code = check_kind(kind)
    key = sketch_key(seed, kind)
    out = np.zeros((m, cols.shape[0]), order="F")
    indices, indptr = _same_index_dtype(A)
    bad = _sketch.sketch_columns(A.data, indices, indptr, A.shape[0], cols, m, key, code, out)
    csc_row_check(A, bad)
    return out


def sketch_matrix(A, m, seed, kind="gaussian", sparse_output=False):
    """``J @ A`` for a whole sparse matrix (same J as :func:`sketch_columns`).

    gaussian: converts A to CSR (one copy) and generates each column of J once per nonempty row
    of A: O(m * rows) generation + O(m * nnz) multiply-adds.  countsketch: O(nnz).
    Returns a float64 array of shape (m, A.shape[1]); with ``sparse_output=True`` (countsketch
    only, whose result has at most nnz(A) nonzeros) a scipy CSC array, as scipy's
    ``clarkson_woodruff_transform`` returns for sparse input.
    """
    A = check_csc(A)
    if sparse_output and kind != "countsketch":
        raise ValueError(f"sparse_output=True is only for kind='countsketch' (J @ A is dense for "
                         f"kind={kind!r})")
    if not compiled:
        return reference.sketch_matrix(A, m, seed, kind, sparse_output)
    if sparse_output:
        import scipy.sparse as sp

        m = check_m(m)
        key = sketch_key(seed, kind)
        indices, indptr = _same_index_dtype(A)
        nnz = int(indptr[-1]) if indptr.shape[0] else 0
        out_data, out_indices = np.empty(nnz), np.empty(nnz, dtype=np.int64)
        out_indptr = np.zeros(A.shape[1] + 1, dtype=np.int64)
        n = A.shape[0]
        btab, stab = np.empty(n if nnz > n else 0, np.int64), np.empty(n if nnz > n else 0)
        if nnz > n:  # hash each row once (O(n) memory, like scipy's explicit sparse S)
            _sketch.countsketch_cells(np.arange(n, dtype=np.int64), m, key, btab, stab)
        pos, bad = _sketch.countsketch_csc(A.data, indices, indptr, n, m, key, out_data,
                                           out_indices, out_indptr, np.full(m, -1, np.int64),
                                           btab, stab)
        csc_row_check(A, bad)
        return sp.csc_array((out_data[:pos], out_indices[:pos], out_indptr), shape=(m, A.shape[1]))
    if kind == "countsketch":  # O(nnz) column by column; each result column stays in cache
        return sketch_columns(A, np.arange(A.shape[1]), m, seed, kind)
    m = check_m(m)
    code = check_kind(kind)
    key = sketch_key(seed, kind)
    R = A.tocsr()
    out = np.zeros((A.shape[1], m))
    indices, indptr = _same_index_dtype(R)
    bad = _sketch.sketch_rows(R.data, indices, indptr, A.shape[1], m, key, code, out)
    if bad >= 0:
        raise ValueError(f"A has a column index {bad} outside [0, {A.shape[1]}): the sparse "
                         "matrix is corrupt")
    return out.T


def sketch_column_norms(n, m, seed, kind="gaussian", columns=None) -> np.ndarray:
    """||J[:, i]||_2 for each i in ``columns`` (default: all n columns of J, i.e. rows of A).

    Computed exactly from the seed (the very entries the sketch applies, summed in float64).
    These give the sensitivity of a_hat = J a: changing row i of a by delta moves a_hat by
    |delta| ||J[:, i]||, so the L2 sensitivity under a one-row change bounded by B is
    B * max_i ||J[:, i]|| (see :func:`max_sketch_column_norm`).  Countsketch columns have norm 1
    exactly.  O(m n) time, O(m + n) memory.
    """
    if not compiled:
        return reference.sketch_column_norms(n, m, seed, kind, columns)
    n, m = check_n(n), check_m(m)
    check_kind(kind)
    rows = check_rows(columns, n)
    key = sketch_key(seed, kind)
    if kind == "countsketch":
        return np.ones(rows.shape[0])
    out = np.empty(rows.shape[0])
    _sketch.column_norms(rows, m, key, out)
    return out


def max_sketch_column_norm(n, m, seed, kind="gaussian") -> float:
    """max_i ||J[:, i]||_2 over the n columns of J (public: depends on the seed only)."""
    norms = sketch_column_norms(n, m, seed, kind)
    if norms.shape[0] == 0:
        raise ValueError("n = 0: J has no columns")
    return float(norms.max())


def _same_index_dtype(A):
    # The compiled kernels take indices and indptr of one integer type; scipy may mix them.
    if A.indices.dtype == A.indptr.dtype and A.indices.dtype in (np.int32, np.int64):
        return A.indices, A.indptr
    return A.indices.astype(np.int64), A.indptr.astype(np.int64)
