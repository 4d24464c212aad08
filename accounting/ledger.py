"""A durable, append-only ledger of privacy releases, and a budget filter in front of it.

File format (JSON Lines, UTF-8).  Line 1 is a header
``{"format": "vflpriv-ledger", "version": 1, "created": ..., "budget": {...} | null}``; each further
line is one release::

    {"seq": 0, "run_id": "...", "party": "party-0", "round": 3, "time": 1732190000.1,
     "event": {...DpEvent.to_dict()...}, "note": "...", "crc": "9a1c03f2"}

``crc`` is the CRC-32 (hex) of the record's canonical JSON without the ``crc`` key, so a record
that was cut short or altered is detected.  Every append is written in one ``write`` call, then
flushed and fsync'ed before ``append`` returns: after it returns, the record survives a crash.

Reading: a last line that does not parse or fails its checksum and lacks its newline is a torn
tail (a crash during the write); it is reported (``LedgerContents.torn_tail``) and the records
before it are kept.  A bad record anywhere else is corruption and raises ``LedgerCorrupt``: the
ledger is never silently shortened.
"""
from __future__ import annotations

import json
import math
import os
import threading
import time
import uuid
import zlib
from dataclasses import dataclass, field

from .accountants import get_accountant
from .accountants.base import check_delta, check_epsilon
from .events import Composed, DpEvent, SelfComposed, event_from_dict

FORMAT = "vflpriv-ledger"
VERSION = 1


class LedgerCorrupt(ValueError):
    """The ledger file is not a valid ledger (bad header, or a bad record before the last)."""


class BudgetExceeded(RuntimeError):
    """A release would take the spend past the budget; nothing was released or recorded."""

    def __init__(self, message, *, spent=None, would_spend=None, budget=None):
        super().__init__(message)
        self.spent, self.would_spend, self.budget = spent, would_spend, budget


def _canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)


def _crc(obj) -> str:
    return format(zlib.crc32(_canonical(obj).encode("utf-8")) & 0xFFFFFFFF, "08x")


@dataclass
class LedgerRecord:
    seq: int
    run_id: str
    party: str
    round: int
    time: float
    event: DpEvent
    note: str = ""


@dataclass
class LedgerContents:
    header: dict
    records: list = field(default_factory=list)
    torn_tail: bool = False
    torn_bytes: int = 0

    def event(self, run_id=None, party=None) -> DpEvent | None:
        """All recorded releases (optionally of one run / party) as one composed event."""
        evs = [r.event for r in self.records
               if (run_id is None or r.run_id == run_id) and (party is None or r.party == party)]
        return _compose(evs)

    def spend(self, delta: float, accountant: str = "best", party=None) -> float:
        """Epsilon spent so far (0.0 for an empty ledger), recomputed from the records."""
        ev = self.event(party=party)
        return 0.0 if ev is None else get_accountant(accountant).epsilon(ev, delta)


def _compose(events) -> DpEvent | None:
    counts: dict = {}
    for e in events:
        counts[e] = counts.get(e, 0) + 1
    return _compose_counts(counts)


def _compose_counts(counts: dict) -> DpEvent | None:
    """One event from {event: multiplicity} (identical releases become one SelfComposed)."""
    if not counts:
        return None
    parts = [e if n == 1 else SelfComposed(e, n) for e, n in counts.items()]
    return parts[0] if len(parts) == 1 else Composed(tuple(parts))


