"""A party's public schema: what a run description may know of its table without reading a row.

``vflpriv flower schema --party-data FILE --id COLUMN [--label COLUMN] --json SCHEMA`` is run by
each party on its own machine and writes its schema: the file's path there, the ID column, the
label column (the label party only) and the feature columns' names, in the file's order.  Only
the file's header is read (a CSV/TSV's first line, a parquet file's metadata), never a row, so
the schema holds no value of any person.  With ``--identity-key KEY`` the party also makes its
own identity key there (if absent; it never leaves the machine) and the schema carries the
key's ``fingerprint`` and its path (``identity-key``), which the description pins
(:mod:`vflpriv.runtime.keys`).  ``vflpriv flower spec run --party-schema I=SCHEMA``
writes the run description and each party's node config from the schemas alone; the declared
bounds are the command's options, as always.  At run time each party reads its own file and
refuses one whose columns are not those of its schema (:mod:`.deployed`).
"""
from __future__ import annotations

import json
import math
import os

from ..errors import InputError

FORMAT = "vflpriv-party-schema/1"


def header_columns(path) -> list:
    """The column names of a CSV, TSV or parquet file, from its header alone, as it spells them
    (a repeated name refused: :func:`vflpriv.align.tables.header_columns`, the one reader)."""
    from .tables import header_columns as read_header

    return read_header(path)


def file_schema(path, id_column, label=None) -> dict:
    """The schema of the table at ``path`` (see module docstring); one clear error naming the
    file and the column when the ID or label column is missing or no feature column is left."""
    if not id_column:
        raise InputError("--id COLUMN is required (the ID column of the file)")
    cols = header_columns(path)
    for opt, c in (("--id", id_column), ("--label", label)):
        if c is not None and c not in cols:
            raise InputError(f"--party-data file {path!r} has no {opt} column {c!r} (columns: "
                             f"{', '.join(cols[:8])})")
    if len(set(cols)) != len(cols):
        dup = next(c for c in cols if cols.count(c) > 1)
        raise InputError(f"--party-data file {path!r} has the column {dup!r} twice")
    feats = [c for c in cols if c not in (id_column, label)]
    if not feats:
        raise InputError(f"--party-data file {path!r} has no feature columns besides the ID"
                         + (" and the label" if label is not None else ""))
    return {"format": FORMAT, "file": os.path.abspath(path), "id": id_column, "label": label,
            "columns": feats}


def write_schema(schema, path) -> str:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as fh:
        json.dump(schema, fh, indent=1)
        fh.write("\n")
    os.replace(tmp, path)
    return path


def read_schema(path, option="--party-schema") -> dict:
    """A schema written by :func:`write_schema`, checked field by field."""
    from ..data.files import regular_file

    regular_file(path, f"{option} file")
    try:
        with open(path) as fh:
            s = json.load(fh)
    except (OSError, ValueError) as exc:
        raise InputError(f"{option} {str(path)!r} cannot be read as JSON: {exc}") from None
    if not isinstance(s, dict) or s.get("format") != FORMAT:
        raise InputError(f"{option} {str(path)!r} is not a party schema (format {FORMAT!r}; "
                         "write it with vflpriv flower schema)")
    cols = s.get("columns")
    if not (isinstance(s.get("file"), str) and s["file"] and isinstance(s.get("id"), str)
            and s["id"] and isinstance(cols, list) and cols
            and all(isinstance(c, str) and c for c in cols)
            and (s.get("label") is None or isinstance(s["label"], str))):
        raise InputError(f"{option} {str(path)!r}: needs a file, an id column and a non-empty "
                         "list of column names")
    from ..runtime.keys import is_fingerprint

    # optional: the party's identity fingerprint and its key's path on its machine (issue 49)
    if s.get("fingerprint") is not None and not is_fingerprint(s["fingerprint"]):
        raise InputError(f"{option} {str(path)!r}: its fingerprint must be 64 hex digits "
                         "(vflpriv flower schema --identity-key FILE writes it)")
    if s.get("identity-key") is not None and not (isinstance(s["identity-key"], str)
                                                 and s["identity-key"]):
        raise InputError(f"{option} {str(path)!r}: its identity-key must be a path")
    # optional: the party's own ledger on its machine (vflpriv flower schema --ledger)
    if s.get("ledger") is not None and not (isinstance(s["ledger"], str) and s["ledger"]):
        raise InputError(f"{option} {str(path)!r}: its ledger must be a path")
    # optional: every feature column's public range (vflpriv flower schema --ranges)
    if s.get("ranges") is not None:
        s["ranges"] = schema_ranges(s["ranges"], cols, f"{option} {str(path)!r}")
    return s


def schema_ranges(ranges, columns, where) -> list:
    """``[[low, high], ...]`` in the order of ``columns``: a schema's ranges checked (one per
    feature column, finite low < high; ``vflpriv.data.ranges``)."""
    if isinstance(ranges, list) and len(ranges) == len(columns):
        ranges = dict(zip(columns, ranges))
    if not isinstance(ranges, dict):
        raise InputError(f"{where}: its ranges must be one [low, high] per feature column")
    from ..data.ranges import ranges_for

    out = {}
    for c, r in ranges.items():
        try:
            low, high = (float(v) for v in r)
        except (TypeError, ValueError):
            raise InputError(f"{where}: the range of {c!r} must be two numbers, got {r!r}") \
                from None
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise InputError(f"{where}: the range of {c!r} needs finite low < high, got {r!r}")
        out[str(c)] = (low, high)
    low, high = ranges_for(out, columns, option=where)
    return [[float(a), float(b)] for a, b in zip(low, high)]


def check_schemas(schemas: dict, label, label_party: int, option="--party-schema") -> None:
    """The label at the label party's schema only, and every column held by one party only."""
    if label_party not in schemas:
        raise InputError(f"--label-party {label_party}: there are only parties "
                         f"0..{len(schemas) - 1}")
    owner = {}
    for k, s in schemas.items():
        if k == label_party and s.get("label") != label:
            raise InputError(f"{option} {k}: the label party's schema has label column "
                             f"{s.get('label')!r}, not --label {label!r} (write it with "
                             f"vflpriv flower schema ... --label {label})")
        if k != label_party and (s.get("label") is not None or label in s["columns"]):
            raise InputError(f"{option} {k}: party {k}'s file {s['file']!r} has the label "
                             f"column {label!r}; only the label party {label_party} holds it")
        for c in s["columns"]:
            if c in owner:
                raise InputError(f"column {c!r} is in party {owner[c]}'s file and in party "
                                 f"{k}'s file {s['file']!r}: a column belongs to one party")
            owner[c] = k
