"""What a party's node says about each run, in plain lines on its own log (stderr of its
SuperNode): the run it was offered and whether it accepted it, a refusal and why, the
intersection size of an alignment, every charge to its own ledger with this run's running spend.

On only where the party's node config says ``party-log = true`` (``vflpriv flower spec`` writes
it into every node config): in process and in tests the roles stay quiet.  Every figure is read
at the time from the party's own ledger, by the accountant its budget names; nothing is stored.
"""
from __future__ import annotations

import os
import sys


def on(cfg) -> bool:
    return bool(cfg.get("party-log"))


def say(cfg, text):
    if on(cfg):
        sys.stderr.write(f"vflpriv party {cfg.get('party')}: {text}\n")
        sys.stderr.flush()


def charges(cfg, setup, store):
    """Lines for the records of this run the party's ledger gained since the last line
    (``store``: the party's state between messages keeps the ledger's size and how many of the
    run's records were said), each with this run's spend so far."""
    path = cfg.get("ledger")
    if not on(cfg) or not path:
        return
    try:
        size = os.stat(path).st_size
    except OSError:
        return
    if store.get("log-size") == size:
        return
    store["log-size"] = size
    from accounting import get_accountant, read_ledger

    rid = setup.get("run_id")
    contents = read_ledger(path)
    mine = [r for r in contents.records if r.run_id == rid]
    said = int(store.get("log-said", 0))
    store["log-said"] = len(mine)
    if len(mine) <= said:
        return
    delta = cfg.get("budget-delta")
    acc = str(cfg.get("accountant") or setup.get("accountant") or "rdp")
    spent = None
    if delta is not None:
        ev = contents.event(run_id=rid)
        spent = 0.0 if ev is None else get_accountant(acc).epsilon(ev, float(delta))
    for r in mine[said:]:
        say(cfg, f"run {str(rid)[:12]}: charged {r.note or r.event.kind} (round {r.round})"
                 + ("" if spent is None else f"; this run has spent epsilon {spent:.4g} at "
                    f"delta {float(delta):g} ({acc}) of its budget {cfg.get('budget-epsilon')}"))
