"""Audit of dp-bcfw-secure's two releases through the protocol's own code (vflpriv.vertical.secure).

* ``dp_bcfw_secure_selection``: one party's report-noisy-max (``SecureParty.select``) over its
  2p signed scores g = (A_k^T (A_k x_k - y) + c) / n.  Worst-case neighbours (replace one row):
  row 0 of the party's block is (a, B_a, 0, ...) with a = +B_a on D0 and -B_a on D1, y_0 = -B_y,
  x_k = eta e_1, and the public cross term c cancels column 1's score, so the score of column 0
  moves by the full 2 B_a (B_a eta + B_y) / n while every other signed score stays at 0.
  Claim: ``ReportNoisyMax(noise, b, Delta_sel)`` as the protocol records it.
* ``dp_bcfw_secure_release``: one cross-product A_k^T a_j + N(0, sigma^2 I) computed by the
  Beaver product between two parties (``holder_messages`` / ``peer_output``, real masks and
  dealer).  Neighbours: row 0 of the peer's block is C e_0 (norm C), the holder's column has
  +B_a (D0) or -B_a (D1) in row 0, zeros elsewhere: the released entry 0 moves by 2 B_a C, the
  declared sensitivity.  Claim: ``DiscreteGaussian(sigma, 2 B_a C)`` (ring noise).  Score: the
  released entry 0.
* ``dp_bcfw_secure_intercept``: the least-squares intercept's release, once: the label party's
  noisy label sum and column sums and the other party's noisy column sums
  (``SecureParty.noisy_sums``), K = 2, one column each.  Neighbours: row 0 is (C_0, C_1) with
  y_0 = B_y on D0 and the negation on D1, so the released vector moves by
  2 sqrt(B_y^2 + C_0^2 + C_1^2), the declared sensitivity.  Claim:
  ``Gaussian(sigma, 2 sqrt(B_y^2 + sum C_k^2))``.  Score: the release projected on the
  direction of that move (the likelihood ratio's statistic; a post-processing).
"""
from __future__ import annotations

import math

from . import AuditMechanism, register

DELTA = 1e-5


def make_selection(noise: str = "gumbel", n: int = 8, p: int = 4, feature_bound: float = 1.0,
                   label_bound: float = 1.0, eta: float = 1.0,
                   noise_factor: float = 1.0) -> AuditMechanism:
    import numpy as np

    from vflpriv.vertical.privacy import index_event
    from vflpriv.vertical.secure.mpc import messages as SM
    from vflpriv.vertical.secure import privacy as SP
    from vflpriv.vertical.secure.squares.party import SecureParty

    Ba, By = feature_bound, label_bound
    clips = SP.row_clips(Ba, None, [p, 1])
    sens = SP.sensitivities(Ba, By, eta, n, clips)
    b = 2.0 * sens.index / 1.0                      # a (2 Delta / b) = 1 selection
    event = index_event(noise, b, sens.index)
    y = np.zeros(n)
    y[0] = -By

    def make_party(a00):
        A = np.zeros((n, p))
        A[0, 0], A[0, 1] = a00, Ba
        party = SecureParty(0, A, y, eta, frac=20, private=True, feature_bound=Ba,
                            label_bound=By, row_clip=clips[0], noise=noise,
                            index_scale=b * noise_factor, sigma=1.0, noise_seed=0)
        party.setup(SM.SecureSetup(20, 10, 2, n, bytes(16)))
        party.x[1] = eta                            # x_k = eta e_1 (public)
        party.u = np.asarray(party.A_csc @ party.x).ravel()
        party.c[1] = -(Ba * (Ba * eta + By))       # public cross term cancelling column 1
        return party

    parties = (make_party(Ba), make_party(-Ba))

    def sample(k, rng):
        outs = []
        for party in parties:
            party.rng = rng
            out = np.empty(k)
            for r in range(k):
                party.selected = []
                out[r] = party.select().signed_index
            outs.append(out)
        return outs[0], outs[1]

    def score(out):
        # D0 favours column 0 with sign -1 (its score is positive), D1 with sign +1
        return (out == -1).astype(float) - (out == 1)

    return AuditMechanism(
        "dp_bcfw_secure_selection", event, DELTA, sample, score=score,
        description=f"one dp-bcfw-secure selection (SecureParty.select): {noise} report-noisy-max "
        f"over {2 * p} signed scores, b={b:.4g}, sensitivity {sens.index:.4g}; row 0 flipped")


