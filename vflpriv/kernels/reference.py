"""Pure-numpy reference of every kernel in :mod:`vflpriv.kernels`.

Same signatures, same argument checks and the *same random words* as the compiled kernels in
``_ext/noisy_argmax.pyx`` and ``_ext/sketch.pyx``: from the same Generator state (noisy argmax) or
the same seed (sketches) both paths compute the same numbers, up to the last-bit differences
between numpy's and the C library's ``log``/``sin``/``cos`` and the order of floating-point sums.
Used when the extension is not built, when ``VFLPRIV_FORCE_REFERENCE=1``, and by the tests.

Noisy argmax materializes the noise vector (d draws, then one ``argmax``): that is exactly the cost
the compiled kernel avoids.  The sketches regenerate the needed columns of J from the counter-based
stream in blocks, so they never hold more than m x (block or column nonzeros) entries of J.
"""
from __future__ import annotations

import numpy as np

from ._common import (GOLD, NOISES, check_columns, check_csc, check_kind, check_m, check_n,
                      check_noise, check_rng, check_rows, check_scale, check_scores, csc_row_check,
                      nonfinite_error, sketch_key)

TWO_M53 = 2.0 ** -53
_BLOCK = 2048  # rows of J generated at once by the whole-matrix paths (m * 2048 doubles)

__all__ = ["noisy_argmax", "signed_noisy_argmax", "sketch_columns", "sketch_matrix",
           "sketch_column_norms", "sketch_operator", "gaussian_block", "countsketch_cells",
           "noise_from_words"]


# ---------------------------------------------------------------------------------- noisy argmax
def noise_from_words(words: np.ndarray, noise: str, scale: float) -> np.ndarray:
    """Noise from 64-bit words, by the inverse CDFs documented in ``_ext/noisy_argmax.pyx``.

    U = ((w >> 11) + 0.5) 2^-53 lies in [2^-54, 1 - 2^-54], so no log sees 0:
    laplace Z = scale log(2U) (U < 1/2) or -scale log(2(1-U)); gumbel Z = -scale log(-log U);
    exponential Z = -scale log U.
    """
    code = check_noise(noise)
    u = ((words >> np.uint64(11)).astype(np.float64) + 0.5) * TWO_M53
    if code == NOISES["laplace"]:
        low = u < 0.5
        logs = np.log(np.where(low, 2.0 * u, 2.0 * (1.0 - u)))
        return np.where(low, scale * logs, (-scale) * logs)
    if code == NOISES["gumbel"]:
        return (-scale) * np.log(-np.log(u))
    return (-scale) * np.log(u)


def _words(rng: np.random.Generator, count: int) -> np.ndarray:
    # Full-range integers are the bit generator's next_uint64 outputs, the very words the compiled
    # kernel reads through the C-API; the Generator ends in the same state on both paths.
    return rng.integers(0, 2**64, size=count, dtype=np.uint64)


def noisy_argmax(scores, noise, scale, rng) -> int:
    """argmax_i (scores_i + Z_i), Z_i iid laplace / gumbel / exponential(scale); see
    :func:`vflpriv.kernels.noisy_argmax`."""
    s = check_scores(scores)
    scale, rng = check_scale(scale), check_rng(rng)
    check_noise(noise)
    finite = np.isfinite(s)
    if not finite.all():
        raise nonfinite_error(s, int(np.argmin(finite)))
    z = noise_from_words(_words(rng, s.shape[0]), noise, scale)
    return int(np.argmax(s.astype(np.float64) + z))


def signed_noisy_argmax(scores, noise, scale, rng) -> tuple[int, int]:
    """argmax over the interleaved candidates +s_0, -s_0, +s_1, ... ; see
    :func:`vflpriv.kernels.signed_noisy_argmax`."""
    s = check_scores(scores)
    scale, rng = check_scale(scale), check_rng(rng)
    check_noise(noise)
    finite = np.isfinite(s)
    if not finite.all():
        raise nonfinite_error(s, int(np.argmin(finite)))
    d = s.shape[0]
    cand = np.empty(2 * d, dtype=np.float64)
    cand[0::2] = s
    cand[1::2] = -s.astype(np.float64)
    k = int(np.argmax(cand + noise_from_words(_words(rng, 2 * d), noise, scale)))
    return k // 2, (1 if k % 2 == 0 else -1)


