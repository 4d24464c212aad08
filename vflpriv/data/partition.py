"""Column partitions: which party holds which features (vertical / featurewise split).

A partition of ``d`` columns among ``K`` parties is a list of K sorted, disjoint, non-empty integer
arrays whose union is ``range(d)``.  Three ways to make one:

* ``balanced_partition(d, K)``: contiguous blocks of (almost) equal size, paper 004 eq. (11)
  (``A = [a_1..a_{d/K} | ... | a_{d/K(K-1)+1}..a_d]``); when K does not divide d the first
  ``d mod K`` parties hold one column more (numpy's ``array_split``).
* ``group_partition(groups, d)``: explicit column groups (lists of indices), validated.
* ``random_partition(d, K, seed)``: a uniformly random assignment into blocks of balanced sizes.

``make_partition(spec, d, K, seed)`` accepts any of these by name (``"balanced"``, ``"random"``),
an explicit list of groups, or a string ``"0-9,10-19;20-29"``-style spec (``;`` separates parties,
``,`` separates ranges, ``a-b`` is inclusive).
"""
from __future__ import annotations

import numpy as np

from ..errors import InputError


def _check_dk(d, K):
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        raise InputError(f"number of features d must be a positive integer, got {d!r}")
    if isinstance(K, bool) or not isinstance(K, (int, np.integer)) or K < 1:
        raise InputError(f"number of parties K must be a positive integer, got {K!r}")
    if K > d:
        raise InputError(f"number of parties K={K} exceeds the number of features d={d}; "
                         "every party needs at least one column")


def balanced_partition(d: int, K: int) -> list[np.ndarray]:
    """Contiguous balanced blocks (paper 004, eq. 11)."""
    _check_dk(d, K)
    return [np.asarray(b, dtype=np.int64) for b in np.array_split(np.arange(d), K)]


def random_partition(d: int, K: int, seed=0) -> list[np.ndarray]:
    """Random balanced blocks: a seeded permutation of the columns cut as in eq. (11)."""
    _check_dk(d, K)
    perm = np.random.default_rng(seed).permutation(d)
    return [np.sort(b).astype(np.int64) for b in np.array_split(perm, K)]


def group_partition(groups, d: int) -> list[np.ndarray]:
    """Explicit groups; each must be non-empty, in range, and together they must cover [d] once."""
    if isinstance(groups, (str, bytes)) or not hasattr(groups, "__len__") or len(groups) == 0:
        raise InputError(f"partition groups must be a non-empty list of column lists, got {groups!r}")
    _check_dk(d, len(groups))
    out, seen = [], np.zeros(d, dtype=np.int64)
    for k, g in enumerate(groups):
        arr = np.asarray(g)
        if arr.ndim != 1 or arr.size == 0:
            raise InputError(f"partition group {k} must be a non-empty list of column indices, got {g!r}")
        if not np.issubdtype(arr.dtype, np.integer):
            raise InputError(f"partition group {k} must hold integer column indices, got dtype {arr.dtype}")
        if arr.min() < 0 or arr.max() >= d:
            bad = arr[(arr < 0) | (arr >= d)][0]
            raise InputError(f"partition group {k} has column {int(bad)} outside [0, {d})")
        np.add.at(seen, arr, 1)
        out.append(np.sort(arr.astype(np.int64)))
    if (seen > 1).any():
        raise InputError(f"column {int(np.argmax(seen > 1))} is assigned to more than one party")
    if (seen == 0).any():
        raise InputError(f"column {int(np.argmax(seen == 0))} is assigned to no party")
    return out


def parse_groups(spec: str, d: int | None = None) -> list[list[int]]:
    """``"0-9,12;10-11,13-19"`` -> [[0..9, 12], [10, 11, 13..19]].  With ``d``, a column
    outside [0, d) is refused before any range is built (``0-99999999999`` never allocates)."""
    groups = []
    for part in spec.split(";"):
        cols = []
        for rng in part.split(","):
            rng = rng.strip()
            if not rng:
                continue
            try:
                if "-" in rng:
                    a, b = rng.split("-", 1)
                    a, b = int(a), int(b)
                    if b < a:
                        raise ValueError
                else:
                    a = b = int(rng)
            except ValueError:
                raise InputError(f"cannot read column range {rng!r} in partition {spec!r}") from None
            if d is not None and (a < 0 or b >= d):
                raise InputError(f"column range {rng!r} in partition {spec!r} is outside the "
                                 f"data's columns 0-{d - 1}")
            cols.extend(range(a, b + 1))
        groups.append(cols)
    return groups


def make_partition(spec, d: int, K: int | None = None, seed=0) -> list[np.ndarray]:
    """A partition from a name ("balanced", "random"), explicit groups, or a groups string."""
    if isinstance(spec, str):
        if spec == "balanced":
            return balanced_partition(d, K)
        if spec == "random":
            return random_partition(d, K, seed)
        if any(c.isdigit() for c in spec):
            groups = group_partition(parse_groups(spec, d), d)
            if K is not None and len(groups) != K:
                raise InputError(f"partition {spec!r} has {len(groups)} parties but K={K}")
            return groups
        raise InputError(f"partition must be 'balanced', 'random' or explicit groups, got {spec!r}")
    groups = group_partition(spec, d)
    if K is not None and len(groups) != K:
        raise InputError(f"the explicit partition has {len(groups)} parties but K={K}")
    return groups