def make_release(n: int = 4, p: int = 2, feature_bound: float = 1.0, row_clip: float = 1.0,
                 epsilon: float = 1.0, noise_factor: float = 1.0) -> AuditMechanism:
    import numpy as np

    from accounting import calibrate
    from vflpriv.vertical.secure.mpc import beaver, ring
    from vflpriv.vertical.secure.mpc import messages as SM
    from vflpriv.vertical.secure import privacy as SP
    from vflpriv.vertical.secure.squares.party import SecureParty

    Ba, C = feature_bound, row_clip
    clips = SP.row_clips(Ba, C, [p, 1])
    # as a run under --accountant best: the release states its ring lattice (step 2^-2f at the
    # fraction bits f of that sigma; docs/sensitivity.md 4.9.1)
    def ring_at(s):
        return ring.frac_bits(n * Ba * Ba + 40 * s + 1), [p, 1]

    sigma = calibrate(lambda s: SP.round_feature_event(s, Ba, clips, [1], ring_at(s)), epsilon,
                      DELTA,
                      decreasing=True).value
    event = SP.round_feature_event(sigma, Ba, clips, [1], ring_at(sigma))
    f = ring.frac_bits(n * Ba * Ba + 40 * sigma + 1)
    y = np.zeros(n)
    kw = dict(frac=f, private=True, feature_bound=Ba, label_bound=1.0, noise="gumbel",
              index_scale=1.0, noise_seed=0)
    A0 = np.zeros((n, p))
    A0[0, 0] = C
    peer = SecureParty(0, A0, y, 1.0, row_clip=clips[0], sigma=sigma, **kw)
    keys = ring.KeySource()                          # masks from OS entropy; they cancel
    dealer = beaver.Dealer(keys, [p, 1], n, 1024)
    peer.setup(SM.SecureSetup(f, 10, 2, n, dealer.mask_keys[0]))
    blocks = list(peer.masked_blocks())

    def make_holder(a0):
        A1 = np.zeros((n, 1))
        A1[0, 0] = a0
        h = SecureParty(1, A1, y, 1.0, row_clip=clips[1], sigma=sigma * noise_factor, **kw)
        h.setup(SM.SecureSetup(f, 10, 2, n, dealer.mask_keys[1]))
        for row, block in blocks:
            h.receive_block(0, SM.MaskedBlock(row, block))
        return h

    holders = (make_holder(Ba), make_holder(-Ba))

    def sample(k, rng):
        outs = []
        for h in holders:
            h.rng = rng
            out = np.empty(k)
            for r in range(k):
                to_holder, to_peer = dealer.triples(1, 0, [0])
                zs, shares = h.holder_messages(0, to_holder)
                peer.peer_output(zs[0], to_peer[0], shares[0])
                out[r] = peer.cross[(1, 0)][0]
            outs.append(out)
        return outs[0], outs[1]

    return AuditMechanism(
        "dp_bcfw_secure_release", event, DELTA, sample, score=None,
        description=f"one dp-bcfw-secure cross-product release through the Beaver product "
        f"(holder_messages / peer_output): discrete Gaussian sigma={sigma:.4g}, sensitivity "
        f"{event.sensitivity:.4g} (2 B_a C); holder's row 0 flipped")


