"""Renyi-DP accountant (Mironov 2017), converted to (epsilon, delta) with Balle et al. 2020.

RDP curves per event, each a valid upper bound at every order alpha > 1:

* Gaussian, L2 sensitivity D, noise sigma: alpha D^2 / (2 sigma^2)                 (Mironov 2017, Prop 7)
* discrete Gaussian on Z^d, integer-valued query, L2 sensitivity D: alpha D^2 / (2 sigma^2), an upper
  bound (Canonne, Kamath, Steinke 2020, Prop 5, per coordinate; coordinates add; docs/sensitivity.md)
* distributed discrete Gaussian (coordinates summed from several holders' discrete Gaussians):
  alpha mu'^2 / 2 with mu' the event's ``mu`` (Kairouz, Liu, Steinke 2021, Prop 14; events.py)
* Laplace, L1 sensitivity D, scale b, lambda = b / D:                              (Mironov 2017, Prop 6)
      1/(alpha-1) log( alpha/(2 alpha - 1) e^{(alpha-1)/lambda} + (alpha-1)/(2 alpha - 1) e^{-alpha/lambda} )
* Poisson-subsampled Gaussian: log A_alpha / (alpha - 1), add/remove relation     (Mironov, Talwar, Zhang 2019)
* pure eps-DP (Laplace or exponential-noise report-noisy-max, PureDP): the RDP of eps-randomized
  response, which dominates every eps-DP mechanism (exact worst case; Bun & Steinke 2016 Lemma):
      1/(alpha-1) log( (e^{alpha eps} + e^{(1-alpha) eps}) / (1 + e^eps) )
* eps-bounded-range (exponential mechanism, Gumbel report-noisy-max): the exact worst-case Renyi
  divergence of one eps-BR selection (``bounded_range.rdp_bounded_range_exact``: the two-point
  pair M_t at its worst t, in closed form), which is below both the pure-DP curve and the
  alpha eps^2 / 8 of Cesar & Rogers 2021; RDP composes adaptively, so the sum is valid
* rho-zCDP: rho alpha.
* private selection with random stopping (``PrivateSelection``; Papernot & Steinke 2022): the
  base's curve eps(.) at the same orders, then PS22 Theorem 2 (truncated negative binomial) or
  Theorem 6 (Poisson), and monotonicity in the order; ``rdp_private_selection`` below.

Approximate-DP events (delta > 0) have no RDP curve: unsupported.

Conversion (Balle, Barthe, Gaboardi, Hsu, Sato 2020, Thm 21; = Canonne, Kamath, Steinke 2020 Prop 12):
    eps = min_alpha  rdp(alpha) + log((alpha - 1)/alpha) - (log delta + log alpha) / (alpha - 1).
"""
from __future__ import annotations

import math

import numpy as np

from .. import _native
from ..events import (ADD_REMOVE, REPLACE_ONE, ApproxDP, DiscreteGaussian,
                      DistributedDiscreteGaussian, Exponential, Gaussian, Laplace,
                      PoissonSubsampledGaussian, PrivateSelection, PureDP, ReportNoisyMax, ZCDP,
                      flatten)
from .analysis.dp_params import dp_params
from .base import Accountant
from .bounded_range import rdp_bounded_range_exact

#: The order grid of dp-accounting and opacus (fractional 1.1..10.9, integers 11..63, then powers).
DEFAULT_ORDERS = np.array([1 + x / 10.0 for x in range(1, 100)] + list(range(11, 64))
                          + [128, 256, 512, 1024], dtype=np.float64)


def rdp_gaussian(mu: float, orders: np.ndarray) -> np.ndarray:
    return orders * mu * mu / 2


def rdp_laplace(eps: float, orders: np.ndarray) -> np.ndarray:
    # In log space: log( a/(2a-1) e^{(a-1) eps} + (a-1)/(2a-1) e^{-a eps} ) / (a - 1)
    a = orders
    t1 = np.log(a / (2 * a - 1)) + (a - 1) * eps
    t2 = np.log((a - 1) / (2 * a - 1)) - a * eps
    return np.logaddexp(t1, t2) / (a - 1)


def rdp_pure(eps: float, orders: np.ndarray) -> np.ndarray:
    a = orders
    return (np.logaddexp(a * eps, (1 - a) * eps) - (eps + math.log1p(math.exp(-eps)))) / (a - 1)


def rdp_bounded_range(eps: float, orders: np.ndarray) -> np.ndarray:
    return np.minimum(rdp_pure(eps, orders), rdp_bounded_range_exact(eps, orders))


def rdp_subsampled_gaussian(q: float, sigma: float, orders: np.ndarray) -> np.ndarray:
    if q == 1.0:
        return rdp_gaussian(1.0 / sigma, orders)
    log_a = _native.log_a_subsampled_gaussian(float(q), float(sigma),
                                              np.ascontiguousarray(orders, dtype=np.float64))
    return np.asarray(log_a) / (orders - 1)