# -------------------------------------------------------------------------------------- sketches
def _mix(z: np.ndarray) -> np.ndarray:
    """SplitMix64 finalizer on uint64 arrays (wrapping arithmetic, as in C)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _column_base(key: int, rows: np.ndarray) -> np.ndarray:
    return _mix(np.uint64(key) ^ _mix(rows.astype(np.uint64) + np.uint64(GOLD)))


def gaussian_block(rows, m: int, key: int) -> np.ndarray:
    """J[:, rows] of the gaussian sketch with stream root ``key`` (m x len(rows), float64).

    Box-Muller on the counter-based words: r = sqrt(-2 log(u1) / m), J[2p] = r cos(2 pi u2),
    J[2p+1] = r sin(2 pi u2), with u1 in (0, 1) and u2 in [0, 1) (see ``_ext/sketch.pyx``).
    """
    rows = np.asarray(rows, dtype=np.int64)
    pairs = (m + 1) // 2
    base = _column_base(key, rows)
    steps = np.arange(1, 2 * pairs + 1, dtype=np.uint64) * np.uint64(GOLD)
    words = _mix(base[None, :] + steps[:, None])
    u1 = ((words[0::2] >> np.uint64(11)).astype(np.float64) + 0.5) * TWO_M53
    u2 = (words[1::2] >> np.uint64(11)).astype(np.float64) * TWO_M53
    rad = np.sqrt(-2.0 * np.log(u1) / m)
    t = 2.0 * np.pi * u2
    J = np.empty((2 * pairs, rows.shape[0]), dtype=np.float64)
    J[0::2] = rad * np.cos(t)
    J[1::2] = rad * np.sin(t)
    return J[:m]


def countsketch_cells(rows, m: int, key: int) -> tuple[np.ndarray, np.ndarray]:
    """(bucket h(i), sign s(i)) of the countsketch for each i in ``rows``."""
    w = _column_base(key, np.asarray(rows, dtype=np.int64))
    bucket = (((w >> np.uint64(32)) * np.uint64(m)) >> np.uint64(32)).astype(np.int64)
    sign = np.where((w & np.uint64(1)) == 0, 1.0, -1.0)
    return bucket, sign


def sketch_operator(n, m, seed, kind="gaussian") -> np.ndarray:
    """The explicit m x n matrix J (dense), rebuilt from the seed: what every kernel applies."""
    n, m = check_n(n), check_m(m)
    check_kind(kind)
    key = sketch_key(seed, kind)
    if kind == "gaussian":
        return gaussian_block(np.arange(n), m, key)
    J = np.zeros((m, n))
    bucket, sign = countsketch_cells(np.arange(n), m, key)
    J[bucket, np.arange(n)] = sign
    return J


def sketch_columns(A_csc, columns, m, seed, kind="gaussian") -> np.ndarray:
    """J @ A[:, columns], one column at a time; see :func:`vflpriv.kernels.sketch_columns`."""
    A = check_csc(A_csc)
    cols = check_columns(columns, A.shape[1])
    m = check_m(m)
    check_kind(kind)
    key = sketch_key(seed, kind)
    n = A.shape[0]
    out = np.zeros((m, cols.shape[0]), order="F")
    for c, j in enumerate(cols):
        lo, hi = A.indptr[j], A.indptr[j + 1]
        rows = A.indices[lo:hi]
        if rows.size and (rows.min() < 0 or rows.max() >= n):
            csc_row_check(A, int(rows.max()) if rows.max() >= n else n)
        vals = A.data[lo:hi].astype(np.float64)
        if kind == "gaussian":
            out[:, c] = gaussian_block(rows, m, key) @ vals
        else:
            bucket, sign = countsketch_cells(rows, m, key)
            out[:, c] = np.bincount(bucket, weights=sign * vals, minlength=m)
    return out


def sketch_matrix(A, m, seed, kind="gaussian") -> np.ndarray:
    """J @ A for the whole matrix; see :func:`vflpriv.kernels.sketch_matrix`.

    gaussian: J is regenerated in blocks of ``_BLOCK`` nonempty rows of A and multiplied into the
    result; countsketch: J is built as an n-nonzero sparse matrix (as scipy does) and multiplied.
    """
    import scipy.sparse as sp

    A = check_csc(A).tocsr()
    m = check_m(m)
    check_kind(kind)
    key = sketch_key(seed, kind)
    n, ncols = A.shape
    if kind == "countsketch":
        bucket, sign = countsketch_cells(np.arange(n), m, key)
        S = sp.csr_array((sign, (bucket, np.arange(n))), shape=(m, n))
        return np.asfortranarray((S @ A).toarray())
    out = np.zeros((m, ncols), order="F")
    nonempty = np.flatnonzero(np.diff(A.indptr))
    for start in range(0, nonempty.shape[0], _BLOCK):
        rows = nonempty[start:start + _BLOCK]
        out += (A[rows].T @ gaussian_block(rows, m, key).T).T
    return out


def sketch_column_norms(n, m, seed, kind="gaussian", columns=None) -> np.ndarray:
    """||J[:, i]||_2 for i in ``columns`` (default all n); see
    :func:`vflpriv.kernels.sketch_column_norms`."""
    n, m = check_n(n), check_m(m)
    check_kind(kind)
    rows = check_rows(columns, n)
    key = sketch_key(seed, kind)
    if kind == "countsketch":
        return np.ones(rows.shape[0])
    out = np.empty(rows.shape[0])
    for start in range(0, rows.shape[0], _BLOCK):
        J = gaussian_block(rows[start:start + _BLOCK], m, key)
        out[start:start + _BLOCK] = np.sqrt(np.einsum("ij,ij->j", J, J))
    return out
