"""``vflpriv bench utility``: the privacy-utility frontier of the vertical algorithms.

For each n and epsilon: DP-BCFW-AS (``dp-bcfw``, paper 004), ``dp-bcfw-secure`` and centralized
DP-FW (``dpfw``) on ``synthetic:n=N,d=D,density,sparsity`` split among K parties, the same
(epsilon, delta), bounds and T; the share of the gap f(0) - f(opt) each removes and its excess
risk against the certified reference optimum on the same product of l1 balls (computed once per
n).  Beside them, diffprivlib's centralized DP models as baselines (:mod:`.baselines`):
``dpl-linreg`` with ``--loss squared``, ``dpl-logreg`` with ``--loss logistic`` (labels are the
signs of the synthetic responses).  Single runs with one seed (the machine is shared): expect
run-to-run spread.

n = 1e6 is off by default: one dp-bcfw-secure run there takes about 7 minutes (streamed data,
spilled masked blocks; docs/vertical.md, "n = 1e6", and ``vflpriv bench scale``), so a frontier of
three algorithms and five epsilons is an hour's benchmark.  ``--data flights`` runs the same
frontier on the real flights set (label at the airline), each n a seeded subsample of its rows.
"""
from __future__ import annotations

import math
import time

ALGORITHMS = ("dp-bcfw", "dp-bcfw-secure", "dpfw")
BASELINES = ("dpl-linreg", "dpl-logreg")


#: above this dimension the diffprivlib baseline is not in the default list: at d = 2000, n = 1e4
#: one dense LinearRegression fit took 114 s and its objective was 3e9 (docs/dependencies.md)
BASELINE_DEFAULT_MAX_D = 500


def _default_algorithms(loss, d):
    base = "dpl-linreg" if loss == "squared" else "dpl-logreg"
    return ALGORITHMS + ((base,) if d <= BASELINE_DEFAULT_MAX_D else ())


def add_arguments(p):
    p.add_argument("--data", default="synthetic", choices=["synthetic", "flights"],
                   help="synthetic (paper 004's, --d/--density/--sparsity, --parties) or the "
                        "real flights set (airline | weather | aircraft, label at the airline; "
                        "each n is a seeded subsample of its rows; needs vflpriv[data])")
    p.add_argument("--n", default="10000,100000", help="comma-separated sample sizes")
    p.add_argument("--eta", type=float, default=1.0, help="l1 radius of each party's block")
    p.add_argument("--label-party", default=None,
                   help="dp-bcfw-secure's label holder (default: its own, party 0)")
    p.add_argument("--epsilons", default="0.5,1,2,4,8")
    p.add_argument("--algorithms", default=None,
                   help="comma-separated, from " + ", ".join(ALGORITHMS + BASELINES) +
                   " (default: the three vertical algorithms and, when --d <= 500, the "
                   "diffprivlib baseline of --loss)")
    p.add_argument("--loss", default="squared", choices=["squared", "logistic"],
                   help="loss (logistic: labels are the signs of the synthetic responses)")
    p.add_argument("--d", type=int, default=2000)
    p.add_argument("--density", type=float, default=0.05)
    p.add_argument("--sparsity", type=float, default=0.01)
    p.add_argument("--parties", type=int, default=4)
    p.add_argument("--iterations", type=int, default=200)
    p.add_argument("--delta", type=float, default=1e-6)
    from ..values import real
    from ..vertical.privacy import BOUND_RANGE

    p.add_argument("--bound", type=real(*BOUND_RANGE), default=1.0,
                   help="feature and label bound")
    p.add_argument("--rnm", default="gumbel", choices=["laplace", "gumbel", "exponential"],
                   help="selection noise of dp-bcfw and dp-bcfw-secure (dpfw: Laplace)")
    p.add_argument("--row-clip", type=real(*BOUND_RANGE), default=None,
                   help="dp-bcfw-secure's C (default: its rule, B_a p_k^(1/4) per party)")
    p.add_argument("--max-features", type=int, default=None,
                   help="dp-bcfw-secure's F (default: its rule, min(10, p_k))")
    p.add_argument("--derivative-clip", type=float, default=1.0,
                   help="dp-bcfw's and dpfw's derivative clip (0 = none)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--plot", metavar="FILE.png", help="gap removed against epsilon, per n")
    p.add_argument("--replot", metavar="FILE.json",
                   help="draw --plot from a JSON this bench wrote (e.g. docs/utility_frontier"
                        "*.json), running nothing")


