"""Scoring with a split model, deployed: each party on its own node, from its own files.

Family ``predict`` (:mod:`vflpriv.runtime.families`).  The run description is written from the
model's public manifest and the parties' public schemas (``vflpriv flower spec predict``): the
parties' model columns, the label party L, the loss; **no coefficient and no row**.  Each
party's node config names its own model file (``model-file``: its ``party<k>.json``), its own file
of new rows (``data``) and its ID column (``id-column``); L's also where it writes the scores
(``scores-file``) and whether it releases them to the server (``release-scores``, default no).

The server role (:func:`serve`) runs, over the one link the run has:

1. the private set intersection of :mod:`vflpriv.align.phase` (four exchanges): each party
   reads its new rows (the model's columns of that party; other columns ignored) and keeps its
   rows of the common IDs, in L's order, on its own disk; the server relays and meters the
   frames and learns n = |C|;
2. the secure sum of :mod:`.scoring`, its three steps each on its party's node (two more
   exchanges): every party j != L makes a key pair and answers its public key (``ScoreKey``)
   with the PSI's last reply, and the server forwards it to the other parties j' != L; each j
   answers its masked partial margin (``MaskedMargin``), which the server forwards to L; L adds
   them, adds its own margin and the intercept, and writes the ids and scores to its
   ``scores-file`` (and answers them only if its node config says ``release-scores = true``).
   Each party deletes its aligned rows after their last use; after a failure the server asks
   every party that still answers to delete them (``close``).

The server sees the public keys, the masked words (uniform in Z_2^64 when K - 1 >= 2: it holds
no mask key) and, only if L releases them, the scores.  The public keys are pinned as in training
(:mod:`vflpriv.runtime.keys`, purpose ``scoring``): a party j != L whose node config names its
``identity-key`` signs its ``ScoreKey``, and one with ``peer-fingerprints`` refuses, before its
margin, a peer's key not signed by that peer's pinned identity for this run (a server that
substituted a key would otherwise read the margin it relays).  A node config written with
``--unpinned`` (``unpinned = true``), or a party of the secure sum without pins, warns in the
node's log.  A party j refuses to send its margin
unless it got the key of every other party j' != L (a server that dropped a key would
otherwise make j's margin go out less masked).  Every frame is the in-process frame, so the
bytes (``alignment`` and ``scoring``) are those of ``vflpriv predict`` in process.
"""
from __future__ import annotations

import json
import os
import time

import numpy as np

from ..align.phase import SECONDS, PsiPhase, aligned_path, record_failure, relay, split_seconds
from ..errors import InputError
from ..runtime.roles import PartyRole, Refused

FAMILY = "predict"
PSI_KINDS = ("setup", "psi_points", "psi_match", "psi_rows")


def _bundle():
    from ..vertical.secure.mpc.channel import pack_bundle, unpack_bundle

    return pack_bundle, unpack_bundle


def make_spec(*, manifest, run_id, connect_timeout=60.0, reply_timeout=600.0) -> dict:
    """The server's description of a scoring run, from the model's public manifest (data
    only: the parties' column names, the label party, the loss)."""
    return {"family": FAMILY, "columns": [list(p["columns"]) for p in manifest["parties"]],
            "leader": int(manifest["label_party"]), "loss": str(manifest.get("loss")),
            "run_id": run_id, "connect_timeout": float(connect_timeout),
            "reply_timeout": float(reply_timeout)}


def party_config(k, *, data, id_column, model, leader, scores=None, release=False) -> dict:
    """Party k's node config for a scoring run (see module docstring)."""
    cfg = {"party": int(k), "data": data, "id-column": id_column, "model-file": model}
    if k == leader:
        if scores:
            cfg["scores-file"] = scores
        cfg["release-scores"] = bool(release)
    return cfg


# -- server side -------------------------------------------------------------------------------
def _flower_bytes(meter):
    return {"uplink": meter.total("uplink"), "downlink": meter.total("downlink")}


