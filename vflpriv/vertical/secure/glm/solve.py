"""``solve(..., algorithm="dp-bcfw-secure", loss="logistic")``: labels, calibration, ledger and
the Solution of the GLM path (``glm/party.py``)."""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ....errors import InputError
from .. import privacy as SP
from ..checkpoints import resume as SC
from ..mpc.fourier import SigmoidSeries
from .party import glm_sensitivity, round_event
from .loop import run_secure_glm
from ..run import (SecureRun, finish, meter_totals, open_budget, seeds_and_checkpointer,
                   server_accounts, server_ledger)


def check_binary_labels(y):
    """The logistic loss takes labels in {-1, +1} (the CLI and the estimator map two classes)."""
    vals = np.unique(np.asarray(y, dtype=np.float64))
    if not set(vals.tolist()) <= {-1.0, 1.0}:
        shown = ", ".join(f"{v:g}" for v in vals[:5]) + (", ..." if vals.size > 5 else "")
        raise InputError(f"the logistic loss needs binary labels in {{-1, +1}}, got values "
                         f"{shown}")


def calibrate_sigma(epsilon, delta, T, sens, accountant, make_round):
    """sigma with T rounds of ``make_round(sigma)`` (one round's release, sensitivity ``sens``,
    which seeds the search) at (epsilon, delta), by the accountant (conservative: its epsilon of
    the returned sigma is <= the target)."""
    from accounting import SelfComposed, calibrate

    res = calibrate(lambda s: SelfComposed(make_round(s), T),
                    epsilon, delta, guess=sens * math.sqrt(T) / epsilon, accountant=accountant,
                    decreasing=True)
    return res.value, res.epsilon


def check_margin_range(data, cfg, series):
    """Refuse, before anything is read from a ledger or spent, an eta whose margins can leave
    the range on which the sigmoid series keeps the sign of m (|m| <= P, its half-period;
    issue 32): |a_r^T x + b| <= K B_a eta + B_b, B_a the declared bound (a non-private run
    without one: max |a_ij| of its own data), B_b the intercept's range (0 without one).  Beyond
    P the series wraps around and the model can end worse than x = 0."""
    from ....optim.intercept import INTERCEPT_BOUND

    from ....optim._checks import max_abs

    Ba = float(cfg.feature_bound) if cfg.feature_bound is not None else max_abs(data.A)
    Bb = INTERCEPT_BOUND if cfg.fit_intercept else 0.0
    P = series.half_period
    reach = data.K * Ba * float(cfg.eta) + Bb
    if reach > P * (1 + 1e-12) and Ba > 0:
        top = (P - Bb) / (data.K * Ba)
        raise InputError(f"--eta {float(cfg.eta):g}: the logistic margins can reach K B_a eta"
                         f"{' + 8 (intercept)' if Bb else ''} = {reach:.4g} > {P:g}, the range "
                         f"on which the secure sigmoid keeps the sign of the margin; use --eta "
                         f"<= {top:.4g} (K={data.K}, B_a={Ba:g}) or --eta auto")


class _Noise(NamedTuple):
    """The noise of a private logistic run: its plan, sigma, the row clips C_k and how many
    scores carry two holders' noise."""
    plan: object
    sigma: float
    clips: list
    summed: int = 0


def solve_glm(data, run: SecureRun, series=None):
    """The logistic path of dp-bcfw-secure for the run ``solve.settle`` settled: the noise
    (private runs), the rounds (``glm_run.run_secure_glm``) and the Solution.  ``series``: the
    sigmoid's Fourier series (``fourier.SigmoidSeries()`` by default).  Checkpoints as in the
    least-squares path: one before anything is charged, after the setup and after every
    ``checkpoint_every``-th round; a resume (``run.ck``) replays what was charged after it."""
    if run.label_party is None:
        raise InputError("dp-bcfw-secure with the logistic loss keeps the label at one party "
                         "(label_party 0..K-1), not 'all'")
    series = series or SigmoidSeries()
    check_binary_labels(data.y)
    if data.K < 2:
        raise InputError(f"dp-bcfw-secure needs at least 2 parties, got {data.K}")
    check_margin_range(data, run.cfg, series)
    from .party import helper_of

    helper_of(run.label_party, data.K, run.cfg.helper_party)     # refused before any file
    noise = _plan_noise(data, run, series) if run.private else None
    led, budget, run_dir = _open_budget(run, noise, series) if run.private else (None, None, None)
    res, flower_info, led, budget = _rounds(data, run, series, noise, led, budget, run_dir)
    if res is None:                  # flower.spec_dir: the description was written
        return flower_info
    return _solution(data, run, series, res, noise, led, budget, flower_info)


