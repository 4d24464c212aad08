"""dp-bcfw-secure for the logistic loss: DP Frank-Wolfe on the gradient A^T l'(Ax, y), computed
every round under additive secret sharing, with each party learning only noisy scores of its own
features -- centralized DP-FW without a curator (docs/vertical.md, docs/sensitivity.md section 5).

f(x) = (1/n) sum_r log(1 + exp(-y_r a_r^T x)), y in {-1, +1}, over the product of per-party l1
balls (radius eta); the label is held by ONE party L (``label_party``).  With y01 = (1 + y) / 2,
n grad_k f = A_k^T (sigma(A x) - y01), which needs every party's columns (the margin) and L's
labels.  One round t, every message framed, serialized and metered (``messages.py``):

1. Margins, freshly shared between L and a helper H = (L + 1) mod K: every other party k sends
   L the vector round(A_k x_k 2^f_m) - r_k and H the AES key of r_k.  Now s_L + s_H = round(A x
   2^f_m) (mod 2^64); x is public (the selections are), each A_k x_k local.
2. Derivative shares, by the Fourier series of ``mpc/fourier.py``: L and H compute the unit factors
   c_Lj = exp(i j w s_L / 2^f_m), c_Hj likewise (truncated to f_c bits, modulus <= 1), and the
   secure product Im(c_Lj c_Hj) = Re c_L Im c_H + Im c_L Re c_H with the dealer's masks (Beaver's
   triple for two private inputs: L sends its factors masked by r, H sends its factors masked
   by v, the dealer gives H the correction sum_j b_j (r . v) - w and L the key of w).  L adds
   1/2 - y01 to its share:  d_L + d_H = 1/2 + sum_j b_j Im(c_Lj c_Hj) - y01 = d, at scale
   S = 2^(2 f_c + h), with |d| <= D = 1/2 + sup|g| + (the factors' rounding) = 1.0315 whatever
   the shares (``mpc/fourier.py``; docs/sensitivity.md 5.1).
3. Scores: party k needs A_k^T d.  For k not in {L, H}, L hands k its share d_L (uniform to
   k); then A_k^T d = A_k^T d_own (local) + A_k^T d_other, the second by the Beaver matrix-vector
   product of ``mpc/beaver.py`` (the other share's holder masks it with v, the dealer's U_k^T v is
   shared), and the holder adds Gaussian noise N(0, sigma^2) to its result share, so k learns
   A_k^T d + N and nothing else.
4. k picks the FW vertex of its block from its noisy scores (argmax |g_i|, sign -sign g_i: a
   post-processing), replies ``Index``; the server moves x with gamma_t = 2 / (t + 2).

Privacy (docs/sensitivity.md section 5): replacing one person changes one row of every block
and one d_r; ||A_k^T d - A_k^T d'|| <= 2 C_k D (C_k the row clip of block k), for any value of
the shares, so a round's K releases are one Gaussian with sensitivity sqrt(sum_k (2 C_k D)^2),
T rounds compose (charged before any noise is drawn, by the server's filter and by each
party's own).  Nothing in the privacy argument depends on how well g approximates sigma.

What each party sees besides its noisy scores is uniformly masked (one-time pads over
Z_{2^64}); the threat model is the secure variant's (semi-honest, the server as dealer does not
collude with a party, parties do not collude with each other).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import scipy.sparse as sp

from ....errors import InputError
from ....noise import generator as noise_generator
from ....noise.discrete import ring_noise
from ...clipshare import warn_if_clipped
from ...sketch import signed_argmax
from ..mpc import messages as SM
from ....runtime import views
from ..mpc.beaver import holder_shares, masked_block_chunks, peer_output
from ..mpc.fourier import MIN_FACTOR_BITS, SigmoidSeries, unit_factors  # noqa: F401
from ..base.blocks import CHUNK_ROWS, clip_block
from ..mpc.ring import KeySource, Prg, decode, encode, noisy_range

#: fractional bits of the shared margins (their precision 2^-20 is far below what matters)
FRAC_MARGIN = 20
#: fractional bits of the feature values in the score products
FRAC_FEATURE = 12
#: the coarsest lattice a score A_k^T d can sit on (2^-(fa + 2 f_c + h) with f_c >= 6, h >= 0):
#: the distributed discrete Gaussian's bound is charged at it, valid for every finer ring plan
SCORE_LATTICE = 2.0 ** -(FRAC_FEATURE + 2 * MIN_FACTOR_BITS)


@dataclass(frozen=True)
class RingPlan:
    """Fixed-point scales of the GLM path: features at 2^fa, margins at 2^fm, unit factors at
    2^fc, coefficients at 2^h; a score A_k^T d is an integer at scale 2^(fa + 2 fc + h)."""
    fa: int
    fm: int
    fc: int
    h: int

    @property
    def score_bits(self):
        return self.fa + 2 * self.fc + self.h

    @property
    def d_bits(self):
        return 2 * self.fc + self.h


def ring_plan(n, feature_bound, sigma, series: SigmoidSeries) -> RingPlan:
    """The largest f_c <= 16 with n B_a D_s + 40 sigma (in score units) below 2^61 at scale
    2^(fa + 2 f_c + h), D_s = ``series.share_bound`` (|d| for any factors of modulus <= 1, above
    the privacy bound D); refused below 6 bits (the factors would be too coarse)."""
    mag = noisy_range(n * float(feature_bound) * series.share_bound, sigma)
    fc = int(math.floor((61 - math.log2(mag) - FRAC_FEATURE - series.coef_bits) / 2))
    fc = min(fc, 16)
    if fc < MIN_FACTOR_BITS:
        raise InputError(f"the scores can reach {mag:.3g}: too large for 64-bit fixed point with "
                         "6-bit unit factors; lower feature_bound or n")
    return RingPlan(FRAC_FEATURE, FRAC_MARGIN, fc, series.coef_bits)


def _u(a):
    return np.asarray(a).astype(np.int64, copy=False).view(np.uint64)


def prepare_glm_block(A_k, *, ring: RingPlan, private, feature_bound=None, row_clip=None,
                      k=None):
    """Party ``k``'s block as the GLM path reads it: clipped to its declared bounds (private
    runs), truncated to fixed point at 2^fa; ``(A_fx, A_fx^T as CSR, the decoded values as
    CSC)``.  Read-only once made: a host serving many messages for one party keeps it
    (``glm/roles.py``)."""
    if private:          # the labels are +-1 here: only the features can be clipped
        warn_if_clipped(k, A_k, None, feature_bound, None)
    A = clip_block(A_k, feature_bound, row_clip) if private else \
        sp.csr_matrix(A_k, dtype=np.float64, copy=True)
    A_fx = A.copy()
    A_fx.data = encode(A.data, ring.fa)
    A.data = decode(A_fx.data, ring.fa)       # the values the protocol really uses
    return A_fx, A_fx.T.tocsr(), A.tocsc()


class GlmParty:
    """One data holder of the GLM path: its clipped block, its own noise generator and keys,
    the labels if it is the label party, and the public iterate's own part A_k x_k."""

    def __init__(self, k, A_k, y, eta, *, ring: RingPlan, series: SigmoidSeries, private,
                 feature_bound=None, row_clip=None, sigma=0.0, noise_seed=None,
                 fit_intercept=False, prepared=None, step="fw", lr=None):
        self.k, self.eta, self.ring, self.series = k, float(eta), ring, series
        #: how the party moves on its noisy scores: "fw" (a Frank-Wolfe vertex, the server
        #: moves the public iterate) or "pgd" (its own projected-gradient step of size ``lr``)
        self.step, self.lr = step, (None if lr is None else float(lr))
        # the intercept b lives at the label party only (None elsewhere, or when not fitted)
        self.b = 0.0 if (fit_intercept and y is not None) else None
        self._g_b = None
        self._allowed = set()          # the releases this round's own charge covers (_gate)
        #: a party whose own ledger governs its releases even while this object holds no open
        #: filter (a party role opens its ledger only for the messages it charges: remote)
        self.gated = False
        self.private = private
        blk = prepared if prepared is not None else prepare_glm_block(
            A_k, ring=ring, private=private, feature_bound=feature_bound, row_clip=row_clip, k=k)
        self.A_fx, self.A_fx_T, self.A_csc = blk
        self.n, self.p = self.A_fx.shape
        # y in {-1, +1} -> y01 in {0, 1}; None for every party but the label party
        self.y01 = None if y is None else (np.asarray(y, dtype=np.float64) > 0).astype(np.int64)
        self.sigma = float(sigma)
        self.rng = noise_generator(noise_seed) if private else None
        self.keys = KeySource(None)              # margin masks: OS entropy, never a seed
        self.x = np.zeros(self.p)
        self.u = np.zeros(self.n)
        self.masked = {}
        self.budget = None
        self.round_event = None

    # -- offline: masked blocks (E_k = A_k - U_k) for the score products ---------------------
    def setup(self, msg: SM.SecureSetup):
        self.mask_key = msg.mask_key

    def masked_blocks(self, start=0, stop=None):
        """E_k in row chunks; ``start``/``stop``: rows [start, stop) only (over a link, the
        offline phase comes in pieces)."""
        return masked_block_chunks(self.A_fx, self.mask_key, CHUNK_ROWS, start, stop)

    def receive_block(self, sender, msg: SM.MaskedBlock):
        self.masked.setdefault(sender, []).append((msg.row, msg.block))

    # -- the public iterate ---------------------------------------------------------------------
    def apply(self, msg: SM.Selections, gamma):
        if self.step == "pgd":          # the party moved itself in its last select
            return
        self.x *= 1.0 - gamma
        self.u *= 1.0 - gamma
        s = msg.signed[self.k]
        i, sign = abs(s) - 1, (1 if s > 0 else -1)
        step = gamma * self.eta * sign
        self.x[i] += step
        lo, hi = self.A_csc.indptr[i], self.A_csc.indptr[i + 1]
        self.u[self.A_csc.indices[lo:hi]] += step * self.A_csc.data[lo:hi]

    def charge(self, t):
        if self.budget is not None:
            self.budget.charge(self.round_event, party=self.k, round=t,
                               note="secure glm: noisy scores")
            self._allowed = {"scores", "intercept"}   # what the round's charge covers, once

    def _gate(self, what):
        """A private party adds noise (as the holder of a derivative share) only for what its
        own ledger charged this round, once each (issue 32)."""
        if self.budget is None and not self.gated:
            return
        if what not in self._allowed:
            raise InputError(f"party {self.k}: refused to release noisy {what}: its own ledger "
                             "has charged no (further) round for it")
        self._allowed.discard(what)

    # -- step 1: margins ------------------------------------------------------------------------
    def own_margin(self):
        """round(A_k x_k 2^f_m); the label party adds its intercept b to its own part."""
        return encode(self.u if self.b is None else self.u + self.b, self.ring.fm)

    def margin_messages(self):
        """(to L, to H) for a party outside {L, H}."""
        key = self.keys.key("margin")
        r = Prg(key).uint64(self.n)
        share = self.own_margin() - r
        if views.enabled():
            views.masked(share, [views.mask_id(key)])
        return SM.MarginShare(share), SM.MarginKey(key)

    # -- step 2: derivative shares --------------------------------------------------------------
    def factors(self, share):
        cr, ci = unit_factors(share, self.ring.fm, self.series, self.ring.fc)
        return _u(cr), _u(ci)

    def label_side(self, share, triple: SM.FactorTriple):
        """L: masked factors for H; keeps what it needs for its derivative share."""
        J, n = self.series.terms, self.n
        prg = Prg(triple.key)
        r = prg.uint64(2 * J * n).reshape(2 * J, n)
        w = prg.uint64(n)
        cr, ci = self.factors(share)
        self._pending = (r, w)
        words = np.concatenate([cr, ci]) + r
        if views.enabled():            # r and w are two parts of one key's stream
            views.masked(words, [views.mask_id(triple.key, "r")])
        return SM.MaskedFactors(J, words)

    def label_share(self, theirs: SM.MaskedFactors):
        """d_L = -sum_j b_j (r_j . (ci_H + v_j) + r'_j . (cr_H + v'_j)) + w + S/2 - S y01."""
        J = self.series.terms
        r, w = self._pending
        b = _u(self.series.coefficients)[:, None]
        acc = (b * (r[:J] * theirs.words[:J] + r[J:] * theirs.words[J:])).sum(axis=0,
                                                                            dtype=np.uint64)
        S = 1 << self.ring.d_bits
        half = np.uint64(S >> 1)
        return w - acc + half - _u(self.y01 * S)

    def helper_side(self, share, triple: SM.FactorTriple):
        J, n = self.series.terms, self.n
        v = Prg(triple.key).uint64(2 * J * n).reshape(2 * J, n)
        cr, ci = self.factors(share)
        self._pending = (cr, ci, triple.correction)
        # H sends (ci_H + v, cr_H + v'): the factors L's (cr_L, ci_L) multiply
        words = np.concatenate([ci, cr]) + v
        if views.enabled():
            views.masked(words, [views.mask_id(triple.key)])
        return SM.MaskedFactors(J, words)

    def helper_share(self, theirs: SM.MaskedFactors):
        """d_H = sum_j b_j ((cr_L + r_j) . ci_H + (ci_L + r'_j) . cr_H) + correction."""
        J = self.series.terms
        cr, ci, corr = self._pending
        b = _u(self.series.coefficients)[:, None]
        acc = (b * (theirs.words[:J] * ci + theirs.words[J:] * cr)).sum(axis=0, dtype=np.uint64)
        return acc + corr

    # -- the intercept (label party L, helper H) -------------------------------------------------
    def intercept_share(self, d_share):
        """H: the sum of its derivative shares plus its Gaussian noise N(0, sigma^2), one word."""
        self._gate("intercept")
        s = np.array([d_share.sum(dtype=np.uint64)], dtype=np.uint64)   # arrays wrap silently
        if self.private and self.sigma > 0:
            s = s + ring_noise(self.rng, self.sigma, self.ring.d_bits, 1)
        return SM.InterceptShare(int(s[0]))

    def intercept_derivative(self, d_share, theirs: SM.InterceptShare):
        """L: g_b = (sum_r d_r + N) / n from its own shares and H's word; kept for the step."""
        words = np.array([d_share.sum(dtype=np.uint64), theirs.word], dtype=np.uint64)
        total = words.sum(dtype=np.uint64, keepdims=True)           # in the ring: wraps
        self._g_b = float(decode(total, self.ring.d_bits)[0]) / self.n

    @property
    def intercept_gradient(self):
        """L's last noisy g_b (None before the first round or without an intercept)."""
        return self._g_b

    def step_intercept(self, loss, t):
        """L: b <- b - rho_t g_b / h(b) (``vflpriv.optim.intercept``), after round t's scores."""
        from ....optim.intercept import INTERCEPT_BOUND, update

        self.b = update(loss, self.b, self._g_b, t, INTERCEPT_BOUND)

    # -- step 3: scores -------------------------------------------------------------------------
    def holder_messages(self, vec, triples, noisy=None):
        """The holder of a d share: masked vector for its peers, result shares, with its
        Gaussian noise on the shares: ``noisy`` maps a peer to the share of the variance this
        holder adds (None: all of it for every peer; ``round_scores`` splits it so that each
        party's scores carry N(0, sigma^2) in all)."""
        self._gate("scores")
        keys = {t.v_key for t in triples.values()}
        if len(keys) != 1:
            raise InputError("the dealer sent different vector masks for one product")
        v_key = next(iter(triples.values())).v_key
        v = Prg(v_key).uint64(self.n)
        index = triples[next(iter(triples))].index
        z = SM.MaskedVector(self.k, index, vec + v)
        shares = {}
        for k, tr in triples.items():
            s = holder_shares(self.masked[k], v, tr.share)
            part = 1.0 if noisy is None else noisy.get(k, 0.0)
            if self.private and self.sigma > 0 and part > 0:
                s = s + ring_noise(self.rng, self.sigma, self.ring.score_bits, s.shape[0], part)
            shares[k] = SM.ResultShare(self.k, tr.index, s)
            if views.enabled():       # z and k's share: the two parts of k's product
                tag = ("product", self.k, int(index), int(k))
                views.masked(z.z, [views.mask_id(v_key)], tag)
                views.masked(s, [views.mask_id(v_key)], tag)
        return z, shares

    def scores(self, own_share, products):
        """g = (A_k^T d + N) / n from the Beaver products' outputs (``products``: one
        ``(MaskedVector, TripleToPeer, ResultShare)`` per holder of a share of d this party
        does not hold) and, for L and H, the local part A_k^T d_own (``own_share``; None for
        the other parties, which hold no share of d)."""
        out = None
        for z, tr, res in products:
            o = peer_output(self.A_fx_T, z.z, tr.w_key, res.share)
            out = o if out is None else out + o
        if own_share is not None:
            from vflpriv.kernels.ring_matmul import ring_spmatmul

            # in uint64 words throughout (scipy's sparse loop; no float64 promotion)
            out = out + ring_spmatmul(self.A_fx_T, own_share).ravel()
        return decode(out, self.ring.score_bits) / self.n

    def select(self, g):
        """The party's move on its noisy scores g: the Frank-Wolfe vertex (its signed index),
        or (``step="pgd"``) x_k <- P(x_k - lr g), P the projection on its l1 ball, and its
        new x_k (both post-processings of g)."""
        if self.step == "pgd":
            from ....optim.l1ball import project_l1_ball

            self.x = project_l1_ball(self.x - self.lr * np.asarray(g, dtype=np.float64),
                                     self.eta)
            self.u = np.asarray(self.A_csc @ self.x).ravel()
            return SM.Coefficients(self.x)
        j, sign = signed_argmax(-g, None, 0.0, None)
        return SM.SecureIndex(sign * (int(j) + 1))


