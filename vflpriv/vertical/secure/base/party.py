"""The party's side of the secure products, as every path of dp-bcfw-secure uses it: the masked
block it sends to its helper (offline phase), the block it receives as a helper, and its three
roles in a product A_k^T a_j (docs/sensitivity.md 4.5): holder of the column a_j (one masked
vector per peer, each under its own mask), helper of block k (its share, with k's noise), and
peer k (its output).  What each party may serve is gated by what its own ledger charged: each
path says how (``_gate_release``, ``_gate_help``).
"""
from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from ....errors import InputError
from ....noise.discrete import ring_noise
from ....runtime import views
from ..mpc import messages as SM
from ..mpc.beaver import block_helper, holder_shares, masked_block_chunks, peer_output
from ..mpc.ring import Prg, decode, encode
from . import blocks
from .blocks import check_distinct_masks, prepare_block


class ProductParty(ABC):
    """One data holder in the secure products: its block (clipped when private), the labels,
    its noise generator, the masked block of the party whose helper it is (party k - 1 mod K:
    ``beaver.block_helper``) and the products released to it (``cross``, ``ty``).
    ``prepared``: the :class:`~.blocks.PreparedBlock` already made from ``A_k``/``y`` with
    these options (then ``A_k``/``y`` are not read)."""

    def __init__(self, k, A_k, y, *, frac, private, feature_bound=None, label_bound=None,
                 row_clip=None, sigma=0.0, noise_seed=None, prepared=None):
        self.k, self.f = k, int(frac)
        self.private = private
        b = prepared if prepared is not None else prepare_block(
            A_k, y, frac=frac, private=private, feature_bound=feature_bound,
            label_bound=label_bound, row_clip=row_clip, k=k)
        self.n, self.p = b.n, b.p
        self.A_fx, self.A_csc, self.AT, self.A_fx_T = b.A_fx, b.A_csc, b.AT, b.A_fx_T
        self.y = b.y
        self.ty = None                            # A_k^T y + noise, released once (no label)
        self.sigma = float(sigma)
        from ....noise import generator as noise_generator

        self.rng = noise_generator(noise_seed) if private else None
        self.cross = {}                           # (holder l, its local index) -> c_kj
        self.masked = {}                          # its helpee l -> list of (row, E_l chunk)
        self.feature_cap = None
        self.budget = None                        # the party's own BudgetFilter (private runs)
        self.chunk_rows = blocks.CHUNK_ROWS       # rows per MaskedBlock frame (read now: a
        #                                           test may have set it)
        #: a party whose own ledger governs what it serves even while this object holds no open
        #: filter (a party role opens its ledger only for the messages it charges)
        self.gated = False

    @property
    def A_csr(self):
        """The party's clipped fixed-point-exact block as CSR (made on demand, not kept)."""
        return self.A_csc.tocsr()

    # -- setup --------------------------------------------------------------------------------
    def setup(self, msg: SM.SecureSetup):
        self.mask_key, self.feature_cap, self.K = msg.mask_key, msg.feature_cap, msg.parties

    @property
    def helpee(self):
        """The party whose masked block this party receives, and whose products it helps:
        the k with h(k) = this party."""
        return (self.k - 1) % self.K

    @property
    def helper(self):
        """h(k) of this party's block: the one party its masked block goes to."""
        return block_helper(self.k, self.K)

    def masked_blocks(self, start=0, stop=None):
        """E_k = A_k - U_k (mod 2^64) in row chunks, U_k from the mask key (offline phase);
        ``start``/``stop``: rows [start, stop) only (the offline phase over a link, in pieces)."""
        return masked_block_chunks(self.A_fx, self.mask_key, self.chunk_rows, start, stop)

    def receive_block(self, sender, msg: SM.MaskedBlock, store=None):
        """Keep a chunk of ``sender``'s masked block: in memory, or in ``store`` (a
        ``store.SpilledBlocks`` that already holds the chunk; shared by the receivers of one
        frame in one process)."""
        if store is None:
            self.masked.setdefault(sender, []).append((msg.row, msg.block))
        else:
            self.masked[sender] = store

    def charge(self, event, t, note):
        """The party's own check: its ledger must accept ``event`` before it draws any noise
        (each party keeps every release of the run, since every one touches its people)."""
        if self.budget is not None:
            self.budget.charge(event, party=self.k, round=t, note=note)

    def _share(self, l, i, k, v, w_share, v_key=None):
        """h(k)'s share of A_k^T a_j for the holder l's feature i, with k's noise (exact
        discrete Gaussian at the product's scale, sensitivity.md 4.9) from this party's own
        generator: k never sees the reconstructed value without it."""
        if k not in self.masked:
            raise InputError(f"party {self.k} holds no masked block of party {k}")
        s = holder_shares(self.masked[k], v, w_share)
        if self.private and self.sigma > 0:
            s = s + ring_noise(self.rng, self.sigma, 2 * self.f, s.shape[0])
        if views.enabled():          # with z_k, the two parts of k's product (views.py)
            views.masked(s, [views.mask_id(v_key)], ("product", int(l), int(i), int(k)))
        return SM.ResultShare(l, i, s)

    # -- secure product, helper side (h(k) != l: the helper of k's block) ---------------------
    def helper_share(self, tr: SM.TripleToHelper):
        """h(k)'s ResultShare for k of the holder's feature: -E_k^T v_k - (W_k - w_k) + noise."""
        if tr.peer != self.helpee or tr.holder in (self.k, tr.peer) or tr.holder >= self.K:
            raise InputError(f"party {self.k} helps only party {self.helpee}'s block, for "
                             f"another party's column (asked: party {tr.peer}'s, for party "
                             f"{tr.holder}'s)")
        self._gate_help(tr.holder, tr.index)
        return self._share(tr.holder, tr.index, tr.peer, Prg(tr.v_key).uint64(self.n),
                           tr.share, tr.v_key)

    # -- secure product, holder side (party l holds the selected column a_j) ------------------
    def holder_messages(self, i, triples):
        """``triples``: {k: TripleToHolder or VectorKey}, one per peer k of the product
        (``Dealer.routed_triples``): the key of k's own vector mask v_k, and for the block this
        party helps (its helpee) the dealer's share.  Returns ({k: MaskedVector a_j + v_k},
        {k: ResultShare} for the helped block).  The noise for k is added to the helper's share
        (l never sees the reconstructed value)."""
        if not triples:
            raise InputError(f"party {self.k}: no triple came with the request for feature {i} "
                             "(the keys of its vector masks come with it)")
        check_distinct_masks(self.k, i, triples)
        if any(t.index != i for t in triples.values()):
            raise InputError(f"party {self.k}: a vector mask for another feature came with "
                             f"the request for feature {i}")
        self._gate_release(i)
        if i == SM.LABEL_INDEX:
            if self.y is None:
                raise InputError(f"party {self.k} holds no label to release")
            col = encode(self.y, self.f)
        else:
            col = np.zeros(self.n, dtype=np.uint64)
            a = self.A_csc[:, i]
            col[a.indices] = encode(a.data, self.f)
        zs, shares = {}, {}
        for k in sorted(triples):
            tr = triples[k]
            v = Prg(tr.v_key).uint64(self.n)
            zs[k] = SM.MaskedVector(self.k, i, col + v)
            if views.enabled():
                views.masked(zs[k].z, [views.mask_id(tr.v_key)], ("product", self.k, int(i), k))
            if isinstance(tr, SM.TripleToHolder):    # the block it helps (it holds E_k)
                shares[k] = self._share(self.k, i, k, v, tr.share, tr.v_key)
        return zs, shares

    # -- secure product, peer side (party k holds the block) ----------------------------------
    def peer_output(self, z: SM.MaskedVector, tr: SM.TripleToPeer, res: SM.ResultShare):
        if (res.holder, res.index) != (z.holder, z.index) or tr.holder != z.holder:
            raise InputError(f"party {self.k}: the masked vector, the dealer's triple and the "
                             "result share name different products")
        out = peer_output(self.A_fx_T, z.z, tr.w_key, res.share)
        if z.index == SM.LABEL_INDEX:
            self.ty = decode(out, 2 * self.f)
        else:
            self.cross[(z.holder, z.index)] = decode(out, 2 * self.f)


    @abstractmethod
    def _gate_release(self, i):
        """Whether this party may serve a holder request for its feature ``i`` (or the label):
        each path answers from what its own ledger charged; the server's word is not enough."""

    @abstractmethod
    def _gate_help(self, l, i):
        """Whether this party, as the helper of block k - 1, may serve the product of party l's
        feature ``i``: each path answers from what its own ledger charged."""
