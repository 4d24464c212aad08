"""A vertical run hosted on a remote backend (Flower): its run directory, the parties' ledgers,
what comes back.  Shared by every vertical algorithm with remote roles (:mod:`.remote`,
:mod:`.secure.remote`); the backend itself is the caller's pick (:mod:`vflpriv.runtime.backends`).
"""
from __future__ import annotations

import os
import time

from accounting import Ledger

from ..errors import InputError
from . import privacy as P

def read_back(led, temporary):
    """The ServerApp appended this run's records through its own Ledger object: read them back
    through a fresh one (this object would take them for a concurrent run's).  A ledger that
    lived only in the run's temporary directory (no ``ledger`` given) becomes a memory ledger."""
    if led is None:
        return None
    fresh = Ledger(led.path, run_id=led.run_id)
    if not temporary:
        return fresh
    mem = P.MemoryLedger(budget=fresh.budget, run_id=led.run_id)
    for r in fresh.records:
        mem.append(r.event, party=r.party, round=r.round, note=r.note)
    return mem


def run_dir_for(flower):
    import tempfile

    if getattr(flower, "spec_dir", None):        # a description for separate machines
        os.makedirs(flower.spec_dir, exist_ok=True)
        return flower.spec_dir
    if flower.run_dir:
        os.makedirs(flower.run_dir, exist_ok=True)
        return flower.run_dir
    return tempfile.mkdtemp(prefix="vflpriv-flower-")


def run_hosted(backend, flower, run_dir, data, loss, eta, T, private, server_kwargs, led,
                budget, accountant, epsilon, delta, noise_root, callback, runner=None):
    """One vertical run on a Flower backend; returns ``(RunResult, flower info)``.  A party
    lost or refusing mid-run raises :class:`~vflpriv.runtime.link.PartyLost` /
    ``PartyRefused`` after the run's ledgers were closed (they stay valid: every record in
    them was charged before its release)."""
    import shutil

    from ..runtime.link import raise_recorded
    from . import remote as FV

    spec_dir = getattr(flower, "spec_dir", None)
    own_dir = not (flower.run_dir or spec_dir)   # a temporary directory of ours: removed at the end
    run_dir = run_dir or run_dir_for(flower)
    ledger_in_run_dir = led is not None and os.path.dirname(led.path) == run_dir
    party_ledgers = None
    if private:
        party_ledgers = list(flower.party_ledgers) if flower.party_ledgers else \
            [os.path.join(spec_dir, f"party{k}.ledger") for k in range(data.K)] if spec_dir \
            else [f"{led.path}.party{k}" for k in range(data.K)]
        if len(party_ledgers) != data.K:
            raise InputError(f"party_ledgers names {len(party_ledgers)} files for {data.K} parties")
    progress = None if callback is None else (lambda t: callback(t - 1, float("nan")))
    t0 = time.perf_counter()
    try:
        if runner is None:
            def runner(**kw):
                return FV.run(backend, data, loss, eta, T, server_kwargs=server_kwargs, **kw)
        res, info = runner(private=private, run_dir=run_dir,
                           ledger=None if led is None else led.path,
                           budget=None if budget is None else (budget.epsilon, budget.delta),
                           accountant=accountant, run_id=None if led is None else led.run_id,
                           party_ledgers=party_ledgers,
                           party_budget=flower.party_budget or (epsilon, delta),
                           noise_root=noise_root, connect_timeout=flower.connect_timeout,
                           reply_timeout=flower.reply_timeout, progress=progress,
                           quiet=flower.quiet, spec_dir=spec_dir,
                           pinning=getattr(flower, "pinning", None))
        if spec_dir:                    # nothing ran: ``info`` says what was written
            return None, info
        if private:
            from accounting import Ledger as _L

            info["party_spend"] = {}
            for k, path in enumerate(party_ledgers):
                if os.path.exists(path):
                    pl = _L(path)
                    ev = pl.event()
                    info["party_spend"][str(k)] = {
                        "ledger": None if own_dir and ledger_in_run_dir else path,
                        "releases": len(pl.records),
                        "epsilon": 0.0 if ev is None else float(
                            budget.accountant.epsilon(ev, delta))}
        info["ledger"] = read_back(led, own_dir and ledger_in_run_dir)
    finally:
        if own_dir:
            shutil.rmtree(run_dir, ignore_errors=True)
    if info["error"] is not None:
        raise_recorded(info["error"], info, backend)
    res.seconds = time.perf_counter() - t0
    return res, info