def make_release_routed(n: int = 4, p: int = 2, feature_bound: float = 1.0,
                        row_clip: float = 1.0, epsilon: float = 1.0,
                        noise_factor: float = 1.0) -> AuditMechanism:
    """``dp_bcfw_secure_release_routed``: the cross-product release at K = 3, where the products
    are routed (issue 33): party 2 holds the column, so its two releases are party 0's A_0^T a_j
    + N_0, whose share and noise come from party 0's block helper, party 1 (the routed path:
    ``Dealer.routed_triples``, ``helper_share``), and party 1's A_1^T a_j + N_1, whose helper is
    the holder itself (``holder_messages``).  Neighbours: row 0 of both peers' blocks is C e_0;
    the holder's column has +B_a (D0) or -B_a (D1) in row 0: each released entry 0 moves by
    2 B_a C.  Claim: the round's event for party 2's new feature,
    ``DiscreteGaussian(sigma, 2 B_a sqrt(C_0^2 + C_1^2))``; score: the two released entries 0
    projected on (1, 1) / sqrt(2), which moves by the full sensitivity."""
    import numpy as np

    from accounting import calibrate
    from vflpriv.vertical.secure.mpc import beaver, ring
    from vflpriv.vertical.secure.mpc import messages as SM
    from vflpriv.vertical.secure import privacy as SP
    from vflpriv.vertical.secure.squares.party import SecureParty

    Ba, C, K = feature_bound, row_clip, 3
    sizes = [p, p, 1]
    clips = SP.row_clips(Ba, C, sizes)
    # as a run under --accountant best: the release states its ring lattice (4.9.1)
    def ring_at(s):
        return ring.frac_bits(n * Ba * Ba + 40 * s + 1), sizes

    sigma = calibrate(lambda s: SP.round_feature_event(s, Ba, clips, [2], ring_at(s)), epsilon,
                      DELTA,
                      decreasing=True).value
    event = SP.round_feature_event(sigma, Ba, clips, [2], ring_at(sigma))
    f = ring.frac_bits(n * Ba * Ba + 40 * sigma + 1)
    y = np.zeros(n)
    kw = dict(frac=f, private=True, feature_bound=Ba, label_bound=1.0, noise="gumbel",
              index_scale=1.0, noise_seed=0)
    keys = ring.KeySource()                          # masks from OS entropy; they cancel
    dealer = beaver.Dealer(keys, sizes, n, 1024)

    def peer(k, noise_factor_k=1.0):
        A = np.zeros((n, sizes[k]))
        A[0, 0] = C
        q = SecureParty(k, A, y, 1.0, row_clip=clips[k], sigma=sigma * noise_factor_k, **kw)
        q.setup(SM.SecureSetup(f, 10, K, n, dealer.mask_keys[k]))
        return q

    p0, p1 = peer(0), peer(1, noise_factor)          # party 1 draws party 0's noise
    for row, block in p0.masked_blocks():            # E_0 to its helper h(0) = 1 only
        p1.receive_block(0, SM.MaskedBlock(row, block))
    blocks1 = list(p1.masked_blocks())               # E_1 to h(1) = 2, the holder

    def make_holder(a0):
        A2 = np.zeros((n, 1))
        A2[0, 0] = a0
        h = SecureParty(2, A2, y, 1.0, row_clip=clips[2], sigma=sigma * noise_factor, **kw)
        h.setup(SM.SecureSetup(f, 10, K, n, dealer.mask_keys[2]))
        for row, block in blocks1:
            h.receive_block(1, SM.MaskedBlock(row, block))
        return h

    holders = (make_holder(Ba), make_holder(-Ba))

    def sample(k, rng):
        outs = []
        for h in holders:
            h.rng = p1.rng = rng
            out = np.empty(k)
            for r in range(k):
                to_holder, to_helper, to_peer = dealer.routed_triples(2, 0, [0, 1])
                zs, shares = h.holder_messages(0, to_holder)         # party 1's share
                s0 = p1.helper_share(to_helper[0])                    # party 0's, from h(0)
                p0.peer_output(zs[0], to_peer[0], s0)                 # each its own mask
                p1.peer_output(zs[1], to_peer[1], shares[1])
                out[r] = (p0.cross[(2, 0)][0] + p1.cross[(2, 0)][0]) / math.sqrt(2.0)
            outs.append(out)
        return outs[0], outs[1]

    return AuditMechanism(
        "dp_bcfw_secure_release_routed", event, DELTA, sample, score=None,
        description=f"one dp-bcfw-secure cross-product release at K = 3 with the products "
        f"routed through the blocks' helpers (Dealer.routed_triples / helper_share / "
        f"holder_messages / peer_output): discrete Gaussian sigma={sigma:.4g}, sensitivity "
        f"{event.sensitivity:.4g} (2 B_a sqrt(C_0^2 + C_1^2)); holder's row 0 flipped")


