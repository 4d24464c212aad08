"""ECDH private set intersection over X25519, led by the label party (docs/alignment.md).

The commutative-exponentiation PSI (Meadows 1986; Huberman, Franklin and Hogg 1999; the
ECDH-PSI of SecretFlow and of Google's Private Join and Compute), for K parties in a star around
the leader L (the label party).  Each party i draws a secret X25519 key k_i; H is BLAKE2b-256
with a fresh public run nonce as salt, read as an X25519 u-coordinate; ``X(k, u)`` is X25519,
which computes x([k] P) on the curve or its twist, so X(k_a, X(k_b, u)) = X(k_b, X(k_a, u)).

1. L -> j:  setup (nonce, tag length) and L's points  X(k_L, H(id)), in L's file order.
2. j -> L:  j's points  X(k_j, H(id)), in an order shuffled by j's secret permutation pi_j;
            and the tags  T(X(k_j, P_L[r]))  of L's points raised to k_j, in L's order
            (T: BLAKE2b of the point, truncated to 12 bytes).
3. L:       raises j's points to k_L, tags them, and matches: row r of L is held by j iff
            its tag is among j's; it also knows where (position s in j's shuffled list).
            The common rows C are L's rows matched by every j, in L's file order.
4. L -> j:  for each common row in L's order, the position s in j's shuffled list; j reads
            its own row through pi_j^{-1}.

What each party learns (semi-honest parties, a relaying server): L learns, for each j, which
of its own IDs j also holds, and |P_j|; party j learns which of its rows are common to all and
their order in L's file, |P_L| and |C|; the server sees sizes and pseudo-random points.  Under
the decisional Diffie-Hellman assumption in the random-oracle model nothing else leaks; a party
can still probe an ID by putting it in its own set, as in every PSI.  Primitives: X25519 from
``cryptography`` (OpenSSL), BLAKE2b from hashlib, ``secrets`` for keys, nonce and shuffle.
"""
from __future__ import annotations

import hashlib
import os
import secrets

import numpy as np

from . import messages as M

TAG_BYTES = 12
_PERSON_ID = b"vflpriv-psi-id"
_PERSON_TAG = b"vflpriv-psi-tag"
#: points per task when raising a large list to a key in several processes
_CHUNK = 1 << 16


def hash_ids(ids, nonce: bytes) -> bytes:
    """H(id) for each id, concatenated: BLAKE2b-256 salted with the run nonce; the top bit is
    cleared (X25519 ignores it, RFC 7748, section 5), so equal IDs give equal points."""
    out = bytearray(32 * len(ids))
    for i, v in enumerate(ids):
        h = bytearray(hashlib.blake2b(str(v).encode("utf-8"), digest_size=32, salt=nonce,
                                      person=_PERSON_ID).digest())
        h[31] &= 0x7F
        out[32 * i:32 * i + 32] = h
    return bytes(out)


def _raise_chunk(key: bytes, points: bytes) -> bytes:
    from cryptography.hazmat.primitives.asymmetric.x25519 import (
        X25519PrivateKey,
        X25519PublicKey,
    )

    exchange = X25519PrivateKey.from_private_bytes(key).exchange
    pub = X25519PublicKey.from_public_bytes
    return b"".join([exchange(pub(points[i:i + 32])) for i in range(0, len(points), 32)])


def raise_to(key: bytes, points: bytes, workers: int = 1) -> bytes:
    """X(key, u) for each 32-byte u-coordinate in ``points``, in order; with ``workers`` > 1
    and a long list, chunks are raised in that many processes (a party's own cores)."""
    n = len(points) // 32
    if workers <= 1 or n < 4 * _CHUNK:
        return _raise_chunk(key, points)
    from concurrent.futures import ProcessPoolExecutor

    parts = [points[i:i + 32 * _CHUNK] for i in range(0, len(points), 32 * _CHUNK)]
    with ProcessPoolExecutor(max_workers=workers) as ex:
        return b"".join(ex.map(_raise_chunk, [key] * len(parts), parts))


def tags(points: bytes, tag_bytes: int = TAG_BYTES) -> bytes:
    """T(point): BLAKE2b of each 32-byte point, ``tag_bytes`` long."""
    return b"".join(hashlib.blake2b(points[i:i + 32], digest_size=tag_bytes,
                                    person=_PERSON_TAG).digest()
                    for i in range(0, len(points), 32))


#: most processes the X25519 work of one party starts (``--workers``; the default is the CPU
#: count up to this): beyond, processes only compete for the same cores
MAX_WORKERS = 8


def default_workers() -> int:
    return max(1, min(os.cpu_count() or 1, MAX_WORKERS))


class PsiParty:
    """One party's side of the protocol: its IDs, its secret key and (not the leader) its
    secret shuffle.  The key and the shuffle come from OS entropy, never from a seed."""

    def __init__(self, party: int, ids, workers: int = 1):
        self.party, self.ids, self.workers = int(party), list(ids), int(workers)
        self._key = secrets.token_bytes(32)
        self._order = None          # pi_j: shuffled position -> own row
        self.nonce = None

    # -- every party ----------------------------------------------------------------------
    def own_points(self, nonce: bytes, shuffle: bool) -> bytes:
        """X(k, H(id)) for this party's IDs: in file order (the leader) or shuffled."""
        self.nonce = nonce
        pts = raise_to(self._key, hash_ids(self.ids, nonce), self.workers)
        if not shuffle:
            return pts
        rng = np.random.default_rng(secrets.randbits(128))
        self._order = rng.permutation(len(self.ids))
        # Fisher-Yates by numpy's generator seeded from OS entropy; the order is never sent
        return np.frombuffer(pts, dtype="V32")[self._order].tobytes()

    # -- a non-leader party j -------------------------------------------------------------
    def leader_tags(self, leader_points: bytes, tag_bytes: int) -> bytes:
        """T(X(k_j, P_L[r])) in the leader's order."""
        return tags(raise_to(self._key, leader_points, self.workers), tag_bytes)

    def own_rows(self, positions) -> np.ndarray:
        """The leader's positions in j's shuffled list -> j's own rows (through pi_j^-1)."""
        return self._order[np.asarray(positions, dtype=np.int64)]

    # -- the leader -----------------------------------------------------------------------
    def match(self, party_points: bytes, my_tags: bytes, tag_bytes: int) -> np.ndarray:
        """For each of the leader's rows, the position of the same ID in party j's shuffled
        list, or -1: j's points raised to k_L are tagged and looked up by the tags j sent."""
        theirs = tags(raise_to(self._key, party_points, self.workers), tag_bytes)
        where = {theirs[i:i + tag_bytes]: s
                 for s, i in enumerate(range(0, len(theirs), tag_bytes))}
        return np.fromiter((where.get(my_tags[i:i + tag_bytes], -1)
                            for i in range(0, len(my_tags), tag_bytes)),
                           dtype=np.int64, count=len(my_tags) // tag_bytes)


def new_nonce() -> bytes:
    return secrets.token_bytes(16)


__all__ = ["TAG_BYTES", "M", "PsiParty", "hash_ids", "new_nonce", "raise_to", "tags"]
