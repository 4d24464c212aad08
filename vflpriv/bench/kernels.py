"""``vflpriv bench kernels``: the compiled kernels against their numpy reference and the usual tools.

Every contender is timed as the median of ``--repeats`` runs after one warm-up run; peak extra
memory is the peak of Python-traced allocations (numpy reports its buffers to tracemalloc) during
one separate run.  ``speedup`` = reference seconds / compiled seconds.

* noisy_argmax (and the signed variant): d = 1e4, 1e5, 1e6 scores, each noise; compiled vs
  reference vs the naive ``np.argmax(v + rng.<noise>(...))``; the floor is the time numpy takes
  to draw d uniforms (``rng.random(d)``), since every exact method needs d random numbers.
* sketch_columns: the engine's use, one column per call: 1000 columns of an rcv1-sized sparse
  matrix (n = 20242 rows, 47236 columns, 32 nonzeros per column) to m = 200; compiled vs reference
  vs materializing J (m x n, ``rng.standard_normal``) once and multiplying.
* sketch_matrix: a 20000 x 20000 sparse matrix of density 1e-3 to m = 200: gaussian vs
  scikit-learn's GaussianRandomProjection, countsketch vs scipy's clarkson_woodruff_transform
  (which returns a sparse matrix for sparse input; ``speedup``/``vs_scipy`` of countsketch use our
  sparse output, the dense-output time is reported too).
"""
from __future__ import annotations

import os
import platform
import tracemalloc

import numpy as np

from ..units import format_bytes
from . import median_time, write_json

NOISE_NAIVE = {"laplace": lambda rng, s, d: rng.laplace(0.0, s, d),
               "gumbel": lambda rng, s, d: rng.gumbel(0.0, s, d),
               "exponential": lambda rng, s, d: rng.exponential(s, d)}


def add_arguments(p):
    p.add_argument("--repeats", type=int, default=7, help="timed runs per contender (median)")
    p.add_argument("--sizes", default="10000,100000,1000000",
                   help="comma-separated d for noisy_argmax (default 1e4,1e5,1e6)")


