"""(epsilon, delta)-DP for the sparse methods (neither paper has any: notes P003-14).

Two levels, chosen by the user; each says what a neighbouring data set is and where the noise is.

**Record level** (``level="record"``; the guarantee protects one record of one client against
everyone else, the server included; local DP in the sense of LDP-FedP3).  Every gradient a client
computes is a DP-SGD step on its own data: each record joins the step's minibatch independently
with probability q_i = b / n_i (n_i public), its gradient l'(z^T x, y) z is clipped to L2 norm C,
N(0, z^2 C^2 I) is added to the clipped sum, which is divided by the expected batch q_i n_i.
One step is ``PoissonSubsampledGaussian(z, q_i)`` (add/remove one record; Gaussian(z, 1) when
q_i = 1); K steps a round compose.  Everything the client sends (dense Fed-HT models, FedIter-HT's
tau-sparse models and their *supports*, FedDualAvg's dual state) is a function of these noisy
gradients and the public broadcasts, so it is post-processing: the support a client reveals is
selected from noised values, never from raw data.  Records of different clients are disjoint, so
every client has its own budget (``BudgetFilter(per_party=True)``, party ``client-i``) and the
run's epsilon is the largest client's.  Only strategies whose clients touch their data through
``ctx.grad`` can run at this level (not FedGradMP: its subproblem reads the full local data).

**Client level** (``level="client"``; protects a client's whole data set; central DP with a
trusted aggregator, or secure aggregation of the clipped updates).  A participant's reply v_i is
replaced by ``ref + clip_C(v_i - ref)`` (ref = the public broadcast), the aggregator adds
N(0, z^2 C^2 I) to the sum of the clipped updates and divides by a public count (N, L, or q N),
then the strategy's own server step (H_tau, the l2 ball, FedDualAvg's dual update) runs on that
noisy *dense* mean: the server's hard thresholding and everything broadcast after it are
post-processing of a Gaussian release, so no data-dependent support is released unprotected.
One round is ``Gaussian(z, 1)`` with full or fixed-size (L of N) participation (no amplification
is claimed for sampling without replacement), ``PoissonSubsampledGaussian(z, q)`` with Poisson
participation (DP-FedAvg, McMahan et al. 2018; amplification holds because a client joins
independently with probability q and the divisor q N does not depend on who joined).  Neighbours
add or remove one client's contribution (a client's slot contributing nothing).  Weights must be
uniform (p_i = 1/N); examples-weighted means would make the sensitivity depend on n_i.

Order of operations (both levels): the round's release is charged to the
:class:`~accounting.BudgetFilter` (durably recorded in the ledger) before any of its noise is
drawn; a release the budget cannot afford raises :class:`~accounting.BudgetExceeded` and nothing
of it is computed.  Noise scales come from :func:`accounting.calibrate` for the run's plan (every
client in every round: the worst case).  What a private run does **not** protect: the metrics the
simulation prints (objective, errors) are computed on the raw data for the experimenter and are
not releases; a deployment computes none of them.  The default step size reads the data, so a
private run needs an explicit ``lr``.

**Where the noise is drawn on Flower** (``--backend flower-sim | flower``,
:mod:`vflpriv.sparse.remote`).  Record level: each client's ClientApp holds a
:class:`ClientPrivacy` (its q_i and z) and its own ledger and budget; it charges its round to its
own ledger before drawing its noise from its own generator (the server's ledger keeps the same
records as in process: the joint view the run's epsilon is reported from).  Client level: each
ClientApp clips its own update (:func:`clip_updates`) before sending it; the noise stays with
the server, added to the aggregate in the ServerApp (``noisy_mean``), so the guarantee is central
DP with a trusted aggregator, as in process: a client's clipped update reaches the server
unnoised.
"""
from __future__ import annotations

import math

import numpy as np

from accounting import (ADD_REMOVE, BudgetFilter, Gaussian, Ledger, PoissonSubsampledGaussian,
                        SelfComposed, calibrate, get_accountant, report)

LEVELS = ("record", "client")


def _step_event(z, q):
    return Gaussian(z, 1.0, neighboring=ADD_REMOVE) if q >= 1 else \
        PoissonSubsampledGaussian(z, q, neighboring=ADD_REMOVE)


def _memory_ledger():
    # the vertical engine's in-memory ledger (same records and composition, no file)
    from accounting import MemoryLedger

    return MemoryLedger()


def clip_updates(V, ref, clip):
    """ref + clip_C(v_i - ref) for every row of V (what each client sends the aggregator)."""
    D = V - ref
    norms = np.linalg.norm(D, axis=1, keepdims=True)
    return ref + D * np.minimum(1.0, clip / np.maximum(norms, 1e-300))


