"""Privacy-loss-distribution accountant, through dp-accounting (pessimistic discretisation).

Each event becomes a PLD (Koskela et al. 2020; Meiser & Mohammadi 2018; the "connect the dots"
construction of Doroshenko et al. 2022 as implemented in dp-accounting), PLDs compose by
convolution, and the result is an upper bound on the exact privacy profile.

* Gaussian events are first merged exactly (sqrt(sum mu_i^2)-GDP), so their PLD is that of a single
  Gaussian: no discretisation error accumulates over repeats.
* Laplace and Poisson-subsampled Gaussian: dp-accounting's own mechanism PLDs (for the subsampled
  Gaussian under add/remove, built with a vectorized hockey-stick curve, ``_fast_pld``).
* eps-bounded-range selections (Gumbel report-noisy-max, exponential mechanism): the pair that
  dominates every eps-BR selection (``bounded_range.bounded_range_pld``, the upper envelope of the
  two-point pairs over t), valid for adaptive composition and well below the pure-DP pair.
* other pure-DP releases (Laplace/exponential-noise report-noisy-max, PureDP) and (eps, delta)-DP
  releases: the randomized-response dominating pair (``from_privacy_parameters``), which is valid
  for adaptive composition.
* zCDP has no PLD: unsupported.
"""
from __future__ import annotations

import math
from functools import lru_cache

from ..events import (REPLACE_ONE, ApproxDP, Exponential, Gaussian, Laplace,
                      PoissonSubsampledGaussian, PureDP, ReportNoisyMax)
from ._fast_pld import subsampled_gaussian_pld
from .base import Accountant
from .bounded_range import bounded_range_pld
from ._dp_params import dp_params


#: largest per-release epsilon of a pure/approx-DP leaf the PLD grid is built for
MAX_PURE_EPSILON = 50.0


class PLDAccountant(Accountant):
    name = "pld"

    def __init__(self, value_discretization_interval: float = 1e-4):
        if not value_discretization_interval > 0:
            raise ValueError("value_discretization_interval must be positive, got "
                             f"{value_discretization_interval!r}")
        self.interval = float(value_discretization_interval)

    def supports_leaf(self, leaf, neighboring):
        if not isinstance(leaf, (Gaussian, Laplace, PoissonSubsampledGaussian, ReportNoisyMax,
                                 Exponential, PureDP, ApproxDP)):
            return False
        params = dp_params(leaf)
        # A privacy loss of +-eps spans 2 eps / interval grid points (2e6 at eps = 100): past
        # MAX_PURE_EPSILON the grid is too large (and e^eps overflows past ~709). Other
        # accountants answer such plans.
        return params is None or params[0] <= MAX_PURE_EPSILON

    def build(self, leaves, relation):
        """The composed PrivacyLossDistribution of the leaves."""
        from dp_accounting import NeighboringRelation
        from dp_accounting.pld import privacy_loss_distribution as pld_lib

        plds = []
        mu2 = sum(n * l.mu ** 2 for l, n in leaves if isinstance(l, Gaussian))
        if mu2 > 0:
            plds.append(pld_lib.from_gaussian_mechanism(
                1.0 / math.sqrt(mu2), sensitivity=1.0,
                value_discretization_interval=self.interval))
        rel = (NeighboringRelation.REPLACE_ONE if relation == REPLACE_ONE
               else NeighboringRelation.ADD_OR_REMOVE_ONE)
        for leaf, n in leaves:
            if not isinstance(leaf, Gaussian):
                plds.append(_leaf_pld(leaf, n, rel, self.interval))
        total = plds[0]
        for pld in plds[1:]:
            total = total.compose(pld)
        return total

    def _epsilon(self, leaves, relation, delta):
        return max(0.0, self.build(leaves, relation).get_epsilon_for_delta(delta))

    def _delta(self, leaves, relation, epsilon):
        return self.build(leaves, relation).get_delta_for_epsilon(epsilon)


@lru_cache(maxsize=16)
def _leaf_pld(leaf, n, rel, interval):
    """PLD of ``n`` adaptive repeats of one leaf (cached: ledgers and certificates repeat leaves)."""
    from dp_accounting.pld import common
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    if isinstance(leaf, Laplace):
        pld = pld_lib.from_laplace_mechanism(leaf.scale, sensitivity=leaf.sensitivity,
                                             value_discretization_interval=interval)
    elif isinstance(leaf, PoissonSubsampledGaussian) and rel.name == "ADD_OR_REMOVE_ONE":
        pld = subsampled_gaussian_pld(leaf.noise_multiplier, leaf.sample_rate, interval)
    elif isinstance(leaf, PoissonSubsampledGaussian):
        pld = pld_lib.from_gaussian_mechanism(
            leaf.noise_multiplier, sensitivity=1.0, sampling_prob=leaf.sample_rate,
            neighboring_relation=rel, value_discretization_interval=interval)
    elif getattr(leaf, "bounded_range", False):
        pld = bounded_range_pld(leaf.epsilon, interval)
    else:
        eps, d0 = dp_params(leaf)
        pld = pld_lib.from_privacy_parameters(common.DifferentialPrivacyParameters(eps, d0),
                                              value_discretization_interval=interval)
    return pld.self_compose(n) if n > 1 else pld