def _floats(s, name):
    from ..errors import InputError

    try:
        return [float(v) for v in str(s).split(",") if v.strip()]
    except ValueError:
        raise InputError(f"--{name} must be comma-separated numbers, got {s!r}") from None


def _check(args, ns, eps):
    """Every numeric option, before any data is built or any reference solved (a bad value
    used to surface only when its algorithm's turn came, after minutes of work)."""
    import math

    from ..errors import MAX_ROUNDS, InputError, check_count

    def positive(name, v, *, none_ok=False, zero_ok=False):
        if v is None and none_ok:
            return
        if not (isinstance(v, (int, float)) and math.isfinite(v) and (v >= 0 if zero_ok
                                                                       else v > 0)):
            raise InputError(f"--{name} must be a {'' if zero_ok else 'positive '}finite number"
                             f"{' >= 0' if zero_ok else ''}, got {v!r}")

    if not ns or any(not (math.isfinite(v) and v >= 2 and v == int(v))
                     for v in _floats(args.n, "n")):
        raise InputError(f"--n must be comma-separated integers >= 2, got {args.n!r}")
    if not eps or any(not (e > 0 and math.isfinite(e)) for e in eps):
        raise InputError(f"--epsilons must be comma-separated positive finite numbers, got "
                         f"{args.epsilons!r}")
    for name in ("eta", "bound"):
        positive(name, getattr(args, name))
    positive("row-clip", args.row_clip, none_ok=True)
    positive("derivative-clip", args.derivative_clip, zero_ok=True)
    for name in ("density", "sparsity"):
        v = getattr(args, name)
        if not (0 < v <= 1):
            raise InputError(f"--{name} must be in (0, 1], got {v!r}")
    if not (0 < args.delta < 1):
        raise InputError(f"--delta must be in (0, 1), got {args.delta!r}")
    check_count("--iterations", args.iterations, MAX_ROUNDS)
    check_count("--d", args.d, 10 ** 9)
    check_count("--parties", args.parties, args.d)
    if args.max_features is not None:
        check_count("--max-features", args.max_features, args.d)
    if args.seed < 0:
        raise InputError(f"--seed must be a non-negative integer, got {args.seed}")
    from ..outputs import check_outputs

    # the outputs too, before the first row (--plot DIR was found only after every row)
    check_outputs({"--plot": args.plot, "--json": getattr(args, "json", None)},
                  images=("--plot",))


