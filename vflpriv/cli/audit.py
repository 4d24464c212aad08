"""``vflpriv audit``: empirical privacy audit of every registered mechanism.

Prints a table (mechanism, claimed epsilon from the accountant, delta, empirical lower bound,
samples, verdict); ``--json FILE`` writes ``{"ok": bool, "mechanisms": [{"name",
"claimed_epsilon", "delta", "lower_bound", "method", "share", "samples", "ok",
"tradeoff": {"mu_lower", "mu_claimed", "gdp_epsilon", "gdp_share", ...}, ...}], "seed",
"wall_seconds", "peak_rss_bytes"}`` (the audit's wall time and this process's peak resident set,
``ru_maxrss``).  Exit code 1 when a lower bound exceeds its claim (the implementation leaks more
than it says), 2 on bad input.
"""
from __future__ import annotations

import sys


#: the audit keeps every sample of a mechanism in memory (a few float64 arrays of this length)
MAX_SAMPLES = 10_000_000


def _positive_int(text):
    try:
        v = int(text)
    except ValueError:
        raise ValueError(f"--samples must be an integer >= 10, got {text!r}") from None
    if v < 10:
        raise ValueError(f"--samples must be an integer >= 10, got {text!r}")
    if v > MAX_SAMPLES:
        raise ValueError(f"--samples must be at most {MAX_SAMPLES:,} (each mechanism holds "
                         f"its samples in memory), got {text!r}")
    return v


def register(sub):
    p = sub.add_parser("audit", help="audit the mechanisms' privacy claims empirically",
                       description="Run every registered mechanism on worst-case neighbouring "
                       "inputs and compare a statistically valid lower bound on epsilon "
                       "(Clopper-Pearson threshold tests) with the epsilon the accountant "
                       "claims.  Exit 1 if any lower bound exceeds its claim.")
    from .options import add_outputs

    add_outputs(p, also=True)
    p.add_argument("--samples", metavar="N", default="100000",
                   help="runs per neighbouring dataset (default 100000)")
    from .options import seed

    p.add_argument("--seed", metavar="S", type=seed, default=0,
                   help="seed of the audit's noise (default 0; audits are reproducible)")
    p.add_argument("--confidence", metavar="C", type=float, default=0.95,
                   help="family-wise confidence over all audited mechanisms (default 0.95)")
    p.add_argument("--mechanism", metavar="NAME", action="append",
                   help="audit only NAME (repeatable; default: all registered)")
    p.add_argument("--list", action="store_true", help="list the registered mechanisms and exit")
    p.set_defaults(func=run)


def _fmt(x, nd=4):
    return f"{x:.{nd}f}" if isinstance(x, float) else str(x)


def _pct(x):
    return "-" if x is None else f"{x:.0%}" if x != float("inf") else "inf"


def run(args) -> int:
    from vflpriv.audit import registered, run_suite, unavailable

    if args.list:
        for name in registered():
            print(name)
        print("views (what each party and the server receive on the secure paths)")
        for name, reason in unavailable().items():
            print(f"{name} (unavailable: {reason})")
        return 0
    samples = _positive_int(args.samples)
    if args.json:
        from ..outputs import check_output

        check_output(args.json, "--json")      # before the audit's minutes of work
    if not 0 < args.confidence < 1:
        raise ValueError(f"--confidence must be in (0, 1), got {args.confidence!r}")
    import time

    from .progress import Progress

    t0 = time.perf_counter()
    # "views" is not a DP mechanism: the confidentiality check of the secure paths
    views = args.mechanism is None or "views" in args.mechanism
    mechs = None if args.mechanism is None else [m for m in args.mechanism if m != "views"]
    total = (len(mechs) if mechs is not None else len(registered())) + int(views)
    with Progress(total, "audit", quiet=args.quiet, unit="mechanism") as bar:
        if mechs == []:
            result = {"ok": True, "mechanisms": [], "skipped": [],
                      "confidence": args.confidence,
                      "per_mechanism_confidence": args.confidence}
        else:
            result = run_suite(mechs, samples=samples, seed=args.seed,
                               confidence=args.confidence, progress=bar)
        if views:
            from vflpriv.audit.views import audit_views

            result["views"] = audit_views()
            bar(total - 1)
            result["ok"] = bool(result["ok"] and result["views"]["ok"])
    result["seed"] = args.seed
    result["wall_seconds"] = time.perf_counter() - t0
    result["peak_rss_bytes"] = _peak_rss_bytes()
    print(table(result))
    if args.json:
        from ..outputs import write_json_atomic

        write_json_atomic(args.json, result)
    sys.stdout.flush()
    return 0 if result["ok"] else 1


def _peak_rss_bytes():
    """This process's peak resident set (``ru_maxrss``: kB on Linux, bytes on macOS)."""
    import resource

    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss if sys.platform == "darwin" else rss * 1024


def table(result) -> str:
    """What the command prints for ``result`` (its JSON): one row per mechanism, then the
    legend and the verdict (docs/audit.md quotes it; tests/test_docs_numbers.py checks)."""
    rows = [("mechanism", "claimed eps", "delta", "lower bound", "method", "share", "GDP mu lb",
             "GDP eps", "GDP share", "samples", "ok")]
    for m in result["mechanisms"]:
        t = m["tradeoff"]
        rows.append((m["name"], _fmt(m["claimed_epsilon"]), f"{m['delta']:g}",
                     _fmt(m["lower_bound"]), m["method"], _pct(m["share"]), _fmt(t["mu_lower"]),
                     _fmt(t["gdp_epsilon"]) if t["mu_claimed"] is not None else "-",
                     _pct(t["gdp_share"]), str(m["samples"]), "ok" if m["ok"] else "FAIL"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in
                       enumerate(zip(r, widths))) for r in rows]
    for m in result["skipped"]:
        lines.append(f"{m['name']}: skipped, {m['reason']}")
    v = result.get("views")
    if v is not None:
        lines.append(f"views: {v['runs']} runs ({', '.join(v['paths'])}; K = "
                     f"{', '.join(map(str, v['K']))}; every label party): "
                     + ("every value each party and the server received is blinded by a mask "
                        "whose key it never got; ok" if v["ok"] else
                        f"FAIL, {len(v['findings'])} findings: " + "; ".join(v["findings"][:3])))
    lines.append("lower bound: epsilon at delta, valid for any mechanism (the larger of the split "
                 "threshold test and the trade-off envelope's); GDP: mu from the ROC's confidence "
                 "envelope, checked against Gaussian claims (docs/audit.md)")
    lines.append(f"confidence {result['confidence']:g} family-wise "
                 f"({result['per_mechanism_confidence']:.4g} per mechanism); seed "
                 f"{result['seed']}: "
                 f"{'all claims hold' if result['ok'] else 'SOME LOWER BOUND EXCEEDS ITS CLAIM'}")
    return "\n".join(lines)

