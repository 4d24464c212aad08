"""A split model on disk: one file per party (its own coefficients) and a public manifest.

    DIR/manifest.json    public: format, loss, algorithm, parties, label party, each party's
                         file and column names, the privacy the run spent
    DIR/party<k>.json    party k's columns and coefficients; the label party's also the
                         intercept (what party k would keep on its own machine)

A model is written from a finished run (``vflpriv run --model-out DIR``) and read by
``vflpriv predict``.  The directory is written whole into a temporary sibling and renamed, so a
crash never leaves half a model; an existing non-empty directory is refused before the run.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from dataclasses import dataclass

import numpy as np

from ..errors import InputError

FORMAT = "vflpriv-split-model/1"
MANIFEST = "manifest.json"


def check_model_out(path, option="--model-out"):
    """Refuse ``--model-out DIR`` before any work: an existing file, a non-empty directory, or
    a parent directory that does not exist or is not writable (:func:`vflpriv.outputs.
    check_output_dir`)."""
    from ..outputs import check_output_dir

    check_output_dir(path, option)


@dataclass
class SplitModel:
    """Party k's ``columns[k]`` and ``coef[k]``; ``intercept`` at ``label_party``."""

    loss: str
    label_party: int
    columns: list
    coef: list
    intercept: float
    manifest: dict

    @property
    def K(self):
        return len(self.coef)


def write_split_model(path, *, coef, blocks, names, intercept, label_party, loss, extra=None):
    """Write the model of coefficient vector ``coef`` split by ``blocks`` (party k's column
    indices), ``names`` the column names, into the new directory ``path``."""
    check_model_out(path)
    path = os.path.abspath(str(path))
    coef = np.asarray(coef, dtype=np.float64)
    lp = 0 if label_party in (None, "all") else int(label_party)
    b = 0.0 if intercept is None or not math.isfinite(intercept) else float(intercept)
    parent = os.path.dirname(path)
    tmp = tempfile.mkdtemp(prefix=".model-", dir=parent)
    try:
        parties = []
        for k, cols in enumerate(blocks):
            cols = [int(c) for c in cols]
            body = {"format": FORMAT, "party": k, "columns": [str(names[c]) for c in cols],
                    "coef": [float(v) for v in coef[cols]]}
            if k == lp:
                body["intercept"] = b
            fname = f"party{k}.json"
            with open(os.path.join(tmp, fname), "w") as fh:
                json.dump(body, fh, indent=1)
            parties.append({"party": k, "file": fname, "columns": body["columns"]})
        manifest = {"format": FORMAT, "loss": loss, "label_party": lp, "parties": parties,
                    "intercept_holder": lp, **(extra or {})}
        with open(os.path.join(tmp, MANIFEST), "w") as fh:
            json.dump(manifest, fh, indent=1)
        if os.path.isdir(path):
            os.rmdir(path)                  # empty (checked): replaced by the whole model
        os.rename(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


def _read_json(path, what):
    from ..data.files import regular_file

    regular_file(path, what)
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError) as exc:
        raise InputError(f"{what} {path!r} cannot be read: {exc}") from None


#: the losses a split model may be written for (``vflpriv run --loss``)
LOSSES = ("squared", "logistic", "smoothed-hinge")


