"""A vertically partitioned data set: A (n x d, dense or CSC) split by columns among K parties.

Threat model (docs/vertical.md, "Threat model and problem"; paper 004 Section IV): every party holds the same n people (rows, already
aligned by a public identifier), its own block of feature columns, and the labels y (the paper's
assumption).  Neighbouring data sets differ in one person's row (features and label).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ..errors import InputError
from .partition import make_partition


def _refuse_complex(A, name):
    """Complex values would lose their imaginary part silently in a float64 conversion."""
    dtype = getattr(A, "dtype", None)
    if dtype is None and not sp.issparse(A):
        try:
            dtype = np.asarray(A).dtype
        except (TypeError, ValueError):
            return
    if dtype is not None and np.issubdtype(dtype, np.complexfloating):
        raise InputError(f"{name} has complex values (dtype {dtype}); give real numbers")


def _what(name):
    """A user-facing name for the engine's symbols (a number in a message names its input, never
    an internal symbol): ``A`` is the feature matrix, ``y`` the labels."""
    return {"A": "the feature matrix", "y": "the label vector"}.get(name, name)


def as_matrix(A, name="A"):
    """A float64 dense array or CSC matrix, with a finite check that names the first bad entry."""
    _refuse_complex(A, name)
    if sp.issparse(A):
        A = sp.csc_matrix(A, dtype=np.float64)
        A.sum_duplicates()
        data = A.data
        if not np.isfinite(data).all():
            k = int(np.argmax(~np.isfinite(data)))
            col = int(np.searchsorted(A.indptr, k, side="right") - 1)
            raise InputError(f"{_what(name)} has a non-finite value {float(data[k])} at row "
                             f"{A.indices[k]}, column {col}")
        return A
    try:
        A = np.asarray(A, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{name} must be a numeric matrix ({exc})") from None
    if A.ndim != 2:
        raise InputError(f"{name} must be 2-dimensional (n x d), got shape {A.shape}")
    bad = ~np.isfinite(A)
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise InputError(f"{_what(name)} has a non-finite value {float(A[i, j])} at row {i}, "
                         f"column {j}")
    return A


def as_labels(y, n=None, name="y"):
    _refuse_complex(y, name)
    try:
        y = np.asarray(y, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{name} must be numeric ({exc})") from None
    if y.ndim == 2 and 1 in y.shape:
        y = y.ravel()
    if y.ndim != 1:
        raise InputError(f"{name} must be a vector of length n, got shape {y.shape}")
    if n is not None and y.shape[0] != n:
        raise InputError(f"{name} has {y.shape[0]} entries but A has n={n} rows")
    bad = ~np.isfinite(y)
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(f"{_what(name)} has a non-finite value {float(y[i])} at position {i}")
    return y


@dataclass
class VerticalData:
    """A (n x d), y (n), and ``blocks``: the column indices held by each of the K parties."""

    A: object
    y: np.ndarray
    blocks: list
    feature_names: list | None = None
    party_names: list = field(default_factory=list)

    def __post_init__(self):
        self.A = as_matrix(self.A)
        n, d = self.A.shape
        if n < 1 or d < 1:
            raise InputError(f"A must have at least one row and one column, got shape {self.A.shape}")
        self.y = as_labels(self.y, n)
        self.blocks = make_partition(list(self.blocks), d)
        if not self.party_names:
            self.party_names = [str(k) for k in range(len(self.blocks))]

    @property
    def n(self):
        return self.A.shape[0]

    @property
    def d(self):
        return self.A.shape[1]

    @property
    def K(self):
        return len(self.blocks)

    def block(self, k):
        """Party k's columns, CSC (sparse input) or a dense array."""
        cols = self.blocks[k]
        return self.A[:, cols] if not sp.issparse(self.A) else sp.csc_matrix(self.A[:, cols])

    @classmethod
    def from_arrays(cls, A, y, partition="balanced", parties=None, seed=0):
        A = as_matrix(A)
        d = A.shape[1]
        if parties is None and not isinstance(partition, str):
            parties = len(partition)
        blocks = make_partition(partition, d, parties, seed)
        return cls(A, y, blocks)

    @classmethod
    def from_dataframes(cls, frames: dict, y):
        """``{party: DataFrame}`` with the same row index -> one VerticalData (column order kept)."""
        import pandas as pd  # pandas is a core dependency; imported here to keep import cheap

        if not isinstance(frames, dict) or not frames:
            raise InputError("frames must be a non-empty dict party -> DataFrame")
        index = None
        mats, blocks, names, start = [], [], [], 0
        for party, df in frames.items():
            if not isinstance(df, pd.DataFrame):
                raise InputError(f"party {party!r}: expected a pandas DataFrame, got {type(df).__name__}")
            if df.shape[1] == 0:
                raise InputError(f"party {party!r} holds no columns")
            if index is None:
                index = df.index
            elif len(df.index) != len(index) or not df.index.equals(index):
                raise InputError(f"party {party!r} has {len(df.index)} rows or a different row "
                                 f"index than the first party ({len(index)} rows)")
            nonnum = [c for c in df.columns if not pd.api.types.is_numeric_dtype(df[c])]
            if nonnum:
                raise InputError(f"party {party!r}: column {nonnum[0]!r} is not numeric")
            _refuse_complex(df.to_numpy(), f"party {party!r}'s data")
            mats.append(df.to_numpy(dtype=np.float64))
            blocks.append(np.arange(start, start + df.shape[1]))
            names.extend(str(c) for c in df.columns)
            start += df.shape[1]
        A = np.hstack(mats)
        return cls(A, y, blocks, feature_names=names, party_names=[str(p) for p in frames])

    @classmethod
    def from_dataframe(cls, df, label: str, parties: dict):
        """One DataFrame, a label column, and a mapping party -> list of column names."""
        if label not in df.columns:
            raise InputError(f"label column {label!r} is not in the data (columns: "
                             f"{list(df.columns)[:10]}...)")
        if not isinstance(parties, dict) or not parties:
            raise InputError("parties must be a non-empty dict party -> list of column names")
        frames = {}
        used = set()
        for p, cols in parties.items():
            missing = [c for c in cols if c not in df.columns]
            if missing:
                raise InputError(f"party {p!r}: column {missing[0]!r} is not in the data")
            if label in cols:
                raise InputError(f"party {p!r} lists the label column {label!r} as a feature")
            dup = used.intersection(cols)
            if dup:
                raise InputError(f"column {sorted(dup)[0]!r} is assigned to more than one party")
            used.update(cols)
            frames[p] = df[list(cols)]
        return cls.from_dataframes(frames, df[label].to_numpy())
