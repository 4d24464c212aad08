"""``solve(..., algorithm="dp-bcfw-secure")``: checks, calibration, ledger, and the Solution.

:func:`solve_secure` settles the run (:func:`settle`: the checks of the options, the defaults,
the checkpoint) and runs the least-squares path here (cross-products released once per new
feature; docs/sensitivity.md section 4, docs/vertical.md "dp-bcfw-secure") or the logistic one
(``glm_solve.py``; derivatives under secret sharing every round, section 5).
"""
from __future__ import annotations

import os
from typing import NamedTuple

import numpy as np

from ...errors import InputError
from ..checkpoint import check_every
from . import privacy as SP
from . import resume as SC
from .loop import run_secure
from .ring import frac_bits
from .run import (SecureRun, finish, meter_totals, open_budget, seeds_and_checkpointer,
                  server_accounts)

#: noise beyond this many standard deviations is treated as impossible when sizing the ring
#: (probability < 1e-300 per entry); a larger value would only wrap, a post-processing
_NOISE_RANGE = 40.0


class _Plan(NamedTuple):
    """The noise of a private least-squares run and what it was calibrated from."""
    noise_plan: object
    sens: object
    label_rounds: int
    clips: list


class _Accounts(NamedTuple):
    """The server's ledger, the budget filter over it, and the Flower run folder holding the
    ledger when the run made one (all None for a non-private run)."""
    led: object = None
    budget: object = None
    run_dir: str | None = None


def solve_secure(data, cfg, label_party):
    """dp-bcfw-secure on ``data`` (a VerticalData) as ``cfg`` (a VerticalConfig) says, with the
    labels at ``label_party`` as ``cfg.check_data`` resolved it (None: every party).  Returns
    the Solution, or with ``flower.spec_dir`` the written description's info."""
    path = cfg.resolved_logistic_path
    if path == "ssp":
        from .ssp_run import check_options

        check_options(cfg)         # before settle reads a checkpoint or the radius
    run = settle(data, cfg, cfg.loss_fn, label_party)
    if run.loss.name == "logistic" and path == "ssp":
        from .ssp_run import solve_ssp

        return solve_ssp(data, run)
    if run.loss.name == "logistic":
        return _logistic(data, run)
    return _least_squares(data, run)


def settle(data, cfg, loss, label_party) -> SecureRun:
    """The run once settled: its options checked, the ones left at None chosen, and on resume
    the checkpoint read and checked against them (in that order, so that bad input is refused
    before any file is read)."""
    _check_options(cfg, loss)
    chosen = _choose(data, cfg, loss)
    config = _checkpoint_config(cfg, loss, label_party, chosen)
    ck = SC.read_resume(cfg.checkpoint, config, cfg.seed, data, cfg.backend) if (
        config is not None and cfg.resume) else None
    return SecureRun(cfg=cfg, loss=loss, label_party=label_party, checkpoint_config=config,
                     ck=ck, seed=cfg.seed if ck is None else ck["seed"], **chosen)


def _check_options(cfg, loss):
    """Refuse what dp-bcfw-secure does not do, then check the declared bounds (private runs)
    and the row clip."""
    if loss.name not in ("squared", "logistic"):
        raise InputError(f"dp-bcfw-secure fits the squared loss (cross-products released once) "
                         f"and the logistic loss (derivatives under secret sharing every round), "
                         f"got loss {loss.name!r}")
    if str(cfg.sampling) != "elementary":
        raise InputError(f"dp-bcfw-secure moves every party every round (sampling 'elementary'), "
                         f"got sampling {cfg.sampling!r}")
    if cfg.sketch != "identity":
        raise InputError(f"dp-bcfw-secure releases no columns, so it takes no sketch; got "
                         f"sketch {cfg.sketch!r}")
    if cfg.calibration != "accountant":
        raise InputError("dp-bcfw-secure is calibrated by the accountant (the paper's closed "
                         "forms are for DP-BCFW-AS)")
    if cfg.derivative_clip is not None:
        raise InputError("derivative_clip does not apply to dp-bcfw-secure (its scores use the "
                         "party's own partial residual; use row_clip to lower the sensitivity)")
    if cfg.private:
        # the bounds first: every default and sensitivity below is read from them
        SP.P.check_bound("feature_bound", cfg.feature_bound)
        SP.P.check_bound("label_bound", cfg.label_bound)
        if cfg.accountant not in ("rdp", "best"):
            raise InputError(f"dp-bcfw-secure adds exact discrete Gaussian noise in the ring "
                             f"(both losses), which only the rdp accountant accounts for (best "
                             f"includes it; docs/sensitivity.md 4.9, 5.7); got --accountant "
                             f"{cfg.accountant}")
    if cfg.row_clip is not None:
        SP.check_row_clip(cfg.row_clip)


