"""How far a discrete Gaussian on a fine lattice is from the continuous Gaussian, in total variation.

A discrete Gaussian release q + Y (q an integer vector, Y_j ~ N_Z(0, s^2) or a sum of ``m``
independent N_Z(0, s^2 / m)) equals round(q + Y + U) with U uniform on [-1/2, 1/2)^d, so it is a
post-processing of q + Y + U, and q + Y + U is within total variation T of q + N(0, s^2 I).  A
composition of such releases with others is then (eps, delta_G(eps) + (1 + e^eps) T_total)-DP,
delta_G the privacy profile of the same composition with every such noise replaced by the
continuous Gaussian (docs/sensitivity.md, "The ring's discrete Gaussian within total variation of
the continuous one", 4.9.1).  This module computes the per-coordinate bounds, rounded up:

* one discrete Gaussian (m = 1):  TV(Y + U, N(0, s^2)) <= 1 / (2 s sqrt(2 pi)) + eta(s^2) / 2;
* the sum of m >= 1 independent N_Z(0, v), v = s^2 / m:
  TV(Y_1 + ... + Y_m + U, N(0, s^2)) <= (rho_m (1 + eta(s^2)) + 1 / (s sqrt(2 pi))) / 2,

with eta(w) = 2 sum_{l >= 1} exp(-2 pi^2 w l^2) and rho_m the largest relative deviation of the
sum's pmf from the Gaussian density at the integers, rho_m = max(U_m - 1, 1 - L_m),
U_m = prod_{j=1}^{m-1} (1 + eta(v j / (j + 1))) / (1 + eta(v))^m and L_m the same with
1 - eta(v j / (j + 1)) (the proof in the docs).  At m = 1 both bounds agree.
"""
from __future__ import annotations

import math

#: the smallest positive double: a term that underflows is counted as this (an upper bound)
_TINY = 5e-324
_SQRT_2PI = math.sqrt(2.0 * math.pi)


def _up(x: float, ulps: int = 4) -> float:
    for _ in range(ulps):
        x = math.nextafter(x, math.inf)
    return x


def theta_tail(w: float) -> float:
    """An upper bound on eta(w) = 2 sum_{l >= 1} exp(-2 pi^2 w l^2) (w > 0).

    The ratio of consecutive terms exp(-a (2 l + 1)) (a = 2 pi^2 w) is at most exp(-3 a) for
    l >= 1, so the sum is at most 2 e^-a / (1 - e^-3a), a geometric series; a first term that
    underflows is counted as the smallest double."""
    if not w > 0:
        raise ValueError(f"w must be positive, got {w!r}")
    a = 2.0 * math.pi ** 2 * w
    first = max(math.exp(-a), _TINY) if a < 745.0 else _TINY
    ratio_gap = -math.expm1(-3.0 * a)          # 1 - e^-3a, accurate at small a
    return _up(2.0 * _up(first) / ratio_gap, 8)


def sum_pmf_deviation(s: float, summands: int) -> float:
    """rho_m: for S the sum of ``summands`` = m independent N_Z(0, s^2 / m),
    |P(S = k) / phi_s(k) - 1| <= rho_m at every integer k (phi_s the N(0, s^2) density).
    inf where the bound is not proven (some 1 - eta(.) <= 0)."""
    m = int(summands)
    v = s * s / m
    log_lower = -m * math.log1p(theta_tail(v))
    log_upper = log_lower
    for j in range(1, m):
        e = theta_tail(v * j / (j + 1))
        if e >= 1.0:
            return math.inf
        log_lower += math.log1p(-e)
        log_upper += math.log1p(e)
    # log1p / expm1 each within an ulp or two; the sums within m ulps: a relative 1e-12 margin
    # plus the smallest double covers them
    margin = 1e-12 * (abs(log_lower) + abs(log_upper)) + (m + 4) * 2.0 ** -52 * (
        abs(log_lower) + abs(log_upper))
    below = -math.expm1(log_lower - margin)          # 1 - L_m
    above = math.expm1(log_upper + margin)           # U_m - 1
    return _up(max(below, above, 0.0), 8)


def coordinate_tv(s: float, summands: int = 1) -> float:
    """An upper bound on TV(Y_1 + ... + Y_m + U, N(0, s^2)), Y_i independent N_Z(0, s^2 / m)
    (m = ``summands``; m = 1 is one N_Z(0, s^2)) and U uniform on [-1/2, 1/2): the module
    docstring's bound, rounded up and capped at 1.  ``s`` is in lattice units."""
    if not (s > 0 and math.isfinite(s)):
        raise ValueError(f"s must be a positive finite number, got {s!r}")
    if isinstance(summands, bool) or not isinstance(summands, int) or summands < 1:
        raise ValueError(f"summands must be an integer >= 1, got {summands!r}")
    rounding = 1.0 / (s * _SQRT_2PI)
    if summands == 1:
        value = 0.5 * rounding + 0.5 * theta_tail(s * s)
    else:
        rho = sum_pmf_deviation(s, summands)
        if math.isinf(rho):
            return 1.0
        value = 0.5 * (rho * (1.0 + theta_tail(s * s)) + rounding)
    return min(1.0, _up(value, 8))


