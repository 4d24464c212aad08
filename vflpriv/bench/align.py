"""``vflpriv bench align``: private set intersection, vflpriv's ECDH-PSI beside openmined-psi.

K parties (default 3) each hold ``size`` IDs drawn so that each keeps about ``--overlap`` of a
common universe (default 0.875, the 85-90% of issue 31); the label party (0) leads.  Both
protocols run on the same sets in the same run:

* vflpriv (:mod:`vflpriv.align`): the whole K-party alignment, every frame metered as relayed
  through the server; seconds are wall time (its X25519 work uses ``--workers`` processes), and
  the result is checked against Python's own set intersection;
* openmined-psi (Google's ECDH-PSI over P-256, C++, the registry's ``openmined-psi``): the same
  star, one two-party PSI per other party with the leader as the client that learns the
  intersection (``reveal_intersection``, raw set, no Bloom filter); bytes are the protobuf sizes
  of setup, request and response; then the leader intersects the K-1 results.

Bytes: ``wire_bytes`` counts each message once, as it leaves its sender (vflpriv's relayed
messages are counted once more by the meter on arrival: ``metered_bytes``); per id and
direction it is the figure issue 31 compares with SecretFlow's 44 B.
"""
from __future__ import annotations

import resource
import sys
import time

import numpy as np


#: most IDs per party (each is a Python string and a curve point: ~10 GB at this count)
MAX_IDS = 10_000_000
#: most parties of the benchmark
MAX_PARTIES = 64


def add_arguments(p):
    from ..align.psi import MAX_WORKERS
    from ..values import count, real, seed

    p.add_argument("--sizes", default="100000,1000000", metavar="N,N",
                   help=f"IDs per party, comma-separated, each at most {MAX_IDS:,} (default "
                   "100000,1000000)")
    p.add_argument("--parties", type=count(MAX_PARTIES, minimum=2), default=3, metavar="K",
                   help=f"parties, 2 to {MAX_PARTIES} (default 3)")
    p.add_argument("--overlap", type=real(0, 1, lo_open=True), default=0.875, metavar="F",
                   help="share of the universe each party holds, in (0, 1] (default 0.875)")
    p.add_argument("--workers", type=count(MAX_WORKERS), default=None, metavar="W",
                   help=f"processes for vflpriv's X25519 work, 1 to {MAX_WORKERS} (default: the "
                   f"CPU count, <= {MAX_WORKERS})")
    p.add_argument("--no-peer", dest="peer", action="store_false",
                   help="skip openmined-psi")
    p.add_argument("--seed", type=seed, default=0, help="seed of the ID sets (default 0)")


def _sets(size, parties, overlap, seed):
    rng = np.random.default_rng(seed)
    universe = int(round(size / overlap))
    out = []
    for _ in range(parties):
        pick = rng.choice(universe, size=size, replace=False)
        out.append([f"cust-{v:09d}" for v in pick])
    return out


def _cpu():
    """CPU seconds of this process and its finished children (the X25519 worker pool)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), \
        resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _ours(sets, workers):
    from ..align import align

    t0, c0 = time.perf_counter(), _cpu()
    al = align(sets, 0, workers=workers)
    wall, cpu = time.perf_counter() - t0, _cpu() - c0
    rep = al.report()
    common = set(sets[0]).intersection(*map(set, sets[1:]))
    ok = (al.intersection_size == len(common)
          and all(sets[0][int(r)] in common for r in al.rows[0][:1000]))
    wire = sum(rep["bytes"]["uplink"])
    return {"system": "vflpriv ECDH-PSI (X25519)", "seconds": wall, "cpu_seconds": cpu,
            "party_seconds": rep["party_seconds"], "intersection_size": al.intersection_size,
            "correct": bool(ok), "wire_bytes": wire, "metered_bytes": rep["bytes"]["total"],
            "bytes_by_type": rep["messages_by_type"]}


def _openmined(sets):
    try:
        import private_set_intersection.python as psi
    except ImportError:
        return {"system": "openmined-psi", "skipped": "not installed (pip install --no-deps "
                "openmined-psi==2.0.6: its pin protobuf==6.30.2 would break flwr's gRPC)"}
    t0, c0 = time.perf_counter(), _cpu()
    leader = sets[0]
    common, wire, pair_seconds = None, 0, []
    for other in sets[1:]:
        t1 = time.perf_counter()
        client = psi.client.CreateWithNewKey(True)
        server = psi.server.CreateWithNewKey(True)
        setup = server.CreateSetupMessage(1e-9, len(leader), other, psi.DataStructure.RAW)
        request = client.CreateRequest(leader)
        response = server.ProcessRequest(request)
        idx = set(client.GetIntersection(setup, response))
        common = idx if common is None else common & idx
        wire += setup.ByteSize() + request.ByteSize() + response.ByteSize()
        pair_seconds.append(time.perf_counter() - t1)
    return {"system": "openmined-psi 2.0 (P-256), star of 2-party runs",
            "seconds": time.perf_counter() - t0, "cpu_seconds": _cpu() - c0,
            "pair_seconds": pair_seconds,
            "intersection_size": len(common), "wire_bytes": wire}


def run(args) -> int:
    from ..errors import InputError

    import argparse

    from ..values import count

    try:
        sizes = [count(MAX_IDS)(s) for s in str(args.sizes).split(",") if s.strip()]
    except argparse.ArgumentTypeError as exc:
        raise InputError(f"--sizes {args.sizes!r}: each size {exc}") from None
    if not sizes:
        raise InputError(f"--sizes {args.sizes!r}: give integers, e.g. 100000,1000000")
    rows = []
    for size in sizes:
        sets = _sets(size, args.parties, args.overlap, args.seed)
        systems = [_ours(sets, args.workers)]
        if args.peer:
            systems.append(_openmined(sets))
        for s in systems:
            s.update(size=size, parties=args.parties)
            if "wire_bytes" in s:
                s["wire_bytes_per_id"] = s["wire_bytes"] / (size * args.parties)
            rows.append(s)
            _print(s)
    if args.json:
        from . import write_json

        import os

        write_json(args.json, {"benchmark": "align", "overlap": args.overlap,
                               "workers": args.workers, "load_average": os.getloadavg()[0],
                               "rows": rows})
    return 0


def _print(s):
    from ..units import format_bytes

    w = sys.stdout.write
    if "skipped" in s:
        w(f"{s['size']:>9} ids x {s['parties']}: {s['system']}: skipped ({s['skipped']})\n")
        return
    ok = "" if s.get("correct", True) else "  WRONG INTERSECTION"
    w(f"{s['size']:>9} ids x {s['parties']}: {s['system']:<48} {s['seconds']:8.1f} s "
      f"({s['cpu_seconds']:.1f} s CPU)  "
      f"{format_bytes(s['wire_bytes']):>10} sent ({s['wire_bytes_per_id']:.1f} B per id)  "
      f"|C| = {s['intersection_size']}{ok}\n")
    sys.stdout.flush()
