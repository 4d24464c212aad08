"""The round loop of the horizontal sparse methods, written once (Flower's ``start()``).

A round t:

1. the server samples the participants S_t (:class:`Participation`: everyone; L of N without
   replacement; or Poisson with rate q, each client independently);
2. it broadcasts ``strategy.broadcast(state)``: serialized once per receiving client and metered
   (:mod:`vflpriv.sparse.wire`); every client starts from the decoded vector;
3. every participant runs ``strategy.local`` (all participants at once, as one batched array when
   the data layout allows) and its reply is serialized, metered and decoded;
4. the server aggregates the replies with weights p_i renormalized over S_t,
   ``sum_{i in S_t} p_i v_i / sum_{i in S_t} p_i`` (notes P000-3, P003-2), or, in a client-level
   private run, through :class:`~vflpriv.sparse.privacy.ClientLevelDP` (clip, sum, noise);
5. ``strategy.aggregate(state, mean)`` gives the new server state; metrics are computed on
   ``strategy.model(state)``.

Weights (P000-2): ``uniform`` p_i = 1/N (000's experiments, 003's Theorem 8) or ``examples``
p_i = n_i / n (ERM).  The objective reported is sum_i p_i f_i(x) with the run's own weights.

Randomness: the server has one generator for its public choices (participants) and one for its
secret (the client-level noise, ChaCha20: :mod:`vflpriv.noise`); each client has one per round,
ChaCha20 keyed from ``[root, t, i, 7]``
(:func:`client_generators`), for its minibatches, its record sample and its DP-SGD noise.  So a
client's numbers depend only on (root, round, client): the vectorized path, the per-client loop
and the Flower backends (each client alone in its ClientApp) compute the same replies.  Everything
comes from ``seed`` when given (a reproducible run, marked not for deployment) and from OS entropy
otherwise.

The loop itself is :func:`serve` (the server's side) with the clients behind ``clients.round``:
:class:`LocalClients` in process, :class:`~vflpriv.sparse.remote.LinkClients` over a runtime link (Flower, or in process).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from ..noise import generator as noise_generator
from . import wire
from .ops import relative_error, support_scores


class Participation:
    """Which clients take part in a round: ``full``, ``L`` of N without replacement, or
    ``poisson`` with rate q (the only scheme under which client-level privacy amplification by
    sampling is claimed; see :mod:`vflpriv.sparse.privacy`)."""

    def __init__(self, kind="full", value=None):
        if kind not in ("full", "fixed", "poisson"):
            raise ValueError(f"participation must be full, fixed or poisson, got {kind!r}")
        self.kind, self.value = kind, value

    @classmethod
    def parse(cls, text, n_clients):
        """'full' | 'L' (an integer, L of N) | 'F' (a fraction in (0, 1): round(F N) of N) |
        'poisson:Q'."""
        s = str(text).strip().lower()
        if s in ("full", "all"):
            return cls("full")
        if s.startswith("poisson:"):
            try:
                q = float(s.split(":", 1)[1])
            except ValueError:
                q = math.nan
            if not (0 < q <= 1):
                raise ValueError(f"--participation poisson:Q needs Q in (0, 1], got {text!r}")
            return cls("poisson", q)
        try:
            v = float(s)
        except ValueError:
            raise ValueError(f"--participation must be full, an integer L, a fraction or "
                             f"poisson:Q, got {text!r}") from None
        if 0 < v < 1:
            L = max(1, int(round(v * n_clients)))
        elif v == int(v) and 1 <= v <= n_clients:
            L = int(v)
        else:
            raise ValueError(f"--participation must be between 1 and the number of clients "
                             f"({n_clients}) or a fraction in (0, 1), got {text!r}")
        return cls("full") if L == n_clients else cls("fixed", L)

    def sample(self, N, rng):
        if self.kind == "full":
            return np.arange(N)
        if self.kind == "fixed":
            return np.sort(rng.choice(N, size=self.value, replace=False))
        return np.flatnonzero(rng.random(N) < self.value)

    def sample_remaining(self, remaining, rng):
        """The round's participants among the clients still in the federation (``remaining``:
        a boolean mask of length N; a client lost under ``--on-client-loss continue`` is out
        for good).  With every client remaining this is :meth:`sample` (the same draws).
        Poisson: every remaining client joins independently with probability q (the draw of
        all N is kept, so the others' choices are those of the run without the loss); L of N:
        L of the remaining (all of them when fewer than L remain)."""
        N = remaining.shape[0]
        if remaining.all():
            return self.sample(N, rng)
        idx = np.flatnonzero(remaining)
        if self.kind == "full" or (self.kind == "fixed" and self.value >= idx.shape[0]):
            return idx
        if self.kind == "fixed":
            return idx[np.sort(rng.choice(idx.shape[0], size=self.value, replace=False))]
        return np.flatnonzero((rng.random(N) < self.value) & remaining)

    def public_count(self, n):
        """The public divisor of a client-level private round among ``n`` remaining clients:
        n (full), min(L, n) (L of N), q n (Poisson).  It does not depend on who answered."""
        if self.kind == "full":
            return float(n)
        return float(min(self.value, n)) if self.kind == "fixed" else self.value * n

    def expected(self, N):
        return N if self.kind == "full" else self.value if self.kind == "fixed" else self.value * N

    def describe(self):
        return self.kind if self.kind == "full" else f"{self.kind}:{self.value}"


@dataclass
class BatchSchedule:
    """Minibatch size per round: ``size`` (None = full local data) times ``growth**t``, rounded up
    (000's Theorems 1-2 need a geometrically growing batch; the default is constant)."""

    size: int | None = None
    growth: float = 1.0

    def __post_init__(self):
        if self.size is not None and (isinstance(self.size, bool) or int(self.size) != self.size
                                      or self.size < 1):
            raise ValueError(f"--batch-size must be an integer >= 1, got {self.size!r}")
        if not (self.growth >= 1.0 and math.isfinite(self.growth)):
            raise ValueError(f"batch growth must be a finite number >= 1, got {self.growth!r}")

    def at(self, t):
        if self.size is None:
            return None
        # A batch takes min(b, n_i) records, so any b above every client's data is the same
        # batch: cap it where floats still count exactly (growth**t overflowed at --batch-growth
        # 1e308, an OverflowError instead of the full-data batch it means).
        try:
            b = self.size * self.growth ** t
        except OverflowError:
            b = math.inf
        return int(math.ceil(min(b, 2.0 ** 53) - 1e-9))


CLIENT_STREAM = 7        # tag of the clients' generators (the server's use [seed] and [seed, 1])


def client_generators(root, t, clients):
    """One generator per participant for round t: client i's is ChaCha20 keyed from
    ``SeedSequence([root, t, i, 7])`` (:func:`vflpriv.noise.generator`).

    A client draws everything random it does in a round (minibatches, its Poisson record sample,
    its DP-SGD noise) from its own generator, derived from (root, round, client) alone, so that
    its numbers do not depend on who else joined or on whether the participants are computed
    together (the vectorized path), one at a time, or each in its own Flower ClientApp.  ``root``
    is the run's seed (reproducible runs) or fresh OS entropy; on a deployment each client draws
    its own root, so no one else can predict its noise.
    """
    return [noise_generator([int(root), int(t), int(i), CLIENT_STREAM]) for i in clients]


class ClientContext:
    """What a strategy's ``local`` may use: the data (``shards``), the round's minibatch
    gradients (``grad``, private when the run is record-level private), the step size, and one
    generator per participant (``rngs``, :func:`client_generators`).  ``grad`` counts its calls so
    that a private run charges every step.  The server's own noise (client level) comes from
    ``secret_rng``."""

    def __init__(self, shards, clients, t, lr, batch, rngs, privacy=None, secret_rng=None):
        self.shards, self.clients, self.t, self.lr = shards, clients, t, lr
        self.batch, self.rngs, self.privacy, self.secret_rng = batch, rngs, privacy, secret_rng
        self.steps = 0

    def grad(self, X):
        """Minibatch gradients of each participant's local objective at the rows of X."""
        self.steps += 1
        if self.privacy is not None and self.privacy.level == "record":
            return self.privacy.client_gradient(self, X)
        b = self.shards.sample_batch(self.clients, self.batch, self.rngs)
        return self.shards.grad(X, self.clients, b)

    def full_grad(self, X):
        if self.privacy is not None and self.privacy.level == "record":
            raise RuntimeError("a record-level private run may only use the private gradient")
        return self.shards.grad(X, self.clients, None)


def client_replies(strategy, shards, clients, t, start, *, lr, batch, rngs, privacy,
                   vectorize=True):
    """The replies (L, d) of the participants ``clients`` (indices into ``shards``) to the
    broadcast ``start``: computed together (``vectorize``: one batched array) or one at a time;
    both give the same numbers (each client's randomness is its own generator in ``rngs``).  In a
    client-level private run each reply is clipped here, by its client, before it is sent."""
    L = clients.shape[0]
    if L == 0:
        return np.zeros((0, start.shape[0]))
    if vectorize:
        ctx = ClientContext(shards, clients, t, lr, batch, rngs, privacy)
        V = strategy.local(ctx, np.tile(start, (L, 1)))
    else:
        V = np.empty((L, start.shape[0]))
        for r in range(L):
            ctx = ClientContext(shards, clients[r:r + 1], t, lr, batch, rngs[r:r + 1], privacy)
            V[r] = strategy.local(ctx, start[None, :].copy())[0]
    if privacy is not None and privacy.level == "client":
        V = privacy.clip_updates(V, start)
    return V


class LocalClients:
    """Every client in this process (the ``inprocess`` backend): :meth:`round` answers one
    round's broadcast for the participants S, serializing and metering each reply."""

    def __init__(self, strategy, shards, *, lr, batch, privacy, root, vectorize=True):
        self.strategy, self.shards, self.lr, self.batch = strategy, shards, lr, batch
        self.privacy, self.root, self.vectorize = privacy, root, vectorize

    def round(self, t, S, start, frame):
        """``(replies as the server decodes them (L, d), bytes of each reply, which answered)``;
        ``frame`` is the serialized broadcast (None: metering off, nothing serialized).  In
        process every participant answers."""
        V = client_replies(self.strategy, self.shards, S, t, start, lr=self.lr,
                           batch=self.batch.at(t), rngs=client_generators(self.root, t, S),
                           privacy=self.privacy, vectorize=self.vectorize)
        if frame is not None and S.shape[0]:
            V, nb = wire.roundtrip_rows(V)
            return V, nb, np.ones(S.shape[0], dtype=bool)
        return V, np.zeros(S.shape[0], dtype=np.int64), np.ones(S.shape[0], dtype=bool)


@dataclass
class Traffic:
    """Bytes per round (summed, and per client) and the participants of each round."""
    up: list = field(default_factory=list)
    down: list = field(default_factory=list)
    up_c: list = field(default_factory=list)
    down_c: list = field(default_factory=list)
    parts: list = field(default_factory=list)
    #: clients lost under ``--on-client-loss continue``: ``{"client", "round", "reason"}``
    lost: list = field(default_factory=list)


def serve(strategy, clients, *, N, d, p, rounds, participation, privacy=None, seed=None,
          metering=True, on_round=None, federation=None):
    """The server's side of the round loop (the module docstring's steps 1, 2, 4 and 5); the
    clients' side is ``clients.round(t, S, start, frame)`` (:class:`LocalClients`, or the Flower
    backend's remote clients), which says which participants answered.  ``on_round(t, state)``
    after every round.  Returns ``(final state, Traffic)``.  ``federation``: what the privacy
    plan reads of the federation (its size N); the shards in process.

    A participant that did not answer (lost on Flower under ``--on-client-loss continue``) is
    out of the federation from then on: the round aggregates the replies that came, with the
    weights renormalized over them (sum over answered p_i v_i / sum over answered p_i, the
    partial-participation rule); later rounds sample among the remaining clients
    (:meth:`Participation.sample_remaining`).  A client-level private round divides its noisy
    sum by the public count of the clients remaining when the round began
    (:meth:`Participation.public_count`), never by how many answered (docs/flower.md, "A lost
    client")."""
    public_rng = np.random.default_rng(seed)
    secret_rng = noise_generator(None if seed is None else [int(seed), 1])
    if federation is None:
        from types import SimpleNamespace

        federation = SimpleNamespace(N=N)
    state = strategy.init_state(d)
    tr = Traffic()
    remaining = np.ones(N, dtype=bool)
    for t in range(rounds):
        S = participation.sample_remaining(remaining, public_rng)
        ctx = ClientContext(federation, S, t, None, None, None, privacy, secret_rng)
        ctx.public_count = participation.public_count(int(remaining.sum()))
        if privacy is not None:
            privacy.before_round(ctx, strategy)          # charges before any noise is drawn
        msg = strategy.broadcast(state)
        if metering:
            frame = wire.encode(msg)
            start_vec, nb_down = wire.decode(frame), len(frame)
        else:
            frame, start_vec, nb_down = None, msg, 0
        tr.down.append(nb_down * S.shape[0])
        tr.down_c.append({int(i): nb_down for i in S})
        tr.parts.append(S.tolist())
        if S.shape[0] == 0 and (privacy is None or privacy.level != "client"):
            # nobody joined (Poisson participation): nothing is sent, the state is kept (a
            # client-level private round still releases its noise: the accounting assumes it)
            tr.up.append(0)
            tr.up_c.append({})
        else:
            if S.shape[0]:
                V, nb, ok = clients.round(t, S, start_vec, frame)
            else:
                V, nb = np.zeros((0, d)), np.zeros(0, dtype=np.int64)
                ok = np.ones(0, dtype=bool)
            if not ok.all():
                for i in S[~ok]:
                    remaining[i] = False
                    tr.lost.append({"client": int(i), "round": int(t),
                                    "reason": getattr(clients, "reasons", {}).get(int(i), "")})
                S, V, nb = S[ok], V[ok], nb[ok]
                if not remaining.any():
                    raise ClientsLost(t, tr.lost)
            tr.up.append(int(np.sum(nb)))
            tr.up_c.append({int(i): int(b) for i, b in zip(S, nb)})
            if privacy is not None and privacy.level == "client":
                mean = privacy.noisy_mean(V, start_vec, ctx)
                state = strategy.aggregate(state, mean)
            elif S.shape[0]:
                w = p[S] / p[S].sum()
                mean = w @ V
                state = strategy.aggregate(state, mean)
        if on_round is not None:
            on_round(t, state)
    return state, tr


class ClientsLost(RuntimeError):
    """Every client of the federation was lost: nothing is left to continue with."""

    def __init__(self, round, lost):
        self.round, self.lost = round, lost
        super().__init__(f"every client was lost by round {round} "
                         f"({', '.join(str(x['client']) for x in lost)}); nothing left to run")


class Metrics:
    """Objective (and relative error) of the models of a run, computed on the data in this
    process (the experimenter's view: not a release, see :mod:`.privacy`)."""

    def __init__(self, shards, p, x_true=None, dictionary=None):
        self.shards, self.p, self.x_true, self.dictionary = shards, p, x_true, dictionary
        self.objective = []
        self.rel = [] if x_true is not None else None

    def to_x(self, alpha):
        return alpha if self.dictionary is None else self.dictionary @ alpha

    def add(self, x):
        self.objective.append(float(self.p @ self.shards.local_objectives(x)))
        if self.rel is not None:
            self.rel.append(relative_error(self.to_x(x), self.x_true))
        return self.objective[-1]


@dataclass
class SparseResult:
    algorithm: str
    x: np.ndarray
    objective: list
    relative_error: list | None
    support_precision: float | None
    support_recall: float | None
    uplink_bytes: list
    downlink_bytes: list
    uplink_bytes_per_client: list          # per round: {client: bytes}
    downlink_bytes_per_client: list
    participants: list
    seconds: float
    lr: float | None
    privacy: dict | None = None
    settings: dict = field(default_factory=dict)
    #: Flower backends: Flower message bytes per client beside the wire bytes, each client's
    #: own spend (:func:`vflpriv.sparse.hosted.run`); None in process
    flower: dict | None = None
    #: clients lost mid-run (Flower, ``--on-client-loss continue``): ``{"client", "round",
    #: "reason"}``; always empty in process
    lost_clients: list = field(default_factory=list)

    def to_dict(self):
        def num(v):
            return None if v is None or (isinstance(v, float) and not math.isfinite(v)) else v
        return {
            "algorithm": self.algorithm,
            "objective": [num(float(v)) for v in self.objective],
            "relative_error": None if self.relative_error is None else
            [num(float(v)) for v in self.relative_error],
            "support_precision": self.support_precision,
            "support_recall": self.support_recall,
            "uplink_bytes": [int(v) for v in self.uplink_bytes],
            "downlink_bytes": [int(v) for v in self.downlink_bytes],
            "uplink_bytes_per_client": [{str(k): int(v) for k, v in r.items()}
                                        for r in self.uplink_bytes_per_client],
            "downlink_bytes_per_client": [{str(k): int(v) for k, v in r.items()}
                                          for r in self.downlink_bytes_per_client],
            "participants": [[int(i) for i in p] for p in self.participants],
            "epsilon_spent": None if self.privacy is None else self.privacy["epsilon_spent"],
            "privacy": self.privacy,
            "model_nnz": int(np.count_nonzero(self.x)),
            "seconds": self.seconds,
            "lr": self.lr,
            "lost_clients": [dict(x) for x in self.lost_clients],
            **self.settings,
            **({} if self.flower is None else {"flower": flower_section(self)}),
        }


def flower_section(res) -> dict:
    """The JSON ``flower`` section: per client, the bytes of the Flower messages of the rounds
    (the whole ``Message`` protobuf) beside the wire bytes the in-process run counts for the
    same messages, and totals; the hello and setup messages (Flower round 0) are counted apart:
    they have no in-process twin."""
    f = res.flower
    tot = f["totals"]
    per = {}
    for k, up in f["rounds_bytes"]["uplink"].items():
        i = int(k)
        per[k] = {"uplink_flower": up, "downlink_flower": f["rounds_bytes"]["downlink"][k],
                  "uplink_inprocess": sum(r.get(i, 0) for r in res.uplink_bytes_per_client),
                  "downlink_inprocess": sum(r.get(i, 0) for r in res.downlink_bytes_per_client)}
    return {"backend": f["backend"],
            "uplink_flower_bytes": tot["uplink"] - tot["uplink_setup"],
            "downlink_flower_bytes": tot["downlink"] - tot["downlink_setup"],
            "uplink_inprocess_bytes": int(sum(res.uplink_bytes)),
            "downlink_inprocess_bytes": int(sum(res.downlink_bytes)),
            "uplink_wire_bytes_sent": tot["uplink_frames"],
            "downlink_wire_bytes_sent": tot["downlink_frames"],
            "setup_flower_bytes": {"uplink": tot["uplink_setup"],
                                   "downlink": tot["downlink_setup"]},
            "per_client": per, "party_spend": f.get("party_spend"),
            "rounds_completed": f["rounds_completed"], "wall_seconds": f.get("wall_seconds")}


def client_weights(counts, weights):
    if weights == "uniform":
        return np.full(counts.shape[0], 1.0 / counts.shape[0])
    if weights == "examples":
        return counts / counts.sum()
    raise ValueError(f"weights must be uniform or examples, got {weights!r}")


def default_lr(shards, weights="uniform", factor=1.0):
    """Step size from the data: 1 / max_i L_i, with L_i the smoothness estimate of client i's
    objective (curvature * lambda_max(Z_i^T Z_i) / n_i + l2, by power iteration).  Every local step
    is then a descent step on the client's own objective for full batches (docs/sparse.md)."""
    return factor / float(np.max(shards.smoothness()))


def run(strategy, shards, *, rounds, participation=None, batch=None, lr=None, weights="uniform",
        seed=None, x_true=None, support_true=None, dictionary=None, privacy=None,
        callback=None, metering=True, vectorize=True, evaluate=True):
    """Run ``strategy`` for ``rounds`` rounds; see the module docstring.

    ``dictionary``: an (n x d) matrix A when the shards hold Z A (the model is the coefficient
    vector alpha; errors are measured on x = A alpha).  ``privacy``: a
    :class:`~vflpriv.sparse.privacy.PrivacyPlan` or None.  ``callback(t, objective)`` after each
    round (progress bars).  ``vectorize=False`` runs the participants one at a time (a plain
    per-client loop over the same code: the baseline of ``vflpriv bench sparse``).
    ``evaluate=False`` computes the objective and errors only at round 0 and after the last
    round (benchmarks time the rounds alone).
    """
    if isinstance(rounds, bool) or not isinstance(rounds, (int, np.integer)) or rounds < 1:
        raise ValueError(f"--rounds must be an integer >= 1, got {rounds!r}")
    participation = participation or Participation("full")
    batch = batch or BatchSchedule()
    N = shards.N
    p = client_weights(shards.counts, weights)
    if lr is None and strategy.needs_lr:
        lr = default_lr(shards, weights)
    if lr is not None and not (lr > 0 and math.isfinite(lr)):
        raise ValueError(f"--lr must be a positive finite number, got {lr!r}")
    strategy.lr = lr
    strategy.blocks = getattr(shards, "c", 1)
    root = seed if seed is not None else np.random.SeedSequence().entropy
    local = LocalClients(strategy, shards, lr=lr, batch=batch, privacy=privacy, root=root,
                         vectorize=vectorize)
    metrics = Metrics(shards, p, x_true, dictionary)
    metrics.add(strategy.model(strategy.init_state(shards.d)))

    def on_round(t, state):
        if evaluate or t == rounds - 1:
            metrics.add(strategy.model(state))
        if callback is not None:
            callback(t, metrics.objective[-1])

    t0 = time.perf_counter()
    state, traffic = serve(strategy, local, N=N, d=shards.d, p=p, rounds=rounds,
                           participation=participation, privacy=privacy, seed=seed,
                           metering=metering, on_round=on_round, federation=shards)
    seconds = time.perf_counter() - t0
    return finish(strategy, strategy.model(state), metrics, traffic, seconds, lr=lr,
                  privacy=privacy, support_true=support_true, rounds=rounds,
                  participation=participation, batch=batch, weights=weights, seed=seed)


def finish(strategy, model, metrics, traffic, seconds, *, lr, privacy, support_true, rounds,
           participation, batch, weights, seed):
    """The :class:`SparseResult` of a finished run (both backends)."""
    x = metrics.to_x(model)
    x_true, dictionary = metrics.x_true, metrics.dictionary
    truth_support = x_true
    if support_true is not None:
        truth_support = np.zeros(x.shape[0])
        truth_support[np.asarray(support_true, dtype=int)] = 1.0
    if truth_support is not None and dictionary is None:   # x = A alpha is not sparse
        sx = x if strategy.sparse_model else strategy.ht(x[None, :])[0]
        prec, rec = support_scores(sx, truth_support)
    else:
        prec = rec = None
    priv = privacy.summary() if privacy is not None else None
    tr = traffic
    return SparseResult(strategy.name, x, metrics.objective, metrics.rel, prec, rec, tr.up,
                        tr.down, tr.up_c, tr.down_c, tr.parts, seconds, lr, priv,
                        settings={"rounds": int(rounds), "participation": participation.describe(),
                                  "batch_size": batch.size, "batch_growth": batch.growth,
                                  "weights": weights, "seed": seed, **strategy.settings()})
