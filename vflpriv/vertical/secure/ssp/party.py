"""dp-bcfw-secure's ssp path: its protocol pieces, shared by the in-process run (``ssp/solve.py``)
and the roles over a runtime link (``ssp/roles.py``): the party (:class:`GramParty`), its
block's preparation, and the server's steps (:func:`release`, docs/sensitivity.md 4.10)."""
from __future__ import annotations

import math

import numpy as np

from ....errors import InputError
from ..mpc import messages as SM
from . import gram as G
from . import release as S
from ..base.blocks import prepare_block
from ..base.party import ProductParty
from ..local import LocalParties
from ..mpc.ring import Prg, encode
from ....noise.discrete import ring_noise
from ....runtime import views


class GramParty(ProductParty):
    """A data holder of the ssp path: it releases only what its own ledger charged (the one
    release, ``gram_event``): its masked block to the server once, its parts of the cross-blocks
    once (``gram.py``), and its part of M once."""

    def __init__(self, *args, gram_event=None, gram_sigma=0.0, **kwargs):
        super().__init__(*args, **kwargs)
        self.gram_event, self.gram_sigma = gram_event, float(gram_sigma)
        self._gram_owed = False
        self._gram_done = False
        self.kappa, self.rho = {}, {}          # block mask keys by party; pair keys by block
        self._rows_next, self._shares_done = 0, False
        self._q = None

    def charge_features(self, msg: SM.NewFeatures, t):
        if list(msg.holders) != [SM.GRAM_RELEASE]:
            raise InputError(f"party {self.k}: the ssp path releases its statistics once "
                             f"(holder code {SM.GRAM_RELEASE}); asked for {msg.holders}")
        if self._gram_done or self._gram_owed:
            raise InputError(f"party {self.k}: refused a second release of its statistics")
        if self.budget is not None:
            self.charge(self.gram_event, t, "secure: sufficient statistics")
        self._gram_owed = True

    def _open(self, what):
        if (self.budget is not None or self.gated) and not self._gram_owed:
            raise InputError(f"party {self.k}: refused to release {what}: its own ledger "
                             "charged no (further) release of the statistics")

    def _gate_release(self, i):
        raise InputError(f"party {self.k}: the ssp path serves no per-column product; its "
                         "block goes to the server once, masked (ssp/gram.py)")

    def _gate_help(self, l, i):
        raise InputError(f"party {self.k}: the ssp path helps no per-column product; its "
                         "block goes to the server once, masked (ssp/gram.py)")

    # -- the cross-blocks, each block opened once to the server (``gram.py``) ------------------
    def gram_keys(self, sizes, L):
        """``{peer: [GramKey]}``: its block mask key kappa_k to every other party and the pair
        keys it makes (it is the lower party of the pair), each made here from OS entropy."""
        import secrets

        from ..mpc.ring import KEY_BYTES

        if self.k in self.kappa:
            raise InputError(f"party {self.k}: refused to make its block keys again")
        K = len(sizes)
        mine = secrets.token_bytes(KEY_BYTES)
        self.kappa[self.k] = mine
        out = {q: [SM.GramKey(G.BLOCK_MASK, G.BLOCK_MASK, mine)] for q in range(K) if q != self.k}
        made = [mine]
        for k, l, other in G.pairs_made_by(self.k, K, L):
            key = secrets.token_bytes(KEY_BYTES)
            self.rho[(k, l, self.k, other)] = key
            out[other].append(SM.GramKey(k, l, key))
            made.append(key)
        views.made(self.k, made)
        return out

    def take_gram_key(self, src, msg: SM.GramKey, sizes, L):
        """Keep a key ``src`` made: its block mask key, or the pair key of a block whose
        contributors both are (and ``src`` the lower)."""
        K = len(sizes)
        if msg.k == G.BLOCK_MASK and msg.l == G.BLOCK_MASK:
            if src in self.kappa or src == self.k:
                raise InputError(f"party {self.k}: refused a second block mask key of party {src}")
            self.kappa[src] = msg.key
            return
        if not (0 <= msg.k < msg.l < K) or not (src < self.k) or \
                {src, self.k} - set(G.contributors(msg.k, msg.l, K, L)):
            raise InputError(f"party {self.k}: party {src} sent a pair key for block "
                             f"({msg.k}, {msg.l}), which it does not share with it")
        if (msg.k, msg.l, src, self.k) in self.rho:
            raise InputError(f"party {self.k}: refused a second pair key of party {src} for "
                             f"block ({msg.k}, {msg.l})")
        self.rho[(msg.k, msg.l, src, self.k)] = msg.key

    def _block_rows(self, s, e, L):
        """Rows [s, e) of B_k as CSR uint64 words (with y as the last column at the label
        party)."""
        import scipy.sparse as sp

        B = self.A_fx[s:e]
        if self.k == L:
            ycol = sp.csr_matrix(encode(self.y[s:e], self.f).reshape(-1, 1))
            B = sp.hstack([B, ycol], format="csr", dtype=np.uint64)
        return B

    def _mask_rows(self, q, s, e):
        """Rows [s, e) of V_q = PRG(kappa_q) (row-major, the stream entered at word s q_q)."""
        w = self._q[q]
        return Prg(self.kappa[q], s * w).uint64((e - s) * w).reshape(e - s, w)

    def gram_rows(self, start, stop, sizes, L):
        """Z_k = B_k + V_k, rows [start, stop), to the server (a ``MaskedBlock``); the rows in
        order, each once, while its ledger's charge of the release is open."""
        self._open("its masked block")
        self._gram_ready(sizes, L)
        if int(start) != self._rows_next or not start < stop <= self.n:
            raise InputError(f"party {self.k}: asked for rows [{start}, {stop}) of its masked "
                             f"block; it sends each row once, in order, from row "
                             f"{self._rows_next} of {self.n}")
        self._rows_next = int(stop)
        Z = self._block_rows(start, stop, L).toarray() + self._mask_rows(self.k, start, stop)
        if views.enabled():
            views.masked(Z, [views.mask_id(self.kappa[self.k], f"w{start * self._q[self.k]}")])
        return SM.MaskedBlock(int(start), Z)

    def _gram_ready(self, sizes, L):
        K = len(sizes)
        self._q = G.widths(sizes, L)
        missing = [q for q in range(K) if q not in self.kappa]
        if missing:
            raise InputError(f"party {self.k} holds no block mask key of party {missing[0]}")

    def gram_shares(self, sizes, L, rows=G.SHARE_ROWS):
        """Its parts of every cross-block it contributes to (``gram.py``), once, while its
        ledger's charge of the release is open: ``[GramShare]``."""
        self._open("its parts of the cross-blocks")
        if self._shares_done:
            raise InputError(f"party {self.k}: refused to send its parts of the cross-blocks "
                             "again")
        self._gram_ready(sizes, L)
        K, me, q = len(sizes), self.k, self._q
        mine = [(k, l) for k, l in G.cross_blocks(K) if me in G.contributors(k, l, K, L)]
        parts = {b: np.zeros((q[b[0]], q[b[1]]), dtype=np.uint64) for b in mine}
        if self.private and self.sigma > 0:       # the units it draws, in the products' order
            helpee, units = G.noise_units(me, sizes, L)
            for blk, (kind, idx) in units:
                v = ring_noise(self.rng, self.sigma, 2 * self.f, sizes[helpee])
                if kind == "col":
                    parts[blk][:sizes[helpee], idx] += v
                else:
                    parts[blk][idx, :sizes[helpee]] += v
        above = [l for l in range(me + 1, K)]
        below = [j for j in range(me)]
        from ....kernels.ring_matmul import ring_matmul, ring_spmatmul

        for s in range(0, self.n, rows):
            e = min(self.n, s + rows)
            B = self._block_rows(s, e, L)
            if above:                   # -Z_k^T V_l: k holds Z_k and every kappa_l
                Z = B.toarray() + self._mask_rows(me, s, e)
                for l in above:         # block by block, as the server: no stacked copy
                    parts[(me, l)] -= ring_matmul(Z.T, self._mask_rows(l, s, e))
            if below:                   # -V_j^T B_k, sparse B_k
                BT = B.T.tocsr()
                for j in below:
                    parts[(j, me)] -= ring_spmatmul(BT, self._mask_rows(j, s, e)).T
        out = []
        for blk in mine:
            part, signed = self._blind(parts[blk], blk, K, L)
            if views.enabled():          # one part of the sum the server is entitled to
                views.masked(part, signed, ("sum", "gram", int(blk[0]), int(blk[1])))
            out.append(SM.GramShare(int(blk[0]), int(blk[1]), part))
        self._shares_done = True
        return out

    def _blind(self, part, blk, K, L):
        """``(part + its pair masks, their signed ids)``: +PRG(rho) for every other contributor
        of ``blk`` above this party, -PRG(rho) for every one below (they cancel in the block's
        sum at the server, in no proper subset of it)."""
        me, signed = self.k, []
        for other in G.contributors(*blk, K, L):
            if other == me:
                continue
            lo, hi = min(me, other), max(me, other)
            key = self.rho.get((blk[0], blk[1], lo, hi))
            if key is None:
                raise InputError(f"party {me} holds no pair key with party {other} for block "
                                 f"{blk}")
            m = Prg(key).uint64(part.size).reshape(part.shape)
            if me < other:
                part += m
            else:
                part -= m
            signed.append(("+" if me < other else "-") + views.mask_id(key))
        return part, signed

    def gram_part(self, sizes, label_party):
        """This party's :class:`~.messages.GramPart` (once, after its ledger charged it): its
        own block's noisy triangle and column sums, and at the label party A_L^T y and the label
        sum (the cross-blocks, A_k^T y of the others included, the server computes:
        ``gram.py``)."""
        self._open("its statistics")
        if self._gram_done:
            raise InputError(f"party {self.k}: refused to send its statistics again")
        sig = self.gram_sigma if self.private else 0.0
        tri, sums = S.own_block(self.A_csc, sig, self.rng)
        ty = ysum = None
        if self.k == int(label_party):
            if self.y is None:
                raise InputError(f"party {self.k} is the label party but holds no label")
            off = sig / math.sqrt(2.0)
            ty = np.asarray(self.AT @ self.y).ravel()
            ysum = float(np.sum(self.y))
            if sig > 0:
                ty = ty + self.rng.normal(0.0, off, ty.shape[0])
                ysum += float(self.rng.normal(0.0, off))
        self._gram_owed, self._gram_done = False, True
        return SM.GramPart(S.pack_part(tri, sums, ty, ysum))


