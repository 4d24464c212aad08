"""Where a party keeps the masked blocks E_k = A_k - U_k it received (offline phase, ``mpc/beaver.py``).

E_k is dense and uniform over Z_{2^64}: 8 n p_k bytes, kept by its helper h(k) (least squares;
by L and H on the logistic path) and read once per secure product with k's block (the helper's
share -E_k^T v is a sum over rows, computed chunk by chunk).  At n = 1e6,
d = 2000 the K blocks are 16 GB, more than this machine's memory, so above ``SPILL_BYTES`` they are
spilled: each received chunk is appended to a file and read back, one chunk at a time, into fresh
memory (plain reads, not a memory map, so that the process's resident memory stays one chunk).

A store is iterated as ``(row offset, chunk)`` pairs in the order received, which is all that
:func:`vflpriv.vertical.secure.mpc.beaver.masked_product` needs; a plain list of pairs (the in-memory
case) is the same interface.  In one process the receivers of one frame (one on the
least-squares path, two on the logistic path) share its memory (``local.Network``); they
likewise share one spilled copy (written once, read-only after).
"""
from __future__ import annotations

import os
import tempfile

import numpy as np

#: spill the received masked blocks to disk when all of them together exceed this many bytes
SPILL_BYTES = 2 * 2 ** 30        # 2.1 GB


class SpilledBlocks:
    """One sender's masked block as row chunks in a file of little-endian uint64 words.

    No file stays open between calls: an append opens the file, writes at the end recorded here
    and closes it; a read opens it for the pass.  A store is therefore plain data (path and
    chunk table), picklable: a party role over a link keeps it in its state, and the file it
    names stays on the party's disk (:mod:`.remote`).  An append writes at ``nbytes``, so a
    message retried from the previous state overwrites instead of duplicating."""

    def __init__(self, directory, sender):
        fd, self.path = tempfile.mkstemp(prefix=f"masked-{sender}-", suffix=".u64", dir=directory)
        os.close(fd)
        self.chunks = []                     # (row offset, rows, cols, byte offset)
        self.nbytes = 0

    def append(self, row, block):
        block = np.ascontiguousarray(block, dtype="<u8")
        with open(self.path, "r+b") as fh:
            fh.seek(self.nbytes)
            fh.write(memoryview(block).cast("B"))
            fh.truncate()
        r, c = block.shape
        self.chunks.append((int(row), r, c, self.nbytes))
        self.nbytes += block.nbytes

    def __iter__(self):
        fd = os.open(self.path, os.O_RDONLY)
        try:
            for row, r, c, off in self.chunks:
                out = np.empty((r, c), dtype="<u8")
                view = memoryview(out).cast("B")
                got = 0
                while got < out.nbytes:
                    n = os.preadv(fd, [view[got:]], off + got)
                    if n <= 0:
                        raise OSError(f"short read of a spilled masked block in {self.path}")
                    got += n
                yield row, out
        finally:
            os.close(fd)

    def __len__(self):
        return len(self.chunks)

    def close(self):
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


class SpillDirectory:
    """A temporary directory for a run's spilled blocks, removed with them by ``close()``."""

    def __init__(self, parent=None):
        self._tmp = tempfile.TemporaryDirectory(prefix="vflpriv-masked-", dir=parent)
        self.stores = []

    def store(self, sender):
        s = SpilledBlocks(self._tmp.name, sender)
        self.stores.append(s)
        return s

    def close(self):
        for s in self.stores:
            s.close()
        self._tmp.cleanup()


def should_spill(n, block_sizes, limit=None):
    """Spill when all masked blocks together (8 n d bytes) exceed ``limit`` (SPILL_BYTES)."""
    limit = SPILL_BYTES if limit is None else limit
    return 8 * int(n) * int(sum(block_sizes)) > limit
