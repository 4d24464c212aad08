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


def ledger_size(cfg) -> int | None:
    """The size of the party's ledger file now (None: no log, no ledger, or not yet written)."""
    path = cfg.get("ledger")
    if not on(cfg) or not path:
        return None
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def charges(cfg, setup, before):
    """One line for each release this message appended to the party's ledger (the records past
    byte ``before``: a role is rebuilt for every message, so nothing is kept between them), each
    with this run's spend so far, recomputed from the ledger."""
    after = ledger_size(cfg)
    if after is None or before is None or after <= before:
        return
    import json

    from accounting import get_accountant, read_ledger

    with open(cfg["ledger"], "rb") as fh:
        fh.seek(before)
        tail = fh.read(after - before).decode("utf-8", "replace")
    rid = setup.get("run_id")
    new = []
    for line in tail.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("event") is not None and rec.get("run_id") == rid and \
                rec.get("type", "release") == "release":         # not a reservation
            new.append(rec)
    if not new:
        return
    delta = cfg.get("budget-delta")
    acc = str(cfg.get("accountant") or setup.get("accountant") or "rdp")
    spent = None
    if delta is not None:             # (runtime sits below vertical: the accountant directly)
        ev = read_ledger(cfg["ledger"]).event(run_id=rid)
        spent = 0.0 if ev is None else get_accountant(acc).epsilon(ev, float(delta))
    for r in new:
        say(cfg, f"run {str(rid)[:12]}: charged {r.get('note') or r['event'].get('kind')} "
                 f"(round {r.get('round')})"
                 + ("" if spent is None else f"; this run has spent epsilon {spent:.4g} at "
                    f"delta {float(delta):g} ({acc}) of its budget {cfg.get('budget-epsilon')}"))
