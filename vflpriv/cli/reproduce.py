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
    p.add_argument("--all", action="store_true",
                   help="run every entry in turn and also write index.md (all the tables)")
    p.add_argument("--fast", action="store_true",
                   help="small settings: a minute-scale version (verdicts on the small problem)")
    p.add_argument("--seeds", type=int, default=None, metavar="N",
                   help="seeds 0..N-1 per entry; each claim is decided on the 95%% t-interval "
                   "over them (default 5; 3 with --fast)")
    p.add_argument("--out", metavar="DIR", default="reproduce-out",
                   help="output folder (default ./reproduce-out)")
    p.set_defaults(func=run)


def run(args) -> int:
    import os

    from ..errors import InputError
    from ..reproduce.environment import pin

    pin()                     # before anything loads torch: the same numbers on every CPU
    from ..reproduce import ENTRIES, reproduce

    if args.seeds is not None and args.seeds < 1:
        raise InputError(f"--seeds must be a positive integer, got {args.seeds}")
    if sum(map(bool, (args.name, args.list, args.all))) > 1:
        raise InputError("give one of NAME, --list and --all")
    if args.list:
        # grouped by paper, named by its authors and title (the ids' numbers are internal)
        papers = {}
        for e in ENTRIES.values():
            papers.setdefault(e.paper, []).append(e)
        for i, (paper, entries) in enumerate(papers.items()):
            print(("\n" if i else "") + _cite(paper))
            for e in entries:
                print(f"  {e.name:<12} {e.target:<11} {e.summary}")
        return 0
    if not args.name and not args.all:
        raise InputError(f"NAME is required (one of {', '.join(ENTRIES)}; or --list, --all)")
    if args.name and args.name not in ENTRIES:
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
    from ..outputs import check_output, write_atomic
    from ..reproduce import index_markdown, output_paths, table

    names = list(ENTRIES) if args.all else [args.name]
    index = os.path.join(out, "index.md")
    for name in names:                                 # every file, before any work
        for path in output_paths(name, out) + ((index,) if args.all else ()):
            check_output(path, "--out")
    from .progress import Progress

    done = []
    with Progress(len(names), "reproduce", quiet=getattr(args, "quiet", False),
                  unit="entry") as bar:
        for name in names:
            res = reproduce(name, out, fast=args.fast,
                            seeds=None if args.seeds is None else list(range(args.seeds)))
            done.append((name, res))
            seeds = res["outcome"].settings["seeds"]
            print(f"{name} ({'fast' if args.fast else 'full'}, seeds "
                  f"{', '.join(map(str, seeds))}, {res['seconds']:.1f} s)")
            print(table(res["outcome"].claims))
            for note in res["outcome"].notes:
                print(f"- {note}")
            print(f"wrote {res['png']}, {res['md']}, {res['json']}", flush=True)
            bar.step()
    if args.all:
        text = index_markdown(done, args.fast)
        write_atomic(index, lambda fh: fh.write(text.encode("utf-8")))
        print(f"wrote {index}")
    return 0


def _cite(paper):
    """``Authors, Title: what it implements`` from an entry's ``"Title (Authors): what"``."""
    head, _, what = paper.partition("): ")
    title, _, authors = head.rpartition(" (")
    if not title:
        return paper
    return f"{authors.rstrip(')')}: {title}" + (f" ({what})" if what else "")
