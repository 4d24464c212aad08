"""Sensitivities and calibration of dp-bcfw-secure (docs/sensitivity.md, section 4).

Declared bounds |a_ij| <= B_a, |y_j| <= B_y, per-party l1 radius eta, and per-party row clipping
C_k (each party scales every row of its block to l2 norm <= C_k; C_k is taken as
min(row_clip, B_a sqrt(p_k)), the second being the bound that clipping entries already gives).
Neighbours replace one person's row (``replace_one``); n is public.

* selection of party k (report-noisy-max over the 2|candidates| signed scores
  g_i = (a_i^T (A_k x_k - y) + c_i) / n, c = released cross-products, public):
      Delta_sel = 2 B_a (B_a eta + B_y) / n
* one newly selected feature j of party l: the K - 1 released vectors (A_k^T a_j + N_k)_{k != l}
  together have L2 sensitivity  Delta_feat(l) = 2 B_a sqrt(sum_{k != l} C_k^2);
  a round releasing features j_1..j_m is one discrete Gaussian (the exact ring noise,
  docs/sensitivity.md 4.9) with sqrt(sum_i Delta_feat(l_i)^2).

* label at one party L: the K - 1 vectors (A_k^T y + N_k)_{k != L}, released once, have L2
  sensitivity Delta_y = 2 B_y sqrt(sum_{k != L} C_k^2) (same sigma as the features).

* intercept (``fit_intercept``): the vector (sum_r y_r, A_0^T 1, ..., A_{K-1}^T 1), released
  once at setup with the features' sigma, has L2 sensitivity
      Delta_b = 2 sqrt(B_y^2 + sum_k C_k^2);
  b = clip((sum y - sum_k s_k^T x_k) / n, -B_b, B_b) (B_b = B_y) is then a post-processing, and
  the selection's residual bound grows by B_b: Delta_sel = 2 B_a (B_a eta + B_y + B_b) / n.

Worst-case plan: T rounds x K selections, K F feature releases of sensitivity max_l Delta_feat(l):
``Composed(SelfComposed(SelfComposed(RNM, K), T), SelfComposed(DiscreteGaussian(sigma, sqrt(K) Delta), F))``
(their Renyi curves: F of sensitivity sqrt(K) Delta compose exactly as K F of sensitivity Delta), calibrated
by ``vflpriv.vertical.privacy.calibrate_accountant`` with the split between the two parts.
"""
from __future__ import annotations

import math

import numpy as np

from ...errors import InputError
from .. import privacy as P


#: the accountants that account for the ring's exact discrete Gaussian: rdp by its Renyi curve
#: (docs/sensitivity.md 4.9, 5.7), pld as the continuous Gaussian plus the ring's total variation
#: (4.9.1: every path's ring events state their lattice), best the smaller of the two
RING_ACCOUNTANTS = ("rdp", "pld", "best")


def check_accountant(accountant) -> None:
    """dp-bcfw-secure adds exact discrete Gaussian noise in the ring (every path), which the rdp
    accountant accounts for by its Renyi curve and pld, since every path states the ring's
    lattice, as the continuous Gaussian plus its total variation (best takes the smaller; the
    least-squares plan's noisy-max selections keep optimal out): any other is refused, by name."""
    if accountant not in RING_ACCOUNTANTS:
        raise InputError(f"--accountant {accountant} cannot guard --algorithm dp-bcfw-secure: "
                         f"its ring noise is the exact discrete Gaussian, which the rdp "
                         f"accountant accounts for by its Renyi curve and pld as the continuous "
                         f"Gaussian plus the ring's total variation (best takes the smaller; "
                         f"docs/sensitivity.md 4.9, 4.9.1, 5.7); use rdp, pld or best")


def check_row_clip(v):
    return P.check_bound("row_clip", v)


def check_feature_cap(F):
    if isinstance(F, bool) or not isinstance(F, (int, np.integer)) or F < 1:
        raise InputError(f"max_features (distinct features per party) must be a positive integer, "
                         f"got {F!r}")
    return int(F)


def row_clips(feature_bound, row_clip, block_sizes):
    """C_k = min(row_clip, B_a sqrt(p_k)) per party (row_clip None: B_a sqrt(p_k), no clipping)."""
    Ba = float(feature_bound)
    out = []
    for p in block_sizes:
        nat = Ba * math.sqrt(p)
        out.append(nat if row_clip is None else min(float(row_clip), nat))
    return out


def feature_sensitivity(feature_bound, clips, holder):
    """L2 sensitivity of the K - 1 vectors released when party ``holder`` selects a new feature."""
    return 2.0 * float(feature_bound) * math.sqrt(sum(c * c for k, c in enumerate(clips)
                                                      if k != holder))


def sensitivities(feature_bound, label_bound, eta, n, clips, intercept=False) -> P.Sensitivity:
    """``intercept``: b (|b| <= B_b = B_y) enters every residual (module docstring)."""
    Ba = P.check_bound("feature_bound", feature_bound)
    By = P.check_bound("label_bound", label_bound)
    # |a_r^(k)T x_k + b - y_r| <= B_a eta + B_y (+ B_b with the intercept)
    L = Ba * float(eta) + By + (By if intercept else 0.0)
    # the plan's unit is rounded up by 1e-9: the ledger reserves the plan's Gaussians as an exact
    # pool of mu^2, and the rounds' releases (their sensitivities computed by another formula in
    # floating point) must fit in it even when the worst case is attained exactly
    worst = max(feature_sensitivity(Ba, clips, l) for l in range(len(clips))) * (1 + 1e-9)
    return P.Sensitivity(z_bound=Ba * float(eta), derivative_bound=L, index=2.0 * Ba * L / n,
                         feature=worst)