def run(args) -> int:
    from ..bench import write_json
    from ..data import VerticalData, make_synthetic
    from ..errors import InputError
    from ..optim import get_loss, reference_optimum
    from ..vertical import solve

    if getattr(args, "replot", None):
        return _replot(args)
    eps = _floats(args.epsilons, "epsilons")
    _check(args, _floats(args.n, "n"), eps)
    ns = [int(v) for v in _floats(args.n, "n")]
    from .baselines import LOSS, fit_baseline

    full = _flights() if args.data == "flights" else None
    if full is not None and max(ns) > full.n:
        raise InputError(f"--n: the flights set has {full.n} rows, got n = {max(ns)}")
    d = args.d if full is None else full.A.shape[1]
    if args.label_party is not None:
        # checked with the data's K before the first row (--label-party 9 was refused only
        # when dp-bcfw-secure's turn came, after the other algorithms' rows were computed)
        from ..vertical.config import check_label_party

        K = args.parties if full is None else len(full.blocks)
        try:
            check_label_party(args.label_party, "dp-bcfw-secure", K)
        except InputError as exc:
            raise InputError(f"--label-party {args.label_party!r}: {exc}") from None
    algos = ([a.strip() for a in args.algorithms.split(",") if a.strip()]
             if args.algorithms else list(_default_algorithms(args.loss, d)))
    for a in algos:
        if a not in ALGORITHMS + BASELINES:
            raise InputError(f"--algorithms: {a!r} is not one of "
                             f"{', '.join(ALGORITHMS + BASELINES)}")
        if a in BASELINES and LOSS[a] != args.loss:
            raise InputError(f"--algorithms: {a} optimizes the {LOSS[a]} loss, but --loss is "
                             f"{args.loss}")
    loss = get_loss(args.loss)
    if not args.algorithms and d > BASELINE_DEFAULT_MAX_D:
        print(f"(diffprivlib baseline not run by default at d={d} > "
              f"{BASELINE_DEFAULT_MAX_D}: a dense fit takes minutes and its noise grows with d^2; "
              f"name it in --algorithms to run it)")
    clip = args.derivative_clip or None
    rows = []
    data_desc = ("flights (airline | weather | aircraft, 44 columns)" if args.data == "flights"
                 else f"synthetic d={args.d} density={args.density} sparsity={args.sparsity} "
                      f"K={args.parties}")
    print(f"utility: {args.loss} loss on {data_desc} eta={args.eta:g} "
          f"T={args.iterations} delta={args.delta:g} bounds={args.bound} rnm={args.rnm} "
          f"(dpfw: laplace) derivative clip={clip} row clip={args.row_clip or 'rule'} "
          f"F={args.max_features or 'rule'}")
    print(f"{'n':>8} {'algorithm':>15} {'eps':>5} {'f(0)':>9} {'f(x_T)':>9} {'f(opt)':>9} "
          f"{'removed':>8} {'excess':>9} {'eps spent':>9} {'seconds':>8}")
    for n in ns:
        if full is not None:
            import numpy as np

            rows_n = np.sort(np.random.default_rng(args.seed).choice(full.n, n, replace=False))
            data = VerticalData(full.A[rows_n], full.y[rows_n], full.blocks)
        else:
            A, y, _ = make_synthetic(n=n, d=args.d, density=args.density,
                                     sparsity=args.sparsity, seed=args.seed)
            if args.loss == "logistic":
                import numpy as np

                y = np.where(np.asarray(y) >= 0, 1.0, -1.0)
            data = VerticalData.from_arrays(A, y, "balanced", parties=args.parties)
        t0 = time.perf_counter()
        ref = reference_optimum(data.A, data.y, loss, blocks=data.blocks, eta=args.eta,
                                on_failure="flag")
        ref_s = time.perf_counter() - t0
        for algo in algos:
            if algo in BASELINES:
                rows.extend(_baseline_rows(algo, data, loss, eps, ref, ref_s, n, args,
                                           fit_baseline))
                continue
            for e in eps:
                # the frontier's problem is the paper's, without an intercept: the same set
                # as its reference optimum and its diffprivlib baselines (fit_intercept=False)
                kw = dict(loss=args.loss, algorithm=algo, iterations=args.iterations, epsilon=e,
                          delta=args.delta, feature_bound=args.bound, label_bound=args.bound,
                          seed=args.seed, eta=args.eta, fit_intercept=False)
                if algo == "dp-bcfw-secure":
                    kw.update(rnm=args.rnm, row_clip=args.row_clip,
                              max_features=args.max_features)
                    if args.label_party is not None:
                        kw.update(label_party=args.label_party)
                elif algo == "dp-bcfw":
                    kw.update(rnm=args.rnm, derivative_clip=clip)
                else:
                    kw.update(derivative_clip=clip)
                t0 = time.perf_counter()
                sol = solve(data, **kw)
                sec = time.perf_counter() - t0
                f0, fT = sol.initial_objective, sol.final_objective
                removed = (f0 - fT) / (f0 - ref.objective)
                row = {"n": n, "algorithm": algo, "epsilon": e, "f0": f0, "final": fT,
                       "reference": ref.objective, "reference_certified": bool(ref.certified),
                       "reference_seconds": ref_s, "gap_removed": removed,
                       "excess": fT - ref.objective,
                       "epsilon_spent": sol.privacy["epsilon_spent"]["best"],
                       "seconds": sec, "label_party": sol.extra.get("label_party"),
                       "uplink_bytes": None if sol.uplink is None else int(sum(sol.uplink))}
                outlook = ((sol.privacy or {}).get("calibration") or {}).get("outlook")
                if outlook:          # dp-bcfw's predictor-noise ratio (its warning's figure)
                    row["outlook_ratio"] = outlook["ratio"]
                rows.append(row)
                print(f"{n:>8} {algo:>15} {e:>5g} {f0:>9.5f} {fT:>9.5f} {ref.objective:>9.5f} "
                      f"{removed:>7.1%} {fT - ref.objective:>9.4g} "
                      f"{row['epsilon_spent']:>9.4g} {sec:>8.1f}", flush=True)
    out = {"config": {k: v for k, v in vars(args).items() if k not in ("func",)}, "rows": rows}
    write_json(args.json, out)
    if args.plot:
        _plot(rows, ns, algos, args.plot, out["config"])
    return 0


def _replot(args):
    import json

    from ..errors import InputError
    from ..outputs import check_outputs

    if not args.plot:
        raise InputError("--replot needs --plot FILE.png (where to draw)")
    check_outputs({"--plot": args.plot}, {"--replot": args.replot}, images=("--plot",))
    try:
        with open(args.replot, encoding="utf-8") as fh:
            doc = json.load(fh)
        rows, config = doc["rows"], doc["config"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"--replot {args.replot!r}: not a JSON written by vflpriv bench "
                         f"utility ({exc})") from None
    ns = sorted({r["n"] for r in rows})
    algos = list(dict.fromkeys(r["algorithm"] for r in rows))
    _plot(rows, ns, algos, args.plot, config)
    return 0


