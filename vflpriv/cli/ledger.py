"""``vflpriv ledger verify|show FILE``: check a privacy ledger and recompute what it spent.

``verify`` parses the ledger with :func:`accounting.read_ledger` (header, per-record CRC-32,
sequence numbers; a torn last line left by a crash is reported, not an error), recomputes the
spend from the recorded events with the accountant, and compares it with the budget in the
header when there is one.  ``--json`` prints ``{"valid": bool, "records": n, "epsilon_spent":
..., "torn_tail": bool, ...}``.  Exit codes: 0 valid (and within its budget), 1 valid but the
recomputed spend exceeds the header's budget, 2 unreadable or corrupt file or bad arguments.

``show`` prints the records and the spend per party and in total, and the live reservations.

``release FILE RUN_ID`` ends one run's live reservation (a run that crashed before it could);
``expire FILE --older-than DURATION`` ends every live reservation older than DURATION (``90s``,
``30m``, ``2h``, ``1d`` or seconds).  Both write one ``end`` line under the ledger's lock; a run
that is in fact still going keeps its releases checked against the budget, now without the
guarantee of its reservation.  Bad input (no such live reservation, a bad duration): one line,
exit 2, nothing written.

Delta: ``--delta`` or else the header's budget delta; when neither exists the ledger must hold
only pure-DP releases (then the spend is their pure epsilon, delta = 0).  Accountant:
``--accountant`` (the spend reported) or else the header's, else ``best``.  The budget verdict
always uses the header's accountant, else ``best`` (as :class:`accounting.BudgetFilter` does):
every accountant gives a valid upper bound, so a weaker one (``basic``, or ``pld`` on
bounded-range events) reporting more than the budget is not an overspend.
"""
from __future__ import annotations

import datetime
import json
import math
import sys


def register(sub):
    p = sub.add_parser("ledger", help="verify or show a privacy ledger",
                       description="Check a ledger's integrity and recompute its privacy spend.")
    cmds = p.add_subparsers(dest="ledger_command", metavar="ACTION", parser_class=type(p))
    for name, help_text in (("verify", "check integrity and recompute the spend"),
                            ("show", "print the records and the spend per party and total")):
        c = cmds.add_parser(name, help=help_text, description=help_text)
        c.add_argument("file", metavar="FILE", help="ledger file (JSON lines)")
        c.add_argument("--delta", type=float, default=None,
                       help="delta at which to report epsilon (default: the header's budget "
                       "delta; required unless every release is pure DP)")
        c.add_argument("--accountant", default=None,
                       help="accountant: basic|advanced|optimal|rdp|pld|best (default: the "
                       "header's, else best)")
        if name == "verify":
            c.add_argument("--json", action="store_true", help="print the result as JSON")
        c.set_defaults(func=verify if name == "verify" else show)
    i = cmds.add_parser("init", help="create a party's ledger with its own budget",
                        description="Create a new ledger whose header holds the budget every "
                        "later run on it must fit (epsilon at delta, across runs and "
                        "processes).  Refused if FILE exists.")
    i.add_argument("file", metavar="FILE", help="the ledger file to create")
    from ..values import real

    i.add_argument("--budget-epsilon", required=True, metavar="E", type=real(0, lo_open=True),
                   help="the ledger's whole budget: a positive finite epsilon")
    i.add_argument("--delta", required=True, metavar="D",
                   type=real(0, 1, lo_open=True, hi_open=True), help="the budget's delta, in (0, 1)")
    i.add_argument("--accountant", default=None, metavar="NAME",
                   help="accountant the budget is checked with: basic|advanced|optimal|rdp|pld|"
                   "best (default: each run's)")
    i.set_defaults(func=init)
    r = cmds.add_parser("release", help="end a run's live reservation (e.g. after a crash)",
                        description="End one run's live reservation, releasing what it did not "
                        "use.")
    r.add_argument("file", metavar="FILE", help="ledger file")
    r.add_argument("run_id", metavar="RUN_ID", help="the run id (or a unique prefix of it), as "
                   "`vflpriv ledger show` prints it")
    r.set_defaults(func=release)
    e = cmds.add_parser("expire", help="end every live reservation older than a duration",
                        description="End every live reservation older than --older-than.")
    e.add_argument("file", metavar="FILE", help="ledger file")
    e.add_argument("--older-than", required=True, metavar="DURATION",
                   help="age: 90s, 30m, 2h, 1d, or seconds")
    e.set_defaults(func=expire)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _budget(contents) -> dict:
    b = contents.header.get("budget") if contents.header else None
    return b if isinstance(b, dict) else {}


