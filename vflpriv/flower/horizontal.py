"""FedAvg / FedProx / SCAFFOLD / FedDyn (± FedElasticNet, paper 001) on Flower: the server loop
as the ServerApp, every client a ClientApp holding only its own training shard.

The ServerApp runs the same :func:`~vflpriv.horizontal.loop.round_loop` over the same
``_StrategyRun`` as in process; only the client step goes over the :class:`~.link.Link` (one
batch of messages per round, :func:`~vflpriv.horizontal.loop._remote_loop`).  The server knows
what it knows in process and nothing more: the clients' record counts (public, they weight the
aggregation), the global test set, the public seed (initial model, participation).  Each client
(:class:`StrategySide`) rebuilds from its data file, the public setup and its pickled state (the
strategy's per-client state: SCAFFOLD's c_k, FedDyn's g_k), and runs
:func:`~vflpriv.horizontal.runtime.client_step`, the function the in-process client runs, with
its own secret key: a seeded run gives the same model bit for bit and the same spend.

Local DP: each client owns a ledger and budget (node config ``ledger``, ``budget-epsilon``,
``budget-delta``, ``accountant``), computes its noise multiplier from the public plan, charges its
round to its own filter before drawing noise, and answers ``refused`` when the charge would
overspend; the server then stops that client for good, as in process.

Bytes: the in-process :class:`~vflpriv.horizontal.metering.Meter` counts the same wire messages,
and the Link's :class:`~.link.FlowerMeter` counts the whole Flower messages carrying them
(including the hello and setup messages).
"""
from __future__ import annotations

import json
import math
import os
import secrets

import numpy as np

from ..errors import InputError
from .clientapp import ClientSide, own_budget
from .link import Link, error_record, raise_recorded

REFUSED = "refused"
_CACHE = {}          # (path, mtime) -> arrays: an actor serving many messages reads a file once
_Z = {}              # noise multipliers already calibrated in this process


# -- files, models, budgets (shared with vflpriv.flower.fedp3) ---------------------------------
def save_client_data(path, **arrays):
    """One client's records as the npz file its node config names."""
    np.savez(path, **{k: np.asarray(v) for k, v in arrays.items()})


def load_client_data(path) -> dict:
    try:
        key = (str(path), os.path.getmtime(path))
        if key not in _CACHE:
            with np.load(path, allow_pickle=False) as z:
                _CACHE[key] = {k: z[k] for k in z.files}
        return _CACHE[key]
    except (OSError, KeyError, ValueError) as exc:
        raise InputError(f"client data file {str(path)!r} cannot be read: {exc}") from None


def describe_model(net) -> dict:
    """The architecture of ``net`` as public JSON a client rebuilds it from (:func:`build_net`);
    the clients never need the weights' initial values (they arrive every round)."""
    from ..horizontal.models import MLP, SmallCNN

    if type(net) is MLP:
        hidden = [getattr(net, n).out_features for n in net.layer_names[:-1]]
        return {"kind": "mlp", "n_inputs": net.fc1.in_features if hidden else
                net.ffc.in_features, "n_classes": net.ffc.out_features, "hidden": hidden,
                "bias": net.ffc.bias is not None}
    if type(net) is SmallCNN:
        return {"kind": "cnn", "in_channels": net.conv1.in_channels,
                "image_size": net.image_shape[1], "n_classes": net.ffc.out_features,
                "channels": [net.conv1.out_channels, net.conv2.out_channels],
                "hidden": [net.fc1.out_features, net.fc2.out_features]}
    raise InputError(f"the Flower backends build the clients' model from a description; "
                     f"{type(net).__name__} has none (use the MLP or SmallCNN models)")


def build_net(spec: dict):
    from ..horizontal.models import MLP, SmallCNN

    if spec["kind"] == "mlp":
        return MLP(spec["n_inputs"], spec["n_classes"], tuple(spec["hidden"]), bias=spec["bias"])
    return SmallCNN(spec["in_channels"], spec["image_size"], spec["n_classes"],
                    tuple(spec["channels"]), tuple(spec["hidden"]))


def client_budget(cfg, setup):
    """Client k's own :class:`accounting.BudgetFilter` (its ledger, its budget: local DP)."""
    return own_budget(cfg, setup, per_party=True, who="client")


def calibrated_z(epsilon, delta, q, total, accountant):
    from ..horizontal.ldp import noise_multiplier

    key = (epsilon, delta, q, total, accountant)
    if key not in _Z:
        _Z[key] = noise_multiplier(epsilon, delta, q, total, accountant)
    return _Z[key]


def client_key(cfg, state_key):
    """The client's secret key: its node config's ``noise-entropy`` (seeded runs: the same key
    as in process) or the one it drew from OS entropy at setup (kept in its own state)."""
    ent = cfg.get("noise-entropy")
    if ent not in (None, ""):
        return int(ent)
    return state_key if state_key is not None else secrets.randbits(128)


