"""``vflpriv bench bcfw``: the vertical engine's speed, memory, compression and utility.

Sections (``--sections speed,compression,utility,calibration``):

* speed: an rcv1-sized sparse problem (n = 20242, d = 47236, 1.5 M nonzeros; the synthetic
  generator with that density), K = 4, m = 200, each sketch: seconds per iteration of the whole
  protocol, per-party gradient time against the block's nonzeros (unbalanced blocks 1:2:3:4),
  memory of each party's block and sketch.
* compression: uplink payload against raw-column sharing (n float64 per new feature) and
  full-gradient sharing (|P_k| float64 per round), from the same runs.
* utility: excess empirical risk of DP-BCFW-AS at epsilon = 1 for n = 2^10 .. 2^max (K = 2, 4, 8)
  against centralized DP-FW on the same product set, and the log-log slope (Theorem 4: -2/3).
* calibration: accountant calibration against the paper's closed forms at the same guarantee.
"""
from __future__ import annotations

import time

import numpy as np

from ..units import format_bytes

SECTIONS = ("speed", "compression", "utility", "calibration")


def add_arguments(p):
    p.add_argument("--sections", default=",".join(SECTIONS),
                   help=f"comma-separated subset of {','.join(SECTIONS)}")
    p.add_argument("--iterations", type=int, default=1000, help="rounds for the speed runs")
    p.add_argument("--sketch-dim", type=int, default=200)
    p.add_argument("--utility-max-log2n", type=int, default=16)
    p.add_argument("--utility-iterations", type=int, default=50)
    p.add_argument("--utility-d", type=int, default=2000)
    p.add_argument("--seeds", type=int, default=2, help="seeds per utility point")
    p.add_argument("--utility-epsilon", type=float, default=1.0)
    p.add_argument("--utility-sketch", default="identity", choices=["identity", "gaussian", "countsketch"])
    p.add_argument("--utility-sketch-dim", type=int, default=200)
    p.add_argument("--utility-derivative-clip", type=float, default=None)
    p.add_argument("--workers", type=int, default=None, help="party threads (default: cores)")


def _rcv1_like(seed=0):
    from ..data import make_synthetic

    n, d, nnz = 20242, 47236, 1_500_000
    return make_synthetic(n=n, d=d, density=nnz / (n * d), sparsity=0.001, seed=seed)


def _speed(args, out):
    from ..data import VerticalData
    from ..optim import SquaredLoss
    from ..vertical import Server
    from ..vertical.sketch import Sketch
    from ..vertical.transport import InProcessTransport

    A, y, _ = _rcv1_like()
    D = VerticalData.from_arrays(A, y, "balanced", parties=4)
    rows = []
    print(f"speed: n={D.n} d={D.d} nnz={A.nnz} K=4 m={args.sketch_dim} T={args.iterations}")
    for kind in ("identity", "countsketch", "gaussian"):
        m = None if kind == "identity" else args.sketch_dim
        t0 = time.perf_counter()
        srv = Server(D, SquaredLoss(), 1.0, sketch=kind, sketch_dim=m,
                     transport_factory=lambda ps: InProcessTransport(ps, workers=args.workers))
        setup = time.perf_counter() - t0
        t0 = time.perf_counter()
        for _ in range(args.iterations):
            srv.step()
        loop = time.perf_counter() - t0
        srv.transport.close()
        res = srv.result(loop)
        # Measured memory: Python-traced peak (numpy buffers included) of building the parties
        # and running 20 rounds, for a fresh server (the data set itself is not counted).
        import tracemalloc

        tracemalloc.start()
        small = Server(D, SquaredLoss(), 1.0, sketch=kind, sketch_dim=m,
                       transport_factory=lambda ps: InProcessTransport(ps, workers=1))
        for _ in range(20):
            small.step()
        traced_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        block_bytes = [p.A.data.nbytes + p.A.indices.nbytes + p.A.indptr.nbytes for p in srv.parties]
        sk_bytes = {"identity": 0, "countsketch": 16 * D.n, "gaussian": 8 * D.n * srv.m}[kind]
        row = {"sketch": kind, "m": srv.m, "setup_s": setup, "loop_s": loop,
               "ms_per_iteration": 1e3 * loop / args.iterations,
               "final_objective": res.objective[-1], "party_block_bytes": block_bytes,
               "party_sketch_bytes": sk_bytes, "traced_peak_bytes_all_parties": traced_peak,
               "uplink": res.uplink(),
               "uplink_naive": res.naive_uplink, "uplink_full_gradient": res.full_gradient_uplink,
               "downlink": res.downlink(), "released": res.released}
        rows.append(row)
        print(f"  {kind:11s} setup {setup:5.2f} s  {row['ms_per_iteration']:6.2f} ms/iteration  "
              f"({loop:.2f} s for {args.iterations})  f={row['final_objective']:.6g}  "
              f"block {format_bytes(max(block_bytes))} + sketch {format_bytes(sk_bytes)} per "
              f"party; traced peak (4 parties + server, 20 rounds) {format_bytes(traced_peak)}")
    out["speed"] = rows
    # Party work against its block's nonzeros: unbalanced blocks 1:2:3:4 of the columns.
    cuts = np.cumsum([0, 1, 2, 3, 4]) * D.d // 10
    groups = [np.arange(cuts[i], cuts[i + 1]) for i in range(4)]
    Du = VerticalData(A, y, groups)
    srv = Server(Du, SquaredLoss(), 1.0)
    q = np.random.default_rng(0).standard_normal(D.n) * 0.1
    per = []
    for p in srv.parties:
        p.sketch = Sketch("identity", D.n, None, 0)
        reps = []
        for _ in range(15):
            t0 = time.perf_counter()
            p.scores(q)
            reps.append(time.perf_counter() - t0)
        per.append({"party": p.k, "nnz": int(p.A.nnz), "ms": 1e3 * float(np.median(reps))})
    out["party_work"] = per
    print("  party gradient work (median of 15): " + ", ".join(
        f"k={r['party']} nnz={r['nnz']} {r['ms']:.2f} ms" for r in per))
    slope = np.polyfit(np.log([r["nnz"] for r in per]), np.log([r["ms"] for r in per]), 1)[0]
    out["party_work_loglog_slope"] = float(slope)
    print(f"  log-log slope of time vs nnz: {slope:.2f} (1 = proportional)")


