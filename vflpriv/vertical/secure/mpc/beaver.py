"""The secure cross-product A_k^T a_j (party k holds the n x p_k block A_k, party l the column
a_j), by a Beaver matrix-vector triple dealt by the server (Beaver 1991; the matrix form with a
reused matrix mask as in SecureML, Mohassel & Zhang 2017, Section 4.2).  All values are fixed
point in Z_{2^64} (``mpc/ring.py``).

Offline (once per party k): the dealer gives k a key for U_k (n x p_k, uniform, AES-CTR stream);
k sends E_k = A_k - U_k to ONE party, its block's helper h(k) = (k + 1) mod K
(:func:`block_helper`).  E_k is a one-time pad of A_k (U_k is known to k and the dealer only), so
it can be sent once and reused for every product with k's block, whoever holds the column.

Online, for a feature j of party l and each other party k (ONE VECTOR MASK v_k PER PEER k;
h = h(k)):

    dealer:  v_k uniform (key to l and to h), W_k = U_k^T v_k, w_k uniform (key to k),
             W_k - w_k (to h)
    l -> k:  z_k = a_j + v_k                              (uniform to k: v_k is unknown to it)
    h -> k:  s_h = -E_k^T v_k - (W_k - w_k) + round(N_k 2^{2f}),  N_k ~ N_Z(0, sigma^2 I),
             drawn by h from its own generator, once its own ledger charged the release
    k:       A_k^T z_k - w_k + s_h = A_k^T (a_j + v_k) - (E_k + U_k)^T v_k + N_k
                                   = A_k^T a_j + N_k

Every party l is the helper of the block l - 1 (mod K), so the holder of a column gets the key
of v_{l-1} with its triple for that block (``TripleToHolder``) and the keys of the other peers'
masks alone (``VectorKey``); for the K - 2 other blocks (K > 2) the dealer sends the key of v_k
and W_k - w_k to their helpers (``TripleToHelper``).  At K = 2 the helper of k's block is the
holder l itself: the protocol is the holder-adds-the-noise one.

Why one mask per peer.  The helper h(k) of a block is, for K >= 3, usually itself a peer of the
same product (it holds a block too).  With one v shared by every peer (the protocol before
2026-11-29), h(k) received z = a_j + v as a peer and the key of v as k's helper, and read a_j:
the label at the label party's release, every column of a lower party in the ssp path.  With
v_k per peer, the party h(k) = k + 1 receives z_{k+1} = a_j + v_{k+1}, whose key goes to l and
to h(k + 1) = k + 2 only, never to k + 1 (docs/sensitivity.md 4.5 proves each view; the view
tests check every value every party receives, tests/test_secure_views.py).

Who sees what (semi-honest; the dealer does not collude with a party): k sees z_k (uniform) and
a share that, with its w_k, gives A_k^T a_j + N_k only; h(k) sees E_k (a one-time pad), v_k
and W_k - w_k (uniform: w_k is k's); l sees the keys of every v_k.  Coalitions that break it:
{dealer, any party}; {k, h(k)} (h(k) draws k's noise and holds v_k, so together they learn
A_k^T a_j without noise and, from z_k, a_j itself).  At K = 3 every pair of parties is such a
pair for some block: "no party colludes with its block's helper" means "no two parties
collude" there.

Costs: the dealer's U_k^T v_k and h(k)'s E_k^T v_k are each one dense n x p_k product over the
ring; k's A_k^T z_k is sparse.  Bytes: 8 n p_k once per k (E_k to h(k) only: K blocks in all,
not K (K - 1)), then per product 8 n (z_k, one per peer), 8 p_k (h(k)'s share to k), 8 p_k (the
dealer's share to h(k)), and three 16-byte keys (v_k and w_k are sent as PRG keys, the standard
compression of dealer randomness).
"""
from __future__ import annotations

import numpy as np

from ....runtime import views
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
        E = dense - U
        if views.enabled():
            views.masked(E, [views.mask_id(mask_key)])
        yield s, E