def client_spend(ledgers, epsilon_delta, accountant) -> list:
    """Each client's spend, recomputed by the accountant from its own ledger (None: no ledger)."""
    from accounting import BudgetFilter, Ledger

    out = []
    for k, path in enumerate(ledgers):
        if not path or not os.path.exists(path) or os.path.getsize(path) == 0:
            out.append(0.0)
            continue
        f = BudgetFilter(Ledger(path), *epsilon_delta, accountant=accountant, per_party=True)
        out.append(float(f.spent(f"client-{k}")))
    return out


def lost_records(lost, link) -> list:
    """``[{"client", "round", "reason"}]`` of the clients lost under ``--on-client-loss
    continue`` (the JSON's ``lost_clients``; the reason is the Link's)."""
    why = {(int(p), int(r)): reason for p, r, reason in link.lost}
    return [{"client": int(k), "round": int(t), "reason": why.get((int(k), int(t)), "")}
            for k, t in lost]


def link_for(grid, spec):
    return Link(grid, spec["K"], connect_timeout=spec["connect_timeout"],
                reply_timeout=spec["reply_timeout"])


def flower_summary(link, K) -> dict:
    return {"bytes": link.meter.summary(K), "totals": link.meter.totals()}


def remote_clients(link, kind_of, on_reply=None, tolerate=False):
    """The ``clients`` callable of :func:`round_loop`: one batch per round over ``link``;
    ``kind_of(k)`` names the request, ``on_reply(k, frame)`` strips what rides with the update.
    ``tolerate`` (``--on-client-loss continue``): a client that fails answers
    :data:`~vflpriv.horizontal.loop.LOST` (the Link notes why) instead of stopping the run."""
    from ..horizontal.loop import LOST

    def clients(t, asked):
        replies = link.exchange([(k, down, kind_of(k)) for k, down in asked], t, kinds=True,
                                tolerate=tolerate)
        out = []
        for (k, _), reply in zip(asked, replies):
            if reply is None:
                out.append(LOST)
                continue
            frame, kind = reply
            if kind == REFUSED:
                out.append(None)
            else:
                out.append(on_reply(k, frame) if on_reply else frame)
        return out
    return clients


# -- the client --------------------------------------------------------------------------------
def make_strategy(name, settings):
    from ..horizontal.fedavg import FedAvg, FedProx
    from ..horizontal.feddyn import FedDyn
    from ..horizontal.scaffold import Scaffold

    cls = {"fedavg": FedAvg, "fedprox": FedProx, "scaffold": Scaffold, "feddyn": FedDyn}[name]
    return cls(**settings)


class StrategySide(ClientSide):
    """Client k of a FedAvg / FedProx / SCAFFOLD / FedDyn run (see module docstring)."""

    def __init__(self, cfg, setup):
        import torch

        from ..horizontal.local import FlatModel, LocalConfig

        self.k = k = int(cfg["party"])
        self.cfg, self.setup = cfg, setup
        d = load_client_data(cfg["data"])
        self.X, self.y = torch.from_numpy(d["X"]), torch.from_numpy(d["y"])
        if int(self.y.shape[0]) != setup["sizes"][k]:
            raise InputError(f"client {k} holds {int(self.y.shape[0])} records, the run expects "
                             f"{setup['sizes'][k]}")
        torch.set_num_threads(int(setup["threads"]))
        self.model = FlatModel(build_net(setup["model"]))
        self.local = LocalConfig(**setup["local"])
        self.strategy = make_strategy(setup["strategy"], setup["settings"])
        zeros = torch.zeros(int(setup["dim"]), dtype=torch.float32)
        self.strategy.initialize(zeros, setup["sizes"])
        self.state = self.strategy.init_client(k, zeros)
        self.key = None
        self.budget = client_budget(cfg, setup) if setup["private"] else None

    def handle(self, kind, frame, round):
        from ..horizontal.runtime import client_step

        self.key = client_key(self.cfg, self.key)
        if kind == "setup":
            return "ok", b""
        noise = None
        if self.budget is not None:
            from accounting import BudgetExceeded, PoissonSubsampledGaussian, SelfComposed

            s, m = self.setup, int(self.y.shape[0])
            q, steps = self.local.batch_size / m, self.local.steps(m, True)
            z = calibrated_z(s["epsilon"], s["delta"], q, s["rounds"] * steps, s["accountant"])
            try:                                  # charged before any noise is drawn
                self.budget.charge(SelfComposed(PoissonSubsampledGaussian(z, q), steps),
                                   party=f"client-{self.k}", round=round,
                                   note=f"horizontal round {round}: {steps} DP-SGD steps")
            except BudgetExceeded as exc:
                return REFUSED, str(exc).encode()
            noise = (s["clip"], z)
        up = client_step(self.strategy, self.model, self.local, self.X, self.y, self.state,
                         self.k, round, frame, self.key, noise)
        return "update", up

    def get_state(self):
        return {"state": {n: v.numpy() for n, v in self.state.items()}, "key": self.key}

    def set_state(self, state):
        import torch

        self.state = {n: torch.from_numpy(v) for n, v in state["state"].items()}
        self.key = state["key"]