def serve(connect, spec, progress=None) -> dict:
    """The server role of a run described by :func:`make_spec` (see module docstring)."""
    from ..align.deployed import alignment_report
    from ..align.phase import serve_psi

    K, L = len(spec["columns"]), int(spec["leader"])
    link = connect(K)
    out = {"t": 0, "error": None, "released": False}
    phase = None
    try:
        link.connect(b"")
        phase = "alignment"
        before, t0 = _flower_bytes(link.meter), time.perf_counter()
        setup = {"family": FAMILY, "run_id": spec["run_id"], "leader": L,
                 "columns": spec["columns"], "loss": spec["loss"]}
        psi = serve_psi(link, setup)
        after = _flower_bytes(link.meter)
        out["alignment"] = alignment_report(psi, L, time.perf_counter() - t0,
                                            {d: after[d] - before[d] for d in after})
        out["n"] = psi["n"]
        phase = "scoring"
        out["scoring"], released = serve_scoring(link, K, L, psi["tail"])
        if released is not None:
            out.update(released, released=True)
        out["t"] = 1
    except Exception as exc:
        record_failure(out, exc, phase, link)
    out["flower"] = link.meter.summary(K)
    out["flower_totals"] = link.meter.totals()
    return out


def serve_scoring(link, K, L, offers) -> tuple:
    """The secure sum over ``link``, every frame relayed and metered as in process
    (:func:`vflpriv.model.scoring.secure_scores`); ``offers``: each party j's answer to the
    PSI's last exchange, which carries its key offer (``ScoreKey``) when K - 1 >= 2, so the sum
    takes two exchanges more (the masked margins, L's sum).  Returns ``(report, released)``
    (``released``: L's ids and scores if it released them, else None)."""
    from ..vertical.transport import Meter
    from . import messages as M

    pack, unpack = _bundle()
    meter, secs = Meter(), [0.0] * K
    others = [j for j in range(K) if j != L]
    t_start = time.perf_counter()
    before = _flower_bytes(link.meter)

    def split(k, reply):
        return split_seconds(unpack(reply), secs, k)

    def relayed(src, dst, frame, expect):
        relay(meter, M.decode, src, dst, frame, expect, own=True)
        return frame

    public = {}
    for j in others:                          # pairwise keys among the parties other than L
        if len(offers.get(j, [])) != (len(others) > 1):
            raise RuntimeError(f"party {j} answered {len(offers.get(j, []))} key offers to its "
                               f"positions, not {int(len(others) > 1)}")
        if len(others) > 1:
            public[j] = relayed(j, [b for b in others if b != j], offers[j][0], M.ScoreKey)
    replies = link.exchange([(j, pack([(b, public[b]) for b in others if b in public and b != j]),
                              "score_margin") for j in others], 0)
    masked = []
    for j, r in zip(others, replies):
        (f,) = split(j, r)
        masked.append((j, relayed(j, [L], f, M.MaskedMargin)))
    (reply,) = link.exchange([(L, pack(masked), "score_sum")], 0)
    got = split(L, reply)
    after = _flower_bytes(link.meter)
    report = {"bytes": meter.framed_bytes(K),
              "flower_bytes": {d: after[d] - before[d] for d in after},
              "seconds": round(time.perf_counter() - t_start, 4),
              "party_seconds": [round(s, 4) for s in secs],
              "masked": len(others) > 1,
              "messages_by_type": {k: list(v) for k, v in meter.by_type.items()}}
    return report, (json.loads(got[0].decode()) if got else None)


