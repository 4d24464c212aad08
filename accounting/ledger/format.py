"""The ledger's file format: the header, release, reservation and end lines, their checksums,
and reading a ledger (a torn tail reported, anything else refused as corruption).
"""
from __future__ import annotations

import json
import math
import os
import stat
import zlib
from dataclasses import dataclass, field

from ..accountants import get_accountant
from ..events import MAX_NESTING, DpEvent, check_nesting, event_from_dict
from .locking import LOCK_TIMEOUT, LedgerBusy, _flock
from .pools import _compose_counts


FORMAT = "vflpriv-ledger"


VERSION = 3


#: versions this module reads (1: the header had no checksum; 3: reservation lines)
READABLE_VERSIONS = (1, 2, 3)


#: record types: a release (no "type" key, as in versions 1-2), a reservation, its end
RESERVE, END = "reserve", "end"


class LedgerCorrupt(ValueError):
    """The ledger file is not a valid ledger (bad header, or a bad record before the last)."""


def _canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)


def _crc(obj) -> str:
    return format(zlib.crc32(_canonical(obj).encode("utf-8")) & 0xFFFFFFFF, "08x")


def _loads(raw: bytes):
    """json.loads that turns absurd nesting (RecursionError) into a ValueError."""
    try:
        return json.loads(raw)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def check_budget(budget, where="budget"):
    """A ledger header's budget: None, or {"epsilon": e > 0 finite, "delta": d in (0, 1), ...}."""
    if budget is None:
        return None
    if not isinstance(budget, dict):
        raise ValueError(f"{where} must be a table {{epsilon, delta}}, got {budget!r}")
    eps, delta = budget.get("epsilon"), budget.get("delta")
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not (
            eps > 0 and math.isfinite(eps)):
        raise ValueError(f"{where} epsilon must be a positive finite number, got {eps!r}")
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not 0 < delta < 1:
        raise ValueError(f"{where} delta must be in (0, 1), got {delta!r}")
    if not isinstance(budget.get("per_party", False), bool):
        raise ValueError(f"{where} per_party must be true or false, got {budget['per_party']!r}")
    acc = budget.get("accountant")
    if acc is not None and not isinstance(acc, str):
        raise ValueError(f"{where} accountant must be a name, got {acc!r}")
    return budget


@dataclass
class LedgerRecord:
    seq: int
    run_id: str
    party: str
    round: int
    time: float
    event: DpEvent
    note: str = ""
    #: "release" (every line of a version-1/2 ledger), "reserve" or "end"
    type: str = "release"


@dataclass
class LedgerContents:
    header: dict
    #: the releases (what was spent); reservation lines are in ``reservations`` / ``ends``
    records: list = field(default_factory=list)
    torn_tail: bool = False
    torn_bytes: int = 0
    reservations: list = field(default_factory=list)
    ends: list = field(default_factory=list)

    def live_reservations(self) -> list:
        """Reservation records whose run has not ended (a crash leaves them; ``vflpriv ledger
        release RUN_ID`` or ``expire --older-than`` ends them)."""
        ended = {r.run_id: r.seq for r in self.ends}
        return [r for r in self.reservations if ended.get(r.run_id, -1) < r.seq]

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


def _parse_header(path, raw: bytes) -> dict:
    try:
        header = _loads(raw)
    except ValueError:
        raise LedgerCorrupt(f"{path}: line 1 is not a ledger header") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise LedgerCorrupt(f"{path}: line 1 is not a {FORMAT} header")
    version = header.get("version")
    if version not in READABLE_VERSIONS:
        raise LedgerCorrupt(f"{path}: unsupported ledger version {version!r}")
    if version >= 2:
        body = dict(header)
        crc = body.pop("crc", None)
        try:
            ok = crc == _crc(body)
        except (ValueError, TypeError):       # NaN or inf in the header: not canonical JSON
            ok = False
        if not ok:
            raise LedgerCorrupt(f"{path}: the header (line 1) fails its checksum: it was altered "
                                "or damaged (the budget in it cannot be trusted)")
    try:
        check_budget(header.get("budget"))
    except ValueError as exc:
        raise LedgerCorrupt(f"{path}: header {exc}") from None
    return header


