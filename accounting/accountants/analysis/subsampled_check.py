"""A proof, at run time, that dp-accounting's subsampled-Gaussian PMF dominates the mechanism.

dp-accounting builds the Poisson-subsampled Gaussian's PLD by connect the dots (Doroshenko et al.
2022): its masses are second differences of hockey-stick values, whose float error we do not
bound a priori.  Instead the built PMF is checked: a loss measure mu on the grid l_i whose delta is
at least the mechanism's delta at every grid point dominates it everywhere (the mechanism's delta
is convex in v = e^eps, mu's is linear in v between grid points, both are 1 at v = 0 given
mu's total mass >= 1, and mu's is constant past its last point while the mechanism's decreases).
Any shortfall found is added to mu's mass at +infinity, which raises its delta everywhere by as
much.  Composing the padded measures then bounds the composition (the composed delta is a
positive combination of the functions (1 - e^{e - l})_+, increasing in each loss).

**The mechanism's delta from above.**  With noise N(0, sigma^2), sensitivity s = 1, sampling q
(dp-accounting's conventions): under REMOVE, delta(eps) = sup_x U(x) - e^eps L(x) with
U = (1 - q) Phi(x / sigma) + q Phi((x + s) / sigma), L = Phi(x / sigma); the likelihood ratio is
decreasing in x and equals e^eps at x* = -s/2 - (sigma^2 / s) log1p(expm1(eps) / q) (for
e^eps > 1 - q; below, delta = 1 - e^eps).  Under ADD, U = Phi(x / sigma), L = (1 - q)
Phi(x / sigma) + q Phi((x - s) / sigma), x* = s/2 + (sigma^2 / s) log1p(expm1(-eps) / q) (for
e^-eps > 1 - q; above, delta = 0).  At the computed x' the value U(x') - e^eps L(x') is below
delta by at most (x' - x*)^2 / 2 times max |U'' - e^eps L''| <= (1 + e^eps) 0.25 / sigma^2 (the
first derivative vanishes at x*), and x' is within 8 ulps of the magnitudes that make it.  The
difference of the two terms is taken in log space (as ``gaussian.gaussian_delta``), each
log Phi within 8 ulps of itself and its argument within 2 ulps (the Mills ratio bounds the
effect), so the value is raised by a bound on all of it: an upper bound on delta.

**mu's delta from below.**  D_i = sum_{j > i} p_j (1 - e^{l_i - l_j}) satisfies
D_{i-1} = (1 - e^-h) A_{i-1} + e^-h D_i with A_{i-1} = sum_{j >= i} p_j: positive terms only,
so the computed D is within 4 (N + 8) ulps of itself (in extended precision, then rounded).

Measured on the DP-SGD step (sigma 1.1, q 256/60000): the padding is ~1e-13 per side (dp-accounting's
PMF is above the exact delta at the grid points checked, by ~1.5e-13 at eps = -0.52 on the add side).
"""
from __future__ import annotations

import math

import numpy as np

from . import pld_grid as grid
from .pld_error import U as ULP


def _log_diff_upper(log_a, log_b, args_a, args_b, extra_a=0.0, extra_b=0.0):
    """An upper bound on e^{log_a} - e^{log_b} (>= 0), log_a, log_b from log_ndtr at arguments
    args (errors as in ``gaussian.gaussian_delta``); extra_* are further absolute log errors."""
    err_a = 8 * ULP * np.abs(log_a) + (np.abs(args_a) + 1.6) * 4 * ULP * (np.abs(args_a) + 1) \
        + extra_a
    err_b = 8 * ULP * np.abs(log_b) + (np.abs(args_b) + 1.6) * 4 * ULP * (np.abs(args_b) + 1) \
        + extra_b
    gap = log_b - log_a - err_a - err_b - 4 * ULP * (np.abs(log_a) + np.abs(log_b))
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        value = np.exp(log_a + err_a) * -np.expm1(np.minimum(gap, 0.0)) * (1 + 8 * ULP)
    return np.where(gap >= 0, 0.0, value)


