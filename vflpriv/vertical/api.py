"""One entry point for every algorithm of the engine: :func:`solve`.

Algorithms (all on the same feasible set, the product of per-party l1 balls of radius ``eta``):

* ``dp-bcfw``: DP-BCFW-AS, paper 004 Algorithm 2 (``epsilon=inf``: no noise, identical to bcfw);
* ``bcfw``:    BCFW-AS, Algorithm 1, non-private, through the same protocol;
* ``dfw``:     distributed FW (Bellet et al. 2015), the server moves the block with the largest gap;
* ``fw``:      centralized Frank-Wolfe (Jaggi 2013), ``vflpriv.optim.frank_wolfe``;
* ``dpfw``:    centralized DP-FW (Talwar, Thakurta, Zhang 2015), ``vflpriv.optim.dp_frank_wolfe``;
* ``dp-bcfw-secure``: DP-BCFW whose cross-party products are released once per selected feature,
  computed under additive secret sharing (least squares; ``vflpriv.vertical.secure``).
"""
from __future__ import annotations

import math
import os
import secrets
import time
import warnings

import numpy as np

from accounting import BudgetFilter, Ledger
from accounting.ledger import ends_reservations

from ..errors import InputError
from ..optim import dp_frank_wolfe, frank_wolfe, get_loss, reference_optimum
from . import privacy as P
from .engine import run_vertical
from .sampling import parse_sampling
from .sketch import Sketch
from .engine import _seeds
from .checkpoint import Checkpointer, ReplayFilter, data_fingerprint
from .checkpoint import pending_records as _pending_records, resume_checkpoint as _resume_checkpoint
from .hosted import run_dir_for as _flower_run_dir, run_hosted as _run_flower  # noqa: F401
from .solution import (REPORT_ACCOUNTANTS, Solution,  # noqa: F401
                       open_ledger as _open_ledger, privacy_report as _privacy_report)

ALGORITHMS = ("dp-bcfw", "bcfw", "dfw", "fw", "dpfw", "dp-bcfw-secure")
#: largest finite epsilon a run calibrates for (e^epsilon overflows float64 near 709; far
#: below that, the noise is already negligible)
MAX_EPSILON = 1e6


def check_seed(seed, name="seed"):
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))
                             or seed < 0):
        raise InputError(f"{name} must be a non-negative integer (or None: OS entropy), "
                         f"got {seed!r}")
    return seed


def check_label_party(label_party, algorithm, K):
    """``None`` (every party holds y) or the label party's index; ``label_party=None`` asks for
    the algorithm's default (dp-bcfw-secure: party 0; the others: all)."""
    if algorithm in ("fw", "dpfw"):
        if label_party is not None:
            raise InputError(f"label_party is for the federated algorithms; {algorithm!r} is "
                             f"centralized (one curator holds everything), got "
                             f"label_party={label_party!r}")
        return None
    if label_party is None:
        return 0 if algorithm == "dp-bcfw-secure" else None
    if isinstance(label_party, str):
        if label_party == "all":
            return None
        try:
            label_party = int(label_party)
        except ValueError:
            raise InputError(f"label_party must be 'all' or a party index 0..{K - 1}, got "
                             f"{label_party!r}") from None
    if isinstance(label_party, bool) or not isinstance(label_party, (int, np.integer)) \
            or not 0 <= label_party < K:
        raise InputError(f"label_party must be 'all' or a party index 0..{K - 1}, got "
                         f"{label_party!r}")
    if algorithm != "dp-bcfw-secure":
        raise InputError(f"{algorithm!r} needs the labels at every party (paper 004's setting: "
                         f"each party computes its residuals from y); label_party={label_party} "
                         "is for dp-bcfw-secure")
    return int(label_party)


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
    if math.isfinite(epsilon) and epsilon > MAX_EPSILON:
        raise InputError(f"epsilon must be at most {MAX_EPSILON:g} (or inf for a non-private "
                         f"run; beyond, noise calibration leaves floating point), got {epsilon!r}")
    if math.isfinite(epsilon):
        if delta is None or isinstance(delta, bool) or not isinstance(
                delta, (int, float, np.integer, np.floating)) or not (0 < delta < 1):
            raise InputError(f"a finite epsilon needs delta in (0, 1), got {delta!r}")
    return float(epsilon)


