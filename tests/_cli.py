"""``vflpriv ARGS`` in the test's own process, through the ``vflpriv`` entry point's function
(``vflpriv.cli.main.main``): the exit code and what it printed, as a child process would report
them, without a Python start and the command's imports each time (about 1 s per command)."""
import contextlib
import io
import os
import types


def vflpriv(*args, cwd=None):
    """``(returncode, stdout, stderr)`` of ``vflpriv ARGS`` run in ``cwd`` (default: here)."""
    from vflpriv.cli.main import main

    out, err, here = io.StringIO(), io.StringIO(), os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main([str(a) for a in args])
            except SystemExit as exc:           # argparse: --help, or an option refused
                code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    finally:
        os.chdir(here)
    return types.SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())
