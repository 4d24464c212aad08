"""Scoring with a split model: partial margins summed securely at the label party.

On the common rows (found by :func:`vflpriv.align.align`, in the label party L's order), party
k computes its partial margin z_k = X_k w_k.  The score of a row is z_L + sum_{j != L} z_j + b,
and L must learn only the sum of the others' margins, never one party's (docs/alignment.md,
"Scoring"):

1. Every pair (a, b) of parties other than L agrees on a key: X25519 key pairs made for this
   run, public keys relayed by the server, HKDF-SHA256 of the shared secret -> a 16-byte
   AES-128-CTR key (``ring.Prg``).  m_ab is that keystream, n words of Z_{2^64}.
2. Party j != L sends L the masked margin  enc(z_j) + sum_{b > j} m_jb - sum_{a < j} m_aj
   (mod 2^64), enc(z) = round(z 2^32).
3. L adds the masked margins: the masks cancel and L reads sum_j enc(z_j), then adds z_L + b.

A masked margin is one-time-padded by keys L does not hold, so L (and the server) learn only the
sum.  With a single other party there is nothing to mask with: the sum is that party's margin,
which the score reveals anyway (score - z_L - b); the run says so.  Semi-honest parties, and no
party other than L colluding with L.  Fixed-point error: at most (K - 1) 2^-33 per score.
"""
from __future__ import annotations

import time

import numpy as np

from ..errors import InputError
from ..vertical.secure.ring import Prg, decode, encode_round

SCALE_BITS = 32
#: largest |partial margin| the 64-bit ring holds at 32 fractional bits, with headroom
MAX_MARGIN = 2.0 ** 29


def _pair_key(my_private, peer_public: bytes, a: int, b: int) -> bytes:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PublicKey
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    shared = my_private.exchange(X25519PublicKey.from_public_bytes(peer_public))
    info = f"vflpriv score mask|{min(a, b)}|{max(a, b)}".encode()
    return HKDF(algorithm=hashes.SHA256(), length=16, salt=None, info=info).derive(shared)


def partial_margin(X, coef) -> np.ndarray:
    z = np.asarray(X @ np.asarray(coef, dtype=np.float64), dtype=np.float64).ravel()
    if z.size and np.max(np.abs(z)) >= MAX_MARGIN:
        raise InputError(f"a partial margin reaches {np.max(np.abs(z)):.3g}, beyond the "
                         f"{MAX_MARGIN:.3g} the secure sum holds")
    return z


def secure_scores(blocks, model, *, meter=None) -> tuple:
    """``(scores, report)``: each party's aligned feature block ``blocks[k]`` (rows in the label
    party's order, the model's columns in order) scored under ``model`` with the secure sum
    above; every message a real frame, relayed through the server and metered."""
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    from ..vertical.transport import Meter
    from ..vertical.transport import relay as relayed
    from . import messages as M

    meter = Meter() if meter is None else meter
    K, L = model.K, model.label_party
    n = blocks[L].shape[0]
    others = [j for j in range(K) if j != L]
    secs = [0.0] * K
    t_start = time.perf_counter()

    def relay(src, dst, msg):
        return relayed(meter, msg, src, dst, M.decode)

    keys, public = {}, {}
    if len(others) > 1:                          # pairwise keys among the parties other than L
        for j in others:
            t0 = time.perf_counter()
            keys[j] = X25519PrivateKey.generate()
            pub = keys[j].public_key().public_bytes_raw()
            secs[j] += time.perf_counter() - t0
            peers = [b for b in others if b != j]
            public[j] = relay(j, peers, M.ScoreKey(pub)).public
    masked_sum = np.zeros(n, dtype=np.uint64)
    for j in others:
        t0 = time.perf_counter()
        word = encode_round(partial_margin(blocks[j], model.coef[j]), SCALE_BITS)
        for b in others:
            if b == j:
                continue
            m = Prg(_pair_key(keys[j], public[b], j, b)).uint64(n)
            word = word + m if j < b else word - m
        secs[j] += time.perf_counter() - t0
        got = relay(j, L, M.MaskedMargin(word)).words
        t0 = time.perf_counter()
        masked_sum += got
        secs[L] += time.perf_counter() - t0
    t0 = time.perf_counter()
    scores = partial_margin(blocks[L], model.coef[L]) + decode(masked_sum, SCALE_BITS) \
        + model.intercept
    secs[L] += time.perf_counter() - t0
    report = {"bytes": meter.framed_bytes(K),
              "seconds": round(time.perf_counter() - t_start, 4),
              "party_seconds": [round(s, 4) for s in secs],
              "masked": len(others) > 1,
              "messages_by_type": {k: list(v) for k, v in meter.by_type.items()}}
    return scores, report
