"""One entry point for every algorithm of the engine: :func:`solve`.

Algorithms (all on the same feasible set, the product of per-party l1 balls of radius ``eta``):

* ``dp-bcfw``: DP-BCFW-AS, paper 004 Algorithm 2 (``epsilon=inf``: no noise, identical to bcfw);
* ``bcfw``:    BCFW-AS, Algorithm 1, non-private, through the same protocol;
* ``dfw``:     distributed FW (Bellet et al. 2015), the server moves the block with the largest gap;
* ``fw``:      centralized Frank-Wolfe (Jaggi 2013), ``vflpriv.optim.frank_wolfe``;
* ``dpfw``:    centralized DP-FW (Talwar, Thakurta, Zhang 2015), ``vflpriv.optim.dp_frank_wolfe``.
"""
from __future__ import annotations

import math
import os
import secrets
import time
import warnings
from dataclasses import dataclass, field

import numpy as np

from accounting import BudgetFilter, Ledger, report

from ..errors import InputError
from ..optim import dp_frank_wolfe, frank_wolfe, get_loss, reference_optimum
from . import privacy as P
from .engine import run_vertical
from .sampling import parse_sampling
from .sketch import Sketch
from .engine import _seeds
from .checkpoint import Checkpointer, ReplayFilter, data_fingerprint, read_checkpoint

ALGORITHMS = ("dp-bcfw", "bcfw", "dfw", "fw", "dpfw")
#: accountants asked for the end-of-run report (PLD is exact-er but takes seconds)
REPORT_ACCOUNTANTS = ("basic", "advanced", "optimal", "rdp", "pld")


@dataclass
class Solution:
    algorithm: str
    x: np.ndarray
    objective: list
    initial_objective: float
    iterations: int
    seconds: float
    K: int
    n: int
    seed: int
    uplink: list | None = None           # payload bytes per party
    uplink_framed: list | None = None
    downlink: list | None = None
    downlink_framed: list | None = None
    uplink_naive: list | None = None     # raw active columns (n float64 per new feature + index)
    uplink_full_gradient: list | None = None
    released: list | None = None
    meter: object = None
    privacy: dict | None = None
    noise_plan: object = None
    ledger: object = None
    reference: object = None
    extra: dict = field(default_factory=dict)

    @property
    def final_objective(self):
        return self.objective[-1] if self.objective else self.initial_objective

    @property
    def support_size(self):
        return int(np.count_nonzero(self.x))

    @property
    def excess_risk(self):
        return None if self.reference is None else self.final_objective - self.reference.objective

    def to_dict(self):
        ref = self.reference
        out = {
            "algorithm": self.algorithm,
            "objective": [float(v) for v in self.objective],
            "initial_objective": float(self.initial_objective),
            "final_objective": float(self.final_objective),
            "iterations": self.iterations,
            "seconds": self.seconds,
            "seed": self.seed,
            "parties": self.K,
            "n": self.n,
            "support_size": self.support_size,
            "uplink_bytes": _per_party(self.uplink),
            "uplink_bytes_framed": _per_party(self.uplink_framed),
            "downlink_bytes": _per_party(self.downlink),
            "downlink_bytes_framed": _per_party(self.downlink_framed),
            "uplink_bytes_naive": _per_party(self.uplink_naive),
            "uplink_bytes_full_gradient": _per_party(self.uplink_full_gradient),
            "features_released": _per_party(self.released),
        }
        if ref is not None:
            out.update(reference_objective=float(ref.objective), excess_risk=float(self.excess_risk),
                       reference_relative_gap=float(ref.relative_gap),
                       reference_certified=bool(ref.certified), reference_solver=ref.solver)
        if self.privacy is not None:
            out["private"] = True
            out["epsilon_spent"] = self.privacy.get("epsilon_spent")
            out["delta"] = self.privacy.get("delta")
            out["privacy"] = self.privacy
        else:
            # A non-private run shares exact scores and raw (or sketched, noiseless) columns:
            # no finite guarantee, so no epsilon is claimed.
            out["epsilon_spent"] = {"best": None}
            out["delta"] = None
            out["private"] = False
        return out


def _per_party(v):
    return None if v is None else {str(k): int(b) for k, b in enumerate(v)}


