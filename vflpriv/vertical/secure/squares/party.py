"""dp-bcfw-secure: block-coordinate DP Frank-Wolfe whose cross-party terms are released once per
selected feature, computed under additive secret sharing (docs/vertical.md, docs/sensitivity.md).

Least squares, f(x) = (1/2n) ||A x - y||^2 over the product of per-party l1 balls (radius eta).
Party k's block gradient is

    n grad_k f = A_k^T (A_k x_k - y) + sum_{l != k} sum_{j in S_l} x_j A_k^T a_j,

where S_l is the set of features party l has selected (x_l is supported on it).  The first sum is
local to k (its own columns and the labels, which every party holds).  The cross-products
A_k^T a_j are the only values that need another party's data: when party l selects feature j
for the first time, every other party k obtains c_kj = A_k^T a_j + N(0, sigma^2 I) once, computed
by the Beaver product of ``mpc/beaver.py`` so that neither k nor l sees the other's raw values, and
keeps it (re-selections are free).  Party k's masked block E_k goes to one party only, its
block's helper h(k) = (k + 1) mod K, which computes the other share of every product with k's
block and adds k's noise, from its own generator and only for what its own ledger charged
(``_gate_help``); when l = h(k) that is the holder of the column, as at K = 2.  Who holds what,
and the collusions this rests on, are in ``mpc/beaver.py``'s docstring.  Each party holds at most F distinct features (``feature_cap``):
once it has F, it selects among them only (its set is public, so the restriction is).

One round t (every message framed, serialized and metered, ``messages.py``):

1. Server charges the K selections (report-noisy-max) to the budget filter, then sends each
   party ``Selections`` (the previous round's signed indices, from which every party updates the
   public iterate x and its cross term c_k = sum_l sum_j x_j c_kj with gamma = 2/(t+1)).
2. Party k: scores g = (A_k^T (A_k x_k - y) + c_k) / n on its candidates, signed report-noisy-max,
   replies ``Index``.
3. Server: for the features selected for the first time, charges one Gaussian for the round's
   released vectors (before any noise is drawn; every party charges the same to its own ledger,
   so each helper knows which holders' releases it may serve), then runs the secure product of
   each new feature with each other party's block.
4. Server updates x with gamma_t = 2 / (t + 2) (elementary sampling: every party moves).

With ``epsilon = inf`` no noise is drawn and nothing is clipped: the protocol computes the exact
block gradients (to fixed-point precision) and picks the BCFW-AS vertices.

The loop (:func:`~.loop.run_secure`) talks to the parties through five steps (setup, offline, select,
new_features, product) of an object handed to it: :class:`~.local.LocalParties` in process,
:class:`~.remote.LinkParties` over a runtime link; how each carries the party-to-party messages
is in ``local.py``.  Checkpoint/resume: ``checkpoints/state.py``, ``checkpoints/resume.py``; over a link each party
saves and restores its own state (``checkpoints/saves.py``).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ....errors import InputError
from ....noise.discrete import ring_noise
from ...clipshare import warn_if_clipped
from ...sketch import signed_argmax
from ...transport import Meter
from ..mpc import messages as SM
from ....runtime import views
from ..mpc.beaver import block_helper, holder_shares, masked_block_chunks, peer_output
from ..local import LocalParties, Network  # noqa: F401  (the in-process link; re-exported)
from ..mpc.ring import Prg, decode, encode

#: rows per MaskedBlock frame (8192 x 500 columns = 32.8 MB).  The products are sums over rows, so
#: the chunking changes neither the words computed nor the mask stream (U_k is read row-major in
#: order); only the number of frames (12 + 12 bytes of header each) depends on it.
CHUNK_ROWS = 8192


def clip_block(A_k, feature_bound, row_clip):
    """A party's block clipped to its declared bounds: entries to [-B_a, B_a], then every row to
    l2 norm <= C (the row clip), as a new CSR matrix."""
    A = sp.csr_matrix(A_k, dtype=np.float64, copy=True)
    np.clip(A.data, -feature_bound, feature_bound, out=A.data)
    norms = np.sqrt(np.asarray(A.multiply(A).sum(axis=1)).ravel())
    scale = np.ones_like(norms)
    # a relative margin far above float rounding, so that no rounding in the norm or the
    # scaling can leave a row above C (truncation to fixed point only shrinks it further)
    target = row_clip * (1.0 - 1e-9)
    big = norms > target
    scale[big] = target / norms[big]
    return sp.csr_matrix(sp.diags(scale) @ A)


@dataclass(frozen=True)
class PreparedBlock:
    """A party's block as the protocol reads it: clipped to the declared bounds (private runs),
    truncated to fixed point, and the float values that fixed point stands for; the labels
    clipped.  Read-only once made, so a host serving many messages for one party may keep it
    (:mod:`.remote`) instead of making it again for each."""
    A_fx: object          # CSR, entries encoded in Z_{2^64} (uint64)
    A_csc: object         # CSC, the decoded (exact) float values
    y: object             # None for a party without the labels
    n: int
    p: int

    @property
    def AT(self):
        return self.A_csc.T.tocsr()      # a view (CSC of A is CSR of A^T): no copy

    @property
    def A_fx_T(self):
        # the transpose view of the CSR A_fx (a CSC matrix, no copy: at n = 1e6 a copy is 0.3 GB
        # per party); its products are the same words over the ring
        return self.A_fx.T


def prepare_block(A_k, y, *, frac, private, feature_bound=None, label_bound=None,
                  row_clip=None, k=None, warn=True) -> PreparedBlock:
    """:class:`PreparedBlock` of party ``k``'s data ``(A_k, y)``; ``warn=False`` when the
    caller already warned about clipping in the user's units (the ssp path's scaled block)."""
    # a party that does not hold the label gets y=None: it only ever sees A_k^T y + noise
    y = None if y is None else np.asarray(y, dtype=np.float64)
    if private and warn:
        warn_if_clipped(k, A_k, y, feature_bound, label_bound)
    A = clip_block(A_k, feature_bound, row_clip) if private else \
        sp.csr_matrix(A_k, dtype=np.float64, copy=True)
    if private and y is not None:
        y = np.clip(y, -label_bound, label_bound)
    # fixed point, truncated toward zero: entries and row norms stay within their bounds
    A_fx = A.copy()
    A_fx.data = encode(A.data, int(frac))
    A.data = decode(A_fx.data, int(frac))
    n, p = A.shape
    return PreparedBlock(A_fx=A_fx, A_csc=A.tocsc(), y=y, n=int(n), p=int(p))


def check_distinct_masks(k, i, triples):
    """The holder's refusal of a request whose peers share a vector mask: one mask for two
    peers would let a peer that helps the other's block unmask the column (``mpc/beaver.py``)."""
    keys = [t.v_key for t in triples.values()]
    if len(set(keys)) != len(keys):
        raise InputError(f"party {k}: the dealer sent one vector mask for two peers of feature "
                         f"{i}; each peer's masked column needs its own")


