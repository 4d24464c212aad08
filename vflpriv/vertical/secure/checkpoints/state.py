"""What a dp-bcfw-secure run holds between two rounds, as a checkpoint's ``(meta, arrays)``
(``vflpriv/vertical/checkpoint.py`` writes and reads it; docs/vertical.md, "Checkpoints of
dp-bcfw-secure").

**Server**: the round t, the public iterate x, the objective history and the evaluator's
``A x``, the selections, the previous round's signed picks, the features already released per
party, the counters, the meter, and the dealer's key state (the matrix-mask keys of U_k and the
key counter of a seeded :class:`~.ring.KeySource`).

**Each party**: its noise generator's ``bit_generator.state``, its iterate x_k, u_k = A_k x_k,
its cross term c_k, its released cross-products c_kj (keyed by holder and feature), A_k^T y +
noise when it holds no label, its selected set, the (holder, feature) products it has served as
its helpee's helper (each is served once in a run), and its own ledger's records (the in-process
parties keep theirs in memory).  A party of the logistic path (``glm/party.py``) holds no
cross-products: its generator, x_k, u_k, its key counter and its ledger's records.

**Not held**: the masked block E_l = A_l - U_l (mod 2^64) of its helpee l.  They are a deterministic function of
the data and the matrix-mask keys, so a resume recomputes them by re-running the offline phase
(and then restores the meter, so its bytes are counted once).  Measured at n = 1e4, d = 200,
K = 4 (``vflpriv bench secure``, docs/vertical.md): recomputing them with the setup takes
0.031-0.039 s, writing them once would take 0.017-0.034 s (16 MB) and reading them back
0.007 s: no real gain, for a second file as secret as the data that would have to be kept
consistent with the checkpoint (481 kB).

The checkpoint holds every party's noise generator state and the dealer's keys: whoever reads
it can remove the noise of every release and unmask every masked block.  It is as secret as the
data (the file is written with mode 0600).  In process the server and the parties are one
program, so one file holds them all.  Over a link (``backend`` local, flower-sim, flower) the
server's checkpoint holds the server's part only, and each party saves its own part (without its
ledger, which stays in its own file) on its own disk: ``checkpoints/saves.py``.
"""
from __future__ import annotations

import numpy as np

from ....errors import InputError
from ....noise import restore as noise_restore
from ....noise import state as noise_state


class RoundState:
    """The server's loop state of :func:`~.loop.run_secure` (and of
    :func:`~.glm_run.run_secure_glm`, which uses neither ``chosen``, ``released`` nor ``products``)."""

    def __init__(self, K, d, stage="start"):
        self.stage = stage                 # "start": nothing released yet; "ready": set up
        self.t = 0
        self.x = np.zeros(d)
        self.history, self.selections = [], []
        self.prev = [0] * K
        self.chosen = [set() for _ in range(K)]
        self.released = [0] * K
        self.products = 0
        self.intercept_sums = None         # (noisy sum of y, noisy column sums): the intercept
        self.intercepts = []               # b after every round (least squares' intercept)


def _meter_state(meter):
    return {"rows": [[p, dr, t, *row] for (p, dr), rounds in meter._rows.items()
                     for t, row in rounds.items()],
            "by_type": {k: list(v) for k, v in meter.by_type.items()}}


def _restore_meter(meter, st):
    """Replace ``meter``'s counts by the saved ones (the recomputed offline phase included)."""
    meter._rows.clear()
    meter.by_type.clear()
    for p, dr, t, pay, framed, msgs in st["rows"]:
        meter._rows[(int(p), dr)][int(t)] = [int(pay), int(framed), int(msgs)]
    for k, v in st["by_type"].items():
        meter.by_type[k] = [int(x) for x in v]


def _ledger_state(budget):
    if budget is None:
        return None
    return [{"event": r.event.to_dict(), "party": r.party, "round": r.round, "note": r.note}
            for r in budget.ledger.records]


def _restore_ledger(budget, records):
    from accounting.events import event_from_dict

    if budget is None or records is None:
        return
    if budget.ledger.records:
        raise InputError("resume: a party's ledger is not empty before its records are restored")
    for r in records:
        budget.ledger.append(event_from_dict(r["event"]), party=r["party"], round=r["round"],
                             note=r["note"])


def party_state(p):
    """``(meta, arrays)`` of one party between two rounds: a :class:`~.protocol.SecureParty`
    (least squares) or a :class:`~.glm.GlmParty` (logistic: no cross-products; its own key
    counter instead)."""
    if not hasattr(p, "cross"):
        meta = {"rng": noise_state(p.rng),
                "key_counter": int(p.keys._counter), "ledger": _ledger_state(p.budget),
                "intercept": p.b}
        return meta, {"x": p.x, "u": p.u}
    keys = sorted(p.cross)
    meta = {"rng": noise_state(p.rng),
            "selected": [int(i) for i in p.selected], "has_ty": p.ty is not None,
            "helped": sorted([int(l), int(i)] for l, i in p._helped),
            "ledger": _ledger_state(p.budget), "intercept": float(p.intercept)}
    arrays = {"x": p.x, "u": p.u, "c": p.c,
              "cross_keys": np.asarray(keys, dtype=np.int64).reshape(len(keys), 2),
              "cross_values": (np.stack([p.cross[k] for k in keys]) if keys
                               else np.zeros((0, p.p)))}
    if p.ty is not None:
        arrays["ty"] = p.ty
    return meta, arrays


