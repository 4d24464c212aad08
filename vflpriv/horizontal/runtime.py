"""The horizontal round loop, written once (torch): participation, messages, metering, local DP
budget, local training, evaluation.  Algorithms are :class:`~vflpriv.horizontal.strategy.Strategy`
objects (FedAvg / FedProx / SCAFFOLD / FedDyn and their FedElasticNet variants, paper 001).

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

from . import wire
from .local import FlatModel, LocalConfig, local_train
from .metering import Meter
from .participation import feddyn_sample, fixed_size_sample

SAMPLERS = ("feddyn", "fixed")


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

    @property
    def accuracy(self) -> float:
        return self.accuracy_history[-1] if self.accuracy_history else math.nan


def run(strategy, data, model_fn, *, rounds: int, participation: float = 1.0,
        local: LocalConfig | None = None, sampler: str = "feddyn", epsilon: float = math.inf,
        delta: float = 1e-5, clip: float = 1.0, accountant: str = "rdp", ledger=None,
        seed: int | None = None, threads: int = 1, progress=None) -> RunResult:
    """Train with ``strategy`` on ``data`` (:class:`~vflpriv.horizontal.partition.FederatedData`);
    ``model_fn()`` builds the torch model.  ``progress(t)`` is called after every round."""
    if sampler not in SAMPLERS:
        raise ValueError(f"sampler must be one of {', '.join(SAMPLERS)}, got {sampler!r}")
    local = local or LocalConfig()
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return _run(strategy, data, model_fn, rounds, participation, local, sampler, epsilon,
                    delta, clip, accountant, ledger, seed, progress)
    finally:
        torch.set_num_threads(before)


def _run(strategy, data, model_fn, rounds, participation, local, sampler, epsilon, delta, clip,
         accountant, ledger, seed, progress):
    public = int(seed) if seed is not None else secrets.randbits(63)
    client_key = int(seed) if seed is not None else secrets.randbits(128)
    torch.manual_seed(public)
    model = FlatModel(model_fn())
    theta = model.flat()
    m = len(data.clients)
    Xs = [torch.from_numpy(np.ascontiguousarray(X)) for X, _ in data.clients]
    ys = [torch.from_numpy(np.asarray(y, dtype=np.int64)) for _, y in data.clients]
    Xte, yte = torch.from_numpy(data.X_test), torch.from_numpy(np.asarray(data.y_test, np.int64))
    sizes = [int(y.shape[0]) for y in ys]
    strategy.initialize(theta, sizes)
    states = [strategy.init_client(k, torch.zeros_like(theta)) for k in range(m)]
    private = math.isfinite(epsilon)
    dp = None
    if private:
        from .ldp import LocalDP
        dp = LocalDP(epsilon, delta, clip, rounds, accountant=accountant, ledger=ledger)
    meter, history, participants = Meter(), [], []
    stopped = [None] * m
    server_rng = np.random.default_rng([public, 11])
    for t in range(rounds):
        chosen = feddyn_sample(m, participation, t, seed=public) if sampler == "feddyn" \
            else fixed_size_sample(m, participation, server_rng)
        participants.append([int(k) for k in chosen])
        replies = []
        for k in map(int, chosen):
            if stopped[k] is not None:
                continue
            q, steps = local.batch_size / sizes[k], local.steps(sizes[k], private)
            if private and not dp.charge(k, t, q, steps):      # charged before any noise
                stopped[k] = t
                continue
            down = wire.encode_vectors([v.numpy() for v in strategy.configure_train(theta, k)],
                                       wire.DOWN)
            meter.downlink(down)
            received = [torch.from_numpy(v) for v in wire.decode_vectors(down)]
            corr, lam1, lam2 = strategy.local_objective(k, states[k], received)
            rng = np.random.default_rng([client_key, t, k, 3])
            noise = None
            if private:
                gen = torch.Generator().manual_seed(int(rng.integers(2 ** 62)))
                noise = (clip, dp.noise_multiplier(q, steps), gen)
            theta_k, steps = local_train(model, received[0], Xs[k], ys[k], local, correction=corr,
                                         lambda1=lam1, lambda2=lam2, rng=rng, dp=noise)
            reply = [v.numpy() for v in strategy.client_reply(k, states[k], received, theta_k,
                                                               steps, local.lr)]
            up = wire.encode_vectors(reply, wire.UP)
            decoded = wire.decode_vectors(up)
            meter.uplink(decoded, up)
            replies.append((k, [torch.from_numpy(v) for v in decoded]))
        theta = strategy.aggregate_train(theta, replies)
        meter.end_round()
        history.append(model.accuracy(theta, Xte, yte))
        if progress is not None:
            progress(t)
    return RunResult(theta=theta, accuracy_history=history, meter=meter, participants=participants,
                     epsilon_spent=[dp.spent(k) for k in range(m)] if private else None,
                     noise_multiplier=dict(dp._z) if private else {}, stopped_round=stopped,
                     deployment=seed is None, ledger=dp.ledger.path if private else None,
                     client_states=states)
