"""``vflpriv demo``: the main job in one command.

1. Certify the bundled example plans (DP-SGD; a DP-BCFW-AS-shaped selection + feature plan) and
   print every accountant's value and the verdict, as ``vflpriv certify`` does.
2. Fit a sparse least-squares model across K = 4 parties holding different columns of a synthetic
   data set (paper 004's generator), first without privacy (BCFW-AS), then with DP-BCFW-AS at
   epsilon = 8 (Gumbel selections, Gaussian JL-sketched features, m = 500), both against the
   certified reference optimum, as ``vflpriv run`` does.  Under correct accounting the private
   run does not improve on the starting point at this n; see DESIGN.md "Honest expectations".
"""
from __future__ import annotations

from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

DATA = "synthetic:n=10000,d=1000,density=0.02,sparsity=0.01,seed=0"
RUNS = (
    ["--algorithm", "bcfw", "--iterations", "200"],
    ["--algorithm", "dp-bcfw", "--iterations", "50", "--epsilon", "8", "--delta", "1e-6",
     "--feature-bound", "1", "--label-bound", "2", "--derivative-clip", "1", "--rnm", "gumbel",
     "--sketch", "gaussian", "--sketch-dim", "500"],
)


def register(sub):
    p = sub.add_parser("demo", help="certify the example plans, then a small vertical fit",
                       description="Certify the example release plans that ship with vflpriv, then "
                       "fit a sparse model across 4 parties (non-private BCFW-AS, then DP-BCFW-AS at "
                       "epsilon = 8) on synthetic data, against the certified optimum.")
    p.add_argument("--skip-run", action="store_true", help="only certify the example plans")
    p.set_defaults(func=run)


def run(args) -> int:
    from accounting.plan import certify, load_plan

    from .certify import _print_table

    status = 0
    for path in sorted(EXAMPLES.glob("*.toml")):
        plan = load_plan(path)
        cert = certify(plan)
        _print_table(cert, plan)
        print()
        status = max(status, 1 if cert["certified"] is False else 0)
    if args.skip_run:
        return status
    from .main import build_parser

    for extra in RUNS:
        argv = ["run", "--data", DATA, "--parties", "4", "--eta", "2", "--seed", "0",
                "--reference", *extra]
        print("$ vflpriv " + " ".join(argv))
        run_args = build_parser().parse_args(argv)
        status = max(status, int(run_args.func(run_args) or 0))
        print()
    return status
