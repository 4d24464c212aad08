"""Public column ranges: each column's declared range [low, high], the way a table in raw units
meets the declared bounds every private algorithm needs (in the spirit of diffprivlib's
``bounds=``).

A ranges file names every feature column of a table (JSON ``{"format":
"vflpriv-column-ranges/1", "ranges": {"age": [0, 120], ...}}``, or a CSV with the header
``column,low,high``).  The ranges are public: they are declared, never read from the data, so
they may travel in a run description.  :func:`apply_ranges` clips each column to its range and
divides it by ``max(|low|, |high|)``, so every value lies in [-1, 1] and the declared feature
bound is 1.  Dividing (not shifting) keeps a sparse table sparse wherever a range holds 0, and a
model fitted on the scaled columns is the same linear model in raw units with each coefficient
divided by its column's factor (:func:`to_raw`): the intercept does not change, so a model
written in raw units scores raw rows as they are.  A value outside its range is clipped and
counted, and the counts are said to the party that holds the column.
"""
from __future__ import annotations

import csv
import json
import math
import os

import numpy as np
import scipy.sparse as sp

from ..errors import InputError

FORMAT = "vflpriv-column-ranges/1"
#: columns a ranges file may name (a cap on what a hostile file can make us hold)
MAX_COLUMNS = 1_000_000


def read_ranges(path, option="--ranges") -> dict:
    """``{column: (low, high)}`` from a ranges file; one clear error naming the file and the bad
    entry (a range must be two finite numbers with low < high)."""
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise InputError(f"{option} needs a file name, got {path!r}")
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise InputError(f"{option} file {path!r} does not exist")
    try:
        if path.lower().endswith(".csv"):
            with open(path, newline="") as fh:
                rows = list(csv.reader(fh))
            if not rows or [c.strip().lower() for c in rows[0]] != ["column", "low", "high"]:
                raise InputError(f"{option} {path!r}: a CSV of ranges has the header "
                                 "column,low,high")
            entries = [(r[0], r[1:]) for r in rows[1:] if r]
        else:
            with open(path) as fh:
                doc = json.load(fh)
            if not isinstance(doc, dict) or doc.get("format") != FORMAT or \
                    not isinstance(doc.get("ranges"), dict):
                raise InputError(f"{option} {path!r} is not a ranges file (JSON with \"format\": "
                                 f"\"{FORMAT}\" and \"ranges\": {{column: [low, high]}}, or a CSV "
                                 "with the header column,low,high)")
            entries = list(doc["ranges"].items())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, csv.Error) as exc:
        raise InputError(f"{option} {path!r} cannot be read: {exc}") from None
    if len(entries) > MAX_COLUMNS:
        raise InputError(f"{option} {path!r} names {len(entries)} columns, more than the cap "
                         f"{MAX_COLUMNS}")
    out = {}
    for name, rng in entries:
        where = f"{option} {path!r}, column {name!r}"
        if name in out:
            raise InputError(f"{where}: named twice")
        if not isinstance(rng, (list, tuple)) or len(rng) != 2:
            raise InputError(f"{where}: a range is [low, high], got {rng!r}")
        try:
            low, high = (_number(v) for v in rng)
        except (TypeError, ValueError):
            raise InputError(f"{where}: a range is two numbers, got {list(rng)!r}") from None
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise InputError(f"{where}: a range needs finite low < high, got [{low:g}, {high:g}]")
        out[str(name)] = (low, high)
    if not out:
        raise InputError(f"{option} {path!r} declares no range")
    return out


def _number(v) -> float:
    if isinstance(v, bool):
        raise TypeError(v)
    return float(v.strip()) if isinstance(v, str) else float(v)


def ranges_for(ranges: dict, names, option="--ranges") -> tuple:
    """``(low, high)`` arrays in the order of ``names``: every feature column needs its range
    (a column left out would enter unbounded), and every named range a column (a misspelt
    name would bound nothing)."""
    names = [str(c) for c in names]
    missing = [c for c in names if c not in ranges]
    if missing:
        raise InputError(f"{option}: no range for column {missing[0]!r} (every feature column "
                         f"needs one; {len(missing)} missing)")
    extra = sorted(set(ranges) - set(names))
    if extra:
        raise InputError(f"{option}: a range for {extra[0]!r}, which is not a feature column of "
                         "the table")
    low = np.array([ranges[c][0] for c in names], dtype=np.float64)
    high = np.array([ranges[c][1] for c in names], dtype=np.float64)
    return low, high


def scale_factors(low, high) -> np.ndarray:
    """max(|low|, |high|) per column: what the clipped column is divided by."""
    return np.maximum(np.abs(np.asarray(low, float)), np.abs(np.asarray(high, float)))


def apply_ranges(A, low, high):
    """``(A scaled, factors, clipped per column)``: every column clipped to [low_j, high_j] and
    divided by max(|low_j|, |high_j|).  A sparse column whose range holds 0 stays sparse; one
    whose range excludes 0 has its implicit zeros clipped too (they are values outside the
    range), so it is stored dense within the sparse matrix."""
    low, high = np.asarray(low, float), np.asarray(high, float)
    factors = scale_factors(low, high)
    n, d = A.shape
    if d != low.shape[0]:
        raise InputError(f"ranges for {low.shape[0]} columns, the table has {d}")
    if not sp.issparse(A):
        X = np.asarray(A, dtype=np.float64)
        clipped = np.count_nonzero((X < low) | (X > high), axis=0)
        return np.clip(X, low, high) / factors, factors, clipped
    C = sp.csc_matrix(A, dtype=np.float64, copy=True)
    clipped = np.zeros(d, dtype=np.int64)
    cols = []
    for j in range(d):
        lo, hi = C.indptr[j], C.indptr[j + 1]
        vals, rows = C.data[lo:hi], C.indices[lo:hi]
        out_of = int(np.count_nonzero((vals < low[j]) | (vals > high[j])))
        if low[j] <= 0.0 <= high[j]:
            clipped[j] = out_of
            cols.append(sp.csc_matrix((np.clip(vals, low[j], high[j]) / factors[j],
                                       rows, [0, hi - lo]), shape=(n, 1)))
        else:
            col = np.zeros(n)
            col[rows] = vals
            clipped[j] = int(np.count_nonzero((col < low[j]) | (col > high[j])))
            cols.append(sp.csc_matrix((np.clip(col, low[j], high[j]) / factors[j])[:, None]))
    out = sp.hstack(cols, format="csc") if cols else C
    return out, factors, clipped


def to_raw(x, factors) -> np.ndarray:
    """The coefficients of a model fitted on the scaled columns, in the table's raw units (the
    same predictions on raw rows: x_raw^T a = x^T (a / factors))."""
    return np.asarray(x, dtype=np.float64) / np.asarray(factors, dtype=np.float64)


def clipped_by_party(clipped, names, blocks) -> dict:
    """``{party: (count, {column: count})}`` for the parties with a clipped value."""
    out = {}
    for k, b in enumerate(blocks):
        per = {str(names[j]): int(clipped[j]) for j in b if clipped[j]}
        if per:
            out[k] = (sum(per.values()), per)
    return out
