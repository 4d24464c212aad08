"""The generator of every DP noise draw: ChaCha20, a cryptographically secure stream (issue 32).

numpy's default bit generator (PCG64) is a statistical generator: a few of its outputs determine
its state, hence every later output.  A party whose released value is pure noise (an all-zero
column in the secure path's cross-products, say) would receive raw samples of another party's
noise stream and could then predict, and subtract, that party's later noise.  So DP noise is
drawn from :func:`generator`: a ``numpy.random.Generator`` over randomgen's ``ChaCha`` bit
generator with 20 rounds, whose output is the RFC 8439 ChaCha20 keystream of its 256-bit key
(tested against the ``cryptography`` package's ChaCha20 in ``tests/test_noise.py``).  The
primitive is a library's, not ours; the samplers on top of it (numpy's normal, Laplace, Gumbel,
and :mod:`.discrete`'s exact discrete Gaussian) only read its words.

* ``generator(None)``: keyed from 32 bytes of ``os.urandom`` (deployment);
* ``generator(seed)``: keyed from ``SeedSequence(seed).generate_state(4, uint64)`` (a seeded run
  is reproducible and, like every seeded run here, not for deployment: a SeedSequence is not a
  one-way function of its entropy).

Checkpoints keep a generator's position as JSON: :func:`state` (numpy arrays in the bit
generator's state become ``{"dtype", "values"}`` lists) and :func:`restore` (back, after checking
that the state is a ChaCha20 state: a checkpoint written with PCG64 noise is refused, not resumed
on a different stream).  Only DP noise (and what must stay secret with it, such as a client's
Poisson batch) uses this module; public choices (sketches, samplings, data splits) keep numpy's
``default_rng``.
"""
from __future__ import annotations

import os

import numpy as np

from ..errors import InputError

#: ChaCha rounds (20: the standard cipher; fewer rounds are not offered)
ROUNDS = 20
_NAME = "randomgen.chacha.ChaCha"


def _chacha():
    try:
        from randomgen import ChaCha
    except ImportError as exc:        # a declared dependency (pyproject); say so plainly
        raise ImportError("vflpriv draws DP noise from randomgen's ChaCha20: "
                          "pip install randomgen==2.5.1") from exc
    return ChaCha


def generator(seed=None) -> np.random.Generator:
    """A ``numpy.random.Generator`` over ChaCha20.  ``seed``: None (key from ``os.urandom``),
    an int or a sequence of ints, or a ``numpy.random.SeedSequence``."""
    ChaCha = _chacha()
    if seed is None:
        key = int.from_bytes(os.urandom(32), "little")
    else:
        ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
        words = ss.generate_state(4, np.uint64)
        key = sum(int(w) << (64 * i) for i, w in enumerate(words))
    return np.random.Generator(ChaCha(key=key, counter=0, rounds=ROUNDS))


def is_secure(rng) -> bool:
    """``rng`` is a Generator over this module's ChaCha20."""
    return isinstance(rng, np.random.Generator) and \
        type(rng.bit_generator).__module__ + "." + type(rng.bit_generator).__name__ == _NAME and \
        rng.bit_generator.state["state"]["rounds"] == ROUNDS


def _encode(v):
    if isinstance(v, np.ndarray):
        return {"dtype": str(v.dtype), "values": v.tolist()}
    if isinstance(v, dict):
        return {k: _encode(x) for k, x in v.items()}
    if isinstance(v, np.integer):
        return int(v)
    return v


def _decode(v):
    if isinstance(v, dict):
        if set(v) == {"dtype", "values"}:
            return np.array(v["values"], dtype=np.dtype(v["dtype"]))
        return {k: _decode(x) for k, x in v.items()}
    return v


def state(rng) -> dict | None:
    """``rng``'s position as JSON-safe data (None for None)."""
    if rng is None:
        return None
    return _encode(rng.bit_generator.state)


def restore(rng, st) -> None:
    """Put ``rng`` (a :func:`generator`) back at the position :func:`state` returned."""
    name = st.get("bit_generator") if isinstance(st, dict) else None
    if name != _NAME:
        raise InputError(f"resume: the checkpoint's noise generator is {name!r}, not ChaCha20 "
                         "(written by a vflpriv before 2026-11-26, which drew DP noise from "
                         "PCG64); start the run again")
    rng.bit_generator.state = _decode(st)
