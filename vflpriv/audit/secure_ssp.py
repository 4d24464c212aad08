"""Audit of dp-bcfw-secure's ssp path (``logistic_path="ssp"``): the one release of the
sufficient statistics, through the protocol's own code (``ssp_run._release``: the keys, the
masked blocks opened to the server, the parts of the cross-blocks with the helpers' ring noise,
every party's ``GramPart``; real masks, ``ssp/gram.py``).

``dp_bcfw_secure_ssp``: K = 2 parties of 2 columns each, the label at party 0, n = 2 rows.
Neighbours (replace row 0), chosen so that the two augmented rows z = (s a, 1, y) are orthogonal
and of the full norm R: on D0 party k's row 0 is (C_k, C_k) / sqrt 2 with y_0 = +1, on D1
(C_k, -C_k) / sqrt 2 with y_0 = -1 (entries within B_a = 1; s^2 (C_0^2 + C_1^2) = 1 + B_y^2, so
||z||^2 = ||z'||^2 = R^2 and z . z' = 0 + 1 - 1 = 0).  Then ||z z^T - z' z'^T||_F = sqrt(2) R^2, the declared sensitivity:
the worst case is attained.  Claim: ``DiscreteGaussian(sigma, sqrt(2) R^2)`` on the ring's lattice
(resolution sqrt(2) 2^-2f, the cross entries and A_1^T y as coordinates), the event the run
charges, sigma calibrated by ``best`` (the continuous Gaussian plus the TV term, 4.9.1).  Score: the released M's Frobenius product with the move's direction D / ||D||_F (the
svec inner product: the likelihood ratio's statistic; a post-processing).  Row 1 is zero.
"""
from __future__ import annotations

import math

from . import AuditMechanism, register

DELTA = 1e-5


def make_ssp(epsilon: float = 1.0, noise_factor: float = 1.0, eta=None) -> AuditMechanism:
    """``eta``: None for the logistic expansion's balanced scale; a number for the squared
    loss over per-party l1 balls of that radius, whose features' share a of the row norm
    (``release.squared_share``) sets s and R^2 = a + 1 + B_y^2 (docs/sensitivity.md 4.10.1);
    the neighbours attain sqrt(2) R^2 for any a."""
    import numpy as np

    from vflpriv.vertical.secure.ssp import release as S
    from vflpriv.vertical.secure.base.blocks import prepare_block
    from vflpriv.vertical.secure.ssp.solve import LocalGram, _release, make_parties, ring_frac

    n, sizes, By, Ba = 2, [2, 2], 1.0, 1.0
    clips = [Ba * 2 ** 0.25] * 2                     # the default rule B_a p_k^(1/4)
    share = None if eta is None else S.squared_share(By, clips, float(eta))
    s = S.scale(By, clips, share)

    def lattice(sig):                                # the run's ring lattice at noise sig
        return S.ring_resolution(ring_frac(n, Ba * s, By, sig)), S.ring_coordinates(sizes, 0)

    # as a run under --accountant best: the event states its lattice (4.9.1)
    sigma = S.calibrate_sigma(epsilon, DELTA, By, "best", lattice=lattice, share=share)
    event = S.release_event(sigma, By, lattice(sigma), share)
    frac = ring_frac(n, Ba * s, By, sigma)

    def side(flip):
        A = [np.zeros((n, 2)), np.zeros((n, 2))]
        y = np.zeros(n)
        for k in range(2):
            A[k][0] = clips[k] / math.sqrt(2.0) * np.array([1.0, -1.0 if flip else 1.0])
        y[0] = -By if flip else By
        blocks = [prepare_block(A[k] * s, y if k == 0 else None, frac=frac, private=True,
                                feature_bound=Ba * s, label_bound=By, row_clip=clips[k] * s,
                                k=k) for k in range(2)]
        Z = np.zeros((n, 6))
        Z[:, :2], Z[:, 2:4], Z[:, 4], Z[:, 5] = A[0] * s, A[1] * s, 1.0, y
        return blocks, Z.T @ Z

    (b0, M0), (b1, M1) = side(False), side(True)
    D = M0 - M1
    D[4, 4] = D[5, 5] = 0.0                          # n and y^T y are not released
    unit = D / np.linalg.norm(D)

    def release(blocks, rng):
        parties = make_parties(blocks, frac, True, sigma * noise_factor, event, [0, 0])
        for p in parties:
            p.rng = rng
        link = LocalGram(parties, sizes, 0)
        M = _release(link, parties, sizes, 0, n, frac, None, None)
        link.close()
        return float(np.sum(M * unit))

    def sample(k, rng):
        return (np.array([release(b0, rng) for _ in range(k)]),
                np.array([release(b1, rng) for _ in range(k)]))

    return AuditMechanism(
        "dp_bcfw_secure_ssp" if eta is None else "dp_bcfw_secure_ssp_squared", event, DELTA,
        sample, score=None,
        description=f"the ssp path's one release of the sufficient statistics (ssp_run._release: "
        f"K = 2, 2 columns each, label at party 0): discrete Gaussian sigma={sigma:.4g}, "
        f"sensitivity {event.sensitivity:.4g} (sqrt(2) R^2, R^2 = {S.row_bound_sq(By, share):.4g}"
        f"{' = 2 (1 + B_y^2)' if eta is None else ': the squared loss, eta ' + format(eta, 'g')}"
        f"); row 0 "
        f"replaced by an orthogonal augmented row of the same norm")


register("dp_bcfw_secure_ssp")(lambda: make_ssp())
register("dp_bcfw_secure_ssp_squared")(lambda: make_ssp(eta=1.0))