def _check_eps(epsilon, delta):
    if epsilon is None:
        epsilon = math.inf
    if isinstance(epsilon, str):
        try:
            epsilon = float(epsilon)
        except ValueError:
            raise InputError(f"epsilon must be a positive number or inf, got {epsilon!r}") from None
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float, np.integer, np.floating)) \
            or not epsilon > 0:
        raise InputError(f"epsilon must be a positive number or inf, got {epsilon!r}")
    if math.isfinite(epsilon):
        if delta is None or isinstance(delta, bool) or not isinstance(
                delta, (int, float, np.integer, np.floating)) or not (0 < delta < 1):
            raise InputError(f"a finite epsilon needs delta in (0, 1), got {delta!r}")
    return float(epsilon)


def _privacy_report(event, delta, accountants):
    rep = report(event, delta=delta, accountants=accountants)
    values = {k: v for k, v in rep.values.items()}
    values["best"] = rep.best_value
    return values, rep.best_accountant


def solve(data, *, loss="squared", eta=1.0, iterations=100, algorithm="dp-bcfw",
          sampling="elementary", epsilon=math.inf, delta=None, rnm="laplace", sketch="identity",
          sketch_dim=None, calibration="accountant", split=0.5, feature_bound=None,
          label_bound=None, accountant="rdp", ledger=None, seed=0, release_cache=True,
          reference=False, callback=None, report_accountants=REPORT_ACCOUNTANTS,
          allow_biased_sketch=False, derivative_clip=None, checkpoint=None, checkpoint_every=1,
          resume=False, checkpoint_extra=None) -> Solution:
    """Run ``algorithm`` on ``data`` (a :class:`vflpriv.data.VerticalData`); see module docstring.

    Private runs (finite ``epsilon``) need ``delta``, ``feature_bound`` and ``label_bound``; every
    release is charged to an ``accounting.BudgetFilter`` over ``ledger`` (a path, a Ledger, or
    None for an in-memory ledger) before its noise is drawn.  ``accountant`` calibrates and checks
    the plan ("rdp" by default: the fastest accountant that composes report-noisy-max and
    Gaussian releases together, so the filter can check every release; the end-of-run report asks
    ``report_accountants`` and names the best).  ``derivative_clip`` c (private runs) clips the
    per-sample loss derivatives to [-c, c], which lowers the score sensitivity to 2 B_a c / n when
    c is below the bound implied by B_a, B_y and eta (docs/sensitivity.md).

    ``seed=None`` (deployment) draws the run's seed material from OS entropy; an integer seed
    makes the noise reproducible, so the output is marked not for deployment.  ``checkpoint`` (a
    path; dp-bcfw, bcfw, dfw) is written atomically before the first round and after every
    ``checkpoint_every`` rounds; ``resume=True`` continues the interrupted run from it without
    re-spending or re-releasing (``checkpoint.py``; private runs need a ledger file).
    ``checkpoint_extra`` (JSON-able) is stored in it for the caller (the CLI keeps its options).
    """
    if algorithm not in ALGORITHMS:
        raise InputError(f"algorithm must be one of {ALGORITHMS}, got {algorithm!r}")
    loss = get_loss(loss)
    epsilon = _check_eps(epsilon, delta)
    if not (isinstance(eta, (int, float, np.integer, np.floating)) and not isinstance(eta, bool)
            and eta > 0 and math.isfinite(eta)):
        raise InputError(f"eta (per-party l1 radius) must be a positive finite number, got {eta!r}")
    if isinstance(iterations, bool) or not isinstance(iterations, (int, np.integer)) or iterations < 1:
        raise InputError(f"iterations must be a positive integer, got {iterations!r}")
    if rnm not in P.RNM_NOISES:
        raise InputError(f"rnm must be one of {P.RNM_NOISES}, got {rnm!r}")
    if calibration not in P.CALIBRATIONS:
        raise InputError(f"calibration must be one of {P.CALIBRATIONS}, got {calibration!r}")
    private = math.isfinite(epsilon)
    if private and algorithm in ("bcfw", "dfw", "fw"):
        raise InputError(f"algorithm {algorithm!r} is non-private; use dp-bcfw or dpfw for a "
                         f"finite epsilon (got epsilon={epsilon})")
    if not private and algorithm == "dpfw":
        algorithm = "fw"          # DP-FW without noise is FW (same iterates)
    if sketch != "identity" and loss.name != "squared" and not allow_biased_sketch:
        raise InputError(f"the {loss.name} loss needs per-sample predictors, which a sketch with "
                         "m < n does not preserve; use sketch='identity' (or allow_biased_sketch)")
    if sketch != "identity" and loss.name != "squared":
        warnings.warn(f"{loss.name} loss with a {sketch} sketch: the partial gradients are biased "
                      "(see docs/vertical.md)", stacklevel=2)
    if resume and checkpoint is None:
        raise InputError("resume=True needs the checkpoint path")
    if algorithm in ("fw", "dpfw"):
        if checkpoint is not None:
            raise InputError(f"checkpoints are for the vertical algorithms (dp-bcfw, bcfw, dfw), "
                             f"not {algorithm!r}")
        return _centralized(data, loss, eta, iterations, algorithm, epsilon, delta, feature_bound,
                            label_bound, accountant, ledger, seed, reference, report_accountants,
                            derivative_clip)

    smp = parse_sampling(sampling, data.blocks)
    K, n, T = data.K, data.n, int(iterations)
    noise_plan = budget = clip = led = None
    config = dict(loss=loss.name, eta=float(eta), iterations=T, algorithm=algorithm,
                  sampling=str(sampling), epsilon=epsilon, delta=delta, rnm=rnm, sketch=sketch,
                  sketch_dim=sketch_dim, calibration=calibration, split=split,
                  feature_bound=feature_bound, label_bound=label_bound, accountant=accountant,
                  release_cache=bool(release_cache), derivative_clip=derivative_clip)
    ck = _resume_checkpoint(checkpoint, config, seed, data) if resume else None
    # The run's seed material: the caller's seed, or 128 bits of OS entropy (never reported).
    noise_seed = ck["seed_material"] if ck else (seed if seed is not None else
                                                secrets.randbits(128))
    if ck:
        seed = ck["seed"]
    sk_seed = _seeds(noise_seed)[0]
    sk = Sketch(sketch, n, sketch_dim, sk_seed)
    if private:
        sens = P.sensitivities(loss, feature_bound, label_bound, K * float(eta), n,
                               sk.max_column_norm(), derivative_clip)
        parties = smp.max_parties
        if calibration == "accountant":
            noise_plan = P.calibrate_accountant(rnm, sens, epsilon, delta, T, parties, split,
                                                accountant)
        else:
            noise_plan = P.calibrate_paper(rnm, sens, epsilon, delta, T, parties, float(eta), n,
                                           float(feature_bound), sk.spectral_norm(), accountant)
            if noise_plan.epsilon > epsilon:
                raise InputError(
                    f"the paper's closed-form noise (index scale {noise_plan.index_scale:.4g}, "
                    f"feature sigma {noise_plan.feature_sigma:.4g}) spends epsilon="
                    f"{noise_plan.epsilon:.4g} > target {epsilon:g} at delta={delta:g} under the "
                    f"{accountant} accountant; nothing was released (use calibration='accountant')")
        noise_plan.details.update(sens_index=sens.index, sens_feature=sens.feature,
                                  z_bound=sens.z_bound, derivative_bound=sens.derivative_bound)
        if ck:
            ledger = ledger if ledger is not None else ck["ledger_path"]
            led = Ledger(ledger, budget={"epsilon": epsilon, "delta": delta},
                         run_id=ck["run_id"]) if not isinstance(ledger, Ledger) else ledger
        else:
            led = _open_ledger(ledger, epsilon, delta)
        if checkpoint is not None and led.path is None:
            raise InputError("a private run with a checkpoint needs a ledger file (ledger=PATH, "
                             "--ledger): resuming must not spend again what an in-memory ledger "
                             "forgot")
        budget = BudgetFilter(led, epsilon, delta, accountant=accountant)
        if ck:
            budget = ReplayFilter(budget, _pending_records(led, ck, checkpoint))
        clip = (float(feature_bound), float(label_bound), sens.z_bound, sens.derivative_bound)
    on_round = None
    if checkpoint is not None:
        meta = {"config": config, "seed": seed, "seed_material": noise_seed,
                "data": data_fingerprint(data), "extra": checkpoint_extra,
                "run_id": None if led is None else led.run_id,
                "ledger_path": None if led is None else os.path.abspath(led.path)}
        on_round = Checkpointer(checkpoint, checkpoint_every, T, meta, budget)
    res = run_vertical(data, loss, float(eta), T, algorithm="dfw" if algorithm == "dfw" else "bcfw",
                       sampling=smp, sketch=sketch, sketch_dim=sketch_dim, seed=noise_seed,
                       noise_plan=noise_plan, budget_filter=budget, clip=clip,
                       release_cache=release_cache, callback=callback,
                       state=(ck["state"], ck["arrays"]) if ck else None, on_round=on_round)
    if ck and private and budget.pending:
        raise InputError(f"the ledger holds {len(budget.pending)} records of this run beyond its "
                         f"{T} rounds; it does not belong to this checkpoint")
    sol = Solution(algorithm=algorithm, x=res.x, objective=res.objective,
                   initial_objective=res.initial_objective, iterations=T, seconds=res.seconds,
                   K=K, n=n, seed=seed, uplink=res.uplink(), uplink_framed=res.uplink(True),
                   downlink=res.downlink(), downlink_framed=res.downlink(True),
                   uplink_naive=res.naive_uplink, uplink_full_gradient=res.full_gradient_uplink,
                   released=res.released, meter=res.meter, noise_plan=noise_plan, ledger=led,
                   extra={"p_min": res.p_min, "sketch": sketch, "m": res.m,
                          "selections": res.selections})
    if private:
        ev = led.event()
        values, best = _privacy_report(ev, delta, report_accountants)
        sol.privacy = {"epsilon_spent": values, "best_accountant": best, "delta": delta,
                       "target_epsilon": epsilon, "budget_accountant": accountant,
                       "spent_by_budget_accountant": budget.spent(),
                       "calibration": noise_plan.to_dict(), "releases": len(led.records),
                       "neighboring": "replace_one"}
    if reference:
        sol.reference = reference_optimum(data.A, data.y, loss, blocks=data.blocks, eta=float(eta),
                                          on_failure="flag")
    return sol