def _settings(args, contents):
    from accounting import ACCOUNTANT_NAMES, get_accountant

    budget = _budget(contents)
    delta = args.delta if args.delta is not None else budget.get("delta")
    if delta is not None and (isinstance(delta, bool) or not isinstance(delta, (int, float))
                              or not 0 < delta < 1):
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    acc = args.accountant or budget.get("accountant") or "best"
    if acc not in ACCOUNTANT_NAMES and acc != "best":
        names = ", ".join(list(ACCOUNTANT_NAMES) + ["best"])
        raise ValueError(f"unknown accountant {acc!r}; choose from {names}")
    get_accountant(acc)
    return delta, acc, budget


def _spend(contents, delta, acc, party=None) -> float:
    """Epsilon of the records (of one party) at ``delta``; with delta None, their pure epsilon."""
    from accounting import get_accountant

    ev = contents.event(party=party)
    if ev is None:
        return 0.0
    if delta is not None:
        return get_accountant(acc).epsilon(ev, delta)
    basic = get_accountant("basic")
    eps = basic.epsilon(ev, 0.5) if basic.supports(ev) else math.inf
    if not math.isfinite(eps) or basic.delta(ev, eps) != 0.0:
        raise ValueError("the ledger holds releases that are not pure DP and its header has no "
                         "budget delta: give --delta")
    return eps


def _read(path):
    from accounting import read_ledger
    from accounting.events import flatten

    contents = read_ledger(path)  # LedgerCorrupt (a ValueError) -> one line, exit 2
    # A ledger whose releases mix neighbouring relations (written by a vflpriv that let a
    # sparse run append to a vertical run's ledger) cannot be composed: say which file and how
    # many records of each relation, instead of the accountant's bare "the events mix ...".
    by_relation = {}
    for r in contents.records:
        for rel in {leaf.neighboring for leaf, _ in flatten(r.event)}:
            by_relation[rel] = by_relation.get(rel, 0) + 1
    if len(by_relation) > 1:
        counts = ", ".join(f"{n} under {rel}" for rel, n in sorted(by_relation.items()))
        raise ValueError(f"ledger {str(path)!r} mixes neighbouring relations ({counts}): their "
                         "spends do not compose, so no accountant can verify it; the records "
                         "of one relation belong in another ledger")
    return contents


def _parties(contents):
    seen = []
    for r in contents.records:
        if r.party not in seen:
            seen.append(r.party)
    return seen


