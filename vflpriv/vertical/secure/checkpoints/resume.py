"""Resuming an interrupted dp-bcfw-secure run: the checkpoint is read and checked
against the run's options and data, its ledger reopened under the same run id, and the spend the
rest of the run may still make checked before anything is released (over a link the parties'
side of it, each with its own save and its own ledger: ``checkpoints/saves.py``).

Why a resume cannot re-spend (docs/vertical.md, "Checkpoints of dp-bcfw-secure"): the
server charges every release to the budget filter before any party draws its noise, and the
checkpoint holds every generator's state as of the end of its round.  The records the ledger
holds beyond the checkpoint's length are therefore releases of rounds the resume redoes; redone
from the restored generators, those rounds draw the same noise and release the same values, so
:class:`~vflpriv.vertical.checkpoint.ReplayFilter` matches each charge against its recorded twin
(same event, party, round and note) instead of appending it.  A released value is never
re-drawn with fresh noise (that would be a second release of the same data, charged once), and
the ledger ends as an uninterrupted run's.
"""
from __future__ import annotations

import os

from ....errors import InputError


def read_resume(path, config, seed, data, backend="inprocess") -> dict:
    """The checkpoint at ``path``, checked against this run's options, seed and data (the same
    checks as the other vertical algorithms' resume), and against where the parties' states
    are: in the checkpoint (an in-process run's), or each in its party's own saves (a run on a
    remote backend's, ``checkpoints/saves.py``), so that ``backend`` must be of the same kind."""
    from ...checkpoint import resume_checkpoint

    ck = resume_checkpoint(path, config, seed, data)
    if ck["config"].get("algorithm") != "dp-bcfw-secure" or "stage" not in ck["state"]:
        raise InputError(f"resume: {str(path)!r} is not a checkpoint of a dp-bcfw-secure run")
    held = bool(ck["state"].get("parties"))
    if held != (backend == "inprocess"):
        raise InputError(
            f"resume: {str(path)!r} was written by an in-process run (it holds every party's "
            f"state), not by a run on --backend {backend}: resume it in process" if held else
            f"resume: {str(path)!r} was written by a run on a remote backend (each party "
            "saved its own state beside it), not in process: resume it on flower-sim or flower")
    return ck


def resume_ledger(ledger, ck, epsilon, delta, accountant):
    """The interrupted run's ledger (``ledger`` or the checkpoint's), opened under its run id;
    never a new empty one, which would forget what was spent."""
    from accounting import Ledger

    ledger = ledger if ledger is not None else ck["ledger_path"]
    if isinstance(ledger, Ledger):
        ledger.take_over_reservation()
        return ledger
    if ledger is None or not os.path.isfile(ledger):
        raise InputError(f"resume: the ledger {str(ledger)!r} of the checkpoint's run does not "
                         "exist")
    led = Ledger(ledger, budget={"epsilon": epsilon, "delta": delta, "accountant": accountant},
                 run_id=ck["run_id"])
    led.take_over_reservation()       # the killed run's reservation ends with this run
    return led


def pending_records(led, ck, path):
    """This run's ledger records charged after the checkpoint was written (to replay)."""
    from ...checkpoint import pending_records as records

    return records(led, ck, path)


