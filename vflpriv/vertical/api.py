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

import contextlib
import math
import os
import secrets
import time
import warnings

import numpy as np

from accounting import BudgetFilter, Ledger
from accounting.ledger import ends_reservations

from ..errors import InputError
from ..optim import dp_frank_wolfe, frank_wolfe, get_loss
from . import privacy as P
from .engine import run_vertical
from .sampling import parse_sampling
from .sketch import Sketch
from .engine import _seeds
from .config import (ALGORITHMS, MAX_EPSILON, OPTIONS, VerticalConfig,  # noqa: F401
                     check_epsilon, check_label_party, check_seed)
from .checkpoint import Checkpointer, ReplayFilter, data_fingerprint
from .checkpoint import pending_records as _pending_records, resume_checkpoint as _resume_checkpoint
from .hosted import run_dir_for as _flower_run_dir, run_hosted as _run_flower  # noqa: F401
from .solution import (REPORT_ACCOUNTANTS, Solution, reference_for,  # noqa: F401
                       open_ledger as _open_ledger, privacy_report as _privacy_report)


@ends_reservations      # a run's unused reservation is released when it ends (docs/ledger.md)
def solve(data, config: VerticalConfig | None = None, **options) -> Solution:
    """Run ``config.algorithm`` on ``data`` (a :class:`vflpriv.data.VerticalData`); see the
    module docstring.  ``config`` is a :class:`~vflpriv.vertical.config.VerticalConfig`; without
    one, the keyword ``options`` build it (``solve(data, epsilon=1, ...)``), which validates
    every option before anything is read or spent.  The options:

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
    path; dp-bcfw, bcfw, dfw, dp-bcfw-secure in process) is written atomically before the
    first round and after every ``checkpoint_every`` rounds; ``resume=True`` continues the
    interrupted run from it without re-spending or re-releasing (``checkpoint.py``; private runs
    need a ledger file).
    ``checkpoint_extra`` (JSON-able) is stored in it for the caller (the CLI keeps its options).

    ``row_clip`` (C) and ``max_features`` (F) are for ``dp-bcfw-secure``: each party scales the
    rows of its block to l2 norm <= C, and selects at most F distinct features (docs/vertical.md).
    Left at None, dp-bcfw-secure chooses ``rnm``, ``split``, ``max_features`` and the row clips by
    the stated rules of ``vflpriv.vertical.secure.defaults`` (public quantities only; listed in
    ``Solution.extra["defaults"]``); the other algorithms take ``rnm="laplace"``, ``split=0.5``.

    ``step``: for the non-private ``fw``, "line" (the default: exact line search, the intercept
    at its exact minimizer, and ``eta="auto"`` by 3-fold cross-validation around the public
    rule, reported in ``Solution.selection``) or "fw" (Jaggi's 2 / (t + 2) at the rule's
    radius: paper 004's FW, and DP-FW's iterates without noise); for dp-bcfw-secure's logistic
    glm path, "fw" or "pgd" (docs/vertical.md).

    ``label_party`` says who holds the labels y: ``"all"`` (paper 004's setting, the default of
    dp-bcfw, bcfw and dfw, the only one they support) or a party index (the default of
    dp-bcfw-secure is 0): the other parties never see y, only DP releases derived from it.
    Centralized algorithms (fw, dpfw) take none.

    ``backend`` ("inprocess", "flower-sim", "flower"; dp-bcfw, bcfw, dfw) runs the parties as
    Flower ClientApps (docs/flower.md), each enforcing its own budget on its own ledger;
    ``flower`` (a :class:`vflpriv.runtime.backends.FlowerOptions`) sets timeouts, party budgets and paths.
    The result's ``extra["flower"]`` holds the Flower byte counts and each party's spend.
    """
    cfg = _config(config, options)
    label_party = cfg.check_data(data)
    _check_outputs(cfg)
    cfg, rule, selection = _resolve_eta(cfg, data)
    sol = _dispatch(data, cfg, label_party)
    if hasattr(sol, "eta"):                 # (flower.spec_dir returns the written description)
        sol.eta, sol.eta_rule = None if cfg.eta == "auto" else float(cfg.eta), rule
        sol.selection = selection
        if selection and selection.get("seconds"):
            sol.seconds += selection["seconds"]      # the run's wall time includes choosing eta
    return sol


