"""Input files are regular files: a FIFO or a device given as data is refused before it is opened.

Opening a FIFO blocks until some other process writes to it, and a device such as ``/dev/zero``
never ends: either would hang a command (or read until memory runs out) instead of giving one
line naming the path.  ``os.stat`` looks at the path without opening it.
"""
from __future__ import annotations

import os
import stat

from ..errors import InputError

_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def regular_file(path, what: str = "--data") -> str:
    """``path`` if it names an existing regular file; else InputError naming ``what`` and the
    path (does not exist / is a FIFO, a device, a socket or a directory)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InputError(f"{what} {str(path)!r} does not exist") from None
    except OSError as exc:
        raise InputError(f"{what} {str(path)!r} cannot be read: {exc.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{what} {str(path)!r}: Is a directory, not a regular file")
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a regular file")
        raise InputError(f"{what} {str(path)!r} is {kind}, not a regular file")
    return path
