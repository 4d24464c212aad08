"""The horizontal sparse methods (Fed-HT, FedIter-HT, Distributed-IHT, FedGradMP, FedMid,
FedDualAvg, FedAvg; :mod:`vflpriv.sparse`) as roles: the round loop as the server role, each
client a party role holding only its own rows (hosted by Flower's apps, or in process over a
:class:`~vflpriv.runtime.link.LocalLink`).

The ServerApp runs the same :func:`vflpriv.sparse.runtime.serve` as in process (participants,
server noise, aggregation, the strategy's server step) with :class:`LinkClients` in place of
:class:`~vflpriv.sparse.runtime.LocalClients`: the broadcast travels as the same wire bytes
(:mod:`vflpriv.sparse.wire`) inside a Flower message, and each participant's ClientApp
(:class:`SparseParty`) answers with its wire-encoded reply, computed by the same
:func:`~vflpriv.sparse.runtime.client_replies` on its own rows alone.  Since a client's randomness
is its own generator (ChaCha20 keyed from ``[root, t, i, 7]``) and its shapes depend only on the public
padded length n_max, a seeded run ends at the same model, bit for bit, with the same privacy
spend (tests/test_flower_sparse.py).

A client keeps nothing between messages but its noise root (``context.state``; its own OS
entropy unless the run is seeded): the strategies' local work starts from the broadcast.  In a
record-level private run it also keeps its own ledger and budget (node config ``ledger``,
``budget-epsilon``, ``budget-delta``): it refuses a plan its budget cannot pay at setup and
charges each round before drawing its noise.  Client-level noise stays with the server (see
:mod:`vflpriv.sparse.privacy`).

Flower message rounds are the runtime's round + 1 (round 0 carries the hello and the public
setup), so the Flower bytes of the rounds can be set beside the in-process count.  Everything a
user reads names the run's 0-based round: ``lost_clients[i]["round"]``, and ``PartyLost.round`` /
``PartyRefused.round`` of a run stopped by a lost or refusing client (``--on-client-loss stop``),
so a client lost in round t is "round t" in both.

The driver that writes the clients' files and hosts these roles on a backend, :func:`run`, is in
:mod:`.hosted` (re-exported here with :func:`party_configs` and :func:`public_setup`).
"""
from __future__ import annotations

import json
import time

import numpy as np

from ..runtime.link import DOWN, UP, PartyLost, PartyRefused, error_record
from ..runtime.partydata import load_cached
from ..runtime.roles import PartyRole, Refused, own_budget
from . import wire
from .hosted import party_configs, public_setup, run  # noqa: F401  (the driver, re-exported)

_load_rows = load_cached


def _strategy(setup):
    from .algorithms import make_strategy

    s = make_strategy(setup["algorithm"], setup["tau"], setup["local_steps"],
                      **setup["strategy_kw"])
    s.lr, s.blocks = setup["lr"], setup["blocks"]
    return s


def _record_event(q, z, steps):
    from accounting import SelfComposed

    from .privacy import _step_event

    e = _step_event(z, q)
    return e if steps == 1 else SelfComposed(e, steps)


