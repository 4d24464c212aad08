"""A deployed vertical run from the parties' own files: alignment, then training, over one link.

Family ``align`` (:mod:`vflpriv.runtime.families`).  The run description is written from the
parties' public schemas (:mod:`.schema`; ``vflpriv flower spec run --party-schema``): the
options, the parties' column names, the label party, the server's ledger; each party's node
config names its own file and ID column (``data``, ``id-column``; ``label`` at the label party).
No machine ever holds the joined table, and nothing is read from a row before the run.

The server role (:func:`serve`) runs, over the one link the run has:

1. the private set intersection (:mod:`.phase`): each party reads its own file, the server
   relays and meters the PSI frames and learns n = |C|;
2. the run settled for n (:func:`vflpriv.vertical.secure.planned.settle_for`): the noise
   calibrated from n, the whole worst-case plan checked against the server's ledger, before
   any noise is drawn;
3. the training, by the least-squares or logistic server role of dp-bcfw-secure, unchanged;
   each party's role reads its columns of the common rows from its own disk.

The result holds the training's fields and ``alignment`` (intersection size, the sizes of the
parties' sets, framed bytes per party and direction, the Flower bytes of the phase, seconds).

A party's role (:class:`AlignedParty`) is this family's for every message of such a run: a node
config that names an ``id-column`` holds a table to be aligned first.  In the PSI phase it is a
:class:`~.phase.PsiPhase`; afterwards it is the training family's role, built from the node
config with ``data`` replaced by the party's aligned file (:func:`~.phase.aligned_path`), which
it deletes when the server closes the run.
"""
from __future__ import annotations

import os
import time

from ..runtime.roles import PartyRole
from .phase import PsiPhase, aligned_path, record_failure, serve_psi

FAMILY = "align"


class _Connected:
    """The run's link, already connected: the training's server role calls ``connect`` again."""

    def __init__(self, link):
        self.link = link

    def connect(self, identify=b""):
        return None

    def __getattr__(self, name):
        return getattr(self.link, name)


def _flower_bytes(meter):
    return {"uplink": meter.total("uplink"), "downlink": meter.total("downlink")}


def serve(connect, spec, progress=None) -> dict:
    """The server role of a run described by :func:`make_spec` (see module docstring)."""
    from ..runtime.families import roles
    from ..vertical.secure.planned import preflight, settle_for

    K = len(spec["columns"])
    link = connect(K)
    out = {"t": 0, "error": None}
    phase = None
    try:
        link.connect(b"")
        before, t0 = _flower_bytes(link.meter), time.perf_counter()
        setup = {"family": FAMILY, "run_id": spec["run_id"], "leader": spec["leader"],
                 "columns": spec["columns"], "loss": spec["config"]["loss"],
                 "bounds": [spec["config"]["feature_bound"], spec["config"]["label_bound"]],
                 "ranges": spec.get("ranges")}
        # the budget before the alignment: the server's ledger now, every party's own at the
        # PSI's setup, before any party sends a point of its IDs (nothing is revealed by a
        # run that is then refused; issue 51)
        phase = "budget"
        setup["plan"] = preflight(spec["config"], spec["blocks"], ledger=spec["ledger"],
                                  run_id=spec["run_id"]).to_dict()
        setup["accountant"] = spec["config"].get("accountant")
        phase = "alignment"
        psi = serve_psi(link, setup)
        after = _flower_bytes(link.meter)
        report = alignment_report(psi, int(spec["leader"]), time.perf_counter() - t0,
                                  {d: after[d] - before[d] for d in after})
        phase = "calibration"
        inner = settle_for(spec["config"], psi["n"], spec["blocks"], ledger=spec["ledger"],
                           run_id=spec["run_id"], connect_timeout=spec["connect_timeout"],
                           reply_timeout=spec["reply_timeout"])
    except Exception as exc:
        record_failure(out, exc, phase, link)
        out["flower"] = link.meter.summary(K)
        out["flower_totals"] = link.meter.totals()
        return out
    serve_training, _ = roles(inner["family"])
    res = serve_training(lambda K: _Connected(link), inner, progress)
    res["alignment"] = report
    res["n"] = psi["n"]
    if spec.get("model_out") and res.get("error") is None and "x" in res:
        res["model_out"] = _write_model(spec, res)
    res["family"] = inner["family"]
    res["calibration"] = _calibration(inner)
    return res


def _calibration(inner) -> dict:
    """What the training was calibrated to: least squares' noise plan, or the logistic paths'
    sigma and row clips (the ssp path's in the data's units, with its public scale s)."""
    from ..vertical.secure import paths

    return paths.of_family(inner["family"]).calibration(inner)


