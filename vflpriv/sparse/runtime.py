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

Randomness: one generator for the public choices (participants, minibatches of non-private runs)
and one for client secrets (noise, private minibatches); both come from ``seed`` when given (a
reproducible run, marked not for deployment) and from OS entropy otherwise.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

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
        return int(math.ceil(self.size * self.growth ** t - 1e-9))


class ClientContext:
    """What a strategy's ``local`` may use: the data (``shards``), the round's minibatch
    gradients (``grad``, private when the run is record-level private), the step size, and the
    round's generator.  ``grad`` counts its calls so that a private run charges every step."""

    def __init__(self, shards, clients, t, lr, batch, rng, privacy=None, secret_rng=None):
        self.shards, self.clients, self.t, self.lr = shards, clients, t, lr
        self.batch, self.rng, self.privacy, self.secret_rng = batch, rng, privacy, secret_rng
        self.steps = 0

    def grad(self, X):
        """Minibatch gradients of each participant's local objective at the rows of X."""
        self.steps += 1
        if self.privacy is not None and self.privacy.level == "record":
            return self.privacy.client_gradient(self, X)
        b = self.shards.sample_batch(self.clients, self.batch, self.rng)
        return self.shards.grad(X, self.clients, b)

    def full_grad(self, X):
        if self.privacy is not None and self.privacy.level == "record":
            raise RuntimeError("a record-level private run may only use the private gradient")
        return self.shards.grad(X, self.clients, None)


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
            **self.settings,
        }


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
    public_rng = np.random.default_rng(seed)
    secret_rng = np.random.default_rng(None if seed is None else [int(seed), 1])

    def to_x(alpha):
        return alpha if dictionary is None else dictionary @ alpha

    state = strategy.init_state(shards.d)
    objective = [float(p @ shards.local_objectives(strategy.model(state)))]
    rel = [relative_error(to_x(strategy.model(state)), x_true)] if x_true is not None else None
    up, down, up_c, down_c, parts = [], [], [], [], []
    t0 = time.perf_counter()
    for t in range(rounds):
        S = participation.sample(N, public_rng)
        ctx = ClientContext(shards, S, t, lr, batch.at(t), public_rng, privacy, secret_rng)
        if privacy is not None:
            privacy.before_round(ctx, strategy)          # charges before any noise is drawn
        msg = strategy.broadcast(state)
        if metering:
            data = wire.encode(msg)
            start_vec, nb_down = wire.decode(data), len(data)
        else:
            start_vec, nb_down = msg, 0
        down.append(nb_down * S.shape[0])
        down_c.append({int(i): nb_down for i in S})
        parts.append(S.tolist())
        if S.shape[0] == 0 and (privacy is None or privacy.level != "client"):
            # nobody joined (Poisson participation): nothing is sent, the state is kept (a
            # client-level private round still releases its noise: the accounting assumes it)
            up.append(0)
            up_c.append({})
        else:
            if S.shape[0] and vectorize:
                V = strategy.local(ctx, np.tile(start_vec, (S.shape[0], 1)))
            elif S.shape[0]:
                V = np.empty((S.shape[0], shards.d))
                for r, i in enumerate(S):
                    ci = ClientContext(shards, S[r:r + 1], t, lr, batch.at(t), public_rng,
                                       privacy, secret_rng)
                    V[r] = strategy.local(ci, start_vec[None, :].copy())[0]
            else:
                V = np.zeros((0, shards.d))
            if privacy is not None and privacy.level == "client":
                V = privacy.clip_updates(V, start_vec)
            if metering and S.shape[0]:
                V, nb = wire.roundtrip_rows(V)
            else:
                nb = np.zeros(S.shape[0], dtype=np.int64)
            up.append(int(nb.sum()))
            up_c.append({int(i): int(b) for i, b in zip(S, nb)})
            if privacy is not None and privacy.level == "client":
                mean = privacy.noisy_mean(V, start_vec, ctx)
            else:
                w = p[S] / p[S].sum()
                mean = w @ V
            state = strategy.aggregate(state, mean)
        if evaluate or t == rounds - 1:
            x = strategy.model(state)
            objective.append(float(p @ shards.local_objectives(x)))
            if rel is not None:
                rel.append(relative_error(to_x(x), x_true))
        if callback is not None:
            callback(t, objective[-1])
    seconds = time.perf_counter() - t0
    x = to_x(strategy.model(state))
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
    return SparseResult(strategy.name, x, objective, rel, prec, rec, up, down, up_c, down_c,
                        parts, seconds, lr, priv,
                        settings={"rounds": int(rounds), "participation": participation.describe(),
                                  "batch_size": batch.size, "batch_growth": batch.growth,
                                  "weights": weights, "seed": seed, **strategy.settings()})
