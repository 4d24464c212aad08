"""A durable, append-only ledger of privacy releases (its budget filter is in budget.py).

File format (JSON Lines, UTF-8).  Line 1 is a header
``{"format": "vflpriv-ledger", "version": 2, "created": ..., "budget": {...} | null, "crc": ...}``;
each further line is one release::

    {"seq": 0, "run_id": "...", "party": "party-0", "round": 3, "time": 1732190000.1,
     "event": {...DpEvent.to_dict()...}, "note": "...", "crc": "9a1c03f2"}

``crc`` is the CRC-32 (hex) of the line's canonical JSON without the ``crc`` key, so a header or
record that was cut short or altered is detected (an edited budget is corruption, not a new
budget).  A header's budget is ``{"epsilon": e, "delta": d}`` (``e`` a positive finite number,
``d`` in (0, 1); optionally ``"per_party": true`` and ``"accountant"``); anything else, NaN or a
negative number included, is corruption.  Version-1 headers (written before the header had a
checksum) are still read; their budget is checked the same way.

Durability: every append is written in one ``write`` call, then fsync'ed before ``append``
returns: after it returns, the record survives a crash.

Concurrency: every write (creating the header, repairing a torn tail, appending) happens under an
exclusive advisory lock on the ledger file (``fcntl.flock``), and a :class:`BudgetFilter` holds
the same lock from its budget check through the durable append.  Under the lock the ledger first
reads what other processes appended since it last looked, so writers in several processes
serialize, sequence numbers stay consecutive and the budget holds across processes.  A writer
waits at most ``lock_timeout`` seconds (default 60) for the lock, then raises :class:`LedgerBusy`.
Records of this ledger's own run id appended by another process (two resumes of one checkpoint
at once) stop the run (:class:`LedgerBusy`).

Reservations (version 3): a run writes its whole worst-case plan as one line
``{"seq", "run_id", "party", "round", "time", "type": "reserve", "event": {...}, "note", "crc"}``
under the lock before its first release, and ``{"seq", "run_id", "type": "end", "party",
"round", "time", "note", "crc"}`` when it ends (its unused reservation is then released).  A
reservation is *live* from its line until an ``end`` line of its run; what it still holds is the
reserved leaves minus the leaves of that run's releases since (``Ledger.remaining``).  Lines
without ``type`` are releases, so ledgers written before reservations (versions 1, 2) read as
before; older readers count a reservation line in a version-2 file as a release and stop at an
``end`` line (no event): they never under-count.

Reading: a last line that does not parse or fails its checksum and lacks its newline is a torn
tail (a crash during the write); it is reported (``LedgerContents.torn_tail``) and the records
before it are kept.  A bad record anywhere else is corruption and raises ``LedgerCorrupt``: the
ledger is never silently shortened.
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
import json
import math
import os
import stat
import threading
import time
import uuid
import weakref
import zlib
from dataclasses import dataclass, field
from fractions import Fraction

from .accountants import get_accountant
from .events import (MAX_NESTING, Composed, DiscreteGaussian, DistributedDiscreteGaussian,
                     DpEvent, Gaussian, SelfComposed, check_nesting, event_from_dict, flatten)

FORMAT = "vflpriv-ledger"
VERSION = 3
#: versions this module reads (1: the header had no checksum; 3: reservation lines)
READABLE_VERSIONS = (1, 2, 3)
#: record types: a release (no "type" key, as in versions 1-2), a reservation, its end
RESERVE, END = "reserve", "end"
#: seconds a writer waits for another process's lock before :class:`LedgerBusy`
LOCK_TIMEOUT = 60.0


class LedgerCorrupt(ValueError):
    """The ledger file is not a valid ledger (bad header, or a bad record before the last)."""


class LedgerBusy(TimeoutError):
    """Another process holds the ledger's lock for too long, or writes this run's records."""


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


def dominates(big, small) -> bool:
    """Whether the leaf release ``big`` is at least as private-costly as ``small`` for every
    accountant's analysis: same kind and neighbouring relation, and a privacy parameter at least
    as large (Gaussian mu, Laplace / selection epsilon, zCDP rho, (eps, delta)), or the same
    sampling rate with at most the noise; a private selection with the same stopping rule, a
    covered base and stopping parameters at least as costly.  A run may spend a reserved unit of
    ``big`` on ``small`` (e.g. a round that releases fewer features than its worst case)."""
    from .events import (ApproxDP, Exponential, Gaussian, Laplace, PoissonSubsampledGaussian,
                         PrivateSelection, PureDP, ReportNoisyMax, ZCDP)

    if type(big) is not type(small) or big.neighboring != small.neighboring:
        return False
    if isinstance(big, (DiscreteGaussian, DistributedDiscreteGaussian)) and (
            small.resolution is not None or big.resolution is not None):
        # with a lattice stated the release is also charged as a Gaussian plus its TV: a plain
        # one covers it by its Renyi mu (its plan was checked by that bound alone); one with a
        # lattice covers only one with a lattice, in every amount
        if big.resolution is None:
            return small.mu <= big.mu
        return (small.resolution is not None and small.mu <= big.mu
                and small.gaussian_mu <= big.gaussian_mu and small.tv <= big.tv)
    if isinstance(big, (Gaussian, DiscreteGaussian, DistributedDiscreteGaussian)):
        return small.mu <= big.mu
    if isinstance(big, ReportNoisyMax):
        return small.noise == big.noise and small.epsilon <= big.epsilon
    if isinstance(big, (Laplace, Exponential, PureDP)):
        return small.epsilon <= big.epsilon
    if isinstance(big, ApproxDP):
        return small.epsilon <= big.epsilon and small.delta <= big.delta
    if isinstance(big, ZCDP):
        return small.rho <= big.rho
    if isinstance(big, PoissonSubsampledGaussian):
        return (small.sample_rate == big.sample_rate
                and small.noise_multiplier >= big.noise_multiplier)
    if isinstance(big, PrivateSelection):
        # the Renyi bound (its only analysis, rdp.rdp_private_selection) grows with the base's
        # curve, with mu (Poisson), and with eta and 1/gamma (E[K] and the (1 + eta) log(1/gamma)
        # term both do); a base is covered by an equal base or a dominating leaf
        if big.stopping != small.stopping or not (
                big.base == small.base or dominates(big.base, small.base)):
            return False
        if big.stopping == "poisson":
            return small.mu <= big.mu
        return small.eta <= big.eta and small.gamma >= big.gamma
    return False


#: leaves held as a pool of mu^2: Gaussians (exact composition, mu-GDP) and, apart from them,
#: discrete Gaussians (their Renyi curves alpha mu^2 / 2 add: the only analysis they have),
#: distributed ones in the discrete pool (the same curve, with their proven mu)
_POOLED = (Gaussian, DiscreteGaussian, DistributedDiscreteGaussian)


def _pooled(leaf) -> bool:
    return type(leaf) in _POOLED


#: the pools of the discrete Gaussians with their lattice stated (``accounting.lattice``):
#: charged by ``pld`` / ``optimal`` as Gaussians of mu = gaussian_mu plus their TV, and by
#: ``rdp`` with their Renyi mu, so a reservation holds all three amounts and a release must fit
#: in each (then every accountant's value of what is released stays within what was reserved)
_LATTICE = f"mu2:{DiscreteGaussian.kind}:lattice"
_LATTICE_GAUSSIAN = f"gmu2:{DiscreteGaussian.kind}:lattice"
_LATTICE_TV = f"tv:{DiscreteGaussian.kind}:lattice"


def _pool_key(leaf):
    if type(leaf) is Gaussian:
        return ("mu2", leaf.neighboring)
    if getattr(leaf, "resolution", None) is not None:
        return (_LATTICE, leaf.neighboring)
    return (f"mu2:{DiscreteGaussian.kind}", leaf.neighboring)


def _pool_needs(leaf, n) -> dict:
    """{pool key: amount} one pooled leaf released n times takes (exact fractions)."""
    key = _pool_key(leaf)
    needs = {key: n * Fraction(leaf.mu) ** 2}
    if key[0] == _LATTICE:
        rel = leaf.neighboring
        needs[(_LATTICE_GAUSSIAN, rel)] = n * Fraction(leaf.gaussian_mu) ** 2
        needs[(_LATTICE_TV, rel)] = n * Fraction(leaf.tv)
    return needs


def _gaussian_pools(leaves: dict) -> dict:
    """{pool key: sum of n mu^2} of the Gaussian leaves (one pool per kind and neighbouring
    relation; a discrete Gaussian never draws on a Gaussian's pool), exactly (fractions); the
    discrete Gaussians with their lattice stated in pools of their own (Renyi mu^2, Gaussian
    mu^2 and TV)."""
    pools: dict = {}
    for leaf, n in leaves.items():
        if _pooled(leaf):
            for key, amount in _pool_needs(leaf, n).items():
                pools[key] = pools.get(key, 0) + amount
    return pools


def _leaf_counts(event) -> dict:
    """{leaf: multiplicity} of an event (what reservations are held and used in)."""
    return dict(flatten(event))


def _compose_counts(counts: dict) -> DpEvent | None:
    """One event from {event: multiplicity} (identical releases become one SelfComposed)."""
    if not counts:
        return None
    parts = [e if n == 1 else SelfComposed(e, n) for e, n in counts.items()]
    return parts[0] if len(parts) == 1 else Composed(tuple(parts))


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


def _flock(fd, path, timeout, shared=False):
    import fcntl

    deadline = time.monotonic() + timeout
    delay = 0.001
    while True:
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise LedgerBusy(f"ledger {path!r} is locked by another process (waited "
                                 f"{timeout:g} s); try again when that run has finished") from None
            time.sleep(delay)
            delay = min(delay * 2, 0.05)


class Ledger:
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

    def _reservation_state(self) -> dict:
        # {run_id: {party: (leaf counts, time, seq)}, ("used", run_id): {party: leaf counts}}
        if not hasattr(self, "_res"):
            self._res = {}
        return self._res

    # -- reservations -------------------------------------------------------------------------

    def live_reservations(self) -> dict:
        """{run_id: {party: (reserved leaf counts, time, seq)}} of runs that have not ended."""
        return {k: v for k, v in self._reservation_state().items() if not isinstance(k, tuple)}

    def remaining(self, run_id: str, party=None) -> dict:
        """What a live reservation still holds, as {leaf event: count}: the reserved leaves minus
        the units the run's releases since have used (of one party, or pooled over its
        parties).  Gaussian leaves are held as one pool of mu^2 per neighbouring relation
        (Gaussians compose exactly: mu^2 adds, Dong, Roth, Su 2022), returned as one Gaussian
        with the remaining mu."""
        res = self._reservation_state()
        held = res.get(run_id, {})
        used = res.get(("used", run_id), {})
        total: dict = {}
        pools: dict = {}
        for p, (leaves, _, _) in held.items():
            if party is not None and p != str(party):
                continue
            per = used.get(p, {})
            for leaf, n in leaves.items():
                if _pooled(leaf):
                    continue
                n -= per.get(leaf, 0)
                if n > 0:
                    total[leaf] = total.get(leaf, 0) + n
            for key, pool in _gaussian_pools(leaves).items():
                left = pool - per.get(key, 0)
                if left > 0:
                    pools[key] = pools.get(key, 0) + left
        for (name, rel), left in pools.items():
            if name in (_LATTICE_GAUSSIAN, _LATTICE_TV):
                continue        # returned as the discrete pool's Renyi charge (an upper bound)
            cls = Gaussian if name == "mu2" else DiscreteGaussian
            g = cls(1.0 / math.sqrt(float(left)), neighboring=rel)
            total[g] = total.get(g, 0) + 1
        return total

    def covers(self, event, party=None, run_id=None) -> bool:
        """Whether a run's live reservation (default: this run's) still holds ``event``."""
        run_id = self.run_id if run_id is None else run_id
        if run_id not in self.live_reservations():
            return False
        return self._consume(run_id, party, event, commit=False)

    def _consume(self, run_id, party, event, commit) -> bool:
        """Take ``event``'s leaves from the run's reservation: Gaussians from the reserved mu^2
        pool (exact sums of squares, as fractions); other leaves from the same leaf, else from a
        reserved leaf that dominates it (``dominates``).  The party's own reservation first,
        then any of the run's.  Returns whether everything was covered; with ``commit`` the
        units are used."""
        res = self._reservation_state()
        held = res.get(run_id, {})
        used = res.setdefault(("used", run_id), {}) if commit else {
            p: dict(v) for p, v in res.get(("used", run_id), {}).items()}
        if party is not None and (self.budget or {}).get("per_party"):
            order = [str(party)] if str(party) in held else []   # a party's own budget only
        else:
            order = ([str(party)] if party is not None and str(party) in held else []) + \
                [p for p in held if party is None or p != str(party)]
        covered = True
        for leaf, n in _leaf_counts(event).items():
            if _pooled(leaf) and getattr(leaf, "resolution", None) is not None:
                covered = self._consume_lattice(leaf, n, held, used, order) and covered
                continue
            if _pooled(leaf):
                need = n * Fraction(leaf.mu) ** 2
                key = _pool_key(leaf)
                for p in order:
                    pool = _gaussian_pools(held[p][0]).get(key, 0)
                    per = used.setdefault(p, {})
                    take = min(need, pool - per.get(key, 0))
                    if take > 0:
                        per[key] = per.get(key, 0) + take
                        need -= take
                    if not need:
                        break
                covered = covered and need == 0
                continue
            for p in order:
                reserved = held[p][0]
                per = used.setdefault(p, {})
                for cand in ([leaf] if leaf in reserved else []) + \
                        [r for r in reserved if r != leaf and dominates(r, leaf)]:
                    take = min(n, reserved[cand] - per.get(cand, 0))
                    if take > 0:
                        per[cand] = per.get(cand, 0) + take
                        n -= take
                    if not n:
                        break
                if not n:
                    break
            covered = covered and n == 0
        return covered

    @staticmethod
    def _consume_lattice(leaf, n, held, used, order) -> bool:
        """Take a discrete Gaussian with its lattice stated from the reservation: from the
        lattice pools a share that fits in all three (Renyi mu^2, Gaussian mu^2, TV), party by
        party; what is left from the plain discrete pool's Renyi mu^2 (a reservation that holds
        a plain discrete Gaussian was checked by its Renyi bound alone, since no other
        accountant supports one, and the Renyi mu^2 is all that bound sees).  Whether all of
        it was covered."""
        needs = _pool_needs(leaf, n)
        left = Fraction(1)                           # the share of the release still to cover
        for p in order:
            pools = _gaussian_pools(held[p][0])
            per = used.setdefault(p, {})
            share = left
            for key, amount in needs.items():
                if amount > 0:
                    share = min(share, max(Fraction(0), pools.get(key, 0) - per.get(key, 0))
                                / amount)
            if share > 0:
                for key, amount in needs.items():
                    per[key] = per.get(key, 0) + share * amount
                left -= share
            if not left:
                return True
        need = left * Fraction(leaf.mu) ** 2
        key = (f"mu2:{DiscreteGaussian.kind}", leaf.neighboring)
        for p in order:
            pool = _gaussian_pools(held[p][0]).get(key, 0)
            per = used.setdefault(p, {})
            take = min(need, pool - per.get(key, 0))
            if take > 0:
                per[key] = per.get(key, 0) + take
                need -= take
            if not need:
                return True
        return False

    def reserved_counts(self, party=None, exclude_run=None) -> dict:
        """{leaf: count} still held by every live reservation (of one party), except
        ``exclude_run``'s."""
        total: dict = {}
        for run in self.live_reservations():
            if run == exclude_run:
                continue
            for leaf, n in self.remaining(run, party).items():
                total[leaf] = total.get(leaf, 0) + n
        return total

    def reserve(self, event: DpEvent, *, party="server", note: str = "") -> LedgerRecord:
        """Write this run's reservation of ``event`` (its whole remaining plan) durably.  Call it
        under :meth:`transaction` after the budget check (``BudgetFilter.check_plan`` does)."""
        record = self._write_line(event, RESERVE, party=party, round=0, note=note)
        self._own_reservation()
        return record

    def _own_reservation(self):
        """This object's run now holds a live reservation it must end: the innermost
        :func:`ends_reservations` scope ends it, else this object's finalizer."""
        scope = _SCOPE.get()
        if scope is not None and self not in scope:
            scope.append(self)
        if self.path is not None and getattr(self, "_finalizer", None) is None:
            # last resort when no scope ends it: the run is over when its Ledger object is
            # gone (or the interpreter exits); a killed process leaves it for the CLI
            self._finalizer = weakref.finalize(self, _end_quietly, self.path, self.run_id,
                                               self.lock_timeout)

    def take_over_reservation(self) -> bool:
        """A resumed run (this ledger opened under the interrupted run's id) takes over that
        run's live reservation, so it ends when this run ends, like one it made.  A resume
        whose remaining plan is checked writes a new reservation that replaces it anyway; one
        with nothing left to check (killed after its last checkpoint) would otherwise leave the
        killed run's reservation live, blocking the unused part of its plan until someone
        expired it by hand.  Returns whether there was one."""
        with self.transaction():
            if self.run_id not in self.live_reservations():
                return False
        self._own_reservation()
        return True

    def end_reservation(self, run_id: str | None = None, *, note: str = "run ended") -> bool:
        """End a run's live reservation (default: this ledger's run), releasing what it did not
        use.  Returns whether there was one."""
        run_id = self.run_id if run_id is None else str(run_id)
        with self.transaction():
            if run_id not in self.live_reservations():
                return False
            self._write_line(None, END, party="-", round=0, note=note, run_id=run_id)
        if run_id == self.run_id and getattr(self, "_finalizer", None) is not None:
            self._finalizer.detach()
            self._finalizer = None
        return True

    @contextlib.contextmanager
    def reservation_scope(self):
        """Ends this run's reservation when the block exits, by return or by exception."""
        try:
            yield self
        finally:
            self.close_reservation()

    def close_reservation(self, note: str = "run ended") -> None:
        """End this run's reservation if it is live, through a fresh view of the file (another
        process of this run, e.g. a Flower ServerApp, may have appended its releases since this
        object last looked).  Never raises: the run's own outcome is what the caller reports;
        a reservation that could not be ended stays visible to ``vflpriv ledger``."""
        if self.path is None or getattr(self, "_finalizer", None) is None:
            return
        self._finalizer()              # runs _end_quietly once and detaches itself

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


