"""``vflpriv reproduce NAME`` / ``--list``: regenerate a paper's figure or table with the
project's own code, writing the figure (PNG), a table of measured vs the paper's claim (Markdown
and JSON) into ``--out`` (docs/reproduce.md lists the entries and the measured results)."""
from __future__ import annotations


def register(sub):
    p = sub.add_parser("reproduce", help="regenerate a paper's figure or table (measured vs claim)",
                       description="Regenerate a figure or table of the papers the project "
                       "implements, with the project's own code; writes NAME.png, NAME.md "
                       "(measured vs the paper's claim) and NAME.json into --out.")
    p.add_argument("name", nargs="?", metavar="NAME", help="entry to run (see --list)")
    p.add_argument("--list", action="store_true", help="list the entries and exit")
    p.add_argument("--fast", action="store_true",
                   help="small settings: a minute-scale version (verdicts on the small problem)")
    p.add_argument("--out", metavar="DIR", default="reproduce-out",
                   help="output folder (default ./reproduce-out)")
    p.set_defaults(func=run)


def run(args) -> int:
    import os

    from ..errors import InputError
    from ..reproduce import ENTRIES, reproduce

    if args.list:
        if args.name:
            raise InputError("give either NAME or --list, not both")
        for e in ENTRIES.values():
            print(f"{e.name:<12} {e.target:<11} {e.summary}")
        return 0
    if not args.name:
        raise InputError(f"NAME is required (one of {', '.join(ENTRIES)}; or --list)")
    if args.name not in ENTRIES:
        raise InputError(f"NAME must be one of {', '.join(ENTRIES)}, got {args.name!r}")
    out = args.out
    if os.path.exists(out) and not os.path.isdir(out):
        raise InputError(f"--out must be a folder, got the file {out!r}")
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as exc:
        raise InputError(f"--out {out!r}: {exc.strerror}") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise InputError(f"--out folder {out!r} is not writable")
    res = reproduce(args.name, out, fast=args.fast)   # checks its three files before the work
    from ..reproduce import table

    print(f"{args.name} ({'fast' if args.fast else 'full'}, {res['seconds']:.1f} s)")
    print(table(res["outcome"].claims))
    for note in res["outcome"].notes:
        print(f"- {note}")
    print(f"wrote {res['png']}, {res['md']}, {res['json']}")
    return 0
