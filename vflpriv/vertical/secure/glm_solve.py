"""``solve(..., algorithm="dp-bcfw-secure", loss="logistic")``: labels, calibration, ledger and
the Solution of the GLM path (``glm.py``)."""
from __future__ import annotations

import math

import numpy as np

from ...errors import InputError
from . import privacy as SP
from . import resume as SC
from .fourier import SigmoidSeries
from .glm import glm_sensitivity, round_event, run_secure_glm


def check_binary_labels(y):
    """The logistic loss takes labels in {-1, +1} (the CLI and the estimator map two classes)."""
    vals = np.unique(np.asarray(y, dtype=np.float64))
    if not set(vals.tolist()) <= {-1.0, 1.0}:
        shown = ", ".join(f"{v:g}" for v in vals[:5]) + (", ..." if vals.size > 5 else "")
        raise InputError(f"the logistic loss needs binary labels in {{-1, +1}}, got values "
                         f"{shown}")


def calibrate_sigma(epsilon, delta, T, sens, accountant):
    """sigma with T Gaussian rounds of sensitivity ``sens`` at (epsilon, delta), by the
    accountant (conservative: its epsilon of the returned sigma is <= the target)."""
    from accounting import REPLACE_ONE, Gaussian, SelfComposed, calibrate

    res = calibrate(lambda s: SelfComposed(Gaussian(s, sens, neighboring=REPLACE_ONE), T),
                    epsilon, delta, guess=sens * math.sqrt(T) / epsilon, accountant=accountant,
                    decreasing=True)
    return res.value, res.epsilon


def solve_glm(data, *, loss, eta, iterations, epsilon, delta, feature_bound, label_bound,
              accountant, ledger, seed, reference, callback, report_accountants, row_clip,
              label_party, series=None, row_clips=None, defaults=(), checkpoint=None, ck=None,
              config=None, checkpoint_every=1, checkpoint_extra=None):
    """The logistic path; ``checkpoint``/``ck`` (a checkpoint read by ``resume.read_resume``)
    as in ``solve.solve_secure``: a checkpoint before anything is charged, after the setup and
    after every ``checkpoint_every``-th round; a resume replays what was charged after it."""
    from accounting import BudgetFilter, SelfComposed

    from ...optim import reference_optimum
    from ..solution import Solution, privacy_report
    from ..privacy import NoisePlan

    series = series or SigmoidSeries()
    check_binary_labels(data.y)
    K, n, T = data.K, data.n, int(iterations)
    if K < 2:
        raise InputError(f"dp-bcfw-secure needs at least 2 parties, got {K}")
    private = math.isfinite(epsilon)
    sigma, clips, plan, led, budget = 0.0, None, None, None, None
    D = series.derivative_bound
    if private:
        SP.P.check_bound("feature_bound", feature_bound)
        SP.P.check_bound("label_bound", label_bound)
        if row_clip is not None:
            SP.check_row_clip(row_clip)
        clips = (list(row_clips) if row_clips is not None
                 else SP.row_clips(feature_bound, row_clip, [len(b) for b in data.blocks]))
        sens = glm_sensitivity(D, clips)
        sigma, eps_plan = calibrate_sigma(epsilon, delta, T, sens, accountant)
        ev = SelfComposed(round_event(sigma, D, clips), T)
        plan = NoisePlan("accountant", "gaussian-scores", 0.0, sigma, eps_plan, delta,
                         accountant, ev,
                         {"algorithm": "dp-bcfw-secure", "loss": "logistic",
                          "sens_scores": sens, "derivative_bound": D, "row_clips": clips,
                          "label_party": label_party,
                          "score_noise_std": sigma / n,
                          "selection": "argmax of Gaussian-noised scores (post-processing)"})
        led = SC.open_ledger_for(ledger, ck, checkpoint, epsilon, delta, accountant)
        b_eps, b_delta = led.governing_budget(epsilon, delta)
        budget = BudgetFilter(led, b_eps, b_delta, accountant=accountant)
        # on resume: the rounds still to run (every round is one release of the same event)
        left = None
        if ck:
            t0 = 0 if ck["state"]["stage"] == "start" else int(ck["state"]["t"])
            left = SelfComposed(round_event(sigma, D, clips), T - t0) if t0 < T else None
        budget = SC.check_and_replay(budget, led, ck, checkpoint, left, ev,
                                     advice=lambda: "a smaller epsilon, fewer iterations or a "
                                                    "fresh ledger fits")
    noise_key, noise_seed = SC.seeds(ck, seed)
    on_round = SC.checkpointer(checkpoint, checkpoint_every, T, config=config, seed=seed,
                               noise_seed=noise_seed, noise_key=noise_key, data=data,
                               extra=checkpoint_extra, led=led, budget=budget)
    res = run_secure_glm(data, loss, eta=float(eta), iterations=T, label_party=label_party,
                         private=private, series=series, sigma=sigma, budget_filter=budget,
                         feature_bound=feature_bound, clips=clips, seed=noise_seed,
                         noise_key=noise_key, callback=callback, on_round=on_round,
                         state=(ck["state"], ck["arrays"]) if ck else None)
    SC.check_all_replayed(budget, ck, T)
    m = res.meter
    sol = Solution(algorithm="dp-bcfw-secure", x=res.x, objective=res.objective,
                   initial_objective=res.initial_objective, iterations=T, seconds=res.seconds,
                   K=K, n=n, seed=seed, uplink=[m.total(k, "uplink") for k in range(K)],
                   uplink_framed=[m.total(k, "uplink", True) for k in range(K)],
                   downlink=[m.total(k, "downlink") for k in range(K)],
                   downlink_framed=[m.total(k, "downlink", True) for k in range(K)],
                   # naive: each party sends its partial margins A_k x_k (8 n bytes) each round
                   uplink_naive=[8 * n * T] * K,
                   uplink_full_gradient=[8 * len(b) * T for b in data.blocks],
                   released=[0] * K, meter=m, noise_plan=plan, ledger=led,
                   extra={"selections": res.selections, "secure_products": 2 * K * T,
                          "frac_bits": {"feature": res.ring.fa, "margin": res.ring.fm,
                                        "unit_factor": res.ring.fc,
                                        "coefficient": res.ring.h},
                          "feature_cap": None, "row_clips": clips,
                          "setup_seconds": res.setup_seconds,
                          "party_ledgers": res.extra["party_ledgers"],
                          "bytes_by_type": {k: list(v) for k, v in m.by_type.items()},
                          "label_party": label_party, "helper_party": res.extra["helper_party"],
                          "path": "glm", "sigmoid": series.describe(),
                          "defaults": list(defaults),
                          "backend": "inprocess", "flower": None})
    if private:
        values, best = privacy_report(led.event(), delta, report_accountants)
        sol.privacy = {"epsilon_spent": values, "best_accountant": best, "delta": delta,
                       "target_epsilon": epsilon, "budget_accountant": accountant,
                       "spent_by_budget_accountant": budget.spent(),
                       "calibration": plan.to_dict(), "releases": len(led.records),
                       "neighboring": "replace_one"}
    if reference:
        sol.reference = reference_optimum(data.A, data.y, loss, blocks=data.blocks,
                                          eta=float(eta), on_failure="flag")
    return sol
