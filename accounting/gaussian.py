"""The Gaussian mechanism's exact privacy profile (Balle & Wang 2018, Thm 8).

For a Gaussian mechanism with mu = sensitivity / sigma (equivalently mu-GDP, Dong, Roth, Su 2022),

    delta(eps) = Phi(mu/2 - eps/mu) - e^eps Phi(-mu/2 - eps/mu),

and T adaptively composed Gaussian releases are exactly sqrt(sum mu_i^2)-GDP (DRS 2022, Cor. 3.3).
Both facts are exact, so these are the values every other accountant is checked against.
"""
from __future__ import annotations

import math

from ._solve import brentq, smallest_x_with


def gaussian_delta(mu: float, epsilon: float) -> float:
    """delta(epsilon) of mu-GDP, computed as a difference of log-CDFs to avoid cancellation."""
    from scipy.special import log_ndtr

    if mu <= 0:
        raise ValueError(f"mu must be positive, got {mu!r}")
    if epsilon < 0:
        raise ValueError(f"epsilon must be >= 0, got {epsilon!r}")
    a = log_ndtr(mu / 2 - epsilon / mu)
    b = epsilon + log_ndtr(-mu / 2 - epsilon / mu)
    # The true delta is positive at every epsilon: where it underflows a double, report the
    # smallest positive double rather than 0.
    if b >= a:
        return math.ulp(0.0)
    return max(math.ulp(0.0), float(math.exp(a) * -math.expm1(b - a)))


def gaussian_epsilon(mu: float, delta: float) -> float:
    """Smallest epsilon >= 0 with delta(epsilon) <= delta (rounded up, never below the truth)."""
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    if gaussian_delta(mu, 0.0) <= delta:
        return 0.0
    hi = mu * mu / 2 + mu * math.sqrt(2 * math.log(1 / delta)) + 1.0
    while gaussian_delta(mu, hi) > delta:
        hi *= 2
    return smallest_x_with(lambda e: gaussian_delta(mu, e), delta, 0.0, hi, xtol=1e-12)


def gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """Smallest sigma with the Gaussian mechanism (epsilon, delta)-DP (analytic calibration)."""
    if not epsilon > 0:
        raise ValueError(f"epsilon must be positive, got {epsilon!r}")
    # delta(eps) grows with mu; find the largest mu with delta(mu, eps) <= delta.
    lo, hi = 1e-6, 1.0
    while gaussian_delta(hi, epsilon) <= delta:
        hi *= 2
    mu = _largest_mu(epsilon, delta, lo, hi)
    return sensitivity / mu


def _largest_mu(epsilon, delta, lo, hi):
    mu = brentq(lambda m: gaussian_delta(m, epsilon) - delta, lo, hi, xtol=1e-14, rtol=1e-15)
    step = mu * 1e-13
    while gaussian_delta(mu, epsilon) > delta:
        mu -= step
        step *= 2
    return mu