@ends_reservations      # a run's unused reservation is released when it ends (docs/ledger.md)
def solve(data, *, loss="squared", eta=1.0, iterations=100, algorithm="dp-bcfw",
          sampling="elementary", epsilon=math.inf, delta=None, rnm=None, sketch="identity",
          sketch_dim=None, calibration="accountant", split=None, feature_bound=None,
          label_bound=None, accountant="rdp", ledger=None, seed=None, release_cache=True,
          reference=False, callback=None, report_accountants=REPORT_ACCOUNTANTS,
          allow_biased_sketch=False, derivative_clip=None, checkpoint=None, checkpoint_every=1,
          resume=False, checkpoint_extra=None, row_clip=None, max_features=None,
          backend="inprocess", flower=None, label_party=None) -> Solution:
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
    path; dp-bcfw, bcfw, dfw, dp-bcfw-secure in process) is written atomically before the first round and after every
    ``checkpoint_every`` rounds; ``resume=True`` continues the interrupted run from it without
    re-spending or re-releasing (``checkpoint.py``; private runs need a ledger file).
    ``checkpoint_extra`` (JSON-able) is stored in it for the caller (the CLI keeps its options).

    ``row_clip`` (C) and ``max_features`` (F) are for ``dp-bcfw-secure``: each party scales the
    rows of its block to l2 norm <= C, and selects at most F distinct features (docs/vertical.md).
    Left at None, dp-bcfw-secure chooses ``rnm``, ``split``, ``max_features`` and the row clips by
    the stated rules of ``vflpriv.vertical.secure.defaults`` (public quantities only; listed in
    ``Solution.extra["defaults"]``); the other algorithms take ``rnm="laplace"``, ``split=0.5``.

    ``label_party`` says who holds the labels y: ``"all"`` (paper 004's setting, the default of
    dp-bcfw, bcfw and dfw, the only one they support) or a party index (the default of
    dp-bcfw-secure is 0): the other parties never see y, only DP releases derived from it.
    Centralized algorithms (fw, dpfw) take none.

    ``backend`` ("inprocess", "flower-sim", "flower"; dp-bcfw, bcfw, dfw) runs the parties as
    Flower ClientApps (docs/flower.md), each enforcing its own budget on its own ledger;
    ``flower`` (a :class:`vflpriv.runtime.backends.FlowerOptions`) sets timeouts, party budgets and paths.
    The result's ``extra["flower"]`` holds the Flower byte counts and each party's spend.
    """
    if algorithm not in ALGORITHMS:
        raise InputError(f"algorithm must be one of {ALGORITHMS}, got {algorithm!r}")
    from ..runtime.backends import FlowerOptions, check_backend, require_flwr

    check_backend(backend)
    if backend != "inprocess":
        if algorithm not in ("dp-bcfw", "bcfw", "dfw", "dp-bcfw-secure"):
            raise InputError(f"--backend {backend} runs the federated vertical methods (dp-bcfw, "
                             f"bcfw, dfw, dp-bcfw-secure); {algorithm!r} runs in process only")
        if checkpoint is not None or resume:
            raise InputError(f"checkpoints are for the in-process backend, not {backend!r} "
                             "(each party's ledger keeps what was spent; see docs/flower.md)")
        require_flwr(backend)
        flower = flower or FlowerOptions()
    run_dir = None
    label_party = check_label_party(label_party, algorithm, data.K)
    loss = get_loss(loss)
    epsilon = _check_eps(epsilon, delta)
    check_seed(seed)
    if not (isinstance(eta, (int, float, np.integer, np.floating)) and not isinstance(eta, bool)
            and eta > 0 and math.isfinite(eta)):
        raise InputError(f"eta (per-party l1 radius) must be a positive finite number, got {eta!r}")
    if isinstance(iterations, bool) or not isinstance(iterations, (int, np.integer)) or iterations < 1:
        raise InputError(f"iterations must be a positive integer, got {iterations!r}")
    if algorithm != "dp-bcfw-secure":
        rnm = "laplace" if rnm is None else rnm
        split = 0.5 if split is None else split
    if rnm is not None and rnm not in P.RNM_NOISES:
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
    if checkpoint is not None:
        from ..outputs import check_outputs

        # before any work: a checkpoint over the ledger (or a FIFO, a directory) is refused
        ledger_path = ledger.path if isinstance(ledger, Ledger) else ledger
        check_outputs({"checkpoint": checkpoint, "ledger": ledger_path})
    elif isinstance(ledger, (str, os.PathLike)):
        from ..outputs import check_output

        check_output(ledger, "ledger")
    if algorithm == "dp-bcfw-secure":
        from .secure import solve_secure

        return solve_secure(data, loss=loss, eta=eta, iterations=int(iterations),
                            sampling=sampling, epsilon=epsilon, delta=delta, rnm=rnm,
                            sketch=sketch, calibration=calibration, split=split,
                            feature_bound=feature_bound, label_bound=label_bound,
                            accountant=accountant, ledger=ledger, seed=seed, reference=reference,
                            callback=callback, report_accountants=report_accountants,
                            derivative_clip=derivative_clip, checkpoint=checkpoint,
                            row_clip=row_clip, max_features=max_features, backend=backend,
                            flower=flower, label_party=label_party, resume=resume,
                            checkpoint_every=checkpoint_every,
                            checkpoint_extra=checkpoint_extra)
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
    # Unseeded: the parties' noise gets its own 128 bits of OS entropy, unrelated to the sketch
    # and sampling seeds sent in Setup (on resume the noise generators' states are restored
    # from the checkpoint, so a fresh key changes nothing there).
    noise_key = None if seed is not None else secrets.randbits(128)
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
        if checkpoint is not None and ledger is None and not ck:
            raise InputError("a private run with a checkpoint needs a ledger file (ledger=PATH, "
                             "--ledger): resuming must not spend again what an in-memory ledger "
                             "forgot")
        if ck:
            ledger = ledger if ledger is not None else ck["ledger_path"]
            if not isinstance(ledger, Ledger) and not os.path.isfile(ledger):
                # never create an empty ledger for a run whose releases are recorded elsewhere
                raise InputError(f"resume: the ledger {str(ledger)!r} of the checkpoint's run "
                                 "does not exist")
            led = Ledger(ledger, budget={"epsilon": epsilon, "delta": delta,
                                         "accountant": accountant},
                         run_id=ck["run_id"]) if not isinstance(ledger, Ledger) else ledger
        else:
            if backend != "inprocess" and ledger is None:
                # the ServerApp may be another process: its ledger must be a file
                run_dir = _flower_run_dir(flower)
                ledger = os.path.join(run_dir, "server.ledger")
            led = _open_ledger(ledger, epsilon, delta, accountant)
        if checkpoint is not None and led.path is None:
            raise InputError("a private run with a checkpoint needs a ledger file (ledger=PATH, "
                             "--ledger): resuming must not spend again what an in-memory ledger "
                             "forgot")
        # The ledger's header budget governs (a run cannot raise it by asking for more).
        b_eps, b_delta = led.governing_budget(epsilon, delta)
        budget = BudgetFilter(led, b_eps, b_delta, accountant=accountant)
        pending = _pending_records(led, ck, checkpoint) if ck else []
        t0 = int(ck["state"]["t"]) if ck else 0
        recal = None if ck or calibration != "accountant" else (
            lambda e: P.calibrate_accountant(rnm, sens, e, delta, T, smp.max_parties, split,
                                             accountant))
        P.check_planned_spend(budget, noise_plan, sens, T, t0, smp.max_parties, pending, epsilon,
                             recal)
        if not ck:
            # before anything is charged (after the ledger and the plan are checked, so bad
            # input stays one line): say so when the planned noise leaves nothing to learn
            outlook = P.learning_outlook(noise_plan, sens, parties, float(eta),
                                         sk.max_column_norm(), float(feature_bound),
                                         float(label_bound))
            noise_plan.details["outlook"] = outlook
            if outlook["hopeless"]:
                warnings.warn("DP-BCFW-AS is expected to learn little with this noise: "
                              + "; ".join(outlook["reasons"]) + ". dp-bcfw-secure releases "
                              "aggregates instead (docs/vertical.md, 'Where DP-BCFW-AS learns')",
                              P.HopelessNoiseWarning, stacklevel=2)
        if ck:
            budget = ReplayFilter(budget, pending)
        clip = (float(feature_bound), float(label_bound), sens.z_bound, sens.derivative_bound)
    on_round = None
    if checkpoint is not None:
        meta = {"config": config, "seed": seed, "seed_material": noise_seed,
                "data": data_fingerprint(data), "extra": checkpoint_extra,
                "run_id": None if led is None else led.run_id,
                "ledger_path": None if led is None else os.path.abspath(led.path)}
        on_round = Checkpointer(checkpoint, checkpoint_every, T, meta, budget)
    flower_info = None
    if backend != "inprocess":
        res, flower_info = _run_flower(backend, flower, run_dir, data, loss, float(eta), T,
                                       private,
                                       dict(algorithm="dfw" if algorithm == "dfw" else "bcfw",
                                            sampling=smp, sketch=sketch, sketch_dim=sketch_dim,
                                            seed=noise_seed, noise_plan=noise_plan, clip=clip,
                                            release_cache=release_cache),
                                       led, budget, accountant, epsilon, delta,
                                       None if seed is None else _seeds(noise_seed)[2], callback)
        if private:
            led = flower_info.pop("ledger")
            budget = BudgetFilter(led, budget.epsilon, budget.delta, accountant=accountant)
    else:
        res = run_vertical(data, loss, float(eta), T,
                           algorithm="dfw" if algorithm == "dfw" else "bcfw",
                           sampling=smp, sketch=sketch, sketch_dim=sketch_dim, seed=noise_seed,
                           noise_key=noise_key, noise_plan=noise_plan, budget_filter=budget,
                           clip=clip, release_cache=release_cache, callback=callback,
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
                          "sketch_seed": sk_seed, "selections": res.selections,
                          "backend": backend, "flower": flower_info})
    if private:
        ev = led.event()
        values, best = _privacy_report(ev, delta, report_accountants)
        sol.privacy = {"epsilon_spent": values, "best_accountant": best, "delta": delta,
                       "target_epsilon": epsilon, "budget_accountant": accountant,
                       "budget": {"epsilon": budget.epsilon, "delta": budget.delta},
                       "spent_by_budget_accountant": budget.spent(),
                       "calibration": noise_plan.to_dict(), "releases": len(led.records),
                       "neighboring": "replace_one"}
    if reference:
        sol.reference = reference_optimum(data.A, data.y, loss, blocks=data.blocks, eta=float(eta),
                                          on_failure="flag")
    return sol


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


def _centralized(data, loss, eta, T, algorithm, epsilon, delta, Ba, By, accountant, ledger, seed,
                 reference, report_accountants, derivative_clip=None):
    t0 = time.perf_counter()
    if algorithm == "fw":
        r = frank_wolfe(data.A, data.y, loss, eta, blocks=data.blocks, iterations=T)
        privacy = None
        led = None
    else:
        led = _open_ledger(ledger, epsilon, delta, accountant)
        b_eps, b_delta = led.governing_budget(epsilon, delta)
        budget = BudgetFilter(led, b_eps, b_delta, accountant=accountant)
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
                           sampling="elementary", seed=0, derivative_clip=None, sketch_seed=None,
                           **_ignored) -> dict:
    """Both calibrations of the same run side by side: noise scales and what each really spends.

    ``accountant``: noise solved so that the worst-case plan meets (epsilon, delta) exactly;
    ``paper``: paper 004's closed forms, accounted by the same accountant (and by every accountant
    in ``REPORT_ACCOUNTANTS`` but PLD, to keep this quick).  ``sketch_seed`` (a run's
    ``Solution.extra["sketch_seed"]``, public: it is sent in Setup) compares on that run's sketch;
    otherwise the sketch is derived from ``seed`` as :func:`solve` derives it.
    """
    loss = get_loss(loss)
    rnm = "laplace" if rnm is None else rnm
    split = 0.5 if split is None else split
    epsilon = _check_eps(epsilon, delta)
    smp = parse_sampling(sampling, data.blocks)
    sk = Sketch(sketch, data.n, sketch_dim,
                _seeds(seed)[0] if sketch_seed is None else int(sketch_seed))
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
