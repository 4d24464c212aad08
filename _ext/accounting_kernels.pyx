# cython: language_level=3
"""Compiled helpers of the privacy accountant (module ``accounting._kernels``).

Two loops that numpy cannot vectorize well, because each is a series whose length depends on its
arguments:

* ``log_a_subsampled_gaussian``: log A_alpha of the Poisson-subsampled Gaussian mechanism, the
  quantity whose logarithm divided by (alpha - 1) is its Renyi divergence (Mironov, Talwar, Zhang
  2019, "Renyi Differential Privacy of the Sampled Gaussian Mechanism", Sections 3.2-3.3).
* ``kov_delta_pure``: the exact privacy profile of k-fold composition of an epsilon-DP mechanism
  (Kairouz, Oh, Viswanath 2015, Thm 3.3; closed form of Murtagh and Vadhan 2016).

The pure-Python twins live in ``accounting/_reference.py``; tests check they agree.
"""
from libc.math cimport (exp, log, log1p, expm1, erfc, sqrt, lgamma, fabs, INFINITY, M_PI, isnan)
import numpy as np
cimport numpy as cnp

cnp.import_array()


cdef inline double _log_add(double a, double b) noexcept nogil:
    if a == -INFINITY:
        return b
    if b == -INFINITY:
        return a
    if a > b:
        return a + log1p(exp(b - a))
    return b + log1p(exp(a - b))


cdef inline double _log_sub(double a, double b) noexcept nogil:
    # log(exp(a) - exp(b)) for a >= b; the series keeps a >= b up to rounding, clamp at -inf.
    if b == -INFINITY:
        return a
    if b >= a:
        return -INFINITY
    return a + log(-expm1(b - a))


cdef inline double _log_erfc(double x) noexcept nogil:
    # erfc underflows near x = 26.5; past x = 20 use the asymptotic series (relative error < 1e-9).
    cdef double x2
    if x < 20.0:
        return log(erfc(x))
    x2 = x * x
    return -x2 - log(x) - 0.5 * log(M_PI) + log1p(-0.5 / x2 + 0.75 / (x2 * x2) - 1.875 / (x2 * x2 * x2))


cdef double _log_a_int(double q, double sigma, long alpha) noexcept nogil:
    # A_alpha = sum_k C(alpha, k) (1-q)^(alpha-k) q^k exp((k^2 - k) / (2 sigma^2))
    cdef double log_a = -INFINITY
    cdef long k
    cdef double log_coef
    for k in range(alpha + 1):
        log_coef = lgamma(alpha + 1.0) - lgamma(k + 1.0) - lgamma(alpha - k + 1.0)
        log_a = _log_add(log_a, log_coef + k * log(q) + (alpha - k) * log1p(-q)
                         + (k * k - k) / (2.0 * sigma * sigma))
    return log_a


cdef double _log_a_frac(double q, double sigma, double alpha) noexcept nogil:
    # Mironov et al. 2019, Section 3.3: two series, split at z0 = sigma^2 log(1/q - 1) + 1/2.
    cdef double log_a0 = -INFINITY, log_a1 = -INFINITY
    cdef double z0 = sigma * sigma * log(1.0 / q - 1.0) + 0.5
    cdef double log_abs_coef = 0.0      # log |C(alpha, 0)|
    cdef int sign = 1
    cdef long i = 0
    cdef double j, log_t0, log_t1, log_e0, log_e1, log_s0, log_s1, ratio
    while True:
        j = alpha - i
        log_t0 = log_abs_coef + i * log(q) + j * log1p(-q)
        log_t1 = log_abs_coef + j * log(q) + i * log1p(-q)
        log_e0 = log(0.5) + _log_erfc((i - z0) / (sqrt(2.0) * sigma))
        log_e1 = log(0.5) + _log_erfc((z0 - j) / (sqrt(2.0) * sigma))
        log_s0 = log_t0 + (i * i - i) / (2.0 * sigma * sigma) + log_e0
        log_s1 = log_t1 + (j * j - j) / (2.0 * sigma * sigma) + log_e1
        if sign > 0:
            log_a0 = _log_add(log_a0, log_s0)
            log_a1 = _log_add(log_a1, log_s1)
        else:
            log_a0 = _log_sub(log_a0, log_s0)
            log_a1 = _log_sub(log_a1, log_s1)
        i += 1
        if log_s0 < -30.0 and log_s1 < -30.0:
            break
        if i > 100000:
            break
        # C(alpha, i) = C(alpha, i - 1) * (alpha - i + 1) / i
        ratio = (alpha - i + 1.0) / i
        if ratio == 0.0:
            break
        if ratio < 0.0:
            sign = -sign
        log_abs_coef += log(fabs(ratio)) 
    return _log_add(log_a0, log_a1)


def log_a_subsampled_gaussian(double q, double sigma, double[::1] orders):
    """log A_alpha for each order (alpha > 1) of the Poisson-subsampled Gaussian, 0 < q < 1."""
    cdef Py_ssize_t n = orders.shape[0], t
    out = np.empty(n, dtype=np.float64)
    cdef double[::1] res = out
    cdef double a
    with nogil:
        for t in range(n):
            a = orders[t]
            if a == <long>a:
                res[t] = _log_a_int(q, sigma, <long>a)
            else:
                res[t] = _log_a_frac(q, sigma, a)
    return out


def kov_delta_pure(long k, double eps, double eps_g):
    """delta(eps_g) of the k-fold composition of eps-DP randomized response (exact, adaptive-valid).

    delta = (1 + e^eps)^-k * sum_{j : (k - 2j) eps > eps_g} C(k, j) (e^{(k-j) eps} - e^{eps_g + j eps})
    """
    return exp(kov_log_delta_pure(k, eps, eps_g))


def kov_log_delta_pure(long k, double eps, double eps_g):
    """log of ``kov_delta_pure`` (-inf when delta is 0); no underflow however small delta is."""
    cdef double log_norm = k * (eps + log1p(exp(-eps)))      # k log(1 + e^eps), overflow-safe
    cdef double total = -INFINITY
    cdef double log_c, log_term, gap
    cdef long j
    with nogil:
        for j in range(k + 1):
            gap = (k - 2.0 * j) * eps - eps_g
            if gap <= 0.0:
                break
            log_c = lgamma(k + 1.0) - lgamma(j + 1.0) - lgamma(k - j + 1.0)
            log_term = log_c + (k - j) * eps - log_norm + log(-expm1(-gap))
            total = _log_add(total, log_term)
    return total