def _compression(out):
    if "speed" not in out:
        print("compression: needs the speed section")
        return
    print("compression (uplink payload, all parties):")
    rows = []
    for r in out["speed"]:
        up, naive, full = sum(r["uplink"]), sum(r["uplink_naive"]), sum(r["uplink_full_gradient"])
        rows.append({"sketch": r["sketch"], "uplink": up, "raw_columns": naive, "full_gradient": full,
                     "vs_raw": up / naive, "vs_full_gradient": up / full})
        print(f"  {r['sketch']:11s} {format_bytes(up, 3):>11}; raw columns "
              f"{format_bytes(naive, 2):>10} ({100 * up / naive:.2f}%); full gradients "
              f"{format_bytes(full, 1):>10} "
              f"({100 * up / full:.3f}%)")
    out["compression"] = rows


def _utility(args, out):
    from ..data import VerticalData, make_synthetic
    from ..optim import reference_optimum
    from ..vertical import solve

    eps, sk = args.utility_epsilon, args.utility_sketch
    skm = None if sk == "identity" else args.utility_sketch_dim
    print(f"utility: epsilon={eps:g}, delta=1e-6, T={args.utility_iterations}, d={args.utility_d}, "
          f"sketch={sk}{'' if skm is None else f' m={skm}'}, B_a=B_y=3, eta=1 per party, "
          f"derivative clip {args.utility_derivative_clip}; "
          f"excess risk = f(x_T) - f* on the same product set")
    ns = [2 ** k for k in range(10, args.utility_max_log2n + 1)]
    res = {}
    for n in ns:
        for seed in range(args.seeds):
            A, y, _ = make_synthetic(n=n, d=args.utility_d, density=0.01, sparsity=0.01, seed=seed)
            for K in (2, 4, 8):
                D = VerticalData.from_arrays(A, y, "balanced", parties=K)
                ref = reference_optimum(D.A, D.y, "squared", blocks=D.blocks, eta=1.0,
                                        on_failure="flag").objective
                common = dict(eta=1.0, iterations=args.utility_iterations, epsilon=eps,
                              delta=1e-6, feature_bound=3.0, label_bound=3.0, seed=seed,
                              report_accountants=("rdp",),
                              derivative_clip=args.utility_derivative_clip)
                for algo in ("dp-bcfw", "dpfw"):
                    extra = dict(sketch=sk, sketch_dim=skm) if algo == "dp-bcfw" else {}
                    f = solve(D, algorithm=algo, **common, **extra).final_objective
                    res.setdefault((algo, K, n), []).append(f - ref)
                # the same T rounds without privacy, and the gap at x = 0, to read the numbers
                np_sol = solve(D, algorithm="bcfw", eta=1.0, iterations=args.utility_iterations)
                res.setdefault(("bcfw", K, n), []).append(np_sol.final_objective - ref)
                res.setdefault(("gap0", K, n), []).append(np_sol.initial_objective - ref)
        for K in (2, 4, 8):
            g0 = np.mean(res[("gap0", K, n)])
            print(f"  n={n:6d} K={K}: f(0)-f*={g0:.4g}  excess: dp-bcfw "
                  f"{np.mean(res[('dp-bcfw', K, n)]):.4g}  dpfw {np.mean(res[('dpfw', K, n)]):.4g}  "
                  f"bcfw (non-private) {np.mean(res[('bcfw', K, n)]):.4g}  gap removed by dp-bcfw "
                  f"{100 * (1 - np.mean(res[('dp-bcfw', K, n)]) / g0):.1f}%")
    rows, slopes = [], {}
    for (a, K, n), v in res.items():
        rows.append({"algorithm": a, "K": K, "n": n, "excess_risk": float(np.mean(v)),
                     "per_seed": [float(x) for x in v]})
    for a in ("dp-bcfw", "dpfw", "bcfw"):
        for K in (2, 4, 8):
            pts = [(n, np.mean(res[(a, K, n)])) for n in ns if np.mean(res[(a, K, n)]) > 0]
            if len(pts) >= 2:
                s = np.polyfit(np.log([p[0] for p in pts]), np.log([p[1] for p in pts]), 1)[0]
                slopes[f"{a}/K={K}"] = float(s)
    print("  log-log slopes (Theorem 4 predicts -2/3): " +
          ", ".join(f"{k}: {v:.2f}" for k, v in slopes.items()))
    out["utility"] = {"epsilon": eps, "derivative_clip": args.utility_derivative_clip, "sketch": sk, "sketch_dim": skm,
                      "iterations": args.utility_iterations, "points": rows, "slopes": slopes}