def _round_up(x: float, ulps: int = 4) -> float:
    for _ in range(ulps):
        x = math.nextafter(x, math.inf)
    return x


def _base_delta(base, orders: np.ndarray, curve: np.ndarray):
    """``delta(eps_hat)``: a delta with which the base event is (eps_hat, delta)-DP: the smallest
    of the Renyi conversion of its curve (``rdp_to_delta``), the exact Gaussian profile when every
    leaf is a continuous Gaussian (Balle & Wang 2018 Thm 8 at mu = sqrt(sum n mu_i^2), exact
    composition, Dong, Roth, Su 2022), and, when every leaf is pure eps_i-DP, the profile of
    eps0-randomized response, eps0 = sum n eps_i, which dominates every eps0-DP mechanism
    (Kairouz, Oh, Viswanath 2015): delta = (e^eps0 - e^eps_hat) / (1 + e^eps0) below eps0, 0
    above.  What does not depend on eps_hat is worked out once, here."""
    leaves = flatten(base)
    mu = None
    if all(type(l) is Gaussian for l, _ in leaves):
        from ..gaussian import gaussian_delta
        mu = _round_up(math.sqrt(math.fsum(n * l.mu * l.mu for l, n in leaves)))
    params = [dp_params(l) for l, _ in leaves]
    eps0 = None
    if all(p is not None and p[1] == 0 for p in params):
        eps0 = _round_up(math.fsum(n * p[0] for p, (_, n) in zip(params, leaves)))

    def delta(eps_hat: float) -> float:
        best = rdp_to_delta(orders, curve, eps_hat)[0]
        if mu is not None:
            best = min(best, gaussian_delta(mu, eps_hat))
        if eps0 is not None:
            pure = 0.0 if eps_hat >= eps0 else \
                _round_up(-math.expm1(eps_hat - eps0) / (1.0 + math.exp(-eps0)))
            best = min(best, pure)
        return best

    return delta


def rdp_private_selection(leaf: PrivateSelection, orders: np.ndarray) -> np.ndarray:
    """Renyi curve of private selection with random stopping (Papernot & Steinke, ICLR 2022,
    arXiv:2110.03620v2), from the base's curve eps(lambda) at the same orders:

    * truncated negative binomial TNB(eta, gamma), PS22 Theorem 2: if Q is (lambda, eps)-RDP and
      (lambda_hat, eps_hat)-RDP, A is (lambda, eps')-RDP with
          eps' = eps + (1 + eta) (1 - 1/lambda_hat) eps_hat + (1 + eta) log(1/gamma) / lambda_hat
                 + log(E[K]) / (lambda - 1);
      lambda_hat is optimised over the accountant's orders and the limit lambda_hat -> 1+ (where
      (1 - 1/lambda_hat) eps_hat -> 0, eps_hat being bounded near 1 by the curve at the smallest
      order, as Renyi divergence does not decrease with the order), which gives (1 + eta)
      log(1/gamma).  The same optimisation as dp-accounting's ``_compute_rdp_repeat_and_select``
      (which has no lambda_hat -> 1 term and takes shape eta >= 0 only).
    * Poisson(mu), PS22 Theorem 6: if Q is (lambda, eps)-RDP and (eps_hat, delta_hat)-DP with
      e^eps_hat <= 1 + 1/(lambda - 1), A is (lambda, eps + mu delta_hat + log(mu)/(lambda - 1))-
      RDP.  eps_hat = log(1 + 1/(lambda - 1)) (rounded down, so the condition holds in floating
      point) and delta_hat from ``_base_delta`` (dp-accounting takes the same eps_hat, with its
      own Renyi conversion for delta_hat).

    Then, Renyi divergence being non-decreasing in the order, each order takes the smallest value
    at any order at least as large (as dp-accounting does).  log E[K] is rounded up."""
    base = np.zeros_like(orders, dtype=np.float64)
    for sub, n in flatten(leaf.base):
        base = base + n * rdp_curve(sub, orders)
    log_mean = leaf.log_expected_count
    log_mean = _round_up(log_mean + 1e-15 * abs(log_mean))
    if leaf.stopping == "poisson":
        out = np.empty_like(base)
        base_delta = _base_delta(leaf.base, orders, base)
        for i, lam in enumerate(orders):
            eps_hat = math.nextafter(math.nextafter(math.log1p(1.0 / (lam - 1.0)), 0.0), 0.0)
            delta_hat = base_delta(eps_hat)
            out[i] = base[i] + leaf.mu * delta_hat + log_mean / (lam - 1.0)
    else:
        log_inv_gamma = -math.log(leaf.gamma)
        with np.errstate(invalid="ignore"):
            terms = (1.0 - 1.0 / orders) * base + log_inv_gamma / orders
        terms = np.where(np.isnan(terms), np.inf, terms)
        c = (1.0 + leaf.eta) * min(float(np.min(terms)), log_inv_gamma)
        out = base + c + log_mean / (orders - 1.0)
    # monotonicity in the order: D_lambda <= D_lambda' for lambda <= lambda'
    order = np.argsort(orders, kind="stable")
    out_sorted = np.minimum.accumulate(out[order][::-1])[::-1]
    result = np.empty_like(out)
    result[order] = out_sorted
    return result


