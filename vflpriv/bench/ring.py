"""``vflpriv bench ring``: products over Z/2^64 (uint64), numpy against vflpriv.kernels.ring_matmul.

The shapes of the secure paths:

* vector-matrix v^T M (the dealer's U_k^T v, the helper's E_k^T v; n rows, p columns): numpy's
  uint64 ``einsum`` (what ``beaver._vec_mat`` ran), numpy's uint64 ``v @ M`` (integer matmul),
  :func:`ring_vecmat` (einsum, the size rule's choice) and the float64 limb products of the
  1 x n row (``limbs``, the path ``ring_vecmat`` does not take: shown to say why);
* Gram blocks (n x p)^T (n x q): numpy's uint64 ``A.T @ B`` and ``einsum``, and
  :func:`ring_matmul` (torch's int64 product when torch is installed, else the limb products
  from ``BLAS_MIN`` rows and columns on, einsum below), the limb products alone (``limbs``) and,
  with torch, its int64 product alone (``torch``);
* sparse x dense (``peer_output``'s A_k^T z, A_k at density ``--density``): scipy's uint64
  product as the code wrote it and :func:`ring_spmatmul`.

Every contender's words are checked equal to the first one's (so no figure is of a wrong product).
Each figure is given in wall seconds and in CPU seconds of the process (the table prints CPU: on a
shared machine the wall time is stretched by the load, the CPU time much less; ``--threads 1``
makes the two comparable across contenders). Seconds are the median of ``--repeats`` runs after one
warm-up run; a contender whose first run takes more than ``--budget`` seconds is timed once.
numpy's integer Gram products cost n p q multiply-adds in a plain loop (minutes at n = 1e5, p = q =
800): when the one at n rows would take more than ``--budget`` seconds as estimated from its time
on 2000 rows, it is timed on the largest row count that fits the budget and scaled linearly to n
(its cost is linear in n: one pass over the rows per output entry); the JSON marks those
(``numpy_rows_timed``) and their words are checked on the rows timed. The JSON records the BLAS
threads and the load average.
"""
from __future__ import annotations

import os
import platform
import statistics
import time

import numpy as np


def add_arguments(p):
    p.add_argument("--rows", default="20000,100000",
                   help="comma-separated n, rows of the products (default 2e4,1e5)")
    p.add_argument("--cols", default="50,200,800",
                   help="comma-separated p (and q of the Gram blocks; default 50,200,800)")
    p.add_argument("--repeats", type=int, default=3, help="timed runs per contender (median)")
    p.add_argument("--budget", type=float, default=20.0,
                   help="seconds: a contender slower than this is timed once, and numpy's "
                        "integer Gram products are timed on fewer rows and scaled (default 20)")
    p.add_argument("--density", type=float, default=0.1,
                   help="density of the sparse block of the sparse x dense case (default 0.1)")
    p.add_argument("--threads", type=int, default=None,
                   help="BLAS threads (threadpoolctl; default: the BLAS library's own)")
    p.add_argument("--skip-gram", action="store_true", help="only the vector and sparse cases")


def _ints(text, name):
    try:
        vals = [int(float(s)) for s in text.split(",")]
    except ValueError:
        raise ValueError(f"{name} must be comma-separated integers, got {text!r}") from None
    if not vals or any(v < 1 for v in vals):
        raise ValueError(f"{name} must be positive, got {text!r}")
    return vals


def _time(fn, repeats, budget):
    """((median wall seconds, median CPU seconds of this process), result of the first run):
    one warm-up run, then ``repeats`` runs, or the warm-up alone when it took more than
    ``budget``.  CPU seconds (all threads of the process) are the work done, which a shared
    machine's load does not stretch as it stretches wall time."""
    w0, c0 = time.perf_counter(), time.process_time()
    first = fn()
    w, c = time.perf_counter() - w0, time.process_time() - c0
    if w > budget:
        return (w, c), first
    walls, cpus = [], []
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return (statistics.median(walls), statistics.median(cpus)), first


def _check(name, ref, out):
    if not (np.asarray(out).dtype == np.uint64 and np.array_equal(ref, out)):
        raise AssertionError(f"bench ring: {name} gave other words than the reference")