def record_gradient(ctx, X, q, z, clip, charged_steps):
    """The DP-SGD gradients of ``ctx``'s clients (``q``: their record sample rates, ``z``: noise
    multiplier per rate), refusing a step beyond those charged."""
    if ctx.steps > charged_steps:
        raise RuntimeError(f"{ctx.steps} private gradient steps in a round charged for "
                           f"{charged_steps}")
    sigma = np.array([z[float(v)] for v in q])[:, None] * clip
    return ctx.shards.private_grad(X, ctx.clients, q, clip, sigma, ctx.rngs)


class ClientPrivacy:
    """What one client holds of a private run's plan (in its Flower ClientApp): at record level
    its sample rate q_i and the noise multipliers (it draws its own noise, after charging its own
    ledger), at client level only the clip C (it clips its update; the noise is the server's)."""

    def __init__(self, level, clip, local_steps, q=None, z=None):
        self.level, self.clip, self.local_steps = level, float(clip), int(local_steps)
        self.q = None if q is None else np.asarray(q, dtype=float)
        self.z = z
        self.charged_steps = self.local_steps

    def client_gradient(self, ctx, X):
        return record_gradient(ctx, X, self.q[ctx.clients], self.z, self.clip,
                               self.charged_steps)

    def clip_updates(self, V, ref):
        return clip_updates(V, ref, self.clip)


