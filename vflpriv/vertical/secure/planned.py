"""dp-bcfw-secure settled at run time from public quantities, for a deployment that aligns first.

A run described from the parties' schemas (``vflpriv flower spec run --party-schema``) knows its
options, the parties' column counts and the declared bounds, but not n: n = |C|, the number of
rows common to every party, is known only once the private set intersection has run on the
parties' own machines.  Everything the noise depends on is public once n is known, so the
server role calls :func:`settle_for` after the alignment and before the first release: the same
choices as in process (``solve.settle``: rnm, split, feature cap, row clips), the same noise
calibration (``solve._plan_noise`` for least squares, ``ssp_run._Plan`` or
``glm_solve._plan_noise`` for the logistic loss's two paths), the same fixed-point scales, and
the whole worst-case plan checked against the server's ledger, before any noise is drawn.  The
returned spec is the one the least-squares or a logistic server role (:mod:`.remote`,
:mod:`.ssp_remote`, :mod:`.glm_remote`) serves, as if the description had been written with n
known.
"""
from __future__ import annotations

import numpy as np

#: the VerticalConfig fields a description from schemas carries (JSON-able, public)
OPTIONS = ("loss", "eta", "iterations", "algorithm", "epsilon", "delta", "rnm", "split",
           "feature_bound", "label_bound", "accountant", "seed", "row_clip", "max_features",
           "label_party", "fit_intercept", "helper_party", "logistic_path")


class Shape:
    """The server's view of the aligned data: sizes only (no rows)."""

    def __init__(self, n, blocks):
        self.n = int(n)
        self.blocks = [np.asarray(b, dtype=np.int64) for b in blocks]
        self.K = len(self.blocks)
        self.d = int(sum(len(b) for b in self.blocks))
        self.A = self.y = None


def config_options(cfg) -> dict:
    """What a description keeps of a :class:`~vflpriv.vertical.config.VerticalConfig`."""
    return {k: getattr(cfg, k) for k in OPTIONS}


def _config(options):
    from ..config import VerticalConfig

    options = dict(options)
    if "logistic_path" not in options and options.get("loss") == "logistic":
        # a description written while glm was the logistic default names no path: it keeps glm
        options["logistic_path"] = "glm"
    return VerticalConfig(**options)


def _server_budget(options, ledger, run_id, create=True):
    """The server's budget filter over its ledger (a file on the SuperLink's machine; created
    with the budget in its header if new): the header's budget governs.  ``create=False``: a
    check only, a ledger not yet written read as empty (no file made)."""
    import os

    from accounting import BudgetFilter, Ledger, MemoryLedger

    header = {"epsilon": float(options["epsilon"]), "delta": float(options["delta"]),
              "accountant": options["accountant"]}
    if not create and not os.path.exists(ledger):
        return BudgetFilter(MemoryLedger(budget=header, run_id=run_id), header["epsilon"],
                            header["delta"], accountant=options["accountant"])
    led = Ledger(ledger, budget=header, run_id=run_id)
    eps, delta = led.governing_budget(header["epsilon"], header["delta"])
    return BudgetFilter(led, eps, delta, accountant=options["accountant"])


def check_public(options, blocks) -> None:
    """What can be refused before n is known (``vflpriv flower spec run --party-schema``): the
    options, the defaults chosen from the column counts, the logistic margin range and the
    helper party; one clear error naming the bad value."""
    from .fourier import SigmoidSeries
    from .glm import helper_of
    from .glm_solve import check_margin_range
    from .solve import settle

    shape = Shape(1, blocks)
    cfg = _config(options)
    run = settle(shape, cfg, cfg.loss_fn, int(options["label_party"]))
    if run.loss.name == "logistic" and cfg.resolved_logistic_path == "glm":
        check_margin_range(shape, cfg, SigmoidSeries())
        helper_of(run.label_party, shape.K, cfg.helper_party)
    if run.loss.name == "logistic" and cfg.resolved_logistic_path == "ssp":
        from .ssp_run import check_options

        check_options(cfg)


#: the row count a plan is settled for before the alignment has counted the common rows: the
#: plan's privacy does not depend on n (every sensitivity and its noise scale with 1/n
#: together), so its event is the one the run will check again once n is known
PROVISIONAL_ROWS = 1000


class _Preflight:
    """The server's budget filter for the check before the alignment: the plan is checked
    against what the ledger has left without reserving it (the run reserves it once n is
    known), and kept to be sent to the parties for their own check."""

    def __init__(self, inner):
        self.inner, self.event = inner, None

    def check_plan(self, planned, **kw):
        self.event = planned
        kw["reserve"] = False
        return self.inner.check_plan(planned, **kw)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def preflight(options, blocks, *, ledger, run_id):
    """The run's whole worst-case plan, settled for :data:`PROVISIONAL_ROWS` rows, checked
    against the server's ledger before the private set intersection (``BudgetExceeded``
    otherwise: nothing computed, no row compared); returns the plan's event, which every party
    checks against its own ledger before it sends anything of its IDs (issue 51)."""
    _, event = settle_for(options, PROVISIONAL_ROWS, blocks, ledger=ledger, run_id=run_id,
                          _dry=True)
    return event