class SecureParty:
    """One data holder: its block (clipped when private), the labels, its noise generator, the
    masked block of the party whose helper it is (party k - 1 mod K: ``beaver.block_helper``)
    and the cross-products released to it.  ``prepared``:
    the :class:`PreparedBlock` already made from ``A_k``/``y`` with these options (then
    ``A_k``/``y`` are not read)."""

    def __init__(self, k, A_k, y, eta, *, frac, private, feature_bound=None, label_bound=None,
                 row_clip=None, noise=None, index_scale=0.0, sigma=0.0, noise_seed=None,
                 prepared=None):
        self.k, self.eta, self.f = k, float(eta), int(frac)
        self.private = private
        b = prepared if prepared is not None else prepare_block(
            A_k, y, frac=frac, private=private, feature_bound=feature_bound,
            label_bound=label_bound, row_clip=row_clip, k=k)
        self.n, self.p = b.n, b.p
        self.A_fx, self.A_csc, self.AT, self.A_fx_T = b.A_fx, b.A_csc, b.AT, b.A_fx_T
        self.y = b.y
        self.ty = None                            # A_k^T y + noise, released once (no label)
        self.noise, self.b, self.sigma = noise, float(index_scale), float(sigma)
        from ....noise import generator as noise_generator

        self.rng = noise_generator(noise_seed) if private else None
        self.x = np.zeros(self.p)
        self.u = np.zeros(self.n)                 # A_k x_k (own block, clipped data)
        self.c = np.zeros(self.p)                 # sum_l sum_j x_j c_kj (released cross terms)
        self.cross = {}                           # (holder l, its local index) -> c_kj
        self.masked = {}                          # its helpee l -> list of (row, E_l chunk)
        self.selected = []                        # own distinct features, in order
        self.intercept = 0.0                      # b of this round (public; 0 when not fitted)
        self._owed_sums = False                   # the intercept's sums charged, not yet sent
        self.feature_cap = None
        self.budget = None                        # the party's own BudgetFilter (private runs)
        self.plan = None                          # (noise, b, Delta_sel, sigma, B_a, clips)
        self.chunk_rows = CHUNK_ROWS              # rows per MaskedBlock frame
        # what this party's own ledger has charged and it may therefore release as a holder:
        # its pick of this round if it is new (a feature is released once), the label once
        self._pick = self._pick_new = None
        self._owed = None
        self._owed_label = False
        # ... and as the helper of block k - 1: the holders whose release of this round its
        # ledger charged (l, or LABEL_RELEASE + L for the label), each served once, and the
        # (holder, feature) pairs it has served (each once in the run)
        self._help_owed = set()
        self._helped = set()
        #: a party whose own ledger governs what it serves even while this object holds no open
        #: filter (a party role opens its ledger only for the messages it charges: remote.py)
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

    # -- one round ----------------------------------------------------------------------------
    def apply(self, msg: SM.Selections, gamma):
        """Move the public iterate by the previous round's selections (step ``gamma``); a
        ``SelectionsB`` also sets the round's intercept b."""
        self.intercept = float(getattr(msg, "intercept", 0.0))
        if gamma is None:
            return
        self.x *= 1.0 - gamma
        self.u *= 1.0 - gamma
        self.c *= 1.0 - gamma
        for l, s in enumerate(msg.signed):
            i, sign = abs(s) - 1, (1 if s > 0 else -1)
            step = gamma * self.eta * sign
            if l == self.k:
                self.x[i] += step
                lo, hi = self.A_csc.indptr[i], self.A_csc.indptr[i + 1]
                self.u[self.A_csc.indices[lo:hi]] += step * self.A_csc.data[lo:hi]
            else:
                self.c += step * self.cross[(l, i)]

    @functools.cached_property
    def column_sums(self):
        """s_k = A_k^T 1 of the block as the protocol reads it (clipped, fixed-point exact);
        the block is read-only, so once per party object (the scores read it every round)."""
        return np.asarray(self.A_csc.sum(axis=0)).ravel()

    def scores(self):
        """g = A_k^T (A_k x_k + b 1 - y) / n + c / n: the block gradient at the round's x and b
        (b A_k^T 1 is local: the party's own column sums)."""
        g = self.c + (self.intercept * self.column_sums if self.intercept else 0.0)
        if self.y is not None:
            return (np.asarray(self.AT @ (self.u - self.y)).ravel() + g) / self.n
        if self.ty is None:
            raise InputError(f"party {self.k} holds no label and was sent no A_k^T y")
        return (np.asarray(self.AT @ self.u).ravel() - self.ty + g) / self.n

    def noisy_sums(self, release_label):
        """The intercept's release (once, after its own ledger charged it): the column sums of
        its block and, at the party that releases it, the sum of the labels, each plus
        N(0, sigma^2) (docs/sensitivity.md 4.9)."""
        if (self.budget is not None or self.gated) and not self._owed_sums:
            raise InputError(f"party {self.k}: refused to release its column sums: its own "
                             "ledger charged no (further) intercept release")
        self._owed_sums = False
        s = self.column_sums
        ysum = float(np.sum(self.y)) if release_label else float("nan")
        if release_label and self.y is None:
            raise InputError(f"party {self.k} holds no label to sum")
        if self.private and self.sigma > 0:
            noise = self.rng.normal(0.0, self.sigma, s.shape[0] + 1)
            s = s + noise[1:]
            if release_label:
                ysum += float(noise[0])
        return SM.NoisySums(ysum, s)

    def charge(self, event, t, note):
        """The party's own check: its ledger must accept ``event`` before it draws any noise
        (each party keeps every release of the run, since every one touches its people)."""
        if self.budget is not None:
            self.budget.charge(event, party=self.k, round=t, note=note)

    def charge_selections(self, t):
        from ...privacy import index_event

        if self.budget is not None:
            noise, b, sens = self.plan[:3]
            self.charge(index_event(noise, b, sens, self.K), t, "secure: signed index")

    def charge_features(self, msg: SM.NewFeatures, t):
        from ..privacy import label_release_event, round_feature_event

        if self.budget is not None:
            sigma, Ba, clips = self.plan[3:6]
            feats = [h for h in msg.holders if h < SM.LABEL_RELEASE]
            if feats:
                self.charge(round_feature_event(sigma, Ba, clips, feats), t,
                            "secure: cross-products")
                if self.k in feats and self._pick_new:
                    self._owed = self._pick          # charged here: this party may serve it
                # as the helper of block k - 1: one product per charged holder l (neither
                # itself, served as the holder above, nor its helpee, which has no product
                # with its own block)
                self._help_owed |= {h for h in feats if h not in (self.k, self.helpee)}
            for h in msg.holders:
                if h == SM.INTERCEPT_RELEASE:
                    from ..privacy import intercept_release_event

                    self.charge(intercept_release_event(sigma, self.plan[6], clips), t,
                                "secure: intercept sums")
                    self._owed_sums = True
                elif h >= SM.LABEL_RELEASE:
                    self.charge(label_release_event(sigma, self.plan[6], clips,
                                                    h - SM.LABEL_RELEASE), t,
                                "secure: A_k^T y")
                    if h - SM.LABEL_RELEASE == self.k and self.y is not None:
                        self._owed_label = True
                    elif h - SM.LABEL_RELEASE != self.helpee:
                        self._help_owed.add(h)       # the label's product with its helpee

    def select(self):
        g = self.scores()
        cands = None if len(self.selected) < self.feature_cap else np.asarray(self.selected)
        sub = g if cands is None else g[cands]
        j, sign = signed_argmax(-sub, self.noise if self.private else None,
                                self.b if self.private else 0.0, self.rng)
        i = int(j) if cands is None else int(cands[j])
        self._pick, self._pick_new, self._owed = i, i not in self.selected, None
        # a feature release charged in an earlier round and not served lapses with it
        self._help_owed = {h for h in self._help_owed if h >= SM.LABEL_RELEASE}
        if i not in self.selected:
            self.selected.append(i)
        return SM.SecureIndex(sign * (i + 1))

    def _gate_release(self, i):
        """A private party serves a holder request only for what its own ledger charged: its
        new pick of this round, once, or (the label party) the label, once (issue 32); the
        server's word is not enough."""
        if self.budget is None and not self.gated:
            return
        if i == SM.LABEL_INDEX:
            if not self._owed_label:
                raise InputError(f"party {self.k}: refused to release A_k^T y: its own ledger "
                                 "charged no (further) label release")
            self._owed_label = False
            return
        if self._owed is None or i != self._owed:
            raise InputError(f"party {self.k}: refused to release feature {i}: its own ledger "
                             f"charged only its new pick of this round "
                             f"({'none' if self._owed is None else self._owed}), each once")
        self._owed = None

    def _gate_help(self, l, i):
        """As the helper of block k - 1, a private party serves the product of party l's feature
        i (or, i = LABEL_INDEX, of the label party l's y) only if its own ledger charged that
        release in this round (each charge once: ``charge_features``), and each (l, i) once in
        the run; the server's word is not enough."""
        if self.budget is None and not self.gated:
            return
        code = SM.LABEL_RELEASE + l if i == SM.LABEL_INDEX else l
        what = "A_k^T y" if i == SM.LABEL_INDEX else f"feature {i}"
        if (int(l), int(i)) in self._helped:
            raise InputError(f"party {self.k}: refused to help release party {l}'s {what} "
                             f"for party {self.helpee} again")
        if code not in self._help_owed:
            raise InputError(f"party {self.k}: refused to help release party {l}'s {what} for "
                             f"party {self.helpee}: its own ledger charged no (further) "
                             "release of that party's this round")
        self._help_owed.discard(code)
        self._helped.add((int(l), int(i)))

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


