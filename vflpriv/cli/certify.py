"""``vflpriv certify PLAN.toml``: every accountant's value for a release plan, and a verdict."""
from __future__ import annotations

import json
import math

EXACT_NOTE = {
    "basic": "upper bound (sum of epsilons)",
    "advanced": "upper bound (Dwork-Rothblum-Vadhan, capped by basic)",
    "optimal": ("optimal composition (KOV for (eps, delta) releases; exact mu-GDP for Gaussians; "
                "adaptive bounded-range optimum for Gumbel/exponential-mechanism selections)"),
    "rdp": "upper bound (RDP, Balle et al. 2020 conversion)",
    "pld": "upper bound (PLD, pessimistic, with its proven float-error bound)",
}


def register(sub):
    p = sub.add_parser(
        "certify", help="certify a release plan: epsilon (or delta) under every accountant",
        description="Read a TOML release plan and print what each accountant certifies "
        "(basic, advanced, optimal, rdp, pld) and the best valid value. Exit 0 when the plan meets "
        "its target (or has none), 1 when it exceeds it, 2 on bad input.")
    p.add_argument("plan", metavar="PLAN.toml",
                   help="the release plan (see docs/certify.md); a name that is not a file "
                        "is looked up among the shipped examples (dpsgd.toml, "
                        "vertical_selection.toml)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument("--calibrate", metavar="PARAM",
                   help="solve for this release parameter (e.g. noise_multiplier, sigma, scale, "
                   "count) so that the best epsilon meets target_epsilon; the plan's value is the "
                   "starting guess")
    p.set_defaults(func=run)


def _fmt(v):
    if v is None:
        return "unsupported"
    if math.isinf(v):
        return "inf"
    return f"{v:.6f}" if v >= 1e-3 else f"{v:.4e}"


def example_path(plan: str) -> str:
    """``plan`` itself when it is a file; else the shipped example of that name (``dpsgd``,
    ``dpsgd.toml`` or ``vflpriv/examples/dpsgd.toml`` from any directory)."""
    import os
    from pathlib import Path

    if os.path.exists(plan):
        return plan
    examples = Path(__file__).resolve().parent.parent / "examples"
    name = Path(plan).name
    for cand in (name, name + ".toml"):
        if (examples / cand).is_file():
            return str(examples / cand)
    return plan          # load_plan names the missing file


def run(args) -> int:
    from accounting.plan import certify, load_plan

    if not str(args.plan).strip():      # open('') named nothing: "[Errno 2] ... ''"
        from ..errors import InputError

        raise InputError(f"the plan PLAN.toml needs a file name, got {args.plan!r}")
    args.plan = example_path(args.plan)
    from .progress import Spinner

    plan = load_plan(args.plan)
    calibrating = args.calibrate is not None
    with Spinner(f"calibrating {args.calibrate}" if calibrating else "certifying",
                 quiet=args.quiet or not calibrating):
        cert = certify(plan, calibrate_param=args.calibrate)
    if args.json:
        print(json.dumps(cert, allow_nan=True))
    else:
        _print_table(cert, plan)
    return 1 if cert["certified"] is False else 0


def _print_table(cert, plan):
    by_delta = "target_epsilon" in cert
    title = plan.name or plan.source
    what, given = ("epsilon", f"delta = {cert['delta']:g}") if by_delta else \
        ("delta", f"epsilon = {cert['epsilon']:g}")
    print(f"plan: {title}   ({len(plan.releases)} release type(s), neighboring = {cert['neighboring']})")
    if "calibrated" in cert:
        c = cert["calibrated"]
        (param, value), = [(k, v) for k, v in c.items() if k not in ("accountant", "seconds")]
        print(f"calibrated: {param} = {value:.6g}  (by the {c['accountant']} accountant, "
              f"{c['seconds']:.2f} s)")
    print(f"{what} at {given}:")
    values = cert[what]
    for name, v in values.items():
        note = EXACT_NOTE[name] if v is not None else cert["unsupported"].get(name, "")
        if v is not None and math.isinf(v):
            note = cert.get("infinite", {}).get(name, note)
        print(f"  {name:<9} {_fmt(v):>12}   {note}")
    best = cert["best"]
    print(f"  {'best':<9} {_fmt(best[what]):>12}   ({best['accountant']})")
    target = cert.get("target_epsilon") if by_delta else cert.get("target_delta")
    if target is None:
        print("verdict: no target given")
    elif cert["certified"]:
        print(f"verdict: CERTIFIED ({what} {_fmt(best[what])} <= target {target:g})")
    else:
        print(f"verdict: NOT CERTIFIED ({what} {_fmt(best[what])} > target {target:g})")
