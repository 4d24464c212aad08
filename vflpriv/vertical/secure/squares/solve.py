"""dp-bcfw-secure's least-squares path, solved: noise and budget (private runs), the fixed-point
scale, the rounds (in process or over a link), and the Solution (docs/sensitivity.md section 4,
docs/vertical.md "dp-bcfw-secure").
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ....errors import InputError
from .. import privacy as SP
from ..checkpoints import resume as SC
from ..mpc.ring import frac_bits, noisy_range
from ..run import (finish, meter_totals, open_budget, seeds_and_checkpointer, server_accounts,
                   server_ledger)
from .loop import run_secure


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


def solve_squares(data, run):
    """The least-squares path: noise and budget (private runs), the fixed-point scale, the
    rounds, and the Solution (or, with ``flower.spec_dir``, the written description's info)."""
    if data.K < 2:
        raise InputError(f"dp-bcfw-secure needs at least 2 parties (it computes cross-party "
                         f"products), got {data.K}")
    plan = plan_noise(data, run) if run.private else None
    accounts = _open_accounts(data, run, plan) if run.private else _Accounts()
    frac = frac_bits_for(data, run, plan)
    res, flower_info, accounts = _rounds(data, run, plan, accounts, frac)
    if res is None:                  # flower.spec_dir: the description was written
        return flower_info
    return _solution(data, run, res, plan, accounts, frac, flower_info)


def plan_noise(data, run) -> _Plan:
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
    # the ring's lattice at each candidate sigma (docs/sensitivity.md 4.9.1): the fraction bits
    # the run would use at that sigma (:func:`frac_at`)
    lattice = SP.plan_lattice(lambda sigma: frac_at(data, run, sigma),
                              [len(b) for b in data.blocks])
    noise_plan = SP.calibrate(run.rnm, sens, cfg.epsilon, cfg.delta, run.T, K, run.feature_cap,
                              run.split, cfg.accountant, label_rounds=label_rounds,
                              lattice=lattice)
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
    ledger, run_dir = server_ledger(run)
    led, budget = open_budget(
        run, ledger, plan.noise_plan.event,
        lambda: SC.remaining_plan(plan.noise_plan, plan.sens, run.T, data.K, run.feature_cap,
                                  plan.label_rounds, run.ck["state"],
                                  ring=(frac_bits_for(data, run, plan),
                                        [len(b) for b in data.blocks])))
    return _Accounts(led, budget, run_dir)


def frac_bits_for(data, run, plan) -> int:
    """The fixed-point scale f: every product, its noise included, stays below 2^62 / 2^{2f}
    (docs/sensitivity.md 4.1; ``ring.frac_bits``).  A private run sizes it from the declared
    bounds B_a, B_y and the noise's sigma (public quantities)."""
    return frac_at(data, run, plan.noise_plan.feature_sigma if run.private else 0.0)


def frac_at(data, run, sigma) -> int:
    """:func:`frac_bits_for` at noise ``sigma`` (the plan's calibration asks it per sigma)."""
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
    return frac_bits(noisy_range(n * Ba * (Ba if By is None else max(Ba, By)), sigma))


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
    from ...solution import Solution

    K, n, T = data.K, data.n, run.T
    noise_plan, clips = (None, None) if plan is None else (plan.noise_plan, plan.clips)
    sol = Solution(algorithm="dp-bcfw-secure", x=res.x, objective=res.objective,
                   initial_objective=res.initial_objective, iterations=T, seconds=res.seconds,
                   K=K, n=n, seed=run.seed, **meter_totals(res.meter, K),
                   uplink_naive=[4 * T + 8 * n * r for r in res.released],
                   uplink_full_gradient=[8 * len(b) * T for b in data.blocks],
                   released=res.released, meter=res.meter, noise_plan=noise_plan,
                   ledger=accounts.led, intercept=res.intercept,
                   extra={"path": "squares", "selections": res.selections,
                          "secure_products": res.products,
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
    from ...engine import _seeds
    from ...hosted import run_hosted
    from ..checkpoints.saves import checkpoint_spec
    from . import roles as FS
    from .party import SecureResult

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