def _resolve_eta(cfg, data):
    """``(cfg, rule, selection)``: ``eta="auto"`` replaced by the public rule's radius
    (``vflpriv.vertical.scale``), with the rule's statement, or, for the non-private fw with
    the line-search step, by cross-validation around it (``vflpriv.optim.eta_cv``; its report
    is ``selection``); an explicit eta is kept (rule and selection None)."""
    if cfg.eta != "auto":
        from .scale import check_reach

        check_reach(cfg.eta, data.K, cfg.feature_bound, data)
        return cfg, None, None
    import dataclasses

    from .scale import auto_eta

    ridge = None if cfg.secure_path is None else cfg.secure_path.ridge_for(cfg)
    if ridge:
        # a path that fits by a ridge, not over l1 balls (the ssp path): "auto" keeps none
        return cfg, ridge, None
    eta, why = auto_eta(cfg.loss_fn.name, data.K, cfg.feature_bound, cfg.label_bound, data)
    if cfg.algorithm == "fw" and cfg.step == "line":
        from ..optim.eta_cv import FOLDS, GRID, cross_validate_eta

        eta0 = eta
        # a callback that can show a phase (the CLI's progress bar) shows the folds' fits
        phase = getattr(cfg.callback, "phase", None)
        with (phase("choosing eta (3-fold CV)", FOLDS * len(GRID), unit="fit") if phase
              else contextlib.nullcontext()) as tick:
            eta, report = cross_validate_eta(data.A, data.y, cfg.loss_fn, eta0,
                                             blocks=data.blocks, iterations=int(cfg.iterations),
                                             fit_intercept=cfg.fit_intercept,
                                             seed=0 if cfg.seed is None else int(cfg.seed),
                                             progress=tick)
        how = (f"kept eta_0 ({report['skipped']})" if report.get("skipped") else
               f"chose {eta / eta0:g} eta_0")
        top = 4 + int(report.get("extended") or 0)    # the grid, doubled while its end won
        why = (f"{report['method']} over eta_0 x 2^-2..2^{top}, eta_0 = {why}; {how}")
        return dataclasses.replace(cfg, eta=eta), why, report
    return dataclasses.replace(cfg, eta=eta), why, None


def _dispatch(data, cfg, label_party):
    """The run of ``cfg.algorithm`` once its options are settled."""
    if cfg.sketch != "identity" and cfg.loss_fn.name != "squared":
        warnings.warn(f"{cfg.loss_fn.name} loss with a {cfg.sketch} sketch: the partial gradients "
                      "are biased (see docs/vertical.md)", stacklevel=4)
    if cfg.algorithm == "dp-bcfw-secure":
        from .secure import solve_secure      # vflpriv.vertical.secure, imported when used

        return solve_secure(data, cfg, label_party)
    if cfg.algorithm in ("fw", "dpfw"):
        return _centralized(data, cfg)
    return _Run(data, cfg).solve()


def _config(config, options) -> VerticalConfig:
    """The run's config: ``config`` as given, or built from the keyword options."""
    if config is None:
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise TypeError(f"solve() got unexpected keyword argument(s) {', '.join(unknown)}")
        return VerticalConfig(**options)
    if options:
        raise TypeError(f"solve() takes config= or keyword options, not both (got config and "
                        f"{', '.join(sorted(options))}); use dataclasses.replace(config, ...)")
    if not isinstance(config, VerticalConfig):
        raise TypeError(f"config must be a VerticalConfig, got {type(config).__name__}")
    return config


def _check_outputs(cfg):
    """Before any work: a checkpoint over the ledger (or a FIFO, a directory) is refused."""
    ledger = cfg.ledger
    if cfg.checkpoint is not None:
        from ..outputs import check_outputs

        ledger_path = ledger.path if isinstance(ledger, Ledger) else ledger
        check_outputs({"checkpoint": cfg.checkpoint, "ledger": ledger_path})
    elif isinstance(ledger, (str, os.PathLike)):
        from ..outputs import check_output

        check_output(ledger, "ledger")


