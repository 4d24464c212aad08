"""Output files: checked before any work, written atomically, never over anything but a file.

Every command checks all of its output paths (``--json``, ``--plot``, ``--checkpoint``, the
ledger, ``--model-out``) before it loads data or spends budget (:func:`check_outputs`, the one
output rule): each file output must name a regular file or nothing yet, in an existing writable
directory; a directory output (``--model-out``) a new or empty directory; a plot needs a known
image extension (so ``--plot DIR`` is refused instead of writing ``DIR.png``); and no two of
them may be the same path or one inside the other, nor an output be an input (the data, a
resumed checkpoint, a plan) or lie inside an input directory (a model read by ``predict``):
``--json`` naming the ledger would otherwise replace the ledger's records, and ``--json out
--model-out out`` spent the budget and then found ``out`` taken.  Files are then written atomically
(:func:`write_atomic`): to a temporary file in the same directory, fsync'ed, then renamed over
the target, which is re-checked to be a regular file first (a FIFO or device node that appeared
meanwhile is never replaced).
"""
from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile

from .errors import InputError

#: image formats matplotlib writes without extra packages
IMAGE_EXTENSIONS = (".png", ".pdf", ".svg", ".svgz", ".jpg", ".jpeg", ".eps", ".ps", ".tif",
                    ".tiff", ".webp", ".pgf")


def _kind(mode) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device node"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def check_output(path, option: str, *, image: bool = False) -> str:
    """Refuse (InputError naming ``option``) an output path that cannot be written as a file."""
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise InputError(f"{option} needs a file name, got {path!r}")
    path = os.fspath(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise InputError(f"{option} {path!r}: {exc.strerror}") from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise InputError(f"{option} {path!r} is {_kind(st.st_mode)}; give a file name")
    if image:
        ext = os.path.splitext(path)[1].lower()
        if ext not in IMAGE_EXTENSIONS:
            raise InputError(f"{option} {path!r} needs an image file extension "
                             f"({', '.join(IMAGE_EXTENSIONS[:4])}, ...), got "
                             f"{ext or 'none'}")
    d = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(d):
        raise InputError(f"{option} {path!r}: directory {d!r} does not exist")
    if not os.access(d, os.W_OK | os.X_OK):
        raise InputError(f"{option} {path!r}: directory {d!r} is not writable")
    if st is not None and not os.access(path, os.W_OK):
        raise InputError(f"{option} {path!r} is not writable")
    return path


def check_output_dir(path, option: str) -> str:
    """Refuse (InputError naming ``option``) a directory output that cannot be written whole:
    an empty name, an existing file, a non-empty directory (a model is never written over
    another), a parent that does not exist or is not writable."""
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise InputError(f"{option} needs a directory name, got {path!r}")
    path = os.path.abspath(os.fspath(path))
    if os.path.lexists(path):
        if not os.path.isdir(path):
            raise InputError(f"{option} {path!r} exists and is not a directory")
        if os.listdir(path):
            raise InputError(f"{option} {path!r} is not empty; give a new or empty directory "
                             "(a model is never written over another)")
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        raise InputError(f"{option} {path!r}: directory {parent!r} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"{option} {path!r}: directory {parent!r} is not writable")
    return path


def _inside(path, directory) -> bool:
    """``path`` names a file at or under ``directory`` (symbolic links resolved)."""
    p, d = os.path.realpath(path), os.path.realpath(directory)
    return p == d or p.startswith(d.rstrip(os.sep) + os.sep)


def _same(a, b) -> bool:
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    with contextlib.suppress(OSError):
        return os.path.samefile(a, b)        # hard links
    return False


def check_outputs(outputs: dict, inputs: dict | None = None, images=(), directories=()) -> None:
    """The one output rule, applied before any work: check every output (``{option: path}``;
    None entries skipped; a ``directories`` option is a new or empty directory written whole,
    :func:`check_output_dir`, the others files, :func:`check_output`), and that no two outputs
    are the same path or one inside the other, and that no output is an input or lies inside
    an input directory (``predict --json MODEL/manifest.json`` would change the model).
    ``images``: the options that are plots."""
    outs = [(o, os.fspath(p)) for o, p in outputs.items() if p is not None]
    for option, path in outs:
        if option in directories:
            check_output_dir(path, option)
        else:
            check_output(path, option, image=option in images)
    ins = [(o, os.fspath(p)) for o, p in (inputs or {}).items()
           if isinstance(p, (str, os.PathLike)) and os.fspath(p) and os.path.exists(p)]
    for i, (option, path) in enumerate(outs):
        for other, opath in outs[i + 1:]:
            if _same(path, opath):
                raise InputError(f"{option} and {other} name the same file {path!r}; each output "
                                 "needs its own")
            for (o1, p1), (o2, p2) in (((option, path), (other, opath)),
                                       ((other, opath), (option, path))):
                if o2 in directories and _inside(p1, p2):
                    raise InputError(f"{o1} {p1!r} is inside {o2} {p2!r}, which is written "
                                     "whole: give it a path outside")
        for other, ipath in ins:
            if _same(path, ipath):
                raise InputError(f"{option} {path!r} is the same file as {other}: it would be "
                                 "overwritten")
            if os.path.isdir(ipath) and _inside(path, ipath):
                raise InputError(f"{option} {path!r} is inside {other} {ipath!r}: it would "
                                 "change that input; give a path outside it")


def check_command_outputs(args, inputs: dict | None = None):
    """A command's ``--json``, ``--plot`` and ``--ledger`` (those it has) checked before any work,
    and matplotlib loaded when there is a plot.  Returns ``matplotlib.pyplot`` or None."""
    outputs = {f"--{name}": getattr(args, name, None) for name in ("json", "plot", "ledger")}
    check_outputs(outputs, inputs, images=("--plot",))
    if not outputs["--plot"]:
        return None
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputError("--plot needs matplotlib, which is not installed "
                         "(pip install 'vflpriv[plot]')") from None
    return plt


def write_atomic(path, write, *, mode: int | None = None) -> None:
    """Write ``path`` atomically: ``write(fh)`` fills a temporary file in the same directory,
    which is fsync'ed and renamed over ``path`` (only if ``path`` is a regular file or absent).
    An OSError (disk full, ...) names the file; the old content, if any, is kept."""
    path = os.fspath(path)
    d = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=d)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, path) from None
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        try:
            st = os.stat(path)
        except FileNotFoundError:
            st = None
        if st is not None and not stat.S_ISREG(st.st_mode):
            raise InputError(f"{path!r} is {_kind(st.st_mode)}; not replaced")
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        # one line naming the file the user gave (not the temporary one)
        raise OSError(exc.errno, exc.strerror or str(exc), path) from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):
        dfd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def write_json_atomic(path, obj) -> None:
    import json

    text = json.dumps(obj, indent=2) + "\n"
    write_atomic(path, lambda fh: fh.write(text.encode("utf-8")))


def save_figure(fig, path) -> None:
    """``fig.savefig`` to ``path`` atomically (the format from the extension)."""
    fmt = os.path.splitext(os.fspath(path))[1].lower().lstrip(".")
    write_atomic(path, lambda fh: fig.savefig(fh, format=fmt))


def integer_ticks(*axes, which="x"):
    """Integer tick labels on round / iteration / party axes (matplotlib would put 2.5 there)."""
    from matplotlib.ticker import MaxNLocator

    for ax in axes:
        for name in which:
            getattr(ax, f"{name}axis").set_major_locator(MaxNLocator(integer=True))