def _choose(data, cfg, loss) -> dict:
    """rnm, split, the feature cap F and the row clips, each ``cfg``'s or chosen by the stated
    rules of ``defaults.choose`` from public quantities (docs/vertical.md, "Defaults of
    dp-bcfw-secure"), and the list of the choices made."""
    from .defaults import choose

    values, chosen = choose(loss=loss.name, private=cfg.private,
                            feature_bound=cfg.feature_bound,
                            block_sizes=[len(b) for b in data.blocks], rnm=cfg.rnm,
                            split=cfg.split, max_features=cfg.max_features,
                            row_clip=cfg.row_clip, logistic_path=cfg.logistic_path)
    return dict(rnm=values["rnm"], split=values["split"],
                feature_cap=SP.check_feature_cap(values["max_features"]),
                row_clips=values["row_clips"], defaults=[c.to_dict() for c in chosen])


def _checkpoint_config(cfg, loss, label_party, chosen):
    """What the run's checkpoint records and a resume compares, the chosen defaults included
    (None without ``cfg.checkpoint``).  A bad interval is refused before any file is touched.
    Every backend has them: over a link the ServerApp writes the server's checkpoint and each
    party saves its own state (``saves.py``)."""
    if cfg.checkpoint is None:
        return None
    check_every(cfg.checkpoint_every)     # bad input before any file is touched
    return dict(loss=loss.name, eta=float(cfg.eta), iterations=int(cfg.iterations),
                algorithm="dp-bcfw-secure", sampling=str(cfg.sampling), epsilon=cfg.epsilon,
                delta=cfg.delta, rnm=chosen["rnm"], split=chosen["split"],
                feature_bound=cfg.feature_bound, label_bound=cfg.label_bound,
                accountant=cfg.accountant, row_clip=cfg.row_clip,
                max_features=chosen["feature_cap"], row_clips=chosen["row_clips"],
                label_party=label_party, fit_intercept=bool(cfg.fit_intercept),
                logistic_path=cfg.resolved_logistic_path,
                step=(cfg.step or "fw") if cfg.resolved_logistic_path == "glm" else cfg.step)


def _logistic(data, run):
    """The logistic loss's path (``glm_solve``; docs/vertical.md, "Classification with the
    label at one party"): the label at one party, on any backend (its roles:
    ``glm_remote.py``)."""
    if run.label_party is None:
        raise InputError("dp-bcfw-secure with the logistic loss keeps the label at one party "
                         "(label_party 0..K-1), not 'all'")
    from .glm_solve import solve_glm

    return solve_glm(data, run)


def _least_squares(data, run):
    """The least-squares path: noise and budget (private runs), the fixed-point scale, the
    rounds, and the Solution (or, with ``flower.spec_dir``, the written description's info)."""
    if data.K < 2:
        raise InputError(f"dp-bcfw-secure needs at least 2 parties (it computes cross-party "
                         f"products), got {data.K}")
    plan = _plan_noise(data, run) if run.private else None
    accounts = _open_accounts(data, run, plan) if run.private else _Accounts()
    frac = _frac_bits(data, run, plan)
    res, flower_info, accounts = _rounds(data, run, plan, accounts, frac)
    if res is None:                  # flower.spec_dir: the description was written
        return flower_info
    return _solution(data, run, res, plan, accounts, frac, flower_info)