def _parse_record(raw: bytes, seq: int) -> LedgerRecord:
    try:
        rec = json.loads(raw)
    except RecursionError:
        raise ValueError(f"nested too deeply: a record's events nest at most {MAX_NESTING} deep "
                         "(accounting.events.MAX_NESTING)") from None
    if isinstance(rec, dict) and "event" in rec:
        check_nesting(rec["event"])         # before the checksum, which recurses as deep
    crc = rec.pop("crc")
    if crc != _crc(rec):
        raise ValueError("checksum mismatch")
    if rec["seq"] != seq:
        raise ValueError(f"sequence number {rec['seq']} where {seq} was due")
    kind = rec.get("type", "release")
    if kind not in ("release", RESERVE, END):
        raise ValueError(f"unknown record type {kind!r}")
    return LedgerRecord(seq=rec["seq"], run_id=rec["run_id"], party=rec["party"],
                        round=rec["round"], time=rec["time"],
                        event=None if kind == END else event_from_dict(rec["event"]),
                        note=rec.get("note", ""), type=kind)


def _split(records):
    """(releases, reservations, ends) of parsed lines."""
    out = {"release": [], RESERVE: [], END: []}
    for r in records:
        out[r.type].append(r)
    return out["release"], out[RESERVE], out[END]


_RECORD_ERRORS = (ValueError, KeyError, TypeError, AttributeError, RecursionError)


def _parse_body(path, data: bytes, first_seq: int, first_line: int):
    """Records in ``data`` (complete lines, maybe a torn last one): (records, torn_bytes)."""
    lines = data.split(b"\n")
    ends_with_newline = data.endswith(b"\n")
    if ends_with_newline or not lines[-1]:
        lines = lines[:-1]
    records = []
    for i, raw in enumerate(lines):
        is_last = i == len(lines) - 1
        try:
            records.append(_parse_record(raw, first_seq + len(records)))
        except _RECORD_ERRORS as exc:
            if is_last and not ends_with_newline:
                return records, len(raw)
            raise LedgerCorrupt(f"{path}: record on line {first_line + i} is invalid "
                                f"({exc})") from None
    return records, 0


def read_ledger(path) -> LedgerContents:
    """Parse and check a ledger file; see the module docstring for torn tails and corruption."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):          # a FIFO would block the reader forever
            raise LedgerCorrupt(f"ledger {str(path)!r} is not a regular file")
        with open(path, "rb") as fh:
            # a shared lock: a writer's line is either all there or not at all
            _flock(fh.fileno(), str(path), LOCK_TIMEOUT, shared=True)
            data = fh.read()
    except OSError as exc:
        if isinstance(exc, LedgerBusy):
            raise
        raise LedgerCorrupt(f"cannot read ledger {str(path)!r}: {exc.strerror}") from None
    return _parse(path, data)


def _parse(path, data: bytes) -> LedgerContents:
    if not data or data.startswith(b"\n"):
        raise LedgerCorrupt(f"{path}: empty file, not a ledger")
    end = data.find(b"\n")
    if end < 0:
        try:
            header = _parse_header(path, data)
        except LedgerCorrupt:
            # Crashed while writing the header: nothing was released yet.
            return LedgerContents(header={}, torn_tail=True, torn_bytes=len(data))
        data += b"\n"                      # a complete header whose newline was cut
        end = len(data) - 1
    else:
        header = _parse_header(path, data[:end])
    records, torn = _parse_body(path, data[end + 1:], 0, 2)
    releases, reservations, ends = _split(records)
    return LedgerContents(header=header, records=releases, torn_tail=torn > 0, torn_bytes=torn,
                          reservations=reservations, ends=ends)
