"""FedP3 and LDP-FedP3: personalized layer-wise pruning, optionally with record-level DP per client.

Source: Yi, Gazagnadou, Richtarik, Lyu, "FedP3: Federated Personalized and Privacy-friendly Network
Pruning under Model Heterogeneity", ICLR 2024 (paper 002): Algorithms 1-3 (FedP3), Algorithm 5 and
Theorem 2 / eq. (18) (LDP-FedP3).  Decisions where the paper is silent or wrong follow
``papers/notes-fedelasticnet-fedp3.md`` part B and are listed in ``docs/fedp3.md``.

One round t (Alg. 1), for every participating client i in C_t:

1. the server sends W_t^l dense for l in L_i and P_i (.) W_t^l for the other layers (global pruning,
   keep ratio r, random or magnitude mask; biases and the final layer FFC are never pruned);
2. the client runs K local steps (Alg. 2) on the deployed model
   {W^l : l in L_i} u {q_{i,k} (.) P_i (.) W^l : l not in L_i}, training the layers of L_i only (Alg. 2
   line 3 keeps the others at the server's pruned copy); Q_i (local pruning) is fixed (q = 1),
   uniform (fresh Bernoulli(q) mask, q ~ U[p, 1]) or ordered dropout (prefix of ceil(q * units));
3. the client sends back {W^l : l in L_i} (weights, with their layer indices);
4. the server averages each layer over its contributors S_t^l (Alg. 3): simply, or weighted with
   alpha_i^l = |L_i| / sum_{j in S_t^l} |L_j| (normalized; the paper's literal weights do not sum to
   one).  A layer nobody sent keeps its weights.

LDP-FedP3 (Alg. 5, made accountable; notes B.8): each local step draws a Poisson minibatch (every
record joins with probability q = b/m), clips every per-sample gradient to L2 norm C, and adds
N(0, z^2 C^2 I) to the clipped SUM before dividing by b:

    g_hat = ( sum_{j in B} clip_C(grad f_j(w)) + N(0, z^2 C^2 I) ) / b,     w <- w - lr * g_hat.

The paper adds its noise to the model u = w - gamma g but calibrates it in gradient units; putting it
on the clipped minibatch gradient is what its proof uses (M = gamma g - gamma zeta) and what makes
the calibration right.  Each step is a ``PoissonSubsampledGaussian(z, q)`` release w.r.t. the client's
own records (add/remove neighbours); a client's whole training is
``SelfComposed(PoissonSubsampledGaussian(z, q), rounds * K)``, and z is calibrated by the accountant
so that this is (epsilon, delta)-DP.  Before each round the client's round of releases is charged to
a per-client :class:`accounting.BudgetFilter`; a charge that would overspend is refused before any
noise is drawn and the client stops training.  The paper's closed form (eq. 18)
sigma^2 = c K C^2 log(1/delta) / (m^2 epsilon^2) (sigma = std on the averaged gradient, so
z = sigma b / C) is available with a user-given c, for comparison; its spend is still computed by the
accountant.
"""
from __future__ import annotations

import math
import secrets
from dataclasses import dataclass

import numpy as np
import torch
from torch.func import functional_call

from accounting import PoissonSubsampledGaussian, SelfComposed, calibrate
from accounting.ledger import ends_reservations
from ..errors import InputError
from . import wire
from .ldp import LocalDP
from .loop import round_loop
from .metering import Meter
# the models and the DP-SGD step live in shared modules; re-exported here for FedP3's users
from .dp import (_loss_one, clip_per_sample, clipped_gradient_sum, flat_vector,  # noqa: F401
                 noisy_average, nonprivate_gradient, per_sample_gradients, poisson_batch,
                 private_gradient)
from .models import (MLP, LayeredModel, PaperCNN, SmallCNN, build_model,  # noqa: F401
                     paper_layer_counts, paper_mlp)
from .pruning import (cyclic_layers, kept_count, magnitude_mask,  # noqa: F401
                      ordered_dropout_masks, scheme_layer_count)

