"""Checkpoints of a vertical run, and resuming without re-spending or re-releasing.

A checkpoint is one ``.npz`` file (numpy arrays, no pickle) written atomically: to a temporary
file in the same directory, flushed, fsync'ed, then ``os.replace``'d over the previous one (and
the directory fsync'ed), so a crash leaves either the old or the new checkpoint, never a torn one.
It holds, between two rounds: the server's and parties' state (:meth:`engine.Server.get_state`:
iterate, release cache, objective history, meter, every generator's ``bit_generator.state``), the
run's configuration and seed material, a fingerprint of the data, and the ledger's path, run id
and length at that moment.

Resume (``solve(..., resume=True)``, ``vflpriv run --resume FILE``): the server is rebuilt with
the same configuration and the state restored.  Records the ledger holds beyond the checkpoint's
length are releases of the rounds after the checkpoint that were charged before the crash (the
budget filter charges before any noise is drawn).  Those rounds are redone from the restored
generator states, so every noise draw and every released value is bit-identical to what may
already have left a party; the :class:`ReplayFilter` matches each such charge against its
recorded twin instead of appending it again.  So nothing is spent twice, no value is released
with fresh noise, and the ledger of the interrupted-and-resumed run equals an uninterrupted run's
(apart from record times).  The checkpoint holds the noise generators' states: it is as secret as
the data (file mode 0600).
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import zipfile

import numpy as np
import scipy.sparse as sp

from ..errors import InputError

FORMAT = "vflpriv-checkpoint"
VERSION = 1


def data_fingerprint(data) -> str:
    """SHA-256 of the matrix, the labels and the partition (resume must see the same data)."""
    h = hashlib.sha256()
    A = data.A
    if sp.issparse(A):
        A = sp.csc_matrix(A)
        for part in (A.data, A.indices, A.indptr):
            h.update(np.ascontiguousarray(part).tobytes())
    else:
        h.update(np.ascontiguousarray(A, dtype=np.float64).tobytes())
    h.update(np.ascontiguousarray(data.y, dtype=np.float64).tobytes())
    for b in data.blocks:
        h.update(np.asarray(b, dtype=np.int64).tobytes())
        h.update(b"|")
    return h.hexdigest()


def write_checkpoint(path, meta: dict, arrays: dict):
    """Atomically replace ``path`` with a checkpoint holding ``meta`` (JSON) and ``arrays``
    (``outputs.write_atomic``: never over a directory, FIFO or device node; mode 0600)."""
    from ..outputs import write_atomic

    blob = json.dumps(dict(meta, format=FORMAT, version=VERSION), allow_nan=True).encode("utf-8")
    write_atomic(path, lambda fh: np.savez(fh, __meta__=np.frombuffer(blob, dtype=np.uint8),
                                           **arrays), mode=0o600)


def read_checkpoint(path):
    """``(meta, arrays)`` of a checkpoint file; InputError naming the file if it is not one."""
    path = os.fspath(path)
    from ..data.files import regular_file

    if os.path.exists(path):
        regular_file(path, "checkpoint")       # a FIFO would block the reader forever
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except OSError as exc:
        raise InputError(f"cannot read checkpoint {path!r}: {exc.strerror or exc}") from None
    except (ValueError, EOFError, KeyError, zipfile.BadZipFile) as exc:
        # BadZipFile / EOFError: a truncated or damaged file
        raise InputError(f"{path!r} is not a vflpriv checkpoint, or it is truncated or damaged "
                         f"({type(exc).__name__}: {exc})") from None
    if "__meta__" not in arrays:
        raise InputError(f"{path!r} is not a vflpriv checkpoint (no metadata)")
    try:
        meta = json.loads(arrays.pop("__meta__").tobytes().decode("utf-8"))
    except (ValueError, RecursionError):
        raise InputError(f"{path!r} is not a vflpriv checkpoint (bad metadata)") from None
    if meta.get("format") != FORMAT or meta.get("version") != VERSION:
        raise InputError(f"{path!r} is not a version-{VERSION} vflpriv checkpoint")
    return meta, arrays


def check_every(every):
    """``checkpoint_every``: a positive integer (rounds between two checkpoints)."""
    if isinstance(every, bool) or not isinstance(every, (int, np.integer)) or every < 1:
        raise InputError(f"checkpoint_every must be a positive integer, got {every!r}")
    return int(every)


class Checkpointer:
    """``on_round`` hook for :func:`engine.run_vertical`: writes a checkpoint before the first
    round and after every ``every``-th round and the last one."""

    def __init__(self, path, every, iterations, meta: dict, budget_filter=None):
        self.path, self.every, self.T, self.meta = path, check_every(every), iterations, meta
        self.budget_filter = budget_filter

    def due(self, t) -> bool:
        """Whether a checkpoint is written after round ``t`` (0: before the first round)."""
        return not (t % self.every and t != self.T and t != 0)

    def __call__(self, server):
        t = server.t
        if not self.due(t):
            return
        state, arrays = server.get_state()
        bf = self.budget_filter
        # records charged up to this state (a resumed run's not yet replayed records excluded)
        pending = len(getattr(bf, "pending", ()))
        n = None if bf is None else len(bf.ledger.records) - pending
        # this run's records so far: other runs may append to a shared ledger in between
        own = None if bf is None else bf.ledger.run_records - pending
        meta = dict(self.meta, state=state, ledger_length=n, run_records=own)
        write_checkpoint(self.path, meta, arrays)


class ReplayFilter:
    """A budget filter for a resumed run: the first charges are matched against the ledger
    records written after the checkpoint (same event, party, round and note, in order) and not
    appended again; later charges go to the real filter."""

    def __init__(self, inner, pending):
        self.inner, self.pending = inner, list(pending)

    def charge(self, event, *, party="server", round=0, note=""):
        if not self.pending:
            return self.inner.charge(event, party=party, round=round, note=note)
        rec = self.pending[0]
        if (rec.event, rec.party, rec.round, rec.note) != (event, str(party), int(round), str(note)):
            raise InputError(
                f"ledger record {rec.seq} (round {rec.round}, party {rec.party}, {rec.note}) does "
                f"not match the resumed run's release (round {round}, party {party}, {note}): the "
                "ledger, the checkpoint or the run's options differ from the interrupted run's")
        self.pending.pop(0)
        return rec

    def __getattr__(self, name):
        return getattr(self.inner, name)


def resume_checkpoint(path, config, seed, data) -> dict:
    """Read a checkpoint and check it belongs to this run (options, seed, data)."""
    meta, arrays = read_checkpoint(path)
    for key, v in config.items():
        old = meta["config"].get(key)
        if old != v and not (isinstance(v, float) and isinstance(old, float) and
                             math.isnan(v) and math.isnan(old)):
            raise InputError(f"resume: {key}={v!r} but the checkpoint's run used {key}={old!r}")
    if seed is not None and seed != meta["seed"]:
        raise InputError(f"resume: seed={seed!r} but the checkpoint's run used seed={meta['seed']!r}")
    if meta["data"] != data_fingerprint(data):
        raise InputError(f"resume: the data (matrix, labels or partition) differ from the "
                         f"checkpoint {str(path)!r}'s run")
    meta["state"], meta["arrays"] = meta["state"], arrays
    return meta


def pending_records(led, ck, path):
    """Ledger records of this run charged after the checkpoint was written (to replay, not
    re-append).  Other runs' records may sit between them (runs sharing a ledger)."""
    n = ck["ledger_length"]
    if n is None or len(led.records) < n:
        raise InputError(f"resume: the ledger {led.path!r} has {len(led.records)} records, fewer "
                         f"than the {n} the checkpoint {str(path)!r} saw")
    if ck.get("run_records") is not None:
        own = [r for r in led.records if r.run_id == ck["run_id"]]
        if len(own) < ck["run_records"]:
            raise InputError(f"resume: the ledger {led.path!r} holds {len(own)} records of run "
                             f"{ck['run_id']}, fewer than the {ck['run_records']} the checkpoint "
                             f"{str(path)!r} saw")
        return own[ck["run_records"]:]
    pending = led.records[n:]
    for r in pending:
        if r.run_id != ck["run_id"]:
            raise InputError(f"resume: ledger record {r.seq} belongs to run {r.run_id}, not to the "
                             f"checkpoint's run {ck['run_id']}")
    return pending