# -- party side --------------------------------------------------------------------------------
class _ScoringPsi(PsiPhase):
    """The PSI phase on new rows: the party's file read with the model's columns of that party
    (others ignored, as in process); the common rows' columns (and, at L, their IDs) kept.  A
    party j != L answers its positions with its key offer for the secure sum when there is a
    peer to mask with (one exchange fewer than a separate key round)."""

    def table(self):
        from ..align.tables import read_party_table

        k = self.k
        return read_party_table(k, self.cfg["data"], self.cfg.get("id-column"),
                                columns=list(self.setup["columns"][k]))

    def _psi_rows(self, frame):
        from . import messages as M
        from .scoring import key_pair

        from ..runtime.keys import load_identity_of, make_offer

        super()._psi_rows(frame)
        if len(self.setup["columns"]) - 1 < 2:
            return []
        private, public = key_pair()
        self.state["score_key"] = private
        # signed by its identity key when its node config names one (pinned, as in training)
        offer = make_offer(public, load_identity_of(self.cfg, self.k, Refused),
                           self.setup.get("run_id") or "", self.k, purpose="scoring")
        return [(self.k, M.encode(M.ScoreKey(offer), self.k, 0))]

    def _keep(self, t, rows):
        path = aligned_path(self.cfg, self.setup.get("run_id"), self.k)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = path[:-4] + ".tmp.npz"
        ids = np.array([t.ids[int(r)] for r in rows] if self.k == self.leader else [], dtype=str)
        np.savez(tmp, X=t.X[rows], ids=ids)
        os.replace(tmp, path)


def _release(cfg) -> bool:
    v = cfg.get("release-scores", False)
    return v is True or str(v).strip().lower() == "true"


def write_scores(path, scores: dict) -> str:
    """L's ids and scores as JSON at ``path``, written whole (a temporary sibling renamed)."""
    tmp = f"{path}.tmp"
    with open(tmp, "w") as fh:
        json.dump(scores, fh, indent=1)
        fh.write("\n")
    os.replace(tmp, path)
    return path


