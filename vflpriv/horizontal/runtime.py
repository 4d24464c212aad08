"""Strategies on flat parameter vectors, run by the shared round loop (torch):
:func:`run` drives a :class:`~vflpriv.horizontal.strategy.Strategy` (FedAvg / FedProx / SCAFFOLD /
FedDyn and their FedElasticNet variants, paper 001) through :func:`~vflpriv.horizontal.loop.round_loop`.

Round t (0-based):

1. participants P_t: FedDyn's Bernoulli sampler (``sampler="feddyn"``, paper 001's; seed-indexed per
   round) or a fixed-size uniform draw (``"fixed"``);
2. for each k in P_t, in order: with local DP, the round's DP-SGD steps are charged to k's budget
   first (a refused charge drops k for good); the server's vectors (``configure_train``) are
   serialized (:func:`wire.encode_vectors`, smallest encoding per vector) and metered as downlink;
   the client decodes them, trains locally, its reply (``client_reply``) is serialized, metered
   (nonzeros, entropy, bytes) and decoded for the server;
3. the server aggregates the decoded replies (``aggregate_train``) and the global model is scored on
   the global test set.

Randomness: ``seed=None`` (deployment) draws the server's public seed (initial model, participation)
and the clients' secret key (batches, DP noise) from OS entropy; an integer seeds both (reproducible,
not for deployment).
"""
from __future__ import annotations

import math
import secrets
from dataclasses import dataclass, field

import numpy as np
import torch

from ..noise import generator as noise_generator
from . import wire
from .config import OPTIONS, SAMPLERS, HorizontalConfig, LocalConfig  # noqa: F401
from .local import FlatModel, local_train
from .loop import round_loop
from .metering import Meter
from .participation import feddyn_sample, fixed_size_sample


@dataclass
class RunResult:
    theta: torch.Tensor
    accuracy_history: list
    meter: Meter
    participants: list                 # P_t per round
    epsilon_spent: list | None         # per client (None: non-private)
    noise_multiplier: dict = field(default_factory=dict)   # (q, steps) -> z
    stopped_round: list = field(default_factory=list)
    deployment: bool = False
    ledger: str | None = None
    client_states: list = field(default_factory=list)   # the strategy's per-client state
    flower: dict | None = None         # Flower backends: bytes per client, client ledgers, stops

    @property
    def accuracy(self) -> float:
        return self.accuracy_history[-1] if self.accuracy_history else math.nan


def run(strategy, data, model_fn, config: HorizontalConfig | None = None, **options) -> RunResult:
    """Train with ``strategy`` on ``data`` (:class:`~vflpriv.horizontal.partition.FederatedData`);
    ``model_fn()`` builds the torch model.  ``config`` is a
    :class:`~vflpriv.horizontal.config.HorizontalConfig`; without one the keyword ``options``
    (``rounds``, ``participation``, ``local``, ``sampler``, ``epsilon``, ``delta``, ``clip``,
    ``accountant``, ``ledger``, ``seed``, ``threads``, ``progress``, ``backend``, ``flower``) build
    it, which checks every one before any work.  ``progress(t)`` is called after every round.

    ``backend``: "inprocess" (default), "flower-sim" or "flower" (the roles of
    :mod:`vflpriv.horizontal.remote`: the clients as Flower ClientApps, each with its own shard,
    ledger and budget; ``flower`` a :class:`vflpriv.runtime.backends.FlowerOptions`).  A seeded run
    gives the same model on every backend."""
    cfg = _config(config, options)
    if cfg.backend != "inprocess":
        kw = {k: v for k, v in cfg.options().items() if k != "backend"}
        return _run_hosted(cfg.backend, strategy, data, model_fn, **kw)
    before = torch.get_num_threads()
    torch.set_num_threads(cfg.threads)
    try:
        return _run(strategy, data, model_fn, cfg.rounds, cfg.participation, cfg.local,
                    cfg.sampler, cfg.epsilon, cfg.delta, cfg.clip, cfg.accountant, cfg.ledger,
                    cfg.seed, cfg.progress)
    finally:
        torch.set_num_threads(before)


def _config(config, options) -> HorizontalConfig:
    """The run's config: ``config`` as given, or built from the keyword options."""
    if config is None:
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise TypeError(f"run() got unexpected keyword argument(s) {', '.join(unknown)}")
        return HorizontalConfig(**options)
    if options:
        raise TypeError("run() takes config= or keyword options, not both; use "
                        "dataclasses.replace(config, ...)")
    if not isinstance(config, HorizontalConfig):
        raise TypeError(f"config must be a HorizontalConfig, got {type(config).__name__}")
    return config


