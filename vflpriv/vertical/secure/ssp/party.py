"""dp-bcfw-secure's ssp path: its protocol pieces, shared by the in-process run (``ssp/solve.py``)
and the roles over a runtime link (``ssp/roles.py``): the party (:class:`GramParty`), its
block's preparation, and the server's steps (:func:`release`, docs/sensitivity.md 4.10)."""
from __future__ import annotations

import math

import numpy as np

from ....errors import InputError
from ..mpc import messages as SM
from . import release as S
from ..base.blocks import prepare_block
from ..base.party import ProductParty


class GramParty(ProductParty):
    """A data holder of the ssp path: it releases only what its own ledger charged (the one
    release, ``gram_event``), each product once, and its part of M once."""

    def __init__(self, *args, gram_event=None, gram_sigma=0.0, **kwargs):
        super().__init__(*args, **kwargs)
        self.gram_event, self.gram_sigma = gram_event, float(gram_sigma)
        self._gram_owed = False
        self._gram_done = False
        self._served = set()

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
        what = "A_k^T y" if i == SM.LABEL_INDEX else f"feature {i}"
        self._open(what)
        if ("own", i) in self._served:
            raise InputError(f"party {self.k}: refused to release {what} again")
        self._served.add(("own", i))

    def _gate_help(self, l, i):
        what = "A_k^T y" if i == SM.LABEL_INDEX else f"feature {i}"
        self._open(f"party {l}'s {what}")
        if ("help", l, i) in self._served:
            raise InputError(f"party {self.k}: refused to help release party {l}'s {what} "
                             f"for party {self.helpee} again")
        self._served.add(("help", l, i))

    def helper_share(self, tr: SM.TripleToHelper):
        # each cross-block once: A_k^T A_l goes to the lower party k only
        if tr.index != SM.LABEL_INDEX and not tr.peer < tr.holder:
            raise InputError(f"party {self.k}: the ssp path releases party {tr.holder}'s "
                             f"columns to the parties below it only, not to party {tr.peer}")
        return super().helper_share(tr)

    def gram_part(self, sizes, label_party):
        """This party's :class:`~.messages.GramPart` (once, after its ledger charged it)."""
        self._open("its statistics")
        if self._gram_done:
            raise InputError(f"party {self.k}: refused to send its statistics again")
        sig = self.gram_sigma if self.private else 0.0
        tri, sums = S.own_block(self.A_csc, sig, self.rng)
        cross = []
        for l in range(self.k + 1, len(sizes)):
            missing = [i for i in range(sizes[l]) if (l, i) not in self.cross]
            if missing:
                raise InputError(f"party {self.k} holds no product with party {l}'s feature "
                                 f"{missing[0]}")
            cross.append(np.column_stack([self.cross[(l, i)] for i in range(sizes[l])]))
        off = sig / math.sqrt(2.0)
        if self.y is not None:
            ty = np.asarray(self.AT @ self.y).ravel()
            ysum = float(np.sum(self.y))
            if sig > 0:
                ty = ty + self.rng.normal(0.0, off, ty.shape[0])
                ysum += float(self.rng.normal(0.0, off))
        else:
            if self.ty is None:
                raise InputError(f"party {self.k} holds no label and was sent no A_k^T y")
            ty, ysum = self.ty, None
        self._gram_owed, self._gram_done = False, True
        return SM.GramPart(S.pack_part(tri, sums, cross, ty, ysum))


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


def release(link, sizes, L, n, frac, budget, event, chunk_rows, gram_parts):
    """Steps 1-4 of the module docstring through ``link`` (in process a ``LocalParties``, over
    a runtime link ``ssp_remote.LinkSspParties``); ``gram_parts()`` collects every party's
    GramPart.  Returns the noisy M (scaled units)."""
    from ..mpc.beaver import Dealer
    from ..mpc.ring import KeySource

    K = len(sizes)
    dealer = Dealer(KeySource(None), sizes, n, chunk_rows)
    link.setup({k: SM.SecureSetup(frac, max(sizes), K, n, dealer.mask_keys[k])
                for k in range(K)})
    link.offline()
    if budget is not None:                 # (an audit drives the parties without a filter)
        budget.charge(event, party=",".join(map(str, range(K))), round=0,
                      note="secure: sufficient statistics")
    link.new_features([SM.GRAM_RELEASE], 0)
    others = [k for k in range(K) if k != L]
    link.product(L, SM.LABEL_INDEX, *dealer.routed_triples(L, SM.LABEL_INDEX, others), 0)
    for l in range(1, K):
        for i in range(sizes[l]):
            link.product(l, i, *dealer.routed_triples(l, i, list(range(l))), 0)
    parts = gram_parts()
    if len(parts) != K or not all(isinstance(m, SM.GramPart) for m in parts):
        raise InputError(f"expected a GramPart from each of the {K} parties")
    return S.assemble(_local_blocks(sizes),
                      [S.split_part(k, sizes, m.words, L) for k, m in enumerate(parts)], n)


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
