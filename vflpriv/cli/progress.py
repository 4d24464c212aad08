"""The one progress helper of the ``vflpriv`` command (tqdm on stderr).

A bar is drawn only when both stdout and stderr are terminals and ``--quiet`` was not given:
piped or redirected output, CI logs and tests stay free of carriage returns.  ``Progress`` is
used as a context manager so that the bar is closed (its line finished) however the block ends,
also on Ctrl-C: ``vflpriv: interrupted`` then starts on a line of its own.

* ``Progress(total, desc)``: ``bar(t)`` or ``bar(t, f)`` after step ``t`` (0-based) of
  ``total``, with an optional objective value ``f`` shown beside it (the engines' callbacks);
  ``bar.step()`` advances by one; ``bar.phase(desc, total)`` is a bar of its own for a phase
  before the rounds (``vflpriv.vertical.api`` uses it for fw's cross-validated eta).
* ``Spinner(desc)``: for work without a step count (a calibration's root search, a benchmark):
  elapsed seconds, redrawn by a daemon thread.
"""
from __future__ import annotations

import os
import sys
import threading

_ACTIVE = []          # open bars; main() closes them before it prints an error or "interrupted"


def close_all():
    """Finish every open bar's line (main() calls it before any message on stderr)."""
    for bar in list(_ACTIVE):
        bar.close()


class _ClearingStdout:
    """While a bar is drawn, stdout goes through this: whole lines are written with the bar's line
    cleared before and redrawn after, so printed tables never land on the bar's line (a partial
    line waits for its newline, or for the bar to close)."""

    def __init__(self, real, bar, lock):
        self._real, self._bar, self._lock = real, bar, lock
        self._pending = ""

    def write(self, text):
        with self._lock:
            self._pending += text
            cut = self._pending.rfind("\n") + 1
            if cut:
                self._bar.clear()
                self._real.write(self._pending[:cut])
                self._real.flush()
                self._pending = self._pending[cut:]
                self._bar.refresh()
        return len(text)

    def flush(self):
        pass                     # whole lines are flushed as they are written

    def release(self):
        """The bar is closing: hand back any partial line."""
        if self._pending:
            self._real.write(self._pending)
            self._pending = ""
        self._real.flush()

    def __getattr__(self, name):
        return getattr(self._real, name)


def _guard_stdout(bar):
    """Route stdout around ``bar``; returns the function that undoes it."""
    real = sys.stdout
    sys.stdout = _ClearingStdout(real, bar, threading.RLock())

    def undo():
        if isinstance(sys.stdout, _ClearingStdout) and sys.stdout._bar is bar:
            sys.stdout.release()
            sys.stdout = real
    return undo


def enabled(quiet: bool = False) -> bool:
    """Draw progress?  Not with --quiet, and only on a terminal (stdout and stderr)."""
    if quiet or os.environ.get("VFLPRIV_NO_PROGRESS"):
        return False
    try:
        return sys.stderr.isatty() and sys.stdout.isatty()
    except (AttributeError, ValueError):          # a closed or replaced stream
        return False


def _width() -> dict:
    """Follow the terminal's size; a terminal that reports none (0 x 0) is taken as 80 x 24
    (tqdm would draw nothing there)."""
    try:
        size = os.get_terminal_size(sys.stderr.fileno())
        if size.columns > 0 and size.lines > 0:
            return {"dynamic_ncols": True}
    except (OSError, ValueError, AttributeError):
        pass
    return {"ncols": 80, "nrows": 24}


class Progress:
    def __init__(self, total: int, desc: str = "", *, quiet: bool = False, unit: str = "it"):
        self.total, self.n = int(total), 0
        self._bar, self._quiet = None, bool(quiet)
        if enabled(quiet) and self.total > 0:
            from tqdm import tqdm

            self._bar = tqdm(total=self.total, desc=desc, unit=unit, file=sys.stderr,
                             mininterval=0.1, **_width())
            self._undo = _guard_stdout(self._bar)
            _ACTIVE.append(self)

    def __call__(self, t, f=None):
        if self._bar is None:
            return
        done = min(int(t) + 1, self.total)
        if done > self.n:
            self._bar.update(done - self.n)
            self.n = done
        if f is not None:
            self._bar.set_postfix_str(f"f={f:.6g}", refresh=False)
        if done >= self.total:          # finished: its line ends before the results are printed
            self.close()

    def say_defaults(self, lines):
        """The defaults a run chose (``secure.defaults.describe``), one line each on stdout
        before its rounds: output, not progress, so said in a pipe too."""
        for line in lines:
            sys.stdout.write(line + "\n")
        sys.stdout.flush()

    def step(self, k: int = 1):
        self(self.n + k - 1)

    def phase(self, desc: str, total: int, *, unit: str = "it") -> "Progress":
        """A bar of its own for a phase before the rounds (a selection's fits), drawn where
        this one would be; a context manager, closed when the phase ends."""
        return Progress(total, desc, quiet=self._quiet, unit=unit)

    def close(self):
        if self._bar is not None:
            self._bar.close()
            self._undo()
            self._bar = None
            if self in _ACTIVE:
                _ACTIVE.remove(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class Spinner:
    """Elapsed time for work with no step count; silent where :func:`enabled` says so."""

    def __init__(self, desc: str, *, quiet: bool = False):
        self.desc, self.on = desc, enabled(quiet)
        self._stop = threading.Event()
        self._thread = None
        self._bar = None

    def __enter__(self):
        if self.on:
            from tqdm import tqdm

            self._bar = tqdm(total=None, desc=self.desc, file=sys.stderr, leave=False,
                             bar_format="{desc}: {elapsed}", **_width())
            self._undo = _guard_stdout(self._bar)
            self._thread = threading.Thread(target=self._spin, daemon=True)
            self._thread.start()
            _ACTIVE.append(self)
        return self

    def _spin(self):
        lock = sys.stdout._lock if isinstance(sys.stdout, _ClearingStdout) else threading.RLock()
        while not self._stop.wait(0.25):
            with lock:
                self._bar.refresh()

    def close(self):
        if self._bar is not None:
            self._stop.set()
            self._thread.join()
            self._bar.close()
            self._undo()
            self._bar = None
            if self in _ACTIVE:
                _ACTIVE.remove(self)

    def __exit__(self, *exc):
        self.close()
        return False