def _peak_bytes(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return int(tracemalloc.get_traced_memory()[1])
    finally:
        tracemalloc.stop()


def _rcv1_like(n=20242, ncols=47236, nnz=32, seed=0):
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    # 32 distinct sorted rows per column: draw 40, keep the first 32 distinct (duplicates are rare)
    rows = np.sort(rng.integers(0, n, size=(ncols, nnz)), axis=1)
    dup = np.zeros_like(rows, dtype=bool)
    dup[:, 1:] = rows[:, 1:] == rows[:, :-1]
    rows[dup] = (rows[dup] + 1) % n  # nudge the few repeats; indices stay valid
    data = rng.random(ncols * nnz)  # tf-idf-like positive weights
    indptr = np.arange(0, ncols * nnz + 1, nnz)
    return sp.csc_array((data, rows.ravel().astype(np.int32), indptr.astype(np.int32)),
                        shape=(n, ncols))


def bench_noisy_argmax(sizes, repeats, K, R):
    rows = []
    for d in sizes:
        rng = np.random.default_rng(d)
        v = rng.standard_normal(d)
        scale = 1.0
        floor = median_time(lambda: rng.random(d), repeats, 1)
        for noise in ("laplace", "gumbel", "exponential"):
            t = {"compiled": median_time(lambda: K.noisy_argmax(v, noise, scale, rng), repeats, 1)
                 if K.compiled else None,
                 "reference": median_time(lambda: R.noisy_argmax(v, noise, scale, rng), repeats, 1),
                 "naive": median_time(lambda: int(np.argmax(v + NOISE_NAIVE[noise](rng, scale, d))),
                                      repeats, 1),
                 "draw_d_uniforms": floor,
                 "signed_compiled": median_time(
                     lambda: K.signed_noisy_argmax(v, noise, scale, rng), repeats, 1)
                 if K.compiled else None,
                 "signed_reference": median_time(
                     lambda: R.signed_noisy_argmax(v, noise, scale, rng), repeats, 1)}
            mem = {"compiled": _peak_bytes(lambda: K.noisy_argmax(v, noise, scale, rng))
                   if K.compiled else None,
                   "reference": _peak_bytes(lambda: R.noisy_argmax(v, noise, scale, rng)),
                   "naive": _peak_bytes(lambda: np.argmax(v + NOISE_NAIVE[noise](rng, scale, d)))}
            c = t["compiled"]
            rows.append({"d": d, "noise": noise, "seconds": t, "peak_extra_bytes": mem,
                         "speedup": t["reference"] / c if c else None,
                         "speedup_vs_naive": t["naive"] / c if c else None,
                         "compiled_over_uniform_floor": c / floor if c else None,
                         "signed_speedup": t["signed_reference"] / t["signed_compiled"]
                         if c else None})
    return rows


def bench_sketch_columns(repeats, K, R, m=200, ncols_drawn=1000, seed=7):
    A = _rcv1_like()
    n = A.shape[0]
    cols = np.random.default_rng(1).choice(A.shape[1], ncols_drawn, replace=False)

    def one_at_a_time(mod):
        return [mod.sketch_columns(A, [j], m, seed, "gaussian") for j in cols]

    def materialized():  # J once, then per column only the m x nnz block J[:, rows] is used
        J = np.random.default_rng(seed).standard_normal((m, n)) / np.sqrt(m)
        ip, ix, x = A.indptr, A.indices, A.data
        return [J[:, ix[ip[j]:ip[j + 1]]] @ x[ip[j]:ip[j + 1]] for j in cols]

    def materialized_batch():
        J = np.random.default_rng(seed).standard_normal((m, n)) / np.sqrt(m)
        return (A[:, cols].T @ J.T).T

    reps = max(3, repeats // 2)
    t = {"compiled": median_time(lambda: one_at_a_time(K), reps, 1) if K.compiled else None,
         "reference": median_time(lambda: one_at_a_time(R), reps, 1),
         "materialized_J": median_time(materialized, reps, 1),
         "materialized_J_batch": median_time(materialized_batch, reps, 1),
         "compiled_batch": median_time(lambda: K.sketch_columns(A, cols, m, seed), reps, 1)
         if K.compiled else None,
         "countsketch_compiled": median_time(
             lambda: [K.sketch_columns(A, [j], m, seed, "countsketch") for j in cols], reps, 1)
         if K.compiled else None,
         "countsketch_reference": median_time(
             lambda: [R.sketch_columns(A, [j], m, seed, "countsketch") for j in cols], reps, 1)}
    # Memory of the per-call work (the list of 1000 results, 1.6 MB, is the same for all three
    # and excluded by measuring one call; J is what materializing adds).
    j0 = int(cols[0])
    mem = {"compiled": _peak_bytes(lambda: K.sketch_columns(A, [j0], m, seed)) if K.compiled
           else None,
           "reference": _peak_bytes(lambda: R.sketch_columns(A, [j0], m, seed)),
           "materialized_J": _peak_bytes(
               lambda: np.random.default_rng(seed).standard_normal((m, n)) / np.sqrt(m)
               @ A[:, [j0]].toarray())}
    c = t["compiled"]
    return {"n": n, "ncols_matrix": A.shape[1], "nnz_per_column": 32, "m": m,
            "columns_sketched": ncols_drawn, "calls": ncols_drawn, "seconds": t,
            "peak_extra_bytes": mem, "speedup": t["reference"] / c if c else None,
            "speedup_vs_materialized": t["materialized_J"] / c if c else None,
            "memory_ratio_materialized_over_compiled":
                mem["materialized_J"] / mem["compiled"] if c else None,
            "countsketch_speedup": t["countsketch_reference"] / t["countsketch_compiled"]
            if c else None}


def bench_sketch_matrix(repeats, K, R, n=20000, density=1e-3, m=200, seed=7):
    import scipy.sparse as sp
    from scipy.linalg import clarkson_woodruff_transform
    from sklearn.random_projection import GaussianRandomProjection

    A = sp.random(n, n, density=density, format="csc", random_state=0)
    reps = max(3, repeats // 2)

    def sklearn_grp():  # GaussianRandomProjection reduces features: transform A^T -> (J A)^T
        return GaussianRandomProjection(n_components=m, random_state=seed).fit_transform(A.T)

    t = {"gaussian_compiled": median_time(lambda: K.sketch_matrix(A, m, seed), reps, 1)
         if K.compiled else None,
         "gaussian_reference": median_time(lambda: R.sketch_matrix(A, m, seed), reps, 1),
         "sklearn_GaussianRandomProjection": median_time(sklearn_grp, reps, 1),
         "countsketch_compiled": median_time(lambda: K.sketch_matrix(A, m, seed, "countsketch"),
                                             reps, 1) if K.compiled else None,
         # scipy returns a sparse result for sparse input; this is the like-for-like contender
         "countsketch_compiled_sparse_output": median_time(
             lambda: K.sketch_matrix(A, m, seed, "countsketch", sparse_output=True), reps, 1)
         if K.compiled else None,
         "countsketch_reference": median_time(lambda: R.sketch_matrix(A, m, seed, "countsketch"),
                                              reps, 1),
         "scipy_clarkson_woodruff_transform": median_time(
             lambda: clarkson_woodruff_transform(A, m, seed=seed), reps, 1)}
    mem = {"gaussian_compiled": _peak_bytes(lambda: K.sketch_matrix(A, m, seed))
           if K.compiled else None,
           "gaussian_reference": _peak_bytes(lambda: R.sketch_matrix(A, m, seed)),
           "sklearn_GaussianRandomProjection": _peak_bytes(sklearn_grp),
           "countsketch_compiled": _peak_bytes(lambda: K.sketch_matrix(A, m, seed, "countsketch"))
           if K.compiled else None,
           "countsketch_compiled_sparse_output": _peak_bytes(
               lambda: K.sketch_matrix(A, m, seed, "countsketch", sparse_output=True))
           if K.compiled else None,
           "scipy_clarkson_woodruff_transform": _peak_bytes(
               lambda: clarkson_woodruff_transform(A, m, seed=seed))}
    gc, cc = t["gaussian_compiled"], t["countsketch_compiled_sparse_output"]
    return {"n": n, "density": density, "nnz": int(A.nnz), "m": m, "seconds": t,
            "peak_extra_bytes": mem,
            "speedup": {"gaussian": t["gaussian_reference"] / gc if gc else None,
                        "countsketch": t["countsketch_reference"] / t["countsketch_compiled"]
                        if cc else None},  # both dense output
            "vs_sklearn": t["sklearn_GaussianRandomProjection"] / gc if gc else None,
            "vs_scipy": t["scipy_clarkson_woodruff_transform"] / cc if cc else None,
            "vs_scipy_dense_output": t["scipy_clarkson_woodruff_transform"] /
            t["countsketch_compiled"] if cc else None}


def _fmt(x, unit=1e3):
    return "   n/a" if x is None else f"{x * unit:9.2f}"


def run(args) -> int:
    import vflpriv.kernels as K
    from vflpriv.kernels import reference as R

    if args.repeats < 1:
        raise ValueError(f"--repeats must be >= 1, got {args.repeats}")
    try:
        sizes = [int(float(s)) for s in args.sizes.split(",")]
    except ValueError:
        raise ValueError(f"--sizes must be comma-separated integers, got {args.sizes!r}") from None
    if any(d < 1 for d in sizes):
        raise ValueError(f"--sizes must be positive, got {args.sizes!r}")
    out = {"compiled": K.compiled, "repeats": args.repeats, "python": platform.python_version(),
           "numpy": np.__version__, "cpus": os.cpu_count(),
           "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None}
    print(f"vflpriv.kernels compiled = {K.compiled}; median of {args.repeats} runs after a warm-up; "
          f"load average {out['load_average']}")

    out["noisy_argmax"] = rows = bench_noisy_argmax(sizes, args.repeats, K, R)
    print("\nnoisy_argmax (ms)        compiled reference     naive  uniforms  speedup  "
          "signed c  signed r")
    for r in rows:
        s = r["seconds"]
        print(f"  d={r['d']:<8} {r['noise']:<11} {_fmt(s['compiled'])} {_fmt(s['reference'])} "
              f"{_fmt(s['naive'])} {_fmt(s['draw_d_uniforms'])}  "
              f"{(r['speedup'] or 0):6.1f}x {_fmt(s['signed_compiled'])} "
              f"{_fmt(s['signed_reference'])}")

    out["sketch_columns"] = sc = bench_sketch_columns(args.repeats, K, R)
    s, mem = sc["seconds"], sc["peak_extra_bytes"]
    print(f"\nsketch_columns: {sc['columns_sketched']} single-column calls, n = {sc['n']}, "
          f"{sc['nnz_per_column']} nnz/column, m = {sc['m']} (s; peak extra bytes per call)")
    for name in ("compiled", "reference", "materialized_J"):
        print(f"  {name:<22} {_fmt(s[name], 1)} s   {mem[name] if mem[name] is not None else 'n/a'}")
    for name in ("compiled_batch", "materialized_J_batch", "countsketch_compiled",
                 "countsketch_reference"):
        print(f"  {name:<22} {_fmt(s[name], 1)} s")
    print(f"  speedup vs reference {(sc['speedup'] or 0):.1f}x, vs materialized J "
          f"{(sc['speedup_vs_materialized'] or 0):.1f}x, memory materialized/compiled "
          f"{(sc['memory_ratio_materialized_over_compiled'] or 0):.0f}x")

    out["sketch_matrix"] = sm = bench_sketch_matrix(args.repeats, K, R)
    print(f"\nsketch_matrix: {sm['n']} x {sm['n']}, density {sm['density']}, m = {sm['m']} "
          "(s; peak extra memory)")
    for name, sec in sm["seconds"].items():
        b = sm["peak_extra_bytes"].get(name)
        print(f"  {name:<34} {_fmt(sec, 1)} s   "
              f"{'' if b is None else format_bytes(b).rjust(10)}")
    print(f"  gaussian: speedup vs reference {(sm['speedup']['gaussian'] or 0):.1f}x, "
          f"vs scikit-learn {(sm['vs_sklearn'] or 0):.2f}x;  countsketch: vs reference "
          f"{(sm['speedup']['countsketch'] or 0):.1f}x, vs scipy {(sm['vs_scipy'] or 0):.2f}x "
          f"(sparse output; dense output {(sm['vs_scipy_dense_output'] or 0):.2f}x)")
    write_json(args.json, out)
    return 0