class PrivacyPlan:
    """The noise, events and budget of one private run (module docstring)."""

    def __init__(self, level, epsilon, delta, clip, *, rounds, local_steps, participation,
                 counts, batch_size=None, ledger=None, accountant="rdp"):
        if level not in LEVELS:
            raise ValueError(f"privacy level must be record or client, got {level!r}")
        if not (isinstance(epsilon, (int, float)) and epsilon > 0 and math.isfinite(epsilon)):
            raise ValueError(f"--epsilon must be a positive finite number, got {epsilon!r}")
        if delta is None or not (0 < delta < 1):
            raise ValueError(f"--delta must be in (0, 1) for a private run, got {delta!r}")
        if not (isinstance(clip, (int, float)) and clip > 0 and math.isfinite(clip)):
            raise ValueError(f"--clip must be a positive finite number, got {clip!r}")
        self.level, self.epsilon, self.delta, self.clip = level, float(epsilon), float(delta), \
            float(clip)
        self.rounds, self.local_steps = int(rounds), int(local_steps)
        self.participation = participation
        self.counts = np.asarray(counts)
        self.accountant = accountant
        budget = {"epsilon": self.epsilon, "delta": self.delta, "accountant": accountant,
                  "level": level, "per_party": level == "record"}
        self.ledger = Ledger(ledger, budget=budget) if ledger else _memory_ledger()
        self.ledger_path = ledger
        # The ledger's header budget governs (a run cannot raise it by asking for more), and a
        # ledger of the other kind (one shared budget vs one per client: a vertical run's) is
        # refused here, before any calibration or release (exit 2).
        b_eps, b_delta = self.ledger.governing_budget(self.epsilon, self.delta,
                                                      per_party=(level == "record"))
        self.filter = BudgetFilter(self.ledger, b_eps, b_delta, accountant=accountant,
                                   per_party=(level == "record"))
        if level == "record":
            b = batch_size
            self.q = np.array([1.0 if b is None else min(1.0, b / n) for n in self.counts])
            steps = self.rounds * self.local_steps
            self.z = {}
            for q in sorted(set(self.q.tolist())):
                self.z[q] = self._calibrate(
                    lambda s, q=q: SelfComposed(_step_event(s, q), steps))
        else:
            kind = participation.kind
            self.q_clients = participation.value if kind == "poisson" else 1.0
            self.z = self._calibrate(lambda s: SelfComposed(self.round_event(s), self.rounds))
        self.charged_steps = None

    def _calibrate(self, make_event):
        """The noise multiplier for the run's (epsilon, delta); a target no noise meets is one
        InputError naming --epsilon and --delta (not "could not bracket the target")."""
        from ..errors import uncalibrated

        try:
            return calibrate(make_event, self.epsilon, self.delta, guess=1.0,
                             accountant=self.accountant, decreasing=True).value
        except ValueError as exc:
            raise uncalibrated(exc, self.epsilon, self.delta, self.accountant) from None

    # -- events --------------------------------------------------------------------------
    def round_event(self, z=None):
        """The client-level event of one round."""
        z = self.z if z is None else z
        return _step_event(z, self.q_clients)

    def client_event(self, i):
        """The record-level event of client i's round (K DP-SGD steps)."""
        e = _step_event(self.z[float(self.q[i])], float(self.q[i]))
        return e if self.local_steps == 1 else SelfComposed(e, self.local_steps)

    # -- before the run ------------------------------------------------------------------
    def check_plan(self):
        """Refuse the run before its first round unless its whole worst-case plan fits in what
        remains, and reserve it (``BudgetFilter.check_plan``): record level, every client in
        every round, each against its own budget; client level, ``rounds`` noisy sums."""
        advice = (lambda: "a smaller epsilon, fewer rounds or a fresh ledger fits")
        if self.level == "record":
            for i in range(len(self.counts)):
                self.filter.check_plan(SelfComposed(self.client_event(i), self.rounds),
                                       party=f"client-{i}", advice=advice)
        else:
            self.filter.check_plan(SelfComposed(self.round_event(), self.rounds),
                                   party="server", advice=advice)

    # -- the round -----------------------------------------------------------------------
    def before_round(self, ctx, strategy):
        """Charge the round's releases (durably) before any of their noise is drawn."""
        if self.level == "record":
            if not strategy.record_private:
                raise ValueError(f"--algorithm {strategy.name} cannot run record-level private "
                                 "(its clients read their data outside the private gradient)")
            for i in ctx.clients:
                self.filter.charge(self.client_event(int(i)), party=f"client-{int(i)}",
                                   round=ctx.t, note=f"{self.local_steps} DP-SGD step(s)")
            self.charged_steps = self.local_steps
        else:
            self.filter.charge(self.round_event(), party="server", round=ctx.t,
                               note=f"noisy sum of {ctx.clients.shape[0]} clipped updates")

    def client_gradient(self, ctx, X):
        return record_gradient(ctx, X, self.q[ctx.clients], self.z, self.clip,
                               self.charged_steps)

    def clip_updates(self, V, ref):
        """ref + clip_C(v_i - ref) for every reply (what each client sends the aggregator)."""
        return clip_updates(V, ref, self.clip)

    def for_client(self, i):
        """Client i's :class:`ClientPrivacy` (public: its rate and the calibrated noise)."""
        if self.level == "record":
            q = float(self.q[i])
            return ClientPrivacy("record", self.clip, self.local_steps, q=[q], z={q: self.z[q]})
        return ClientPrivacy("client", self.clip, self.local_steps)

    def denominator(self, N):
        p = self.participation
        return float(N if p.kind == "full" else p.value if p.kind == "fixed" else p.value * N)

    def noisy_mean(self, V, ref, ctx):
        """ref + (sum of the clipped updates + N(0, z^2 C^2 I)) / (public count).  The count is
        the plan's (N, L or q N) over the clients remaining when the round began
        (``ctx.public_count``, set by the round loop; a client lost under ``--on-client-loss
        continue`` is out from the next round on): public, fixed before anyone answers, so a
        missing reply is the add/remove neighbour of the accounting, never a change of the
        divisor."""
        total = (V - ref).sum(axis=0) if V.shape[0] else np.zeros_like(ref)
        total = total + self.z * self.clip * ctx.secret_rng.standard_normal(ref.shape[0])
        count = getattr(ctx, "public_count", None)
        return ref + total / (self.denominator(ctx.shards.N) if count is None else count)

    # -- report --------------------------------------------------------------------------
    def spent_event(self):
        """The composed event of the most-charged party (record level: the client whose
        releases cost most by the filter's accountant)."""
        if self.level == "client":
            return self.ledger.event()
        acc = get_accountant(self.accountant)
        best, worst = None, -1.0
        seen = {}
        for party in {r.party for r in self.ledger.records}:
            ev = self.ledger.event(party=party)
            if ev not in seen:
                seen[ev] = acc.epsilon(ev, self.delta)
            if seen[ev] > worst:
                best, worst = ev, seen[ev]
        return best

    def summary(self):
        ev = self.spent_event()
        if ev is None:
            spent = {"best": 0.0}
            best_name = None
        else:
            rep = report(ev, delta=self.delta)
            spent = {k: v for k, v in rep.values.items()}
            spent["best"] = rep.best_value
            best_name = rep.best_accountant
        out = {"level": self.level, "epsilon": self.epsilon, "delta": self.delta,
               "clip": self.clip, "accountant": self.accountant, "epsilon_spent": spent,
               "best_accountant": best_name, "releases": len(self.ledger.records),
               "ledger": self.ledger_path,
               "neighbouring": "add/remove one record of one client" if self.level == "record"
               else "add/remove one client's contribution"}
        if self.level == "record":
            out["noise_multiplier"] = {f"{q:g}": z for q, z in self.z.items()}
            out["record_sample_rate"] = sorted(set(self.q.tolist()))
        else:
            out["noise_multiplier"] = self.z
            out["client_sample_rate"] = self.q_clients
            out["amplification"] = self.participation.kind == "poisson"
        return out
