"""Entry point of the ``vflpriv`` command.

Subcommands register themselves from their own modules (``SUBCOMMANDS`` below), so adding one
touches only its module and this list.  Bad input of any kind ends with one line on stderr and
exit code 2; a refused plan (over its target) exits 1; a closed output pipe exits 141 quietly.
"""
from __future__ import annotations

import argparse
import importlib
import re
import sys

from .options import number

#: module (under vflpriv.cli) -> its subcommand registers itself
SUBCOMMANDS = ["certify", "bench", "demo", "fedp3", "horizontal", "audit", "ledger", "run",
               "sparse", "reproduce", "flower", "predict"]


#: what argparse must read as a (negative) value, not as an option: ``-1e-3``, ``-inf``, ``-nan``,
#: ``-1s`` (argparse's own pattern knows only ``-1`` and ``-1.5``, so ``--epsilon -inf`` ended in
#: "expected one argument" instead of the option's own message naming the value).  No option of
#: vflpriv starts with a digit.
NEGATIVE_NUMBER = re.compile(r"^-(\d|\.\d)|^-(inf|infinity|nan)$", re.IGNORECASE)


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = NEGATIVE_NUMBER

    def error(self, message):  # argparse's own usage errors: one line, exit 2
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise SystemExit(2)


class _Formatter(argparse.HelpFormatter):
    """``--help`` shows every option's default, unless its help already says it or it has none
    (a flag, or an option that is off unless given)."""

    def _get_help_string(self, action):
        text = action.help or ""
        d = action.default
        if (not action.option_strings or d is None or d is False or d is argparse.SUPPRESS
                or "default" in text.lower() or isinstance(action, argparse._VersionAction)):
            return text
        return f"{text} (default: %(default)s)" if text else "default: %(default)s"


def _leaves(parser):
    """Every parser that runs a command (not the ones that only choose a subcommand)."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield parser
    for a in subs:
        for child in dict.fromkeys(a.choices.values()):
            yield from _leaves(child)


#: free-text options that hold a name (not a path or a number): read case-insensitively
NAME_OPTIONS = {"scheme", "local_pruning", "global_pruning", "aggregation", "model", "step",
                "algorithm", "accountant", "noise", "sampling", "partition"}


def _lower(text):
    return text.lower()


def _case_insensitive(a):
    """``OPU2``, ``BCFW``, ``RDP``: names and choices are read in lower case."""
    if a.type is not None or not a.option_strings or isinstance(
            a, (argparse._StoreTrueAction, argparse._StoreFalseAction, argparse._HelpAction,
                argparse._VersionAction)):
        return
    choices = list(a.choices) if a.choices is not None else None
    if choices and all(isinstance(c, str) and c == c.lower() for c in choices):
        a.type = _lower
    elif choices is None and a.dest in NAME_OPTIONS:
        a.type = _lower


def _polish(parser):
    parser.formatter_class = _Formatter
    for a in parser._actions:
        _case_insensitive(a)
        if a.type is float:
            a.type = number
        if a.help is None and a.option_strings and a.default not in (None, False,
                                                                      argparse.SUPPRESS):
            a.help = "default: %(default)s"      # argparse prints nothing for help=None
        if isinstance(a, argparse._SubParsersAction):
            for child in dict.fromkeys(a.choices.values()):
                _polish(child)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="vflpriv", description="Differentially private federated sparse "
                     "learning with a rigorous privacy accountant.")
    parser.add_argument("--version", action="version",
                        version=f"vflpriv {importlib.import_module('vflpriv').__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in SUBCOMMANDS:
        importlib.import_module(f"vflpriv.cli.{name}").register(sub)
    from .options import add_progress

    for leaf in _leaves(parser):
        if leaf is not parser and "--quiet" not in leaf._option_string_actions:
            add_progress(leaf)
    _polish(parser)
    return parser


class _one_line_warnings:
    """Warnings raised while a command runs (numpy's "overflow encountered in multiply" from a
    step size of 1e308, a library's deprecation) print as one ``vflpriv CMD: warning: ...`` line,
    each distinct message once, instead of Python's two lines with the source line of the
    library that raised it."""

    def __init__(self, command):
        self.command, self.seen = command, set()

    def show(self, message, category, *args, **kwargs):
        text = (str(message).strip().splitlines() or [category.__name__])[0]
        if text not in self.seen:
            self.seen.add(text)
            sys.stderr.write(f"vflpriv {self.command}: warning: {text}\n")

    def __enter__(self):
        import warnings

        self._cm = warnings.catch_warnings()
        self._cm.__enter__()
        warnings.showwarning = self.show     # Python's filters unchanged: only the format
        return self

    def __exit__(self, *exc):
        return self._cm.__exit__(*exc)


def main(argv=None) -> int:
    """Run one command; Ctrl-C at any moment (start-up imports, option parsing, the run) ends it
    with ``vflpriv: interrupted`` and exit code 130, no traceback.  Anything already recorded
    (ledger, checkpoint) was written durably before.  A Ctrl-C that lands inside a C extension's
    import can surface as another exception (numpy: an ImportError "PyCapsule_Import could not
    import module datetime"); a SIGINT handler notes that one came, so that is reported as the
    interruption it is."""
    import signal
    import threading

    interrupted = []

    def on_sigint(signum, frame):
        interrupted.append(signum)
        raise KeyboardInterrupt

    ours = (threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler)
    previous = signal.signal(signal.SIGINT, on_sigint) if ours else None
    try:
        return _main(argv)
    except KeyboardInterrupt:
        sys.stderr.write("vflpriv: interrupted\n")
        return 130
    except Exception:
        if not interrupted:
            raise
        sys.stderr.write("vflpriv: interrupted\n")
        return 130
    finally:
        if ours:
            signal.signal(signal.SIGINT, previous)


def _main(argv) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        try:
            with _one_line_warnings(args.command):
                return int(args.func(args) or 0)
        finally:
            from .progress import close_all
            close_all()                 # a bar's line is finished before any message below
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


if __name__ == "__main__":
    raise SystemExit(main())