SCHEMES = ("fedavg", "lowerb", "opu2", "opu3", "opr2", "opu1-2-3", "opu2-3")
GLOBAL_PRUNING = ("random", "magnitude")
LOCAL_PRUNING = ("fixed", "uniform", "ordered_dropout")
TRAIN_LAYERS = ("all", "selected")
AGGREGATIONS = ("simple", "weighted")
NOISE = ("calibrate", "paper")


# ---------------------------------------------------------------------------------------------

@dataclass
class _ClientPlan:
    m: int
    q: float
    steps: int              # local steps per round (K)
    noise_multiplier: float = 0.0
    sigma: float = 0.0      # std on the averaged gradient = z C / b (the paper's sigma)
    sigma_paper: float | None = None
    implied_c: float | None = None


class FedP3:
    """FedP3 (paper 002, Alg. 1-3) with optional LDP-FedP3 noise (Alg. 5, Thm. 2).

    Parameters
    ----------
    model : "mlp" | "cnn" | callable () -> LayeredModel
    scheme : layer sets L_i, one of ``SCHEMES`` ("fedavg" = every layer, no global pruning).
    keep_ratio : r in (0, 1], fraction of each non-L_i layer's weights the server sends.
    global_pruning : "random" (Def. 1; the positions travel as a seed) or "magnitude" (a bitmap).
    local_pruning : "fixed" | "uniform" | "ordered_dropout"; ``local_p``: q ~ U[local_p, 1] per step.
    aggregation : "simple" | "weighted" (normalized over the layer's contributors).
    participation : fraction of clients per round (fixed-size uniform sample; 1.0 = all).
    rounds, local_epochs, local_steps : K = local_steps, or ceil(local_epochs m_i / b) if None.
    batch_size : b; each local step is a Poisson minibatch with q_i = b / m_i (expected size b).
    lr : local SGD step size.
    epsilon, delta : per-client record-level budget; ``epsilon=inf`` runs non-private FedP3 (no
        clipping, no noise, nothing charged).
    clip : C, the per-sample L2 clipping norm.
    noise : "calibrate" (accountant) or "paper" (eq. 18 with constant ``paper_c``).
    accountant : accountant used for calibration and the budget filter ("rdp" is fast; "pld" and
        "best" are tighter and slower).
    ledger : a path or :class:`accounting.Ledger` (None: a ledger file in a temporary directory).
    threads : torch intra-op threads during ``fit`` (restored afterwards).
    backend : "inprocess" (default), "flower-sim" or "flower": the clients as Flower ClientApps
        (:mod:`vflpriv.horizontal.fedp3_remote`), each with its own data, key, ledger and budget; ``flower`` a
        :class:`vflpriv.runtime.backends.FlowerOptions`.  A seeded run fits the same model on every backend.
    seed : None (deployment): the server's public choices (initial model, layer sets, participation,
        global pruning positions) come from 63 bits of OS entropy and each client's secret
        randomness (Poisson minibatches, local pruning, Gaussian noise) from a separate 128-bit
        OS-entropy key, never derived from anything sent on the wire.  An integer seeds both, for
        reproducible runs; such runs are marked not for deployment (``deployment_`` False).

    Fitted attributes: ``global_weights_``, ``client_accuracy_``, ``accuracy_``,
    ``accuracy_history_``, ``epsilon_spent_``, ``noise_multiplier_``, ``sigma_``, ``sigma_paper_``,
    ``implied_c_``, ``uplink_bytes_``, ``downlink_bytes_``, ``uplink_bytes_full_``,
    ``downlink_bytes_full_``, ``comm_log_``, ``stopped_round_``, ``layer_sets_``, ``ledger_``,
    ``deployment_``.
    """

    def __init__(self, *, model="mlp", scheme="opu2", keep_ratio=0.9, global_pruning="random",
                 local_pruning="fixed", local_p=0.9, aggregation="simple", participation=1.0,
                 rounds=15, local_epochs=2.0, local_steps=None, batch_size=16, lr=0.3,
                 epsilon=math.inf, delta=1e-5, clip=1.0, noise="calibrate", paper_c=None,
                 accountant="rdp", ledger=None, seed=None, threads=1, backend="inprocess",
                 flower=None, train_layers="all"):
        self.model, self.scheme, self.keep_ratio = model, scheme, keep_ratio
        self.global_pruning, self.local_pruning, self.local_p = global_pruning, local_pruning, local_p
        self.aggregation, self.participation, self.rounds = aggregation, participation, rounds
        self.local_epochs, self.local_steps, self.batch_size, self.lr = \
            local_epochs, local_steps, batch_size, lr
        self.epsilon, self.delta, self.clip, self.noise, self.paper_c = \
            epsilon, delta, clip, noise, paper_c
        self.accountant, self.ledger, self.seed, self.threads = accountant, ledger, seed, threads
        self.backend, self.flower = backend, flower
        self.train_layers = train_layers

    #: remote clients (``round_loop``'s ``clients``), set by the server role of .fedp3_remote
    _remote = None

    # -- validation ---------------------------------------------------------------------------
    def _check(self):
        def choice(name, value, options):
            if value not in options:
                raise InputError(f"{name} must be one of {', '.join(options)}; got {value!r}")
        choice("scheme", self.scheme, SCHEMES)
        choice("global pruning", self.global_pruning, GLOBAL_PRUNING)
        choice("local pruning", self.local_pruning, LOCAL_PRUNING)
        choice("train layers", self.train_layers, TRAIN_LAYERS)
        choice("aggregation", self.aggregation, AGGREGATIONS)
        choice("noise", self.noise, NOISE)

        def number(name, value, lo, hi, lo_open=True, allow_inf=False):
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and \
                not math.isnan(value) and (allow_inf or math.isfinite(value))
            ok = ok and (value > lo if lo_open else value >= lo) and value <= hi
            if not ok:
                raise InputError(f"{name} must be in {'(' if lo_open else '['}{lo}, {hi}]; "
                                 f"got {value!r}")
        number("keep ratio", self.keep_ratio, 0, 1)
        number("local pruning p", self.local_p, 0, 1)
        number("participation", self.participation, 0, 1)
        number("learning rate", self.lr, 0, math.inf)
        number("epsilon", self.epsilon, 0, math.inf, allow_inf=True)
        if math.isfinite(self.epsilon) and self.epsilon > 1e6:
            raise InputError(f"epsilon must be at most 1e+06 (or inf for a non-private run), "
                             f"got {self.epsilon!r}")
        number("delta", self.delta, 0, 1)
        if self.delta >= 1:
            raise InputError(f"delta must be in (0, 1); got {self.delta!r}")
        number("clip", self.clip, 0, math.inf)
        for name, v in (("rounds", self.rounds), ("batch size", self.batch_size),
                        ("threads", self.threads)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise InputError(f"{name} must be a positive integer; got {v!r}")
        if self.seed is not None and (isinstance(self.seed, bool) or
                                      not isinstance(self.seed, (int, np.integer)) or self.seed < 0):
            raise InputError(f"seed must be a non-negative integer or None, got {self.seed!r}")
        if self.local_steps is None:
            number("local epochs", self.local_epochs, 0, math.inf)
        elif isinstance(self.local_steps, bool) or not isinstance(self.local_steps, int) \
                or self.local_steps < 1:
            raise InputError(f"local steps must be a positive integer; got {self.local_steps!r}")
        if self.noise == "paper" and math.isfinite(self.epsilon):
            if self.paper_c is None:
                raise InputError("noise 'paper' needs the constant c of eq. (18) (paper_c)")
            number("paper constant c", self.paper_c, 0, math.inf)

    def _make_model(self, n_inputs, n_classes, image_shape):
        if callable(self.model):
            return self.model()
        return build_model(self.model, n_inputs, n_classes, image_shape)

    # -- privacy plan -------------------------------------------------------------------------
    def _plan(self, client) -> _ClientPlan:
        m = client.m
        if self.batch_size > m:
            raise InputError(f"batch size {self.batch_size} exceeds a client's {m} training records")
        q = self.batch_size / m
        steps = self.local_steps or max(1, int(math.ceil(self.local_epochs * m / self.batch_size)))
        plan = _ClientPlan(m=m, q=q, steps=steps)
        if math.isinf(self.epsilon):
            return plan
        total = self.rounds * steps
        log_term = math.log(1 / self.delta)
        if self.noise == "calibrate":
            try:
                res = calibrate(lambda z: SelfComposed(PoissonSubsampledGaussian(z, q), total),
                                self.epsilon, self.delta, guess=1.0, accountant=self.accountant,
                                decreasing=True)
            except ValueError as exc:
                from ..errors import uncalibrated

                raise uncalibrated(exc, self.epsilon, self.delta, self.accountant) from None
            z = res.value
        else:
            # eq. (18): sigma^2 = c K C^2 log(1/delta) / (m^2 eps^2), sigma on the averaged gradient
            sigma_p = math.sqrt(self.paper_c * total * self.clip ** 2 * log_term) / (m * self.epsilon)
            z = sigma_p * self.batch_size / self.clip
            plan.sigma_paper = sigma_p
        plan.noise_multiplier = z
        plan.sigma = z * self.clip / self.batch_size
        # the c that eq. (18) would need to give this z: c = z^2 eps^2 / (q^2 K log(1/delta))
        plan.implied_c = z ** 2 * self.epsilon ** 2 / (q ** 2 * total * log_term)
        if self.paper_c is not None and plan.sigma_paper is None:
            plan.sigma_paper = math.sqrt(self.paper_c * total * self.clip ** 2 * log_term) / \
                (m * self.epsilon)
        return plan

    # -- messages -----------------------------------------------------------------------------
    def _downlink(self, W, L_i, client, rnd, full=False):
        """Serialize what the server sends client i (P_i applied to the layers outside L_i)."""
        entries = []
        for li, name in enumerate(self.layer_names_):
            for ti, suffix in enumerate(("weight", "bias")):
                key = f"{name}.{suffix}"
                if key not in W:
                    continue
                v = W[key].detach().numpy().ravel()
                prune = (not full and suffix == "weight" and name not in L_i
                         and self.keep_ratio < 1 and self.scheme != "fedavg")
                if not prune:
                    entries.append((li, ti, v, wire.DENSE, None))
                elif self.global_pruning == "magnitude":
                    mask = magnitude_mask(W[key], self.keep_ratio)
                    entries.append((li, ti, v, wire.BITMAP, mask))
                else:
                    seed = int(np.random.SeedSequence([self._public_seed, rnd, client, 1, li])
                               .generate_state(1, dtype=np.uint64)[0])
                    entries.append((li, ti, v, wire.SEEDED, (seed, kept_count(v.size, self.keep_ratio))))
        return wire.encode(entries, wire.DOWN)

    def _uplink(self, params, L_i, full=False):
        entries = []
        for li, name in enumerate(self.layer_names_):
            if not full and name not in L_i:
                continue
            for ti, suffix in enumerate(("weight", "bias")):
                key = f"{name}.{suffix}"
                if key in params:
                    entries.append((li, ti, params[key].detach().numpy().ravel(), wire.DENSE, None))
        return wire.encode(entries, wire.UP)

    def _unpack(self, data):
        _, entries = wire.decode(data)
        out, masks = {}, {}
        for li, ti, vals, mask in entries:
            key = f"{self.layer_names_[li]}.{('weight', 'bias')[ti]}"
            out[key] = torch.from_numpy(vals).reshape(self.shapes_[key])
            if mask is not None:
                masks[key] = mask
        return out, masks

    # -- local training (Alg. 2) --------------------------------------------------------------
    def _local_masks(self, L_i, rng):
        """Q_i at one local step: name -> multiplicative mask for the non-L_i tensors (or {})."""
        if self.local_pruning == "fixed":
            return {}
        q = float(rng.uniform(self.local_p, 1.0))
        masks = {}
        for idx, name in enumerate(self.layer_names_[:-1]):
            if name in L_i:
                continue
            key = f"{name}.weight"
            if self.local_pruning == "uniform":
                masks[key] = torch.from_numpy(rng.random(self.shapes_[key]) < q).float()
            else:
                wm, bm = ordered_dropout_masks(self.net_, name, q, first=(idx == 0))
                masks[key] = wm
                if bm is not None:
                    masks[f"{name}.bias"] = bm
        return masks

    def _train_client(self, params, L_i, client, plan, rng, gen):
        """Alg. 2 on client ``client``: returns (its local model, the L_i tensors it uploads).

        ``train_layers="all"`` (the paper's update, Alg. 2 line 4, and its released code): every
        layer of the received (globally pruned) model is trained, the layers outside L_i through
        the local pruning masks Q_i (gradient of L(w * Q) is Q * grad), with their globally pruned
        positions (the entries received as 0) kept at 0; only L_i is uploaded.
        ``"selected"``: only L_i is trained, the other layers are fixed inputs (masked by Q_i)."""
        if self.train_layers == "all":
            return self._train_all(params, L_i, client, plan, rng, gen)
        trainable = {k: v.clone() for k, v in params.items() if k.split(".")[0] in L_i}
        fixed = {k: v for k, v in params.items() if k not in trainable}
        X = torch.from_numpy(client.X_train)
        y = torch.from_numpy(client.y_train)
        for _ in range(plan.steps):
            batch = poisson_batch(rng, plan.m, plan.q)   # Poisson sampling, rate b/m
            masks = self._local_masks(L_i, rng)
            fx = {k: (v * masks[k] if k in masks else v) for k, v in fixed.items()}
            Xb, yb = X[batch], y[batch]
            g = self._gradient(trainable, fx, Xb, yb, plan, gen)
            with torch.no_grad():
                trainable = {k: v - self.lr * g[k] for k, v in trainable.items()}
        return {**fixed, **trainable}, trainable

    def _train_all(self, params, L_i, client, plan, rng, gen):
        w = {k: v.clone() for k, v in params.items()}
        keep = {k: (v != 0).to(v.dtype) for k, v in params.items()
                if k.split(".")[0] not in L_i and k.endswith(".weight")}
        X = torch.from_numpy(client.X_train)
        y = torch.from_numpy(client.y_train)
        for _ in range(plan.steps):
            batch = poisson_batch(rng, plan.m, plan.q)   # Poisson sampling, rate b/m
            masks = self._local_masks(L_i, rng)
            wm = {k: (v * masks[k] if k in masks else v) for k, v in w.items()}
            Xb, yb = X[batch], y[batch]
            g = self._gradient(wm, {}, Xb, yb, plan, gen)
            with torch.no_grad():
                for k in w:
                    step = g[k] * masks[k] if k in masks else g[k]
                    if k in keep:
                        step = step * keep[k]
                    w[k] = w[k] - self.lr * step
        return w, {k: v for k, v in w.items() if k.split(".")[0] in L_i}

    def _gradient(self, trainable, fixed, Xb, yb, plan, gen):
        """One step's gradient of the trainable parameters: the DP-SGD step (per-sample clip,
        Gaussian noise of the plan's multiplier) for a private run, else the plain mean."""
        if math.isfinite(self.epsilon):
            return private_gradient(self.net_, trainable, fixed, Xb, yb, clip=self.clip,
                                    noise_multiplier=plan.noise_multiplier,
                                    expected_batch=self.batch_size, generator=gen)
        return nonprivate_gradient(self.net_, trainable, fixed, Xb, yb,
                                   expected_batch=self.batch_size)

    def _accuracy(self, params, X, y) -> float:
        with torch.no_grad():
            out = functional_call(self.net_, params, (torch.from_numpy(X),))
            return float((out.argmax(1).numpy() == y).mean())

    # -- the main loop (Alg. 1) ---------------------------------------------------------------
    @ends_reservations
    def fit(self, clients, n_classes=None, image_shape=None, progress=None):
        """Train on ``clients`` (list of :class:`~vflpriv.horizontal.partition.ClientData`);
        ``progress(t)`` is called after every round."""
        self._check()
        if self.backend != "inprocess":
            from ..runtime.backends import check_backend

            check_backend(self.backend)
            return _fit_hosted(self, clients, n_classes, image_shape, progress)
        # The models are tiny: torch's intra-op threads cost far more than they save (30x slower
        # on a busy 2-core machine), so fit runs on ``threads`` threads and restores the setting.
        before = torch.get_num_threads()
        torch.set_num_threads(self.threads)
        try:
            return self._fit(clients, n_classes, image_shape, progress)
        finally:
            torch.set_num_threads(before)

    def _fit(self, clients, n_classes, image_shape, progress=None):
        if not clients:
            raise InputError("no clients given")
        n = len(clients)
        if n_classes is None:
            n_classes = int(max(int(c.y_train.max()) for c in clients) + 1)
        seeded = self.seed is not None
        # public (server) randomness and secret (client) randomness; see the class docstring
        self._public_seed = int(self.seed) if seeded else secrets.randbits(63)
        self._client_key = int(self.seed) if seeded else secrets.randbits(128)
        self.deployment_ = not seeded
        torch.manual_seed(self._public_seed)
        self.net_ = self._make_model(clients[0].X_train.shape[1], n_classes, image_shape)
        self.layer_names_ = tuple(self.net_.layer_names)
        hidden = self.layer_names_[:-1]
        W = {k: v.detach().clone() for k, v in self.net_.named_parameters()}
        self.shapes_ = {k: tuple(v.shape) for k, v in W.items()}
        setup_rng = np.random.default_rng([self._public_seed, 7])

        # layer sets L_i (fixed per client, except OPR2 which is redrawn per round)
        counts = [None if self.scheme == "fedavg" else scheme_layer_count(self.scheme, setup_rng)
                  for _ in range(n)]
        need = max([c for c in counts if c is not None] or [2 if self.scheme == "opr2" else 0])
        if need > len(hidden):
            raise InputError(f"scheme {self.scheme!r} trains {need} non-final layers but the model "
                             f"has only {len(hidden)}")
        fixed_sets = [tuple(hidden) if self.scheme == "fedavg" else
                      None if counts[i] is None else
                      tuple(hidden[j] for j in cyclic_layers(i, n, len(hidden), counts[i]))
                      for i in range(n)]

        self._plans = plans = [self._plan(c) for c in clients]
        private = math.isfinite(self.epsilon)
        budget = None
        if private and self._remote is None:      # remote clients keep their own budgets
            budget = LocalDP(self.epsilon, self.delta, self.clip, self.rounds,
                             accountant=self.accountant, ledger=self.ledger, prefix="fedp3-")
            if self.noise == "calibrate":
                # Each client's whole worst case (every round) up front: a client that cannot
                # fit refuses the fit before any release.  (With the paper's closed forms the
                # noise is not calibrated to the budget; there a client stops when its filter
                # refuses a round, see stopped_round_.)
                for i, plan in enumerate(plans):
                    whole = SelfComposed(PoissonSubsampledGaussian(plan.noise_multiplier, plan.q),
                                         plan.steps * self.rounds)
                    budget.filter.check_plan(whole, party=f"client-{i}")
        self.ledger_ = budget.ledger if budget is not None else None

        self._k_part = n if self.participation >= 1 else max(1, int(round(self.participation * n)))
        self.n_clients, self._clients, self._hidden, self._fixed_sets = n, clients, hidden, fixed_sets
        self._W, self._L = W, [None] * n
        self.uplink_bytes_ = [0] * n
        self.downlink_bytes_ = [0] * n
        self.uplink_bytes_full_ = [0] * n
        self.downlink_bytes_full_ = [0] * n
        self.comm_log_, self.accuracy_history_ = [], []
        self.client_accuracy_ = [None] * n
        self._trained_once = [False] * n
        self._gone, self._lost = set(), []      # clients lost mid-run (remote, "continue")
        self.layer_sets_ = [list(s) if s is not None else None for s in fixed_sets]
        self.meter_ = Meter()
        self.stopped_round_ = round_loop(self, self.rounds, meter=self.meter_, budget=budget,
                                         progress=progress, clients=self._remote,
                                         lost=self._lost)
        self.global_weights_ = self._W
        del self._clients, self._round_rng      # the run's working state, not fitted attributes
        self.accuracy_ = self.accuracy_history_[-1]
        self.noise_multiplier_ = [p.noise_multiplier for p in plans]
        self.sigma_ = [p.sigma for p in plans]
        self.sigma_paper_ = [p.sigma_paper for p in plans]
        self.implied_c_ = [p.implied_c for p in plans]
        self.sample_rate_ = [p.q for p in plans]
        self.local_steps_ = [p.steps for p in plans]
        self.epsilon_spent_ = [budget.spent(i) if budget is not None else math.inf
                               for i in range(n)]
        return self

    # -- one round, as the shared loop (vflpriv.horizontal.loop) drives it --------------------
    def sample(self, t):
        """Fixed-size uniform participation from the public seed; the round's generator also
        draws OPR2's layer sets."""
        n = self.n_clients
        self._round_rng = round_rng = np.random.default_rng([self._public_seed, t, 11])
        return np.sort(round_rng.choice(n, size=self._k_part, replace=False)) \
            if self._k_part < n else np.arange(n)

    def privacy_event(self, i, t):
        plan = self._plans[i]
        event = SelfComposed(PoissonSubsampledGaussian(plan.noise_multiplier, plan.q), plan.steps)
        return event, f"FedP3 round {t}: {plan.steps} DP-SGD steps"

    def downlink(self, i, t):
        L_i = self._fixed_sets[i]
        if L_i is None:   # OPR2: two random non-final layers, redrawn every round
            pick = self._round_rng.choice(len(self._hidden), size=2, replace=False)
            L_i = tuple(self._hidden[j] for j in sorted(pick))
        self._L[i] = L_i = (*L_i, self.layer_names_[-1])
        return self._downlink(self._W, L_i, i, t)

    def client_update(self, i, t, down):
        L_i, client = self._L[i], self._clients[i]
        params, _ = self._unpack(down)                 # what the client reconstructs
        from ..noise import generator as noise_generator

        rng = noise_generator([self._client_key, t, i, 3])     # secret: batches and DP noise
        local, trained = self._train_client(params, L_i, client, self._plans[i], rng, rng)
        self.client_accuracy_[i] = self._accuracy(local, client.X_test, client.y_test)
        self._trained_once[i] = True
        return self._uplink(trained, L_i)

    def receive(self, i, t, down, up):
        L_i, W = self._L[i], self._W
        received, _ = self._unpack(up)
        full_down, full_up = len(self._downlink(W, L_i, i, t, full=True)), \
            len(self._uplink(W, L_i, full=True))
        self.downlink_bytes_[i] += len(down)
        self.uplink_bytes_[i] += len(up)
        self.downlink_bytes_full_[i] += full_down
        self.uplink_bytes_full_[i] += full_up
        self.comm_log_.append({"round": t, "client": i, "layers": list(L_i),
                               "down": len(down), "up": len(up),
                               "down_full": full_down, "up_full": full_up})
        return [v.numpy().ravel() for v in received.values()], (L_i, received)

    def aggregate(self, t, replies):
        self._W = self._aggregate(self._W, [(i, L_i, rec) for i, (L_i, rec) in replies])

    def drop_client(self, i):
        """Client i was lost mid-run (``--on-client-loss continue``): never asked again, and its
        accuracy leaves the average (its test records left with it)."""
        self._gone.add(int(i))

    def _mean_accuracy(self) -> float:
        return float(np.mean([a for i, a in enumerate(self.client_accuracy_)
                              if i not in self._gone]))

    def evaluate(self, t):
        for i, client in enumerate(self._clients):   # not trained yet: scored with the global model
            if not self._trained_once[i]:
                self.client_accuracy_[i] = self._accuracy(self._W, client.X_test, client.y_test)
        self.accuracy_history_.append(self._mean_accuracy())

    def _aggregate(self, W, uploads):
        """Alg. 3, layer by layer over the contributors S_t^l; empty S_t^l keeps W_t^l."""
        new = dict(W)
        for name in self.layer_names_:
            contrib = [(i, L, p) for i, L, p in uploads if name in L]
            if not contrib:
                continue
            if self.aggregation == "weighted":
                sizes = np.array([len(L) for _, L, _ in contrib], dtype=float)
                alphas = sizes / sizes.sum()
            else:
                alphas = np.full(len(contrib), 1.0 / len(contrib))
            for suffix in ("weight", "bias"):
                key = f"{name}.{suffix}"
                if key in W:
                    new[key] = sum(float(a) * p[key] for a, (_, _, p) in zip(alphas, contrib))
        return new

    def summary(self) -> dict:
        """The run's figures as plain JSON-able values."""
        def num(x):
            return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else x
        return {
            "accuracy": self.accuracy_, "accuracy_history": self.accuracy_history_,
            "client_accuracy": self.client_accuracy_,
            "epsilon_spent": [num(e) for e in self.epsilon_spent_],
            "uplink_bytes": self.uplink_bytes_, "uplink_bytes_full": self.uplink_bytes_full_,
            "downlink_bytes": self.downlink_bytes_,
            "downlink_bytes_full": self.downlink_bytes_full_,
            "noise_multiplier": self.noise_multiplier_, "sigma": self.sigma_,
            "sigma_paper": self.sigma_paper_, "implied_c": self.implied_c_,
            "sample_rate": self.sample_rate_, "local_steps": self.local_steps_,
            "stopped_round": self.stopped_round_, "layer_sets": self.layer_sets_,
            "deployment": self.deployment_,
        }


#: the estimator's settings the clients need (all public)
PARAMS = ("scheme", "keep_ratio", "global_pruning", "local_pruning", "train_layers", "local_p",
          "aggregation",
          "participation", "rounds", "local_epochs", "local_steps", "batch_size", "lr",
          "epsilon", "delta", "clip", "noise", "paper_c", "accountant")

def _fit_hosted(est, clients, n_classes=None, image_shape=None, progress=None):
    """``est.fit`` on ``est.backend`` ("flower-sim" or "flower"): the same fitted attributes,
    ``epsilon_spent_`` recomputed from each client's own ledger, plus ``flower_`` (Flower bytes
    per client, the client ledgers).  A client refusing its plan at setup (or lost) raises
    :class:`~vflpriv.runtime.link.PartyRefused` / ``PartyLost`` naming it."""
    import uuid

    from ..runtime.backends import FlowerOptions, on_client_loss
    from .hosting import describe_model, launch, raise_error

    est._check()
    if not clients:
        raise InputError("no clients given")
    if n_classes is None:
        n_classes = int(max(int(c.y_train.max()) for c in clients) + 1)
    net = est._make_model(clients[0].X_train.shape[1], n_classes, image_shape)
    params = {p: getattr(est, p) for p in PARAMS}
    setup = {"family": "fedp3", "params": params, "model": describe_model(net),
             "sizes": [c.m for c in clients], "threads": int(est.threads),
             "accountant": est.accountant,
             # each client's ledger records (and its up-front reservation) belong to this run
             "run_id": uuid.uuid4().hex}
    flower = est.flower or FlowerOptions()
    spec = {"family": "fedp3", "K": len(clients), "setup": setup, "seed": est.seed,
            "on_client_loss": on_client_loss(flower, "fedp3"),
            "n_classes": n_classes, "iterations": int(est.rounds),
            "connect_timeout": flower.connect_timeout, "reply_timeout": flower.reply_timeout}
    shards = [{"X_train": c.X_train, "y_train": c.y_train, "X_test": c.X_test,
               "y_test": c.y_test} for c in clients]
    private = math.isfinite(est.epsilon)
    out, info, _ = launch(est.backend, spec, shards, private=private, epsilon=est.epsilon,
                          delta=est.delta, accountant=est.accountant, ledger=est.ledger,
                          seed=est.seed, flower=flower, progress=progress)
    if out is None:                   # flower.spec_dir: the description was written, no run
        return info
    if "fitted" not in out:
        raise_error(out, info, est.backend)
    vars(est).update(out["fitted"])
    if private:
        est.epsilon_spent_ = info["epsilon_spent"]
    info["stopped"] = [k for k, r in enumerate(est.stopped_round_) if r is not None]
    info["lost_clients"] = out.get("lost_clients", [])
    info["on_client_loss"] = spec["on_client_loss"]
    est.flower_ = info
    return est
