"""Pure-Python twins of the compiled helpers in ``_ext/accounting_kernels.pyx``.

Used when the extension is not built (or when ``VFLPRIV_FORCE_REFERENCE=1``), and by the tests as
an independent implementation of the same series.
"""
from __future__ import annotations

import math

import numpy as np


def _log_add(a: float, b: float) -> float:
    if a == -math.inf:
        return b
    if b == -math.inf:
        return a
    hi, lo = (a, b) if a > b else (b, a)
    return hi + math.log1p(math.exp(lo - hi))


def _log_sub(a: float, b: float) -> float:
    if b == -math.inf:
        return a
    if b >= a:
        return -math.inf
    return a + math.log(-math.expm1(b - a))


def _log_erfc(x: float) -> float:
    if x < 20.0:
        return math.log(math.erfc(x))
    x2 = x * x
    return (-x2 - math.log(x) - 0.5 * math.log(math.pi)
            + math.log1p(-0.5 / x2 + 0.75 / x2 ** 2 - 1.875 / x2 ** 3))


def _log_a_int(q: float, sigma: float, alpha: int) -> float:
    log_a = -math.inf
    for k in range(alpha + 1):
        log_coef = math.lgamma(alpha + 1) - math.lgamma(k + 1) - math.lgamma(alpha - k + 1)
        log_a = _log_add(log_a, log_coef + k * math.log(q) + (alpha - k) * math.log1p(-q)
                         + (k * k - k) / (2 * sigma ** 2))
    return log_a


def _log_a_frac(q: float, sigma: float, alpha: float) -> float:
    log_a0 = log_a1 = -math.inf
    z0 = sigma ** 2 * math.log(1 / q - 1) + 0.5
    log_abs_coef, sign, i = 0.0, 1, 0
    while True:
        j = alpha - i
        log_t0 = log_abs_coef + i * math.log(q) + j * math.log1p(-q)
        log_t1 = log_abs_coef + j * math.log(q) + i * math.log1p(-q)
        log_e0 = math.log(0.5) + _log_erfc((i - z0) / (math.sqrt(2) * sigma))
        log_e1 = math.log(0.5) + _log_erfc((z0 - j) / (math.sqrt(2) * sigma))
        log_s0 = log_t0 + (i * i - i) / (2 * sigma ** 2) + log_e0
        log_s1 = log_t1 + (j * j - j) / (2 * sigma ** 2) + log_e1
        if sign > 0:
            log_a0, log_a1 = _log_add(log_a0, log_s0), _log_add(log_a1, log_s1)
        else:
            log_a0, log_a1 = _log_sub(log_a0, log_s0), _log_sub(log_a1, log_s1)
        i += 1
        if (log_s0 < -30 and log_s1 < -30) or i > 100000:
            break
        ratio = (alpha - i + 1) / i
        if ratio == 0:
            break
        if ratio < 0:
            sign = -sign
        log_abs_coef += math.log(abs(ratio))
    return _log_add(log_a0, log_a1)


def log_a_subsampled_gaussian(q: float, sigma: float, orders: np.ndarray) -> np.ndarray:
    return np.array([_log_a_int(q, sigma, int(a)) if float(a).is_integer()
                     else _log_a_frac(q, sigma, float(a)) for a in orders])


def kov_delta_pure(k: int, eps: float, eps_g: float) -> float:
    return math.exp(kov_log_delta_pure(k, eps, eps_g))


def kov_log_delta_pure(k: int, eps: float, eps_g: float) -> float:
    log_norm = k * (eps + math.log1p(math.exp(-eps)))
    total = -math.inf
    for j in range(k + 1):
        gap = (k - 2 * j) * eps - eps_g
        if gap <= 0:
            break
        log_c = math.lgamma(k + 1) - math.lgamma(j + 1) - math.lgamma(k - j + 1)
        total = _log_add(total, log_c + (k - j) * eps - log_norm + math.log(-math.expm1(-gap)))
    return total