def make_parties(blocks, frac, private, sigma, event, seeds):
    """The :class:`GramParty` of every prepared block (``protocol.prepare_block`` of the scaled
    data), each with its own noise stream: ring noise sigma / sqrt 2 on its products (every
    cross entry is off the diagonal), sigma on its own diagonal."""
    return [GramParty(k, None, None, frac=frac, private=private,
                      sigma=sigma / math.sqrt(2.0), noise_seed=seeds[k], prepared=b,
                      gram_event=event, gram_sigma=sigma) for k, b in enumerate(blocks)]


def prepare(A_k, y, s, k, frac, private, feature_bound, label_bound, clip):
    """Party k's block scaled by the public factor ``s`` and prepared (``protocol.
    prepare_block``): ``feature_bound`` B_a s and ``clip`` C_k s are the scaled ones (None when
    not private).  The same function in process and in a party role (:mod:`.ssp_remote`), so
    that both give the same words."""
    if private:
        # in the user's units: the warning names --feature-bound as given, not B_a s
        from ...clipshare import warn_if_clipped

        warn_if_clipped(k, A_k, y, feature_bound / s, label_bound)
    return prepare_block(A_k * s, y, frac=frac, private=private, feature_bound=feature_bound,
                         label_bound=label_bound, row_clip=clip, k=k, warn=False)