def bench_vecmat(rows, cols, repeats, budget, rng):
    from ..kernels.ring_matmul import LIMB_OFFSETS, _limb_matmul, max_chunk, ring_vecmat

    out = []
    for n in rows:
        v = rng.integers(0, 2 ** 64, n, dtype=np.uint64)
        for p in cols:
            M = rng.integers(0, 2 ** 64, (n, p), dtype=np.uint64)
            t = {}
            t["numpy_einsum"], ref = _time(lambda: np.einsum("i,ij->j", v, M), repeats, budget)
            for name, fn in (("numpy_matmul", lambda: v @ M),
                             ("ring_vecmat", lambda: ring_vecmat(v, M)),
                             ("limbs", lambda: _limb_matmul(v[None, :], M, max_chunk(),
                                                            LIMB_OFFSETS)[0])):
                t[name], res = _time(fn, repeats, budget)
                _check(name, ref, res)
            t["one_pass_over_M"], _ = _time(lambda: M.sum(axis=0), repeats, budget)
            s = {k: w for k, (w, _) in t.items()}
            c = {k: u for k, (_, u) in t.items()}
            out.append({"n": n, "p": p, "seconds": s, "cpu_seconds": c,
                        "cpu_speedup_vs_einsum": c["numpy_einsum"] / c["ring_vecmat"],
                        "cpu_speedup_vs_matmul": c["numpy_matmul"] / c["ring_vecmat"]})
            print(f"  n={n:<7} p={p:<4} CPU ms: einsum {c['numpy_einsum'] * 1e3:8.2f}  matmul "
                  f"{c['numpy_matmul'] * 1e3:8.2f}  ring_vecmat {c['ring_vecmat'] * 1e3:8.2f}  "
                  f"limbs {c['limbs'] * 1e3:8.2f}  M.sum {c['one_pass_over_M'] * 1e3:7.2f}")
    return out


def _numpy_gram(A, B, name, budget, repeats):
    """((wall, CPU) seconds scaled to A's n rows, rows timed, words on the rows timed) of
    numpy's integer Gram product ``name``."""
    fn = {"numpy_matmul": lambda X, Y: X.T @ Y,
          "numpy_einsum": lambda X, Y: np.einsum("ji,jk->ik", X, Y)}[name]
    n = A.shape[0]
    probe = min(n, 2000)
    t0 = time.perf_counter()
    fn(A[:probe], B[:probe])
    per_row = (time.perf_counter() - t0) / probe
    rows = n if per_row * n <= budget else max(probe, int(budget / per_row))
    (w, c), res = _time(lambda: fn(A[:rows], B[:rows]), repeats, budget)
    return (w * n / rows, c * n / rows), rows, res


def bench_gram(rows, cols, repeats, budget, rng):
    from ..kernels import ring_matmul as RM
    from ..kernels.ring_matmul import LIMB_OFFSETS, _limb_matmul, max_chunk, ring_matmul

    out = []
    for n in rows:
        for i, p in enumerate(cols):
            for q in cols[i:]:
                A = rng.integers(0, 2 ** 64, (n, p), dtype=np.uint64)
                B = rng.integers(0, 2 ** 64, (n, q), dtype=np.uint64)
                t, timed = {}, {}
                t["ring_matmul"], mine = _time(lambda: ring_matmul(A.T, B), repeats, budget)
                # the limb path alone (ring_matmul takes einsum below BLAS_MIN)
                t["limbs"], res = _time(lambda: _limb_matmul(A.T, B, max_chunk(), LIMB_OFFSETS),
                                        repeats, budget)
                _check("limbs", mine, res)
                if RM._has_torch():          # torch's int64 product (ring_matmul's choice then)
                    t["torch"], res = _time(lambda: RM._torch_matmul(A.T, B), repeats, budget)
                    _check("torch", mine, res)
                for name in ("numpy_einsum", "numpy_matmul"):
                    t[name], timed[name], res = _numpy_gram(A, B, name, budget, repeats)
                    k = timed[name]
                    ref = mine if k == n else ring_matmul(A[:k].T, B[:k])
                    _check(name, ref, res)
                s = {k: w for k, (w, _) in t.items()}
                c = {k: u for k, (_, u) in t.items()}
                out.append({"n": n, "p": p, "q": q, "seconds": s, "cpu_seconds": c,
                            "numpy_rows_timed": timed,
                            "cpu_speedup_vs_einsum": c["numpy_einsum"] / c["ring_matmul"],
                            "cpu_speedup_vs_matmul": c["numpy_matmul"] / c["ring_matmul"],
                            "wall_speedup_vs_einsum": s["numpy_einsum"] / s["ring_matmul"],
                            "wall_speedup_vs_matmul": s["numpy_matmul"] / s["ring_matmul"]})
                star = {nm: "*" if k < n else " " for nm, k in timed.items()}
                tt = f"torch {c['torch']:8.3f}  " if "torch" in c else ""
                print(f"  n={n:<7} {p:>4} x {q:<4} CPU s: ring_matmul {c['ring_matmul']:8.3f}  "
                      f"limbs {c['limbs']:8.3f}  {tt}"
                      f"einsum {c['numpy_einsum']:8.3f}{star['numpy_einsum']} matmul "
                      f"{c['numpy_matmul']:8.2f}{star['numpy_matmul']}  (wall "
                      f"{s['ring_matmul']:.2f} / {s['numpy_einsum']:.2f} / "
                      f"{s['numpy_matmul']:.2f})")
    return out


