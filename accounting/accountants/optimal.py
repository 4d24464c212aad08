"""Exact privacy profiles where they exist.

* k-fold adaptive composition of one (eps, delta0)-DP mechanism: the optimal composition theorem of
  Kairouz, Oh, Viswanath (2015, Thm 3.3), in the closed form of Murtagh & Vadhan (2016):

      delta(eps_g) = 1 - (1 - delta0)^k [1 - (1 + e^eps)^-k sum_j C(k, j) max(0, e^{(k-j)eps} - e^{eps_g + j eps})].

  This is exact: k-fold randomized response attains it.
* Heterogeneous (eps_i, delta_i) releases: the exact value is #P-hard to compute (Murtagh & Vadhan);
  we compose the randomized-response dominating pairs as privacy loss distributions with
  dp-accounting (pessimistic discretisation, so the value is an upper bound within 1e-4-ish).
* Compositions of Gaussian mechanisms only: exactly mu-GDP with mu = sqrt(sum mu_i^2)
  (Dong, Roth, Su 2022), converted with the analytic Gaussian profile (Balle & Wang 2018).

Anything else (subsampling, zCDP, a mix of Gaussian and pure DP) is unsupported here.
"""
from __future__ import annotations

import math

from .. import _native
from ..events import Gaussian
from ..gaussian import gaussian_delta, gaussian_epsilon
from .._solve import smallest_x_with
from .base import Accountant
from .pld import MAX_PURE_EPSILON
from ._dp_params import dp_params

PLD_DISCRETIZATION = 1e-4


def kov_delta(k: int, eps: float, delta0: float, eps_g: float) -> float:
    """delta of the optimal k-fold composition of (eps, delta0)-DP at global epsilon eps_g."""
    pure = _native.kov_delta_pure(int(k), float(eps), float(eps_g)) if eps > 0 else 0.0
    keep = math.exp(k * math.log1p(-delta0)) if delta0 > 0 else 1.0   # (1 - delta0)^k
    return min(1.0, 1.0 - keep * (1.0 - pure))


def kov_epsilon(k: int, eps: float, delta0: float, delta: float) -> float:
    """Smallest eps_g with kov_delta(eps_g) <= delta (rounded up)."""
    if kov_delta(k, eps, delta0, k * eps) > delta:
        return math.inf
    return smallest_x_with(lambda e: kov_delta(k, eps, delta0, e), delta, 0.0, k * eps,
                           xtol=1e-10)


def _rr_pld(leaves):
    from dp_accounting.pld import common
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    total = None
    for leaf, n in leaves:
        eps, d0 = dp_params(leaf)
        pld = pld_lib.from_privacy_parameters(common.DifferentialPrivacyParameters(eps, d0),
                                              value_discretization_interval=PLD_DISCRETIZATION)
        if n > 1:
            pld = pld.self_compose(n)
        total = pld if total is None else total.compose(pld)
    return total


class OptimalComposition(Accountant):
    name = "optimal"

    def supports_leaf(self, leaf, neighboring):
        return dp_params(leaf) is not None or isinstance(leaf, Gaussian)

    def _supports_leaves(self, leaves, relation):
        if not super()._supports_leaves(leaves, relation):
            return False
        gaussian = [isinstance(l, Gaussian) for l, _ in leaves]
        if not (all(gaussian) or not any(gaussian)):
            return False
        if not any(gaussian) and self._mode(leaves) == "heterogeneous":
            # heterogeneous pure/approx DP goes through the PLD grid: same range limit
            return all(dp_params(l)[0] <= MAX_PURE_EPSILON for l, _ in leaves)
        return True

    @staticmethod
    def _mode(leaves):
        if isinstance(leaves[0][0], Gaussian):
            return "gaussian"
        params = {dp_params(l) for l, _ in leaves}
        return "homogeneous" if len(params) == 1 else "heterogeneous"

    @staticmethod
    def _mu(leaves):
        return math.sqrt(sum(n * l.mu ** 2 for l, n in leaves))

    def _epsilon(self, leaves, relation, delta):
        mode = self._mode(leaves)
        if mode == "gaussian":
            return gaussian_epsilon(self._mu(leaves), delta)
        if mode == "homogeneous":
            (eps, d0), k = dp_params(leaves[0][0]), sum(n for _, n in leaves)
            return kov_epsilon(k, eps, d0, delta)
        return _rr_pld(leaves).get_epsilon_for_delta(delta)

    def _delta(self, leaves, relation, epsilon):
        mode = self._mode(leaves)
        if mode == "gaussian":
            return gaussian_delta(self._mu(leaves), epsilon)
        if mode == "homogeneous":
            (eps, d0), k = dp_params(leaves[0][0]), sum(n for _, n in leaves)
            return kov_delta(k, eps, d0, epsilon)
        return _rr_pld(leaves).get_delta_for_epsilon(epsilon)