def _plan_noise(data, run) -> _Plan:
    """The sensitivities (from the declared bounds and the row clips C_k) and the noise the
    accountant calibrates for the worst-case plan: T rounds of K selections and K F feature
    releases, the label release (label at one party) counted as extra feature rounds
    (docs/sensitivity.md 4.2-4.4 and 4.6; ``privacy.calibrate``)."""
    cfg, K = run.cfg, data.K
    clips = run.row_clips or SP.row_clips(cfg.feature_bound, cfg.row_clip,
                                          [len(b) for b in data.blocks])
    sens = SP.sensitivities(cfg.feature_bound, cfg.label_bound, cfg.eta, data.n, clips,
                            intercept=bool(cfg.fit_intercept))
    label_only = SP.label_feature_rounds(sens, cfg.label_bound, clips, run.label_party, K)
    intercept_rounds = SP.intercept_feature_rounds(sens, cfg.label_bound, clips, K,
                                                   bool(cfg.fit_intercept))
    label_rounds = label_only + intercept_rounds
    noise_plan = SP.calibrate(run.rnm, sens, cfg.epsilon, cfg.delta, run.T, K, run.feature_cap,
                              run.split, cfg.accountant, label_rounds=label_rounds)
    noise_plan.details.update(sens_index=sens.index, sens_feature=sens.feature,
                              row_clips=clips, feature_cap=run.feature_cap,
                              algorithm="dp-bcfw-secure", label_party=run.label_party,
                              label_feature_rounds=label_only,
                              intercept_feature_rounds=intercept_rounds)
    if cfg.fit_intercept:
        noise_plan.details["sens_intercept"] = SP.intercept_sensitivity(cfg.label_bound, clips)
    if run.label_party is not None:
        noise_plan.details["sens_label"] = SP.label_sensitivity(cfg.label_bound, clips,
                                                                run.label_party)
    return _Plan(noise_plan, sens, label_rounds, clips)


def _open_accounts(data, run, plan: _Plan) -> _Accounts:
    """The server's ledger and budget filter (``run.open_budget``), the plan checked against
    them; on resume the worst case of the rounds still to run (``resume.remaining_plan``)."""
    cfg, ledger, run_dir = run.cfg, run.cfg.ledger, None
    if cfg.backend != "inprocess" and ledger is None and cfg.checkpoint is None:
        # the ServerApp may be another process: its ledger must be a file (with a checkpoint
        # the caller's or the checkpoint's, never one in a temporary run folder)
        from ..hosted import run_dir_for

        run_dir = run_dir_for(cfg.flower)
        ledger = os.path.join(run_dir, "server.ledger")
    led, budget = open_budget(
        run, ledger, plan.noise_plan.event,
        lambda: SC.remaining_plan(plan.noise_plan, plan.sens, run.T, data.K, run.feature_cap,
                                  plan.label_rounds, run.ck["state"]))
    return _Accounts(led, budget, run_dir)


def _frac_bits(data, run, plan) -> int:
    """The fixed-point scale f: every product, its noise included, stays below 2^62 / 2^{2f}
    (docs/sensitivity.md 4.1; ``ring.frac_bits``).  A private run sizes it from the declared
    bounds B_a, B_y and the noise's sigma (public quantities)."""
    cfg, n = run.cfg, data.n
    if run.private:
        Ba = float(cfg.feature_bound)
    else:
        # non-private: the fixed-point range comes from the data (no privacy is claimed)
        Ba = float(np.max(np.abs(data.A.data if hasattr(data.A, "data") and
                                 not isinstance(data.A, np.ndarray) else data.A))) or 1.0
    # A_k^T y (label at one party) is a product of the same kind, bounded by n B_a B_y
    By = (None if run.label_party is None else float(cfg.label_bound) if run.private
          else float(np.max(np.abs(data.y))) or 1.0)
    sigma = plan.noise_plan.feature_sigma if run.private else 0.0
    return frac_bits(n * Ba * (Ba if By is None else max(Ba, By)) + _NOISE_RANGE * sigma + 1.0)


def _rounds(data, run, plan, accounts: _Accounts, frac):
    """The T rounds, checkpointed (on resume from the checkpoint's state, the charges made
    after it replayed), in process or on a Flower backend: ``(SecureResult, or None when a
    description was written; flower info or None; the accounts as the run left them)``."""
    cfg, ck = run.cfg, run.ck
    noise_key, noise_seed, on_round = seeds_and_checkpointer(run, data, accounts.led,
                                                             accounts.budget)
    kwargs = dict(eta=float(cfg.eta), iterations=run.T, frac=frac, private=run.private,
                  noise_plan=None if plan is None else plan.noise_plan,
                  feature_bound=cfg.feature_bound, label_bound=cfg.label_bound,
                  clips=None if plan is None else plan.clips,
                  feature_cap=run.feature_cap, seed=noise_seed, noise_key=noise_key,
                  label_party=run.label_party, fit_intercept=bool(cfg.fit_intercept))
    if cfg.backend != "inprocess":
        res, flower_info = _on_flower(data, run, kwargs, accounts, noise_seed, on_round)
        if res is not None and run.private:
            accounts = _server_accounts(run, flower_info, accounts)
        return res, flower_info, accounts
    res = run_secure(data, budget_filter=accounts.budget, callback=cfg.callback,
                     on_round=on_round, state=(ck["state"], ck["arrays"]) if ck else None,
                     **kwargs)
    SC.check_all_replayed(accounts.budget, ck, run.T)
    return res, None, accounts