def set_party_state(p, meta, arrays):
    if (p.rng is None) != (meta["rng"] is None):
        raise InputError("resume: the checkpoint's party noise generators do not match the run "
                         "(private or not)")
    if p.rng is not None:
        noise_restore(p.rng, meta["rng"])
    if not hasattr(p, "cross"):                       # GlmParty
        p.keys._counter = int(meta["key_counter"])
        p.x, p.u = (np.array(arrays[a], dtype=np.float64) for a in ("x", "u"))
        if (p.b is None) != (meta.get("intercept") is None):
            raise InputError("resume: the checkpoint's run and this one differ in the intercept")
        p.b = meta.get("intercept")
        _restore_ledger(p.budget, meta["ledger"])
        return
    p.selected = [int(i) for i in meta["selected"]]
    for a in ("x", "u", "c"):
        setattr(p, a, np.array(arrays[a], dtype=np.float64))
    p.cross = {(int(l), int(i)): np.array(v, dtype=np.float64)
               for (l, i), v in zip(arrays["cross_keys"], arrays["cross_values"])}
    p.ty = np.array(arrays["ty"], dtype=np.float64) if meta["has_ty"] else None
    p.intercept = float(meta.get("intercept", 0.0))
    p._helped = {(int(l), int(i)) for l, i in meta.get("helped", ())}
    _restore_ledger(p.budget, meta["ledger"])


class Snapshot:
    """What :class:`vflpriv.vertical.checkpoint.Checkpointer` is handed: the round ``t`` and
    :meth:`get_state`.  The stage ``start`` (written before anything is charged) holds only the
    key state and the generators' initial states; ``ready`` (after the offline phase and the
    label release, and after every round) holds everything above."""

    def __init__(self, run, parties, link, keys, dealer, evaluation):
        self.run, self.parties, self.link = run, parties, link
        self.keys, self.dealer, self.ev = keys, dealer, evaluation

    @property
    def t(self):
        return self.run.t

    def get_state(self):
        run = self.run
        meta = {"stage": run.stage, "t": run.t,
                "keys": {"mask": [k.hex() for k in self.dealer.mask_keys],
                         "counter": int(self.keys._counter)},
                "selections": [[[int(l), int(g), int(s)] for l, g, s in sel]
                               for sel in run.selections],
                "prev": [int(v) for v in run.prev],
                "chosen": [sorted(int(i) for i in c) for c in run.chosen],
                "released": [int(v) for v in run.released], "products": int(run.products),
                "meter": _meter_state(self.link.meter), "peer_bytes": int(self.link.peer_bytes),
                "parties": []}
        arrays = {"x": run.x, "history": np.asarray(run.history, dtype=np.float64)}
        if run.intercept_sums is not None:
            meta["intercept_label_sum"] = float(run.intercept_sums[0])
            arrays["intercept_sums"] = run.intercept_sums[1]
        if run.intercepts:
            arrays["intercepts"] = np.asarray(run.intercepts, dtype=np.float64)
        if self.ev is not None:
            arrays["eval_u"] = self.ev.u
        for p in self.parties or ():     # None over a link: each party saves its own state
            pm, pa = party_state(p)
            meta["parties"].append(pm)
            arrays.update({f"party{p.k}_{a}": v for a, v in pa.items()})
        return meta, arrays


def restore_keys(meta, keys, dealer):
    """The dealer's matrix-mask keys and the key counter, before any key of the run is drawn
    again (an unseeded run's keys are OS entropy: only the checkpoint has them)."""
    st = meta["keys"]
    masks = [bytes.fromhex(h) for h in st["mask"]]
    if len(masks) != len(dealer.mask_keys):
        raise InputError(f"resume: the checkpoint has {len(masks)} parties' mask keys, the run "
                         f"has {len(dealer.mask_keys)} parties")
    dealer.mask_keys = masks
    keys._counter = int(st["counter"])


def restore(meta, arrays, run, parties, link, evaluation):
    """Restore a ``ready`` state (after the offline phase has been recomputed)."""
    run.stage, run.t = "ready", int(meta["t"])
    run.x = np.array(arrays["x"], dtype=np.float64)
    run.history = [float(v) for v in arrays["history"]]
    run.selections = [[(int(l), int(g), int(s)) for l, g, s in sel] for sel in meta["selections"]]
    run.prev = [int(v) for v in meta["prev"]]
    run.chosen = [set(int(i) for i in c) for c in meta["chosen"]]
    run.released = [int(v) for v in meta["released"]]
    run.products = int(meta["products"])
    if "intercept_sums" in arrays:
        run.intercept_sums = (float(meta["intercept_label_sum"]),
                              np.array(arrays["intercept_sums"], dtype=np.float64))
    if "intercepts" in arrays:
        run.intercepts = [float(v) for v in arrays["intercepts"]]
    if evaluation is not None:
        evaluation.u = np.array(arrays["eval_u"], dtype=np.float64)
    if parties is None:             # over a link: each party restores its own state (remote)
        meta = dict(meta, parties=[])
        parties = []
    if len(meta["parties"]) != len(parties):
        raise InputError(f"resume: the checkpoint has {len(meta['parties'])} parties, the run "
                         f"has {len(parties)}")
    for p, pm in zip(parties, meta["parties"]):
        pre = f"party{p.k}_"
        set_party_state(p, pm, {k[len(pre):]: v for k, v in arrays.items()
                                if k.startswith(pre)})
    _restore_meter(link.meter, meta["meter"])
    getattr(link, "net", link).peer_bytes = int(meta["peer_bytes"])   # LocalParties or Network