# -- client side -----------------------------------------------------------------------------
class SparseParty(PartyRole):
    """Client i of a sparse run: its rows, the strategy's local step, its noise and budget."""

    def __init__(self, cfg, setup):
        from .losses import get_loss
        from .privacy import ClientPrivacy
        from .runtime import BatchSchedule
        from .shards import make_shards

        self.i = i = int(cfg["party"])
        self.setup = setup
        Z, y = _load_rows(cfg["data"])
        if Z.shape[1] != setup["features"]:
            raise Refused(f"client {i}'s data have {Z.shape[1]} columns, the run expects "
                          f"{setup['features']}")
        loss = get_loss(setup["loss"], setup["l2"])
        if setup["classes"]:
            loss.classes = int(setup["classes"])
        # padded to the federation's n_max: the same shapes, hence bits, as in process
        self.shards = make_shards([(Z, y)], loss, setup["layout"], n_max=setup["n_max"])
        self.strategy = _strategy(setup)
        self.batch = BatchSchedule(setup["batch_size"], setup["batch_growth"])
        priv = setup["privacy"]
        self.privacy = self.budget = self.event = None
        if priv is not None:
            if priv["level"] == "record":
                b, n = setup["batch_size"], self.shards.counts[0]
                q = 1.0 if b is None else min(1.0, b / n)    # as PrivacyPlan computes q_i
                z = {float(a): float(v) for a, v in priv["rates"]}
                if float(q) not in z:
                    raise Refused(f"client {i}: no noise multiplier for its sample rate {q}")
                self.privacy = ClientPrivacy("record", priv["clip"], setup["local_steps"],
                                             q=[q], z=z)
                self.event = _record_event(float(q), z[float(q)], setup["local_steps"])
                self.budget = own_budget(cfg, setup, who="client")
            else:
                self.privacy = ClientPrivacy("client", priv["clip"], setup["local_steps"])
        ent = cfg.get("noise-entropy")
        self.root = int(ent) if ent not in (None, "") else None

    def handle(self, kind, frame, round):
        from .runtime import client_generators, client_replies

        if kind == "setup":
            if self.root is None:          # the client's own secret root, kept in its state
                self.root = int(np.random.SeedSequence().entropy)
            if self.budget is not None:
                from accounting import SelfComposed

                self.budget.check_plan(SelfComposed(self.event, int(self.setup["rounds"])),
                                       party=f"client-{self.i}")
            return "ok", b""
        if kind != "round":
            raise Refused(f"unknown request {kind!r}")
        t = int(round) - 1
        if self.budget is not None:       # charged (durably) before any of its noise is drawn
            self.budget.charge(self.event, party=f"client-{self.i}", round=t,
                               note=f"{self.setup['local_steps']} DP-SGD step(s)")
        import struct

        try:
            start = wire.decode(frame)
        except (ValueError, struct.error) as exc:
            raise Refused(f"client {self.i}: bad broadcast at round {t}: {exc}") from None
        if start.shape[0] != self.shards.d:
            raise Refused(f"client {self.i}: broadcast of length {start.shape[0]}, model has "
                          f"{self.shards.d}")
        V = client_replies(self.strategy, self.shards, np.array([0]), t, start,
                           lr=self.strategy.lr, batch=self.batch.at(t),
                           rngs=client_generators(self.root, t, [self.i]), privacy=self.privacy)
        return "update", wire.encode(V[0])

    def get_state(self):
        return {"root": self.root}

    def set_state(self, state):
        self.root = state["root"]


# -- server side -----------------------------------------------------------------------------
class LinkClients:
    """The clients' side of :func:`~vflpriv.sparse.runtime.serve` over a :class:`~.link.Link`:
    the broadcast's wire bytes to each participant, its wire-encoded reply back.  ``frames``
    counts the bytes of those wire messages (what the in-process run meters)."""

    def __init__(self, link, tolerate=False):
        self.link, self.tolerate = link, bool(tolerate)
        self.frames = {"uplink": 0, "downlink": 0}
        self.reasons = {}          # client -> why it was lost (``tolerate``)

    def round(self, t, S, start, frame):
        """``(replies, their wire bytes, which answered)``.  ``tolerate``
        (``--on-client-loss continue``): a participant that fails has no row (zeros, marked
        not answered) and is named in ``reasons``; otherwise its failure raises."""
        seen = len(self.link.lost)
        try:
            replies = self.link.exchange([(int(i), frame, "round") for i in S], t + 1,
                                         tolerate=self.tolerate)
        except (PartyLost, PartyRefused) as exc:
            # The link counts Flower's message rounds (the run's round + 1: round 0 carries the
            # setup); what the user reads names the run's 0-based round, as lost_clients does.
            raise type(exc)(exc.party, t if exc.round is not None else None,
                            exc.reason) from None
        for party, _, reason in self.link.lost[seen:]:
            self.reasons[int(party)] = reason
        V = np.zeros((S.shape[0], start.shape[0]))
        nb = np.zeros(S.shape[0], dtype=np.int64)
        ok = np.array([f is not None for f in replies], dtype=bool)
        for r, f in enumerate(replies):
            if f is not None:
                V[r], nb[r] = wire.decode(f), len(f)
        self.frames["downlink"] += len(frame) * S.shape[0]
        self.frames["uplink"] += int(nb.sum())
        return V, nb, ok