# -- the server --------------------------------------------------------------------------------
def serve(grid, spec, progress=None) -> dict:
    """The ServerApp's work for one strategy run described by ``spec`` (:func:`run`)."""
    import torch

    from ..horizontal.local import FlatModel, LocalConfig
    from ..horizontal.loop import round_loop
    from ..horizontal.metering import Meter
    from ..horizontal.partition import FederatedData
    from ..horizontal.runtime import _StrategyRun

    link = link_for(grid, spec)
    out = {"t": 0, "error": None}
    try:
        torch.set_num_threads(int(spec["setup"]["threads"]))
        link.connect(b"")
        setup = json.dumps(spec["setup"]).encode()
        link.exchange([(k, setup, "setup") for k in range(spec["K"])], 0)
        net = build_net(spec["setup"]["model"])
        torch.nn.utils.vector_to_parameters(torch.from_numpy(spec["theta0"]), net.parameters())
        # the server's view of the clients: their record counts, no records
        shards = [(np.empty((m, 0), np.float32), np.empty(m, np.int64))
                  for m in spec["setup"]["sizes"]]
        data = FederatedData(shards, spec["X_test"], spec["y_test"], 0, None)
        st = spec["setup"]
        algo = _StrategyRun(make_strategy(st["strategy"], st["settings"]), data,
                            FlatModel(net), participation=spec["participation"],
                            local=LocalConfig(**st["local"]), sampler=spec["sampler"],
                            public=spec["public"], client_key=None, dp=None, clip=st["clip"])
        meter = Meter()

        def prog(t):
            out["t"] = t + 1
            if progress is not None:
                progress(t + 1)
        lost = []
        stopped = round_loop(algo, spec["rounds"], meter=meter, progress=prog, lost=lost,
                             clients=remote_clients(
                                 link, lambda k: "train",
                                 tolerate=spec.get("on_client_loss") == "continue"))
        out.update(theta=algo.theta.numpy(), history=algo.history,
                   participants=algo.participants, stopped=stopped, meter=meter,
                   lost_clients=lost_records(lost, link))
    except Exception as exc:
        from ..horizontal.loop import AllClientsLost
        from .link import PartyLost

        if isinstance(exc, AllClientsLost):     # nothing left to continue with: stop
            why = dict(((int(p), int(r)), w) for p, r, w in link.lost)
            exc = PartyLost(exc.client, exc.round,
                            f"{why.get((exc.client, exc.round), 'lost')}; {exc}")
        out["error"] = error_record(exc, out["t"])
    out["flower"] = flower_summary(link, spec["K"])
    return out


def run(backend, strategy, data, model_fn, *, rounds, participation, local, sampler, epsilon,
        delta, clip, accountant, ledger, seed, threads, progress, flower=None):
    """:func:`vflpriv.horizontal.runtime.run` on ``backend`` ("flower-sim" or "flower"): the
    same arguments and :class:`~vflpriv.horizontal.runtime.RunResult`, with ``flower`` holding
    the Flower bytes per client, each client's ledger, the clients stopped by their budgets and
    the clients lost (``lost_clients``: under ``flower.on_client_loss == "continue"``, the
    default, the run goes on without them).  A client lost under ``"stop"`` (or at setup, or
    refusing at setup) raises :class:`~.link.PartyLost` / :class:`~.link.PartyRefused` naming
    it, with the byte counts in ``exc.flower``."""
    import dataclasses

    import torch

    from ..horizontal.local import FlatModel
    from ..horizontal.runtime import RunResult
    from . import FlowerOptions, on_client_loss

    flower = flower or FlowerOptions()
    public = int(seed) if seed is not None else secrets.randbits(63)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        torch.manual_seed(public)
        net = model_fn()
        model_spec = describe_model(net)
        theta0 = FlatModel(net).flat().numpy()
    finally:
        torch.set_num_threads(before)
    private = math.isfinite(epsilon)
    sizes = [int(np.asarray(y).shape[0]) for _, y in data.clients]
    setup = {"family": "horizontal", "strategy": strategy.name,
             "settings": _settings_of(strategy), "model": model_spec, "dim": int(theta0.size),
             "sizes": sizes, "local": dataclasses.asdict(local), "threads": int(threads),
             "private": private, "epsilon": epsilon if private else None, "delta": delta,
             "clip": clip, "rounds": int(rounds), "accountant": accountant}
    spec = {"family": "horizontal", "K": len(sizes), "setup": setup, "theta0": theta0,
            "X_test": np.asarray(data.X_test), "y_test": np.asarray(data.y_test),
            "participation": participation, "sampler": sampler, "public": public,
            "rounds": int(rounds), "iterations": int(rounds),
            "on_client_loss": on_client_loss(flower, "horizontal"),
            "connect_timeout": flower.connect_timeout, "reply_timeout": flower.reply_timeout}
    shards = [{"X": np.ascontiguousarray(X), "y": np.asarray(y, np.int64)}
              for X, y in data.clients]
    out, info, ledgers = launch(backend, spec, shards, private=private, epsilon=epsilon,
                                delta=delta, accountant=accountant, ledger=ledger, seed=seed,
                                flower=flower, progress=progress)
    if "theta" not in out:
        raise_error(out, info, backend)
    from ..horizontal.ldp import noise_multiplier

    z = {}
    if private:
        for m in sizes:
            q, steps = local.batch_size / m, local.steps(m, True)
            z[(q, steps)] = noise_multiplier(epsilon, delta, q, rounds * steps, accountant)
    info["stopped"] = [k for k, r in enumerate(out["stopped"]) if r is not None]
    info["lost_clients"] = out.get("lost_clients", [])
    info["on_client_loss"] = spec["on_client_loss"]
    res = RunResult(theta=torch.from_numpy(out["theta"]), accuracy_history=out["history"],
                    meter=out["meter"], participants=out["participants"],
                    epsilon_spent=info.get("epsilon_spent"), noise_multiplier=z,
                    stopped_round=out["stopped"], deployment=seed is None, ledger=None,
                    client_states=[], flower=info)
    return res