def _plan_noise(data, run: SecureRun, series) -> _Noise:
    """sigma of the Gaussian on each round's scores, by the accountant for T rounds of the
    derivative's sensitivity under the row clips C_k (docs/sensitivity.md 5.1-5.3).  The
    declared bounds and the row clip were checked by ``solve.settle``."""
    from accounting import SelfComposed

    from ...privacy import NoisePlan

    cfg, T, D = run.cfg, run.T, series.derivative_bound
    clips = (list(run.row_clips) if run.row_clips is not None
             else SP.row_clips(cfg.feature_bound, cfg.row_clip, [len(b) for b in data.blocks]))
    sens = glm_sensitivity(D, clips, cfg.fit_intercept)
    summed = _summed(data, run)
    sigma, eps_plan = calibrate_sigma(
        cfg.epsilon, cfg.delta, T, sens, cfg.accountant,
        lambda s: round_event(s, D, clips, cfg.fit_intercept, summed,
                              plan_lattice(data, run, series, s)))
    ev = SelfComposed(round_event(sigma, D, clips, cfg.fit_intercept, summed,
                                  plan_lattice(data, run, series, sigma)), T)
    plan = NoisePlan("accountant", "discrete-gaussian-scores", 0.0, sigma, eps_plan, cfg.delta,
                     cfg.accountant, ev,
                     {"algorithm": "dp-bcfw-secure", "loss": "logistic",
                      "sens_scores": sens, "derivative_bound": D, "row_clips": clips,
                      "label_party": run.label_party,
                      "intercept": bool(cfg.fit_intercept),
                      "score_noise_std": sigma / data.n,
                      "summed_scores": summed,
                      "selection": "argmax of Gaussian-noised scores (post-processing)"})
    return _Noise(plan, sigma, clips, summed)


def plan_lattice(data, run, series, sigma):
    """One round's ring lattice at noise ``sigma`` (``party.round_lattice`` of the ring the run
    would use at that sigma, ``ring_plan`` from the declared bound); None where no ring holds
    that sigma (then the Renyi charge only: a calibration may probe such a sigma)."""
    from .party import ring_plan, round_lattice

    try:
        ring = ring_plan(data.n, float(run.cfg.feature_bound), sigma, series)
    except InputError:
        return None
    return round_lattice(ring, sum(len(b) for b in data.blocks), bool(run.cfg.fit_intercept))


def _lattice_of(event):
    """The ``(resolution, coordinates)`` a round event states (None: none)."""
    return None if event.resolution is None else (event.resolution, event.coordinates)


def _summed(data, run):
    """The scores that carry two holders' noise (``glm.summed_dimension``)."""
    from .party import helper_of, summed_dimension

    H = helper_of(run.label_party, data.K, run.cfg.helper_party)
    return summed_dimension([len(b) for b in data.blocks], run.label_party, H)


def _open_budget(run: SecureRun, noise: _Noise, series):
    """The ledger and budget filter (``run.open_budget``), the whole plan checked against
    them; on resume, the rounds still to run (every round is one release of the same event).
    ``(ledger, filter, the Flower run folder holding the ledger when the run made one)``: on a
    remote backend the ServerApp may be another process, so its ledger must be a file."""
    from accounting import SelfComposed

    T, D = run.T, series.derivative_bound
    ledger, run_dir = server_ledger(run)

    def remaining():
        t0 = 0 if run.ck["state"]["stage"] == "start" else int(run.ck["state"]["t"])
        return SelfComposed(round_event(noise.sigma, D, noise.clips, run.cfg.fit_intercept,
                                        noise.summed, _lattice_of(noise.plan.event.event)),
                            T - t0) if t0 < T else None

    return (*open_budget(run, ledger, noise.plan.event, remaining), run_dir)


def _rounds(data, run: SecureRun, series, noise, led, budget, run_dir):
    """The T rounds: in process (``glm_run.run_secure_glm``), checkpointed, on resume from the
    checkpoint's state with the charges made after it replayed; or on a remote backend
    (:func:`_on_flower`).  ``(GlmResult or None when a description was written, flower info or
    None, the ledger and filter as the run left them)``."""
    cfg, ck = run.cfg, run.ck
    noise_key, noise_seed, on_round = seeds_and_checkpointer(run, data, led, budget)
    kwargs = dict(eta=float(cfg.eta), iterations=run.T, label_party=run.label_party,
                  private=run.private, sigma=0.0 if noise is None else noise.sigma,
                  feature_bound=cfg.feature_bound,
                  clips=None if noise is None else noise.clips,
                  fit_intercept=bool(cfg.fit_intercept), helper_party=cfg.helper_party,
                  step=cfg.step or "fw")
    if cfg.backend != "inprocess":
        res, info = _on_flower(data, run, series, kwargs, led, budget, run_dir, noise_seed,
                               on_round)
        if res is not None and run.private:
            led, budget = server_accounts(run, info, budget)
        return res, info, led, budget
    res = run_secure_glm(data, run.loss, series=series, budget_filter=budget, seed=noise_seed,
                         noise_key=noise_key, callback=cfg.callback, on_round=on_round,
                         state=(ck["state"], ck["arrays"]) if ck else None, **kwargs)
    SC.check_all_replayed(budget, ck, run.T)
    return res, None, led, budget