def verify(args) -> int:
    from accounting import LedgerCorrupt

    try:
        contents = _read(args.file)
    except LedgerCorrupt as exc:
        if args.json:
            print(json.dumps({"valid": False, "error": str(exc), "records": None,
                              "epsilon_spent": None, "torn_tail": None}))
        raise
    delta, acc, budget = _settings(args, contents)
    total = _spend(contents, delta, acc)
    per_party = {p: _spend(contents, delta, acc, party=p) for p in _parties(contents)}
    b_eps = budget.get("epsilon")
    per_party_budget = bool(budget.get("per_party", False))
    within, b_acc = None, budget.get("accountant") or "best"
    if isinstance(b_eps, (int, float)) and not isinstance(b_eps, bool):
        # The verdict uses the budget's own accountant (the header's, else "best" as in
        # BudgetFilter): every accountant gives a valid upper bound, so the smallest decides;
        # --accountant only changes the spend reported.
        if b_acc == acc:
            tot_b, per_b = total, per_party
        else:
            tot_b = _spend(contents, delta, b_acc)
            per_b = {p: _spend(contents, delta, b_acc, party=p) for p in per_party}
        spent = max(per_b.values(), default=0.0) if per_party_budget else tot_b
        # The filter admitted a release when its spend was <= the budget; allow the last-digit
        # noise of recomputing the same number.
        within = spent <= b_eps * (1 + 1e-9)
    out = {"valid": True, "records": len(contents.records), "epsilon_spent": total,
           "torn_tail": contents.torn_tail, "delta": delta if delta is not None else 0.0,
           "accountant": acc, "epsilon_spent_per_party": per_party,
           "run_ids": sorted({r.run_id for r in contents.records}),
           "budget": budget or None, "budget_accountant": b_acc if within is not None else None,
           "within_budget": within,
           "reservations": [{"run_id": r.run_id, "party": r.party, "time": r.time,
                             "event": r.event.to_dict()} for r in contents.live_reservations()]}
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"{args.file}: valid ledger, {out['records']} record(s)"
              + (", torn tail (an unfinished last write, cut off; never acknowledged)"
                 if contents.torn_tail else ""))
        at = f"at delta={out['delta']:g}"
        if within is not None:
            # the verdict first, with the spend the budget governs: a per-party budget holds
            # each party's own records, so the total (which may exceed it) is not the verdict
            verdict = "within budget" if within else "EXCEEDED"
            if per_party_budget:
                top = max(per_b, key=per_b.get) if per_b else None
                governed = ("no release yet" if top is None else
                            f"largest party spend {per_b[top]:.6g} (party {top})")
                print(f"budget: epsilon={b_eps:g} {at} for each party's own releases "
                      f"({b_acc} accountant): {verdict}; {governed}")
            else:
                print(f"budget: epsilon={b_eps:g} {at} for all releases together "
                      f"({b_acc} accountant): {verdict}; spent {tot_b:.6g}")
        if within is None or per_party_budget or acc != b_acc:
            scope = " (all parties together; the budget is per party)" \
                if per_party_budget and within is not None else ""
            print(f"epsilon spent: {total:.6g} {at} ({acc} accountant){scope}")
        live = _reservations_text(contents)
        if live:
            print(f"{len(live)} live reservation(s):")
            print("\n".join(live))
    sys.stdout.flush()
    return 0 if within in (None, True) else 1


def _reservations_text(contents) -> list:
    rows = []
    now = datetime.datetime.now(datetime.timezone.utc).timestamp()
    for r in contents.live_reservations():
        rows.append(f"  run {r.run_id}  party {r.party}  reserved {_age(now - r.time)} ago: "
                    f"{_event_text(r.event.to_dict())}")
    return rows


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{max(seconds, 0):.0f}s"


def parse_duration(text: str) -> float:
    """Seconds in ``90s``, ``30m``, ``2h``, ``1d`` or a plain number of seconds (>= 0)."""
    t = str(text).strip().lower()
    mult = {"s": 1, "m": 60, "h": 3600, "d": 86400}.get(t[-1:], None)
    num = t[:-1] if mult else t
    try:
        value = float(num) * (mult or 1)
    except ValueError:
        value = math.nan
    if not (value >= 0 and math.isfinite(value)):
        raise ValueError(f"--older-than must be a duration such as 90s, 30m, 2h or 1d, "
                         f"got {text!r}")
    return value


def _end(path, run_ids, note):
    from accounting import Ledger

    led = Ledger(path, lock_timeout=10.0)
    ended = [r for r in run_ids if led.end_reservation(r, note=note)]
    return ended


def release(args) -> int:
    contents = _read(args.file)
    live = sorted({r.run_id for r in contents.live_reservations()})
    match = [r for r in live if r.startswith(args.run_id)] if args.run_id else []
    if len(match) != 1:
        what = "no" if not match else f"{len(match)}"
        raise ValueError(f"{what} live reservation matches run id {args.run_id!r} in "
                         f"{args.file} (live: {', '.join(live) or 'none'})")
    _end(args.file, match, "released by `vflpriv ledger release`")
    print(f"{args.file}: released the reservation of run {match[0]}")
    return 0


