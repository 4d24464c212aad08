"""Entry point of the ``vflpriv`` command.

Subcommands register themselves from their own modules (``SUBCOMMANDS`` below), so adding one
touches only its module and this list.  Bad input of any kind ends with one line on stderr and
exit code 2; a refused plan (over its target) exits 1; a closed output pipe exits 141 quietly.
"""
from __future__ import annotations

import argparse
import importlib
import sys

#: module (under vflpriv.cli) -> its subcommand registers itself
SUBCOMMANDS = ["certify", "bench", "demo", "fedp3", "horizontal", "audit", "ledger", "run",
               "sparse", "reproduce"]


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's own usage errors: one line, exit 2
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="vflpriv", description="Differentially private federated sparse "
                     "learning with a rigorous privacy accountant.")
    parser.add_argument("--version", action="version",
                        version=f"vflpriv {importlib.import_module('vflpriv').__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in SUBCOMMANDS:
        importlib.import_module(f"vflpriv.cli.{name}").register(sub)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:
        # The reader went away (``vflpriv ... | head``): not bad input.  Point stdout at devnull
        # so the interpreter's final flush stays quiet, and exit like a process killed by
        # SIGPIPE (128 + 13), as the shell expects.  Anything already recorded (a ledger, a
        # checkpoint) was written before the output and is kept.
        import os
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except (ValueError, OSError) as exc:
        # Bad input (events, plans, files) raises ValueError/OSError naming the value: one line.
        msg = str(exc) if not isinstance(exc, OSError) else \
            f"{exc.strerror}: {exc.filename!r}" if exc.filename else str(exc)
        sys.stderr.write(f"vflpriv {args.command}: error: {msg}\n")
        return 2
    except (OverflowError, RecursionError, MemoryError) as exc:
        # A value too large for a computation no check caught: still one line, exit 2.
        what = {"MemoryError": "needs more memory than there is",
                "RecursionError": "is nested too deeply"}.get(type(exc).__name__,
                                                               "is too large")
        sys.stderr.write(f"vflpriv {args.command}: error: an input value {what} "
                         f"({type(exc).__name__}: {exc})\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("vflpriv: interrupted\n")
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