class _StrategyRun:
    """A :class:`Strategy` on flat parameter vectors, in the shape :func:`round_loop` drives:
    the server side calls the strategy, the client side runs :func:`local_train`."""

    def __init__(self, strategy, data, model, *, participation, local, sampler, public,
                 client_key, dp, clip):
        self.strategy, self.model, self.local, self.dp, self.clip = strategy, model, local, dp, clip
        self.participation, self.sampler, self.public, self.client_key = \
            participation, sampler, public, client_key
        self.theta = model.flat()
        self.Xs = [torch.from_numpy(np.ascontiguousarray(X)) for X, _ in data.clients]
        self.ys = [torch.from_numpy(np.asarray(y, dtype=np.int64)) for _, y in data.clients]
        self.Xte = torch.from_numpy(np.ascontiguousarray(data.X_test))
        self.yte = torch.from_numpy(np.asarray(data.y_test, np.int64))
        self.sizes = [int(y.shape[0]) for y in self.ys]
        self.n_clients = len(self.sizes)
        strategy.initialize(self.theta, self.sizes)
        self.states = [strategy.init_client(k, torch.zeros_like(self.theta))
                       for k in range(self.n_clients)]
        self.server_rng = np.random.default_rng([public, 11])
        self.participants, self.history = [], []

    def _plan(self, k):
        private = self.dp is not None
        return self.local.batch_size / self.sizes[k], self.local.steps(self.sizes[k], private)

    # -- server ---------------------------------------------------------------------------------
    def sample(self, t):
        m = self.n_clients
        chosen = feddyn_sample(m, self.participation, t, seed=self.public) \
            if self.sampler == "feddyn" else fixed_size_sample(m, self.participation, self.server_rng)
        self.participants.append([int(k) for k in chosen])
        return chosen

    def privacy_event(self, k, t):
        q, steps = self._plan(k)
        return self.dp.round_event(q, steps), f"horizontal round {t}: {steps} DP-SGD steps"

    def downlink(self, k, t):
        vecs = self.strategy.configure_train(self.theta, k)
        return wire.encode_vectors([v.numpy() for v in vecs], wire.DOWN)

    def receive(self, k, t, down, up):
        decoded = wire.decode_vectors(up)
        return decoded, [torch.from_numpy(v) for v in decoded]

    def model_form(self, values):
        """What the reply would be if the client sent its model theta_k = theta^{t-1} + Delta_k
        instead of its update Delta_k (FedDyn's original exchange; SCAFFOLD's Delta c is kept):
        for metering only, the server never needs it."""
        return [self.theta.numpy().astype(np.float64) + values[0]] + list(values[1:])

    def aggregate(self, t, replies):
        self.theta = self.strategy.aggregate_train(self.theta, replies)

    def drop_client(self, k):
        self.strategy.drop_client(k)

    def evaluate(self, t):
        self.history.append(self.model.accuracy(self.theta, self.Xte, self.yte))

    # -- client k -------------------------------------------------------------------------------
    def client_update(self, k, t, down):
        noise = None
        if self.dp is not None:
            q, steps = self._plan(k)
            noise = (self.clip, self.dp.noise_multiplier(q, steps))
        return client_step(self.strategy, self.model, self.local, self.Xs[k], self.ys[k],
                           self.states[k], k, t, down, self.client_key, noise)


def client_step(strategy, model, local, X, y, state, k, t, down, client_key, noise):
    """Client k's side of round t (in process and in a Flower ClientApp alike): decode the
    server's vectors, train locally from them, update ``state``, serialize the reply.  The
    randomness (batches, DP noise) comes from ``(client_key, t, k)`` only; ``noise``: None or
    ``(clip, noise multiplier)``."""
    received = [torch.from_numpy(v) for v in wire.decode_vectors(down)]
    corr, lam1, lam2 = strategy.local_objective(k, state, received)
    rng = noise_generator([client_key, t, k, 3])       # secret: batches and DP noise
    dp = None
    if noise is not None:
        dp = (noise[0], noise[1], rng)
    theta_k, steps = local_train(model, received[0], X, y, local, correction=corr,
                                 lambda1=lam1, lambda2=lam2, rng=rng, dp=dp)
    reply = strategy.client_reply(k, state, received, theta_k, steps, local.lr)
    return wire.encode_vectors([v.numpy() for v in reply], wire.UP)


def _run(strategy, data, model_fn, rounds, participation, local, sampler, epsilon, delta, clip,
         accountant, ledger, seed, progress):
    public = int(seed) if seed is not None else secrets.randbits(63)
    client_key = int(seed) if seed is not None else secrets.randbits(128)
    torch.manual_seed(public)
    model = FlatModel(model_fn())
    dp = None
    if math.isfinite(epsilon):
        from .ldp import LocalDP
        dp = LocalDP(epsilon, delta, clip, rounds, accountant=accountant, ledger=ledger)
    algo = _StrategyRun(strategy, data, model, participation=participation, local=local,
                        sampler=sampler, public=public, client_key=client_key, dp=dp, clip=clip)
    if dp is not None:       # a spent ledger: refused before round 0, not 0 rounds of nothing
        dp.refuse_if_spent({k: algo.privacy_event(k, 0)[0] for k in range(algo.n_clients)})
    meter = Meter()
    stopped = round_loop(algo, rounds, meter=meter, budget=dp, progress=progress)
    m = algo.n_clients
    return RunResult(theta=algo.theta, accuracy_history=algo.history, meter=meter,
                     participants=algo.participants,
                     epsilon_spent=[dp.spent(k) for k in range(m)] if dp else None,
                     noise_multiplier=dict(dp._z) if dp else {}, stopped_round=stopped,
                     deployment=seed is None, ledger=dp.ledger.path if dp else None,
                     client_states=algo.states)


def _run_hosted(backend, strategy, data, model_fn, *, rounds, participation, local, sampler, epsilon,
                delta, clip, accountant, ledger, seed, threads, progress, flower=None):
    """:func:`run` on ``backend`` ("flower-sim" or "flower"): the
    same arguments and :class:`RunResult`, with ``flower`` holding
    the Flower bytes per client, each client's ledger, the clients stopped by their budgets and
    the clients lost (``lost_clients``: under ``flower.on_client_loss == "continue"``, the
    default, the run goes on without them).  A client lost under ``"stop"`` (or at setup, or
    refusing at setup) raises :class:`~vflpriv.runtime.link.PartyLost` / ``PartyRefused`` naming
    it, with the byte counts in ``exc.flower``."""
    import dataclasses

    from ..runtime.backends import FlowerOptions, on_client_loss
    from .hosting import _settings_of, describe_model, launch, raise_error

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
    if out is None:                   # flower.spec_dir: the description was written, no run
        return info
    if "theta" not in out:
        raise_error(out, info, backend)
    from .ldp import noise_multiplier

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
