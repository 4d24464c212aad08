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

from typing import TYPE_CHECKING

import numpy as np

from ..errors import InputError
from ..runtime.link import DOWN, UP, PartyLost, PartyRefused, error_record, raise_recorded
from ..runtime.partydata import load_cached, save_party_data
from ..runtime.roles import PartyRole, Refused, own_budget
from . import wire

if TYPE_CHECKING:
    from .config import RemoteConfig

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


def run(parts, shards, strategy, config: RemoteConfig, *, x_true=None, support_true=None,
        dictionary=None):
    """Run a sparse method on the Flower backend ``config.backend`` (a
    :class:`~vflpriv.sparse.config.RemoteConfig`): ``parts`` are the clients' (Z_i, y_i)
    (labels mapped, dictionary applied) and ``shards`` the same data in process (for the default
    step size, which reads the data as in process, and for the metrics against ``x_true``,
    ``support_true`` and ``dictionary``, computed here as the in-process run computes them: the
    experimenter's view, not releases).

    Returns the :class:`~vflpriv.sparse.runtime.SparseResult` with ``flower`` filled in: Flower
    message bytes per client beside the wire bytes the in-process run meters (with
    ``config.flower.spec_dir`` set nothing runs: the run's description is written there and the
    dict naming its files returned).  A client lost or refusing in a round: with
    ``on_client_loss == "continue"`` (the default for this family) the run goes on with the
    others and ``lost_clients`` names it and the round; with ``"stop"``, or at setup, or when no
    client is left, it raises :class:`~.link.PartyLost` / :class:`~.link.PartyRefused` (which
    client, which round); the server's own budget refusing raises ``BudgetExceeded`` as in
    process.
    """
    import shutil
    import uuid

    from .runtime import client_weights

    opts = config.flower
    p = client_weights(shards.counts, config.weights)
    lr = _set_step(strategy, shards, config)
    setup = public_setup(shards, strategy, batch=config.batch, loss=config.loss, l2=config.l2,
                         rounds=config.rounds, participation=config.participation,
                         privacy=config.privacy, strategy_kw=config.strategy_kw,
                         run_id=uuid.uuid4().hex)
    own_dir, run_dir = _run_dir(opts)
    try:
        ledgers, privacy = _client_budgets(config.privacy, opts, run_dir, shards.N)
        cfgs = party_configs(parts, run_dir, privacy=privacy, ledgers=ledgers, seed=config.seed)
        spec = _spec(config, setup, shards, p, privacy)
        if opts.spec_dir:              # the description for separate machines, no run
            from ..runtime.backends import describe

            return describe(run_dir, spec, cfgs)
        out, wall = _launch(config, spec, cfgs, run_dir)
        party_spend = _party_spend(ledgers, privacy) if ledgers else None
    finally:
        if own_dir:
            shutil.rmtree(run_dir, ignore_errors=True)
    flower = _flower_info(config.backend, out, party_spend, wall,
                          None if own_dir else ledgers)
    _raise_error(out, flower, config.backend)
    return _result(strategy, shards, p, lr, out, flower, config, spec["on_client_loss"],
                   x_true=x_true, support_true=support_true, dictionary=dictionary)


def _set_step(strategy, shards, config):
    """The strategy's step size and block count, as the in-process run sets them: the step the
    config names or, for a method that needs one, the default the data give (read here, where
    the data are; the clients are told the step at setup).  Returns the step."""
    from .runtime import default_lr

    lr = config.lr
    if lr is None and strategy.needs_lr:
        lr = default_lr(shards, config.weights)
    if lr is not None and not (lr > 0 and math.isfinite(lr)):   # the data's default too
        raise InputError(f"--lr must be a positive finite number, got {lr!r}")
    strategy.lr, strategy.blocks = lr, getattr(shards, "c", 1)
    return lr


def _run_dir(opts):
    """``(own, path)``: the folder the clients' files are written to: the spec folder, the
    user's run folder, or a temporary one (``own``: ours, removed when the run ends)."""
    import tempfile

    own = not (opts.run_dir or opts.spec_dir)
    path = opts.spec_dir or opts.run_dir or tempfile.mkdtemp(prefix="vflpriv-sparse-")
    os.makedirs(path, exist_ok=True)
    return own, path