def _calibration(out):
    from ..optim import SquaredLoss
    from ..vertical import privacy as P

    n, K, T, eps, delta = 2 ** 14, 4, 100, 1.0, 1e-6
    sens = P.sensitivities(SquaredLoss(), 3.0, 3.0, K * 1.0, n, 1.0)
    paper = P.calibrate_paper("laplace", sens, eps, delta, T, K, 1.0, n, 3.0, 1.0)
    acc_same = P.calibrate_accountant("laplace", sens, paper.epsilon, delta, T, K)
    acc_target = P.calibrate_accountant("laplace", sens, eps, delta, T, K)
    row = {"n": n, "K": K, "T": T, "delta": delta, "target_epsilon": eps,
           "paper": paper.to_dict(), "accountant_at_paper_epsilon": acc_same.to_dict(),
           "accountant_at_target": acc_target.to_dict(),
           "index_noise_ratio_paper_over_accountant": paper.index_scale / acc_same.index_scale,
           "feature_noise_ratio_paper_over_accountant": paper.feature_sigma / acc_same.feature_sigma}
    out["calibration"] = {k: v for k, v in row.items()}
    for d in (row["paper"], row["accountant_at_paper_epsilon"], row["accountant_at_target"]):
        d.pop("event", None)
    print(f"calibration (n={n}, K={K}, T={T}, identity sketch, delta={delta}):")
    print(f"  paper closed forms for eps={eps}: index scale {paper.index_scale:.4g}, feature sigma "
          f"{paper.feature_sigma:.4g}; they really spend eps={paper.epsilon:.4g} (rdp)")
    print(f"  accountant at that same eps: index {acc_same.index_scale:.4g}, feature "
          f"{acc_same.feature_sigma:.4g} -> paper/accountant noise x"
          f"{row['index_noise_ratio_paper_over_accountant']:.2f} (index), "
          f"x{row['feature_noise_ratio_paper_over_accountant']:.2f} (feature)")
    print(f"  accountant at eps={eps}: index {acc_target.index_scale:.4g}, feature "
          f"{acc_target.feature_sigma:.4g}")


def run(args) -> int:
    from . import write_json
    from ..errors import InputError

    secs = [s.strip() for s in args.sections.split(",") if s.strip()]
    bad = [s for s in secs if s not in SECTIONS]
    if bad:
        raise InputError(f"unknown section {bad[0]!r}; choose from {', '.join(SECTIONS)}")
    if args.iterations < 1:
        raise InputError(f"--iterations must be >= 1, got {args.iterations}")
    out = {"sections": secs}
    if "speed" in secs:
        # The K simulated parties already run in threads; a multi-threaded BLAS inside each of
        # them oversubscribes a small machine (measured: J^T q 1.8 ms single-threaded vs
        # 20-30 ms with OpenBLAS threads on 2 busy cores).  One BLAS thread per party.
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1, user_api="blas"):
            _speed(args, out)
    if "compression" in secs:
        _compression(out)
    if "utility" in secs:
        _utility(args, out)
    if "calibration" in secs:
        _calibration(out)
    write_json(args.json, out)
    return 0
