"""``vflpriv bench peers``: vflpriv against its peers on held-out real tables (issue 30, item 4).

For each table of ``--tables`` (:mod:`.tables`: flights, caravan, default) and each seed of
``--seeds``, the rows are split by ``vflpriv.vertical.metrics.split_rows(n, --test-fraction,
seed)``; every system (:mod:`.peers_systems`: scikit-learn's l1 LogisticRegressionCV, diffprivlib,
opacus DP-SGD under its own add/remove relation and under vflpriv's replace-one, vflpriv's ``fw``,
``dpfw`` and ``dp-bcfw-secure``) is fitted on the same training
rows, the private ones at each epsilon of ``--epsilons`` (delta ``--delta``; diffprivlib is pure
epsilon-DP), and scored on the same held-out rows: test AUC, test log-loss, accuracy beside the
majority share, the epsilon actually spent (from each system's own accountant, at run time),
bytes (vflpriv's federated algorithm: framed bytes of every message between parties) and wall
seconds.  The summary is the mean and sample standard deviation over seeds per (table, system,
epsilon), and each vertical system against DP-SGD paired over the seeds (:mod:`.peers_paired`:
the mean per-seed difference in test AUC with its 95% interval); ``--json`` writes every row,
the summary and the paired comparisons (``paired``), ``--markdown`` a page for docs
(:mod:`.peers_report`).  No system is tuned on these tables: each uses its library's defaults or
the rule stated in :mod:`.peers_systems`.
"""
from __future__ import annotations

import math
import statistics

from ..errors import InputError
from ..units import format_bytes
from ..vertical.config import choose_logistic_path
from .peers_systems import KIND, PRIVATE, SYSTEMS


def add_arguments(p):
    p.add_argument("--task", choices=("classification", "regression"), default="classification",
                   help="classification (the default: test AUC and log-loss) or regression "
                        "(boston, carseats, wage, bikeshare with their responses as labels: test "
                        "R^2 and RMSE against LassoCV, RidgeCV, diffprivlib, DP-SGD, central "
                        "AdaSSP; vflpriv/bench/peers_regression.py)")
    p.add_argument("--tables", default="flights,caravan,default",
                   help="comma-separated tables (flights, caravan, default, oj, fair, anes96, "
                        "wage, college, carseats, boston, bikeshare; see vflpriv/bench/"
                        "tables.py for their sources and public scaling)")
    p.add_argument("--epsilons", default="0.5,1,4",
                   help="comma-separated target epsilons of the private systems")
    p.add_argument("--delta", type=float, default=1e-6,
                   help="target delta of the (eps, delta)-DP systems")
    p.add_argument("--seeds", default="0,1,2",
                   help="comma-separated seeds: each one a held-out split and the noise")
    p.add_argument("--test-fraction", type=float, default=0.2,
                   help="share of each table's rows held out for the test metrics")
    p.add_argument("--iterations", type=int, default=200,
                   help="iterations of vflpriv's algorithms (fw, dpfw, dp-bcfw-secure)")
    p.add_argument("--systems", default=",".join(SYSTEMS),
                   help="comma-separated, from " + ", ".join(SYSTEMS))
    p.add_argument("--markdown", default=None, metavar="FILE",
                   help="also write a page with the summary tables (for docs)")


def _list(s, name, conv, what):
    vals = []
    for v in str(s).split(","):
        if not v.strip():
            continue
        try:
            vals.append(conv(v.strip()))
        except ValueError:
            raise InputError(f"--{name} must be comma-separated {what}, "
                             f"got {v.strip()!r}") from None
    if not vals:
        raise InputError(f"--{name} needs at least one value, got {s!r}")
    return vals