def _settings_of(strategy) -> dict:
    s = dict(strategy.settings())
    if strategy.name == "feddyn":
        return {"lambda2": s["lambda2"], "lambda1": s["lambda1"], "threshold": s["threshold"]}
    return s


def launch(backend, spec, shards, *, private, epsilon, delta, accountant, ledger, seed, flower,
           progress):
    """Write each client's shard to its own file, start the clients on ``backend``, run ``spec``;
    returns ``(server output, flower info, client ledgers)``.  Shared with FedP3."""
    import shutil
    import tempfile

    from . import check_backend, require_flwr

    check_backend(backend)
    require_flwr(backend)
    K = len(shards)
    own_dir = not flower.run_dir
    run_dir = flower.run_dir or tempfile.mkdtemp(prefix="vflpriv-flower-")
    os.makedirs(run_dir, exist_ok=True)
    ledgers = [None] * K
    budgets = [None] * K
    if private:
        if flower.party_ledgers:
            ledgers = [str(p) for p in flower.party_ledgers]
        else:
            # beside the run's ledger; without one, in a directory of their own that outlives
            # the run (as the in-process temporary ledger does)
            base = getattr(ledger, "path", ledger) or os.path.join(
                tempfile.mkdtemp(prefix="vflpriv-client-ledgers-"), "ledger")
            ledgers = [f"{base}.client{k}" for k in range(K)]
        if len(ledgers) != K:
            raise InputError(f"party_ledgers names {len(ledgers)} files for {K} clients")
        pb = flower.party_budget or (epsilon, delta)
        budgets = list(pb) if isinstance(pb[0], (tuple, list)) else [tuple(pb)] * K
        if len(budgets) != K:
            raise InputError(f"party_budget gives {len(budgets)} budgets for {K} clients")
    cfgs = []
    try:
        for k, arrays in enumerate(shards):
            path = os.path.join(run_dir, f"client{k}.npz")
            save_client_data(path, **arrays)
            cfg = {"party": k, "data": path}
            if private:
                cfg.update({"ledger": ledgers[k], "budget-epsilon": float(budgets[k][0]),
                            "budget-delta": float(budgets[k][1]), "accountant": accountant})
            if seed is not None:          # seeded runs only: the in-process client key
                cfg["noise-entropy"] = str(int(seed))
            cfgs.append(cfg)
        from .apps import launch

        out = launch(backend, spec, cfgs, run_dir, quiet=flower.quiet,
                     progress=progress and (lambda t: progress(t - 1)))
        info = {"backend": backend, **out["flower"], "error": out["error"],
                "rounds_completed": out["t"], "client_ledgers": ledgers if private else None}
        if private:
            info["epsilon_spent"] = client_spend(ledgers, (epsilon, delta), accountant)
    finally:
        if own_dir:
            shutil.rmtree(run_dir, ignore_errors=True)
    return out, info, ledgers


def raise_error(out, info, backend):
    raise_recorded(out["error"] or {"kind": "RuntimeError", "round": out["t"], "party": None,
                                    "reason": "no result",
                                    "message": "the run ended without a result"}, info, backend)
