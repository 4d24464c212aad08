"""``vflpriv bench secure``: what checkpoints cost dp-bcfw-secure, and what running its
in-process path as roles over a LocalLink would cost (issue #21).

One seeded private run (synthetic n x d, density 0.05, K parties, T rounds, defaults of
dp-bcfw-secure) is measured four ways:

* ``inprocess``: no checkpoint -- seconds of the setup (parties, offline phase, label release)
  and per round;
* ``inprocess + checkpoint``: a checkpoint after every round -- seconds per round, the file's
  size and the seconds of one checkpoint write (``write_checkpoint`` of the last state);
* ``resume``: resuming the run from its checkpoint of round T/2 -- seconds until the first
  round runs again (parties rebuilt, the offline phase recomputed, the state restored), against
  what saving the masked blocks once instead would cost: the bytes of every party's E_k and the
  seconds to write them atomically (fsync) and to read them back;
* ``local``: the same run as ``SecurePartyRole``s over ``LocalLink`` (``backend="local"``: each
  party role is rebuilt from its pickled state for every message; the masked blocks it received
  are in files on its disk, which the state names, and its prepared block is kept by the
  process), with the seconds spent hosting the roles and, of those, pickling their state.

Every run must end with the same iterate (checked and printed).  The in-process and the
LocalLink rows also report the metered bytes: the masked blocks' (``MaskedBlock``: frames and
framed bytes; each party's block to its helper only, issue 33) and the parties' uplink in all.
"""
from __future__ import annotations

import os
import tempfile
import time

from ..units import format_bytes

def add_arguments(p):
    p.add_argument("--n", type=int, default=10000, help="samples (default 10000)")
    p.add_argument("--d", type=int, default=200, help="features (default 200)")
    p.add_argument("--parties", type=int, default=4, help="parties K (default 4)")
    p.add_argument("--rounds", type=int, default=10, help="rounds T (default 10)")
    p.add_argument("--skip-local", action="store_true",
                   help="skip the run as roles over LocalLink")
    from .secure_traffic import add_traffic_arguments

    add_traffic_arguments(p)


def _bytes(sol):
    """The metered bytes of a run: the masked blocks (frames, framed bytes) and the parties'
    uplink (payload bytes, every message)."""
    frames, framed = sol.extra["bytes_by_type"].get("MaskedBlock", [0, 0])
    return {"masked_block_frames": int(frames), "masked_block_bytes": int(framed),
            "uplink_bytes": int(sum(sol.uplink))}


def _timed(data, rounds, also=None, **kw):
    from ..vertical.api import solve

    stamps = []

    def callback(t, f):
        stamps.append(time.perf_counter())
        if also is not None:
            also(t, f)

    t0 = time.perf_counter()
    sol = solve(data, algorithm="dp-bcfw-secure", epsilon=4.0, delta=1e-5, feature_bound=1.0,
                label_bound=1.0, iterations=rounds, seed=0, callback=callback,
                **{"squared_path": "fw", **kw})         # the rounds are what it times
    total = time.perf_counter() - t0
    per = (stamps[-1] - stamps[0]) / (len(stamps) - 1) if len(stamps) > 1 else float("nan")
    return sol, {"seconds_total": total, "seconds_per_round": per,
                 "seconds_to_first_round": stamps[0] - t0 if stamps else total}


def _masked_blocks(data, frac):
    """Every party's masked block E_k (the words the offline phase sends), recomputed."""
    from ..vertical.secure.mpc.beaver import masked_block_chunks
    from ..vertical.secure.base.blocks import CHUNK_ROWS
    from ..vertical.secure.squares.party import SecureParty
    from ..vertical.secure.mpc.ring import KeySource

    keys = KeySource(0)
    out = {}
    for k in range(data.K):
        p = SecureParty(k, data.block(k), None, 1.0, frac=frac, private=False)
        for row, block in masked_block_chunks(p.A_fx, keys.key(f"m{k}"), CHUNK_ROWS):
            out[f"E{k}_{row}"] = block
    return out


class _HostingClock:
    """Times what hosting the parties as roles costs during a ``backend="local"`` run: every
    message's :func:`vflpriv.runtime.roles.answer` (the role rebuilt from its config and data,
    its state unpickled, the message handled, the state pickled) and, within it, the pickling,
    by wrapping ``roles.answer`` and ``roles.pickle`` for the duration (a measurement hook of
    this benchmark only)."""

    def __enter__(self):
        import pickle

        from ..runtime import roles

        self.roles, self.messages, self.answer, self.pickling, self.bytes = roles, 0, 0.0, 0.0, 0
        self._answer, self._pickle = roles.answer, roles.pickle
        clock = self

        class TimedPickle:
            @staticmethod
            def dumps(obj):
                t0 = time.perf_counter()
                raw = pickle.dumps(obj)
                clock.pickling += time.perf_counter() - t0
                clock.bytes += len(raw)
                return raw

            @staticmethod
            def loads(raw):
                t0 = time.perf_counter()
                out = pickle.loads(raw)
                clock.pickling += time.perf_counter() - t0
                return out

        def answer(*a, **kw):
            t0 = time.perf_counter()
            try:
                return clock._answer(*a, **kw)
            finally:
                clock.answer += time.perf_counter() - t0
                clock.messages += 1

        roles.answer, roles.pickle = answer, TimedPickle
        return self

    def __exit__(self, *exc):
        self.roles.answer, self.roles.pickle = self._answer, self._pickle
        return False

    def figures(self):
        return {"messages": self.messages, "seconds_hosting": self.answer,
                "seconds_pickling": self.pickling,
                "state_bytes_per_message": self.bytes / max(self.messages, 1)}