#: the Ledger objects that reserved inside the innermost :func:`ends_reservations` call
_SCOPE: contextvars.ContextVar = contextvars.ContextVar("vflpriv_ledger_scope", default=None)


def ends_reservations(fn):
    """Decorator for a run's entry point: every reservation a Ledger makes during the call is
    ended when it returns or raises (what the run did not use is released).  Nested calls end
    their own; a crash (SIGKILL, power loss) leaves the reservation for ``vflpriv ledger``."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        token = _SCOPE.set([])
        try:
            return fn(*args, **kwargs)
        finally:
            ledgers = _SCOPE.get()
            _SCOPE.reset(token)
            for led in ledgers:
                led.close_reservation()
    return wrapper


def _end_quietly(path, run_id, lock_timeout):
    with contextlib.suppress(Exception):
        if os.path.isfile(path):
            Ledger(path, run_id=uuid.uuid4().hex, lock_timeout=lock_timeout).end_reservation(
                run_id, note="run ended (ledger closed)")


def _read_all(fd) -> bytes:
    size = os.fstat(fd).st_size
    return os.pread(fd, size, 0) if size else b""


class MemoryLedger(Ledger):
    """A Ledger kept in memory (no file): same records, same composition, for runs without a
    ledger file (``vflpriv run`` without ``--ledger``, a party's check of a plan against a
    budget it has not yet written).  BudgetFilter only needs ``records``, ``append``, ``counts``, ``event`` and
    ``transaction`` (here a thread lock: no other process can see this ledger)."""

    def __init__(self, *, budget=None, run_id=None):
        import threading
        import uuid

        self.path = None
        self.run_id = run_id or uuid.uuid4().hex
        self._lock = threading.RLock()
        self.repaired_torn_tail = False
        self.header = {"budget": budget}
        self.records = []
        self._counts = {}

    def transaction(self):
        return self._lock

    def refresh(self):
        pass

    def __getstate__(self):              # the lock does not pickle; a fresh one on load
        state = dict(self.__dict__)
        state.pop("_lock", None)
        return state

    def __setstate__(self, state):
        import threading

        self.__dict__.update(state)
        self._lock = threading.RLock()

    def append(self, event, *, party="server", round=0, note=""):
        with self._lock:
            rec = LedgerRecord(seq=len(self.records), run_id=self.run_id, party=str(party),
                               round=int(round), time=0.0, event=event, note=str(note))
            self._add(rec)
            return rec
