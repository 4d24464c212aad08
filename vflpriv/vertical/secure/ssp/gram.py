"""The ssp release's cross-blocks, computed by the server from masked blocks (issue 55;
docs/sensitivity.md 4.10.2).

Party k's block B_k is its prepared fixed-point block A_k (n x p_k), and at the label party L
also the label column y: B_L = [A_L, y] (q_k = p_k + [k = L] columns).  Every entry of M that
joins two parties lies in a cross-block B_k^T B_l, k < l: A_k^T A_l, A_k^T y (k < L in
B_k^T B_L, its last column; k > L in B_L^T B_k, its last row).

Each party opens its block once, to the server:

    keys     party k makes its block mask key kappa_k and sends it to every other party (end
             to end); for every cross-block (k, l) and every pair of its contributors
             S(k, l) = {k, l, h(k)} (+ h(l) when k = L), the lower party of the pair makes a
             pair key rho and sends it to the other
    upload   party k -> server: Z_k = B_k + V_k, V_k = PRG(kappa_k) (n x q_k, row-major), in
             row pieces; the server adds Z_k^T Z_l over the pieces for every k < l
    parts    for each cross-block (k, l), each contributor c -> server:
                 k:    -Z_k^T V_l              (dense: k holds Z_k and kappa_l)
                 l:    -V_k^T B_l              (sparse B_l: l holds kappa_k)
                 h:    the ring noise of the units it draws (below)
             each plus +PRG(rho) for every pair (c, c') with c < c' and -PRG(rho) with c > c'
    server   Z_k^T Z_l + sum of the parts = B_k^T B_l + V_k^T B_l + B_k^T V_l + V_k^T V_l
                                           - (B_k + V_k)^T V_l - V_k^T B_l + N = B_k^T B_l + N

The noise is the one the per-column Beaver products drew (``mpc/beaver.py``), drawn by the same
party in the same order: block k's helper h(k) = (k + 1) mod K draws, for its helpee k, one
exact discrete Gaussian vector of p_k entries per *unit*, first the label unit A_k^T y (k != L)
and then the units A_k^T a_{l,i} for l > k and i < p_l in order.  So a seeded run releases the
same M, word for word, as the protocol before (``tests/test_secure_gram.py``).

Bytes: 8 n sum_k q_k for the uploads (each block opened once), 8 q_k q_l per contributor and
cross-block for the parts, 22 per key; nothing of size n travels between parties.  Compute:
the server's Z_k^T Z_l and k's Z_k^T V_l are dense ring products (``kernels.ring_matmul``: BLAS
limbs), l's V_k^T B_l is sparse.
"""
from __future__ import annotations

import numpy as np

from ..mpc.beaver import block_helper

#: rows per step of a party's parts (its V pieces: rows x sum_l q_l words in memory at once)
SHARE_ROWS = 4096

#: GramKey code of a block mask key (the sender's kappa); any other (k, l) names a cross-block
#: whose parts the pair key blinds
BLOCK_MASK = 0xFFFF


def widths(sizes, L):
    """q_k: party k's columns in the release's blocks (its features, and y at the label party)."""
    return [int(p) + (1 if k == int(L) else 0) for k, p in enumerate(sizes)]


def cross_blocks(K):
    """Every cross-block (k, l), k < l, in the order the server assembles them."""
    return [(k, l) for k in range(int(K)) for l in range(k + 1, int(K))]


def contributors(k, l, K, L):
    """S(k, l): the parties whose parts the server adds for block (k, l): k, l, the drawer of the
    A_k rows' noise h(k), and when k = L the drawer of the y row's, h(l)."""
    s = {int(k), int(l), block_helper(k, K)}
    if int(k) == int(L):
        s.add(block_helper(l, K))
    return sorted(s)


def pairs_made_by(me, K, L):
    """``[(k, l, other)]``: the pair keys party ``me`` makes (it is the lower of the pair) and
    sends to ``other``."""
    out = []
    for k, l in cross_blocks(K):
        S = contributors(k, l, K, L)
        if me in S:
            out += [(k, l, o) for o in S if o > me]
    return out


def noise_units(h, sizes, L):
    """The units party ``h`` draws noise for, in the order the per-column products drew them:
    ``[(block, where)]`` with block = (k, l), where = ("col", i) (rows 0..p_k-1 of column i)
    or ("row", r) (row r, columns 0..p_k-1); each unit is one draw of p_k entries for the helpee
    k = h - 1 (mod K)."""
    K = len(sizes)
    k = (int(h) - 1) % K
    L = int(L)
    units = []
    if k != L:                                # the label unit A_k^T y first
        if k < L:
            units.append(((k, L), ("col", sizes[L])))
        else:
            units.append(((L, k), ("row", sizes[L])))
    for l in range(k + 1, K):
        units += [((k, l), ("col", i)) for i in range(sizes[l])]
    return k, units


def server_block_sums(Z, acc, K):
    """Add one row piece's Z_k^T Z_l (k < l) to ``acc`` ({(k, l): uint64 q_k x q_l}); ``Z``:
    the K pieces of the same rows (uint64 rows x q_k)."""
    from ....kernels.ring_matmul import ring_matmul

    for k in range(K - 1):
        for l in range(k + 1, K):
            acc[(k, l)] += ring_matmul(Z[k].T, Z[l])
