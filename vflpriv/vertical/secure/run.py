"""What both paths of dp-bcfw-secure share: the run as settled before either path starts
(:class:`SecureRun`), its ledger and budget filter, its seeds and checkpoint hook, and the end of
its Solution (bytes per party, privacy report, reference optimum).

``solve.solve_secure`` settles the run from its :class:`~vflpriv.vertical.config.VerticalConfig`
and hands it to the least-squares path (``solve.py``, docs/sensitivity.md section 4) or to the
logistic one (``glm/solve.py``, section 5).
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from .checkpoints import resume as SC

if TYPE_CHECKING:
    from ..config import VerticalConfig

#: what to try when the ledger's budget cannot hold the run's worst case
_ADVICE = "a smaller epsilon, fewer iterations or a fresh ledger fits"


@dataclasses.dataclass(frozen=True)
class SecureRun:
    """One dp-bcfw-secure run once its options are checked and settled.

    ``cfg`` is the run's config as given; ``loss`` its loss object (built once);
    ``label_party`` the party holding y (None: every party), as ``cfg.check_data`` resolved it.
    ``rnm``, ``split``, ``feature_cap`` (F) and ``row_clips`` are ``cfg``'s or, where it left
    them at None, chosen by ``defaults.choose`` from public quantities (``row_clips`` is None
    unless chosen: then ``cfg.row_clip`` applies), and ``defaults`` lists those choices
    (``Solution.extra["defaults"]``; docs/vertical.md, "Defaults of dp-bcfw-secure").
    ``checkpoint_config`` is what a checkpoint records and a resume compares (None without a
    checkpoint), ``ck`` the checkpoint read on resume, and ``seed`` the caller's seed or, on
    resume, the checkpoint's.
    """

    cfg: VerticalConfig
    loss: Any
    label_party: int | None
    rnm: str
    split: float
    feature_cap: int
    row_clips: list | None
    defaults: list
    checkpoint_config: dict | None
    ck: dict | None
    seed: int | None

    @property
    def T(self) -> int:
        """The number of rounds."""
        return int(self.cfg.iterations)

    @property
    def private(self) -> bool:
        """A finite epsilon: every release is noised and charged."""
        return self.cfg.private


def server_ledger(run: SecureRun):
    """``(ledger, run folder or None)``: where the server keeps its ledger, one rule for every
    path.  The caller's ``ledger``; on a remote backend without one, ``server.ledger`` in the
    Flower run folder made for it (the ServerApp may be another process, so its ledger must be
    a file); with a checkpoint, never a temporary folder (the checkpoint's run names it)."""
    cfg = run.cfg
    if cfg.backend == "inprocess" or cfg.ledger is not None or cfg.checkpoint is not None:
        return cfg.ledger, None
    import os

    from ..hosted import run_dir_for

    run_dir = run_dir_for(cfg.flower)
    return os.path.join(run_dir, "server.ledger"), run_dir


def open_budget(run: SecureRun, ledger, whole, remaining):
    """The run's ledger (the checkpoint's run's on resume) and the BudgetFilter over it, as
    ``(ledger, filter)``.  The ledger's header budget governs (issue #13), and the worst case
    must fit in what it leaves before the first release: the whole plan ``whole`` for a new run,
    on resume what remains of it (``remaining()``, called only then), with the records charged
    after the checkpoint replayed rather than charged again (``resume.check_and_replay``)."""
    from accounting import BudgetFilter

    cfg, ck = run.cfg, run.ck
    led = SC.open_ledger_for(ledger, ck, cfg.checkpoint, cfg.epsilon, cfg.delta, cfg.accountant)
    b_eps, b_delta = (led.governing_budget(cfg.epsilon, cfg.delta)
                      if hasattr(led, "governing_budget") else (cfg.epsilon, cfg.delta))
    budget = BudgetFilter(led, b_eps, b_delta, accountant=cfg.accountant)
    budget = SC.check_and_replay(budget, led, ck, cfg.checkpoint, ck and remaining(), whole,
                                 advice=lambda: _ADVICE)
    return led, budget


def seeds_and_checkpointer(run: SecureRun, data, led, budget):
    """``(noise_key, noise_seed, on_round)``: the seed material (the checkpoint's on resume,
    else from the seed or OS entropy: ``resume.seeds``) and the hook writing the checkpoints
    (None without ``cfg.checkpoint``)."""
    cfg = run.cfg
    noise_key, noise_seed = SC.seeds(run.ck, run.seed)
    on_round = SC.checkpointer(cfg.checkpoint, cfg.checkpoint_every, run.T,
                               config=run.checkpoint_config, seed=run.seed,
                               noise_seed=noise_seed, noise_key=noise_key, data=data,
                               extra=cfg.checkpoint_extra, led=led, budget=budget)
    return noise_key, noise_seed, on_round


def server_accounts(run: SecureRun, flower_info, budget):
    """After a hosted run: ``(ledger, filter)``, the ServerApp's ledger (it may have run in
    another process) and a filter over it with ``budget``'s budget, for the privacy report."""
    from accounting import BudgetFilter

    led = flower_info.pop("ledger")
    return led, BudgetFilter(led, budget.epsilon, budget.delta, accountant=run.cfg.accountant)


def meter_totals(meter, K) -> dict:
    """Payload and framed bytes per party and direction, as Solution's keyword arguments."""
    return dict(uplink=[meter.total(k, "uplink") for k in range(K)],
                uplink_framed=[meter.total(k, "uplink", True) for k in range(K)],
                downlink=[meter.total(k, "downlink") for k in range(K)],
                downlink_framed=[meter.total(k, "downlink", True) for k in range(K)])


def finish(sol, data, run: SecureRun, led, budget, noise_plan):
    """``sol`` with its privacy report (private runs: the ledger's spend by every accountant of
    ``cfg.report_accountants``, and by the budget's) and, with ``cfg.reference``, the reference
    optimum of the same problem."""
    from ..solution import privacy_report

    cfg = run.cfg
    if run.private:
        values, best = privacy_report(led.event(), cfg.delta, cfg.report_accountants)
        sol.privacy = {"epsilon_spent": values, "best_accountant": best, "delta": cfg.delta,
                       "target_epsilon": cfg.epsilon, "budget_accountant": cfg.accountant,
                       "spent_by_budget_accountant": budget.spent(),
                       "calibration": noise_plan.to_dict(), "releases": len(led.records),
                       "neighboring": "replace_one"}
    if cfg.reference:
        from ..solution import reference_for

        sol.reference = reference_for(data, cfg)
    return sol
