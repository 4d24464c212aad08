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
#: below this delta the PLD answers inf: the convolution truncates ~1e-15 of mass per composition
#: into its infinite tail, and float64 sums over the grid cannot resolve smaller deltas reliably
MIN_DELTA = 1e-12
#: most distinct non-Gaussian releases one PLD composes: each costs its own construction and a
#: convolution (about 0.1 s for a subsampled Gaussian), so 2000 distinct releases would take
#: minutes; past this the accountant declines (with this reason) and RDP answers in milliseconds.
MAX_DISTINCT_LEAVES = 48
#: most repeats of one non-Gaussian release: self-composition grows the grid like sqrt(count)
#: (1e6 repeats of a pure-DP release: 2 s); past this the accountant declines, saying why
MAX_REPEATS = 2_000_000
#: relative safety on the PLD's own arithmetic: epsilon is computed for delta (1 - 1e-6) and a
#: delta answer is inflated by the same factor (seen: 1e-8 relative error at delta = 1e-8)
PLD_SAFETY = 1e-6


def safe_epsilon(build, delta: float) -> float:
    """epsilon of the PLD ``build()`` at delta, with the safety margins above (inf below
    MIN_DELTA, without building anything)."""
    if delta < MIN_DELTA:
        return math.inf
    pld = build()
    # The margin is relative to the part of delta the grid computes; the infinite-loss mass
    # (1 - prod(1 - delta_i) of approximate-DP releases) is exact and needs none.
    infinite = max((getattr(getattr(pld, side, None), "_infinity_mass", 0.0) or 0.0)
                   for side in ("_pmf_remove", "_pmf_add"))
    target = delta - PLD_SAFETY * max(0.0, delta - infinite)
    return max(0.0, pld.get_epsilon_for_delta(target))


def safe_delta(pld, epsilon: float) -> float:
    value = pld.get_delta_for_epsilon(epsilon)
    return min(1.0, value * (1 + PLD_SAFETY) + (MIN_DELTA if value > 0 else 0.0))


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

    def _supports_leaves(self, leaves, relation):
        if not super()._supports_leaves(leaves, relation):
            return False
        others = [n for l, n in leaves if not isinstance(l, Gaussian)]
        return len(others) <= MAX_DISTINCT_LEAVES and max(others, default=0) <= MAX_REPEATS

    def _limit_reason(self, leaves):
        others = [n for l, n in leaves if not isinstance(l, Gaussian)]
        if len(others) > MAX_DISTINCT_LEAVES:
            return (f"the pld accountant composes at most {MAX_DISTINCT_LEAVES} distinct non-Gaussian "
                    f"releases (this plan has {len(others)}); rdp answers such plans")
        if max(others, default=0) > MAX_REPEATS:
            return (f"the pld accountant composes at most {MAX_REPEATS:,} repeats of one release "
                    f"(this plan has {max(others):,}); rdp answers such plans")
        return None

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

    def _why_infinite(self, leaves, relation, delta):
        if delta < MIN_DELTA:
            return (f"delta = {delta:g} is below {MIN_DELTA:g}, which the PLD grid cannot resolve "
                    "(its convolution truncates ~1e-15 of mass per step into the infinite tail); "
                    "the optimal or rdp accountant can")
        return super()._why_infinite(leaves, relation, delta)

    def _epsilon(self, leaves, relation, delta):
        return safe_epsilon(lambda: self.build(leaves, relation), delta)

    def _delta(self, leaves, relation, epsilon):
        return safe_delta(self.build(leaves, relation), epsilon)


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