def public_bounds(plan, private, K):
    """``(B_a s, B_y, [C_k s])`` of the prepared blocks (``(None, None, None)`` when not
    private: nothing is clipped)."""
    if not private:
        return None, None, None
    Ba_s = plan.Ba * plan.s
    clips = None if plan.clips is None else [plan.clips[k] * plan.s for k in range(K)]
    return Ba_s, plan.By, clips


class LocalGram(LocalParties):
    """The ssp release's steps with the parties as :class:`GramParty` objects in this process,
    every message framed and metered by the in-process link (:class:`~..local.LocalParties`:
    setup, charge, close): keys party to party, masked blocks and parts party to server."""

    def __init__(self, parties, sizes, L):
        super().__init__(parties)
        self.sizes, self.L = list(sizes), int(L)

    def gram_keys(self):
        made = {p.k: p.gram_keys(self.sizes, self.L) for p in self.parties}
        for src in sorted(made):
            for dst, msgs in sorted(made[src].items()):
                for m in msgs:
                    got = self.net.peer(src, [dst], m, 0)[0]
                    self.parties[dst].take_gram_key(src, got, self.sizes, self.L)

    def gram_rows(self, start, stop):
        return [self.net.up(p.k, p.gram_rows(start, stop, self.sizes, self.L), 0)
                for p in self.parties]

    def gram_shares(self):
        return [[self.net.up(p.k, m, 0) for m in p.gram_shares(self.sizes, self.L)]
                for p in self.parties]

    def gram_parts(self):
        return [self.net.up(p.k, p.gram_part(self.sizes, self.L), 0) for p in self.parties]


