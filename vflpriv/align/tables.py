"""One party's own table: an ID column, its feature columns, and (the label party's) the label.

A consortium never pools its tables (issue 31): each party reads only its own file, and the rows
are matched by private set intersection (:mod:`.psi`).  Everything that can be wrong with a file
is found here, before the protocol starts and before any release: a missing or empty file, an
ID column that is missing or has empty values, duplicate IDs (an ID must name one person), a
column name repeated in the header, a feature column that is not numeric or not finite, a label
column that is missing.  IDs are read as text, as written (``NA`` is a country code, not a
missing value).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InputError


@dataclass
class PartyTable:
    """Party ``party``'s rows in its file's order: ``ids`` (str), ``X`` (n x p float64),
    ``columns`` (feature names) and, at the label party, ``y``."""

    party: int
    path: str
    ids: list
    X: np.ndarray
    columns: list
    y: np.ndarray | None = None

    @property
    def n(self):
        return len(self.ids)


def parse_party_data(specs, option="--party-data") -> dict:
    """``{party: path}`` from ``--party-data I=FILE`` values (each party once, 0..K-1);
    ``option`` names the option in the messages."""
    out = {}
    for s in specs:
        party, sep, path = str(s).partition("=")
        if not sep or not path:
            raise InputError(f"{option} {s!r}: give I=FILE (party index, '=', file)")
        try:
            k = int(party)
        except ValueError:
            raise InputError(f"{option} {s!r}: the party index {party!r} is not an "
                             "integer") from None
        if k < 0:
            raise InputError(f"{option} {s!r}: the party index must be >= 0")
        if k in out:
            raise InputError(f"{option}: party {k} is given twice ({out[k]!r} and {path!r})")
        out[k] = path
    if len(out) < 2:
        raise InputError(f"{option}: a consortium needs at least two parties' files")
    missing = sorted(set(range(len(out))) - set(out))
    if missing:
        raise InputError(f"{option}: parties are numbered 0..{len(out) - 1}; party "
                         f"{missing[0]} has no file")
    return dict(sorted(out.items()))


#: what pandas reads as missing by default (its documented list): kept for the feature and
#: label columns, never for the ID column, where ``NA`` (Namibia) or ``null`` is a name
NA_TEXT = ("", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND",
           "1.#QNAN", "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null")


def _sep(path):
    return "\t" if str(path).lower().endswith(".tsv") else ","


def header_columns(path, what="--party-data file") -> list:
    """The column names of a CSV, TSV or parquet file as its header spells them, from the header
    alone, a repeated name refused: pandas renames a repeated header (``y, y`` -> ``y, y.1``),
    so a check on its columns never fires, and a second label column became a feature.  The
    one reader of a party table's header (:func:`read_party_table`, ``flower schema``)."""
    from ..data.files import regular_file

    regular_file(path, what)
    try:
        if str(path).lower().endswith(".parquet"):
            try:
                import pyarrow.parquet as pq
            except ImportError as exc:
                raise InputError(f"reading {path!r} needs a parquet engine: pip install "
                                 f"'vflpriv[parquet]' (pyarrow; {exc})") from None
            cols = [str(c) for c in pq.read_schema(path).names]
        else:
            import pandas as pd

            row = pd.read_csv(path, sep=_sep(path), header=None, nrows=1, dtype=str,
                              keep_default_na=False)
            cols = [str(c) for c in row.iloc[0].tolist()] if row.shape[0] else []
    except InputError:
        raise
    except Exception as exc:         # pandas/pyarrow raise many types for a malformed file
        raise InputError(f"{what} {path!r} cannot be read as a table: {exc}") from None
    seen = set()
    for c in cols:
        if c in seen:
            raise InputError(f"{what} {path!r} has the column {c!r} twice in its header (a "
                             "column name must name one column)")
        seen.add(c)
    return cols


def _frame(path, id_column):
    import pandas as pd

    cols = header_columns(path)
    try:
        if str(path).lower().endswith(".parquet"):
            return pd.read_parquet(path)
        # the IDs as text, as written: "007" and "7" are different people, no ID is rounded,
        # and "NA" or "null" is an ID like any other (an empty one is refused by _ids)
        return pd.read_csv(path, sep=_sep(path), dtype={id_column: str},
                           keep_default_na=False,
                           na_values={c: list(NA_TEXT) for c in cols if c != id_column})
    except Exception as exc:         # pandas/pyarrow raise many types for a malformed file
        raise InputError(f"--party-data file {path!r} cannot be read as a table: {exc}") from None