#: the share of the noise variance each holder of d adds to a party outside {L, H}
HALF = Fraction(1, 2)


def noise_parts(peers, L, H):
    """{peer: the share of sigma^2 a holder of d adds to its scores}: all of it for L and H
    (each has only the other holder's noise), half for a party outside {L, H} (half from each
    holder, so that it and either holder together still face half the variance)."""
    return {k: 1 if k in (L, H) else HALF for k in peers}


def summed_dimension(block_sizes, L, H):
    """How many released scores carry the sum of two holders' noise: the features of the
    parties outside {L, H} (L's scores carry H's noise only, H's L's)."""
    return int(sum(p for k, p in enumerate(block_sizes) if k not in (L, H)))


def round_lattice(ring, features, intercept=False):
    """``(resolution, coordinates)`` of one round on ``ring`` (a :class:`RingPlan`): the scores
    A_k^T d are exact integers at scale 2^score_bits and the intercept's word sum_r d_r at
    2^d_bits, each noised there (``ring_noise`` at that scale), so the step is 2^-score_bits,
    or the coarser 2^-d_bits with the intercept (a release on two lattices states the coarsest,
    docs/sensitivity.md 4.9.1); the coordinates are every score (``features``) and the word."""
    bits = ring.d_bits if intercept else ring.score_bits
    return 2.0 ** (-int(bits)), int(features) + (1 if intercept else 0)


