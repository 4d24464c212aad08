"""Scoring with a split model: partial margins summed securely at the label party.

On the common rows (found by :func:`vflpriv.align.align`, in the label party L's order), party
k computes its partial margin z_k = X_k w_k.  The score of a row is z_L + sum_{j != L} z_j + b,
and L must learn only the sum of the others' margins, never one party's (docs/alignment.md,
"Scoring"):

1. Every pair (a, b) of parties other than L agrees on a key: X25519 key pairs made for this
   run, public keys relayed by the server (deployed: signed by each party's own identity key
   and checked against its pinned fingerprint, :mod:`.deployed`), HKDF-SHA256 of the shared
   secret -> a 16-byte
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
from ..vertical.secure.mpc.ring import Prg, decode, encode_round

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


def key_pair() -> tuple:
    """Step 1 at party j != L: ``(private key bytes, public key bytes)``, a fresh X25519 pair
    for this scoring (OS entropy); the private key never leaves party j."""
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    key = X25519PrivateKey.generate()
    return key.private_bytes_raw(), key.public_key().public_bytes_raw()


def masked_margin(X, coef, me: int, private: bytes | None, public: dict) -> np.ndarray:
    """Step 2 at party ``me`` != L: its partial margin X w in fixed point plus its pairwise
    masks, ``+ m_{me,b}`` for each peer b > me and ``- m_{a,me}`` for each a < me (``public``:
    the peers' public keys by party, empty when ``me`` is the only party besides L)."""
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    word = encode_round(partial_margin(X, coef), SCALE_BITS)
    n = word.shape[0]
    mine = X25519PrivateKey.from_private_bytes(private) if public else None
    signed = []
    for b in sorted(public):
        key = _pair_key(mine, public[b], me, b)
        m = Prg(key).uint64(n)
        word = word + m if me < b else word - m
        signed.append(("+" if me < b else "-") + key.hex())
    from ..runtime import views

    if views.enabled():          # one part of the sum L is entitled to (views.py)
        views.masked(word, signed, ("sum", "scores"))
    return word


def unmasked_scores(X, coef, intercept, masked) -> np.ndarray:
    """Step 3 at L: the masked margins (a list of uint64 arrays) added (the masks cancel),
    decoded, plus L's own partial margin and the intercept."""
    total = np.zeros(X.shape[0], dtype=np.uint64)
    for words in masked:
        total += words
    return partial_margin(X, coef) + decode(total, SCALE_BITS) + intercept


def secure_scores(blocks, model, *, meter=None) -> tuple:
    """``(scores, report)``: each party's aligned feature block ``blocks[k]`` (rows in the label
    party's order, the model's columns in order) scored under ``model`` with the secure sum
    above; every message a real frame, relayed through the server and metered.  The parties
    are objects of this process; ``vflpriv.model.deployed`` runs the same three steps, each
    party on its own node, over a run's link."""
    from ..vertical.transport import Meter
    from ..vertical.transport import relay as relayed
    from . import messages as M

    meter = Meter() if meter is None else meter
    K, L = model.K, model.label_party
    others = [j for j in range(K) if j != L]
    secs = [0.0] * K
    t_start = time.perf_counter()

    from ..runtime import views

    def relay(src, dst, msg):
        with views.receiving(dst if isinstance(dst, int) else "server"):
            return relayed(meter, msg, src, dst, M.decode)

    def timed(k, fn, *a):
        t0 = time.perf_counter()
        out = fn(*a)
        secs[k] += time.perf_counter() - t0
        return out

    keys, public = {}, {}
    if len(others) > 1:                          # pairwise keys among the parties other than L
        for j in others:
            keys[j], pub = timed(j, key_pair)
            public[j] = relay(j, [b for b in others if b != j], M.ScoreKey(pub)).public
    masked = []
    for j in others:
        peers = {b: public[b] for b in public if b != j}
        word = timed(j, masked_margin, blocks[j], model.coef[j], j, keys.get(j), peers)
        masked.append(relay(j, L, M.MaskedMargin(word)).words)
    scores = timed(L, unmasked_scores, blocks[L], model.coef[L], model.intercept, masked)
    report = {"bytes": meter.framed_bytes(K),
              "seconds": round(time.perf_counter() - t_start, 4),
              "party_seconds": [round(s, 4) for s in secs],
              "masked": len(others) > 1,
              "messages_by_type": {k: list(v) for k, v in meter.by_type.items()}}
    return scores, report
