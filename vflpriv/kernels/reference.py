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

TWO_M52 = 2.0 ** -52
_BLOCK = 2048  # rows of J generated at once by the whole-matrix paths (m * 2048 doubles)

__all__ = ["noisy_argmax", "signed_noisy_argmax", "sketch_columns", "sketch_matrix",
           "sketch_column_norms", "sketch_operator", "gaussian_block", "countsketch_cells",
           "noise_from_words"]


# ---------------------------------------------------------------------------------- noisy argmax
def noise_from_words(words: np.ndarray, noise: str, scale: float) -> np.ndarray:
    """Noise from 64-bit words, by the inverse CDFs documented in ``_ext/noisy_argmax.pyx``.

    U = ((w >> 12) + 0.5) 2^-52 lies in [2^-53, 1 - 2^-53] (exactly), so no log sees 0:
    laplace Z = scale log(2U) (U < 1/2) or -scale log(2(1-U)); gumbel Z = -scale log(-log U);
    exponential Z = -scale log U.
    """
    code = check_noise(noise)
    u = ((words >> np.uint64(12)).astype(np.float64) + 0.5) * TWO_M52
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


def _checked(scores, noise, scale, rng):
    """The arguments of a noisy argmax, validated: (finite scores, scale, generator)."""
    s = check_scores(scores)
    scale, rng = check_scale(scale), check_rng(rng)
    check_noise(noise)
    finite = np.isfinite(s)
    if not finite.all():
        raise nonfinite_error(s, int(np.argmin(finite)))
    return s, scale, rng


def noisy_argmax(scores, noise, scale, rng) -> int:
    """argmax_i (scores_i + Z_i), Z_i iid laplace / gumbel / exponential(scale); see
    :func:`vflpriv.kernels.noisy_argmax`."""
    s, scale, rng = _checked(scores, noise, scale, rng)
    z = noise_from_words(_words(rng, s.shape[0]), noise, scale)
    return int(np.argmax(s.astype(np.float64) + z))


def signed_noisy_argmax(scores, noise, scale, rng) -> tuple[int, int]:
    """argmax over the interleaved candidates +s_0, -s_0, +s_1, ... ; see
    :func:`vflpriv.kernels.signed_noisy_argmax`."""
    s, scale, rng = _checked(scores, noise, scale, rng)
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


# Wichura's AS 241 (PPND16) coefficients, highest degree first (for np.polyval-like Horner).
_AS241 = {
    "a": (2.5090809287301226727e+3, 3.3430575583588128105e+4, 6.7265770927008700853e+4,
          4.5921953931549871457e+4, 1.3731693765509461125e+4, 1.9715909503065514427e+3,
          1.3314166789178437745e+2, 3.3871328727963666080e0),
    "b": (5.2264952788528545610e+3, 2.8729085735721942674e+4, 3.9307895800092710610e+4,
          2.1213794301586595867e+4, 5.3941960214247511077e+3, 6.8718700749205790830e+2,
          4.2313330701600911252e+1, 1.0),
    "c": (7.74545014278341407640e-4, 2.27238449892691845833e-2, 2.41780725177450611770e-1,
          1.27045825245236838258e0, 3.64784832476320460504e0, 5.76949722146069140550e0,
          4.63033784615654529590e0, 1.42343711074968357734e0),
    "d": (1.05075007164441684324e-9, 5.47593808499534494600e-4, 1.51986665636164571966e-2,
          1.48103976427480074590e-1, 6.89767334985100004550e-1, 1.67638483018380384940e0,
          2.05319162663775882187e0, 1.0),
    "e": (2.01033439929228813265e-7, 2.71155556874348757815e-5, 1.24266094738807843860e-3,
          2.65321895265761230930e-2, 2.96560571828504891230e-1, 1.78482653991729133580e0,
          5.46378491116411436990e0, 6.65790464350110377720e0),
    "f": (2.04426310338993978564e-15, 1.42151175831644588870e-7, 1.84631831751005468180e-5,
          7.86869131145613259100e-4, 1.48753612908506148525e-2, 1.36929880922735805310e-1,
          5.99832206555887937690e-1, 1.0),
}


def _horner(coefs, r):
    acc = coefs[0] * r + coefs[1]
    for c in coefs[2:]:
        acc = acc * r + c
    return acc


def ndtri_as241(p: np.ndarray) -> np.ndarray:
    """Phi^{-1}(p) by Wichura's AS 241 (PPND16), the same operations as ``_ext/sketch.pyx``."""
    p = np.asarray(p, dtype=np.float64)
    q = p - 0.5
    out = np.empty_like(p)
    central = np.abs(q) <= 0.425
    qc = q[central]
    r = 0.180625 - qc * qc
    out[central] = qc * _horner(_AS241["a"], r) / _horner(_AS241["b"], r)
    tail = ~central
    qt, pt = q[tail], p[tail]
    r = np.sqrt(-np.log(np.where(qt < 0.0, pt, 1.0 - pt)))
    near = r <= 5.0
    val = np.empty_like(r)
    rn = r[near] - 1.6
    val[near] = _horner(_AS241["c"], rn) / _horner(_AS241["d"], rn)
    rf = r[~near] - 5.0
    val[~near] = _horner(_AS241["e"], rf) / _horner(_AS241["f"], rf)
    out[tail] = np.where(qt < 0.0, -val, val)
    return out


def gaussian_block(rows, m: int, key: int) -> np.ndarray:
    """J[:, rows] of the gaussian sketch with stream root ``key`` (m x len(rows), float64).

    J[r, i] = Phi^{-1}(u) / sqrt(m), u = ((w >> 12) + 1/2) 2^-52, w = mix(c_i + (r + 1) G), with
    Phi^{-1} by AS 241 (see ``_ext/sketch.pyx``).
    """
    rows = np.asarray(rows, dtype=np.int64)
    base = _column_base(key, rows)
    steps = np.arange(1, m + 1, dtype=np.uint64) * np.uint64(GOLD)
    words = _mix(base[None, :] + steps[:, None])
    u = ((words >> np.uint64(12)).astype(np.float64) + 0.5) * TWO_M52
    return ndtri_as241(u) * (1.0 / np.sqrt(float(m)))


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


def sketch_matrix(A, m, seed, kind="gaussian", sparse_output=False):
    """J @ A for the whole matrix; see :func:`vflpriv.kernels.sketch_matrix`.

    gaussian: J is regenerated in blocks of ``_BLOCK`` nonempty rows of A and multiplied into the
    result; countsketch: J is built as an n-nonzero sparse matrix (as scipy does) and multiplied.
    """
    import scipy.sparse as sp

    A = check_csc(A).tocsr()
    if sparse_output and kind != "countsketch":
        raise ValueError(f"sparse_output=True is only for kind='countsketch' (J @ A is dense for "
                         f"kind={kind!r})")
    m = check_m(m)
    check_kind(kind)
    key = sketch_key(seed, kind)
    n, ncols = A.shape
    if kind == "countsketch":
        bucket, sign = countsketch_cells(np.arange(n), m, key)
        S = sp.csr_array((sign, (bucket, np.arange(n))), shape=(m, n))
        return sp.csc_array(S @ A) if sparse_output else np.asfortranarray((S @ A).toarray())
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