def expire(args) -> int:
    import time

    age = parse_duration(args.older_than)
    contents = _read(args.file)
    cutoff = time.time() - age
    old = sorted({r.run_id for r in contents.live_reservations() if r.time <= cutoff})
    ended = _end(args.file, old, f"expired by `vflpriv ledger expire --older-than "
                                 f"{args.older_than}`") if old else []
    print(f"{args.file}: expired {len(ended)} reservation(s)"
          + (f": {', '.join(ended)}" if ended else ""))
    return 0


def _event_text(d: dict) -> str:
    kind = d.get("kind", "?")
    if kind == "self_composed":
        return f"{d.get('count')} x {_event_text(d.get('event', {}))}"
    if kind == "composed":
        return " + ".join(_event_text(e) for e in d.get("events", []))
    if kind == "private_selection":
        stop = ", ".join(f"{k}={d[k]:g}" for k in ("eta", "gamma", "mu")
                         if isinstance(d.get(k), (int, float)))
        return (f"private_selection({d.get('stopping')}, {stop}; best of K runs of "
                f"[{_event_text(d.get('base', {}))}])")
    params = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                       for k, v in d.items() if k not in ("kind", "neighboring"))
    return f"{kind}({params})"


def show(args) -> int:
    contents = _read(args.file)
    delta, acc, budget = _settings(args, contents)
    rows = [("seq", "run", "party", "round", "time (UTC)", "event", "note")]
    for r in contents.records:
        when = datetime.datetime.fromtimestamp(r.time, datetime.timezone.utc)
        rows.append((str(r.seq), r.run_id[:8], r.party, str(r.round),
                     when.strftime("%Y-%m-%d %H:%M:%S"), _event_text(r.event.to_dict()), r.note))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    if contents.torn_tail:
        print("(torn tail: the last line was an unfinished write and is not a record)")
    d_txt = f"delta={delta:g}" if delta is not None else "pure DP (delta=0)"
    print(f"\nspend ({acc} accountant, {d_txt}):")
    for p in _parties(contents):
        print(f"  {p}: epsilon {_spend(contents, delta, acc, party=p):.6g}")
    print(f"  total: epsilon {_spend(contents, delta, acc):.6g}")
    if budget:
        print(f"budget in header: {json.dumps(budget, sort_keys=True)}")
    live = _reservations_text(contents)
    if live:
        print("\nlive reservations (a run that is going, or one that crashed: end it with "
              "`vflpriv ledger release FILE RUN_ID`):")
        print("\n".join(live))
    return 0


def init(args) -> int:
    """``vflpriv ledger init FILE --budget-epsilon E --delta D``: a new ledger with this budget
    (a party sets its own budget, across runs, before any run; the file is never overwritten)."""
    import os

    from ..errors import InputError

    eps, delta = float(args.budget_epsilon), float(args.delta)
    if args.accountant is not None:
        from accounting import get_accountant

        try:
            get_accountant(args.accountant)
        except (KeyError, ValueError):
            raise InputError(f"--accountant must be basic|advanced|optimal|rdp|pld|best, got "
                             f"{args.accountant!r}") from None
    if os.path.lexists(args.file):
        raise InputError(f"ledger {args.file!r} exists: vflpriv ledger init never overwrites one "
                         "(its records are the spend of earlier runs)")
    parent = os.path.dirname(os.path.abspath(args.file))
    if not os.path.isdir(parent):
        raise InputError(f"the folder of {args.file!r} does not exist")
    from accounting import Ledger

    budget = {"epsilon": eps, "delta": delta}
    if args.accountant is not None:
        budget["accountant"] = args.accountant
    Ledger(args.file, budget=budget)
    sys.stdout.write(f"ledger {args.file}: budget epsilon {eps:g} at delta {delta:g}"
                     + (f" ({args.accountant})" if args.accountant else "") + ", nothing spent\n")
    return 0