def serve(connect, spec, progress=None) -> dict:
    """The server role of one sparse run described by ``spec`` (see :func:`run`); ``connect(N)``
    is the run's link to its N clients."""
    import pickle

    from .privacy import PrivacyPlan
    from .runtime import Participation
    N, setup = int(spec["N"]), spec["setup"]
    link = connect(N)
    out = {"t": 0, "error": None, "exception": None}
    clients = LinkClients(link, tolerate=spec.get("on_client_loss") == "continue")
    try:
        link.connect(b"")
        frame = json.dumps(setup).encode()
        link.exchange([(i, frame, "setup") for i in range(N)], 0)
        strategy = _strategy(setup)
        part = Participation(*spec["participation"])
        plan = None
        if spec["privacy"] is not None:
            pp = spec["privacy"]
            plan = PrivacyPlan(pp["level"], pp["epsilon"], pp["delta"], pp["clip"],
                               rounds=spec["rounds"], local_steps=setup["local_steps"],
                               participation=part, counts=np.asarray(spec["counts"]),
                               batch_size=setup["batch_size"], ledger=pp["ledger"],
                               accountant=pp["accountant"])
            plan.check_plan()     # before any round, as in process
        models = []

        def on_round(t, state):
            out["t"] = t + 1
            if spec["evaluate"] or t == spec["rounds"] - 1:
                models.append((t, np.array(strategy.model(state), copy=True)))
            if progress is not None:
                progress(t + 1)

        t0 = time.perf_counter()
        from .runtime import serve as serve_rounds

        state, traffic = serve_rounds(strategy, clients, N=N, d=setup["d"],
                                      p=np.asarray(spec["p"]), rounds=spec["rounds"],
                                      participation=part, privacy=plan, seed=spec["seed"],
                                      metering=True, on_round=on_round)
        out.update(seconds=time.perf_counter() - t0, models=models, traffic=traffic,
                   lost_clients=traffic.lost,
                   final=np.array(strategy.model(state), copy=True),
                   privacy=None if plan is None else plan.summary())
    except Exception as exc:          # e.g. the server's own budget refusing a release
        from .runtime import ClientsLost

        if isinstance(exc, ClientsLost):   # nothing left to continue with: the run stops
            last = exc.lost[-1]
            exc = PartyLost(last["client"], last["round"],
                            f"{last['reason']}; it was the last client left ({exc})")
        out["error"] = error_record(exc, out["t"])
        try:
            pickle.dumps(exc)
            out["exception"] = exc
        except Exception:
            pass
    out["flower"] = link.meter.summary(N)
    setup0 = link.meter.rounds.get(0, {})
    out["flower_rounds"] = {d: {str(k): link.meter.flower[(k, d)] - setup0.get((k, d), 0)
                                for k in range(N)} for d in (UP, DOWN)}
    setup_flower = {d: sum(v for (p, dd), v in link.meter.rounds.get(0, {}).items() if dd == d)
                    for d in (UP, DOWN)}
    out["flower_totals"] = {"uplink": link.meter.total(UP), "downlink": link.meter.total(DOWN),
                            "uplink_setup": setup_flower[UP], "downlink_setup": setup_flower[DOWN],
                            "uplink_frames": clients.frames["uplink"],
                            "downlink_frames": clients.frames["downlink"]}
    return out


__all__ = ["SparseParty", "LinkClients", "serve", "run", "party_configs", "public_setup"]
