"""Parties, server and the round loops of BCFW-AS, DP-BCFW-AS and dFW (paper 004, Algorithms 1-2).

Problem (paper 004 eq. 4 with Definition 5's 1/n):  min f(x) = (1/n) sum_j loss(a_j^T x, y_j)
over the product of per-party l1 balls  M = B_1 x ... x B_K,  B_k = {x_k : ||x_k||_1 <= eta}.
Algorithm 2 adds one vertex per party per round (line 12: s = eta sum_k -sign(idx_k) e_|idx_k|), so
its iterates live in this product set, not in one l1 ball of radius eta; we make that reading
explicit and compute reference optima and excess risks on the same set (DESIGN.md).

One round t of BCFW-AS / DP-BCFW-AS (every message serialized and metered, see messages.py):

1. The server draws the sampled set T^t (public seed), charges the round's report-noisy-max
   releases to the budget filter (private runs), and sends ``Round(q_hat)`` to each sampled party,
   q_hat = sum_k q_k, q_k = J A_k x_k built from released features only.
2. Party k: u = clip(J^T q_hat, +-R) (per-sample predictors, public), r = clip(l'(u, y), +-L),
   scores g = A_k^T r / n on its sampled columns, and the signed vertex by (noisy) argmax over the
   2|T^t cap P_k| values -g_i, +g_i; replies ``Index(sign * (i + 1))``.
3. For parties whose feature was not released before (the server's cache; post-processing), the
   server charges one Gaussian for the round's K' features and sends ``FeatureRequest``; the party
   replies ``Feature(J a_i + xi)``.
4. Server: gamma_t = 2 / (p_min t + 2); x_k <- (1 - gamma) x_k + gamma eta sign_k e_{i_k} and
   q_k <- (1 - gamma) q_k + gamma eta sign_k a_hat_{i_k} for every sampled party (Algorithm 1
   line 7 per block; Algorithm 2 lines 13-14).

With epsilon = inf nothing is clipped or perturbed and no noise generator is touched, so the run
equals BCFW-AS bit for bit under the same seed and sketch.

dFW (Bellet et al. 2015) in the same engine: every party sends its best signed index and its
block's FW gap <x_k - s_k, grad_k f>; the server moves only the block with the largest gap.  Its
largest block gap is at least the average, so the uniform-serial analysis over K blocks applies and
the step is gamma_t = 2 / (t / K + 2).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ..errors import InputError
from . import messages as M
from .sampling import ALL, Sampling
from .sketch import Sketch, signed_argmax
from .transport import DOWN, UP, InProcessTransport, Meter


class Party:
    """One data holder: its columns A_k (CSC or dense), the labels, and its private noise."""

    def __init__(self, k, A_k, y, loss, eta, *, noise=None, index_scale=0.0, feature_sigma=0.0,
                 clip=None, noise_seed=None, dfw=False):
        self.k, self.loss, self.eta = k, loss, float(eta)
        # CSC always: the sketch kernels read columns, and A_k^T r costs O(nnz(A_k)).
        A_k = sp.csc_matrix(A_k, dtype=np.float64)
        self.n = A_k.shape[0]
        self.p = A_k.shape[1]
        self.private = clip is not None
        if self.private:
            Ba, By, self.R, self.L = clip
            A_k = A_k.copy()
            np.clip(A_k.data, -Ba, Ba, out=A_k.data)
            y = np.clip(y, -By, By)
        self.A, self.y = A_k, y
        self.AT = A_k.T.tocsr()
        self.noise, self.b, self.sigma = noise, float(index_scale), float(feature_sigma or 0.0)
        self.rng = np.random.default_rng(noise_seed) if self.private else None
        self.dfw = dfw
        self.x = np.zeros(self.p)          # own block (dFW needs it for the gap)
        self.sketch = self.sampling = None
        self._draw_round, self._draw = -1, None
        self._pending = None

    def setup(self, msg: M.Setup, blocks):
        self.sketch = Sketch(msg.sketch, msg.n, msg.m, msg.sketch_seed)
        self.sampling_rng = np.random.default_rng(msg.sampling_seed)
        self.sampling_spec = blocks

    def _sampled(self, t):
        # Replay the public sampling stream up to round t (every party derives the same T^t).
        while self._draw_round < t:
            self._draw = self.sampling.draw(self.sampling_rng)[self.k]
            self._draw_round += 1
        return self._draw

    def scores(self, q_hat):
        """g = A_k^T r / n with r = l'(J^T q_hat, y), clipped to declared ranges when private."""
        u = self.sketch.transpose_apply(q_hat)
        if self.private:
            u = np.clip(u, -self.R, self.R)
        r = self.loss.derivative(u, self.y)
        if self.private:
            r = np.clip(r, -self.L, self.L)
        return np.asarray(self.AT @ r).ravel() / self.n

    def handle(self, msg, t):
        if isinstance(msg, M.Setup):
            return None
        if isinstance(msg, M.Round):
            cols = self._sampled(t)
            g = self.scores(msg.q_hat)
            sub = g if cols is ALL else g[cols]
            j, sign = signed_argmax(-sub, self.noise if self.private else None,
                                          self.b if self.private else 0.0, self.rng)
            i = j if cols is ALL else int(cols[j])
            self._pending = (i, sign)
            sidx = M.signed_index(i, sign)
            if self.dfw:
                gap = float(self.x @ g + self.eta * abs(g[i]))
                return M.IndexGap(sidx, gap)
            return M.Index(sidx)
        if isinstance(msg, M.FeatureRequest):
            i, sign = self._pending
            if self.dfw:   # only the winning block moves
                gamma = 2.0 / (t / self._K + 2.0)
                self.x *= 1.0 - gamma
                self.x[i] += gamma * self.eta * sign
            if not msg.release:
                return None
            a_hat = self.sketch.apply_column(self.A, i)
            if self.private and self.sigma > 0:
                a_hat = a_hat + self.rng.normal(0.0, self.sigma, a_hat.shape[0])
            return M.Feature(a_hat)
        raise InputError(f"party {self.k}: unexpected message {type(msg).__name__}")