def label_sensitivity(label_bound, clips, holder):
    """L2 sensitivity of the K - 1 vectors A_k^T y (k != holder) released once when only party
    ``holder`` holds the label: replacing one person moves a_r^(k) y_r by at most 2 C_k B_y."""
    return 2.0 * float(label_bound) * math.sqrt(sum(c * c for k, c in enumerate(clips)
                                                    if k != holder))


def ring_resolution(frac) -> float:
    """The lattice step of a product of two values held with ``frac`` fractional bits: the
    exact integer at scale 2^{2f} is 2^{-2f} Z in the values' units (docs/sensitivity.md 4.9.1;
    the values are truncated toward zero and obey the declared bounds, 4.1)."""
    return 2.0 ** (-2 * int(frac))


def product_coordinates(sizes, holders) -> int:
    """The ring coordinates released when each party in ``holders`` has one column multiplied by
    every other party's block: sum over the holders l of sum_{k != l} p_k."""
    sizes = [int(p) for p in sizes]
    total = sum(sizes)
    return sum(total - sizes[int(l)] for l in holders)


def ring_lattice(ring, holders):
    """``(resolution, coordinates)`` of a release of products by ``holders`` on the ring
    ``ring`` = (frac, block sizes); None when ``ring`` is None (the Renyi charge only)."""
    if ring is None:
        return None
    frac, sizes = ring
    return ring_resolution(frac), product_coordinates(sizes, holders)


def plan_lattice(frac_of_sigma, sizes):
    """The plan's lattice as a function of sigma: a plan unit stands for K feature releases (or
    the label's, or the float-noised intercept's, counted as such units), each with at most
    max_l sum_{k != l} p_k ring coordinates, at the step 2^{-2f} of the fraction bits f the run
    uses at that sigma (``frac_of_sigma``)."""
    sizes = [int(p) for p in sizes]
    per_unit = len(sizes) * max(product_coordinates(sizes, [l]) for l in range(len(sizes)))
    return lambda sigma: (ring_resolution(frac_of_sigma(sigma)), per_unit)


def label_release_event(sigma, label_bound, clips, holder, ring=None):
    """A discrete Gaussian: the holder's ring noise (docs/sensitivity.md 4.9); ``ring`` (frac,
    block sizes): its lattice stated (4.9.1)."""
    from accounting import REPLACE_ONE, DiscreteGaussian

    return DiscreteGaussian(sigma, label_sensitivity(label_bound, clips, holder),
                            neighboring=REPLACE_ONE,
                            **P.lattice_fields(ring_lattice(ring, [holder]), sigma))


def label_feature_rounds(sens, label_bound, clips, holder, parties):
    """The label release counted as extra feature rounds of the plan, rounded up: Gaussians with
    one sigma compose exactly as one Gaussian whose squared sensitivity is the sum, so a release
    of sensitivity Delta_y is covered by ceil(Delta_y^2 / (K Delta_feat^2)) rounds of K features
    (an upper bound, used only to calibrate and to check the plan; the ledger gets the exact
    event)."""
    if holder is None:
        return 0
    return _as_feature_rounds(label_sensitivity(label_bound, clips, holder), sens, parties)


def _as_feature_rounds(delta, sens, parties):
    """ceil(Delta^2 / (K Delta_feat^2)): rounds of K feature releases whose Gaussians (one sigma)
    compose to at least one Gaussian of sensitivity Delta."""
    return int(math.ceil(delta * delta / (parties * sens.feature ** 2) - 1e-12))


def intercept_sensitivity(label_bound, clips):
    """L2 sensitivity of the intercept's release (sum y, A_0^T 1, ..., A_{K-1}^T 1): replacing
    one person moves y_r by at most 2 B_y and row r of party k by at most 2 C_k in l2."""
    return 2.0 * math.sqrt(float(label_bound) ** 2 + sum(c * c for c in clips))


def intercept_release_event(sigma, label_bound, clips):
    from accounting import REPLACE_ONE, Gaussian

    return Gaussian(sigma, intercept_sensitivity(label_bound, clips), neighboring=REPLACE_ONE)


def intercept_feature_rounds(sens, label_bound, clips, parties, intercept):
    """The intercept's release counted as extra feature rounds (as :func:`label_feature_rounds`:
    an upper bound for calibrating and checking the plan; the ledger gets the exact event)."""
    if not intercept:
        return 0
    return _as_feature_rounds(intercept_sensitivity(label_bound, clips), sens, parties)


def calibrate(noise, sens, epsilon, delta, rounds, parties, feature_cap, split, accountant,
              label_rounds=0, lattice=None):
    """Noise (b, sigma) for the worst-case plan; see the module docstring.  ``label_rounds``:
    the label release as extra feature rounds (:func:`label_feature_rounds`); ``lattice``: the
    plan's ring lattice (:func:`plan_lattice`)."""
    return P.calibrate_accountant(noise, sens, epsilon, delta, rounds, parties, split, accountant,
                                  feature_rounds=feature_cap + int(label_rounds), discrete=True,
                                  lattice=lattice)


def round_feature_event(sigma, feature_bound, clips, holders, ring=None):
    """One discrete Gaussian (the ring noise, docs/sensitivity.md 4.9) for the round's new
    features (holders: the party of each); ``ring`` (frac, block sizes): its lattice stated
    (4.9.1: step 2^{-2f}, every product's coordinates)."""
    from accounting import REPLACE_ONE, DiscreteGaussian

    s2 = sum(feature_sensitivity(feature_bound, clips, l) ** 2 for l in holders)
    return DiscreteGaussian(sigma, math.sqrt(s2), neighboring=REPLACE_ONE,
                            **P.lattice_fields(ring_lattice(ring, holders), sigma))