#: one look per algorithm: marker, line style and size differ, so that curves that coincide
#: (dp-bcfw-secure and dpfw on flights) both stay visible: the larger hollow marker around the
#: smaller filled one
_STYLE = {"dp-bcfw": ("v", "-", 6), "dp-bcfw-secure": ("o", "-", 10), "dpfw": ("s", "--", 5),
          "dpl-linreg": ("D", ":", 6), "dpl-logreg": ("D", ":", 6)}


def _describe(config):
    """The figure's data and settings, from the run's own config."""
    if not config:
        return ""
    c = config
    if c.get("data") == "flights":
        data = "flights (airline | weather | aircraft, 44 columns, 3 parties)"
    else:
        data = (f"synthetic d={c.get('d')} density={c.get('density')} "
                f"sparsity={c.get('sparsity')}, K={c.get('parties')}")
    return (f"{c.get('loss', 'squared')} loss on {data}; T = {c.get('iterations')}, "
            f"delta = {c.get('delta'):g}, bounds {c.get('bound'):g}, eta = {c.get('eta', 1.0):g}, "
            f"seed {c.get('seed')}")

def _flights():
    from ..data import VerticalData
    from ..data.named import load_named

    d = load_named("flights")
    return VerticalData(d.A, d.y, d.blocks)


def _baseline_rows(algo, data, loss, eps, ref, ref_s, n, args, fit_baseline):
    """Rows of one diffprivlib baseline (centralized, pure epsilon-DP, objective on the bench's
    loss; the model is not restricted to the l1 ball)."""
    import numpy as np

    out = []
    A, y = data.A, np.asarray(data.y, dtype=float)
    f0 = float(loss.objective(A, np.zeros(A.shape[1]), y))
    for e in eps:
        t0 = time.perf_counter()
        # the row-norm bound: --row-clip, else what the feature bound implies (B_a sqrt(d))
        norm = args.row_clip or args.bound * math.sqrt(A.shape[1])
        coef, reason = fit_baseline(algo, A, y, e, args.bound, norm, args.seed)
        sec = time.perf_counter() - t0
        if coef is None:
            print(f"{n:>8} {algo:>15} skipped: {reason}", flush=True)
            out.append({"n": n, "algorithm": algo, "epsilon": e, "skipped": reason})
            break                                       # the reason does not depend on epsilon
        fT = float(loss.objective(A, coef, y))
        removed = (f0 - fT) / (f0 - ref.objective)
        row = {"n": n, "algorithm": algo, "epsilon": e, "f0": f0, "final": fT,
               "reference": ref.objective, "reference_certified": bool(ref.certified),
               "reference_seconds": ref_s, "gap_removed": removed, "excess": fT - ref.objective,
               "epsilon_spent": e, "seconds": sec, "uplink_bytes": None,
               "l1_norm": float(np.abs(coef).sum()), "library": "diffprivlib"}
        out.append(row)
        print(f"{n:>8} {algo:>15} {e:>5g} {f0:>9.5f} {fT:>9.5g} {ref.objective:>9.5f} "
              f"{removed:>7.1%} {fT - ref.objective:>9.4g} {e:>9.4g} {sec:>8.1f}", flush=True)
    return out


def _plot(rows, ns, algos, path, config=None):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(ns), figsize=(5 * len(ns), 4.4), squeeze=False)
    for ax, n in zip(axes[0], ns):
        for a in algos:
            pts = sorted((r["epsilon"], r["gap_removed"]) for r in rows
                         if r["n"] == n and r["algorithm"] == a and "gap_removed" in r)
            if pts:
                marker, ls, size = _STYLE.get(a, ("o", "-", 6))
                hollow = size >= 10
                ax.plot([p[0] for p in pts], [100 * p[1] for p in pts], marker=marker,
                        ls=ls, ms=size, label=a, zorder=2 if hollow else 3,
                        mfc="none" if hollow else None, mew=1.5 if hollow else 1.0)
        ax.axhline(0, color="k", lw=0.5)
        ax.axhline(50, color="k", lw=0.5, ls=":")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("epsilon")
        ax.set_ylabel("% of f(0) - f(opt) removed")
        ax.set_title(f"n = {n:g}")
        ax.legend()
    text = _describe(config)
    if text:
        fig.suptitle(text, fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
