"""The secure cross-product A_k^T a_j (party k holds the n x p_k block A_k, party l the column
a_j), by a Beaver matrix-vector triple dealt by the server (Beaver 1991; the matrix form with a
reused matrix mask as in SecureML, Mohassel & Zhang 2017, Section 4.2).  All values are fixed
point in Z_{2^64} (``ring.py``).

Offline (once per party k): the dealer gives k a key for U_k (n x p_k, uniform, AES-CTR stream);
k sends E_k = A_k - U_k to the other parties.  E_k is a one-time pad of A_k (U_k is known to k and
the dealer only), so it can be sent to every other party once and reused for every product.

Online, for a feature j of party l and each other party k (one vector mask v per feature):

    dealer:  v uniform (key to l), W_k = U_k^T v, w_k uniform (key to k), w_lk = W_k - w_k (to l)
    l -> k:  z = a_j + v                                  (uniform to k: v is unknown to it)
    k:       s_k = A_k^T z - w_k
    l:       s_lk = -E_k^T v - w_lk + round(N_k 2^{2f}),  N_k ~ N(0, sigma^2 I)   -> k
    k:       s_k + s_lk = A_k^T (a_j + v) - (E_k + U_k)^T v + N_k = A_k^T a_j + N_k

Costs: the dealer's U_k^T v and l's E_k^T v are each one dense n x p_k product over the ring; k's
A_k^T z is sparse.  Bytes: 8 n p_k once per (k, other party) for E_k, then per product 8 n (z,
shared by the K - 1 peers), 8 p_k (l's share), 8 p_k (the dealer's share to l), and three 16-byte
keys (v and w_k are sent as PRG keys, the standard compression of dealer randomness).
"""
from __future__ import annotations

import numpy as np

from .ring import Prg


def masked_block_chunks(A_fx, mask_key, chunk_rows, start=0, stop=None):
    """Yield (row offset, E chunk) with E = A_fx - U (mod 2^64); U from ``mask_key``, row-major,
    in the order the dealer regenerates it.  ``start``/``stop``: only rows [start, stop), the
    stream entered at word ``start * p`` (the same words as the whole block's rows there)."""
    n, p = A_fx.shape
    stop = n if stop is None else min(n, int(stop))
    prg = Prg(mask_key, int(start) * p)
    for s in range(int(start), stop, chunk_rows):
        e = min(stop, s + chunk_rows)
        U = prg.uint64((e - s) * p).reshape(e - s, p)
        dense = A_fx[s:e].toarray()
        yield s, dense - U


def _vec_mat(v, M):
    """v^T M mod 2^64 (uint64 wraps).  ``einsum`` instead of ``@``: numpy's integer matmul is a
    naive loop, einsum's is vectorized (about 4x faster here); the sum is exact in the ring, so
    any order gives the same words."""
    return np.einsum("i,ij->j", v, M)


def masked_product(chunks, v):
    """E^T v over the ring, from E's row chunks: sum over chunks of v[rows]^T E[rows] (mod 2^64),
    the same words in any chunking (``chunks``: a list of pairs or a ``store.SpilledBlocks``)."""
    acc = None
    for s, E in chunks:
        part = _vec_mat(v[s:s + E.shape[0]], E)
        acc = part if acc is None else acc + part
    return acc


def holder_shares(chunks, v, w_share):
    """Party l's share of A_k^T a_j: -E_k^T v - w_lk."""
    return np.uint64(0) - masked_product(chunks, v) - w_share


def peer_output(A_fx_T, z, w_key, holder_share):
    """Party k: s_k = A_k^T z - w_k, plus l's (noised) share = A_k^T a_j (+ noise), in the ring."""
    s_k = np.asarray(A_fx_T @ z, dtype=np.uint64).ravel()
    s_k = s_k - Prg(w_key).uint64(s_k.shape[0])
    return s_k + holder_share


class Dealer:
    """The server's dealer role: matrix-mask keys, and one triple per (feature, other party).
    It sees keys and masks only, never data or shares of data."""

    def __init__(self, keys, block_sizes, n, chunk_rows):
        self.keys, self.sizes, self.n, self.chunk = keys, list(block_sizes), int(n), int(chunk_rows)
        self.mask_keys = [keys.key(f"matrix-mask-{k}") for k in range(len(self.sizes))]

    def mask_product(self, k, v):
        """U_k^T v, regenerating U_k from its key chunk by chunk (no n x p_k array kept)."""
        prg = Prg(self.mask_keys[k])
        p = self.sizes[k]
        acc = np.zeros(p, dtype=np.uint64)
        for s in range(0, self.n, self.chunk):
            e = min(self.n, s + self.chunk)
            acc += _vec_mat(v[s:e], prg.uint64((e - s) * p).reshape(e - s, p))
        return acc

    def triples(self, holder, index, peers):
        """({k: TripleToHolder}, {k: TripleToPeer}) for the feature ``index`` of ``holder``."""
        from .messages import TripleToHolder, TripleToPeer

        v_key = self.keys.key(f"vector-mask-{holder}-{index}")
        v = Prg(v_key).uint64(self.n)
        to_holder, to_peer = {}, {}
        for k in peers:
            W = self.mask_product(k, v)
            w_key = self.keys.key(f"share-{holder}-{index}-{k}")
            w_k = Prg(w_key).uint64(self.sizes[k])
            to_holder[k] = TripleToHolder(k, int(index), v_key, W - w_k)
            to_peer[k] = TripleToPeer(holder, w_key)
        return to_holder, to_peer
