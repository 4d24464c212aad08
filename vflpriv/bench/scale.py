"""``vflpriv bench scale``: wall time and peak memory of ``vflpriv run --algorithm dp-bcfw-secure``
at large n (issue 23, part 4: n = 1e6, d = 2000, K = 4, T = 200 in under 30 minutes and 8 GB),
in process or (``--backend``) on Flower.

Each n is one child process running the real command line (``python -m vflpriv run ...`` on
``synthetic:n=N,d=D,density=...``, generation included), so that its figures are its own: wall
seconds measured around it, peak resident memory from ``os.wait4``'s rusage (``ru_maxrss``, the
largest resident set of the child, KiB on Linux), and the peak of the child and all its
descendants together, sampled from ``/proc`` every 0.5 s (on ``--backend flower-sim`` or
``flower`` the parties run in processes of their own), and the machine's used memory
(``MemTotal - MemAvailable`` from ``/proc/meminfo``) at its peak above what it was just before the
child started, sampled at the same times (it counts the page tables, kernel buffers and shared
pages the per-process figures miss, and whatever else the machine runs meanwhile).  From the run's JSON: the protocol's setup
seconds (key setup, masked blocks, label products) and its rounds' seconds, the number of secure
products and the epsilon spent; the rest of the wall time is start-up, data generation and the
partition.

``--table-rows N`` also measures reading a CSV table larger than a memory limit allows to load
whole: a child with ``RLIMIT_AS`` = ``--table-limit-gb`` reads an N x D CSV written here (a dense
float64 copy is 8 N D bytes, above the limit) with ``vflpriv run --algorithm fw --iterations 1``
(chunked, sparse); the same child limit applied to ``pandas.read_csv`` of the whole file is shown
to fail.  Heavy: at n = 1e6 one run takes minutes and GBs; the machine is shared.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

from ..units import format_bytes

def add_arguments(p):
    p.add_argument("--n", default="100000,1000000",
                   help="comma-separated sample sizes, or none (only the table, --table-rows)")
    p.add_argument("--d", type=int, default=2000, help="features (default 2000)")
    p.add_argument("--density", type=float, default=0.05, help="nonzero fraction (default 0.05)")
    p.add_argument("--parties", type=int, default=4, help="K (default 4)")
    p.add_argument("--iterations", type=int, default=200, help="T (default 200)")
    p.add_argument("--epsilon", default="1", help="privacy budget of each run (default 1)")
    p.add_argument("--delta", type=float, default=1e-6)
    p.add_argument("--backend", default="inprocess", choices=("inprocess", "flower-sim", "flower"),
                   help="vflpriv run's --backend (default inprocess); on Flower the parties' "
                        "roles run in their own processes, the peak of all of them together "
                        "is reported too")
    p.add_argument("--table-rows", type=int, default=0,
                   help="also read an N-row CSV under a memory limit (default 0: skip)")
    p.add_argument("--table-limit-gb", type=float, default=2.0,
                   help="address-space limit of the table-reading child, in GB (10^9 bytes; default 2)")
    p.add_argument("--table-chunk-rows", type=int, default=8192,
                   help="--chunk-rows of the table-reading run (default 8192)")


def _sizes(text):
    from ..errors import InputError

    if str(text).strip().lower() == "none":
        return []
    try:
        out = [int(float(v)) for v in str(text).split(",") if v.strip()]
    except ValueError:
        raise InputError(f"--n must be comma-separated integers, got {text!r}") from None
    if not out or min(out) < 1:
        raise InputError(f"--n must be positive integers, got {text!r}")
    return out


def _tree_rss(root):
    """Resident bytes of ``root`` and all its descendants now (``/proc``; 0 where unreadable)."""
    kids, rss = {}, {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as fh:
                stat = fh.read()
            with open(f"/proc/{name}/statm") as fh:
                pages = int(fh.read().split()[1])
        except (OSError, ValueError, IndexError):
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        kids.setdefault(ppid, []).append(int(name))
        rss[int(name)] = pages * os.sysconf("SC_PAGE_SIZE")
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo += kids.get(pid, [])
    return total


def _used_memory():
    """The machine's used memory now, ``MemTotal - MemAvailable`` (``/proc/meminfo``), in bytes;
    None where it cannot be read."""
    try:
        with open("/proc/meminfo") as fh:
            kb = {k: int(v.split()[0]) for k, v in (line.split(":", 1) for line in fh)}
        return (kb["MemTotal"] - kb["MemAvailable"]) * 1024     # /proc/meminfo's "kB" are KiB
    except (OSError, KeyError, ValueError):
        return None


def _child(cmd, limit_bytes=None, tree=False):
    """Run ``cmd``; (returncode, wall seconds, peak RSS bytes, stderr tail, peak tree bytes,
    peak used memory above the start).
    The peak RSS is the largest single process's (``wait4``); ``tree``: also the peak of the
    sum over the child and all its descendants, sampled every 0.5 s (a run with helper
    processes, e.g. Flower's simulation; shared pages count once per process that maps them),
    and the machine's used memory at its peak minus its value just before the start, sampled
    at the same times."""
    import threading

    def limit():
        if limit_bytes:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))

    used0 = _used_memory() if tree else None
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            preexec_fn=limit if limit_bytes else None)
    peak, used, done = [0], [used0], threading.Event()

    def sample():
        # the first sample at once (a short run may end before the first interval), then every
        # 0.5 s until the child is reaped
        while True:
            peak[0] = max(peak[0], _tree_rss(proc.pid))
            now = _used_memory()
            if used[0] is not None and now is not None:
                used[0] = max(used[0], now)
            if done.wait(0.5):
                break

    sampler = threading.Thread(target=sample, daemon=True)
    if tree:
        sampler.start()
    err = proc.stderr.read()
    _, status, ru = os.wait4(proc.pid, 0)
    done.set()
    if tree:
        sampler.join()
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    proc.stderr.close()
    above = used[0] - used0 if used0 is not None and used[0] is not None else None
    return (proc.returncode, wall, ru.ru_maxrss * 1024, err.decode(errors="replace")[-400:],
            peak[0] if tree else None, above)


def _secure_row(n, args, tmp):
    out = os.path.join(tmp, f"run-{n}.json")
    spec = f"synthetic:n={n},d={args.d},density={args.density},seed=0"
    cmd = [sys.executable, "-m", "vflpriv", "run", "--data", spec, "--algorithm", "dp-bcfw-secure",
           "--parties", str(args.parties), "--iterations", str(args.iterations),
           "--epsilon", str(args.epsilon), "--delta", str(args.delta), "--feature-bound", "5",
           "--label-bound", "20", "--seed", "0", "--quiet", "--json", out,
           "--backend", args.backend]
    rc, wall, rss, err, tree, used = _child(cmd, tree=True)
    row = {"n": n, "d": args.d, "density": args.density, "parties": args.parties,
           "iterations": args.iterations, "backend": args.backend,
           "command": " ".join(cmd[1:]).replace(out, "OUT.json"),
           "returncode": rc, "wall_seconds": wall, "peak_rss_bytes": rss,
           "peak_tree_rss_bytes": tree, "peak_used_memory_above_start_bytes": used}
    if rc != 0:
        row["error"] = err.strip().splitlines()[-1] if err.strip() else "no message"
        return row
    with open(out) as fh:
        res = json.load(fh)
    sec = res["secure"]
    rounds = res["seconds"] - sec["setup_seconds"]
    row.update(setup_seconds=sec["setup_seconds"], rounds_seconds=rounds,
               seconds_per_round=rounds / max(1, res["iterations"]),
               other_seconds=wall - res["seconds"], products=sec["secure_products"],
               masked_block_bytes=sec["bytes_by_type"].get("MaskedBlock", [0, 0])[1],
               epsilon_spent=res["epsilon_spent"].get("best"),
               final_objective=res["final_objective"])
    return row


def _write_table(path, rows, d, density, seed=0):
    """An N x d CSV of the synthetic data's law (label ``y`` first), written in row blocks; zeros
    are written as ``0`` and the nonzeros with ``repr`` (exact float64 round trip)."""
    import numpy as np

    from ..data.stream import synthetic_csr

    rng = np.random.default_rng(seed)
    with open(path, "w") as fh:
        fh.write("y," + ",".join(f"f{j}" for j in range(d)) + "\n")
        for s in range(0, rows, 4096):
            r = min(4096, rows - s)
            X = synthetic_csr(r, d, density, rng)
            y = rng.standard_normal(r)
            lines = []
            for i in range(r):
                cells = ["0"] * d
                lo, hi = X.indptr[i], X.indptr[i + 1]
                for j, v in zip(X.indices[lo:hi].tolist(), X.data[lo:hi].tolist()):
                    cells[j] = repr(v)
                lines.append(repr(float(y[i])) + "," + ",".join(cells))
            fh.write("\n".join(lines) + "\n")


def _table_rows(args, tmp):
    path = os.path.join(tmp, "table.csv")
    t0 = time.perf_counter()
    _write_table(path, args.table_rows, args.d, args.density)
    write_s = time.perf_counter() - t0
    limit = int(args.table_limit_gb * 10 ** 9)      # GB: SI units, as every byte count
    dense = 8 * args.table_rows * args.d
    chunked = [sys.executable, "-m", "vflpriv", "run", "--data", path, "--label", "y",
               "--algorithm", "fw", "--step", "fw", "--iterations", "1",
               "--parties", str(args.parties),     # one plain FW round: the reader is measured
               "--chunk-rows", str(args.table_chunk_rows), "--quiet"]
    # the whole-table reader vflpriv used before (read_csv, then one float64 array), serial
    # (pandas >= 3.1 otherwise parses big files in threads, whose stacks fail under the limit
    # before the table's size matters)
    whole = [sys.executable, "-c",
             "import numpy as np, pandas as pd\n"
             "try:\n    pd.set_option('mode.max_threads', 1)\nexcept Exception:\n    pass\n"
             f"df = pd.read_csv({path!r})\n"
             "A = df.drop(columns=['y']).to_numpy(dtype=np.float64)\nprint(A.shape)"]
    out = []
    for name, cmd in (("vflpriv run (chunked)", chunked), ("pandas.read_csv (whole)", whole)):
        rc, wall, rss, err, _, _ = _child(cmd, limit)
        out.append({"reader": name, "rows": args.table_rows, "d": args.d,
                    "file_bytes": os.path.getsize(path), "dense_bytes": dense,
                    "limit_bytes": limit, "returncode": rc, "wall_seconds": wall,
                    "peak_rss_bytes": rss, "write_seconds": write_s,
                    "error": None if rc == 0 else (err.strip().splitlines() or ["?"])[-1][-160:]})
    return out


def run(args) -> int:
    from . import write_json

    from ..data.stream import check_chunk_rows
    from ..errors import InputError

    sizes = _sizes(args.n)
    for name in ("d", "parties", "iterations"):
        if getattr(args, name) < 1:
            raise InputError(f"--{name} must be a positive integer, got {getattr(args, name)}")
    if args.table_rows < 0:
        raise InputError(f"--table-rows must be >= 0, got {args.table_rows}")
    if not args.table_limit_gb > 0:
        raise InputError(f"--table-limit-gb must be > 0, got {args.table_limit_gb}")
    if not 0 < args.density <= 1:
        raise InputError(f"--density must be in (0, 1], got {args.density}")
    check_chunk_rows(args.table_chunk_rows, "--table-chunk-rows")
    rows, tables = [], []
    with tempfile.TemporaryDirectory(prefix="vflpriv-bench-scale-") as tmp:
        for n in sizes:
            row = _secure_row(n, args, tmp)
            rows.append(row)
            gb = format_bytes(row["peak_rss_bytes"])
            tree = format_bytes(row["peak_tree_rss_bytes"])
            if row["returncode"]:
                print(f"n={n}: exit {row['returncode']} after {row['wall_seconds']:.0f} s, peak "
                      f"{gb}: {row['error']}")
                continue
            print(f"n={n} d={args.d} K={args.parties} T={args.iterations} "
                  f"{args.backend}: wall "
                  f"{row['wall_seconds']:.1f} s (setup {row['setup_seconds']:.1f} s, rounds "
                  f"{row['rounds_seconds']:.1f} s = {row['seconds_per_round']:.3f} s/round, "
                  f"generation and start-up {row['other_seconds']:.1f} s), peak RSS {gb} "
                  f"(largest process; all processes together {tree}; the machine's used memory "
                  f"{format_bytes(row['peak_used_memory_above_start_bytes'] or 0)} above its "
                  f"start), "
                  f"{row['products']} secure products, epsilon {row['epsilon_spent']:.4g}")
        if args.table_rows:
            tables = _table_rows(args, tmp)
            for t in tables:
                print(f"table {t['rows']} x {t['d']} CSV ({format_bytes(t['file_bytes'])}, dense "
                      f"{format_bytes(t['dense_bytes'])}) under a "
                      f"{format_bytes(t['limit_bytes'])} limit: {t['reader']}: exit "
                      f"{t['returncode']}, {t['wall_seconds']:.1f} s, "
                      f"peak RSS {format_bytes(t['peak_rss_bytes'])}"
                      + (f" ({t['error']})" if t["error"] else ""))
    write_json(args.json, {"runs": rows, "tables": tables})
    return 0 if all(r["returncode"] == 0 for r in rows) else 1
