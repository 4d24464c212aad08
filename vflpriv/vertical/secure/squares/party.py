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

from ....errors import InputError
from ...sketch import signed_argmax
from ...transport import Meter
from ..base.party import ProductParty
from ..mpc import messages as SM


class SecureParty(ProductParty):
    """A data holder of the least-squares path: the secure products of
    :class:`~..base.party.ProductParty`, and its rounds: the public iterate moved by the
    selections, its scores from its own block and the cross-products released to it, its
    report-noisy-max pick, the intercept's sums, and what its own ledger charged of each."""

    def __init__(self, k, A_k, y, eta, *, noise=None, index_scale=0.0, **block):
        super().__init__(k, A_k, y, **block)
        self.eta = float(eta)
        self.noise, self.b = noise, float(index_scale)
        self.x = np.zeros(self.p)
        self.u = np.zeros(self.n)                 # A_k x_k (own block, clipped data)
        self.c = np.zeros(self.p)                 # sum_l sum_j x_j c_kj (released cross terms)
        self.selected = []                        # own distinct features, in order
        self.intercept = 0.0                      # b of this round (public; 0 when not fitted)
        self._owed_sums = False                   # the intercept's sums charged, not yet sent
        self.plan = None                          # (noise, b, Delta_sel, sigma, B_a, clips)
        self.ring = None                          # (frac, block sizes): the releases' lattice
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
                self.charge(round_feature_event(sigma, Ba, clips, feats, self.ring), t,
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
                                                    h - SM.LABEL_RELEASE, self.ring), t,
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


