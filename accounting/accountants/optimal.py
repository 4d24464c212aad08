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

* k adaptive eps-bounded-range selections (Gumbel report-noisy-max, exponential mechanism): the
  exact adaptive optimum of Dong, Durfee, Rogers (2020) as a one-dimensional dynamic programme,
  evaluated from above on a grid (``bounded_range``), up to a cost cap on k; past it, blocks of
  that optimum, each replaced by a pair that dominates it, composed as PLDs (``analysis.br_blocks``).

Anything else (subsampling, zCDP, a mix of Gaussian and pure DP) is unsupported here.
"""
from __future__ import annotations

import math

from .. import _native
from ..events import Gaussian, Laplace
from ..gaussian import gaussian_delta, gaussian_epsilon
from ..lattice import delta_with_tv, epsilon_with_tv, gaussian_like, gaussian_mu, total_tv
from .._solve import smallest_x_with
from .base import Accountant
from .pld import MAX_PURE_EPSILON, safe_delta, safe_epsilon
from .analysis.br_blocks import blocks_pmf
from .bounded_range import adaptive_cells, adaptive_delta, adaptive_epsilon
from .analysis.dp_params import dp_params

PLD_DISCRETIZATION = 1e-4
#: KOV's sum has up to k/2 terms and the inverse evaluates it ~40 times: 4e6 releases take ~1 s
#: in C.  Past this the optimal accountant declines and rdp / pld answer.
MAX_KOV_RELEASES = 4_000_000


#: log delta below this is 0 for every purpose (the smallest double is e^-745); clamping keeps
#: the root finder away from -inf.
_LOG_FLOOR = -1.0e4


def _rounding_margin(k: int, eps: float, eps_g: float) -> float:
    """An upper bound on the floating-point error of the computed log delta.

    Each term of the log-space sum carries lgamma(k + 1) + k eps + eps_g in magnitude, evaluated
    with a few ulps of relative error, and k log-additions add one ulp each; 1e-14 of that total
    covers both with room to spare.  Adding it to log delta keeps every answer on the safe side.
    """
    return 1e-14 * (16.0 + math.lgamma(k + 1.0) + 2.0 * k * (eps + 1.0) + abs(eps_g))


def kov_log_delta(k: int, eps: float, delta0: float, eps_g: float) -> float:
    """log delta of the optimal k-fold composition of (eps, delta0)-DP at global epsilon eps_g.

    delta = (1 - keep) + keep * pure with keep = (1 - delta0)^k and ``pure`` the delta of k-fold
    eps-DP randomized response.  Written this way (and not as 1 - keep (1 - pure)) nothing
    cancels: a pure term of 1e-300 stays 1e-300 instead of rounding to 0.
    """
    log_pure = (_native.kov_log_delta_pure(int(k), float(eps), float(eps_g)) if eps > 0
                else -math.inf)
    if log_pure > -math.inf:
        log_pure += _rounding_margin(k, eps, eps_g)
    if delta0 > 0:
        log_keep = k * math.log1p(-delta0)
        log_lost = math.log(-math.expm1(log_keep))          # log(1 - keep), no cancellation
        value = _logaddexp(log_lost, log_keep + log_pure)
    else:
        value = log_pure
    return min(0.0, value)


def _logaddexp(a: float, b: float) -> float:
    if b == -math.inf:
        return a
    if a == -math.inf:
        return b
    hi, lo = (a, b) if a >= b else (b, a)
    return hi + math.log1p(math.exp(lo - hi))


def kov_delta(k: int, eps: float, delta0: float, eps_g: float) -> float:
    """delta of the optimal k-fold composition of (eps, delta0)-DP at global epsilon eps_g."""
    return math.exp(kov_log_delta(k, eps, delta0, eps_g))


def kov_epsilon(k: int, eps: float, delta0: float, delta: float) -> float:
    """Smallest eps_g with kov_delta(eps_g) <= delta (rounded up), compared in log space so that
    deltas down to the smallest double are resolved."""
    log_target = math.log(delta)

    def g(e):
        return max(_LOG_FLOOR, kov_log_delta(k, eps, delta0, e))

    # k * eps rounded up: the float product can sit an ulp below the true total
    top = k * eps * (1 + 4e-16)
    if g(top) > log_target:
        return math.inf
    return smallest_x_with(g, log_target, 0.0, top, xtol=1e-10)


def _rr_pld(leaves, points=None):
    """The composed randomized-response PLDs of (eps_i, delta_i) releases, on a grid bounded at
    any count (``pld.rr_pld``)."""
    from .pld import rr_pld

    return rr_pld(leaves, PLD_DISCRETIZATION, points)


def _bounded_range(leaf) -> bool:
    return bool(getattr(leaf, "bounded_range", False))


#: below this eps the bounded-range analysis divides by e^eps - 1, which has lost its digits
#: (and is 0 below ~1e-16, where it never returned): such selections are analysed as the pure
#: eps-DP releases they also are (KOV, exact for pure DP and an upper bound for them)
MIN_BOUNDED_RANGE_EPSILON = 1e-8


class OptimalComposition(Accountant):
    """Exact values where they exist (see the module docstring), by plan shape:

    * ``gaussian``: only Gaussian releases (exact mu-GDP);
    * ``bounded_range``: k selections that are all eps-bounded-range with one eps (Gumbel
      report-noisy-max, exponential mechanism): the exact adaptive optimum, computed on a grid
      from above (``bounded_range.adaptive_curve``), when k is small enough to compute it, and
      past that blocks of it composed through dominating pairs (``analysis.br_blocks``), an upper bound
      that continues it smoothly;
    * ``homogeneous``: k releases of one (eps, delta0) (KOV, exact);
    * ``heterogeneous``: (eps_i, delta_i) releases (randomized-response PLDs: an upper bound).
    """

    name = "optimal"

    def supports_leaf(self, leaf, neighboring):
        return dp_params(leaf) is not None or gaussian_like(leaf)

    def _supports_leaves(self, leaves, relation):
        if not super()._supports_leaves(leaves, relation):
            return False
        gaussian = [gaussian_like(l) for l, _ in leaves]
        if not (all(gaussian) or not any(gaussian)):
            return False
        mode = "gaussian" if any(gaussian) else self.mode(leaves)
        if mode == "heterogeneous":
            # heterogeneous pure/approx DP goes through the PLD grid: same range limit
            return all(dp_params(l)[0] <= MAX_PURE_EPSILON for l, _ in leaves)
        if mode == "homogeneous":
            return sum(n for _, n in leaves) <= MAX_KOV_RELEASES
        return True

    @staticmethod
    def mode(leaves) -> str:
        """Which exact analysis applies: gaussian, bounded_range, homogeneous or heterogeneous."""
        if gaussian_like(leaves[0][0]):
            return "gaussian"
        params = {dp_params(l) for l, _ in leaves}
        if (len(params) == 1 and all(_bounded_range(l) for l, _ in leaves)
                and MIN_BOUNDED_RANGE_EPSILON <= next(iter(params))[0] <= MAX_PURE_EPSILON):
            return "bounded_range"
        return "homogeneous" if len(params) == 1 else "heterogeneous"

    def _limit_reason(self, leaves):
        k = sum(n for _, n in leaves)
        if (k > MAX_KOV_RELEASES and not any(gaussian_like(l) for l, _ in leaves)
                and self.mode(leaves) == "homogeneous"):
            return (f"the optimal accountant evaluates KOV's sum for at most {MAX_KOV_RELEASES:,} "
                    f"releases (this plan has {k:,}); rdp answers such plans")
        return None

    def is_exact(self, leaves) -> bool:
        """Whether the value for these leaves is the exact optimum, which no valid accountant can
        go below (so ``best`` may skip the others).

        True only for Gaussian-only plans (exact mu-GDP; with discrete Gaussians on a stated
        lattice among them, the exact Gaussian profile plus their TV term, which the PLD, an
        upper bound on the same Gaussian profile plus the same term, never goes below: skipping
        it loses nothing) and for homogeneous plans of generic
        (eps, delta)-DP releases whose only stated guarantee is that (PureDP, ApproxDP, Laplace-
        or exponential-noise report-noisy-max): KOV is then exact.  False when any leaf is a
        Laplace release (its own PLD is below KOV) or eps-bounded-range (a Gumbel selection or
        exponential mechanism: KOV of pure DP over-counts it, and the adaptive bounded-range
        optimum is computed from above on a grid, so PLD or RDP can be lower)."""
        mode = self.mode(leaves)
        if mode == "gaussian":
            return True
        return (mode == "homogeneous"
                and not any(isinstance(l, Laplace) or _bounded_range(l) for l, _ in leaves))

    @staticmethod
    def _mu(leaves):
        return math.sqrt(sum(n * gaussian_mu(l) ** 2 for l, n in leaves))

    def _epsilon(self, leaves, relation, delta):
        mode = self.mode(leaves)
        if mode == "gaussian":
            mu, tv = self._mu(leaves), total_tv(leaves)
            # discrete Gaussians on a stated lattice: the Gaussian profile plus (1 + e^eps) T
            # (docs/sensitivity.md 4.9.1); the Gaussian epsilon at delta is the upper guess
            # raised by a hair (1 + e^eps is near 1 + e^eps_G there)
            return epsilon_with_tv(lambda d: gaussian_epsilon(mu, d), delta, tv)
        (eps, d0), k = dp_params(leaves[0][0]), sum(n for _, n in leaves)
        if mode == "bounded_range" and adaptive_cells(k) is not None:
            return adaptive_epsilon(eps, k, adaptive_cells(k), delta)
        if mode == "bounded_range":       # past the cap: blocks of the adaptive optimum
            return safe_epsilon(lambda points: (blocks_pmf(eps, k, points), None), delta)
        if mode == "homogeneous":
            return kov_epsilon(k, eps, d0, delta)
        return safe_epsilon(lambda points: _rr_pld(leaves, points), delta)

    def _delta(self, leaves, relation, epsilon):
        mode = self.mode(leaves)
        if mode == "gaussian":
            return delta_with_tv(gaussian_delta(self._mu(leaves), epsilon), epsilon,
                                 total_tv(leaves))
        (eps, d0), k = dp_params(leaves[0][0]), sum(n for _, n in leaves)
        if mode == "bounded_range" and adaptive_cells(k) is not None:
            return adaptive_delta(eps, k, adaptive_cells(k), epsilon)
        if mode == "bounded_range":
            return safe_delta(lambda points: (blocks_pmf(eps, k, points), None), epsilon)
        if mode == "homogeneous":
            return kov_delta(k, eps, d0, epsilon)
        return safe_delta(lambda points: _rr_pld(leaves, points), epsilon)