def check_args(args) -> dict:
    """Every option checked, before any table is read or any model fitted; one line naming the
    first bad value."""
    from ..outputs import check_outputs
    from ..vertical.metrics import check_test_fraction
    from .tables import check_tables

    tables = check_tables(args.tables)
    eps = _list(args.epsilons, "epsilons", float, "numbers")
    for e in eps:
        if not (e > 0 and math.isfinite(e)):
            raise InputError(f"--epsilons: each epsilon must be a positive finite number, "
                             f"got {e:g}")
    if isinstance(args.delta, bool) or not (0 < args.delta < 1):
        raise InputError(f"--delta must be in (0, 1), got {args.delta!r}")
    seeds = _list(args.seeds, "seeds", int, "non-negative integers")
    for s in seeds:
        if s < 0:
            raise InputError(f"--seeds: each seed must be a non-negative integer, got {s}")
    check_test_fraction(args.test_fraction)
    if args.iterations < 1:
        raise InputError(f"--iterations must be >= 1, got {args.iterations}")
    systems = _list(args.systems, "systems", str, "names")
    for s in systems:
        if s not in SYSTEMS:
            raise InputError(f"--systems: unknown system {s!r}; choose from {', '.join(SYSTEMS)}")
    check_outputs({"--json": args.json, "--markdown": args.markdown})
    return {"tables": tables, "epsilons": eps, "seeds": seeds, "systems": systems}


def command(args, opts) -> str:
    """The command line that reproduces this run, every option explicit."""
    def fmt(v):
        return f"{v:g}" if isinstance(v, float) else str(v)
    parts = ["vflpriv bench peers", "--tables " + ",".join(opts["tables"]),
             "--epsilons " + ",".join(fmt(e) for e in opts["epsilons"]),
             f"--delta {args.delta:g}", "--seeds " + ",".join(map(str, opts["seeds"])),
             f"--test-fraction {args.test_fraction:g}", f"--iterations {args.iterations}"]
    if opts["systems"] != list(SYSTEMS):
        parts.append("--systems " + ",".join(opts["systems"]))
    for opt in ("json", "markdown"):
        if getattr(args, opt, None):
            parts.append(f"--{opt} {getattr(args, opt)}")
    return " ".join(parts)


def _row(table, seed, system, eps, delta, res, test, n_train):
    from ..vertical.metrics import classification_metrics

    A, y = table.A[test], table.y[test]
    m = classification_metrics(A, y, res["x"], res["b"], "logistic")
    up, down = res.get("uplink_bytes"), res.get("downlink_bytes")
    private = system in PRIVATE
    return {"table": table.name, "seed": seed, "system": system, "kind": KIND[system],
            "private": private, "epsilon": eps if private else None,
            "delta": (0.0 if system == "diffprivlib" else delta) if private else None,
            "epsilon_spent": res.get("epsilon_spent"),
            "test_auc": m["auc"], "test_log_loss": m["log_loss"],
            "test_accuracy": m["accuracy"], "majority_accuracy": m["majority_accuracy"],
            "train_rows": n_train, "test_rows": m["rows"],
            "intercept": None if res["b"] is None else float(res["b"]),
            "support_size": int(sum(1 for v in res["x"] if v != 0)),
            "uplink_bytes": up, "downlink_bytes": down,
            "bytes": None if up is None else up + down,
            "seconds": res["seconds"], "settings": res.get("settings", {})}


def _fmt(v, spec):
    return "-" if v is None else format(v, spec)


def summarize(rows) -> list:
    """Mean and sample sd over seeds per (table, system, epsilon)."""
    groups = {}
    for r in rows:
        groups.setdefault((r["table"], r["system"], r["epsilon"]), []).append(r)
    out = []
    for (table, system, eps), rs in groups.items():
        ok = [r for r in rs if "unavailable" not in r]
        s = {"table": table, "system": system, "kind": KIND[system], "epsilon": eps,
             "seeds": len(ok)}
        if not ok:
            s["unavailable"] = rs[0]["unavailable"]
            out.append(s)
            continue
        for f in ("test_auc", "test_log_loss", "test_accuracy", "seconds", "bytes"):
            vals = [r[f] for r in ok if r[f] is not None]
            s[f] = statistics.fmean(vals) if vals else None
            if f in ("test_auc", "test_log_loss"):
                s[f + "_sd"] = statistics.stdev(vals) if len(vals) > 1 else None
        s["majority_accuracy"] = statistics.fmean(r["majority_accuracy"] for r in ok)
        spent = [r["epsilon_spent"] for r in ok if r["epsilon_spent"] is not None]
        s["epsilon_spent_max"] = max(spent) if spent else None
        out.append(s)
    # per table: the non-private references first, then each epsilon with its systems side by side
    tables = list(dict.fromkeys(s["table"] for s in out))
    out.sort(key=lambda s: (tables.index(s["table"]), s["epsilon"] is not None,
                            s["epsilon"] or 0.0, SYSTEMS.index(s["system"])))
    return out


