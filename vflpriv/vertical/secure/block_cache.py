"""A party's prepared block, made from its data file once per process (every secure role).
"""
from __future__ import annotations

import os

import numpy as np

from ...errors import InputError
from ...runtime.partydata import load_party_data
from ...runtime.roles import Refused

#: prepared blocks kept by this process (a host that serves many messages for a party, e.g. a
#: simulation actor or the in-process link): (data file, its mtime and size, the options) -> block
_PREPARED = {}
_PREPARED_MAX = 8


def cached_block(cache, cfg, setup, k, options, make):
    """Party k's block for this run, made by ``make(A_k, y)`` from its data file once per
    process and kept in ``cache`` for its later messages (a block is read-only; a party role is
    rebuilt for every message, :mod:`vflpriv.runtime.roles`, and at n = 1e6 making it again --
    reading, clipping, fixed point, CSC -- would cost seconds per message).  The key is the
    file (path, mtime, size), k and ``options`` (the run's bounds): a changed file, or other
    bounds, make a new one.  Used by every secure family's role (least squares here, ``glm``,
    ``ssp``), each with its own cache."""
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


def _prepared(cfg, setup, k):
    """Party k's :class:`~.protocol.PreparedBlock` for this run (:func:`cached_block`)."""
    from .protocol import prepare_block

    clips = setup["clips"]
    labels = setup.get("label_party") in (None, k)

    def make(A_k, y):
        if not labels or np.size(y) == 0:
            y = None              # only the label party keeps y; the others get A_k^T y + noise
        return prepare_block(A_k, y, frac=setup["frac"], private=bool(setup["private"]),
                             feature_bound=setup["feature_bound"],
                             label_bound=setup["label_bound"],
                             row_clip=None if clips is None else clips[k], k=k)

    block = cached_block(_PREPARED, cfg, setup, k,
                         (int(setup["frac"]), bool(setup["private"]), setup["feature_bound"],
                          setup["label_bound"], None if clips is None else float(clips[k]),
                          labels), make)
    if block.n != setup["n"]:
        raise Refused(f"party {k}'s data has {block.n} rows, the run expects {setup['n']}")
    return block