def _on_flower(data, run: SecureRun, series, kwargs, led, budget, run_dir, noise_seed,
               checkpointer=None):
    """The logistic path on a remote backend (its roles: :mod:`.glm_remote`), as a GlmResult
    (None when ``flower.spec_dir`` asked for a description instead) and the flower info.
    ``checkpointer`` (``resume.checkpointer``'s): its path, interval and metadata go to the
    ServerApp, which writes the server's checkpoints; each party saves its own state."""
    from ....optim._checks import max_abs
    from ...engine import _seeds
    from ...hosted import run_hosted
    from . import roles as GR
    from .party import helper_of, ring_plan
    from .loop import GlmResult
    from ..checkpoints.saves import checkpoint_spec

    cfg, backend = run.cfg, run.cfg.backend
    Ba = float(cfg.feature_bound) if run.private else (max_abs(data.A) or 1.0)
    ring = ring_plan(data.n, Ba, kwargs["sigma"], series)
    glm_kwargs = dict(kwargs, loss=run.loss.name, ring=[ring.fa, ring.fm, ring.fc, ring.h],
                      series=[series.accurate, series.period_bits, series.terms,
                              series.coef_bits],
                      helper_party=helper_of(run.label_party, data.K, cfg.helper_party))

    ck = checkpoint_spec(checkpointer)

    def runner(**kw):
        out, info = GR.run(backend, data, run.loss, glm_kwargs=glm_kwargs, checkpoint=ck,
                           resume=bool(run.ck), **kw)
        if out is None or "x" not in out:          # a description written, or no result
            return None, info
        res = GlmResult(x=out["x"], intercept=out["intercept"], objective=out["objective"],
                        initial_objective=out["initial_objective"], meter=out["meter"],
                        seconds=0.0, selections=out["selections"],
                        peer_bytes=out["peer_bytes"], setup_seconds=out["setup_seconds"],
                        ring=ring, extra={"party_ledgers": info.get("party_ledgers"),
                                          "helper_party": out["helper_party"]})
        return res, info

    return run_hosted(backend, cfg.flower, run_dir, data, None, kwargs["eta"], run.T,
                      run.private, None, led, budget, cfg.accountant, cfg.epsilon, cfg.delta,
                      None if run.seed is None else _seeds(noise_seed)[2], cfg.callback,
                      runner=runner)


def _solution(data, run: SecureRun, series, res, noise, led, budget, flower_info=None):
    """The Solution: x, the objective history, bytes per party (and what sending the partial
    margins, or full gradients, would have cost), the ring's scales and the privacy report."""
    from ...solution import Solution

    K, n, T, m = data.K, data.n, run.T, res.meter
    plan, clips = (None, None) if noise is None else (noise.plan, noise.clips)
    sol = Solution(algorithm="dp-bcfw-secure", x=res.x, objective=res.objective,
                   initial_objective=res.initial_objective, iterations=T, seconds=res.seconds,
                   K=K, n=n, seed=run.seed, **meter_totals(m, K),
                   # naive: each party sends its partial margins A_k x_k (8 n bytes) each round
                   uplink_naive=[8 * n * T] * K,
                   uplink_full_gradient=[8 * len(b) * T for b in data.blocks],
                   released=[0] * K, meter=m, noise_plan=plan, ledger=led,
                   intercept=res.intercept,
                   extra={"selections": res.selections, "secure_products": 2 * K * T,
                          "frac_bits": {"feature": res.ring.fa, "margin": res.ring.fm,
                                        "unit_factor": res.ring.fc,
                                        "coefficient": res.ring.h},
                          "feature_cap": None, "row_clips": clips,
                          "setup_seconds": res.setup_seconds,
                          "party_ledgers": res.extra["party_ledgers"],
                          "bytes_by_type": {k: list(v) for k, v in m.by_type.items()},
                          "label_party": run.label_party,
                          "helper_party": res.extra["helper_party"],
                          "intercept_fitted": bool(run.cfg.fit_intercept),
                          "path": "glm", "sigmoid": series.describe(),
                          "step": res.extra.get("step", "fw"),
                          "step_size": res.extra.get("step_size"),
                          "defaults": list(run.defaults),
                          "backend": run.cfg.backend, "flower": flower_info})
    return finish(sol, data, run, led, budget, plan)
