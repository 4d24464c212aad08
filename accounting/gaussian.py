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
    """An upper bound on delta(epsilon) of mu-GDP, within a few ulps of the log-CDFs' error.

    delta = e^a (1 - e^{b - a}) with a = log Phi(x_a), b = eps + log Phi(x_b),
    x_a = mu/2 - eps/mu, x_b = -mu/2 - eps/mu: no cancellation in the exponentials, but at small
    mu the two logs nearly agree, so their rounding is large against b - a (a 1.4e-12 relative
    shortfall at mu = 0.0031, delta = 1e-280 before this bound).  Rounding bound: each x within
    2 ulps of (|mu/2| + |eps/mu|), which moves log Phi by at most (|x| + 1.6) times that (the
    Mills ratio phi(x) / Phi(x) <= |x| + 1.6), and scipy's log_ndtr within 8 ulps of itself
    (assumed from its construction: log of a correctly computed ndtr, or an asymptotic series
    carried to double precision below -20).  a is raised and b - a lowered by those bounds."""
    from scipy.special import log_ndtr

    if mu <= 0:
        raise ValueError(f"mu must be positive, got {mu!r}")
    if epsilon < 0:
        raise ValueError(f"epsilon must be >= 0, got {epsilon!r}")
    u = 2.0 ** -53
    ratio = epsilon / mu
    xa, xb = mu / 2 - ratio, -mu / 2 - ratio
    la, lb = float(log_ndtr(xa)), float(log_ndtr(xb))
    dx = 2 * u * (mu / 2 + ratio)
    err_a = 8 * u * abs(la) + (abs(xa) + 1.6) * dx
    err_b = 8 * u * abs(lb) + (abs(xb) + 1.6) * dx + 2 * u * (epsilon + abs(epsilon + lb))
    a = la + err_a
    gap = (epsilon + lb) - la - err_a - err_b - 4 * u * (abs(la) + abs(epsilon + lb))
    if gap >= 0:
        # the bound cannot tell delta from 0; report the smallest positive double (the true
        # delta is positive and, here, far below any delta a user can ask for)
        return math.ulp(0.0)
    value = math.exp(a) * -math.expm1(gap) * (1 + 8 * u)
    return min(1.0, max(math.ulp(0.0), value))


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