def _resume_checkpoint(path, config, seed, data) -> dict:
    """Read a checkpoint and check it belongs to this run (options, seed, data)."""
    meta, arrays = read_checkpoint(path)
    for key, v in config.items():
        old = meta["config"].get(key)
        if old != v and not (isinstance(v, float) and isinstance(old, float) and
                             math.isnan(v) and math.isnan(old)):
            raise InputError(f"resume: {key}={v!r} but the checkpoint's run used {key}={old!r}")
    if seed is not None and seed != meta["seed"]:
        raise InputError(f"resume: seed={seed!r} but the checkpoint's run used seed={meta['seed']!r}")
    if meta["data"] != data_fingerprint(data):
        raise InputError(f"resume: the data (matrix, labels or partition) differ from the "
                         f"checkpoint {str(path)!r}'s run")
    meta["state"], meta["arrays"] = meta["state"], arrays
    return meta


def _pending_records(led, ck, path):
    """Ledger records charged after the checkpoint was written (to replay, not re-append)."""
    n = ck["ledger_length"]
    if n is None or len(led.records) < n:
        raise InputError(f"resume: the ledger {led.path!r} has {len(led.records)} records, fewer "
                         f"than the {n} the checkpoint {str(path)!r} saw")
    pending = led.records[n:]
    for r in pending:
        if r.run_id != ck["run_id"]:
            raise InputError(f"resume: ledger record {r.seq} belongs to run {r.run_id}, not to the "
                             f"checkpoint's run {ck['run_id']}")
    return pending


