"""``vflpriv bench secure --traffic``: the logistic loss's secure paths side by side: ``glm``
(the loss's derivatives under secret sharing every round: margin shares, the sigmoid series'
masked factors, a helper party) and ``ssp`` (the loss's expansion at 0, its sufficient
statistics released once).  The recorded pages also hold a third path, ``taylor`` (least
squares on that expansion, labels 2y), retired since: it was below ssp on every measured row.

On each table (``--tables``: ``flights``, the 40k-row sample of ``vflpriv bench peers``, and
``synthetic``, n = 20000, d = 60, K = 3, logistic labels from a sparse model), for every seed a
split holds out ``--test-fraction`` of the rows (``split_rows``, as ``bench peers``), both paths
are fitted on the training rows with the defaults of dp-bcfw-secure (eta auto, intercept on,
label at party 0, declared bounds B_a of the table and B_y = 1) at each epsilon, and the figures
are: framed bytes in all and by message kind, seconds, test AUC and log-loss, epsilon spent.
"""
from __future__ import annotations

import time

import numpy as np

PATHS = ("glm", "ssp")
TABLES = ("flights", "synthetic")


def add_traffic_arguments(p):
    p.add_argument("--traffic", action="store_true",
                   help="instead: the logistic loss's glm path beside its ssp path "
                        "(bytes by kind, seconds, test AUC) on --tables")
    p.add_argument("--tables", default=",".join(TABLES),
                   help=f"with --traffic: tables, from {', '.join(TABLES)} (default all)")
    p.add_argument("--epsilons", default="1,4", help="with --traffic: epsilons (default 1,4)")
    p.add_argument("--seeds", default="0,1,2", help="with --traffic: seeds (default 0,1,2)")
    p.add_argument("--iterations", type=int, default=200,
                   help="with --traffic: rounds T (default 200)")
    p.add_argument("--test-fraction", type=float, default=0.2,
                   help="with --traffic: held-out fraction (default 0.2)")


def _synthetic():
    from .tables import Table

    rng = np.random.default_rng(0)
    n, d = 20000, 60
    A = rng.uniform(-1.0, 1.0, size=(n, d))
    w = np.zeros(d)
    w[rng.choice(d, 8, replace=False)] = rng.choice([-1.0, 1.0], 8) * rng.uniform(0.5, 1.5, 8)
    p = 1.0 / (1.0 + np.exp(-(A @ w - 1.0)))
    y = np.where(rng.uniform(size=n) < p, 1.0, -1.0)
    blocks = [list(range(0, 20)), list(range(20, 40)), list(range(40, 60))]
    return Table(name="synthetic", A=A, y=y, blocks=blocks, feature_bound=1.0,
                 source="uniform [-1, 1] features, 8 of 60 active, intercept -1 (seed 0)")


def _table(name):
    """``name`` from :data:`TABLES` (checked by the caller)."""
    from .tables import load_table

    return _synthetic() if name == "synthetic" else load_table(name)


def _parse(text, kind, name):
    from ..errors import InputError

    try:
        vals = [kind(v) for v in str(text).split(",") if v.strip()]
    except ValueError:
        raise InputError(f"{name} must be a comma-separated list, got {text!r}") from None
    if not vals:
        raise InputError(f"{name} is empty: {text!r}")
    return vals


def _fit(table, train, test, path, eps, seed, T):
    from ..data import VerticalData
    from ..vertical import solve
    from ..vertical.metrics import classification_metrics

    data = VerticalData.from_arrays(table.A[train], table.y[train], partition=table.blocks)
    t0 = time.perf_counter()
    sol = solve(data, algorithm="dp-bcfw-secure", loss="logistic", logistic_path=path,
                iterations=T, epsilon=eps, delta=1e-6, feature_bound=table.feature_bound,
                label_bound=1.0, label_party=0, seed=seed)
    seconds = time.perf_counter() - t0
    m = classification_metrics(table.A[test], table.y[test], sol.x, sol.intercept)
    by = {k: int(v[1]) for k, v in sol.extra["bytes_by_type"].items()}
    return {"path": path, "epsilon": eps, "seed": seed, "test_auc": float(m["auc"]),
            "test_log_loss": float(m["log_loss"]), "seconds": seconds,
            "framed_bytes": int(sum(sol.uplink_framed) + sum(sol.downlink_framed)),
            "framed_bytes_by_type": by,
            "epsilon_spent": float(sol.privacy["epsilon_spent"]["best"])}


def run_traffic(args) -> int:
    from ..errors import InputError
    from . import write_json
    from ..units import format_bytes
    from ..vertical.metrics import split_rows

    tables = _parse(args.tables, str, "--tables")
    for t in tables:
        if t not in TABLES:
            raise InputError(f"--tables: unknown table {t!r} (choose from {', '.join(TABLES)})")
    epsilons = _parse(args.epsilons, float, "--epsilons")
    if any(not (0 < e < float("inf")) for e in epsilons):
        raise InputError(f"--epsilons must be positive and finite, got {args.epsilons!r}")
    seeds = _parse(args.seeds, int, "--seeds")
    if args.iterations < 1:
        raise InputError(f"--iterations must be positive, got {args.iterations}")
    if not 0 < args.test_fraction < 1:
        raise InputError(f"--test-fraction must be in (0, 1), got {args.test_fraction}")
    rows, summary = [], []
    for name in tables:
        table = _table(name)
        for eps in epsilons:
            for path in PATHS:
                runs = []
                for seed in seeds:
                    train, test = split_rows(table.A.shape[0], args.test_fraction, seed)
                    r = _fit(table, train, test, path, eps, seed, args.iterations)
                    runs.append(dict(r, table=name))
                rows += runs
                summary.append({"table": name, "epsilon": eps, "path": path,
                                "test_auc": float(np.mean([r["test_auc"] for r in runs])),
                                "test_auc_sd": float(np.std([r["test_auc"] for r in runs],
                                                            ddof=1)) if len(runs) > 1 else 0.0,
                                "framed_bytes": float(np.mean([r["framed_bytes"]
                                                               for r in runs])),
                                "seconds": float(np.mean([r["seconds"] for r in runs])),
                                "epsilon_spent": max(r["epsilon_spent"] for r in runs)})
    print(f"dp-bcfw-secure, logistic: glm path vs ssp path (T={args.iterations}, "
          f"delta=1e-6, seeds {','.join(map(str, seeds))}, held out {args.test_fraction:g})")
    print(f"{'table':10} {'eps':>4} {'path':7} {'test AUC':>14} {'bytes':>10} {'seconds':>8}")
    for s in summary:
        print(f"{s['table']:10} {s['epsilon']:>4g} {s['path']:7} "
              f"{s['test_auc']:.3f} ± {s['test_auc_sd']:.3f} {format_bytes(s['framed_bytes']):>10} "
              f"{s['seconds']:8.1f}")
    for name in tables:
        for eps in epsilons:
            g, *others = (next(s for s in summary if (s["table"], s["epsilon"], s["path"]) ==
                               (name, eps, p)) for p in PATHS)
            for t in others:
                print(f"{name}, eps {eps:g}: {t['path']} moves "
                      f"{g['framed_bytes'] / t['framed_bytes']:.1f}x fewer bytes; test AUC "
                      f"{t['test_auc'] - g['test_auc']:+.3f}")
    if args.json:
        write_json(args.json, {
            "benchmark": "secure --traffic", "tables": tables,
            "epsilons": epsilons, "seeds": seeds, "iterations": args.iterations,
            "test_fraction": args.test_fraction, "delta": 1e-6, "summary": summary,
            "runs": rows})
    return 0
