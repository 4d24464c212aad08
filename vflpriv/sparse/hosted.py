"""A sparse run hosted on a Flower backend (``flower-sim``, ``flower``, or the API's ``local``
link): :func:`run` writes each client's rows and node config into the run folder, describes the
server role's run (``spec``), hosts both roles with :func:`vflpriv.runtime.backends.launch` (or
writes the description for separate machines) and makes the result as the in-process run does.
The roles themselves are :mod:`.remote`'s (:func:`~.remote.serve`, :class:`~.remote.SparseParty`);
its options are a :class:`~vflpriv.sparse.config.RemoteConfig`.
"""
from __future__ import annotations

import math
import os
import time
from typing import TYPE_CHECKING

from ..errors import InputError
from ..runtime.link import raise_recorded
from ..runtime.partydata import save_party_data

if TYPE_CHECKING:
    from .config import RemoteConfig


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
    client is left, it raises :class:`~vflpriv.runtime.link.PartyLost` /
    :class:`~vflpriv.runtime.link.PartyRefused` (which client, which round); the server's own
    budget refusing raises ``BudgetExceeded`` as in process.
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
    :class:`~vflpriv.runtime.link.PartyLost` / :class:`~vflpriv.runtime.link.PartyRefused`
    carrying ``flower``."""
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


__all__ = ["run", "party_configs", "public_setup"]