@dataclass
class SecureResult:
    x: np.ndarray
    objective: list
    initial_objective: float
    meter: Meter
    seconds: float
    released: list            # per party: distinct features whose cross-products were released
    selections: list
    products: int
    frac_bits: int
    peer_bytes: int
    setup_seconds: float
    extra: dict = field(default_factory=dict)
    intercept: float | None = None       # b at the final x (fit_intercept), else None
    intercepts: list | None = None       # b after every round


class Evaluation:
    """f(x^t) on the data as given, from the rounds' picks (evaluation only: the server of a
    deployment never holds A; :func:`replay_objective` recomputes it): ||A x - y||^2 / 2n, or
    the mean of ``loss.value`` when a loss is given (the logistic path)."""

    def __init__(self, data, loss=None):
        self.data, self.loss, self.A = data, loss, sp.csc_matrix(data.A)
        self.u = np.zeros(data.n)

    def advance(self, sel, gamma, intercept=0.0):
        """f at the iterate after the moves ``sel`` and with the intercept ``intercept``."""
        self.u *= 1.0 - gamma
        A = self.A
        for _, g, step in sel:
            lo, hi = A.indptr[g], A.indptr[g + 1]
            self.u[A.indices[lo:hi]] += step * A.data[lo:hi]
        if self.loss is not None:
            return float(np.mean(self.loss.value(self.u + intercept, self.data.y)))
        r = self.u + intercept - self.data.y
        return float(0.5 * np.mean(r * r))


def fw_step(x, blocks, picks, gamma, eta):
    """The Frank-Wolfe move of every party: x <- (1 - gamma) x + gamma eta sign e_i for each
    party's pick (i local to its block).  Returns (selections, moves) in global indices."""
    x *= 1.0 - gamma
    sel, moves = [], []
    for l, (i, sign) in enumerate(picks):
        g = int(blocks[l][i])
        step = gamma * eta * sign
        x[g] += step
        sel.append((l, g, sign))
        moves.append((l, g, step))
    return sel, moves


def replay_objective(data, eta, selections, intercepts=None):
    """The objective history of a run known by its selections (gamma_t = 2 / (t + 2)) and,
    with an intercept, b after every round."""
    ev = Evaluation(data)
    return [ev.advance([(l, g, 2.0 / (t + 2.0) * eta * sign) for l, g, sign in sel],
                       2.0 / (t + 2.0), 0.0 if intercepts is None else float(intercepts[t]))
            for t, sel in enumerate(selections)]