def make_intercept(n: int = 4, label_bound: float = 1.0, epsilon: float = 1.0,
                   noise_factor: float = 1.0) -> AuditMechanism:
    import numpy as np

    from accounting import calibrate
    from vflpriv.vertical.secure import privacy as SP
    from vflpriv.vertical.secure.squares.party import SecureParty

    By = label_bound
    clips = SP.row_clips(1.0, None, [1, 1])
    sigma = calibrate(lambda s: SP.intercept_release_event(s, By, clips), epsilon, DELTA,
                      decreasing=True).value
    event = SP.intercept_release_event(sigma, By, clips)
    kw = dict(frac=20, private=True, feature_bound=1.0, label_bound=By, noise="gumbel",
              index_scale=1.0, sigma=sigma * noise_factor, noise_seed=0)

    def pair(sign):
        A0, A1, y = np.zeros((n, 1)), np.zeros((n, 1)), np.zeros(n)
        A0[0, 0], A1[0, 0], y[0] = sign * clips[0], sign * clips[1], sign * By
        return (SecureParty(0, A0, y, 1.0, row_clip=clips[0], **kw),
                SecureParty(1, A1, None, 1.0, row_clip=clips[1], **kw))

    sides = (pair(1.0), pair(-1.0))
    move = np.array([By, clips[0], clips[1]])
    unit = move / np.linalg.norm(move)

    def sample(k, rng):
        outs = []
        for label_party, other in sides:
            label_party.rng = other.rng = rng
            out = np.empty(k)
            for r in range(k):
                m0, m1 = label_party.noisy_sums(True), other.noisy_sums(False)
                out[r] = unit @ np.array([m0.label_sum, m0.sums[0], m1.sums[0]])
            outs.append(out)
        return outs[0], outs[1]

    return AuditMechanism(
        "dp_bcfw_secure_intercept", event, DELTA, sample, score=None,
        description=f"the least-squares intercept's release (SecureParty.noisy_sums: label sum "
        f"and column sums of K = 2 parties): Gaussian sigma={sigma:.4g}, sensitivity "
        f"{event.sensitivity:.4g} (2 sqrt(B_y^2 + sum C_k^2)); row 0 and y_0 negated")


register("dp_bcfw_secure_selection")(lambda: make_selection("gumbel"))
register("dp_bcfw_secure_intercept")(lambda: make_intercept())
register("dp_bcfw_secure_release")(lambda: make_release())
register("dp_bcfw_secure_release_routed")(lambda: make_release_routed())