def remaining_plan(noise_plan, sens, T, K, F, label_rounds, state, ring=None):
    """The worst case of the rounds still to run from ``state``: T - t rounds of K selections,
    and the feature releases still possible.  Party l can still release F - r_l new features
    (r_l released so far), each a Gaussian of sigma and sensitivity <= Delta (``sens.feature``).
    Gaussians of one sigma compose exactly as one whose squared sensitivity is the sum (Dong,
    Roth, Su 2022), however a round groups them, so they are covered by one Gaussian of
    sensitivity Delta sqrt(sum_l (F - r_l)).  With what was already released (the label release
    included) this is at most the whole run's plan, which was checked when the run started.
    Before the setup (stage ``start``) the whole plan remains.  None when nothing remains.
    ``ring`` (frac, block sizes): the releases' lattice stated (docs/sensitivity.md 4.9.1), each
    remaining feature release with at most max_l sum_{k != l} p_k ring coordinates."""
    from accounting import REPLACE_ONE, Composed, DiscreteGaussian

    from ... import privacy as P

    t0 = int(state["t"])
    if state["stage"] == "start":
        return noise_plan.event
    if t0 >= T:
        return None
    index = P.plan_event(noise_plan.noise, noise_plan.index_scale, None, sens, T - t0, K,
                         features=False)
    units = sum(max(F - int(r), 0) for r in state["released"])
    if units == 0:
        return index
    from .. import privacy as SP

    lattice = None
    if ring is not None:
        res, per_unit = SP.plan_lattice(lambda _s: ring[0], ring[1])(noise_plan.feature_sigma)
        lattice = (res, units * (per_unit // K))
    return Composed((index, DiscreteGaussian(noise_plan.feature_sigma, sens.feature * units ** 0.5,
                                             neighboring=REPLACE_ONE,
                                             **P.lattice_fields(lattice,
                                                                noise_plan.feature_sigma))))


def open_ledger_for(ledger, ck, checkpoint, epsilon, delta, accountant):
    """The run's ledger: the checkpoint's run's on resume, else a new or existing one (a
    private run with a checkpoint needs a file: an in-memory ledger forgets what was spent)."""
    from ...solution import open_ledger

    if ck:
        return resume_ledger(ledger, ck, epsilon, delta, accountant)
    if checkpoint is not None and ledger is None:
        raise InputError("a private run with a checkpoint needs a ledger file (ledger=PATH, "
                         "--ledger): resuming must not spend again what an in-memory ledger "
                         "forgot")
    return open_ledger(ledger, epsilon, delta, accountant)


def check_and_replay(budget, led, ck, checkpoint, remaining, whole, advice):
    """Check the plan before any release: the whole plan ``whole`` for a new run; on resume what
    remains of it (``remaining``, None: nothing), with the records this run charged after the
    checkpoint excluded -- they are replayed by the returned ReplayFilter, not charged again."""
    from ...checkpoint import ReplayFilter

    if not ck:
        budget.check_plan(whole, advice=advice)
        return budget
    pending = pending_records(led, ck, checkpoint)
    if remaining is not None:
        budget.check_plan(remaining, exclude=pending,
                          advice=lambda: "the ledger's budget no longer holds this run's "
                                         "remaining worst case")
    return ReplayFilter(budget, pending)


def seeds(ck, seed):
    """(noise_key, seed material): the checkpoint's on resume, else from ``seed`` or OS
    entropy (unseeded: two separate 128-bit draws, docs/vertical.md)."""
    import secrets

    if ck:
        return ck["noise_key"], ck["seed_material"]
    return (None if seed is not None else secrets.randbits(128),
            seed if seed is not None else secrets.randbits(128))


def checkpointer(checkpoint, every, T, *, config, seed, noise_seed, noise_key, data, extra, led,
                 budget):
    """The ``on_round`` hook writing the run's checkpoints (None without a checkpoint path)."""
    from ...checkpoint import Checkpointer, data_fingerprint

    if checkpoint is None:
        return None
    meta = {"config": config, "seed": seed, "seed_material": noise_seed, "noise_key": noise_key,
            "data": data_fingerprint(data), "extra": extra,
            "run_id": None if led is None else led.run_id,
            "ledger_path": None if led is None else os.path.abspath(led.path)}
    return Checkpointer(checkpoint, every, T, meta, budget)


def check_all_replayed(budget, ck, T):
    if ck and getattr(budget, "pending", None):
        raise InputError(f"the ledger holds {len(budget.pending)} records of this run beyond its "
                         f"{T} rounds; it does not belong to this checkpoint")