def run(args) -> int:
    if getattr(args, "traffic", False):
        from .secure_traffic import run_traffic

        return run_traffic(args)
    import numpy as np

    from ..data import VerticalData, make_synthetic
    from ..errors import InputError
    from ..outputs import write_atomic
    from ..vertical.checkpoint import read_checkpoint, write_checkpoint

    for name in ("n", "d", "rounds"):
        if getattr(args, name) < 2:
            raise InputError(f"--{name} must be at least 2, got {getattr(args, name)}")
    if args.parties < 2:
        raise InputError(f"--parties must be at least 2, got {args.parties}")
    A, y, _ = make_synthetic(n=args.n, d=args.d, density=0.05, sparsity=0.01, seed=0)
    data = VerticalData.from_arrays(A, y, "balanced", parties=args.parties)
    T = args.rounds
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        _timed(data, 2, ledger=os.path.join(tmp, "w.jsonl"))     # warm-up (imports, caches)
        ref, rows["inprocess"] = _timed(data, T, ledger=os.path.join(tmp, "a.jsonl"))
        rows["inprocess"]["setup_seconds"] = ref.extra["setup_seconds"]
        rows["inprocess"].update(_bytes(ref))
        ck = os.path.join(tmp, "c.npz")
        half = T // 2
        mid = os.path.join(tmp, "mid.npz")

        def keep_mid(t, f):
            if t + 1 == half:
                import shutil
                shutil.copy(ck, mid)
                shutil.copy(os.path.join(tmp, "b.jsonl"), os.path.join(tmp, "m.jsonl"))

        sol_ck, rows["checkpoint"] = _timed(data, T, also=keep_mid, checkpoint=ck,
                                            ledger=os.path.join(tmp, "b.jsonl"))
        meta, arrays = read_checkpoint(ck)
        reps = 5
        t1 = time.perf_counter()
        for _ in range(reps):
            write_checkpoint(os.path.join(tmp, "w.npz"), meta, arrays)
        rows["checkpoint"].update(file_bytes=os.path.getsize(ck),
                                  seconds_per_write=(time.perf_counter() - t1) / reps,
                                  same_x=bool(np.array_equal(sol_ck.x, ref.x)))
        sol_r, rows["resume"] = _timed(data, T, ledger=os.path.join(tmp, "m.jsonl"),
                                       checkpoint=mid, resume=True)
        rows["resume"]["setup_seconds"] = sol_r.extra["setup_seconds"]
        rows["resume"]["same_x"] = bool(np.array_equal(sol_r.x, ref.x))
        blocks = _masked_blocks(data, ref.extra["frac_bits"])
        path = os.path.join(tmp, "blocks.npz")
        t1 = time.perf_counter()
        write_atomic(path, lambda fh: np.savez(fh, **blocks), mode=0o600)
        w = time.perf_counter() - t1
        t1 = time.perf_counter()
        with np.load(path) as z:
            back = sum(z[k].nbytes for k in z.files)
        rows["saved_blocks"] = {"bytes": os.path.getsize(path), "array_bytes": back,
                                "seconds_write": w, "seconds_read": time.perf_counter() - t1,
                                "receivers_each": 1}      # its helper (issue 33)
        if not args.skip_local:
            with _HostingClock() as clock:
                sol_l, rows["local"] = _timed(data, T, ledger=os.path.join(tmp, "l.jsonl"),
                                              backend="local")
            rows["local"]["same_x"] = bool(np.array_equal(sol_l.x, ref.x))
            rows["local"].update(_bytes(sol_l))
            rows["local"].update(clock.figures())
    print(f"dp-bcfw-secure, n={args.n}, d={args.d}, K={args.parties}, T={T}:")
    r = rows["inprocess"]
    print(f"  in process:             setup {r['setup_seconds']:.3f} s, "
          f"{r['seconds_per_round']:.4f} s/round, total {r['seconds_total']:.2f} s")
    print(f"    masked blocks {format_bytes(r['masked_block_bytes'])} in "
          f"{r['masked_block_frames']} frames (each to its helper), uplink in all "
          f"{format_bytes(r['uplink_bytes'])}")
    c = rows["checkpoint"]
    print(f"  + checkpoint per round: {c['seconds_per_round']:.4f} s/round, total "
          f"{c['seconds_total']:.2f} s, file "
          f"{format_bytes(c['file_bytes'])}, {c['seconds_per_write'] * 1e3:.1f} ms per write, "
          f"same x: {c['same_x']}")
    r = rows["resume"]
    print(f"  resume at round {half}:     {r['seconds_to_first_round']:.3f} s to the first round "
          f"(setup with the offline phase recomputed {r['setup_seconds']:.3f} s), same x: "
          f"{r['same_x']}")
    s = rows["saved_blocks"]
    print(f"  masked blocks saved once instead: {format_bytes(s['bytes'])}, write+fsync "
          f"{s['seconds_write']:.3f} s, read {s['seconds_read']:.3f} s")
    if "local" in rows:
        r = rows["local"]
        print(f"  roles over LocalLink:   {r['seconds_per_round']:.4f} s/round, to first round "
              f"{r['seconds_to_first_round']:.2f} s, total {r['seconds_total']:.2f} s, same x: "
              f"{r['same_x']}")
        print(f"    masked blocks {format_bytes(r['masked_block_bytes'])} in "
              f"{r['masked_block_frames']} frames, uplink in all "
              f"{format_bytes(r['uplink_bytes'])}")
        print(f"    {r['messages']} messages to parties took {r['seconds_hosting']:.2f} s, of "
              f"which {r['seconds_pickling']:.2f} s pickling and unpickling the roles' state "
              f"({format_bytes(r['state_bytes_per_message'], 2)} per message on average)")
    if getattr(args, "json", None):
        from . import write_json

        write_json(args.json, rows)
    return 0