def _client_budgets(privacy, opts, run_dir, N):
    """``(ledgers, privacy)``: in a record-level run each client charges its own ledger and
    enforces its own budget (client-level noise stays with the server, so the others have
    none).  The ledgers: the files the options name; in a spec folder each beside its client's
    data (each on its own machine); beside the server's ledger; or in the run folder.  The
    privacy dict gains ``party_budget``, the options' or the run's (epsilon, delta)."""
    if privacy is None or privacy["level"] != "record":
        return None, privacy
    if opts.party_ledgers:
        ledgers = list(opts.party_ledgers)
    elif opts.spec_dir:
        ledgers = [os.path.join(run_dir, f"client{i}.ledger") for i in range(N)]
    elif privacy.get("ledger"):
        ledgers = [f"{privacy['ledger']}.client{i}" for i in range(N)]
    else:
        ledgers = [os.path.join(run_dir, f"client{i}.ledger") for i in range(N)]
    if len(ledgers) != N:
        raise InputError(f"party_ledgers names {len(ledgers)} files for {N} clients")
    return ledgers, dict(privacy, party_budget=opts.party_budget
                         or (privacy["epsilon"], privacy["delta"]))


def _spec(config, setup, shards, p, privacy) -> dict:
    """What the server role is started with (:func:`serve`): the public setup, the clients'
    sizes and weights, the schedule, the seed, the loss policy and the server's privacy plan
    (without the clients' budgets, which are theirs)."""
    from ..runtime.backends import on_client_loss

    opts = config.flower
    return {"family": "sparse", "N": shards.N, "setup": setup, "counts": shards.counts.tolist(),
            "p": p.tolist(), "rounds": int(config.rounds),
            "participation": (config.participation.kind, config.participation.value),
            "seed": config.seed, "evaluate": bool(config.evaluate),
            "on_client_loss": on_client_loss(opts, "sparse"),
            "privacy": None if privacy is None else {
                k: privacy[k] for k in ("level", "epsilon", "delta", "clip", "accountant",
                                        "ledger")},
            "connect_timeout": float(opts.connect_timeout),
            "reply_timeout": float(opts.reply_timeout)}


def _launch(config, spec, cfgs, run_dir):
    """``(out, wall seconds)``: the roles hosted on the backend (the server's :func:`serve`
    output); the callback hears each finished round by its 0-based index, with no objective
    (the server computes none)."""
    from ..runtime.backends import launch

    cb = config.callback
    progress = None if cb is None else (lambda t: cb(t - 1, float("nan")))
    t0 = time.perf_counter()
    out = launch(config.backend, spec, cfgs, run_dir, progress=progress,
                 quiet=config.flower.quiet)
    return out, time.perf_counter() - t0


def _flower_info(backend, out, party_spend, wall, ledgers) -> dict:
    """``res.flower``: the Flower message bytes (per client, totals, per round), how far the
    run got, its error, each client's own spend and the ledgers a caller keeps (None when they
    were in our temporary folder, gone)."""
    return {"backend": backend, "bytes": out["flower"], "totals": out["flower_totals"],
            "rounds_bytes": out["flower_rounds"],
            "rounds_completed": out["t"], "error": out["error"], "party_spend": party_spend,
            "wall_seconds": wall,
            "party_ledgers": ledgers}


def _raise_error(out, flower, backend):
    """A run the server stopped raises here, in this process: the server's own exception as is
    (e.g. its budget refusing, as in process); a lost or refusing client as
    :class:`~.link.PartyLost` / :class:`~.link.PartyRefused` carrying ``flower``."""
    err = out["error"]
    if err is not None:
        if out.get("exception") is not None and err["kind"] not in ("PartyLost", "PartyRefused"):
            raise out["exception"]
        raise_recorded(err, flower, backend)


def _result(strategy, shards, p, lr, out, flower, config, policy, *, x_true, support_true,
            dictionary):
    """The :class:`~vflpriv.sparse.runtime.SparseResult`, as the in-process run makes it: the
    metrics of the initial model and of the models the server kept, computed here on the data,
    then ``flower``, the lost clients and the loss policy."""
    from .runtime import Metrics, finish

    metrics = Metrics(shards, p, x_true, dictionary)
    metrics.add(strategy.model(strategy.init_state(shards.d)))
    for _, x in out["models"]:
        metrics.add(x)
    res = finish(strategy, out["final"], metrics, out["traffic"], out["seconds"], lr=lr,
                 privacy=None if out["privacy"] is None else _Summary(out["privacy"]),
                 support_true=support_true, rounds=config.rounds,
                 participation=config.participation, batch=config.batch,
                 weights=config.weights, seed=config.seed)
    res.flower = flower
    res.lost_clients = list(out.get("lost_clients", []))
    res.settings["on_client_loss"] = policy
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
