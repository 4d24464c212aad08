"""Loaders: svmlight/LIBSVM (scikit-learn's reader), CSV/parquet (pandas), paper 004's synthetic data.

``load(spec, label=None)`` returns ``(A, y, feature_names)``; ``spec`` is the name of a shipped
data set (``diabetes``, ``gapminder``: :mod:`vflpriv.data.named`), a path, or
``synthetic:n=2000,d=20000,density=0.01,sparsity=0.01,seed=0``.
"""
from __future__ import annotations

import os

import numpy as np
import scipy.sparse as sp

from ..errors import InputError
from .dataset import as_labels, as_matrix
from .stream import READ_CHUNK_ROWS, STREAM_CELLS, read_table, synthetic_csr

SVMLIGHT_EXT = (".svm", ".svmlight", ".libsvm", ".txt", ".bz2", ".gz", ".t", ".scale")
SYNTHETIC_DEFAULTS = dict(n=2000, d=20000, density=0.01, sparsity=0.01, seed=0, noise=0.001)


def make_synthetic(n=2000, d=20000, density=0.01, sparsity=0.01, seed=0, noise=0.001):
    """Paper 004, Section V: A (n x d) with a fraction ``density`` of N(0,1) nonzeros (CSC), a
    ground truth x with a fraction ``sparsity`` of N(0,1) nonzeros (at least one), and
    y = A x + e with e ~ N(0, noise) (``noise`` read as the variance, the usual N(mu, sigma^2)).
    Above ``STREAM_CELLS`` cells A is generated in row blocks (:mod:`vflpriv.data.stream`: the
    same per-entry law, a different draw than the in-memory path for the same seed).

    Returns ``(A, y, x_true)``.
    """
    n, d, seed = _int("n", n, 1), _int("d", d, 1), _int("seed", seed, 0)
    density, sparsity, noise = _frac("density", density), _frac("sparsity", sparsity), float(noise)
    if not (noise >= 0 and np.isfinite(noise)):
        raise InputError(f"synthetic noise variance must be >= 0, got {noise!r}")
    # refuse what cannot be built before building it (n = 1e11 ran for ever in blocks)
    nnz = n * d * density
    if nnz > MAX_SYNTHETIC_NONZEROS:
        raise InputError(f"synthetic n x d x density = {n:,} x {d:,} x {density:g} = {nnz:,.4g} "
                         f"nonzeros is more than the {MAX_SYNTHETIC_NONZEROS:,} (~12 GB in "
                         "memory) a synthetic matrix may have")
    rng = np.random.default_rng(seed)
    if n * d <= STREAM_CELLS:
        A = sp.random(n, d, density=density, format="csc", random_state=rng,
                      data_rvs=rng.standard_normal, dtype=np.float64)
    else:
        # streamed: never the n d cell permutation of scipy.sparse.random (stream.py: same
        # per-entry law, a different draw for the same seed)
        A = synthetic_csr(n, d, density, rng).tocsc()
    k = max(1, int(round(sparsity * d)))
    x = np.zeros(d)
    x[rng.choice(d, size=k, replace=False)] = rng.standard_normal(k)
    y = A @ x + np.sqrt(noise) * rng.standard_normal(n)
    return A, y, x


#: largest synthetic matrix (expected nonzeros): 2**30, about 12 GB as CSC (value + index)
MAX_SYNTHETIC_NONZEROS = 2 ** 30


def _int(name, v, lo):
    try:
        iv = int(v)
    except (TypeError, ValueError):
        raise InputError(f"synthetic {name} must be an integer, got {v!r}") from None
    # compared exactly (int(v) == v for ints; float for "2e3"): float(10**29) != 10**29
    exact = iv == v if isinstance(v, int) else (str(v).strip().lstrip("+").isdigit()
                                                or iv == float(v))
    if not exact or iv < lo:
        raise InputError(f"synthetic {name} must be an integer >= {lo}, got {v!r}")
    return iv


def _frac(name, v):
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise InputError(f"synthetic {name} must be a number in (0, 1], got {v!r}") from None
    if not (0 < f <= 1):
        raise InputError(f"synthetic {name} must be in (0, 1], got {v!r}")
    return f


