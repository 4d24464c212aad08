"""Parties, server and the round loops of BCFW-AS, DP-BCFW-AS and dFW (paper 004, Algorithms 1-2).

Problem (paper 004 eq. 4 with Definition 5's 1/n):  min f(x) = (1/n) sum_j loss(a_j^T x, y_j)
over the product of per-party l1 balls  M = B_1 x ... x B_K,  B_k = {x_k : ||x_k||_1 <= eta}.
Algorithm 2 adds one vertex per party per round (line 12: s = eta sum_k -sign(idx_k) e_|idx_k|), so
its iterates live in this product set, not in one l1 ball of radius eta; we make that reading
explicit and compute reference optima and excess risks on the same set (docs/vertical.md,
"Threat model and problem").

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

With an intercept (``intercept_bound`` B_b given; docs/sensitivity.md 3.1): the margins are
a_j^T x + b with b unpenalized and held by party 0 (every party holds y here).  The round message
is ``RoundB(q_hat, b, flags)``; every party's predictors are u = clip(J^T q_hat, +-R) + b, and
party 0 (asked even when it is not sampled) adds g_b = (1/n) sum_j r_j, plus Gaussian noise in a
private run (charged with the round's indices, before any noise is drawn), to its reply
(``IndexB``, ``IndexGapB``, or ``InterceptGrad`` alone).  After x moves, the server moves b with
:func:`vflpriv.optim.intercept.update` (the damped Newton step of centralized FW, b in
[-B_b, B_b]) and sends it with the next round: x and b are updated in the same round, both from
derivatives at (x_t, b_t).

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
from ..noise import generator as noise_generator
from ..noise import restore as noise_restore
from ..noise import state as noise_state
from . import messages as M
from .clipshare import warn_if_clipped
from .sampling import ALL, Sampling
from .sketch import Sketch, signed_argmax
from .transport import DOWN, UP, InProcessTransport, Meter


class Party:
    """One data holder: its columns A_k (CSC or dense), the labels, and its private noise."""

    def __init__(self, k, A_k, y, loss, eta, *, noise=None, index_scale=0.0, feature_sigma=0.0,
                 clip=None, noise_seed=None, dfw=False, intercept_sigma=0.0):
        self.k, self.loss, self.eta = k, loss, float(eta)
        # CSC always: the sketch kernels read columns, and A_k^T r costs O(nnz(A_k)).
        A_k = sp.csc_matrix(A_k, dtype=np.float64)
        self.n = A_k.shape[0]
        self.p = A_k.shape[1]
        self.private = clip is not None
        if self.private:
            Ba, By, self.R, self.L = clip
            # every party holds the labels here: party 0 alone reports on them
            warn_if_clipped(k, A_k, y if k == 0 else None, Ba, By)
            A_k = A_k.copy()
            np.clip(A_k.data, -Ba, Ba, out=A_k.data)
            y = np.clip(y, -By, By)
        self.A, self.y = A_k, y
        self.AT = A_k.T          # CSR view of the CSC block (no copy)
        self.noise, self.b, self.sigma = noise, float(index_scale), float(feature_sigma or 0.0)
        self.sigma_b = float(intercept_sigma or 0.0)     # the intercept derivative's noise
        self.rng = noise_generator(noise_seed) if self.private else None
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

    def derivatives(self, q_hat, b=None):
        """r = l'(u, y) at u = J^T q_hat (+ b), clipped to declared ranges when private:
        u to [-R, R] before b is added (|u + b| <= R + B_b), r to [-L, L]."""
        u = self.sketch.transpose_apply(q_hat)
        if self.private:
            u = np.clip(u, -self.R, self.R)
        if b is not None:
            u = u + b
        r = self.loss.derivative(u, self.y)
        if self.private:
            r = np.clip(r, -self.L, self.L)
        return r

    def scores(self, q_hat, b=None):
        """g = A_k^T r / n with r = :meth:`derivatives`."""
        return np.asarray(self.AT @ self.derivatives(q_hat, b)).ravel() / self.n

    def _select(self, g, t):
        cols = self._sampled(t)
        sub = g if cols is ALL else g[cols]
        j, sign = signed_argmax(-sub, self.noise if self.private else None,
                                self.b if self.private else 0.0, self.rng)
        i = j if cols is ALL else int(cols[j])
        self._pending = (i, sign)
        gap = float(self.x @ g + self.eta * abs(g[i])) if self.dfw else None
        return M.signed_index(i, sign), gap

    def intercept_derivative(self, r):
        """g_b = (1/n) sum_j r_j, with N(0, sigma_b^2) added in a private run (drawn after the
        round's index noise)."""
        if self.private and not self.sigma_b > 0:
            raise InputError(f"party {self.k} has no noise for the intercept's derivative (party "
                             "0 of a private run with an intercept has); it releases none")
        g_b = float(np.mean(r))
        if self.private:
            g_b += float(self.rng.normal(0.0, self.sigma_b))
        return g_b

    def handle(self, msg, t):
        if isinstance(msg, M.Setup):
            return None
        if isinstance(msg, M.Round):
            sidx, gap = self._select(self.scores(msg.q_hat), t)
            return M.IndexGap(sidx, gap) if self.dfw else M.Index(sidx)
        if isinstance(msg, M.RoundB):
            r = self.derivatives(msg.q_hat, msg.b)
            sidx = gap = None
            if msg.select:
                sidx, gap = self._select(np.asarray(self.AT @ r).ravel() / self.n, t)
            if not msg.release_intercept:
                if sidx is None:
                    raise InputError(f"party {self.k}: a RoundB that asks for nothing")
                return M.IndexGap(sidx, gap) if self.dfw else M.Index(sidx)
            g_b = self.intercept_derivative(r)
            if sidx is None:
                return M.InterceptGrad(g_b)
            return M.IndexGapB(sidx, gap, g_b) if self.dfw else M.IndexB(sidx, g_b)
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

    def get_state(self) -> tuple[dict, dict]:
        """What changes between rounds: ``(meta, arrays)`` (generator states, the sampling replay
        position, the pending selection and the own block).  As secret as the data."""
        draw = self._draw
        meta = {"noise_rng": noise_state(self.rng),
                "sampling_rng": self.sampling_rng.bit_generator.state,
                "draw_round": self._draw_round,
                "draw": draw if draw is None or isinstance(draw, str) else
                [int(v) for v in np.asarray(draw)],
                "pending": None if self._pending is None else [int(v) for v in self._pending]}
        return meta, {"x": self.x}

    def set_state(self, meta, arrays):
        if meta["noise_rng"] is not None:
            noise_restore(self.rng, meta["noise_rng"])
        self.sampling_rng.bit_generator.state = meta["sampling_rng"]
        self._draw_round = int(meta["draw_round"])
        d = meta["draw"]
        self._draw = d if d is None or isinstance(d, str) else np.asarray(d, dtype=np.int64)
        if meta.get("pending") is not None:
            self._pending = tuple(int(v) for v in meta["pending"])
        self.x = np.array(arrays["x"], dtype=np.float64)


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
    intercept: float | None = None  # b_T (None: no intercept fitted)
    intercepts: list = field(default_factory=list)   # b_{t+1} after each round t

    @property
    def support_size(self):
        return int(np.count_nonzero(self.x))

    def uplink(self, framed=False):
        return [self.meter.total(k, UP, framed) for k in range(self.K)]

    def downlink(self, framed=False):
        return [self.meter.total(k, DOWN, framed) for k in range(self.K)]


class ObjectiveTracker:
    """f(x^t) along a run from the rounds' selections: u_k = A_k x_k kept exactly per block
    (the same floating-point operations whether it runs inside the server or replays a run)."""

    def __init__(self, data, loss):
        self.data, self.loss = data, loss
        self.u_blocks = np.zeros((data.K, data.n))
        self._Acsc = data.A if sp.issparse(data.A) else None

    def value(self, b=None):
        """f(x, b) (``b`` None: no intercept)."""
        z = self.u_blocks.sum(axis=0)
        return self.loss.objective(None, None, self.data.y, Ax=z if b is None else z + b)

    def advance(self, selections, gamma, eta, b=None):
        """Apply one round's moves ``[(party, global column, sign), ...]``; returns f (at the
        round's new intercept ``b``, None: none)."""
        for k, gcol, sign in selections:
            step = gamma * eta * sign
            self.u_blocks[k] *= 1.0 - gamma
            if self._Acsc is not None:
                lo, hi = self._Acsc.indptr[gcol], self._Acsc.indptr[gcol + 1]
                self.u_blocks[k][self._Acsc.indices[lo:hi]] += step * self._Acsc.data[lo:hi]
            else:
                self.u_blocks[k] += step * self.data.A[:, gcol]
        return self.value(b)


def replay_objective(data, loss, eta, selections, gammas, intercepts=None) -> tuple[float, list]:
    """(f(0), [f(x^1), ..., f(x^T)]) of a run known by its selections and step sizes (and its
    intercept after each round, None: none)."""
    tr = ObjectiveTracker(data, loss)
    first = tr.value()
    bs = [None] * len(gammas) if not intercepts else intercepts
    return first, [tr.advance(sel, g, float(eta), b)
                   for sel, g, b in zip(selections, gammas, bs)]


def _seeds(seed, noise_key=None):
    """(sketch seed, sampling seed, root of the parties' noise seeds).  The first two travel in
    the Setup message; SeedSequence is not a one-way function, so with ``noise_key`` (OS entropy
    in deployment) the noise root is independent of them rather than a sibling of them."""
    ss = np.random.SeedSequence(seed)
    sk, sa, no = ss.spawn(3)
    if noise_key is not None:
        no = np.random.SeedSequence(noise_key)
    return (int(sk.generate_state(1, np.uint64)[0] >> np.uint64(1)),
            int(sa.generate_state(1, np.uint64)[0] >> np.uint64(1)), no)


class Server:
    """The server of the protocol, one round per :meth:`step` (for teaching and custom loops).

    >>> from vflpriv.data import VerticalData, make_synthetic
    >>> from vflpriv.optim import SquaredLoss
    >>> A, y, _ = make_synthetic(n=50, d=40, density=0.2, seed=0)
    >>> srv = Server(VerticalData.from_arrays(A, y, "balanced", parties=2), SquaredLoss(), eta=1.0)
    >>> rec = srv.step()              # one round: indices, features, update
    >>> [k for k, _, _ in rec["selections"]], srv.meter.total(0, "uplink") == 4 + 8 * 50
    ([0, 1], True)

    ``noise_plan`` (a :class:`privacy.NoisePlan`), ``budget_filter`` (an accounting.BudgetFilter)
    and ``clip = (B_a, B_y, R, L)`` make the run private; all three or none.  ``seed`` derives
    the public seeds (sketch, sampling) and, unless ``noise_key`` is given, the parties' noise;
    ``noise_key`` (e.g. 128 bits of OS entropy) seeds the noise independently of anything sent.
    ``intercept_bound`` B_b (None: no intercept) fits an unpenalized intercept b in [-B_b, B_b]
    held by party 0 (module docstring); a private run's plan must then hold its noise
    (``noise_plan.details["intercept_sigma"]``, ``["sens_intercept"]``).
    """

    def __init__(self, data, loss, eta, *, algorithm="bcfw", sampling=None, sketch="identity",
                 sketch_dim=None, seed=0, noise_plan=None, budget_filter=None, clip=None,
                 release_cache=True, transport_factory=InProcessTransport, noise_key=None,
                 remote=None, track_objective=True, intercept_bound=None):
        if algorithm not in ("bcfw", "dfw"):
            raise InputError(f"algorithm must be 'bcfw' or 'dfw' here, got {algorithm!r}")
        if isinstance(eta, bool) or not (isinstance(eta, (int, float, np.integer, np.floating))
                                         and eta > 0 and math.isfinite(eta)):
            raise InputError(f"eta (per-party l1 radius) must be a positive finite number, got {eta!r}")
        self.private = noise_plan is not None
        if self.private and (budget_filter is None or clip is None):
            raise InputError("a private run needs a noise plan, a budget filter and clipping bounds")
        self.data, self.loss, self.eta, self.algorithm = data, loss, float(eta), algorithm
        self.intercept_bound = None if intercept_bound is None else float(intercept_bound)
        if self.private and self.intercept_bound is not None and \
                "intercept_sigma" not in noise_plan.details:
            raise InputError("a private run with an intercept needs its noise in the plan "
                             "(noise_plan.details['intercept_sigma'], ['sens_intercept'])")
        self.K, self.n = K, n = data.K, data.n
        self.sampling = sampling = sampling or Sampling("elementary", data.blocks)
        if algorithm == "dfw" and sampling.kind != "elementary":
            raise InputError("dFW asks every party every round; use the elementary sampling")
        self.noise_plan, self.budget_filter, self.release_cache = noise_plan, budget_filter, release_cache
        sk_seed, sa_seed, noise_ss = _seeds(seed, noise_key)
        self.m = m = Sketch(sketch, n, sketch_dim, sk_seed).m
        self.noise_root = noise_ss
        setup = M.Setup(sk_seed, sa_seed, n, m, sketch, K)
        if remote is not None:
            # The parties live elsewhere (Flower): they get the public setup and build
            # themselves from their own data (vflpriv.vertical.remote).
            self.parties = []
            self.transport = remote(self.public_setup(setup, clip))
        else:
            party_seeds = noise_ss.spawn(K)
            private = self.private
            self.parties = [Party(k, data.block(k), data.y, loss, eta,
                                  noise=noise_plan.noise if private else None,
                                  index_scale=noise_plan.index_scale if private else 0.0,
                                  feature_sigma=noise_plan.feature_sigma if private else 0.0,
                                  clip=clip if private else None, noise_seed=party_seeds[k],
                                  dfw=algorithm == "dfw",
                                  intercept_sigma=self._intercept_sigma() if k == 0 else 0.0)
                            for k in range(K)]
            self.transport = transport_factory(self.parties)
            for p in self.parties:
                p.sampling = sampling
                p._K = K
                p.setup(setup, data.blocks)
        self.meter = self.transport.meter
        for k in range(K):
            self.transport.request(k, setup, 0)
        self.sampling_rng = np.random.default_rng(sa_seed)
        self.t = 0
        self.x = np.zeros(data.d)
        self.q_blocks = np.zeros((K, m))     # the server's aggregate of released features
        self.cache = {}                      # (party, local index) -> a_hat
        self.released = [0] * K
        self.naive = [0] * K
        self.fullgrad = [0] * K
        self.selections = []
        self.gammas = []
        self.history = []
        self.b = 0.0                         # the intercept (party 0's; public: post-processing)
        self.intercepts = []                 # b after each round
        # f(x^t) needs every party's columns: computed here in process, and after a Flower run
        # by replay_objective where the data can be joined (the ServerApp never holds them).
        self.tracker = ObjectiveTracker(data, loss) if track_objective else None
        self.initial_objective = self.tracker.value() if track_objective else None

    @property
    def fit_intercept(self) -> bool:
        return self.intercept_bound is not None

    def _intercept_sigma(self) -> float:
        if not (self.private and self.fit_intercept):
            return 0.0
        return float(self.noise_plan.details["intercept_sigma"])

    def public_setup(self, setup, clip) -> dict:
        """Everything a remote party needs besides its own data (all public: seeds of the public
        randomness, the calibrated noise, the declared bounds, the column assignment)."""
        plan = self.noise_plan
        smp = self.sampling
        return {"algorithm": self.algorithm, "loss": self.loss.name, "eta": self.eta,
                "K": self.K, "n": self.n, "m": setup.m, "sketch": setup.sketch,
                "sketch_seed": setup.sketch_seed, "sampling_seed": setup.sampling_seed,
                "sampling": {"kind": smp.kind, "tau": getattr(smp, "tau", None),
                             "probs": None if getattr(smp, "probs", None) is None
                             else [float(v) for v in smp.probs],
                             "blocks": [[int(v) for v in b] for b in smp.blocks]},
                "private": self.private,
                "noise": plan.noise if self.private else None,
                "index_scale": plan.index_scale if self.private else 0.0,
                "feature_sigma": plan.feature_sigma if self.private else 0.0,
                "sens_index": plan.details["sens_index"] if self.private else None,
                "sens_feature": plan.details["sens_feature"] if self.private else None,
                "clip": list(clip) if self.private else None,
                "intercept": self.fit_intercept, "intercept_sigma": self._intercept_sigma(),
                "sens_intercept": plan.details["sens_intercept"]
                if self.private and self.fit_intercept else None}

    def step(self) -> dict:
        """Run round t and return ``{"round", "selections", "gamma", "new", "objective"}``."""
        from ..optim import intercept as IC
        from .privacy import feature_event, index_event, intercept_event

        t, K, n, data, tr = self.t, self.K, self.n, self.data, self.transport
        plan, eta = self.noise_plan, self.eta
        q_hat = self.q_blocks.sum(axis=0)
        if self.algorithm == "dfw":
            active = list(range(K))
        else:
            draw = self.sampling.draw(self.sampling_rng)
            active = [k for k in range(K) if draw[k] is not None]
        if self.private and active:
            # Charged before any party is asked (and so before any index noise is drawn).
            self.budget_filter.charge(index_event(plan.noise, plan.index_scale,
                                                  plan.details["sens_index"], len(active)),
                                      party=",".join(map(str, active)), round=t,
                                      note="signed index")
        icpt = self.fit_intercept
        if self.private and icpt:
            # party 0's noisy intercept derivative, charged with the indices, before any noise
            self.budget_filter.charge(intercept_event(plan.details["intercept_sigma"],
                                                      plan.details["sens_intercept"]),
                                      party="0", round=t, note="intercept derivative")
        picks, gaps = {}, {}
        if icpt:
            asked = sorted(set(active) | {0})
            requests = [(k, M.RoundB(q_hat, self.b, (M.SELECT if k in active else 0)
                                     | (M.RELEASE_INTERCEPT if k == 0 else 0)))
                        for k in asked]
        else:
            requests = [(k, M.Round(q_hat)) for k in active]
        replies = tr.request_many(requests, t)
        g_b = None
        for (k, _), reply in zip(requests, replies):
            if k == 0 and icpt:
                g_b = reply.g_b
            if k not in active:
                continue
            picks[k] = M.unsign_index(reply.signed_index)
            if self.algorithm == "dfw":
                gaps[k] = reply.gap
            self.fullgrad[k] += 8 * len(data.blocks[k])
            self.naive[k] += 4
        if self.algorithm == "dfw":
            movers = [max(active, key=lambda k: (gaps[k], -k))]
            gamma = 2.0 / (t / K + 2.0)
        else:
            movers = active
            gamma = self.sampling.step(t)
        new = [k for k in movers if not (self.release_cache and (k, picks[k][0]) in self.cache)]
        if self.private and new:
            # One Gaussian for the round's K' new features (sqrt(K') x sensitivity), before noise.
            self.budget_filter.charge(feature_event(plan.feature_sigma, plan.details["sens_feature"],
                                                    len(new)),
                                      party=",".join(map(str, new)), round=t, note="active feature")
        asked = [k for k in movers if k in new or self.algorithm == "dfw"]
        got = dict(zip(asked, tr.request_many(
            [(k, M.FeatureRequest(1 if k in new else 0)) for k in asked], t)))
        for k in movers:
            i, sign = picks[k]
            if k in new:
                a_hat = got[k].a_hat
                self.cache[(k, i)] = a_hat
                self.released[k] += 1
                self.naive[k] += 8 * n
            else:
                a_hat = self.cache[(k, i)]
            gcol = int(data.blocks[k][i])
            step = gamma * eta * sign
            self.x[data.blocks[k]] *= 1.0 - gamma
            self.x[gcol] += step
            self.q_blocks[k] *= 1.0 - gamma
            self.q_blocks[k] += step * a_hat
        if icpt:     # b_t -> b_{t+1} from g_b at (x_t, b_t), a post-processing of the release
            self.b = IC.update(self.loss, self.b, g_b, t, self.intercept_bound)
            self.intercepts.append(self.b)
        sel = [(k, int(data.blocks[k][picks[k][0]]), picks[k][1]) for k in movers]
        self.selections.append(sel)
        self.gammas.append(gamma)
        if self.tracker is not None:
            self.history.append(self.tracker.advance(sel, gamma, eta,
                                                     self.b if icpt else None))
        self.t += 1
        return {"round": t, "selections": sel, "gamma": gamma, "new": new,
                "objective": self.history[-1] if self.history else None,
                "intercept": self.b if icpt else None}

    def get_state(self):
        """Everything that changes between rounds, as ``(meta, arrays)``: ``meta`` is JSON-able
        (round, counters, selections, objective history, meter rows, every generator's
        ``bit_generator.state``), ``arrays`` maps names to numpy arrays.  Taken between rounds, it
        lets :meth:`set_state` continue the run bit for bit (see checkpoint.py).  It holds the
        parties' noise generator states: as secret as the data."""
        keys = sorted(self.cache)
        arrays = {"x": self.x, "u_blocks": self.tracker.u_blocks, "q_blocks": self.q_blocks,
                  "history": np.asarray(self.history, dtype=np.float64),
                  "intercepts": np.asarray(self.intercepts, dtype=np.float64),
                  "cache_keys": np.asarray(keys, dtype=np.int64).reshape(len(keys), 2),
                  "cache_values": (np.stack([self.cache[k] for k in keys]) if keys
                                   else np.zeros((0, self.m)))}
        parties = []
        for p in self.parties:
            pmeta, parrays = p.get_state()
            pmeta.pop("pending")              # taken between rounds: nothing is pending
            parties.append(pmeta)
            arrays[f"party{p.k}_x"] = parrays["x"]
        meta = {"t": self.t, "b": self.b, "released": self.released, "naive": self.naive,
                "fullgrad": self.fullgrad, "gammas": [float(g) for g in self.gammas],
                "selections": [[[int(k), int(i), int(s)] for k, i, s in sel]
                               for sel in self.selections],
                "sampling_rng": self.sampling_rng.bit_generator.state, "parties": parties,
                "meter_rows": [[p, dr, t, *row] for (p, dr), rounds in self.meter._rows.items()
                               for t, row in rounds.items()],
                "meter_by_type": {k: list(v) for k, v in self.meter.by_type.items()}}
        return meta, arrays

    def set_state(self, meta, arrays):
        """Restore :meth:`get_state`'s output into a server built with the same arguments."""
        self.t = int(meta["t"])
        self.x = np.array(arrays["x"], dtype=np.float64)
        self.tracker.u_blocks = np.array(arrays["u_blocks"], dtype=np.float64)
        self.q_blocks = np.array(arrays["q_blocks"], dtype=np.float64)
        self.history = [float(v) for v in arrays["history"]]
        self.b = float(meta.get("b", 0.0))
        self.intercepts = [float(v) for v in arrays.get("intercepts", ())]
        self.cache = {(int(k), int(i)): np.array(v) for (k, i), v in
                      zip(arrays["cache_keys"], arrays["cache_values"])}
        self.released, self.naive = list(meta["released"]), list(meta["naive"])
        self.fullgrad = list(meta["fullgrad"])
        self.selections = [[(k, i, s) for k, i, s in sel] for sel in meta["selections"]]
        self.gammas = [float(g) for g in meta.get("gammas", [])]
        self.sampling_rng.bit_generator.state = meta["sampling_rng"]
        for p, st in zip(self.parties, meta["parties"]):
            p.set_state(st, {"x": arrays[f"party{p.k}_x"]})
        for p, dr, t, pay, framed, msgs in meta["meter_rows"]:
            self.meter._rows[(int(p), dr)][int(t)] = [pay, framed, msgs]
        for k, v in meta["meter_by_type"].items():
            self.meter.by_type[k] = list(v)

    def result(self, seconds=0.0) -> RunResult:
        return RunResult(algorithm="dfw" if self.algorithm == "dfw" else
                         ("dp-bcfw" if self.private else "bcfw"), x=self.x.copy(),
                         objective=list(self.history), initial_objective=self.initial_objective,
                         meter=self.meter, K=self.K, n=self.n, m=self.m, blocks=self.data.blocks,
                         seconds=seconds, released=list(self.released),
                         selections=self.selections, naive_uplink=list(self.naive),
                         full_gradient_uplink=list(self.fullgrad),
                         ledger=self.budget_filter.ledger if self.budget_filter is not None else None,
                         noise_plan=self.noise_plan,
                         p_min=self.sampling.p_min if self.algorithm == "bcfw" else 1.0 / self.K,
                         intercept=self.b if self.fit_intercept else None,
                         intercepts=list(self.intercepts))


def run_vertical(data, loss, eta, iterations, *, callback=None, state=None, on_round=None,
                 **kwargs) -> RunResult:
    """Run BCFW-AS / DP-BCFW-AS (``algorithm="bcfw"``) or dFW (``"dfw"``) for ``iterations``
    rounds; keyword arguments as :class:`Server`.  ``state`` (from :meth:`Server.get_state`)
    continues a run from its round; ``on_round(server)`` is called before the first round run
    here and after every round (checkpoints)."""
    if isinstance(iterations, bool) or not isinstance(iterations, (int, np.integer)) or iterations < 1:
        raise InputError(f"iterations must be a positive integer, got {iterations!r}")
    server = Server(data, loss, eta, **kwargs)
    if state is not None:
        server.set_state(*state)
    t0 = time.perf_counter()
    try:
        if on_round is not None:
            on_round(server)
        for t in range(server.t, iterations):
            rec = server.step()
            if on_round is not None:
                on_round(server)
            if callback is not None:
                callback(t, rec["objective"])
    finally:
        server.transport.close()
    return server.result(time.perf_counter() - t0)