def settle_for(options, n, blocks, *, ledger, run_id, connect_timeout=60.0,
               reply_timeout=600.0, _dry=False) -> dict:
    """The server role's spec of dp-bcfw-secure on ``n`` aligned rows split in ``blocks``
    (family ``secure``, ``ssp`` or ``glm``), its noise calibrated for ``n`` and its whole
    worst-case plan
    checked against the server's ``ledger`` (``accounting.BudgetExceeded`` otherwise: nothing
    was released).  ``options``: :func:`config_options` of the run's config, ``eta`` a number."""
    from . import resume as SC
    from .solve import settle

    shape = Shape(n, blocks)
    cfg = _config(options)
    if not cfg.private:
        from ...errors import InputError

        raise InputError("a run aligned on the parties' machines is private (--epsilon): its "
                         "fixed-point scale comes from the declared bounds")
    run = settle(shape, cfg, cfg.loss_fn, int(options["label_party"]))
    budget = _Preflight(_server_budget(options, ledger, run_id, create=False)) if _dry else \
        _server_budget(options, ledger, run_id)
    noise_key, noise_seed = SC.seeds(None, run.seed)
    common = dict(private=True, ledger=ledger, budget=(budget.epsilon, budget.delta),
                  accountant=cfg.accountant, run_id=run_id, connect_timeout=connect_timeout,
                  reply_timeout=reply_timeout)
    if run.loss.name == "logistic" and cfg.resolved_logistic_path == "ssp":
        spec = _ssp(shape, run, budget, common)
    elif run.loss.name == "logistic":
        spec = _logistic(shape, run, budget, noise_seed, noise_key, common)
    else:
        spec = _least_squares(shape, run, budget, noise_seed, noise_key, common)
    return (spec, budget.event) if _dry else spec


def _least_squares(shape, run, budget, noise_seed, noise_key, common):
    from . import remote as FS
    from .solve import _frac_bits, _plan_noise

    if shape.K < 2:
        from ...errors import InputError

        raise InputError("dp-bcfw-secure needs at least 2 parties")
    plan = _plan_noise(shape, run)
    budget.check_plan(plan.noise_plan.event, party="server")
    cfg = run.cfg
    kwargs = dict(eta=float(cfg.eta), iterations=run.T, frac=_frac_bits(shape, run, plan),
                  private=True, noise_plan=plan.noise_plan, feature_bound=cfg.feature_bound,
                  label_bound=cfg.label_bound, clips=plan.clips, feature_cap=run.feature_cap,
                  seed=noise_seed, noise_key=noise_key, label_party=run.label_party)
    return FS.make_spec(shape, secure_kwargs=kwargs, **common)


def _logistic(shape, run, budget, noise_seed, noise_key, common):
    from . import glm_remote as GR
    from .fourier import SigmoidSeries
    from .glm import helper_of, ring_plan
    from .glm_solve import _plan_noise, check_margin_range

    series = SigmoidSeries()
    cfg = run.cfg
    check_margin_range(shape, cfg, series)
    helper = helper_of(run.label_party, shape.K, cfg.helper_party)
    noise = _plan_noise(shape, run, series)
    budget.check_plan(noise.plan.event, party="server")
    ring = ring_plan(shape.n, float(cfg.feature_bound), noise.sigma,
                     series)
    kwargs = dict(eta=float(cfg.eta), iterations=run.T, label_party=run.label_party,
                  private=True, sigma=noise.sigma, feature_bound=cfg.feature_bound,
                  clips=noise.clips, fit_intercept=bool(cfg.fit_intercept),
                  helper_party=helper, loss=run.loss.name,
                  ring=[ring.fa, ring.fm, ring.fc, ring.h],
                  series=[series.accurate, series.period_bits, series.terms, series.coef_bits])
    # the logistic path's server draws no noise of its own: seed and key are the parties'
    del noise_seed, noise_key
    return GR.make_spec(shape, glm_kwargs=kwargs, **common)


def _ssp(shape, run, budget, common):
    """The logistic loss's default path (``ssp_run``): its one release planned for n rows
    and checked against the server's ledger; the parties draw its noise (their own seeds)."""
    from ...errors import InputError
    from . import ssp_remote as SR
    from .ssp_run import _Plan, ring_and_fit

    if shape.K < 2:
        raise InputError("dp-bcfw-secure needs at least 2 parties")
    plan = _Plan(shape, run)
    budget.check_plan(plan.event, party="server")
    frac, fit = ring_and_fit(plan, run.cfg, shape.n, shape.d)
    return SR.make_spec(shape, ssp_kwargs=SR.ssp_kwargs(run, plan, frac, fit, shape.K),
                        **common)
