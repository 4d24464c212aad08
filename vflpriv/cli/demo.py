"""``vflpriv demo``: the main job in one command.

1. Certify the bundled example plans (DP-SGD; a DP-BCFW-AS-shaped selection + feature plan) and
   print every accountant's value and the verdict, as ``vflpriv certify`` does.
2. Fit a sparse least-squares model across K = 4 parties holding different columns of a synthetic
   data set (paper 004's generator), as ``vflpriv run`` does, against the certified optimum:
   without privacy (BCFW-AS); with dp-bcfw-secure at epsilon = 4 (cross-party products under
   secret sharing, released once per selected feature), which learns; and with the paper's
   DP-BCFW-AS at the same budget, which warns before spending and learns far less (docs/vertical.md,
   "Honest expectations").  After each run, where its bytes went.
"""
from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path

from ..units import format_bytes

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

DATA = "synthetic:n=50000,d=400,density=0.05,sparsity=0.01,seed=0"
PRIVATE = ["--epsilon", "4", "--delta", "1e-6", "--feature-bound", "1", "--label-bound", "1",
           "--rnm", "gumbel"]
RUNS = (
    ["--algorithm", "bcfw", "--iterations", "100"],
    ["--algorithm", "dp-bcfw-secure", "--iterations", "100", *PRIVATE, "--row-clip", "2",
     "--max-features", "5"],
    ["--algorithm", "dp-bcfw", "--iterations", "100", *PRIVATE],
)


def register(sub):
    p = sub.add_parser("demo", help="certify the example plans, then a small vertical fit",
                       description="Certify the example release plans that ship with vflpriv, then "
                       "fit a sparse model across 4 parties (non-private BCFW-AS, dp-bcfw-secure "
                       "and DP-BCFW-AS at epsilon = 4) on synthetic data, against the certified "
                       "optimum.")
    p.add_argument("--skip-run", action="store_true", help="only certify the example plans")
    p.add_argument("--json", metavar="PATH",
                   help="also write the certificates and the three runs' JSON documents there "
                        "(docs/demo.json is this file: the numbers docs/vertical_results.md quotes)")
    p.set_defaults(func=run)


def _mb(b):
    return format_bytes(b)


def _explain(doc, algorithm):
    """Two or three lines: what the run sent and why."""
    up = sum(doc["uplink_bytes"].values())
    full = sum(doc["uplink_bytes_full_gradient"].values())
    feats = sum(doc["features_released"].values())
    n, K, T = doc["n"], doc["parties"], doc["iterations"]
    removed = (doc["initial_objective"] - doc["final_objective"]) / \
        (doc["initial_objective"] - doc["reference_objective"])
    print(f"  -> removed {removed:.0%} of the gap f(0) - f(opt)")
    if algorithm == "bcfw":
        print(f"  -> bytes: each round a party sends a 4-byte index; the first time it selects a "
              f"feature, the feature itself (identity sketch: the raw column, 8 n = "
              f"{_mb(8 * n)}).  {feats} columns went up ({_mb(up)} in all), more than the "
              f"{_mb(full)} that sending every party's full gradient (8 p_k bytes) every round "
              f"would cost: with n = {n} rows and p_k = {400 // K} columns per party, one raw "
              f"column outweighs {n // (400 // K)} rounds of gradients.  A sketch (m << n) is "
              "what makes the uplink small; no private value is protected here.")
    elif algorithm == "dp-bcfw-secure":
        print(f"  -> bytes: no column leaves its party.  Once, each party sends its block "
              f"one-time-padded (A_k - U_k over Z_2^64, 8 n p_k bytes) to one party, its "
              f"block's helper (party k + 1 mod K); then, per newly selected feature ({feats} "
              f"here), its holder sends the masked column (8 n) to each other party k, k's "
              f"helper a noised result share (8 p_k) to k, and the server deals the Beaver "
              f"triple (PRG keys and 8 p_k shares).  Shares and masks "
              f"are counted: {_mb(up)} uplink.  What is revealed: the selections and "
              f"A_k^T a_j + N(0, sigma^2), charged to the ledger before the noise is drawn.")
    else:
        print(f"  -> bytes: each new feature leaves its party as J a + noise ({feats} of them; "
              f"{_mb(up)}).  The noise per entry does not shrink with n, so at this budget the "
              "released columns are mostly noise (the warning above, before anything was "
              "spent); the clipped scores still carry a little signal.")


