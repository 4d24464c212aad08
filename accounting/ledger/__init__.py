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

Where each part lives: ``format`` (the lines, their checksums, reading a ledger), ``locking``
(the advisory lock), ``pools`` (what a reservation holds), ``reservations`` (reserving,
consuming, ending), ``file`` (:class:`Ledger`: opening, durable appends, the records read back)
and ``memory`` (:class:`MemoryLedger`).
"""
from .file import Ledger
from .format import (END, FORMAT, READABLE_VERSIONS, RESERVE, VERSION, LedgerContents,
                     LedgerCorrupt, LedgerRecord, _crc, check_budget, read_ledger)
from .locking import LOCK_TIMEOUT, LedgerBusy
from .memory import MemoryLedger
from .pools import _compose_counts, dominates
from .reservations import ends_reservations

__all__ = ["Ledger", "MemoryLedger", "LedgerContents", "LedgerRecord", "LedgerCorrupt",
           "LedgerBusy", "read_ledger", "check_budget", "dominates", "ends_reservations",
           "FORMAT", "VERSION", "READABLE_VERSIONS", "RESERVE", "END", "LOCK_TIMEOUT",
           "_crc", "_compose_counts"]
