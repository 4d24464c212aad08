"""Argument checks and seed derivation shared by the compiled kernels and the numpy reference.

Both paths validate through the same functions, so a bad argument gives the same ValueError
(naming the value) whichever path runs.
"""
from __future__ import annotations

import numbers

import numpy as np

from vflpriv.errors import InputError

#: noise name -> the integer code used by ``_ext/noisy_argmax.pyx``
NOISES = {"laplace": 0, "gumbel": 1, "exponential": 2}
#: sketch name -> the integer code used by ``_ext/sketch.pyx``
SKETCHES = {"gaussian": 0, "countsketch": 1}
#: stream tag of each sketch kind, so the same seed gives unrelated gaussian and countsketch J
_TAGS = {"gaussian": 1, "countsketch": 2}

MASK64 = (1 << 64) - 1
GOLD = 0x9E3779B97F4A7C15


def mix64(z: int) -> int:
    """SplitMix64 finalizer on a Python int (Steele, Lea, Flood 2014; Stafford's variant 13)."""
    z &= MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def sketch_key(seed, kind: str) -> int:
    """key = mix(mix(seed) ^ tag): the root of the counter-based stream of sketch ``kind``."""
    return mix64(mix64(check_seed(seed)) ^ _TAGS[kind])


def check_seed(seed) -> int:
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, numbers.Integral):
        raise InputError(f"seed must be an integer in [0, 2**64), got {seed!r}")
    seed = int(seed)
    if not 0 <= seed <= MASK64:
        raise InputError(f"seed must be an integer in [0, 2**64), got {seed!r}")
    return seed


def check_noise(noise) -> int:
    if noise not in NOISES:
        raise InputError(f"noise must be one of {tuple(NOISES)}, got {noise!r}")
    return NOISES[noise]


def check_kind(kind) -> int:
    if kind not in SKETCHES:
        raise InputError(f"kind must be one of {tuple(SKETCHES)}, got {kind!r}")
    return SKETCHES[kind]


def check_scale(scale) -> float:
    try:
        value = float(scale)
    except (TypeError, ValueError):
        raise InputError(f"scale must be a positive finite number, got {scale!r}") from None
    if not (np.isfinite(value) and value > 0.0):
        raise InputError(f"scale must be a positive finite number, got {scale!r}")
    return value


def check_rng(rng) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise InputError(f"rng must be a numpy.random.Generator (e.g. numpy.random.default_rng(seed)), "
                         f"got {rng!r}")
    return rng


def check_scores(scores) -> np.ndarray:
    """1-D float32/float64 view of ``scores`` (no copy for float32/float64 arrays, any stride)."""
    arr = np.asarray(scores)
    if arr.dtype not in (np.float32, np.float64):
        if arr.dtype.kind not in "biuf":
            raise InputError(f"scores must be real numbers, got dtype {arr.dtype}")
        arr = arr.astype(np.float64)
    if arr.ndim != 1:
        raise InputError(f"scores must be a 1-D array, got shape {arr.shape}")
    if arr.shape[0] == 0:
        raise InputError("scores is empty: report-noisy-max needs at least one candidate")
    return arr


def nonfinite_error(scores: np.ndarray, i: int) -> InputError:
    return InputError(f"scores[{i}] = {scores[i]!r} is not finite; report-noisy-max needs finite "
                      "scores (clip them to their declared bounds first)")


def check_m(m) -> int:
    if isinstance(m, (bool, np.bool_)) or not isinstance(m, numbers.Integral) or not 1 <= m < 2**31:
        raise InputError(f"m (the sketch size) must be an integer in [1, 2**31), got {m!r}")
    return int(m)


def check_n(n) -> int:
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, numbers.Integral) or n < 0:
        raise InputError(f"n (the number of rows of A) must be a non-negative integer, got {n!r}")
    return int(n)


def check_csc(A):
    """A as a scipy CSC matrix/array with float32 or float64 data (dense input is converted)."""
    import scipy.sparse as sp

    if not sp.issparse(A):
        arr = np.asarray(A)
        if arr.ndim != 2:
            raise InputError(f"A must be a 2-D matrix, got shape {arr.shape}")
        A = sp.csc_array(arr)
    elif A.format != "csc":
        A = A.tocsc()
    if A.dtype not in (np.float32, np.float64):
        if A.dtype.kind not in "biuf":
            raise InputError(f"A must hold real numbers, got dtype {A.dtype}")
        A = A.astype(np.float64)
    return A


def _check_indices(values, bound: int, expected: str, out_of_range: str) -> np.ndarray:
    """A 1-D int64 array of indices in [0, bound) (a scalar becomes length 1); the messages name
    the bad value.  ``out_of_range`` is formatted with ``index`` and ``bound``."""
    idx = np.asarray(values)
    if idx.ndim == 0:
        idx = idx.reshape(1)
    if idx.size == 0:
        return np.zeros(0, dtype=np.int64)
    if idx.ndim != 1 or idx.dtype.kind not in "iu":
        raise InputError(f"columns must be a 1-D array of {expected}, got {values!r}")
    idx = idx.astype(np.int64)
    bad = (idx < 0) | (idx >= bound)
    if bad.any():
        raise InputError(out_of_range.format(index=int(idx[np.argmax(bad)]), bound=bound))
    return idx


def check_columns(columns, ncols: int) -> np.ndarray:
    return _check_indices(columns, ncols, "column indices",
                          "column index {index} is outside [0, {bound}) "
                          "(A has that many columns)")


def check_rows(rows, n: int) -> np.ndarray:
    if rows is None:
        return np.arange(n, dtype=np.int64)
    return _check_indices(rows, n, "indices into J's n columns",
                          "column index {index} of J is outside [0, {bound})")


def csc_row_check(A, bad: int) -> None:
    if bad >= 0:
        raise InputError(f"A has a row index {bad} outside [0, {A.shape[0]}): the sparse matrix "
                         "is corrupt")
