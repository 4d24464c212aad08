"""``solve(..., algorithm="dp-bcfw-secure")``: checks, calibration, ledger, and the Solution."""
from __future__ import annotations

import math
import os

import numpy as np

from ...errors import InputError
from ..checkpoint import check_every
from . import privacy as SP
from . import resume as SC
from .protocol import run_secure
from .ring import frac_bits

#: noise beyond this many standard deviations is treated as impossible when sizing the ring
#: (probability < 1e-300 per entry); a larger value would only wrap, a post-processing
_NOISE_RANGE = 40.0


def solve_secure(data, *, loss, eta, iterations, sampling, epsilon, delta, rnm, sketch,
                 calibration, split, feature_bound, label_bound, accountant, ledger, seed,
                 reference, callback, report_accountants, derivative_clip, checkpoint, row_clip,
                 max_features, backend="inprocess", flower=None, label_party=0, resume=False,
                 checkpoint_every=1, checkpoint_extra=None):
    from accounting import BudgetFilter

    from ...optim import reference_optimum
    from ..hosted import run_dir_for
    from ..solution import Solution, privacy_report

    if loss.name not in ("squared", "logistic"):
        raise InputError(f"dp-bcfw-secure fits the squared loss (cross-products released once) "
                         f"and the logistic loss (derivatives under secret sharing every round), "
                         f"got loss {loss.name!r}")
    if str(sampling) != "elementary":
        raise InputError(f"dp-bcfw-secure moves every party every round (sampling 'elementary'), "
                         f"got sampling {sampling!r}")
    if sketch != "identity":
        raise InputError(f"dp-bcfw-secure releases no columns, so it takes no sketch; got "
                         f"sketch {sketch!r}")
    if calibration != "accountant":
        raise InputError("dp-bcfw-secure is calibrated by the accountant (the paper's closed "
                         "forms are for DP-BCFW-AS)")
    if derivative_clip is not None:
        raise InputError("derivative_clip does not apply to dp-bcfw-secure (its scores use the "
                         "party's own partial residual; use row_clip to lower the sensitivity)")
    from .defaults import choose

    private = math.isfinite(epsilon)
    if private:
        # the bounds first: every default and sensitivity below is read from them
        SP.P.check_bound("feature_bound", feature_bound)
        SP.P.check_bound("label_bound", label_bound)
    if row_clip is not None:
        SP.check_row_clip(row_clip)
    sizes = [len(b) for b in data.blocks]
    chosen_values, chosen = choose(loss=loss.name, private=private, feature_bound=feature_bound,
                                   block_sizes=sizes, rnm=rnm, split=split,
                                   max_features=max_features, row_clip=row_clip)
    rnm, split = chosen_values["rnm"], chosen_values["split"]
    F = SP.check_feature_cap(chosen_values["max_features"])
    auto_clips = chosen_values["row_clips"]
    defaults = [c.to_dict() for c in chosen]
    K, n, T = data.K, data.n, int(iterations)
    ck = config = None
    if checkpoint is not None:
        if backend != "inprocess":
            raise InputError(f"checkpoints of dp-bcfw-secure are for the in-process run, not "
                             f"--backend {backend}")
        check_every(checkpoint_every)     # bad input before any file is touched
        config = dict(loss=loss.name, eta=float(eta), iterations=T, algorithm="dp-bcfw-secure",
                      sampling=str(sampling), epsilon=epsilon, delta=delta, rnm=rnm, split=split,
                      feature_bound=feature_bound, label_bound=label_bound,
                      accountant=accountant, row_clip=row_clip, max_features=F,
                      row_clips=auto_clips, label_party=label_party)
        if resume:
            ck = SC.read_resume(checkpoint, config, seed, data)
            seed = ck["seed"]
    if loss.name == "logistic":
        if label_party is None:
            raise InputError("dp-bcfw-secure with the logistic loss keeps the label at one party "
                             "(label_party 0..K-1), not 'all'")
        if backend != "inprocess":
            raise InputError(f"dp-bcfw-secure with the logistic loss runs in process only for "
                             f"now, not on --backend {backend} (docs/vertical.md)")
        from .glm_solve import solve_glm

        return solve_glm(data, loss=loss, eta=eta, iterations=T, epsilon=epsilon, delta=delta,
                         feature_bound=feature_bound, label_bound=label_bound,
                         accountant=accountant, ledger=ledger, seed=seed, reference=reference,
                         callback=callback, report_accountants=report_accountants,
                         row_clip=row_clip, label_party=label_party, row_clips=auto_clips,
                         defaults=defaults, checkpoint=checkpoint, ck=ck, config=config,
                         checkpoint_every=checkpoint_every, checkpoint_extra=checkpoint_extra)
    if K < 2:
        raise InputError(f"dp-bcfw-secure needs at least 2 parties (it computes cross-party "
                         f"products), got {K}")
    noise_plan = budget = led = clips = run_dir = None
    sigma = 0.0
    if private:
        clips = auto_clips or SP.row_clips(feature_bound, row_clip, sizes)
        sens = SP.sensitivities(feature_bound, label_bound, eta, n, clips)
        label_rounds = SP.label_feature_rounds(sens, label_bound, clips, label_party, K)
        noise_plan = SP.calibrate(rnm, sens, epsilon, delta, T, K, F, split, accountant,
                                  label_rounds=label_rounds)
        noise_plan.details.update(sens_index=sens.index, sens_feature=sens.feature,
                                  row_clips=clips, feature_cap=F, algorithm="dp-bcfw-secure",
                                  label_party=label_party, label_feature_rounds=label_rounds)
        if label_party is not None:
            noise_plan.details["sens_label"] = SP.label_sensitivity(label_bound, clips,
                                                                    label_party)
        sigma = noise_plan.feature_sigma
        if backend != "inprocess" and ledger is None:
            # the ServerApp may be another process: its ledger must be a file
            run_dir = run_dir_for(flower)
            ledger = os.path.join(run_dir, "server.ledger")
        led = SC.open_ledger_for(ledger, ck, checkpoint, epsilon, delta, accountant)
        # the ledger's header budget governs (issue #13), and the whole worst-case plan must fit
        # in what remains before the first release (on resume: what remains of it)
        b_eps, b_delta = (led.governing_budget(epsilon, delta)
                          if hasattr(led, "governing_budget") else (epsilon, delta))
        budget = BudgetFilter(led, b_eps, b_delta, accountant=accountant)
        budget = SC.check_and_replay(
            budget, led, ck, checkpoint,
            ck and SC.remaining_plan(noise_plan, sens, T, K, F, label_rounds, ck["state"]),
            noise_plan.event,
            advice=lambda: "a smaller epsilon, fewer iterations or a fresh ledger fits")
        Ba = float(feature_bound)
    else:
        # non-private: the fixed-point range comes from the data (no privacy is claimed)
        Ba = float(np.max(np.abs(data.A.data if hasattr(data.A, "data") and
                                 not isinstance(data.A, np.ndarray) else data.A))) or 1.0
    # A_k^T y (label at one party) is a product of the same kind, bounded by n B_a B_y
    By = (None if label_party is None else float(label_bound) if private
          else float(np.max(np.abs(data.y))) or 1.0)
    frac = frac_bits(n * Ba * (Ba if By is None else max(Ba, By)) + _NOISE_RANGE * sigma + 1.0)
    noise_key, noise_seed = SC.seeds(ck, seed)
    on_round = SC.checkpointer(checkpoint, checkpoint_every, T, config=config, seed=seed,
                               noise_seed=noise_seed, noise_key=noise_key, data=data,
                               extra=checkpoint_extra, led=led, budget=budget)
    kwargs = dict(eta=float(eta), iterations=T, frac=frac, private=private,
                  noise_plan=noise_plan, feature_bound=feature_bound, label_bound=label_bound,
                  clips=clips, feature_cap=F, seed=noise_seed, noise_key=noise_key,
                  label_party=label_party)
    flower_info = None
    if backend != "inprocess":
        res, flower_info = _on_flower(backend, flower, run_dir, data, kwargs, private, led,
                                      budget, accountant, epsilon, delta, seed, noise_seed,
                                      callback)
        if res is None:                  # flower.spec_dir: the description was written
            return flower_info
        if private:
            led = flower_info.pop("ledger")
            budget = BudgetFilter(led, budget.epsilon, budget.delta, accountant=accountant)
    else:
        res = run_secure(data, budget_filter=budget, callback=callback, on_round=on_round,
                         state=(ck["state"], ck["arrays"]) if ck else None, **kwargs)
        SC.check_all_replayed(budget, ck, T)
    up = [res.meter.total(k, "uplink") for k in range(K)]
    naive = [4 * T + 8 * n * r for r in res.released]
    fullgrad = [8 * len(b) * T for b in data.blocks]
    sol = Solution(algorithm="dp-bcfw-secure", x=res.x, objective=res.objective,
                   initial_objective=res.initial_objective, iterations=T, seconds=res.seconds,
                   K=K, n=n, seed=seed, uplink=up,
                   uplink_framed=[res.meter.total(k, "uplink", True) for k in range(K)],
                   downlink=[res.meter.total(k, "downlink") for k in range(K)],
                   downlink_framed=[res.meter.total(k, "downlink", True) for k in range(K)],
                   uplink_naive=naive, uplink_full_gradient=fullgrad, released=res.released,
                   meter=res.meter, noise_plan=noise_plan, ledger=led,
                   extra={"selections": res.selections, "secure_products": res.products,
                          "frac_bits": frac, "feature_cap": F, "row_clips": clips,
                          "label_party": "all" if label_party is None else label_party,
                          "defaults": defaults, "rnm": rnm, "split": split,
                          "setup_seconds": res.setup_seconds,
                          "party_ledgers": res.extra["party_ledgers"],
                          "bytes_by_type": {k: list(v) for k, v in res.meter.by_type.items()},
                          "backend": backend, "flower": flower_info})
    if private:
        values, best = privacy_report(led.event(), delta, report_accountants)
        sol.privacy = {"epsilon_spent": values, "best_accountant": best, "delta": delta,
                       "target_epsilon": epsilon, "budget_accountant": accountant,
                       "spent_by_budget_accountant": budget.spent(),
                       "calibration": noise_plan.to_dict(), "releases": len(led.records),
                       "neighboring": "replace_one"}
    if reference:
        sol.reference = reference_optimum(data.A, data.y, loss, blocks=data.blocks,
                                          eta=float(eta), on_failure="flag")
    return sol


def _on_flower(backend, flower, run_dir, data, kwargs, private, led, budget, accountant,
               epsilon, delta, seed, noise_seed, callback):
    """dp-bcfw-secure on a remote backend (its roles: :mod:`.remote`), as a SecureResult."""
    from ..hosted import run_hosted
    from . import remote as FS
    from ..engine import _seeds
    from .protocol import SecureResult

    def runner(**kw):
        out, info = FS.run(backend, data, secure_kwargs=kwargs, **kw)
        if out is None or "x" not in out:          # a description written, or no result
            return None, info
        res = SecureResult(x=out["x"], objective=out["objective"],
                           initial_objective=out["initial_objective"], meter=out["meter"],
                           seconds=0.0, released=out["released"], selections=out["selections"],
                           products=out["products"], frac_bits=kwargs["frac"],
                           peer_bytes=out["peer_bytes"], setup_seconds=out["setup_seconds"],
                           extra={"party_ledgers": info.get("party_ledgers")})
        return res, info

    return run_hosted(backend, flower, run_dir, data, None, kwargs["eta"], kwargs["iterations"],
                       private, None, led, budget, accountant, epsilon, delta,
                       None if seed is None else _seeds(noise_seed)[2], callback, runner=runner)