def mechanism_delta_upper(eps: np.ndarray, sigma: float, q: float, remove: bool) -> np.ndarray:
    """Upper bounds on the subsampled Gaussian's delta at the (float) epsilons ``eps``."""
    from scipy.special import log_ndtr

    s = 1.0
    eps = np.asarray(eps, dtype=np.float64)
    out = np.zeros_like(eps)
    log_q = math.log(q)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        if remove:
            inside = eps > math.log1p(-q)
            out[~inside] = -np.expm1(eps[~inside]) * (1 + 4 * ULP)
            e = eps[inside]
            lg = np.log1p(np.expm1(e) / q)
            x = -s / 2 - sigma * sigma / s * lg
            za, zb = (x + s) / sigma, x / sigma
            # q Phi(za) - (e^eps - 1 + q) Phi(zb), and e^eps - 1 + q = q e^{lg}
            value = q * _log_diff_upper(log_ndtr(za), lg + log_ndtr(zb), za, zb,
                                        extra_b=4 * ULP * (np.abs(lg) + 1))
        else:
            inside = eps < -math.log1p(-q)
            e = eps[inside]
            lg = np.log1p(np.expm1(-e) / q)
            x = s / 2 + sigma * sigma / s * lg
            za, zb = x / sigma, (x - s) / sigma
            # (1 - e^eps (1 - q)) Phi(za) - e^eps q Phi(zb)
            log_a_coef = np.log(-np.expm1(e + math.log1p(-q)))
            value = _log_diff_upper(log_a_coef + log_ndtr(za), e + log_q + log_ndtr(zb), za, zb,
                                    extra_a=8 * ULP * (np.abs(log_a_coef) + 1) / np.maximum(
                                        -np.expm1(e + math.log1p(-q)), 1e-300),
                                    extra_b=4 * ULP * (np.abs(e) + abs(log_q) + 1))
        # the computed x is off x* by at most 8 ulps of its parts; the value at x' is below
        # delta by at most dx^2 / 2 (1 + e^eps) 0.25 / sigma^2
        dx = 8 * ULP * (abs(s) + np.abs(x) + sigma * sigma / s * (np.abs(lg) + 1))
        second = dx * dx / 2 * (1 + np.exp(np.minimum(e, 700.0))) * 0.25 / (sigma * sigma)
        # eps itself stands for the real grid point l = i h within 2 ulps; delta is decreasing
        # in eps with slope e^eps L(x*) (envelope theorem), L(x*) <= 2 L(x') here: add that
        if remove:
            log_l = log_ndtr(zb)
        else:
            log_l = np.logaddexp(math.log1p(-q) + log_ndtr(za), log_q + log_ndtr(zb))
        slope = 2 * np.exp(np.minimum(e + log_l, 700.0))
        out[inside] = value + second + slope * 4 * ULP * (np.abs(e) + 1)
    out[~inside] += 4 * ULP * (np.abs(eps[~inside]) + 1)
    return np.minimum(1.0, out)


def measure_delta_lower(p: grid.GridPmf) -> np.ndarray:
    """Lower bounds on the finite part of the measure's delta at each of its grid points.

    The recursion runs in x87 extended precision (np.longdouble, unit round-off 2^-64, checked
    below) so that its bound, 4 (N + 8) ulps, is ~1e-14 rather than ~1e-11 in double.

    The same operations as the loop ``tail += p[i]; d[i-1] = decay * tail + keep * d[i]`` (i from
    N - 1 down to 1), vectorized: the tails by a running sum (np.cumsum adds in order), then the
    first-order recursion y[k] = x[k] + keep * y[k - 1] by scipy's ``lfilter`` (b = [1],
    a = [1, -keep]: one product and one sum per step, as in the loop; scipy.signal is loaded by
    dp-accounting's PLD already).  The loop took ~0.06 s per side at 4e4 points, a seventh of a
    PLD calibration's time; ``_measure_delta_lower_loop`` is kept as the reference
    (tests/test_accounting_pld_error.py checks the two agree bit for bit)."""
    from scipy.signal import lfilter

    h = p.interval
    probs = np.maximum(p.probs, 0.0).astype(np.longdouble)
    n = probs.size
    u = _longdouble_ulp()
    d = np.zeros(n, dtype=np.longdouble)
    decay = -np.expm1(np.longdouble(-h))
    keep = np.exp(np.longdouble(-h))
    if n > 1:
        tails = np.cumsum(probs[:0:-1])                  # tail after adding p[N-1], ..., p[1]
        y = lfilter(np.array([1], dtype=np.longdouble),
                    np.array([1, -keep], dtype=np.longdouble), decay * tails)
        d[:-1] = y[::-1]
    return (d * (1 - 4 * (n + 8) * u) * (1 - 4 * ULP)).astype(np.float64)


def _measure_delta_lower_loop(p: grid.GridPmf) -> np.ndarray:
    """:func:`measure_delta_lower` as the plain loop (the reference its vectorized form is
    tested against)."""
    h = p.interval
    probs = np.maximum(p.probs, 0.0).astype(np.longdouble)
    n = probs.size
    u = _longdouble_ulp()
    d = np.zeros(n, dtype=np.longdouble)
    decay = -np.expm1(np.longdouble(-h))
    keep = np.exp(np.longdouble(-h))
    tail = np.longdouble(0.0)
    for i in range(n - 1, 0, -1):
        tail += probs[i]
        d[i - 1] = decay * tail + keep * d[i]
    return (d * (1 - 4 * (n + 8) * u) * (1 - 4 * ULP)).astype(np.float64)


def _longdouble_ulp() -> float:
    """The unit round-off of np.longdouble (2^-64 on x86; 2^-53 where it is plain double)."""
    eps = float(np.finfo(np.longdouble).eps)
    return max(eps / 2, 2.0 ** -64)


def padding(p: grid.GridPmf, sigma: float, q: float, remove: bool) -> float:
    """The mass to add at +infinity so that the measure provably dominates the mechanism."""
    losses = (p.lower + np.arange(p.probs.size)) * p.interval
    need = mechanism_delta_upper(losses, sigma, q, remove)
    have = measure_delta_lower(p) + p.inf * (1 - 4 * ULP)
    short = float(np.max(need - have)) if need.size else 0.0
    total = float(np.sum(p.probs)) * (1 - (p.probs.size.bit_length() + 136) * ULP) + p.inf
    return max(0.0, short, 1.0 - total) * (1 + 8 * ULP)
