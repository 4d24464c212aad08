"""Input checks shared by the optimization routines (one clear error naming the bad value)."""
from __future__ import annotations

import math
import numbers

import numpy as np
import scipy.sparse as sp

from ..errors import InputError


def max_abs(A) -> float:
    """max |a_ij| of a dense array or a scipy.sparse matrix (its stored values; 0.0 when empty):
    the bound a non-private run takes from its own data where none is declared."""
    vals = A.data if sp.issparse(A) else np.asarray(A)
    return float(np.max(np.abs(vals))) if np.size(vals) else 0.0


def check_data(A, y):
    """Return (A, y): A as float CSC (if sparse) or a float ndarray, y as a float vector."""
    if sp.issparse(A):
        if A.ndim != 2:
            raise InputError(f"A must be a 2-d matrix, got {A.ndim} dimensions")
        A = sp.csc_matrix(A, dtype=float)
        if not np.all(np.isfinite(A.data)):
            raise InputError("A contains non-finite values (nan or inf)")
    else:
        try:
            A = np.asarray(A, dtype=float)
        except (TypeError, ValueError) as exc:
            raise InputError(f"A must be a numeric matrix: {exc}") from None
        if A.ndim != 2:
            raise InputError(f"A must be a 2-d matrix, got shape {A.shape}")
        if not np.all(np.isfinite(A)):
            raise InputError("A contains non-finite values (nan or inf)")
    n, d = A.shape
    if n == 0 or d == 0:
        raise InputError(f"A must have at least one row and one column, got shape {A.shape}")
    try:
        y = np.asarray(y, dtype=float)
    except (TypeError, ValueError) as exc:
        raise InputError(f"y must be a numeric vector: {exc}") from None
    if y.ndim == 2 and 1 in y.shape:
        y = y.ravel()
    if y.ndim != 1 or y.shape[0] != n:
        raise InputError(f"y must be a vector of length n={n} (rows of A), got shape {y.shape}")
    if not np.all(np.isfinite(y)):
        raise InputError("y contains non-finite values (nan or inf)")
    return A, y


def check_positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise InputError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def check_positive(name, value, allow_inf=False):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InputError(f"{name} must be a positive number, got {value!r}")
    value = float(value)
    if not (value > 0) or (math.isinf(value) and not allow_inf):
        raise InputError(f"{name} must be a positive {'' if allow_inf else 'finite '}number, got {value!r}")
    return value


def column(A, j):
    """Column j of A as a dense vector (CSC: read straight from indptr without slicing)."""
    if sp.issparse(A):
        col = np.zeros(A.shape[0])
        lo, hi = A.indptr[j], A.indptr[j + 1]
        col[A.indices[lo:hi]] = A.data[lo:hi]
        return col
    return A[:, j]


def add_column(z, A, j, coef):
    """z += coef * A[:, j] in place (CSC: touches only the column's nonzeros)."""
    if sp.issparse(A):
        lo, hi = A.indptr[j], A.indptr[j + 1]
        z[A.indices[lo:hi]] += coef * A.data[lo:hi]
    else:
        z += coef * A[:, j]


def round_down(x: float, digits: int = 4) -> float:
    """``x`` rounded down to ``digits`` significant digits (an advertised bound stays a bound)."""
    if not (x > 0 and math.isfinite(x)):
        return x
    step = 10.0 ** (math.floor(math.log10(x)) - digits + 1)
    v = math.floor(x / step) * step
    v = float(f"{v:.{digits - 1}e}")
    return v if v <= x else float(f"{v - step:.{digits - 1}e}")
