"""The advisory lock every writer of a ledger holds, and reading the file under it.
"""
from __future__ import annotations

import os
import time



#: seconds a writer waits for another process's lock before :class:`LedgerBusy`
LOCK_TIMEOUT = 60.0


class LedgerBusy(TimeoutError):
    """Another process holds the ledger's lock for too long, or writes this run's records."""


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


def _read_all(fd) -> bytes:
    size = os.fstat(fd).st_size
    return os.pread(fd, size, 0) if size else b""
