"""What a deployed run's ServerApp leaves for people and scripts: ``result.json`` beside the
run description, and one line in its log.

The ServerApp's full result (``result.pkl``: the server role's objects, read back by the
launcher of ``--backend flower``) is for vflpriv itself.  ``result.json`` is data only: the
run id and family, the error (``kind``, ``party``, ``phase``, ``reason``) or null, the rounds
completed, the model the server holds (``x``, ``intercept``), the intersection of an aligned
run, the bytes on the Flower link, and the privacy spend of this run: epsilon by accountant at
the run's delta, computed at the end of the run from the server's ledger's records of this run
id (never a stored figure).  :func:`summary` makes it, :func:`log_line` says it in one line.
"""
from __future__ import annotations

import json
import math
import os

import numpy as np


def _plain(v):
    """``v`` as JSON data (arrays as lists, numpy scalars as numbers; anything else dropped)."""
    if isinstance(v, dict):
        pairs = ((str(k), _plain(x)) for k, x in v.items())
        return {k: x for k, x in pairs if x is not _DROP}
    if isinstance(v, (list, tuple)):
        return [x for x in (_plain(y) for y in v) if x is not _DROP]
    if isinstance(v, np.ndarray):
        return _plain(v.tolist())
    if isinstance(v, (np.integer, np.floating, np.bool_)):
        return _plain(v.item())
    if isinstance(v, float):
        return v if math.isfinite(v) else str(v)
    if v is None or isinstance(v, (str, bool, int)):
        return v
    return _DROP


_DROP = object()


def _delta(spec):
    if spec.get("config") and spec["config"].get("delta") is not None:
        return float(spec["config"]["delta"])
    budget = spec.get("budget")
    if isinstance(budget, (list, tuple)) and len(budget) == 2:
        return float(budget[1])
    return None


def privacy(spec) -> dict | None:
    """This run's spend from the server's ledger (None for a run without one)."""
    ledger, delta = spec.get("ledger"), _delta(spec)
    if not ledger or delta is None or not os.path.exists(ledger):
        return None
    from ..vertical.solution import run_spend

    values, best, n = run_spend(ledger, spec.get("run_id"), delta)
    if n == 0:
        return {"epsilon_spent": values, "delta": delta, "releases": 0}
    return {"epsilon_spent": values, "best_accountant": best, "delta": delta, "releases": n}


def summary(spec, out) -> dict:
    """``result.json``'s object (module docstring)."""
    doc = {"run_id": spec.get("run_id"), "family": out.get("family", spec.get("family")),
           "error": _plain(out.get("error")), "rounds": _plain(out.get("t")),
           "n": _plain(out.get("n", spec.get("n")))}
    for key in ("x", "intercept", "alignment", "calibration", "model_out", "flower_totals",
                "released"):
        if key in out:
            doc[key] = _plain(out[key])
    doc["privacy"] = privacy(spec)
    return doc


def log_line(doc) -> str:
    """One line for the ServerApp's log: what happened and what was spent."""
    rid = (doc.get("run_id") or "")[:12]
    err = doc.get("error")
    spent = doc.get("privacy") or {}
    eps = (spent.get("epsilon_spent") or {}).get("best")
    money = "" if eps is None else f"; epsilon spent {eps:.4g} at delta {spent['delta']:g}"
    if err:
        who = "" if err.get("party") is None else f" party {err['party']}"
        phase = f" in phase {err['phase']}" if err.get("phase") else ""
        return (f"vflpriv: run {rid} stopped{phase}:{who} {err.get('kind')}: "
                f"{err.get('reason')}{money}")
    n = f", {doc['n']} rows" if doc.get("n") is not None else ""
    return f"vflpriv: run {rid} finished ({doc.get('family')}{n}){money}"


def write(spec, out, path) -> dict:
    """Write ``result.json`` at ``path`` (atomically); returns its object."""
    doc = summary(spec, out)
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(doc, fh, indent=1, sort_keys=True)
        fh.write("\n")
    os.replace(tmp, path)
    return doc