def _real(v) -> bool:
    """A JSON number that is a real value (not a bool, not a string, finite)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def read_manifest(path) -> dict:
    """The public manifest of the model in directory ``path``, checked: its format, a known
    loss, at least two parties numbered 0..K-1 each with its own file name (a name in ``path``,
    no folder) and a list of column names (no name held twice), a label party among them that
    is also the intercept holder.  What :func:`read_split_model` (in process) and a
    deployment's description are read from (the party files stay with the parties)."""
    if not os.path.isdir(str(path)):
        raise InputError(f"--model {str(path)!r} is not a directory written by --model-out")
    man = _read_json(os.path.join(path, MANIFEST), "--model manifest")
    if not isinstance(man, dict) or man.get("format") != FORMAT:
        got = man.get("format") if isinstance(man, dict) else None
        raise InputError(f"--model {str(path)!r}: manifest format {got!r} is not {FORMAT!r}")
    if man.get("loss") not in LOSSES:
        raise InputError(f"--model {str(path)!r}: the manifest's loss {man.get('loss')!r} is "
                         f"not one of {', '.join(LOSSES)}")
    parties = man.get("parties")
    if not (isinstance(parties, list) and len(parties) >= 2 and all(
            isinstance(e, dict) and e.get("party") == k and not isinstance(e.get("party"), bool)
            and isinstance(e.get("file"), str) and e["file"]
            and os.path.basename(e["file"]) == e["file"] and e["file"] not in (".", "..")
            and isinstance(e.get("columns"), list) and e["columns"]
            and all(isinstance(c, str) for c in e["columns"]) for k, e in enumerate(parties))):
        raise InputError(f"--model {str(path)!r}: the manifest's parties are not a list of "
                         "parties 0..K-1 (K >= 2) with their files (names in the model "
                         "directory) and column names")
    owner = {}
    for e in parties:
        for c in e["columns"]:
            if c in owner:
                raise InputError(f"--model {str(path)!r}: the manifest lists column {c!r} at "
                                 f"party {owner[c]} and party {e['party']}")
            owner[c] = e["party"]
    lp = man.get("label_party")
    if not (isinstance(lp, int) and not isinstance(lp, bool) and 0 <= lp < len(parties)):
        raise InputError(f"--model {str(path)!r}: the manifest's label party {lp!r} is not one "
                         f"of its parties 0..{len(parties) - 1}")
    if man.get("intercept_holder", lp) != lp:
        raise InputError(f"--model {str(path)!r}: the manifest's intercept holder "
                         f"{man.get('intercept_holder')!r} is not its label party {lp}")
    return man


def read_party_model(path, party: int, columns=None, intercept=False) -> dict:
    """Party ``party``'s own model file (``party<k>.json``): ``{"columns", "coef"}`` and, with
    ``intercept`` (the label party), ``"intercept"``; checked against the run's ``columns`` of
    that party: every coefficient a finite real number, the intercept a finite real number at
    the label party and absent at every other party (an intercept there would shift every
    score).  The one reader of a party's file, in process (:func:`read_split_model`) and
    deployed (:mod:`.deployed`).  Each error names the file."""
    what = f"party {party}'s model file"
    body = _read_json(str(path), what)
    if not isinstance(body, dict):
        body = {}
    cols, coef = body.get("columns"), body.get("coef")
    if (body.get("format") != FORMAT or body.get("party") != party
            or isinstance(body.get("party"), bool)
            or not isinstance(cols, list) or not isinstance(coef, list)
            or len(cols) != len(coef) or not cols
            or not all(isinstance(c, str) for c in cols)):
        raise InputError(f"{what} {str(path)!r} does not hold party {party}'s columns and "
                         f"coefficients ({FORMAT})")
    bad = next((i for i, v in enumerate(coef) if not _real(v)), None)
    if bad is not None:
        raise InputError(f"{what} {str(path)!r}: coefficient {bad} ({cols[bad]!r}) is "
                         f"{coef[bad]!r}, not a finite number")
    c = np.asarray(coef, dtype=np.float64)
    if columns is not None and list(cols) != list(columns):
        raise InputError(f"{what} {str(path)!r} holds the columns {cols[:8]}, not the model's "
                         f"columns of party {party} {list(columns)[:8]}")
    out = {"columns": list(cols), "coef": c}
    b = body.get("intercept")
    if intercept:
        if not _real(b):
            raise InputError(f"{what} {str(path)!r} (the label party's) has no finite "
                             f"intercept (got {b!r})")
        out["intercept"] = float(b)
    elif "intercept" in body:
        raise InputError(f"{what} {str(path)!r} holds an intercept ({b!r}), but party {party} "
                         "is not the label party: only the label party holds the intercept")
    return out


def read_split_model(path) -> SplitModel:
    """The model in directory ``path``: its manifest (:func:`read_manifest`) and every party's
    file (:func:`read_party_model`, the reader a deployed party uses on its own file), each
    checked: format, party numbers, the manifest's columns, finite numbers, the intercept at
    the label party only."""
    man = read_manifest(path)
    lp = man["label_party"]
    columns, coef, intercept = [], [], None
    for k, entry in enumerate(man["parties"]):
        m = read_party_model(os.path.join(path, entry["file"]), k, entry["columns"],
                             intercept=k == lp)
        columns.append(m["columns"])
        coef.append(m["coef"])
        if k == lp:
            intercept = m["intercept"]
    return SplitModel(loss=man["loss"], label_party=lp, columns=columns, coef=coef,
                      intercept=intercept, manifest=man)