class ScoringParty(PartyRole):
    """Party k of a scoring run (see module docstring): a node config that names a model file
    (``model-file``) scores with it, and takes part in no other run."""

    def __init__(self, cfg, setup):
        self.cfg, self.setup = cfg, setup
        self.k = int(cfg["party"])
        if setup.get("family") != FAMILY:
            raise Refused(f"party {self.k}'s node config names a model file (model-file=...): it "
                          f"scores new rows and takes no {setup.get('family')!r} run")
        self.leader = int(setup["leader"])
        self.K = len(setup["columns"])
        self.path = aligned_path(cfg, setup.get("run_id"), self.k)
        self.psi = _ScoringPsi(cfg, setup)
        self.state = self.psi.state
        self.state.setdefault("score_key", None)

    def model(self) -> dict:
        from .files import read_party_model

        if not self.cfg.get("model-file"):
            raise Refused(f"party {self.k}'s node config names no model file (model-file=...)")
        return read_party_model(self.cfg["model-file"], self.k, self.setup["columns"][self.k],
                                intercept=self.k == self.leader)

    def _check_outputs(self):
        """At L: where the scores go, checked before anything is sent."""
        out = self.cfg.get("scores-file")
        if not out and not _release(self.cfg):
            raise Refused(f"party {self.k} (the label party) has nowhere to put the scores: its "
                          "node config needs scores-file=PATH or release-scores=true")
        if out:
            folder = os.path.dirname(os.path.abspath(out))
            if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
                raise InputError(f"party {self.k}'s scores file {out!r}: its folder {folder!r} "
                                 "is not a writable folder")
            if os.path.isdir(out):
                raise InputError(f"party {self.k}'s scores file {out!r} is a folder")

    def handle(self, kind, frame, round):
        if kind == "close":
            if os.path.exists(self.path):
                os.remove(self.path)
            return "ok", b""
        if kind == "setup":                 # its model file and outputs checked first
            self.model()
            if self.k == self.leader:
                self._check_outputs()
            self._warn_unpinned()
        if kind in PSI_KINDS:
            return self.psi.handle(kind, frame)
        if kind not in ("score_margin", "score_sum"):
            raise Refused(f"party {self.k}: no message {kind!r} in a scoring run")
        t0 = time.perf_counter()
        entries = getattr(self, "_" + kind)(frame)
        pack, _ = _bundle()
        took = np.array([time.perf_counter() - t0], "<f8").tobytes()
        return "bundle", pack(entries + [(SECONDS, took)])

    def _warn_unpinned(self):
        """Loud, in this node's own log: a description written with ``--unpinned`` (every node),
        or a party of the secure sum whose scoring keys are not pinned."""
        from ..runtime.keys import unpinned_warning

        pinned = self.cfg.get("identity-key") and self.cfg.get("peer-fingerprints")
        sums = self.K - 1 >= 2 and self.k != self.leader
        if str(self.cfg.get("unpinned", "")).lower() == "true" or (sums and not pinned):
            import sys

            sys.stderr.write(unpinned_warning(self.k, "scoring keys"))

    def _aligned(self):
        if not os.path.exists(self.path):
            raise Refused(f"party {self.k} holds no aligned rows of run "
                          f"{self.setup.get('run_id')!r} (the alignment did not reach it)")
        with np.load(self.path, allow_pickle=False) as z:
            return z["X"], [str(v) for v in z["ids"]]

    def _score_margin(self, frame):
        from . import messages as M
        from .scoring import masked_margin

        _, unpack = _bundle()
        if self.k == self.leader:
            raise Refused("the label party sends no margin")
        from ..runtime.keys import KeyRefused, accept_offer, parse_pins

        want = set(range(self.K)) - {self.leader, self.k}
        public = {}
        try:
            pins = parse_pins(self.cfg.get("peer-fingerprints"))
            for b, f in unpack(frame):
                msg, sender, _ = M.decode(f)
                if not isinstance(msg, M.ScoreKey) or sender != b or b not in want:
                    raise Refused(f"party {self.k} got a {type(msg).__name__} of party {sender} "
                                  f"as party {b}'s scoring key")
                # pinned: signed by b's pinned identity for this run, else refused
                public[b] = accept_offer(msg.public, self.k, b, self.setup.get("run_id") or "",
                                         pins, purpose="scoring")
        except KeyRefused as exc:
            raise Refused(str(exc)) from None
        if set(public) != want:
            raise Refused(f"party {self.k} got the scoring keys of parties {sorted(public)}, "
                          f"not of every party besides the label party ({sorted(want)}): its "
                          "margin would not be masked")
        if want and self.state.get("score_key") is None:
            raise Refused(f"party {self.k} has no scoring key of this run")
        X, _ = self._aligned()
        word = masked_margin(X, self.model()["coef"], self.k, self.state.get("score_key"),
                             public)
        os.remove(self.path)                   # its last use: no close message needed
        return [(self.k, M.encode(M.MaskedMargin(word), self.k, 0))]

    def _score_sum(self, frame):
        from . import messages as M
        from .scoring import unmasked_scores

        _, unpack = _bundle()
        if self.k != self.leader:
            raise Refused(f"party {self.k} is not the label party: it adds no margins")
        X, ids = self._aligned()
        masked, senders = [], []
        for j, f in unpack(frame):
            msg, sender, _ = M.decode(f)
            if not isinstance(msg, M.MaskedMargin) or sender != j or msg.words.shape[0] != len(ids):
                raise Refused(f"the label party got a {type(msg).__name__} of party {sender} "
                              f"as party {j}'s masked margin of {len(ids)} rows")
            masked.append(msg.words)
            senders.append(j)
        if sorted(senders) != [j for j in range(self.K) if j != self.k]:
            raise Refused(f"the label party got masked margins of parties {sorted(senders)}, "
                          "not of every other party")
        m = self.model()
        scores = unmasked_scores(X, m["coef"], m["intercept"], masked)
        out = {"ids": ids, "scores": [float(s) for s in scores]}
        if self.setup.get("loss") == "logistic":
            out["probabilities"] = [float(p) for p in 1.0 / (1.0 + np.exp(-scores))]
        if self.cfg.get("scores-file"):
            write_scores(self.cfg["scores-file"], out)
        os.remove(self.path)
        if _release(self.cfg):
            return [(self.k, json.dumps(out).encode())]
        return []

    def get_state(self):
        return dict(self.state)

    def set_state(self, state):
        self.state.update(state)