def release_tv(sigma: float, resolution: float, coordinates: int, summed: int = 0,
               summands: int = 1) -> float:
    """Total variation bound of one release: ``coordinates`` noisy coordinates on the lattice
    ``resolution`` Z (sigma in the same units as resolution, so s = sigma / resolution),
    ``summed`` of them carrying the sum of ``summands`` discrete Gaussians of variance s^2 /
    summands and the others one N_Z(0, s^2).  TV of independent coordinates adds (a coupling
    coordinate by coordinate), so the bound is a sum, rounded up and capped at 1."""
    s = sigma / resolution
    single = coordinates - summed
    total = 0.0
    if single > 0:
        total += single * coordinate_tv(s, 1)
    if summed > 0:
        total += summed * coordinate_tv(s, summands if summands > 1 else 1)
    return min(1.0, _up(total, 4))


# -- the accountants' side: which leaves are charged as Gaussians plus a TV term -------------

#: the events a stated lattice applies to (``DiscreteGaussian``, ``DistributedDiscreteGaussian``)
_LATTICE_KINDS = ("discrete_gaussian", "distributed_discrete_gaussian")


def on_lattice(leaf) -> bool:
    """Whether ``leaf`` is a discrete Gaussian (single or distributed) with its lattice stated:
    charged as the continuous Gaussian of mu = ``leaf.gaussian_mu`` plus its ``tv``."""
    # by kind, not by class: ``accounting.events`` imports this module (no cycle)
    return (getattr(leaf, "kind", None) in _LATTICE_KINDS
            and getattr(leaf, "resolution", None) is not None)


def gaussian_like(leaf) -> bool:
    """A continuous Gaussian, or a discrete one charged as a Gaussian (``on_lattice``)."""
    return getattr(leaf, "kind", None) == "gaussian" or on_lattice(leaf)


def gaussian_mu(leaf) -> float:
    """The Gaussian mu a ``gaussian_like`` leaf is charged with."""
    return leaf.gaussian_mu if on_lattice(leaf) else leaf.mu


def total_tv(leaves) -> float:
    """T: the summed total-variation bounds of the (leaf, count) pairs on a lattice, rounded
    up (0.0 when there are none).  TV adds over adaptively composed releases (a hybrid argument,
    docs/sensitivity.md 4.9.1)."""
    terms = [n * leaf.tv for leaf, n in leaves if on_lattice(leaf)]
    if not terms:
        return 0.0
    return min(1.0, _up(math.fsum(terms) * (1.0 + 1e-15) + 1e-300, 4))


def tv_share(epsilon: float, tv: float) -> float:
    """(1 + e^eps) T, rounded up: what the TV term adds to delta at epsilon."""
    if tv == 0.0:
        return 0.0
    if epsilon > 700.0:
        return math.inf
    return _up((1.0 + math.exp(epsilon)) * tv, 4)


def delta_with_tv(delta: float, epsilon: float, tv: float) -> float:
    """The plan's delta at epsilon: the Gaussian-replaced plan's ``delta`` plus (1 + e^eps) T."""
    if tv == 0.0:
        return delta
    return min(1.0, _up(delta + tv_share(epsilon, tv), 2))


def epsilon_with_tv(epsilon_at, delta: float, tv: float, hint: float | None = None) -> float:
    """Smallest epsilon found with delta_G(eps) + (1 + e^eps) T <= delta, where ``epsilon_at(d)``
    is the Gaussian-replaced plan's (upper-bound) epsilon at delta d.

    With an upper guess e_hi (``hint``, e.g. the Renyi epsilon; or epsilon_at(delta) plus a
    margin): e = epsilon_at(delta - (1 + e^e_hi) T), rounded down in delta.  If e <= e_hi then
    delta_G(e) + (1 + e^e) T <= delta - (1 + e^e_hi) T + (1 + e^e_hi) T = delta: e is valid.
    Otherwise the guess is raised once; inf when that fails too."""
    if tv == 0.0:
        return epsilon_at(delta)
    guesses = []
    if hint is not None and math.isfinite(hint):
        guesses.append(hint)
    for _ in range(3):
        if not guesses:
            base = epsilon_at(delta)
            if not math.isfinite(base):
                return math.inf
            guesses.append(base + max(1e-6, 1e-6 * base))
        e_hi = guesses[-1]
        share = tv_share(e_hi, tv)
        target = delta - share
        if target <= 0:
            return math.inf
        target = math.nextafter(target, 0.0)
        e = epsilon_at(target)
        if e <= e_hi:
            return e
        if not math.isfinite(e):
            return math.inf
        guesses.append(e + max(1e-6, 1e-6 * e))
    return math.inf