def round_event(sigma, D, clips, intercept=False, summed=0, lattice=None):
    """One round's K noisy score vectors (and, with ``intercept``, the noisy sum of the
    derivatives), sensitivity sqrt(sum_k (2 C_k D)^2 (+ (2 D)^2)), with exact discrete
    Gaussian noise: a ``DistributedDiscreteGaussian`` (two summands on the ``summed`` scores
    of the parties outside {L, H}; docs/sensitivity.md 5.7), or a ``DiscreteGaussian`` where
    no score is summed (K = 2).  ``lattice``: :func:`round_lattice` of the run's ring (None:
    the Renyi charge only)."""
    from accounting import REPLACE_ONE, DiscreteGaussian, DistributedDiscreteGaussian

    fields = {} if lattice is None else {"resolution": lattice[0], "coordinates": lattice[1]}
    sens = glm_sensitivity(D, clips, intercept)
    if int(summed) == 0:
        return DiscreteGaussian(sigma, sens, neighboring=REPLACE_ONE, **fields)
    return DistributedDiscreteGaussian(sigma, sens, summands=2, dimension=int(summed),
                                       granularity=SCORE_LATTICE, neighboring=REPLACE_ONE,
                                       **fields)


def glm_sensitivity(D, clips, intercept=False):
    """2 D sqrt(sum_k C_k^2 + [intercept]): the intercept is a constant column 1 of the label
    party, unpenalized, whose release sum_r d_r moves by at most 2 D (docs/sensitivity.md 5.5)."""
    return 2.0 * float(D) * math.sqrt(sum(c * c for c in clips) + (1.0 if intercept else 0.0))


