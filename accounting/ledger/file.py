"""The ledger file: opened (checked, a torn tail repaired), appended to durably under its
lock, and read back as the records of each run and party.
"""
from __future__ import annotations

import contextlib
import os
import stat
import threading
import time
import uuid

from ..events import DpEvent, flatten
from .format import (END, FORMAT, RESERVE, VERSION, LedgerCorrupt, LedgerRecord, _canonical, _crc,
                     _parse, _parse_body, check_budget)
from .locking import LOCK_TIMEOUT, LedgerBusy, _flock, _read_all
from .pools import _compose_counts, _leaf_counts
from .reservations import Reservations


class Ledger(Reservations):
    """Append-only ledger file.  Opening an existing ledger continues it (after checking it);
    a torn tail left by a crash is cut off before new records are appended (the torn bytes were
    never a complete release record: the release they described had not been acknowledged).

    ``budget`` goes into the header of a new ledger; an existing ledger keeps its own header
    (read it from ``ledger.budget``).  Every write holds the file's advisory lock (module
    docstring); ``lock_timeout`` bounds the wait for it."""

    def __init__(self, path, *, budget: dict | None = None, run_id: str | None = None,
                 lock_timeout: float = LOCK_TIMEOUT):
        self.path = os.fspath(path)
        self.run_id = run_id or uuid.uuid4().hex
        self.lock_timeout = float(lock_timeout)
        self._lock = threading.RLock()
        self._fd = None
        self._depth = 0
        self.repaired_torn_tail = False
        self.header, self.records, self._offset = {}, [], 0
        self._counts: dict = {}
        if budget is not None:
            check_budget(budget)
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            st = None
        except OSError as exc:
            raise LedgerCorrupt(f"cannot open ledger {self.path!r}: {exc.strerror}") from None
        if st is not None and not stat.S_ISREG(st.st_mode):
            raise LedgerCorrupt(f"ledger {self.path!r} is not a regular file")
        with self.transaction(create=True) as fd:
            data = _read_all(fd)
            if not data:
                self._write_header(fd, budget)
                return
            contents = _parse(self.path, data)
            if not contents.header:          # torn header: nothing was released yet
                os.ftruncate(fd, 0)
                self.repaired_torn_tail = True
                self._write_header(fd, budget)
                return
            size = len(data)
            if contents.torn_tail:
                size -= contents.torn_bytes
                os.ftruncate(fd, size)
                self.repaired_torn_tail = True
            if not data[:size].endswith(b"\n"):
                # A crash can cut the write just before a record's newline: the record is
                # complete and read, but without its newline the next append would join its line.
                os.write(fd, b"\n")
                size += 1
            if self.repaired_torn_tail or size != len(data):
                os.fsync(fd)
            self.header, self._offset = contents.header, size
            for r in sorted(contents.records + contents.reservations + contents.ends,
                            key=lambda r: r.seq):
                self._add(r)

    # -- locking and synchronisation with other writers --------------------------------------

    @contextlib.contextmanager
    def transaction(self, create=False):
        """Hold the ledger's exclusive lock (re-entrant in this process); yields the file
        descriptor.  Inside, :meth:`refresh` has run: ``records`` include every process's.
        Only opening a ledger creates the file (a ledger deleted while in use is an error)."""
        with self._lock:
            if self._depth == 0:
                flags = os.O_RDWR | os.O_APPEND | (os.O_CREAT if create else 0)
                try:
                    fd = os.open(self.path, flags, 0o644)
                except OSError as exc:
                    raise LedgerCorrupt(f"cannot open ledger {self.path!r}: "
                                        f"{exc.strerror}") from None
                try:
                    _flock(fd, self.path, self.lock_timeout)
                except BaseException:
                    os.close(fd)
                    raise
                self._fd = fd
            self._depth += 1
            try:
                if self._depth == 1 and self.header:
                    self._sync(self._fd)
                yield self._fd
            finally:
                self._depth -= 1
                if self._depth == 0:
                    fd, self._fd = self._fd, None
                    os.close(fd)           # releases the lock

    def refresh(self) -> None:
        """Read the records other processes appended since this ledger last looked."""
        with self.transaction():
            pass

    def _sync(self, fd):
        size = os.fstat(fd).st_size
        if size == self._offset:
            return
        if size < self._offset:
            raise LedgerCorrupt(f"{self.path}: the file shrank from {self._offset} to {size} "
                                "bytes while in use (records were removed)")
        data = os.pread(fd, size - self._offset, self._offset)
        records, torn = _parse_body(self.path, data, self.next_seq, self.next_seq + 2)
        for r in records:
            if r.run_id == self.run_id and r.type != END:
                raise LedgerBusy(f"another process appended records of this run ({r.run_id}) to "
                                 f"{self.path!r}: two runs resumed from one checkpoint at once? "
                                 "This one stops before releasing anything more")
        end = size
        if torn:                              # a writer crashed mid-line: cut it, as on open
            end -= torn
            os.ftruncate(fd, end)
            self.repaired_torn_tail = True
        if end > self._offset and not data[:end - self._offset].endswith(b"\n"):
            os.write(fd, b"\n")              # a complete record whose newline was cut
            end += 1
        if end != size:
            os.fsync(fd)
        for r in records:
            self._add(r)
        self._offset = end

    def _add(self, record):
        self._seq = record.seq + 1
        kind = getattr(record, "type", "release")
        res = self._reservation_state()
        if kind == RESERVE:
            # a new reservation of a party replaces the run's previous one for that party
            res.setdefault(record.run_id, {})[record.party] = (
                _leaf_counts(record.event), record.time, record.seq)
            res.pop(("used", record.run_id), None)
            return
        if kind == END:
            res.pop(record.run_id, None)
            res.pop(("used", record.run_id), None)
            return
        self.records.append(record)
        self._count(record.party, record.event)
        if record.run_id in res:
            self._consume(record.run_id, record.party, record.event, commit=True)
        if record.run_id == self.run_id:
            self._own = getattr(self, "_own", 0) + 1

    @property
    def next_seq(self) -> int:
        """The sequence number of the next line (releases and reservation lines)."""
        return getattr(self, "_seq", len(self.records))

    # -- reservations -------------------------------------------------------------------------

    @property
    def run_records(self) -> int:
        """How many records belong to this ledger's run id (other runs may share the file)."""
        return getattr(self, "_own", 0)

    # -- header, counts, appends ---------------------------------------------------------------

    @property
    def budget(self) -> dict | None:
        """The budget in the header (None when the ledger was created without one)."""
        return (self.header or {}).get("budget")

    def governing_budget(self, epsilon, delta, *, per_party=False):
        """(epsilon, delta) a run on this ledger is held to: the header's budget when it has one
        (a run cannot raise it by asking for more), else the run's own."""
        b = self.budget
        if b is None:
            return epsilon, delta
        if bool(b.get("per_party", False)) != bool(per_party):
            kinds = ("one shared budget", "one budget per party")
            raise ValueError(f"ledger {self.path!r} keeps {kinds[bool(b.get('per_party'))]}; "
                             f"this run charges {kinds[bool(per_party)]}: use another ledger")
        return float(b["epsilon"]), float(b["delta"])

    def relations(self) -> set:
        """The neighbouring relations of every release and live reservation in the ledger (a
        ledger whose records mix relations cannot be composed, so cannot be verified)."""
        out = set(getattr(self, "_relations", ()))     # the releases' (kept by _count)
        for run in self.live_reservations().values():
            out.update(leaf.neighboring for leaves, _, _ in run.values() for leaf in leaves)
        return out

    def _count(self, party: str, event: DpEvent) -> None:
        per = self._counts.setdefault(party, {})
        if event not in per:         # a new distinct event: note its relations once
            if not hasattr(self, "_relations"):
                self._relations = set()
            self._relations.update(leaf.neighboring for leaf, _ in flatten(event))
        per[event] = per.get(event, 0) + 1

    def counts(self, party=None, exclude=()) -> dict:
        """{event: multiplicity} over all records, or over one party's (minus ``exclude``)."""
        if party is not None:
            total = dict(self._counts.get(str(party), {}))
        else:
            total = {}
            for per in self._counts.values():
                for e, n in per.items():
                    total[e] = total.get(e, 0) + n
        for r in exclude:
            if party is None or r.party == str(party):
                total[r.event] -= 1
                if not total[r.event]:
                    del total[r.event]
        return total

    def _write_header(self, fd, budget):
        header = {"format": FORMAT, "version": VERSION, "created": time.time(), "budget": budget}
        header["crc"] = _crc(header)
        line = (_canonical(header) + "\n").encode("utf-8")
        os.write(fd, line)
        os.fsync(fd)
        self._fsync_dir()
        self.header, self._offset = header, len(line)

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

    def append(self, event: DpEvent, *, party="server", round: int = 0, note: str = "") -> LedgerRecord:
        """Write one release record durably (fsync) and return it."""
        return self._write_line(event, "release", party=party, round=round, note=note)

    def _write_line(self, event, kind, *, party, round, note, run_id=None) -> LedgerRecord:
        if kind != END and not isinstance(event, DpEvent):
            raise ValueError(f"event must be a DpEvent, got {event!r}")
        run_id = self.run_id if run_id is None else run_id
        with self.transaction() as fd:
            rec = {"seq": self.next_seq, "run_id": run_id, "party": str(party),
                   "round": int(round), "time": time.time(), "note": str(note)}
            if kind != END:
                rec["event"] = event.to_dict()
            if kind != "release":
                rec["type"] = kind
            rec["crc"] = _crc(rec)
            line = (_canonical(rec) + "\n").encode("utf-8")
            try:
                written = os.write(fd, line)
                if written != len(line):
                    raise OSError(28, "short write (disk full?)")
                os.fsync(fd)
            except OSError as exc:
                # Cut what was written: the release is refused, not half-recorded.
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, self._offset)
                raise OSError(exc.errno, f"cannot append to the ledger: {exc.strerror}",
                              self.path) from None
            self._offset += len(line)
            record = LedgerRecord(seq=rec["seq"], run_id=run_id, party=str(party),
                                  round=int(round), time=rec["time"], event=event, note=str(note),
                                  type=kind)
            self._add(record)
            return record

    def event(self, party=None) -> DpEvent | None:
        return _compose_counts(self.counts(party))
