"""Typed option values: one parser per kind of value, shared by every command and tool.

A number with a range (:func:`real`), a count with a cap (:func:`count`, :func:`seed`), a path
that must exist (:func:`existing_file`) or is to be written (:func:`output_path`).  Each is an
argparse ``type``: checked at parse time, before any file is read or any budget spent, and
whether or not the chosen algorithm reads the option; argparse prints ``vflpriv CMD: error:
argument --workers: must be at most 8, got 64`` (one line, exit 2).  The one output rule across
all of a command's paths is :func:`vflpriv.outputs.check_outputs`; the option groups several
commands share are in :mod:`vflpriv.cli.options`.
"""
from __future__ import annotations

import argparse
import math
import re
import sys


def number(text) -> float:
    """A float option's value, refusing what float() would silently turn into another number:
    a literal that overflows to +-inf (``1e309``; only ``inf`` spelled out means infinity) or
    underflows to 0 (``1e-400``).  NaN and subnormals pass: each option's own check names them."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    spelled = str(text).strip().lower().lstrip("+-")
    if math.isinf(v) and spelled not in ("inf", "infinity"):
        raise argparse.ArgumentTypeError(
            f"{text!r} is too large for a float (it overflows to {v}; the largest is "
            f"{sys.float_info.max:.4g}); write inf if infinity is meant")
    mantissa = re.split("[eE]", spelled)[0]
    if v == 0 and any(c in "123456789" for c in mantissa):
        raise argparse.ArgumentTypeError(
            f"{text!r} is too small for a float (it underflows to 0; the smallest is "
            f"{5e-324:.4g})")
    return v


def _interval(lo, hi, lo_open, hi_open) -> str:
    if hi is None:
        return f"{'>' if lo_open else '>='} {lo:g}"
    if lo is None:
        return f"{'<' if hi_open else '<='} {hi:g}"
    return f"in {'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}"


def real(lo=None, hi=None, *, lo_open=False, hi_open=False, infinite=False):
    """A number option with a range: read as :func:`number` reads it (no silent overflow or
    underflow), NaN refused, +-inf refused unless ``infinite``, and the value inside
    ``[lo, hi]`` (``lo_open`` / ``hi_open``: the bound itself excluded; None: no bound).  The
    message names the range and the value read: ``must be > 0, got -1.0``."""
    def parse(text):
        v = number(text)
        if math.isnan(v):
            raise argparse.ArgumentTypeError(f"must be a number, got {text!r}")
        if math.isinf(v) and not infinite:
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
        if (lo is not None and (v < lo or (lo_open and v == lo))) or (
                hi is not None and (v > hi or (hi_open and v == hi))):
            raise argparse.ArgumentTypeError(
                f"must be {_interval(lo, hi, lo_open, hi_open)}, got {v!r}")
        return v

    parse.__name__ = "number"
    return parse


def count(cap, *, minimum=1):
    """An integer option with a cap: decimal digits only (``1e9`` and ``1.5`` are refused, not
    rounded), at least ``minimum`` and at most ``cap``, the cap named in the message
    (``must be at most 8, got 64``)."""
    def parse(text):
        t = str(text).strip()
        digits = t.lstrip("+-").replace("_", "")
        if not digits.isdigit() or not digits.isascii():
            raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}")
        if len(digits) > 40:
            raise argparse.ArgumentTypeError(f"must be at most {cap:,}, got {t[:12]}... "
                                             f"({len(digits)} digits)")
        v = int(t)
        if v < minimum:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {text!r}")
        if v > cap:
            raise argparse.ArgumentTypeError(f"must be at most {cap:,}, got {v:,}")
        return v

    parse.__name__ = "integer"
    return parse


#: the largest seed a command accepts (numpy's generators take any non-negative integer; a seed
#: is a label, and 2^63 - 1 is every seed a JSON reader keeps exact as a signed 64-bit integer)
MAX_SEED = 2 ** 63 - 1


def seed(text):
    """``--seed``: an integer from 0 to :data:`MAX_SEED`."""
    return count(MAX_SEED, minimum=0)(text)


def existing_file(text):
    """An input path that must exist and be a regular file (a FIFO or a device is refused by
    what it is, never opened)."""
    import os
    import stat as st

    path = str(text)
    if not path.strip():
        raise argparse.ArgumentTypeError(f"needs a file name, got {text!r}")
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise argparse.ArgumentTypeError(f"{path!r} does not exist") from None
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"{path!r}: {exc.strerror}") from None
    if not st.S_ISREG(mode):
        raise argparse.ArgumentTypeError(f"{path!r} is not a regular file")
    return path


def output_path(text):
    """An output path (a file, or with ``--model-out`` a directory) that is to be written: a
    name is needed (``--json ''`` was silently ignored).  Where it may be written, and that it
    is no input and no other output, is checked by :func:`vflpriv.outputs.check_outputs`
    before the command's work, once every option is known."""
    path = str(text)
    if not path.strip():
        raise argparse.ArgumentTypeError(f"needs a file name, got {text!r}")
    return path