def bench_sparse(rows, cols, density, repeats, budget, rng):
    import scipy.sparse as sp

    from ..kernels.ring_matmul import ring_spmatmul

    out = []
    for n in rows:
        z = rng.integers(0, 2 ** 64, n, dtype=np.uint64)
        for p in cols:
            A = sp.random(n, p, density=density, format="csr", random_state=rng)
            A.data = rng.integers(0, 2 ** 64, A.nnz, dtype=np.uint64)     # ring words
            AT = A.T                       # the CSC view peer_output multiplies with
            t = {}
            t["scipy"], ref = _time(lambda: np.asarray(AT @ z, dtype=np.uint64).ravel(),
                                    repeats, budget)
            t["ring_spmatmul"], res = _time(lambda: ring_spmatmul(AT, z), repeats, budget)
            _check("ring_spmatmul", ref, res)
            s = {k: w for k, (w, _) in t.items()}
            c = {k: u for k, (_, u) in t.items()}
            out.append({"n": n, "p": p, "density": density, "nnz": int(A.nnz), "seconds": s,
                        "cpu_seconds": c})
            print(f"  n={n:<7} p={p:<4} nnz={A.nnz:<9} CPU ms: scipy {c['scipy'] * 1e3:8.2f}  "
                  f"ring_spmatmul {c['ring_spmatmul'] * 1e3:8.2f}")
    return out


def run(args) -> int:
    from ..kernels import ring_matmul as RM
    from . import write_json

    rows, cols = _ints(args.rows, "--rows"), _ints(args.cols, "--cols")
    if args.repeats < 1:
        raise ValueError(f"--repeats must be >= 1, got {args.repeats}")
    if not 0 < args.density <= 1:
        raise ValueError(f"--density must be in (0, 1], got {args.density}")
    from contextlib import nullcontext

    try:
        from threadpoolctl import threadpool_info, threadpool_limits
    except ImportError:                    # optional: the BLAS library's own threads then
        threadpool_info, threadpool_limits = list, None
    if args.threads is not None and threadpool_limits is None:
        raise ValueError("--threads needs threadpoolctl (pip install threadpoolctl)")
    limit = nullcontext() if args.threads is None else \
        threadpool_limits(limits=args.threads, user_api="blas")
    if args.threads is not None and RM._has_torch():
        import torch

        torch.set_num_threads(int(args.threads))     # torch's own pool, as BLAS's
    rng = np.random.default_rng(0)
    with limit:
        blas = [{k: i.get(k) for k in ("internal_api", "version", "num_threads")}
                for i in threadpool_info() if i.get("user_api") == "blas"]
        out = {"rows": rows, "cols": cols, "repeats": args.repeats, "budget_seconds": args.budget,
               "limb_offsets": list(RM.LIMB_OFFSETS), "chunk": RM.max_chunk(),
               "blas_min": RM.BLAS_MIN, "blas": blas, "python": platform.python_version(),
               "numpy": np.__version__, "cpus": os.cpu_count(),
               "load_average_before": list(os.getloadavg()) if hasattr(os, "getloadavg") else None}
        print(f"ring products over Z/2^64; median of {args.repeats} runs after a warm-up; BLAS "
              f"{blas}; load average {out['load_average_before']}")
        print("\nvector-matrix v^T M")
        out["vecmat"] = bench_vecmat(rows, cols, args.repeats, args.budget, rng)
        print(f"\nsparse x dense A^T z (density {args.density})")
        out["sparse"] = bench_sparse(rows, cols, args.density, args.repeats, args.budget, rng)
        if not args.skip_gram:
            print("\nGram blocks (n x p)^T (n x q)  (* numpy timed on fewer rows, scaled to n)")
            out["gram"] = bench_gram(rows, cols, args.repeats, args.budget, rng)
        out["load_average_after"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    write_json(args.json, out)
    return 0
