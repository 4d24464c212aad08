"""A party's block, made from its data file once per process (the cache every secure role uses)."""
from __future__ import annotations

import os

from ...errors import InputError
from ...runtime.partydata import load_party_data
from ...runtime.roles import Refused

#: blocks one cache keeps before it is emptied (a process serves few runs at a time)
_PREPARED_MAX = 8


def cached_block(cache, cfg, setup, k, options, make):
    """Party k's block for this run, made by ``make(A_k, y)`` from its data file once per
    process and kept in ``cache`` for its later messages (a block is read-only; a party role is
    rebuilt for every message, :mod:`vflpriv.runtime.roles`, and at n = 1e6 making it again --
    reading, clipping, fixed point, CSC -- would cost seconds per message).  The key is the
    file (path, mtime, size), k and ``options`` (the run's bounds): a changed file, or other
    bounds, make a new one.  Used by every secure family's role (least squares in ``remote``,
    ``glm_remote``, ``ssp_remote``), each with its own cache and its own ``make``."""
    path = cfg["data"]
    try:
        st = os.stat(path)
    except OSError as exc:
        raise InputError(f"party data file {str(path)!r} cannot be read: {exc}") from None
    key = (os.path.abspath(path), st.st_mtime_ns, st.st_size, k, *options)
    got = cache.get(key)
    if got is None:
        A_k, y = load_party_data(path)
        if A_k.shape[0] != setup["n"]:
            raise Refused(f"party {k}'s data has {A_k.shape[0]} rows, the run expects "
                          f"{setup['n']}")
        got = make(A_k, y)
        if len(cache) >= _PREPARED_MAX:
            cache.clear()
        cache[key] = got
    return got