def round_scores(parties, dealer, keys, net, L, H, t):
    """Steps 1-3 of one round (module docstring): {k: the noisy scores (A_k^T d + N) / n that
    party k learns}.  Every message goes through ``net`` (framed and metered)."""
    K, n, series = len(parties), parties[0].n, parties[0].series
    others = [k for k in range(K) if k not in (L, H)]
    # 1. margins shared between L and H
    sL, sH = parties[L].own_margin(), parties[H].own_margin()
    for k in others:
        to_l, to_h = parties[k].margin_messages()
        sL = sL + net.peer(k, [L], to_l, t)[0].vector
        sH = sH + Prg(net.peer(k, [H], to_h, t)[0].key).uint64(n)
    # 2. derivative shares
    kL, kH = keys.key(f"factor-L-{t}"), keys.key(f"factor-H-{t}")
    corr = _factor_correction(kL, kH, series, n)
    tL = net.down(L, SM.FactorTriple(kL, np.zeros(0, dtype=np.uint64)), t)
    tH = net.down(H, SM.FactorTriple(kH, corr), t)
    mL = parties[L].label_side(sL, tL)
    mH = parties[H].helper_side(sH, tH)
    dL = parties[L].label_share(net.peer(H, [L], mH, t)[0])
    dH = parties[H].helper_share(net.peer(L, [H], mL, t)[0])
    if parties[L].b is not None:
        # the intercept's derivative sum_r d_r + N reaches L only (H adds the noise)
        word = net.peer(H, [L], parties[H].intercept_share(dH), t)[0]
        parties[L].intercept_derivative(dL, word)
    own = {L: dL, H: dH}
    # 3. scores: each share times every block but its holder's own, by Beaver products; the
    # other parties hold no share of d (handing one d_L, as before, let that party and H
    # together rebuild d, hence every label: issue 32).  Every party's scores carry
    # N(0, sigma^2) in all: L's from H, H's from L, and a party outside {L, H} half the
    # variance from each, so that it and either holder together still face N(0, sigma^2 / 2)
    # (docs/sensitivity.md 5.4).
    products = {k: [] for k in range(K)}
    for holder, vec in ((H, dH), (L, dL)):
        peers = [k for k in range(K) if k != holder]
        noisy = noise_parts(peers, L, H)
        to_holder, to_peer = dealer.triples(holder, t, peers)
        trip = {k: net.down(holder, to_holder[k], t) for k in peers}
        z, shares = parties[holder].holder_messages(vec, trip, noisy)
        zs = net.peer(holder, peers, z, t)
        for k, zk in zip(peers, zs):
            tp = net.down(k, to_peer[k], t)
            res = net.peer(holder, [k], shares[k], t)[0]
            products[k].append((zk, tp, res))
    return {k: parties[k].scores(own.get(k), products[k]) for k in range(K)}