def rdp_curve(leaf, orders: np.ndarray) -> np.ndarray:
    if isinstance(leaf, (Gaussian, DiscreteGaussian, DistributedDiscreteGaussian)):
        return rdp_gaussian(leaf.mu, orders)
    if isinstance(leaf, Laplace):
        return rdp_laplace(leaf.epsilon, orders)
    if isinstance(leaf, PoissonSubsampledGaussian):
        if leaf.neighboring == REPLACE_ONE:
            # Only q = 1 is supported here.  Replacing one record (norm <= 1) moves the clipped
            # sum by up to 2: L2 sensitivity 2, as dp-accounting's REPLACE_ONE PLD assumes.
            return rdp_gaussian(2.0 / leaf.noise_multiplier, orders)
        return rdp_subsampled_gaussian(leaf.sample_rate, leaf.noise_multiplier, orders)
    if isinstance(leaf, ReportNoisyMax):
        return (rdp_bounded_range if leaf.bounded_range else rdp_pure)(leaf.epsilon, orders)
    if isinstance(leaf, Exponential):
        return rdp_bounded_range(leaf.epsilon, orders)
    if isinstance(leaf, PureDP):
        return rdp_pure(leaf.epsilon, orders)
    if isinstance(leaf, ApproxDP) and leaf.delta == 0:
        return rdp_pure(leaf.epsilon, orders)
    if isinstance(leaf, ZCDP):
        return leaf.rho * orders
    if isinstance(leaf, PrivateSelection):
        return rdp_private_selection(leaf, orders)
    raise TypeError(f"no RDP curve for {leaf!r}")


def rdp_to_epsilon(orders: np.ndarray, rdp: np.ndarray, delta: float) -> tuple[float, float]:
    """(epsilon, optimal order); epsilon >= 0."""
    eps = rdp + np.log1p(-1 / orders) - (math.log(delta) + np.log(orders)) / (orders - 1)
    eps = np.where(np.isfinite(eps), eps, np.inf)
    i = int(np.argmin(eps))
    return max(0.0, float(eps[i])), float(orders[i])


def rdp_to_delta(orders: np.ndarray, rdp: np.ndarray, epsilon: float) -> tuple[float, float]:
    """(delta, optimal order); delta <= 1."""
    log_delta = (orders - 1) * (rdp - epsilon + np.log1p(-1 / orders)) - np.log(orders)
    log_delta = np.where(np.isnan(log_delta), np.inf, log_delta)
    i = int(np.argmin(log_delta))
    return min(1.0, math.exp(min(0.0, float(log_delta[i])))), float(orders[i])


class RDPAccountant(Accountant):
    name = "rdp"

    def __init__(self, orders=None):
        self.orders = DEFAULT_ORDERS if orders is None else np.asarray(orders, dtype=np.float64)
        if self.orders.ndim != 1 or not np.all(self.orders > 1):
            raise ValueError("RDP orders must be a 1-D array of numbers > 1")

    def supports_leaf(self, leaf, neighboring):
        if isinstance(leaf, PoissonSubsampledGaussian):
            # The subsampled-Gaussian RDP bound above is for add/remove neighbours.
            return neighboring == ADD_REMOVE or leaf.sample_rate == 1.0
        if isinstance(leaf, ApproxDP):
            return leaf.delta == 0
        if isinstance(leaf, PrivateSelection):
            # supported when its base is (PS22's bounds need the base's Renyi curve)
            return self._supports_leaves(flatten(leaf.base), neighboring)
        return isinstance(leaf, (Gaussian, DiscreteGaussian, DistributedDiscreteGaussian, Laplace, ReportNoisyMax, Exponential,
                                 PureDP, ZCDP))

    def rdp(self, leaves) -> np.ndarray:
        total = np.zeros_like(self.orders)
        for leaf, n in leaves:
            total += n * rdp_curve(leaf, self.orders)
        return total

    def epsilon_and_order(self, event, delta):
        leaves, _ = self._prepare(event)
        return rdp_to_epsilon(self.orders, self.rdp(leaves), delta)

    def _epsilon(self, leaves, relation, delta):
        return rdp_to_epsilon(self.orders, self.rdp(leaves), delta)[0]

    def _delta(self, leaves, relation, epsilon):
        return rdp_to_delta(self.orders, self.rdp(leaves), epsilon)[0]
