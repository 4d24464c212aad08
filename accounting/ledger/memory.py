"""A ledger kept in memory, for a run that has no file (each party's own, in tests and in a
process that does not keep one).
"""
from __future__ import annotations


from .file import Ledger
from .format import LedgerRecord


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