class _Run:
    """One run of dp-bcfw, bcfw or dfw: seeds, noise plan, budget, the rounds, the Solution.

    Each step fills in what the next one reads; ``solve`` runs them in order.  A resumed run
    (``cfg.resume``) takes its seed material, ledger and state from the checkpoint ``ck``."""

    def __init__(self, data, cfg: VerticalConfig):
        self.data, self.cfg = data, cfg
        self.T = int(cfg.iterations)
        self.smp = parse_sampling(cfg.sampling, data.blocks)
        self.noise_plan = self.budget = self.clip = self.led = self.run_dir = None
        self.ledger, self.seed = cfg.ledger, cfg.seed

    def solve(self) -> Solution:
        self.seeds()
        if self.cfg.private:
            self.plan_noise()
            self.open_budget()
        res, flower_info = self.rounds()
        if res is None:                   # flower.spec_dir: the description was written
            return flower_info
        return self.solution(res, flower_info)

    def seeds(self):
        """Seed material (the caller's seed, the checkpoint's, or 128 bits of OS entropy, never
        reported), the noise key of an unseeded run, and the public sketch."""
        cfg, data = self.cfg, self.data
        self.ck = ck = _resume_checkpoint(cfg.checkpoint, cfg.checkpoint_config(), cfg.seed,
                                          data) if cfg.resume else None
        self.noise_seed = ck["seed_material"] if ck else (
            cfg.seed if cfg.seed is not None else secrets.randbits(128))
        if ck:
            self.seed = ck["seed"]
        # Unseeded: the parties' noise gets its own 128 bits of OS entropy, unrelated to the
        # sketch and sampling seeds sent in Setup (on resume the noise generators' states are
        # restored from the checkpoint, so a fresh key changes nothing there).
        self.noise_key = None if self.seed is not None else secrets.randbits(128)
        self.sk_seed = _seeds(self.noise_seed)[0]
        self.sk = Sketch(cfg.sketch, data.n, cfg.sketch_dim, self.sk_seed)
        # B_b, the intercept's public range (None: no intercept): vflpriv.optim.intercept
        from ..optim.intercept import bound as intercept_range

        self.intercept_bound = intercept_range(cfg.loss_fn, cfg.label_bound) \
            if cfg.fit_intercept else None

    def plan_noise(self):
        """Sensitivities from the declared bounds, and the noise: calibrated by the accountant,
        or paper 004's closed forms (refused, before any release, if they overspend)."""
        cfg, data, T, sk = self.cfg, self.data, self.T, self.sk
        eps, delta, eta = cfg.epsilon, cfg.delta, float(cfg.eta)
        self.sens = sens = P.sensitivities(cfg.loss_fn, cfg.feature_bound, cfg.label_bound,
                                           data.K * eta, data.n, sk.max_column_norm(),
                                           cfg.derivative_clip, self.intercept_bound)
        parties = self.smp.max_parties
        if cfg.calibration == "accountant":
            plan = P.calibrate_accountant(cfg.rnm, sens, eps, delta, T, parties, cfg.split,
                                          cfg.accountant)
        else:
            plan = P.calibrate_paper(cfg.rnm, sens, eps, delta, T, parties, eta, data.n,
                                     float(cfg.feature_bound), sk.spectral_norm(), cfg.accountant)
            if plan.epsilon > eps:
                raise InputError(
                    f"the paper's closed-form noise (index scale {plan.index_scale:.4g}, "
                    f"feature sigma {plan.feature_sigma:.4g}) spends epsilon="
                    f"{plan.epsilon:.4g} > target {eps:g} at delta={delta:g} under the "
                    f"{cfg.accountant} accountant; nothing was released (use "
                    "calibration='accountant')")
        plan.details.update(sens_index=sens.index, sens_feature=sens.feature,
                            z_bound=sens.z_bound, derivative_bound=sens.derivative_bound)
        if sens.intercept is not None:
            plan.details.update(sens_intercept=sens.intercept,
                                intercept_sigma=P.intercept_sigma(plan.index_scale, sens),
                                intercept_bound=sens.intercept_bound)
        self.noise_plan = plan

    def open_ledger(self):
        """The run's ledger: the checkpoint's on resume (it must exist), a file in the run
        folder for a Flower backend with none given, else ``cfg.ledger`` (None: in memory)."""
        cfg, ck = self.cfg, self.ck
        if ck:
            ledger = self.ledger if self.ledger is not None else ck["ledger_path"]
            if not isinstance(ledger, Ledger) and not os.path.isfile(ledger):
                # never create an empty ledger for a run whose releases are recorded elsewhere
                raise InputError(f"resume: the ledger {str(ledger)!r} of the checkpoint's run "
                                 "does not exist")
            self.ledger = ledger
            led = Ledger(ledger, budget={"epsilon": cfg.epsilon, "delta": cfg.delta,
                                         "accountant": cfg.accountant},
                         run_id=ck["run_id"]) if not isinstance(ledger, Ledger) else ledger
            led.take_over_reservation()      # the killed run's reservation ends with this run
            return led
        if cfg.backend != "inprocess" and self.ledger is None:
            # the ServerApp may be another process: its ledger must be a file
            self.run_dir = _flower_run_dir(cfg.flower)
            self.ledger = os.path.join(self.run_dir, "server.ledger")
        return _open_ledger(self.ledger, cfg.epsilon, cfg.delta, cfg.accountant)

    def open_budget(self):
        """The budget filter over the ledger, governed by the ledger's header budget; the whole
        planned spend is checked against it (and reserved) before the first release."""
        cfg, ck, sens, plan = self.cfg, self.ck, self.sens, self.noise_plan
        self.led = led = self.open_ledger()
        if cfg.checkpoint is not None and led.path is None:
            raise InputError("a private run with a checkpoint needs a ledger file (ledger=PATH, "
                             "--ledger): resuming must not spend again what an in-memory ledger "
                             "forgot")
        # The ledger's header budget governs (a run cannot raise it by asking for more).
        b_eps, b_delta = led.governing_budget(cfg.epsilon, cfg.delta)
        budget = BudgetFilter(led, b_eps, b_delta, accountant=cfg.accountant)
        pending = _pending_records(led, ck, cfg.checkpoint) if ck else []
        t0 = int(ck["state"]["t"]) if ck else 0
        parties, T = self.smp.max_parties, self.T
        recal = None if ck or cfg.calibration != "accountant" else (
            lambda e: P.calibrate_accountant(cfg.rnm, sens, e, cfg.delta, T, parties, cfg.split,
                                             cfg.accountant))
        P.check_planned_spend(budget, plan, sens, T, t0, parties, pending, cfg.epsilon, recal)
        if not ck:
            self.outlook()
        self.budget = ReplayFilter(budget, pending) if ck else budget
        self.clip = (float(cfg.feature_bound), float(cfg.label_bound), sens.z_bound,
                     sens.derivative_bound)

    def outlook(self):
        """Before anything is charged (after the ledger and the plan are checked, so bad input
        stays one line): say so when the planned noise leaves nothing to learn."""
        cfg, plan = self.cfg, self.noise_plan
        outlook = P.learning_outlook(plan, self.sens, self.smp.max_parties, float(cfg.eta),
                                     self.sk.max_column_norm(), float(cfg.feature_bound),
                                     float(cfg.label_bound))
        plan.details["outlook"] = outlook
        if outlook["hopeless"]:
            warnings.warn("DP-BCFW-AS is expected to learn little with this noise: "
                          + "; ".join(outlook["reasons"]) + ". dp-bcfw-secure releases "
                          "aggregates instead (docs/vertical_results.md, 'Where DP-BCFW-AS "
                          "learns')",
                          P.HopelessNoiseWarning, stacklevel=7)   # the caller of solve

    def checkpointer(self):
        """The per-round checkpoint writer (None without ``cfg.checkpoint``)."""
        cfg, led = self.cfg, self.led
        if cfg.checkpoint is None:
            return None
        meta = {"config": cfg.checkpoint_config(), "seed": self.seed,
                "seed_material": self.noise_seed, "data": data_fingerprint(self.data),
                "extra": cfg.checkpoint_extra, "run_id": None if led is None else led.run_id,
                "ledger_path": None if led is None else os.path.abspath(led.path)}
        return Checkpointer(cfg.checkpoint, cfg.checkpoint_every, self.T, meta, self.budget)

    def rounds(self):
        """The T rounds, in process or on Flower; ``(RunResult, flower info or None)``."""
        cfg, data, T, ck = self.cfg, self.data, self.T, self.ck
        algorithm = "dfw" if cfg.algorithm == "dfw" else "bcfw"
        on_round = self.checkpointer()
        flower_info = None
        if cfg.backend != "inprocess":
            res, flower_info = _run_flower(
                cfg.backend, cfg.flower, self.run_dir, data, cfg.loss_fn, float(cfg.eta), T,
                cfg.private,
                dict(algorithm=algorithm, sampling=self.smp, sketch=cfg.sketch,
                     sketch_dim=cfg.sketch_dim, seed=self.noise_seed, noise_plan=self.noise_plan,
                     clip=self.clip, release_cache=cfg.release_cache,
                     intercept_bound=self.intercept_bound),
                self.led, self.budget, cfg.accountant, cfg.epsilon, cfg.delta,
                None if self.seed is None else _seeds(self.noise_seed)[2], cfg.callback)
            if res is None:
                return None, flower_info
            if cfg.private:
                self.led = flower_info.pop("ledger")
                self.budget = BudgetFilter(self.led, self.budget.epsilon, self.budget.delta,
                                           accountant=cfg.accountant)
        else:
            res = run_vertical(data, cfg.loss_fn, float(cfg.eta), T, algorithm=algorithm,
                               sampling=self.smp, sketch=cfg.sketch, sketch_dim=cfg.sketch_dim,
                               seed=self.noise_seed, noise_key=self.noise_key,
                               noise_plan=self.noise_plan, budget_filter=self.budget,
                               clip=self.clip, release_cache=cfg.release_cache,
                               intercept_bound=self.intercept_bound, callback=cfg.callback,
                               state=(ck["state"], ck["arrays"]) if ck else None,
                               on_round=on_round)
        if ck and cfg.private and self.budget.pending:
            raise InputError(f"the ledger holds {len(self.budget.pending)} records of this run "
                             f"beyond its {T} rounds; it does not belong to this checkpoint")
        return res, flower_info

    def solution(self, res, flower_info) -> Solution:
        """The Solution: objective, bytes per party, and the spend as the accountants see it."""
        cfg, data, led, budget = self.cfg, self.data, self.led, self.budget
        sol = Solution(algorithm=cfg.algorithm, x=res.x, objective=res.objective,
                       initial_objective=res.initial_objective, iterations=self.T,
                       seconds=res.seconds, K=data.K, n=data.n, seed=self.seed,
                       uplink=res.uplink(), uplink_framed=res.uplink(True),
                       downlink=res.downlink(), downlink_framed=res.downlink(True),
                       uplink_naive=res.naive_uplink,
                       uplink_full_gradient=res.full_gradient_uplink, released=res.released,
                       meter=res.meter, noise_plan=self.noise_plan, ledger=led,
                       extra={"p_min": res.p_min, "sketch": cfg.sketch, "m": res.m,
                              "sketch_seed": self.sk_seed, "selections": res.selections,
                              "backend": cfg.backend, "flower": flower_info},
                       intercept=res.intercept)
        if cfg.private:
            values, best = _privacy_report(led.event(), cfg.delta, cfg.report_accountants)
            sol.privacy = {"epsilon_spent": values, "best_accountant": best, "delta": cfg.delta,
                           "target_epsilon": cfg.epsilon, "budget_accountant": cfg.accountant,
                           "budget": {"epsilon": budget.epsilon, "delta": budget.delta},
                           "spent_by_budget_accountant": budget.spent(),
                           "calibration": self.noise_plan.to_dict(),
                           "releases": len(led.records), "neighboring": "replace_one"}
        if cfg.reference:
            sol.reference = reference_for(data, cfg)
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
        b = 0.0 if r.intercepts is None else float(r.intercepts[t])
        out.append(float(loss.objective(None, None, data.y, Ax=z + b)))
    return out