def _replay_objective(data, loss, r, eta):
    """f(x_t), t = 1..T, on the data as given, from DP-FW's vertices and step sizes."""
    import scipy.sparse as sp

    A = sp.csc_matrix(data.A)
    z = np.zeros(data.n)
    out = []
    for t in range(r.iterations):
        g = r.step_sizes[t]
        z *= 1.0 - g
        for j, s in zip(r.coords[t], r.signs[t]):
            lo, hi = A.indptr[j], A.indptr[j + 1]
            z[A.indices[lo:hi]] += g * s * eta * A.data[lo:hi]
        out.append(float(loss.objective(None, None, data.y, Ax=z)))
    return out


def _open_ledger(ledger, epsilon, delta):
    budget = {"epsilon": epsilon, "delta": delta}
    if ledger is None:
        return P.MemoryLedger(budget=budget)
    if isinstance(ledger, Ledger):
        return ledger
    return Ledger(ledger, budget=budget)


def _centralized(data, loss, eta, T, algorithm, epsilon, delta, Ba, By, accountant, ledger, seed,
                 reference, report_accountants, derivative_clip=None):
    t0 = time.perf_counter()
    if algorithm == "fw":
        r = frank_wolfe(data.A, data.y, loss, eta, blocks=data.blocks, iterations=T)
        privacy = None
        led = None
    else:
        led = _open_ledger(ledger, epsilon, delta)
        budget = BudgetFilter(led, epsilon, delta, accountant=accountant)
        r = dp_frank_wolfe(data.A, data.y, loss, eta, iterations=T, feature_bound=Ba,
                           label_bound=By, epsilon=epsilon, delta=delta, blocks=data.blocks,
                           accountant=accountant, budget_filter=budget, neighboring="replace_one",
                           rng=seed, derivative_clip=derivative_clip)
        values, best = _privacy_report(led.event(), delta, report_accountants)
        privacy = {"epsilon_spent": values, "best_accountant": best, "delta": delta,
                   "target_epsilon": epsilon, "budget_accountant": accountant,
                   "calibration": {k: v for k, v in (r.privacy or {}).items() if k != "event"},
                   "releases": len(led.records), "neighboring": "replace_one"}
    # DP-FW records f on the clipped data; replay its iterates to report f on the data as given,
    # like every other algorithm here (the vertices and steps are in the result).
    objective = _replay_objective(data, loss, r, float(eta)) if algorithm == "dpfw" else \
        [float(v) for v in r.objective[1:]]
    sol = Solution(algorithm=algorithm, x=r.x, objective=objective,
                   initial_objective=float(loss.objective(None, None, data.y,
                                                          Ax=np.zeros(data.n))), iterations=T,
                   seconds=time.perf_counter() - t0, K=data.K, n=data.n, seed=seed,
                   privacy=privacy, ledger=led)
    if reference:
        sol.reference = reference_optimum(data.A, data.y, loss, blocks=data.blocks, eta=float(eta),
                                          on_failure="flag")
    return sol