def parse_synthetic(spec: str) -> dict:
    """``synthetic:n=2000,d=20000`` -> keyword arguments of :func:`make_synthetic`."""
    body = spec.split(":", 1)[1] if ":" in spec else ""
    kw = dict(SYNTHETIC_DEFAULTS)
    for item in filter(None, (s.strip() for s in body.split(","))):
        if "=" not in item:
            raise InputError(f"synthetic option {item!r} must be key=value (in {spec!r})")
        key, val = (s.strip() for s in item.split("=", 1))
        if key not in SYNTHETIC_DEFAULTS:
            raise InputError(f"unknown synthetic option {key!r}; known: {sorted(SYNTHETIC_DEFAULTS)}")
        kw[key] = val
    return kw


def _check_fields(path, sep):
    """Every row of a CSV/TSV must have as many fields as the header (pandas would read a short
    row as missing values, reported later as NaN; a long one as an index column)."""
    import csv
    import gzip

    opener = gzip.open if path.lower().endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8", newline="") as fh:
            rows = csv.reader(fh, delimiter=sep)
            header = next(rows, None)
            if header is None:
                raise InputError(f"{path!r} is empty")
            for row in rows:
                if row and len(row) != len(header):
                    raise InputError(f"{path!r} line {rows.line_num}: {len(row)} fields, but "
                                     f"the header has {len(header)}")
    except (UnicodeDecodeError, csv.Error, EOFError, gzip.BadGzipFile) as exc:
        raise InputError(f"cannot read {path!r} as CSV: {exc}") from None


def load(spec: str, label: str | None = None, chunk_rows: int = READ_CHUNK_ROWS):
    """Load ``(A, y, feature_names)`` from a shipped data set's name, a path or a ``synthetic:``
    spec.  A name wins over a file of the same name in the working directory only when no such
    file exists (give ``./diabetes`` for the file).  A CSV/parquet table is read ``chunk_rows``
    rows at a time into a sparse matrix (:func:`vflpriv.data.stream.read_table`), never whole."""
    from .named import is_named, load_named
    from .stream import check_chunk_rows

    if not isinstance(spec, str) or not spec:
        raise InputError(f"data must be a data set name, a file path or 'synthetic:...', got {spec!r}")
    chunk_rows = check_chunk_rows(chunk_rows)
    if is_named(spec) and not os.path.exists(spec):
        d = load_named(spec)
        return d.A, d.y, list(d.feature_names)
    if spec == "synthetic" or spec.startswith("synthetic:"):
        A, y, _ = make_synthetic(**parse_synthetic(spec))
        return A, y, None
    if not os.path.exists(spec):
        raise InputError(f"data file {spec!r} does not exist")
    from .files import regular_file

    regular_file(spec, "data file")              # a FIFO or /dev/zero would hang or never end
    low = spec.lower()
    if low.endswith((".csv", ".csv.gz", ".tsv")) or low.endswith(".parquet"):
        if not low.endswith(".parquet"):
            _check_fields(spec, "\t" if low.endswith(".tsv") else ",")
        elif label is None:
            raise InputError(f"{spec!r} is a table: name its label column with --label")
        A, y, names = read_table(spec, label, chunk_rows)
        A = as_matrix(A)
        return A, as_labels(y, A.shape[0]), names
    from sklearn.datasets import load_svmlight_file

    try:
        A, y = load_svmlight_file(spec)
    except OverflowError as exc:
        # scikit-learn's reader keeps feature indices in C integers
        raise InputError(f"cannot read {spec!r} as svmlight/LIBSVM: a feature index is too "
                         f"large ({exc})") from None
    except ValueError as exc:
        raise InputError(f"cannot read {spec!r} as svmlight/LIBSVM: {exc}") from None
    except MemoryError:
        raise InputError(f"{spec!r}: the svmlight matrix does not fit in memory (a huge "
                         "feature index?)") from None
    if A.shape[0] == 0:
        # scikit-learn reads an empty file as 0 rows of 1 column: named here, not as a
        # partition or client count that does not fit
        raise InputError(f"data file {spec!r} has no rows (an empty svmlight/LIBSVM file)")
    A = as_matrix(sp.csc_matrix(A))
    return A, as_labels(y, A.shape[0]), None
