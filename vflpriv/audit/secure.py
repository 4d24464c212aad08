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
  declared sensitivity.  Claim: ``Gaussian(sigma, 2 B_a C)``.  Score: the released entry 0.
"""
from __future__ import annotations

from . import AuditMechanism, register

DELTA = 1e-5


def make_selection(noise: str = "gumbel", n: int = 8, p: int = 4, feature_bound: float = 1.0,
                   label_bound: float = 1.0, eta: float = 1.0,
                   noise_factor: float = 1.0) -> AuditMechanism:
    import numpy as np

    from vflpriv.vertical.privacy import index_event
    from vflpriv.vertical.secure import messages as SM
    from vflpriv.vertical.secure import privacy as SP
    from vflpriv.vertical.secure.protocol import SecureParty

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
    from vflpriv.vertical.secure import beaver, ring
    from vflpriv.vertical.secure import messages as SM
    from vflpriv.vertical.secure import privacy as SP
    from vflpriv.vertical.secure.protocol import SecureParty

    Ba, C = feature_bound, row_clip
    clips = SP.row_clips(Ba, C, [p, 1])
    sigma = calibrate(lambda s: SP.round_feature_event(s, Ba, clips, [1]), epsilon, DELTA,
                      decreasing=True).value
    event = SP.round_feature_event(sigma, Ba, clips, [1])
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
                z, shares = h.holder_messages(0, to_holder)
                peer.peer_output(z, to_peer[0], shares[0])
                out[r] = peer.cross[(1, 0)][0]
            outs.append(out)
        return outs[0], outs[1]

    return AuditMechanism(
        "dp_bcfw_secure_release", event, DELTA, sample, score=None,
        description=f"one dp-bcfw-secure cross-product release through the Beaver product "
        f"(holder_messages / peer_output): Gaussian sigma={sigma:.4g}, sensitivity "
        f"{event.sensitivity:.4g} (2 B_a C); holder's row 0 flipped")


register("dp_bcfw_secure_selection")(lambda: make_selection("gumbel"))
register("dp_bcfw_secure_release")(lambda: make_release())
