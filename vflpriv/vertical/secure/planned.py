"""dp-bcfw-secure settled at run time from public quantities, for a deployment that aligns first.

A run described from the parties' schemas (``vflpriv flower spec run --party-schema``) knows its
options, the parties' column counts and the declared bounds, but not n: n = |C|, the number of
rows common to every party, is known only once the private set intersection has run on the
parties' own machines.  Everything the noise depends on is public once n is known, so the
server role calls :func:`settle_for` after the alignment and before the first release: the same
choices as in process (``solve.settle``: rnm, split, feature cap, row clips), the same noise
calibration and fixed-point scales (each path's ``spec_for``, ``paths.SecurePath``), and
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
           "label_party", "fit_intercept", "helper_party", "logistic_path",
           "squared_path")


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
    if "squared_path" not in options and options.get("loss") == "squared" and \
            options.get("algorithm") == "dp-bcfw-secure":
        # written while the rounds were the squared loss's only path: it keeps them
        options["squared_path"] = "fw"
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


def check_public(options, blocks, callback=None) -> None:
    """What can be refused before n is known (``vflpriv flower spec run --party-schema``): the
    options, the defaults chosen from the column counts, the logistic margin range and the
    helper party; one clear error naming the bad value.  ``callback``: the run's, which hears
    the defaults chosen (``say_defaults``)."""
    import dataclasses

    from .solve import resolve, settle

    shape = Shape(1, blocks)
    cfg = dataclasses.replace(_config(options), callback=callback)
    # (the squared loss's rule is read again for the real n by settle_for)
    resolved = resolve(shape, cfg, int(options["label_party"]))
    run = settle(shape, cfg, cfg.loss_fn, int(options["label_party"]), resolved)
    resolved[0].check_public(shape, cfg, run)


#: the row count a plan is settled for before the alignment has counted the common rows: the
#: plan's privacy does not depend on n (every sensitivity and its noise scale with 1/n
#: together), so its event is the one the run will check again once n is known
PROVISIONAL_ROWS = 1000


def without_lattice(event):
    """``event`` with every discrete Gaussian's lattice fields dropped (charged by its Renyi
    curve only, never less than with them)."""
    import dataclasses

    from accounting import Composed, DiscreteGaussian, DistributedDiscreteGaussian, SelfComposed

    if isinstance(event, (DiscreteGaussian, DistributedDiscreteGaussian)):
        return dataclasses.replace(event, resolution=None, coordinates=None)
    if isinstance(event, SelfComposed):
        return dataclasses.replace(event, event=without_lattice(event.event))
    if isinstance(event, Composed):
        return dataclasses.replace(event, events=tuple(without_lattice(e) for e in event.events))
    return event


class _Preflight:
    """The server's budget filter for the check before the alignment: the plan is checked
    against what the ledger has left without reserving it (the run reserves it once n is
    known), and kept to be sent to the parties for their own check."""

    def __init__(self, inner):
        self.inner, self.event = inner, None

    def check_plan(self, planned, **kw):
        # without the ring's lattice (docs/sensitivity.md 4.9.1): its total-variation term
        # moves with n through the fixed-point scale, by ~1e-9 to ~1e-5 of epsilon, while the
        # plan's Renyi charge does not; best takes the smaller of the two, so the plan without
        # the lattice holds whatever n the alignment counts: a run that passes this check is
        # not refused for its budget after the intersection
        planned = without_lattice(planned)
        self.event = planned
        kw["reserve"] = False
        return self.inner.check_plan(planned, **kw)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def preflight(options, blocks, *, ledger, run_id):
    """The run's whole worst-case plan, settled for :data:`PROVISIONAL_ROWS` rows, checked
    against the server's ledger before the private set intersection (``BudgetExceeded``
    otherwise: nothing computed, no row compared); returns the plan's event, which every party
    checks against its own ledger before it sends anything of its IDs (issue 51).

    The squared loss without ``squared_path`` takes the path its rule chooses for the counted n
    (``defaults.choose_squared_path``), unknown here: both paths' plans are checked, and the one
    that spends more under the run's accountant is returned, so that whichever the rule takes
    after the alignment was checked before it."""
    from accounting import get_accountant

    candidates = [options]
    if options.get("loss") == "squared" and options.get("squared_path") is None \
            and options.get("algorithm") == "dp-bcfw-secure":
        candidates = [dict(options, squared_path=p) for p in ("fw", "ssp")]
    events = [settle_for(o, PROVISIONAL_ROWS, blocks, ledger=ledger, run_id=run_id,
                         _dry=True)[1] for o in candidates]
    acc = get_accountant(options.get("accountant") or "rdp")
    return max(events, key=lambda e: acc.epsilon(e, float(options["delta"])))


def settle_for(options, n, blocks, *, ledger, run_id, connect_timeout=60.0,
               reply_timeout=600.0, _dry=False) -> dict:
    """The server role's spec of dp-bcfw-secure on ``n`` aligned rows split in ``blocks``
    (family ``secure``, ``ssp`` or ``glm``), its noise calibrated for ``n`` and its whole
    worst-case plan
    checked against the server's ``ledger`` (``accounting.BudgetExceeded`` otherwise: nothing
    was released).  ``options``: :func:`config_options` of the run's config, ``eta`` a number."""
    from .checkpoints import resume as SC
    from .solve import resolve, settle

    shape = Shape(n, blocks)
    cfg = _config(options)
    if not cfg.private:
        from ...errors import InputError

        raise InputError("a run aligned on the parties' machines is private (--epsilon): its "
                         "fixed-point scale comes from the declared bounds")
    resolved = resolve(shape, cfg, int(options["label_party"]))
    run = settle(shape, cfg, cfg.loss_fn, int(options["label_party"]), resolved)
    budget = _Preflight(_server_budget(options, ledger, run_id, create=False)) if _dry else \
        _server_budget(options, ledger, run_id)
    noise_key, noise_seed = SC.seeds(None, run.seed)
    common = dict(private=True, ledger=ledger, budget=(budget.epsilon, budget.delta),
                  accountant=cfg.accountant, run_id=run_id, connect_timeout=connect_timeout,
                  reply_timeout=reply_timeout)
    spec = resolved[0].spec_for(shape, run, budget, noise_seed, noise_key, common)
    return (spec, budget.event) if _dry else spec

