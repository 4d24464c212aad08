"""Large data without a dense n x d array: streamed synthetic generation and chunked table reading.

Both build a CSR matrix chunk of rows by chunk of rows, so peak memory is the nonzeros (8 bytes of
value + 4 of column index each, CSR) plus one chunk, never 8 n d bytes.

Synthetic (paper 004, Section V; :func:`vflpriv.data.loaders.make_synthetic`).  The in-memory path
is ``scipy.sparse.random``: a uniformly random set of exactly ``round(density n d)`` cells, drawn by
``Generator.choice(n d, k, replace=False)``, which permutes all n d cell numbers (at n = 1e6,
d = 2000 that is 2e9 int64, 16 GB, and the generation was OOM-killed at 23.7 GB).  The streamed
path stacks independent blocks of ``GEN_ROWS`` rows, each a ``scipy.sparse.random``-style block: a
uniformly random set of exactly ``round(density r d)`` of its r d cells, values N(0, 1).

* Same per-entry law: every entry is nonzero with probability ``density`` (exactly, when
  ``density r d`` is an integer) with an N(0, 1) value.  The joint law differs only in that the
  number of nonzeros of each block is fixed instead of hypergeometric (an exact streamed
  hypergeometric split is not available: numpy's hypergeometric samplers need fewer than 1e9
  cells).  The total may differ from ``round(density n d)`` by at most half the number of blocks.
* The seed stream changes: for the same seed the streamed matrix is a different draw than the
  in-memory one.  So the in-memory path is kept below ``STREAM_CELLS`` cells (every published
  figure and test so far is below it and unchanged); above it the streamed path is the only one
  that fits.  ``GEN_ROWS`` is part of the stream: the matrix depends on (seed, n, d, density) only.

Tables (CSV/TSV via pandas ``read_csv(chunksize=...)``, parquet via pyarrow row-group batches):
each chunk is converted to float64 (at most ``chunk_rows x d`` dense), checked (numeric, finite,
the first bad value named with its global row), and its nonzeros appended to the CSR arrays.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..errors import InputError

#: rows per generation block of the streamed synthetic path (part of its seed stream)
GEN_ROWS = 4096
#: above this many cells (n d) make_synthetic streams: 2^28 cells is a 2.1 GB permutation in
#: scipy; n = 1e5, d = 2000 (2e8 cells, every published figure at that size) stays in memory
STREAM_CELLS = 2 ** 28
#: rows per chunk when reading a CSV/parquet file (``vflpriv run --chunk-rows``)
READ_CHUNK_ROWS = 65536
#: a table read in chunks is returned dense (as before chunked reading) when n d <= this
DENSE_CELLS = 2 ** 24


def check_chunk_rows(chunk_rows, what="--chunk-rows"):
    """A positive integer number of rows; InputError naming the bad value otherwise."""
    if isinstance(chunk_rows, (bool, np.bool_)) or not isinstance(chunk_rows, (int, np.integer)) \
            or chunk_rows < 1:
        raise InputError(f"{what} must be a positive integer, got {chunk_rows!r}")
    return int(chunk_rows)


class CsrBuilder:
    """Appends row chunks (dense arrays or CSR) to CSR arrays; ``matrix()`` -> one CSR matrix."""

    def __init__(self, d):
        self.d, self.n = int(d), 0
        self.data, self.indices, self.counts = [], [], []

    def add_dense(self, X):
        r, c = np.nonzero(X)
        self.data.append(np.ascontiguousarray(X[r, c], dtype=np.float64))
        self.indices.append(c.astype(np.int32))
        self.counts.append(np.bincount(r, minlength=X.shape[0]))
        self.n += X.shape[0]

    def matrix(self):
        indptr = np.zeros(self.n + 1, dtype=np.int64)
        if self.counts:
            np.cumsum(np.concatenate(self.counts), out=indptr[1:])
        data = np.concatenate(self.data) if self.data else np.zeros(0)
        self.data = None
        indices = np.concatenate(self.indices) if self.indices else np.zeros(0, np.int32)
        self.indices = None
        if indptr[-1] <= np.iinfo(np.int32).max:
            indptr = indptr.astype(np.int32)
        return sp.csr_matrix((data, indices, indptr), shape=(self.n, self.d))


def synthetic_csr(n, d, density, rng, block_rows=None):
    """The streamed sparse matrix of the module docstring (CSR, float64): blocks of ``block_rows``
    rows, each with exactly ``round(density r d)`` nonzeros at uniform distinct cells (sorted),
    values ``rng.standard_normal``."""
    block_rows = GEN_ROWS if block_rows is None else int(block_rows)
    out = CsrBuilder(d)
    for s in range(0, n, block_rows):
        r = min(block_rows, n - s)
        cells = r * d
        k = int(round(density * cells))
        pos = np.sort(rng.choice(cells, size=k, replace=False)) if k else np.zeros(0, np.int64)
        rows, cols = np.divmod(pos, d)
        vals = rng.standard_normal(k)
        out.data.append(vals)
        out.indices.append(cols.astype(np.int32))
        out.counts.append(np.bincount(rows, minlength=r))
        out.n += r
    return out.matrix()


def _check_chunk(X, row0, path):
    bad = ~np.isfinite(X)
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise InputError(f"the feature matrix has a non-finite value {float(X[i, j])} at row "
                         f"{row0 + i}, column {j}")


def _check_labels(y, row0, path, label):
    bad = ~np.isfinite(y)
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(f"label column {label!r} has a non-finite value {float(y[i])} at row "
                         f"{row0 + i} (in {path!r})")


def _csv_chunks(path, sep, chunk_rows):
    import pandas as pd

    try:
        yield from pd.read_csv(path, sep=sep, chunksize=chunk_rows)
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"cannot read {path!r} as CSV: {exc}") from None


def _parquet_chunks(path, chunk_rows):
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise InputError(f"reading {path!r} needs a parquet engine: pip install "
                         f"'vflpriv[parquet]' (pyarrow; {exc})") from None
    try:
        f = pq.ParquetFile(path)
    except Exception as exc:             # pyarrow raises its own ArrowInvalid/OSError types
        raise InputError(f"cannot read {path!r} as parquet: {exc}") from None
    # row groups are read batch by batch: never more than chunk_rows rows in memory at once
    for batch in f.iter_batches(batch_size=chunk_rows):
        yield batch.to_pandas()


def read_table(path, label, chunk_rows=READ_CHUNK_ROWS):
    """``(A, y, feature_names)`` from a CSV/TSV/parquet table read ``chunk_rows`` rows at a time:
    A is CSR (dense when n d <= DENSE_CELLS, as the whole-table reader returned), y float64."""
    import pandas as pd

    chunk_rows = check_chunk_rows(chunk_rows)
    low = path.lower()
    chunks = _parquet_chunks(path, chunk_rows) if low.endswith(".parquet") else \
        _csv_chunks(path, "\t" if low.endswith(".tsv") else ",", chunk_rows)
    builder, labels, names = None, [], None
    for df in chunks:
        if names is None:
            if label is None:
                raise InputError(f"{path!r} is a table: name its label column with --label")
            if label not in df.columns:
                raise InputError(f"label column {label!r} is not in {path!r} (columns: "
                                 f"{', '.join(map(str, list(df.columns)[:8]))}...)")
            names = [str(c) for c in df.columns if c != label]
            builder = CsrBuilder(len(names))
        feats = df.drop(columns=[label])
        nonnum = [c for c in feats.columns if not pd.api.types.is_numeric_dtype(feats[c])]
        if nonnum:
            raise InputError(f"column {nonnum[0]!r} of {path!r} is not numeric")
        if any(pd.api.types.is_complex_dtype(feats[c]) for c in feats.columns):
            raise InputError(f"{path!r} has complex values; give real numbers")
        if not pd.api.types.is_numeric_dtype(df[label]) or \
                pd.api.types.is_complex_dtype(df[label]):
            raise InputError(f"label column {label!r} of {path!r} is not real-valued numeric")
        X = feats.to_numpy(dtype=np.float64)
        _check_chunk(X, builder.n, path)
        y = df[label].to_numpy(dtype=np.float64)
        _check_labels(y, builder.n, path, label)
        labels.append(y)
        builder.add_dense(X)
    if names is None:
        raise InputError(f"{path!r} has no rows")
    A = builder.matrix()
    if A.shape[0] == 0:
        raise InputError(f"{path!r} has no rows")
    if A.shape[0] * A.shape[1] <= DENSE_CELLS:
        A = A.toarray()
    return A, np.concatenate(labels), names
