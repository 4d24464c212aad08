"""The folder of a run description for separate machines (``vflpriv flower spec ...``)."""
from __future__ import annotations

import contextlib
import os
import shutil


@contextlib.contextmanager
def description_folder(out):
    """Make ``out``, let the body write the description into it, then the Flower App
    (``out/app``); on any failure (Ctrl-C included) the folder is removed whole, so nothing
    half-written is left."""
    from ..flower.deploy import write_app

    os.makedirs(out, exist_ok=True)
    try:
        yield
        write_app(os.path.join(out, "app"))
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        raise
