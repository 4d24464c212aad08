"""``vflpriv demo``: certify the bundled example plans and print their tables."""
from __future__ import annotations

from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def register(sub):
    p = sub.add_parser("demo", help="certify the example plans that ship with vflpriv",
                       description="Certify the example release plans that ship with vflpriv "
                       "(DP-SGD, and a DP-BCFW-AS-style selection + feature plan) and print the "
                       "tables, as `vflpriv certify` does.")
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
    return status
