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


def read_manifest(path) -> dict:
    """The public manifest of the model in directory ``path``, checked: its format, at least
    two parties numbered 0..K-1 each with a list of column names, a label party among them.
    What a deployment's description is written from (the party files stay with the parties)."""
    if not os.path.isdir(str(path)):
        raise InputError(f"--model {str(path)!r} is not a directory written by --model-out")
    man = _read_json(os.path.join(path, MANIFEST), "--model manifest")
    if not isinstance(man, dict) or man.get("format") != FORMAT:
        got = man.get("format") if isinstance(man, dict) else None
        raise InputError(f"--model {str(path)!r}: manifest format {got!r} is not {FORMAT!r}")
    parties = man.get("parties")
    if not (isinstance(parties, list) and len(parties) >= 2 and all(
            isinstance(e, dict) and e.get("party") == k and isinstance(e.get("file"), str)
            and isinstance(e.get("columns"), list) and e["columns"]
            and all(isinstance(c, str) for c in e["columns"]) for k, e in enumerate(parties))):
        raise InputError(f"--model {str(path)!r}: the manifest's parties are not a list of "
                         "parties 0..K-1 (K >= 2) with their files and column names")
    lp = man.get("label_party")
    if not (isinstance(lp, int) and 0 <= lp < len(parties)):
        raise InputError(f"--model {str(path)!r}: the manifest's label party {lp!r} is not one "
                         f"of its parties 0..{len(parties) - 1}")
    return man


def read_party_model(path, party: int, columns=None, intercept=False) -> dict:
    """Party ``party``'s own model file (``party<k>.json``): ``{"columns", "coef"}`` and, with
    ``intercept`` (the label party), ``"intercept"``; checked against the run's ``columns`` of
    that party.  Each error names the file."""
    what = f"party {party}'s model file"
    body = _read_json(str(path), what)
    if not isinstance(body, dict):
        body = {}
    cols, coef = body.get("columns"), body.get("coef")
    if (body.get("format") != FORMAT or body.get("party") != party
            or not isinstance(cols, list) or not isinstance(coef, list)
            or len(cols) != len(coef)):
        raise InputError(f"{what} {str(path)!r} does not hold party {party}'s columns and "
                         f"coefficients ({FORMAT})")
    c = np.asarray(coef, dtype=np.float64)
    if not np.all(np.isfinite(c)):
        raise InputError(f"{what} {str(path)!r}: its coefficients are not finite")
    if columns is not None and [str(x) for x in cols] != list(columns):
        raise InputError(f"{what} {str(path)!r} holds the columns {cols[:8]}, not the model's "
                         f"columns of party {party} {list(columns)[:8]}")
    out = {"columns": [str(x) for x in cols], "coef": c}
    if intercept:
        b = body.get("intercept")
        if not isinstance(b, (int, float)) or not math.isfinite(b):
            raise InputError(f"{what} {str(path)!r} (the label party's) has no finite "
                             "intercept")
        out["intercept"] = float(b)
    return out


def read_split_model(path) -> SplitModel:
    """The model in directory ``path`` (every file checked: format, party numbers, columns)."""
    if not os.path.isdir(str(path)):
        raise InputError(f"--model {str(path)!r} is not a directory written by --model-out")
    man = _read_json(os.path.join(path, MANIFEST), "--model manifest")
    if man.get("format") != FORMAT:
        raise InputError(f"--model {str(path)!r}: manifest format {man.get('format')!r} is "
                         f"not {FORMAT!r}")
    columns, coef, intercept = [], [], None
    for k, entry in enumerate(man.get("parties", [])):
        body = _read_json(os.path.join(path, os.path.basename(entry["file"])),
                          f"--model party file of party {k}")
        if body.get("party") != k or len(body.get("coef", [])) != len(body.get("columns", [])):
            raise InputError(f"--model {str(path)!r}: party file {entry['file']!r} does not "
                             f"hold party {k}'s columns and coefficients")
        c = np.asarray(body["coef"], dtype=np.float64)
        if not np.all(np.isfinite(c)):
            raise InputError(f"--model {str(path)!r}: party {k}'s coefficients are not finite")
        columns.append([str(x) for x in body["columns"]])
        coef.append(c)
        if "intercept" in body:
            intercept = float(body["intercept"])
    if len(coef) < 2:
        raise InputError(f"--model {str(path)!r}: the manifest lists {len(coef)} parties")
    lp = int(man.get("label_party", 0))
    if not 0 <= lp < len(coef) or intercept is None:
        raise InputError(f"--model {str(path)!r}: the label party {lp} has no intercept file")
    return SplitModel(loss=str(man.get("loss")), label_party=lp, columns=columns, coef=coef,
                      intercept=intercept, manifest=man)