def run(args) -> int:
    from accounting.plan import certify, load_plan

    from .certify import _print_table

    from ..outputs import check_outputs, write_json_atomic

    json_path = getattr(args, "json", None)
    check_outputs({"--json": json_path})          # before any work
    status = 0
    certs = []
    plans = sorted(EXAMPLES.glob("*.toml"))
    print(_opening(plans, args.skip_run))
    print()
    for path in plans:
        plan = load_plan(path)
        cert = certify(plan)
        certs.append(cert)
        _print_table(cert, plan)
        print()
        status = max(status, 1 if cert["certified"] is False else 0)
    if args.skip_run:
        if json_path:
            write_json_atomic(json_path, {"certificates": certs, "runs": []})
        return status
    from .main import build_parser

    from . import run as run_command

    docs, clipping, said = [], [], False
    run_command.EXPECTED_CLIPPING = clipping     # expected here: said once, not per party and run
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for i, extra in enumerate(RUNS):
                out = os.path.join(tmp, f"run{i}.json")
                argv = ["run", "--data", DATA, "--parties", "4", "--eta", "1", "--seed", "0",
                        "--reference", *extra]
                print("$ vflpriv " + " ".join(argv))
                run_args = build_parser().parse_args([*argv, "--json", out])
                status = max(status, int(run_args.func(run_args) or 0))
                with open(out, encoding="utf-8") as fh:
                    docs.append(json.load(fh))
                _explain(docs[-1], extra[1])
                if clipping and not said:
                    print(_clipping(clipping))
                    said = True
                print()
    finally:
        run_command.EXPECTED_CLIPPING = None
    print(_comparison(docs))
    if json_path:
        write_json_atomic(json_path, {"certificates": certs, "runs": [
            dict(d, command="vflpriv " + " ".join(
                ["run", "--data", DATA, "--parties", "4", "--eta", "1", "--seed", "0",
                 "--reference", *extra])) for d, extra in zip(docs, RUNS)]})
    return status


def _clipping(messages):
    """One sentence for the parties' clipping warnings (each party's own count, made where its
    data live), which the demo expects: its synthetic features are standard normal."""
    import re

    groups = {}
    for text in messages:
        m = re.match(r"party (\d+): (--[\w-]+) (\S+) clips (\d+)% of its ([\w ]+?) \(", text)
        if m is None:
            return "  -> clipping: " + "; ".join(dict.fromkeys(messages))
        k, option, bound, pct, what = m.groups()
        g = groups.setdefault((option, bound, what), ({}, []))
        g[0][int(k)] = int(pct)
    parts = []
    for (option, bound, what), (pcts, _) in groups.items():
        lo, hi = min(pcts.values()), max(pcts.values())
        share = f"{lo}%" if lo == hi else f"{lo}-{hi}%"
        parts.append(f"{option} {bound} clips {share} of the {what} of each of the {len(pcts)} "
                     "parties")
    return ("  -> clipping (expected: the synthetic features are standard normal): "
            + "; ".join(parts) + ".  Still private; the models fit the clipped values.  Each "
            "party counted its own values, and nothing was sent; the same holds for the next "
            "private run.")


def _opening(plans, skip_run):
    """What the demo is about to do, before it does it."""
    names = ", ".join(p.name for p in plans)
    text = (f"vflpriv demo: first certify the {len(plans)} example release plans ({names}) "
            "under every accountant")
    if skip_run:
        return text + "."
    return (text + f"; then fit one sparse least-squares model three ways on the same data "
            f"({DATA}, split by columns across 4 parties), each against the certified optimum: "
            "without privacy (BCFW-AS), with dp-bcfw-secure at epsilon = 4 (the private "
            "algorithm that learns) and with the paper's DP-BCFW-AS at epsilon = 4; a comparison "
            "of the three closes the demo.  The private runs declare |a_ij| <= 1 while the "
            "synthetic features are standard normal, so that bound clips part of every party's "
            "values: expected here, and said once after the first private run.")


def _comparison(docs):
    """The three fits side by side, from their JSON documents (every epsilon the accountant's)."""
    ref = docs[0]["reference_objective"]
    rows = [("fit", "epsilon", "final f", "gap removed", "uplink", "features sent")]
    for d in docs:
        eps = d["epsilon_spent"]["best"] if d["private"] else math.inf
        removed = (d["initial_objective"] - d["final_objective"]) / \
            (d["initial_objective"] - d["reference_objective"])
        rows.append((d["algorithm"] + ("" if d["private"] else " (non-private)"),
                     "inf" if math.isinf(eps) else f"{eps:.3f}", f"{d['final_objective']:.4g}",
                     f"{removed:.0%}", format_bytes(sum(d["uplink_bytes"].values())),
                     str(sum(d["features_released"].values()))))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [f"The three fits (same data, {docs[0]['iterations']} iterations, f(0) = "
             f"{docs[0]['initial_objective']:.4g}, certified optimum f(opt) = {ref:.4g}; epsilon "
             f"at delta = {docs[1]['delta']:g}, best accountant):"]
    for r in rows:
        lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    share = [r[3] for r in rows[1:]]
    lines.append(f"Share of the gap f(0) - f(opt) removed: {share[0]} without privacy; at the "
                 f"same budget {share[1]} by dp-bcfw-secure, which releases only noisy "
                 f"aggregates, and {share[2]} by DP-BCFW-AS, whose parties release noisy "
                 "columns of per-person values (docs/vertical_results.md, 'Where DP-BCFW-AS "
                 "learns').")
    return "\n".join(lines)