def _centralized(data, cfg):
    """fw (Frank-Wolfe) or dpfw (DP-FW, every selection charged to the budget) by one curator."""
    loss, eta, T = cfg.loss_fn, cfg.eta, int(cfg.iterations)
    t0 = time.perf_counter()
    if cfg.algorithm == "fw":
        r = frank_wolfe(data.A, data.y, loss, eta, blocks=data.blocks, iterations=T,
                        fit_intercept=cfg.fit_intercept, step=cfg.step, callback=cfg.callback)
        privacy = None
        led = None
    else:
        eps, delta, accountant = cfg.epsilon, cfg.delta, cfg.accountant
        led = _open_ledger(cfg.ledger, eps, delta, accountant)
        b_eps, b_delta = led.governing_budget(eps, delta)
        budget = BudgetFilter(led, b_eps, b_delta, accountant=accountant)
        r = dp_frank_wolfe(data.A, data.y, loss, eta, iterations=T, feature_bound=cfg.feature_bound,
                           label_bound=cfg.label_bound, epsilon=eps, delta=delta,
                           blocks=data.blocks, accountant=accountant, budget_filter=budget,
                           neighboring="replace_one", rng=cfg.seed,
                           derivative_clip=cfg.derivative_clip, fit_intercept=cfg.fit_intercept)
        values, best = _privacy_report(led.event(), delta, cfg.report_accountants)
        privacy = {"epsilon_spent": values, "best_accountant": best, "delta": delta,
                   "target_epsilon": eps, "budget_accountant": accountant,
                   "calibration": {k: v for k, v in (r.privacy or {}).items() if k != "event"},
                   "releases": len(led.records), "neighboring": "replace_one"}
    # DP-FW records f on the clipped data; replay its iterates to report f on the data as given,
    # like every other algorithm here (the vertices and steps are in the result).
    objective = _replay_objective(data, loss, r, float(eta)) if cfg.algorithm == "dpfw" else \
        [float(v) for v in r.objective[1:]]
    sol = Solution(algorithm=cfg.algorithm, x=r.x, objective=objective,
                   initial_objective=float(loss.objective(None, None, data.y,
                                                          Ax=np.zeros(data.n))), iterations=T,
                   seconds=time.perf_counter() - t0, K=data.K, n=data.n, seed=cfg.seed,
                   privacy=privacy, ledger=led,
                   intercept=float(r.intercept) if cfg.fit_intercept else None)
    if cfg.reference:
        sol.reference = reference_for(data, cfg)
    return sol