def calibration_comparison(data, *, loss="squared", eta=1.0, iterations=100, epsilon=1.0,
                           delta=1e-5, rnm="laplace", sketch="identity", sketch_dim=None,
                           split=0.5, feature_bound=None, label_bound=None, accountant="rdp",
                           sampling="elementary", seed=0, derivative_clip=None, **_ignored) -> dict:
    """Both calibrations of the same run side by side: noise scales and what each really spends.

    ``accountant``: noise solved so that the worst-case plan meets (epsilon, delta) exactly;
    ``paper``: paper 004's closed forms, accounted by the same accountant (and by every accountant
    in ``REPORT_ACCOUNTANTS`` but PLD, to keep this quick).
    """
    loss = get_loss(loss)
    epsilon = _check_eps(epsilon, delta)
    smp = parse_sampling(sampling, data.blocks)
    sk = Sketch(sketch, data.n, sketch_dim, _seeds(seed)[0])
    sens = P.sensitivities(loss, feature_bound, label_bound, data.K * float(eta), data.n,
                           sk.max_column_norm(), derivative_clip)
    T, K = int(iterations), smp.max_parties
    out = {}
    for name, plan in (
            ("accountant", P.calibrate_accountant(rnm, sens, epsilon, delta, T, K, split, accountant)),
            ("paper", P.calibrate_paper(rnm, sens, epsilon, delta, T, K, float(eta), data.n,
                                        float(feature_bound), sk.spectral_norm(), accountant))):
        values, best = _privacy_report(plan.event, delta, ("basic", "advanced", "optimal", "rdp"))
        out[name] = dict(plan.to_dict(), epsilon_by_accountant=values, best_accountant=best)
    return out