def _write_model(spec, res):
    """The trained split model, written by the server at the end of the run (``spec
    ["model_out"]``, ``vflpriv flower spec run --model-out``): each party's own coefficients in
    ``party<k>.json`` (the label party's also the intercept) and the public manifest; every
    coefficient is already known to the server (the Frank-Wolfe selections are public, 4.2 /
    5.4; the ssp path's model is the server's post-processing of its one release, 4.10), so
    nothing new is released.  A folder that cannot be written is reported in the
    result, never a lost run."""
    from ..model.files import write_split_model

    names = [c for cols in spec["columns"] for c in cols]
    coef = res["x"]
    if spec.get("ranges"):                     # fitted on the scaled columns: raw units
        import numpy as np

        from ..data.ranges import scale_factors, to_raw

        factors = np.empty(len(coef))
        for b, rng in zip(spec["blocks"], spec["ranges"]):
            factors[np.asarray(b, dtype=np.intp)] = scale_factors(*np.asarray(rng, float).T)
        coef = to_raw(coef, factors)
    try:
        return write_split_model(spec["model_out"], coef=coef, blocks=spec["blocks"],
                                 names=names, intercept=res.get("intercept"),
                                 label_party=spec["leader"], loss=spec["config"]["loss"],
                                 extra=_privacy_record(spec))
    except Exception as exc:                   # the run's result is kept either way
        return {"error": f"{type(exc).__name__}: {exc}"}


def _privacy_record(spec) -> dict:
    """The manifest's record of the run, as the in-process ``vflpriv run --model-out`` writes
    it: the algorithm, the ID column and label (public names, from the schemas), this run's
    epsilon spent at its delta (the server's ledger's records of this run id, read by the
    accountants the run reports; computed here, at run time), and that it was deployed."""
    from ..vertical.solution import REPORT_ACCOUNTANTS, run_spend

    delta = float(spec["config"]["delta"])
    spent = run_spend(spec["ledger"], spec["run_id"], delta,
                      spec["config"].get("report_accountants") or REPORT_ACCOUNTANTS)[0]
    return {"run_id": spec["run_id"], "algorithm": "dp-bcfw-secure",
            "id_column": spec.get("id_column"), "label": spec.get("label"),
            "epsilon_spent": spent, "delta": delta, "deployment": True}


def alignment_report(psi, leader, seconds, flower) -> dict:
    """The JSON ``alignment`` of a deployed run (the in-process report's fields, and the Flower
    bytes of the phase)."""
    from . import PROTOCOL
    from .psi import TAG_BYTES

    m, K = psi["meter"], len(psi["sizes"])
    return {"protocol": PROTOCOL, "leader": leader, "intersection_size": psi["n"],
            "party_rows": list(psi["sizes"]), "bytes": m.framed_bytes(K),
            "flower_bytes": flower, "seconds": round(seconds, 4),
            "party_seconds": [round(s, 4) for s in psi["party_seconds"]],
            "tag_bytes": TAG_BYTES,
            "messages_by_type": {k: list(v) for k, v in m.by_type.items()}}


def make_spec(*, columns, leader, config, ledger, run_id, connect_timeout=60.0,
              reply_timeout=600.0) -> dict:
    """The server's description of an aligned run: the parties' column names (public, from
    their schemas), the label party, the run's options (``planned.config_options``, eta a
    number), the server's ledger, the run id; data only."""
    blocks, start = [], 0
    for cols in columns:
        blocks.append(list(range(start, start + len(cols))))
        start += len(cols)
    return {"family": FAMILY, "columns": [list(c) for c in columns], "blocks": blocks,
            "leader": int(leader), "config": dict(config), "ledger": ledger, "run_id": run_id,
            "iterations": int(config["iterations"]), "private": True,
            "connect_timeout": float(connect_timeout), "reply_timeout": float(reply_timeout)}


# -- party side --------------------------------------------------------------------------------
class AlignedParty(PartyRole):
    """Party k of an aligned run (see module docstring)."""

    def __init__(self, cfg, setup):
        from ..runtime.families import roles

        self.cfg, self.setup = cfg, setup
        self.k = int(cfg["party"])
        self.path = aligned_path(cfg, setup.get("run_id"), self.k)
        if setup.get("family") == FAMILY:
            self.psi, self.inner = PsiPhase(cfg, setup), None
        else:
            self.psi = None
            self.inner = roles(setup["family"])[1](dict(cfg, data=self.path), setup)

    def handle(self, kind, frame, round):
        if kind == "close":
            reply = ("ok", b"") if self.inner is None else self.inner.handle(kind, frame, round)
            if os.path.exists(self.path):
                os.remove(self.path)
            return reply
        if self.inner is not None:
            return self.inner.handle(kind, frame, round)
        return self.psi.handle(kind, frame)

    def get_state(self):
        return self.inner.get_state() if self.inner is not None else dict(self.psi.state)

    def set_state(self, state):
        if self.inner is not None:
            self.inner.set_state(state)
        else:
            self.psi.state.update(state)