def calibration_comparison(data, *, loss="squared", eta=1.0, iterations=100, epsilon=1.0,
                           delta=1e-5, rnm="laplace", sketch="identity", sketch_dim=None,
                           split=0.5, feature_bound=None, label_bound=None, accountant="rdp",
                           sampling="elementary", seed=0, derivative_clip=None, sketch_seed=None,
                           fit_intercept=False, **_ignored) -> dict:
    """Both calibrations of the same run side by side: noise scales and what each really spends.

    ``accountant``: noise solved so that the worst-case plan meets (epsilon, delta) exactly;
    ``paper``: paper 004's closed forms, accounted by the same accountant (and by every accountant
    in ``REPORT_ACCOUNTANTS`` but PLD, to keep this quick).  ``sketch_seed`` (a run's
    ``Solution.extra["sketch_seed"]``, public: it is sent in Setup) compares on that run's sketch;
    otherwise the sketch is derived from ``seed`` as :func:`solve` derives it.
    ``fit_intercept``: the plans hold the intercept's releases, as the run's (sensitivity.md 3.1).
    """
    from ..optim.intercept import bound as intercept_range

    loss = get_loss(loss)
    rnm = "laplace" if rnm is None else rnm
    split = 0.5 if split is None else split
    epsilon = check_epsilon(epsilon, delta)
    smp = parse_sampling(sampling, data.blocks)
    sk = Sketch(sketch, data.n, sketch_dim,
                _seeds(seed)[0] if sketch_seed is None else int(sketch_seed))
    sens = P.sensitivities(loss, feature_bound, label_bound, data.K * float(eta), data.n,
                           sk.max_column_norm(), derivative_clip,
                           intercept_range(loss, label_bound) if fit_intercept else None)
    T, K = int(iterations), smp.max_parties
    out = {}
    for name, plan in (
            ("accountant", P.calibrate_accountant(rnm, sens, epsilon, delta, T, K, split, accountant)),
            ("paper", P.calibrate_paper(rnm, sens, epsilon, delta, T, K, float(eta), data.n,
                                        float(feature_bound), sk.spectral_norm(), accountant))):
        values, best = _privacy_report(plan.event, delta, ("basic", "advanced", "optimal", "rdp"))
        out[name] = dict(plan.to_dict(), epsilon_by_accountant=values, best_accountant=best)
    return out
