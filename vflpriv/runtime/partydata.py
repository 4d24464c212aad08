"""A party's own files and noise seed (what its config names; never sent to the server)."""
from __future__ import annotations

import os

import numpy as np
import scipy.sparse as sp

from ..errors import InputError

_CACHE = {}


def save_party_data(path, A_k, y):
    """One party's columns (or a client's rows) and the labels, as the file its config names
    (npz)."""
    yy = np.asarray(y, dtype=np.float64)
    if sp.issparse(A_k):
        A = sp.csc_matrix(A_k)
        np.savez(path, kind="csc", data=A.data, indices=A.indices, indptr=A.indptr,
                 shape=np.asarray(A.shape), y=yy)
    else:
        np.savez(path, kind="dense", A=np.asarray(A_k, dtype=np.float64), y=yy)


def load_party_data(path):
    """``(A_k, y)`` from :func:`save_party_data`'s file; one clear error if it cannot be read."""
    from ..data.files import regular_file

    regular_file(path, "party data file")
    try:
        with np.load(path, allow_pickle=False) as z:
            if str(z["kind"]) == "csc":
                A = sp.csc_matrix((z["data"], z["indices"], z["indptr"]), shape=tuple(z["shape"]))
            else:
                A = z["A"]
            return A, z["y"]
    except (OSError, KeyError, ValueError) as exc:
        raise InputError(f"party data file {str(path)!r} cannot be read: {exc}") from None


def load_cached(path):
    """:func:`load_party_data`, read once per process (a host serving many messages),
    keyed by the file and its modification time."""
    st = os.stat(path)
    key = (os.path.abspath(path), st.st_mtime_ns, st.st_size)
    if key not in _CACHE:
        if len(_CACHE) > 256:
            _CACHE.clear()
        _CACHE[key] = load_party_data(path)
    return _CACHE[key]


def party_noise_seed(cfg, k) -> np.random.SeedSequence | None:
    """Party k's noise seed is its own: from its config's ``noise-entropy`` (seeded test runs:
    the in-process ``noise_root.spawn(K)[k]``, see :func:`noise_entropy_of`), or None: its
    ChaCha20 noise generator is then keyed from ``os.urandom`` (:func:`vflpriv.noise.generator`).
    Used at setup only; afterwards the generator's state lives in the party's state."""
    ent = cfg.get("noise-entropy")
    if ent in (None, ""):
        return None
    parent = tuple(int(v) for v in str(cfg.get("noise-spawn-key", "")).split(",") if v)
    return np.random.SeedSequence(int(ent), spawn_key=parent + (k,))


def noise_entropy_of(noise_ss):
    """``(entropy, spawn key)`` of the in-process noise root: party k's seed is then
    ``SeedSequence(entropy, spawn_key=key + (k,))``, i.e. ``noise_root.spawn(K)[k]``."""
    ent = noise_ss.entropy
    if isinstance(ent, (list, tuple)):
        return None
    return int(ent), tuple(int(v) for v in noise_ss.spawn_key)