def make_glm_scores(epsilon: float = 1.0, n: int = 2, feature_bound: float = 1.0,
                    row_clip: float = 1.0, margin: float = 6.0,
                    noise_factor: float = 1.0, intercept: bool = False) -> AuditMechanism:
    """One round of the logistic path's noisy scores (``glm.round_scores``: shared margins, the
    sigmoid series on shares, the Beaver score products with the holders' noise), K = 2, label
    at party 0, helper party 1.

    Neighbours (replace row 0): party 0's row 0 is (C); party 1's row 0 is (+a, b) on D0 and
    (-a, b) on D1 with a^2 + b^2 = C^2, a = margin / x (x = the public iterate on party 1's
    column 0); y_0 = -1 on D0, +1 on D1.  So the margin is +margin / -margin and the derivative
    d_0 ~ sigma(margin) - 0 / sigma(-margin) - 1: the released scores of party 0's column and party
    1's column 1 move by about 2 sigma(margin) (C, b) / n.  Claim: ``DiscreteGaussian(sigma,
    2 D sqrt(C^2 + C^2))`` (D = ``SigmoidSeries.derivative_bound`` = 1.0315 bounds |d| whatever
    the shares); the share of the claim this neighbour pair can reach is about sigma(margin)
    sqrt(C^2 + b^2) / (D sqrt(2) C) = 0.96 (0.81 with the any-factors bound 1.2266 used before).
    Score: the projection of the two moving scores on (C, b), the most powerful test of a
    Gaussian shift.

    ``intercept=True`` (``dp_bcfw_secure_glm_intercept``): the label party fits the intercept, so
    the round also releases sum_r d_r + N to it (``GlmParty.intercept_share``); the claim is
    ``DiscreteGaussian(sigma, 2 D sqrt(C^2 + C^2 + 1))`` and the score projects the three moving
    values on (C, b, 1)."""
    import numpy as np

    from accounting import calibrate
    from vflpriv.vertical.secure.mpc import messages as SM
    from vflpriv.vertical.secure.mpc.beaver import Dealer
    from vflpriv.vertical.secure.mpc.fourier import SigmoidSeries
    from vflpriv.vertical.secure.glm.party import (CHUNK_ROWS, GlmParty, glm_sensitivity, ring_plan,
                                                   round_event, round_lattice, round_scores)
    from vflpriv.vertical.secure.local import Network
    from vflpriv.vertical.secure.mpc.ring import KeySource

    series = SigmoidSeries()
    D, C, Ba = series.derivative_bound, float(row_clip), float(feature_bound)
    clips = [C, C]
    sens = glm_sensitivity(D, clips, intercept)
    # two parties: no score carries two holders' noise, so the round is one exact discrete
    # Gaussian (docs/sensitivity.md 5.7), calibrated and claimed as the run charges it; as a
    # run under --accountant best: the round states its ring lattice (4.9.1), from the
    # ring the run would use at that sigma (its scores: party 0's one column, party 1's two)
    def lattice_at(s):
        return round_lattice(ring_plan(n, Ba, s, series), 3, intercept)

    sigma = calibrate(lambda s: round_event(s, D, clips, intercept, 0, lattice_at(s)), epsilon,
                      DELTA,
                      decreasing=True).value
    event = round_event(sigma, D, clips, intercept, 0, lattice_at(sigma))
    assert event.sensitivity == sens
    ring = ring_plan(n, Ba, sigma * noise_factor, series)
    a = 0.1 * C
    b = math.sqrt(C * C - a * a)
    x1 = margin / a

    def build(sign):
        A0 = np.zeros((n, 1))
        A0[0, 0] = C
        A1 = np.zeros((n, 2))
        A1[0] = (sign * a, b)
        y = np.ones(n)
        y[0] = -sign
        keys = KeySource(None)
        parties = [GlmParty(k, A, y if k == 0 else None, x1, ring=ring, series=series,
                            private=True, feature_bound=Ba, row_clip=C,
                            sigma=sigma * noise_factor, noise_seed=0,
                            fit_intercept=intercept)
                   for k, A in ((0, A0), (1, A1))]
        net = Network()
        dealer = Dealer(keys, [1, 2], n, CHUNK_ROWS)
        for p in parties:
            p.setup(SM.SecureSetup(ring.fa, 0, 2, n, dealer.mask_keys[p.k]))
        for p in parties:
            q = 1 - p.k
            for row, block in p.masked_blocks():
                parties[q].receive_block(p.k, SM.MaskedBlock(row, block))
        parties[1].x[0] = x1                         # the public iterate: eta e_0 on party 1
        parties[1].u = np.asarray(parties[1].A_csc @ parties[1].x).ravel()
        return parties, dealer, keys, net

    sides = (build(+1), build(-1))
    w = np.array([C, b, 1.0 if intercept else 0.0])
    w /= np.linalg.norm(w)

    def sample(k, rng):
        outs = []
        for parties, dealer, keys, net in sides:
            for p in parties:
                p.rng = rng
            out = np.empty(k)
            for r in range(k):
                g = round_scores(parties, dealer, keys, net, 0, 1, r)
                g_b = parties[0].intercept_gradient if intercept else 0.0
                out[r] = w[0] * g[0][0] + w[1] * g[1][1] + w[2] * g_b
            outs.append(out)
        return outs[0], outs[1]

    what = " and the intercept's noisy derivative sum", " + 1"
    return AuditMechanism(
        "dp_bcfw_secure_glm_intercept" if intercept else "dp_bcfw_secure_glm_scores", event,
        DELTA, sample, score=None,
        description=f"one round of the logistic path's noisy scores{what[0] if intercept else ''}"
        f" (glm.round_scores, sigmoid series on shares, Beaver score products): discrete "
        f"Gaussian sigma={sigma:.4g}, sensitivity {sens:.4g} (2 D sqrt(sum C_k^2"
        f"{what[1] if intercept else ''})); row 0's margin and label flipped")


register("dp_bcfw_secure_glm_scores")(lambda: make_glm_scores())
register("dp_bcfw_secure_glm_intercept")(lambda: make_glm_scores(intercept=True))