def print_summary(summary):
    print(f"{'table':>8} {'system':>15} {'eps':>5} {'test AUC':>15} {'test log-loss':>15} "
          f"{'acc/major':>11} {'eps spent':>9} {'bytes':>9} {'seconds':>8}")
    for s in summary:
        eps = _fmt(s["epsilon"], "g")
        if "unavailable" in s:
            print(f"{s['table']:>8} {s['system']:>15} {eps:>5}  unavailable: {s['unavailable']}")
            continue
        auc = _fmt(s["test_auc"], ".3f") + ("" if s["test_auc_sd"] is None
                                             else f" +- {s['test_auc_sd']:.3f}")
        ll = _fmt(s["test_log_loss"], ".4f") + ("" if s["test_log_loss_sd"] is None
                                                else f" +- {s['test_log_loss_sd']:.4f}")
        acc = f"{s['test_accuracy']:.3f}/{s['majority_accuracy']:.3f}"
        mb = "-" if s["bytes"] is None else format_bytes(s["bytes"])
        print(f"{s['table']:>8} {s['system']:>15} {eps:>5} {auc:>15} {ll:>15} {acc:>11} "
              f"{_fmt(s['epsilon_spent_max'], '.3f'):>9} {mb:>9} {s['seconds']:>8.1f}")


def run(args) -> int:
    from ..bench import write_json
    from ..vertical.metrics import split_rows
    from . import peers_systems as S
    from .peers_paired import paired
    from .peers_report import write_markdown
    from .tables import load_table

    if getattr(args, "task", "classification") == "regression":
        from .peers_regression import run as run_regression

        return run_regression(args)
    opts = check_args(args)
    avail = S.availability(opts["systems"])
    cmd = command(args, opts)
    print(f"peers: {cmd}")
    for s in opts["systems"]:
        if avail[s]:
            print(f"({s} unavailable: {avail[s]})")
    rows, tables = [], []
    for name in opts["tables"]:
        table = load_table(name)
        tables.append({"name": name, "source": table.source, "rows": int(table.A.shape[0]),
                       "columns": int(table.A.shape[1]), "positives": table.positives,
                       "parties": len(table.blocks), "feature_bound": table.feature_bound,
                       "blocks": [len(b) for b in table.blocks]})
        print(f"{name}: {table.source}; {table.A.shape[1]} columns (declared bound "
              f"{table.feature_bound:g}), {len(table.blocks)} parties, "
              f"{100 * table.positives:.1f}% positives")
        for seed in opts["seeds"]:
            train, test = split_rows(table.A.shape[0], args.test_fraction, seed)
            for system in opts["systems"]:
                for eps in (opts["epsilons"] if system in PRIVATE else [None]):
                    if avail[system]:
                        rows.append({"table": name, "seed": seed, "system": system,
                                     "kind": KIND[system], "private": system in PRIVATE,
                                     "epsilon": eps, "unavailable": avail[system]})
                        continue
                    res = S.fit(system, table, train, eps, args.delta, args.iterations, seed)
                    r = _row(table, seed, system, eps, args.delta, res, test, len(train))
                    rows.append(r)
                    print(f"  seed {seed} {system:>15} eps {_fmt(eps, 'g'):>4}: AUC "
                          f"{_fmt(r['test_auc'], '.4f')} log-loss "
                          f"{_fmt(r['test_log_loss'], '.4f')} spent "
                          f"{_fmt(r['epsilon_spent'], '.3f')} {r['seconds']:.1f} s")
    summary = summarize(rows)
    print()
    print_summary(summary)
    settings = {"tables": opts["tables"], "epsilons": opts["epsilons"], "delta": args.delta,
                "seeds": opts["seeds"], "test_fraction": args.test_fraction,
                "iterations": args.iterations, "systems": opts["systems"],
                "default_logistic_path": choose_logistic_path("dp-bcfw-secure", "logistic")[0]}
    from datetime import datetime, timezone

    doc = {"command": cmd, "finished_utc": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M"),
           "settings": settings, "versions": S.versions(), "tables": tables,
           "rows": rows, "summary": summary, "paired": paired(rows)}
    write_json(args.json, doc)
    if args.markdown:
        write_markdown(args.markdown, doc)
    return 0
