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
is its own generator ``default_rng([root, t, i, 7])`` and its shapes depend only on the public
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
"""
from __future__ import annotations

import json
import math
import os
import time

import numpy as np

from ..errors import InputError
from ..runtime.link import DOWN, UP, PartyLost, PartyRefused, error_record, raise_recorded
from ..runtime.partydata import load_cached, save_party_data
from ..runtime.roles import PartyRole, Refused, own_budget
from . import wire

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


# -- the driver --------------------------------------------------------------------------------
def party_configs(parts, run_dir, *, privacy, ledgers=None, seed=None) -> list:
    """Write each client's rows into ``run_dir`` and return the node configs its SuperNode is
    started with.  ``privacy``: the run's privacy dict (record level: each client gets its
    ledger and budget); ``seed``: seeded runs give each client the run's seed as its noise root
    (testing and reproduction only; a deployment leaves it out and each client draws its own)."""

    cfgs = []
    for i, (Z, y) in enumerate(parts):
        path = os.path.join(run_dir, f"client{i}.npz")
        save_party_data(path, Z, y)
        cfg = {"party": i, "data": path}
        if privacy is not None and privacy["level"] == "record":
            eps, delta = privacy["party_budget"]
            cfg.update({"ledger": ledgers[i], "budget-epsilon": float(eps),
                        "budget-delta": float(delta), "accountant": privacy["accountant"]})
        if seed is not None:
            cfg["noise-entropy"] = str(int(seed))
        cfgs.append(cfg)
    return cfgs


def public_setup(shards, strategy, *, batch, loss, l2, rounds, participation, privacy=None,
                 strategy_kw=None, run_id=None) -> dict:
    """What every client is told at setup (JSON): the method and its settings, the step size
    (``strategy.lr``), the batch schedule, the public shape of the federation (d, the padded
    length n_max: the clients' sizes are public, see :mod:`vflpriv.sparse.privacy`) and, in a
    private run, the clip and the noise multiplier of each record sample rate (calibrated here
    exactly as the server's :class:`~vflpriv.sparse.privacy.PrivacyPlan` calibrates them)."""
    from .shards import DenseShards

    priv_public = None
    if privacy is not None:
        from .privacy import PrivacyPlan

        plan = PrivacyPlan(privacy["level"], privacy["epsilon"], privacy["delta"],
                           privacy["clip"], rounds=rounds, local_steps=strategy.local_steps,
                           participation=participation, counts=shards.counts,
                           batch_size=batch.size, accountant=privacy["accountant"])
        priv_public = {"level": plan.level, "clip": plan.clip}
        if plan.level == "record":
            priv_public["rates"] = [[float(q), float(z)] for q, z in plan.z.items()]
    lr = strategy.lr
    return {"family": "sparse", "algorithm": strategy.name, "tau": strategy.tau,
            "local_steps": strategy.local_steps, "strategy_kw": dict(strategy_kw or {}),
            "loss": loss, "l2": float(l2), "classes": getattr(shards.loss, "classes", None),
            "lr": None if lr is None else float(lr), "blocks": int(strategy.blocks),
            "batch_size": batch.size, "batch_growth": float(batch.growth),
            "layout": "dense" if isinstance(shards, DenseShards) else "sparse",
            "n_max": int(shards.n_max), "features": int(shards.features), "d": int(shards.d),
            "privacy": priv_public, "rounds": int(rounds), "run_id": run_id,
            "accountant": None if privacy is None else privacy["accountant"]}


class _Summary:
    """The ServerApp's privacy summary where :func:`~vflpriv.sparse.runtime.finish` expects a
    plan."""

    def __init__(self, summary):
        self._s = summary

    def summary(self):
        return self._s


def run(backend, parts, shards, strategy, *, rounds, participation, batch, lr, weights, seed,
        loss, l2, privacy=None, strategy_kw=None, x_true=None, support_true=None,
        dictionary=None, callback=None, evaluate=True, options=None):
    """Run a sparse method on ``backend`` ("flower-sim" or "flower"): ``parts`` are the clients'
    (Z_i, y_i) (labels mapped, dictionary applied) and ``shards`` the same data in process (for
    the default step size, which reads the data as in process, and for the metrics, computed
    here as the in-process run computes them: the experimenter's view, not releases).

    ``privacy``: None or ``{"level", "epsilon", "delta", "clip", "accountant", "ledger"}``.
    Returns the :class:`~vflpriv.sparse.runtime.SparseResult` with ``flower`` filled in: Flower
    message bytes per client beside the wire bytes the in-process run meters.  A client lost or
    refusing in a round: with ``options.on_client_loss == "continue"`` (the default for this
    family) the run goes on with the others and ``lost_clients`` names it and the round; with
    ``"stop"``, or at setup, or when no client is left, it raises :class:`~.link.PartyLost` /
    :class:`~.link.PartyRefused` (which client, which round); the server's own budget refusing
    raises ``BudgetExceeded`` as in process.
    """
    import shutil
    import tempfile
    import uuid

    from .runtime import Metrics, client_weights, default_lr, finish
    from ..runtime.backends import FlowerOptions, check_backend, on_client_loss, require_flwr

    check_backend(backend)
    if backend == "inprocess":
        raise InputError("sparse.remote.run runs the Flower backends; inprocess is "
                         "vflpriv.sparse.runtime.run")
    require_flwr(backend)
    options = options or FlowerOptions()
    N = shards.N
    p = client_weights(shards.counts, weights)
    if lr is None and strategy.needs_lr:
        lr = default_lr(shards, weights)
    if lr is not None and not (lr > 0 and math.isfinite(lr)):
        raise InputError(f"--lr must be a positive finite number, got {lr!r}")
    strategy.lr, strategy.blocks = lr, getattr(shards, "c", 1)
    run_id = uuid.uuid4().hex
    setup = public_setup(shards, strategy, batch=batch, loss=loss, l2=l2, rounds=rounds,
                         participation=participation, privacy=privacy, strategy_kw=strategy_kw,
                         run_id=run_id)
    own_dir = not (options.run_dir or options.spec_dir)
    run_dir = options.spec_dir or options.run_dir or tempfile.mkdtemp(prefix="vflpriv-sparse-")
    os.makedirs(run_dir, exist_ok=True)
    ledgers = None
    try:
        if privacy is not None and privacy["level"] == "record":
            if options.party_ledgers:
                ledgers = list(options.party_ledgers)
            elif options.spec_dir:        # each on its own machine, beside its data
                ledgers = [os.path.join(run_dir, f"client{i}.ledger") for i in range(N)]
            elif privacy.get("ledger"):
                ledgers = [f"{privacy['ledger']}.client{i}" for i in range(N)]
            else:
                ledgers = [os.path.join(run_dir, f"client{i}.ledger") for i in range(N)]
            if len(ledgers) != N:
                raise InputError(f"party_ledgers names {len(ledgers)} files for {N} clients")
            privacy = dict(privacy, party_budget=options.party_budget
                           or (privacy["epsilon"], privacy["delta"]))
        cfgs = party_configs(parts, run_dir, privacy=privacy, ledgers=ledgers, seed=seed)
        spec = {"family": "sparse", "N": N, "setup": setup, "counts": shards.counts.tolist(),
                "p": p.tolist(), "rounds": int(rounds),
                "participation": (participation.kind, participation.value), "seed": seed,
                "evaluate": bool(evaluate), "on_client_loss": on_client_loss(options, "sparse"),
                "privacy": None if privacy is None else {
                    k: privacy[k] for k in ("level", "epsilon", "delta", "clip", "accountant",
                                            "ledger")},
                "connect_timeout": float(options.connect_timeout),
                "reply_timeout": float(options.reply_timeout)}
        if options.spec_dir:              # the description for separate machines, no run
            from ..runtime.backends import describe

            return describe(run_dir, spec, cfgs)
        progress = None if callback is None else (lambda t: callback(t - 1, float("nan")))
        t0 = time.perf_counter()
        from ..runtime.backends import launch

        out = launch(backend, spec, cfgs, run_dir, progress=progress, quiet=options.quiet)
        wall = time.perf_counter() - t0
        party_spend = _party_spend(ledgers, privacy) if ledgers else None
    finally:
        if own_dir:
            shutil.rmtree(run_dir, ignore_errors=True)
    flower = {"backend": backend, "bytes": out["flower"], "totals": out["flower_totals"],
              "rounds_bytes": out["flower_rounds"],
              "rounds_completed": out["t"], "error": out["error"], "party_spend": party_spend,
              "wall_seconds": wall,
              "party_ledgers": None if own_dir else ledgers}
    err = out["error"]
    if err is not None:
        if out.get("exception") is not None and err["kind"] not in ("PartyLost", "PartyRefused"):
            raise out["exception"]
        raise_recorded(err, flower, backend)
    metrics = Metrics(shards, p, x_true, dictionary)
    metrics.add(strategy.model(strategy.init_state(shards.d)))
    for _, x in out["models"]:
        metrics.add(x)
    res = finish(strategy, out["final"], metrics, out["traffic"], out["seconds"], lr=lr,
                 privacy=None if out["privacy"] is None else _Summary(out["privacy"]),
                 support_true=support_true, rounds=rounds, participation=participation,
                 batch=batch, weights=weights, seed=seed)
    res.flower = flower
    res.lost_clients = list(out.get("lost_clients", []))
    res.settings["on_client_loss"] = spec["on_client_loss"]
    return res


def _party_spend(ledgers, privacy):
    """Each client's own spend, from its own ledger (record level)."""
    from accounting import Ledger, get_accountant

    acc = get_accountant(privacy["accountant"])
    out = {}
    for i, path in enumerate(ledgers):
        if os.path.exists(path):
            led = Ledger(path)
            ev = led.event()
            out[str(i)] = {"releases": len(led.records),
                           "epsilon": 0.0 if ev is None else float(acc.epsilon(ev,
                                                                               privacy["delta"]))}
    return out


__all__ = ["SparseParty", "LinkClients", "serve", "run", "party_configs", "public_setup"]