def read_ledger(path) -> LedgerContents:
    """Parse and check a ledger file; see the module docstring for torn tails and corruption."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise LedgerCorrupt(f"cannot read ledger {str(path)!r}: {exc.strerror}") from None
    lines = data.split(b"\n")
    ends_with_newline = data.endswith(b"\n")
    if ends_with_newline:
        lines = lines[:-1]
    if not lines or not lines[0]:
        raise LedgerCorrupt(f"{path}: empty file, not a ledger")
    try:
        header = json.loads(lines[0])
    except ValueError:
        if len(lines) == 1 and not ends_with_newline:
            # Crashed while writing the header: nothing was released yet.
            return LedgerContents(header={}, torn_tail=True, torn_bytes=len(lines[0]))
        raise LedgerCorrupt(f"{path}: line 1 is not a ledger header") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise LedgerCorrupt(f"{path}: line 1 is not a {FORMAT} header")
    if header.get("version") != VERSION:
        raise LedgerCorrupt(f"{path}: unsupported ledger version {header.get('version')!r}")
    out = LedgerContents(header=header)
    body = lines[1:]
    for i, raw in enumerate(body):
        is_last = i == len(body) - 1
        try:
            rec = json.loads(raw)
            crc = rec.pop("crc")
            if crc != _crc(rec):
                raise ValueError("checksum mismatch")
            if rec["seq"] != len(out.records):
                raise ValueError(f"sequence number {rec['seq']} where {len(out.records)} was due")
            out.records.append(LedgerRecord(
                seq=rec["seq"], run_id=rec["run_id"], party=rec["party"], round=rec["round"],
                time=rec["time"], event=event_from_dict(rec["event"]), note=rec.get("note", "")))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            if is_last and not ends_with_newline:
                out.torn_tail, out.torn_bytes = True, len(raw)
                break
            raise LedgerCorrupt(f"{path}: record on line {i + 2} is invalid ({exc})") from None
    return out


class Ledger:
    """Append-only ledger file.  Opening an existing ledger continues it (after checking it);
    a torn tail left by a crash is cut off before new records are appended (the torn bytes were
    never a complete release record: the release they described had not been acknowledged)."""

    def __init__(self, path, *, budget: dict | None = None, run_id: str | None = None):
        self.path = os.fspath(path)
        self.run_id = run_id or uuid.uuid4().hex
        self._lock = threading.Lock()
        self.repaired_torn_tail = False
        if os.path.exists(self.path) and os.path.getsize(self.path) > 0:
            contents = read_ledger(self.path)
            if contents.torn_tail:
                self._truncate_torn(contents)
                # a torn header leaves an empty file: rewrite the header below, do not re-read
                contents = read_ledger(self.path) if contents.header else contents
            if not contents.header:
                self._write_header(budget)
                contents = read_ledger(self.path)
            self._end_last_line()
            self.header = contents.header
            self.records = contents.records
        else:
            self._write_header(budget)
            self.records = []
        # Running multiplicities per party, so that the spend after one more release is composed
        # in O(distinct events), not O(records): a long run charges thousands of releases.
        self._counts: dict = {}
        for r in self.records:
            self._count(r.party, r.event)

    def _count(self, party: str, event: DpEvent) -> None:
        per = self._counts.setdefault(party, {})
        per[event] = per.get(event, 0) + 1

    def counts(self, party=None) -> dict:
        """{event: multiplicity} over all records, or over one party's."""
        if party is not None:
            return dict(self._counts.get(str(party), {}))
        total: dict = {}
        for per in self._counts.values():
            for e, n in per.items():
                total[e] = total.get(e, 0) + n
        return total

    def _write_header(self, budget):
        self.header = {"format": FORMAT, "version": VERSION, "created": time.time(),
                       "budget": budget}
        with open(self.path, "wb") as fh:
            fh.write((_canonical(self.header) + "\n").encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())
        self._fsync_dir()

    def _fsync_dir(self):
        try:
            fd = os.open(os.path.dirname(os.path.abspath(self.path)), os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(fd)
        except OSError:
            pass
        finally:
            os.close(fd)

    def _end_last_line(self):
        # A crash can cut the write just before a record's newline: the record is complete and
        # read (counted), but without its newline the next append would join its line.
        with open(self.path, "rb") as fh:
            fh.seek(-1, os.SEEK_END)
            last = fh.read(1)
        if last != b"\n":
            with open(self.path, "ab") as fh:
                fh.write(b"\n")
                fh.flush()
                os.fsync(fh.fileno())

    def _truncate_torn(self, contents):
        size = os.path.getsize(self.path)
        with open(self.path, "r+b") as fh:
            fh.truncate(size - contents.torn_bytes)
            fh.flush()
            os.fsync(fh.fileno())
        self.repaired_torn_tail = True

    def append(self, event: DpEvent, *, party="server", round: int = 0, note: str = "") -> LedgerRecord:
        """Write one release record durably (flush + fsync) and return it."""
        if not isinstance(event, DpEvent):
            raise ValueError(f"event must be a DpEvent, got {event!r}")
        with self._lock:
            rec = {"seq": len(self.records), "run_id": self.run_id, "party": str(party),
                   "round": int(round), "time": time.time(), "event": event.to_dict(),
                   "note": str(note)}
            rec["crc"] = _crc(rec)
            line = (_canonical(rec) + "\n").encode("utf-8")
            with open(self.path, "ab") as fh:
                fh.write(line)
                fh.flush()
                os.fsync(fh.fileno())
            record = LedgerRecord(seq=rec["seq"], run_id=self.run_id, party=str(party),
                                  round=int(round), time=rec["time"], event=event, note=str(note))
            self.records.append(record)
            self._count(record.party, event)
            return record

    def event(self, party=None) -> DpEvent | None:
        return _compose_counts(self.counts(party))


class BudgetFilter:
    """Refuses a release that would take the spend past (epsilon, delta), before it happens.

    ``charge(event, party=..., round=...)`` computes what the ledger's releases plus ``event``
    would cost; if that exceeds the budget it raises :class:`BudgetExceeded` and records nothing;
    otherwise it appends the record durably and returns it.  Draw the noise only after ``charge``
    returns.  ``per_party=True`` keeps one budget per party (each party's records compose alone,
    e.g. local DP); otherwise all releases share one budget.
    """

    def __init__(self, ledger: Ledger, epsilon: float, delta: float, *, accountant: str = "best",
                 per_party: bool = False):
        self.ledger = ledger
        # Only +inf means "no budget"; NaN and -inf are bad input, not an unlimited budget.
        self.epsilon = math.inf if epsilon == math.inf else check_epsilon(epsilon)
        if not self.epsilon > 0:
            raise ValueError(f"budget epsilon must be positive, got {epsilon!r}")
        self.delta = check_delta(delta)
        self.accountant = get_accountant(accountant)
        self.per_party = per_party

    def _with(self, event, party):
        counts = self.ledger.counts(party if self.per_party else None)
        counts[event] = counts.get(event, 0) + 1
        return _compose_counts(counts)

    def would_spend(self, event: DpEvent, party="server") -> float:
        """Epsilon (by the filter's accountant) after releasing ``event``."""
        return self.accountant.epsilon(self._with(event, party), self.delta)

    def fits(self, event: DpEvent, party="server") -> bool:
        """Whether the spend after ``event`` stays within the budget.

        With the ``best`` accountant the minimum over accountants is within budget exactly when
        one of them is, so the cheap ones are asked first and the costly PLD only when needed.
        """
        total = self._with(event, party)
        for acc in getattr(self.accountant, "accountants", [self.accountant]):
            if acc.supports(total) and acc.epsilon(total, self.delta) <= self.epsilon:
                return True
        return False

    def spent(self, party=None) -> float:
        ev = self.ledger.event(party=party if self.per_party else None)
        return 0.0 if ev is None else self.accountant.epsilon(ev, self.delta)

    def charge(self, event: DpEvent, *, party="server", round: int = 0, note: str = "") -> LedgerRecord:
        if math.isinf(self.epsilon):
            return self.ledger.append(event, party=party, round=round, note=note)
        if not self.fits(event, party):
            before, after = self.spent(party), self.would_spend(event, party)
            raise BudgetExceeded(
                f"release refused: it would take the spend from epsilon={before:.6g} to "
                f"{after:.6g}, past the budget epsilon={self.epsilon:g} at delta={self.delta:g} "
                f"({self.accountant.name} accountant); nothing was released",
                spent=before, would_spend=after, budget=(self.epsilon, self.delta))
        return self.ledger.append(event, party=party, round=round, note=note)