@dataclass
class RunResult:
    algorithm: str
    x: np.ndarray
    objective: list                 # f(x^t) for t = 1..T (after each round)
    initial_objective: float
    meter: Meter
    K: int
    n: int
    m: int
    blocks: list
    seconds: float
    released: list                  # per party: number of features released
    selections: list                # per round: list of (party, global index, sign)
    naive_uplink: list              # per party: bytes had raw columns been shared (n floats)
    full_gradient_uplink: list      # per party: bytes had the local gradient been sent
    ledger: object = None
    noise_plan: object = None
    p_min: float = 1.0
    extra: dict = field(default_factory=dict)

    @property
    def support_size(self):
        return int(np.count_nonzero(self.x))

    def uplink(self, framed=False):
        return [self.meter.total(k, UP, framed) for k in range(self.K)]

    def downlink(self, framed=False):
        return [self.meter.total(k, DOWN, framed) for k in range(self.K)]


def _seeds(seed):
    ss = np.random.SeedSequence(seed)
    sk, sa, no = ss.spawn(3)
    return (int(sk.generate_state(1, np.uint64)[0] >> np.uint64(1)),
            int(sa.generate_state(1, np.uint64)[0] >> np.uint64(1)), no)


def run_vertical(data, loss, eta, iterations, *, algorithm="bcfw", sampling=None, sketch="identity",
                 sketch_dim=None, seed=0, noise_plan=None, budget_filter=None, clip=None,
                 release_cache=True, callback=None, transport_factory=InProcessTransport):
    """Run BCFW-AS / DP-BCFW-AS (``algorithm="bcfw"``) or dFW (``"dfw"``) on ``data``.

    ``noise_plan`` (a :class:`privacy.NoisePlan`), ``budget_filter`` (an accounting.BudgetFilter)
    and ``clip = (B_a, B_y, R, L)`` make the run private; all three or none.
    """
    if algorithm not in ("bcfw", "dfw"):
        raise InputError(f"algorithm must be 'bcfw' or 'dfw' here, got {algorithm!r}")
    if isinstance(iterations, bool) or not isinstance(iterations, (int, np.integer)) or iterations < 1:
        raise InputError(f"iterations must be a positive integer, got {iterations!r}")
    if not (isinstance(eta, (int, float, np.integer, np.floating)) and eta > 0 and math.isfinite(eta)):
        raise InputError(f"eta (per-party l1 radius) must be a positive finite number, got {eta!r}")
    private = noise_plan is not None
    if private and (budget_filter is None or clip is None):
        raise InputError("a private run needs a noise plan, a budget filter and clipping bounds")
    K, n = data.K, data.n
    sampling = sampling or Sampling("elementary", data.blocks)
    if algorithm == "dfw" and sampling.kind != "elementary":
        raise InputError("dFW asks every party every round; use the elementary sampling")
    sk_seed, sa_seed, noise_ss = _seeds(seed)
    probe = Sketch(sketch, n, sketch_dim, sk_seed)
    m = probe.m
    party_seeds = noise_ss.spawn(K)
    parties = [Party(k, data.block(k), data.y, loss, eta,
                     noise=noise_plan.noise if private else None,
                     index_scale=noise_plan.index_scale if private else 0.0,
                     feature_sigma=noise_plan.feature_sigma if private else 0.0,
                     clip=clip if private else None, noise_seed=party_seeds[k],
                     dfw=algorithm == "dfw") for k in range(K)]
    transport = transport_factory(parties)
    meter = transport.meter
    setup = M.Setup(sk_seed, sa_seed, n, m, sketch, K)
    for p in parties:
        p.sampling = sampling
        p._K = K
        p.setup(setup, data.blocks)
        transport.request(p.k, setup, 0)

    A = data.A
    y = data.y
    sampling_rng = np.random.default_rng(sa_seed)
    x = np.zeros(data.d)
    u_blocks = np.zeros((K, n))       # exact A_k x_k, for the objective history only
    q_blocks = np.zeros((K, m))       # the server's aggregate of released features
    cache = {}                        # (party, local index) -> a_hat
    released = [0] * K
    naive = [0] * K
    fullgrad = [0] * K
    selections = []
    history = []
    f0 = loss.objective(None, None, y, Ax=np.zeros(n))
    Acsc = A if sp.issparse(A) else None
    t0 = time.perf_counter()
    for t in range(iterations):
        q_hat = q_blocks.sum(axis=0)
        if algorithm == "dfw":
            active = list(range(K))
        else:
            draw = sampling.draw(sampling_rng)
            active = [k for k in range(K) if draw[k] is not None]
        if private and active:
            from .privacy import index_event
            budget_filter.charge(index_event(noise_plan.noise, noise_plan.index_scale,
                                             noise_plan.details["sens_index"], len(active)),
                                 party=",".join(map(str, active)), round=t, note="signed index")
        picks = {}
        gaps = {}
        for k in active:
            reply = transport.request(k, M.Round(q_hat), t)
            i, sign = M.unsign_index(reply.signed_index)
            picks[k] = (i, sign)
            if algorithm == "dfw":
                gaps[k] = reply.gap
            fullgrad[k] += 8 * len(data.blocks[k])
            naive[k] += 4
        if algorithm == "dfw":
            winner = max(active, key=lambda k: (gaps[k], -k))
            movers = [winner]
            gamma = 2.0 / (t / K + 2.0)
        else:
            movers = active
            gamma = sampling.step(t)
        new = [k for k in movers if not (release_cache and (k, picks[k][0]) in cache)]
        if private and new:
            from .privacy import feature_event
            budget_filter.charge(feature_event(noise_plan.feature_sigma,
                                               noise_plan.details["sens_feature"], len(new)),
                                 party=",".join(map(str, new)), round=t, note="active feature")
        for k in movers:
            i = picks[k][0]
            if k in new:
                reply = transport.request(k, M.FeatureRequest(1), t)
                cache[(k, i)] = reply.a_hat
                released[k] += 1
                naive[k] += 8 * n
                a_hat = reply.a_hat
            else:
                if algorithm == "dfw":
                    transport.request(k, M.FeatureRequest(0), t)
                a_hat = cache[(k, i)]
            sign = picks[k][1]
            gcol = int(data.blocks[k][i])
            blk = data.blocks[k]
            x[blk] *= 1.0 - gamma
            x[gcol] += gamma * eta * sign
            q_blocks[k] *= 1.0 - gamma
            q_blocks[k] += (gamma * eta * sign) * a_hat
            u_blocks[k] *= 1.0 - gamma
            if Acsc is not None:
                lo, hi = Acsc.indptr[gcol], Acsc.indptr[gcol + 1]
                u_blocks[k][Acsc.indices[lo:hi]] += (gamma * eta * sign) * Acsc.data[lo:hi]
            else:
                u_blocks[k] += (gamma * eta * sign) * A[:, gcol]
        selections.append([(k, int(data.blocks[k][picks[k][0]]), picks[k][1]) for k in movers])
        history.append(loss.objective(None, None, y, Ax=u_blocks.sum(axis=0)))
        if callback is not None:
            callback(t, history[-1])
    seconds = time.perf_counter() - t0
    return RunResult(algorithm="dfw" if algorithm == "dfw" else
                     ("dp-bcfw" if private else "bcfw"), x=x, objective=history,
                     initial_objective=f0, meter=meter, K=K, n=n, m=m, blocks=data.blocks,
                     seconds=seconds, released=released, selections=selections,
                     naive_uplink=naive, full_gradient_uplink=fullgrad,
                     ledger=budget_filter.ledger if budget_filter is not None else None,
                     noise_plan=noise_plan, p_min=sampling.p_min if algorithm == "bcfw" else 1.0 / K)