def helper_of(L, K, helper_party=None):
    """The helper H that holds the other share of the margins and derivatives: ``helper_party``
    (any party but L), or (L + 1) mod K.  The logistic path's threat model: H does not collude
    with L (together they see the margins in the clear) nor with the server."""
    if helper_party is None:
        return (L + 1) % K
    if isinstance(helper_party, bool) or not isinstance(helper_party, (int, np.integer)) or \
            not 0 <= helper_party < K or helper_party == L:
        raise InputError(f"--helper-party must be a party index 0..{K - 1} other than the label "
                         f"party {L}, got {helper_party!r}")
    return int(helper_party)


def offline_receivers(k, L, H, K):
    """Who receives party k's masked block: H and L (the holders of d's shares), never k."""
    return [q for q in (H, L) if q != k]


def _factor_correction(kL, kH, series, n):
    """The dealer's part of the factor products: sum_j b_j (r_j . v_j + r'_j . v'_j) - w, with
    (r, r', w) the stream of L's key and (v, v') that of H's key."""
    J = series.terms
    pl = Prg(kL)
    r = pl.uint64(2 * J * n).reshape(2 * J, n)
    w = pl.uint64(n)
    v = Prg(kH).uint64(2 * J * n).reshape(2 * J, n)
    b = _u(series.coefficients)[:, None]
    corr = (b * (r[:J] * v[:J] + r[J:] * v[J:])).sum(axis=0, dtype=np.uint64) - w
    if views.enabled():
        views.masked(corr, [views.mask_id(kL, "w")])
    return corr