def _ids(df, path, id_column):
    import pandas as pd

    col = df[id_column]
    empty = col.isna().to_numpy() | np.array([isinstance(v, str) and not v.strip()
                                              for v in col.tolist()], dtype=bool)
    if empty.any():
        row = int(np.flatnonzero(empty)[0])
        raise InputError(f"--party-data file {path!r}: ID column {id_column!r} is empty at "
                         f"row {row}")
    if pd.api.types.is_float_dtype(col):
        vals = col.to_numpy()
        if np.all(vals == np.floor(vals)):
            col = col.astype(np.int64)      # 17.0 and 17 name the same person
    ids = [str(v) for v in col.tolist()]
    seen = {}
    for i, v in enumerate(ids):
        j = seen.setdefault(v, i)
        if j != i:
            raise InputError(f"--party-data file {path!r}: ID column {id_column!r} has a "
                             f"duplicate ID at rows {j} and {i} (an ID must name one row)")
    return ids


def read_party_table(party, path, id_column, label=None, columns=None) -> PartyTable:
    """Party ``party``'s table from ``path`` (CSV, TSV or parquet): the ID column
    ``id_column``, the label column ``label`` (the label party only) and every other column
    as a numeric feature (or, with ``columns``, those columns in that order, others ignored:
    a model's columns when scoring)."""
    import pandas as pd

    df = _frame(path, id_column)
    if columns is not None:
        missing = [c for c in columns if c not in df.columns]
        if missing:
            raise InputError(f"--party-data file {path!r} (party {party}) has no column "
                             f"{missing[0]!r}, which the model's party {party} holds")
        keep = [id_column] if id_column in df.columns else []
        df = df[keep + list(columns)]
    if df.shape[0] == 0:
        raise InputError(f"--party-data file {path!r} has no rows")
    if id_column not in df.columns:
        raise InputError(f"--party-data file {path!r} has no ID column {id_column!r} "
                         f"(columns: {', '.join(map(str, list(df.columns)[:8]))})")
    ids = _ids(df, path, id_column)
    y = None
    if label is not None:
        if label not in df.columns:
            raise InputError(f"--party-data file {path!r} (the label party's) has no label "
                             f"column {label!r}")
        if not pd.api.types.is_numeric_dtype(df[label]) or df[label].isna().any():
            raise InputError(f"--party-data file {path!r}: label column {label!r} is not "
                             "numeric or has empty values")
        y = df[label].to_numpy(dtype=np.float64)
    feats = df.drop(columns=[c for c in (id_column, label) if c is not None])
    if feats.shape[1] == 0:
        raise InputError(f"--party-data file {path!r} has no feature columns besides the ID"
                         + (" and the label" if label is not None else ""))
    bad = [c for c in feats.columns if not pd.api.types.is_numeric_dtype(feats[c])
           or pd.api.types.is_complex_dtype(feats[c])]
    if bad:
        raise InputError(f"--party-data file {path!r}: column {bad[0]!r} is not real-valued "
                         "numeric")
    X = feats.to_numpy(dtype=np.float64)
    nonfinite = ~np.isfinite(X)
    if nonfinite.any():
        i, j = np.argwhere(nonfinite)[0]
        raise InputError(f"--party-data file {path!r}: column {feats.columns[j]!r} has a "
                         f"non-finite or empty value at row {i}")
    if y is not None and not np.all(np.isfinite(y)):
        raise InputError(f"--party-data file {path!r}: label column {label!r} has a "
                         "non-finite value")
    return PartyTable(party=int(party), path=str(path), ids=ids, X=X,
                      columns=[str(c) for c in feats.columns], y=y)


def read_party_tables(paths: dict, id_column, label, label_party) -> list:
    """Every party's :class:`PartyTable` (each reads only its own file; the label at
    ``label_party``); a column name held by two parties is refused (a column is one party's)."""
    if not id_column:
        raise InputError("--party-data needs --id COLUMN (the ID column every file has)")
    if label_party not in paths:
        raise InputError(f"--label-party {label_party}: there are only parties "
                         f"0..{len(paths) - 1}")
    tables = [read_party_table(k, p, id_column, label if k == label_party else None)
              for k, p in paths.items()]
    owner = {}
    for t in tables:
        for c in t.columns:
            if c == label and t.party != label_party:
                raise InputError(f"--party-data file {t.path!r} (party {t.party}) has the "
                                 f"label column {label!r}; only the label party "
                                 f"{label_party} holds the label")
            if c in owner:
                raise InputError(f"column {c!r} is in party {owner[c]}'s file and in party "
                                 f"{t.party}'s file {t.path!r}: a column belongs to one party")
            owner[c] = t.party
    return tables