def _vec_mat(v, M):
    """v^T M mod 2^64, by ``vflpriv.kernels.ring_matmul.ring_vecmat``: uint64 einsum, not
    numpy's integer matmul (a naive loop, about 10x slower here); a vector product reads each
    word of M once, so it is bound by memory and float64 BLAS limbs do not pay (docs/kernels.md,
    "Ring products").  The sum is exact in the ring, so any order gives the same words."""
    from vflpriv.kernels.ring_matmul import ring_vecmat

    return ring_vecmat(v, M)


def masked_product(chunks, v):
    """E^T v over the ring, from E's row chunks: sum over chunks of v[rows]^T E[rows] (mod 2^64),
    the same words in any chunking (``chunks``: a list of pairs or a ``store.SpilledBlocks``)."""
    acc = None
    for s, E in chunks:
        part = _vec_mat(v[s:s + E.shape[0]], E)
        acc = part if acc is None else acc + part
    return acc


def block_helper(k, K):
    """h(k): the one party that receives party k's masked block E_k and computes, for every
    product A_k^T a_j, the share -E_k^T v - (W_k - w_k) and k's noise (module docstring)."""
    return (int(k) + 1) % int(K)


def holder_shares(chunks, v, w_share):
    """The helper h(k)'s share of A_k^T a_j: -E_k^T v - (W_k - w_k)."""
    return np.uint64(0) - masked_product(chunks, v) - w_share


def peer_output(A_fx_T, z, w_key, holder_share):
    """Party k: s_k = A_k^T z - w_k, plus h(k)'s (noised) share = A_k^T a_j (+ noise), in the
    ring."""
    from vflpriv.kernels.ring_matmul import ring_spmatmul

    # scipy's O(nnz) loop in uint64, both operands checked to be words (no float64 promotion)
    s_k = ring_spmatmul(A_fx_T, z).ravel()
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

    def _triple(self, holder, index, k, v):
        """(key of w_k, W_k - w_k) for the product of ``holder``'s feature ``index`` with k's
        block."""
        W = self.mask_product(k, v)
        w_key = self.keys.key(f"share-{holder}-{index}-{k}")
        share = W - Prg(w_key).uint64(self.sizes[k])
        if views.enabled():
            views.masked(share, [views.mask_id(w_key)])
        return w_key, share

    def triples(self, holder, index, peers):
        """({k: TripleToHolder}, {k: TripleToPeer}) for the feature ``index`` of ``holder``,
        every share to the holder (the logistic path, ``glm/party.py``, whose holders hold the
        peers' masked blocks; and the least-squares path at K = 2, where the holder is
        every peer's helper)."""
        from .messages import TripleToHolder, TripleToPeer

        v_key = self.keys.key(f"vector-mask-{holder}-{index}")
        v = Prg(v_key).uint64(self.n)
        to_holder, to_peer = {}, {}
        for k in peers:
            w_key, share = self._triple(holder, index, k, v)
            to_holder[k] = TripleToHolder(k, int(index), v_key, share)
            to_peer[k] = TripleToPeer(holder, w_key)
        return to_holder, to_peer

    def routed_triples(self, holder, index, peers):
        """The least-squares and ssp paths' triples for the feature ``index`` of ``holder``,
        one vector mask v_k per peer k (module docstring): ``({k: TripleToHolder or
        VectorKey}, {k: TripleToHelper}, {k: TripleToPeer})``.  The first, to the holder, holds
        every peer's mask key: with the share for the block whose helper is the holder itself
        (always exactly one: the holder helps block holder - 1), the key alone for the others;
        the second goes to h(k) for those others."""
        from .messages import TripleToHelper, TripleToHolder, TripleToPeer, VectorKey

        K = len(self.sizes)
        to_holder, to_helper, to_peer = {}, {}, {}
        for k in peers:
            v_key = self.keys.key(f"vector-mask-{holder}-{index}-{k}")
            v = Prg(v_key).uint64(self.n)
            w_key, share = self._triple(holder, index, k, v)
            if block_helper(k, K) == int(holder):
                to_holder[k] = TripleToHolder(k, int(index), v_key, share)
            else:
                to_holder[k] = VectorKey(k, int(index), v_key)
                to_helper[k] = TripleToHelper(int(holder), k, int(index), v_key, share)
            to_peer[k] = TripleToPeer(holder, w_key)
        return to_holder, to_helper, to_peer