def _server_accounts(run, flower_info, accounts: _Accounts) -> _Accounts:
    """After a hosted run: the ServerApp's ledger and a filter over it (``run.server_accounts``)."""
    led, budget = server_accounts(run, flower_info, accounts.budget)
    return accounts._replace(led=led, budget=budget)


def _solution(data, run, res, plan, accounts: _Accounts, frac, flower_info):
    """The Solution: x, the objective history, bytes per party (and what sending the raw
    columns, or full gradients, would have cost), the run's choices and the privacy report."""
    from ..solution import Solution

    K, n, T = data.K, data.n, run.T
    noise_plan, clips = (None, None) if plan is None else (plan.noise_plan, plan.clips)
    sol = Solution(algorithm="dp-bcfw-secure", x=res.x, objective=res.objective,
                   initial_objective=res.initial_objective, iterations=T, seconds=res.seconds,
                   K=K, n=n, seed=run.seed, **meter_totals(res.meter, K),
                   uplink_naive=[4 * T + 8 * n * r for r in res.released],
                   uplink_full_gradient=[8 * len(b) * T for b in data.blocks],
                   released=res.released, meter=res.meter, noise_plan=noise_plan,
                   ledger=accounts.led, intercept=res.intercept,
                   extra={"selections": res.selections, "secure_products": res.products,
                          "frac_bits": frac, "feature_cap": run.feature_cap,
                          "row_clips": clips,
                          "label_party": "all" if run.label_party is None else run.label_party,
                          "defaults": run.defaults, "rnm": run.rnm, "split": run.split,
                          "setup_seconds": res.setup_seconds, "intercepts": res.intercepts,
                          "party_ledgers": res.extra["party_ledgers"],
                          "bytes_by_type": {k: list(v) for k, v in res.meter.by_type.items()},
                          "backend": run.cfg.backend, "flower": flower_info})
    return finish(sol, data, run, accounts.led, accounts.budget, noise_plan)


def _on_flower(data, run, kwargs, accounts: _Accounts, noise_seed, checkpointer=None):
    """dp-bcfw-secure on a remote backend (its roles: :mod:`.remote`), as a SecureResult.
    ``checkpointer`` (``resume.checkpointer``'s): its path, interval and metadata go to the
    ServerApp, which writes the server's checkpoints; each party saves its own state."""
    from ..hosted import run_hosted
    from . import remote as FS
    from ..engine import _seeds
    from .protocol import SecureResult
    from .saves import checkpoint_spec

    cfg, backend = run.cfg, run.cfg.backend
    ck = checkpoint_spec(checkpointer)

    def runner(**kw):
        out, info = FS.run(backend, data, secure_kwargs=kwargs, checkpoint=ck,
                           resume=bool(run.ck), **kw)
        if out is None or "x" not in out:          # a description written, or no result
            return None, info
        res = SecureResult(x=out["x"], objective=out["objective"],
                           initial_objective=out["initial_objective"], meter=out["meter"],
                           seconds=0.0, released=out["released"], selections=out["selections"],
                           products=out["products"], frac_bits=kwargs["frac"],
                           peer_bytes=out["peer_bytes"], setup_seconds=out["setup_seconds"],
                           extra={"party_ledgers": info.get("party_ledgers")},
                           intercept=out.get("intercept"), intercepts=out.get("intercepts"))
        return res, info

    return run_hosted(backend, cfg.flower, accounts.run_dir, data, None, kwargs["eta"],
                      kwargs["iterations"], run.private, None, accounts.led, accounts.budget,
                      cfg.accountant, cfg.epsilon, cfg.delta,
                      None if run.seed is None else _seeds(noise_seed)[2], cfg.callback,
                      runner=runner)