def release(link, sizes, L, n, frac, budget, event, rows):
    """The release through ``link`` (in process a :class:`LocalGram`, over a runtime link
    ``roles.LinkSspParties``): setup, the parties' keys, the charge, the masked blocks in pieces
    of ``rows`` rows (the server adds their cross products as they come), the parts of the
    cross-blocks, every party's GramPart.  Returns the noisy M (scaled units)."""
    from ..mpc.ring import decode

    K = len(sizes)
    # no dealer: the parties make their own masks (gram.py); the setup's matrix-mask key is unused
    link.setup({k: SM.SecureSetup(frac, max(sizes), K, n, bytes(16)) for k in range(K)})
    link.gram_keys()
    if budget is not None:                 # (an audit drives the parties without a filter)
        budget.charge(event, party=",".join(map(str, range(K))), round=0,
                      note="secure: sufficient statistics")
    link.new_features([SM.GRAM_RELEASE], 0)
    q = G.widths(sizes, L)
    acc = {(k, l): np.zeros((q[k], q[l]), dtype=np.uint64) for k, l in G.cross_blocks(K)}
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        pieces = link.gram_rows(start, stop)
        for k, m in enumerate(pieces):
            if not isinstance(m, SM.MaskedBlock) or m.row != start or \
                    m.block.shape != (stop - start, q[k]):
                raise InputError(f"party {k} did not send rows [{start}, {stop}) of its "
                                 f"{q[k]}-column masked block")
        G.server_block_sums([m.block for m in pieces], acc, K)
    got = set()
    for k, shares in enumerate(link.gram_shares()):
        want = {b for b in G.cross_blocks(K) if k in G.contributors(*b, K, L)}
        for m in shares:
            b = (m.k, m.l)
            if not isinstance(m, SM.GramShare) or b not in want or (k, b) in got or \
                    m.share.shape != acc[b].shape:
                raise InputError(f"party {k} sent a part of the cross-blocks it does not owe")
            got.add((k, b))
            acc[b] += m.share
        if len({b for kk, b in got if kk == k}) != len(want):
            raise InputError(f"party {k} did not send its parts of every cross-block")
    cross = {b: decode(v, 2 * frac) for b, v in acc.items()}
    parts = link.gram_parts()
    if len(parts) != K or not all(isinstance(m, SM.GramPart) for m in parts):
        raise InputError(f"expected a GramPart from each of the {K} parties")
    split = [S.split_part(k, sizes, m.words, L) for k, m in enumerate(parts)]
    return S.assemble(_local_blocks(sizes), S.with_cross(split, cross, sizes, L), n)


def piece_rows(sizes, L, frame_bytes=None):
    """Rows per masked-block piece: each party's piece at most about ``frame_bytes`` (default
    the offline phase's ``OFFLINE_FRAME_BYTES``), the same in process and over a link."""
    from ..base.roles import OFFLINE_FRAME_BYTES

    fb = OFFLINE_FRAME_BYTES if frame_bytes is None else int(frame_bytes)
    return max(1, fb // (8 * max(G.widths(sizes, L))))


def _local_blocks(sizes):
    """The coordinates of M party by party (the parties' own column order)."""
    ends = np.cumsum([0] + list(sizes))
    return [np.arange(ends[k], ends[k + 1]) for k in range(len(sizes))]


def fit_model(M, sizes, fit):
    """``(x in scaled units, b, solver iterations)``: the fit from the released M, and for the
    logistic loss its margins calibrated (``release.calibrate_margins``); the same in process
    and in the server role."""
    blocks = _local_blocks(sizes)
    x_s, b, iters = S.fit(M, blocks, lam=fit["lam"], radius=fit["radius"],
                          b_bound=fit["b_bound"], labels_scale=fit["labels_scale"])
    if fit["margins"]:
        x_s, b, _ = S.calibrate_margins(M, x_s, b, lam=fit["lam"], blocks=blocks,
                                        radius=fit["radius"], intercept=fit["b_bound"] > 0)
    return x_s, b, iters


def model(x_s, b, s, blocks, d, fit_intercept):
    """``(x, b)``: the fit's x (scaled units, the parties' local column order, block by block)
    as the model on the data (times s, in the data's global order), b a float (None when not
    fitted).  The server role returns the same (``ssp_remote.serve``)."""
    x_local = s * x_s
    x = np.zeros(int(d))
    pos = 0
    for blk in blocks:
        x[np.asarray(blk, dtype=np.intp)] = x_local[pos:pos + len(blk)]
        pos += len(blk)
    return x, (float(b) if fit_intercept else None)
