"""Proven bounds on the floating-point error of the PLD accountant, and delta / epsilon read from a
grid PMF with those bounds added.

Each ``GridPmf`` carries ``rel`` and ``err``: its computed masses are p_i (1 + t_i) + e_i with
|t_i| <= rel and sum_i |e_i| <= err, p the masses the same construction and composition steps give
in exact arithmetic (the *reference*, a pessimistic PLD of the true composition).  Direct sums of
non-negative terms and the constructions make relative errors (they compound to about n u over an
n-fold composition, harmless at any count); FFTs make absolute ones.  delta(eps) = inf +
sum_i p_i w_i with weights w_i = (1 - e^{eps - l_i})_+ in [0, 1], so the reference's delta is at
most (computed + err) / (1 - rel), plus the rounding of the sum itself (``delta_upper``).

**Convolution.**  Sparse inputs (few non-zero masses, as randomized response composed a few
times) are convolved directly over their non-zero entries, and short dense ones by
``np.convolve``: each output is a sum of at most m products of non-negative numbers, within
gamma_m = m u / (1 - m u) of the exact sum, so the L1 error is at most gamma_m ||x||_1 ||y||_1.
Longer ones go through FFTs of length N = 2^n (numpy's pocketfft, real-input transforms: a
complex transform of length N/2 and one more butterfly pass, counted as n + 1 passes below).  Higham, *Accuracy and
Stability of Numerical Algorithms* (2002), Thm 24.2: a radix-2 Cooley-Tukey FFT with twiddles
within mu of the truth satisfies ||fl(F x) - F x||_2 <= c ||F x||_2, c = n eta / (1 - n eta),
eta = mu + gamma_4 (sqrt 2 + mu).  With ||F x||_2 = sqrt(N) ||x||_2, ||F x||_inf <= ||x||_1, one
complex product within sqrt 5 u (Brent, Percival, Zimmermann 2007) and the inverse FFT bounded the
same way (the scaling by 1/N is exact), the computed z = x * y satisfies

    ||z' - z||_2 <= c (||x||_2 ||y||_1 + ||x||_1 ||y||_2) (1 + c) + (c + sqrt 5 u (1 + c)^2) (1 + c) ||x||_1 ||y||_2 (1 + c),

and ||z' - z||_1 <= sqrt(len z) ||z' - z||_2.  We take mu = 4 u and double the bound (room for
pocketfft's radix-4 passes, which regroup the same butterflies).

The bound is what it is: around 1e-13 ||x||_2 ||y||_2 per output point, so a composition's delta
is known to ~1e-9..1e-13 (absolute) depending on how peaked its PMFs are.  The accountant adds it
to every delta and declines (saying why) where it is not small against the delta asked for: the
FFT's real round-off (a floor ~3e-15) is below it, and no answer can slip under the truth.
"""
from __future__ import annotations

import math

import numpy as np

#: unit round-off of float64
U = 2.0 ** -53
#: inputs at most this long are convolved directly (error gamma_m, tiny)
DIRECT_MAX = 64


#: at most this many products in a direct (sparse or dense) convolution
DIRECT_WORK = 1 << 24


def fft_c(n_log2: int) -> float:
    """Higham's c for one FFT of length 2^n (twiddle error 4 u)."""
    mu = 4 * U
    gamma4 = 4 * U / (1 - 4 * U)
    t_eta = max(1, n_log2) * (mu + gamma4 * (math.sqrt(2.0) + mu))
    return t_eta / (1 - t_eta)


def convolve(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, float, float]:
    """(computed a * b, relative error bound, L1 absolute error bound) for non-negative a, b:
    direct sums are within a relative gamma_m of each exact entry, the FFT within an absolute
    L1 bound."""
    size = a.size + b.size - 1
    ia, ib = np.flatnonzero(a), np.flatnonzero(b)
    if ia.size * ib.size <= DIRECT_WORK and ia.size * ib.size < a.size * b.size // 4:
        out = np.bincount((ia[:, None] + ib[None, :]).ravel(),
                          weights=(a[ia][:, None] * b[ib][None, :]).ravel(), minlength=size)
        m = min(ia.size, ib.size) + 1
        return out, m * U / (1 - m * U), 0.0
    if a.size * b.size <= DIRECT_WORK or min(a.size, b.size) <= DIRECT_MAX:
        out = np.convolve(a, b)
        m = min(a.size, b.size) + 1
        return out, m * U / (1 - m * U), 0.0
    ma, mb = _l1(a), _l1(b)
    n = max(1, (size - 1).bit_length())
    big = 1 << n
    out = np.fft.irfft(np.fft.rfft(a, big) * np.fft.rfft(b, big), big)[:size]
    # a real FFT of length 2^n is a complex one of length 2^(n-1) and one more butterfly pass
    # (and its inverse the same passes backwards): counted as n + 1 passes
    c = fft_c(n + 1)
    la, lb = _l2(a), _l2(b)
    l2 = (c * (la * mb + ma * lb) * (1 + c)
          + (c + math.sqrt(5.0) * U * (1 + c) ** 2) * (1 + c) ** 2 * ma * lb)
    return out, 0.0, 2.0 * math.sqrt(size) * l2 * (1 + 16 * U)


def sum_upper(x: np.ndarray) -> float:
    """An upper bound on the exact sum of non-negative x: numpy's pairwise sum (blocks of 128
    summed in order, then halved) is within (128 + log2 N) u of it."""
    return float(np.sum(x)) * (1 + (136 + x.size.bit_length()) * U)


def _l1(x: np.ndarray) -> float:
    return sum_upper(np.abs(x))


def _l2(x: np.ndarray) -> float:
    # each square within 1 ulp, their sum by sum_upper, the square root within 1 ulp
    return math.sqrt(sum_upper(x * x) * (1 + 2 * U)) * (1 + 2 * U)


def ceil_index(loss: float, h: float) -> int:
    """The smallest integer j with j h >= loss exactly (rational arithmetic on the two doubles):
    the pessimistic grid point of a loss (ceil(loss / h) in floats can land one off)."""
    from fractions import Fraction

    j = math.ceil(loss / h)
    fl, fh = Fraction(loss), Fraction(h)
    while j * fh < fl:
        j += 1
    while (j - 1) * fh >= fl:
        j -= 1
    return j


def _side_delta(p, eps: float) -> float:
    """An upper bound on the reference delta of one side at eps (module docstring)."""
    if p.rel >= 0.5:                  # the relative bound says too little to divide by
        return 1.0
    h = p.interval
    first = max(0, math.floor(eps / h) - p.lower)        # indices at or above eps (one extra)
    probs = p.probs[first:]
    if probs.size == 0:
        return (p.inf * (1 + 4 * U) + p.err) / (1 - p.rel)
    losses = (p.lower + first + np.arange(probs.size)) * h
    w = -np.expm1(np.minimum(0.0, eps - losses))
    terms = np.maximum(probs, 0.0) * w
    total = float(np.sum(terms))
    above = float(np.sum(np.maximum(probs, 0.0)))
    # np.sum is pairwise over blocks of 128: relative error <= (128 + log2 N) u; each term's
    # weight: expm1 within 2 ulps, and eps - l off by u (|eps| + |l|), which moves w by as much
    rho = (136 + probs.size.bit_length() + 8) * U
    top = abs(eps) + abs(float(losses[-1])) + abs(float(losses[0]))
    value = total * (1 + rho) + 4 * U * top * above * (1 + rho) + p.inf * (1 + 4 * U) + p.err
    return value / (1 - p.rel) * (1 + 4 * U)


def delta_upper(remove, add, eps: float) -> float:
    """An upper bound on delta(eps) of the reference PLD (max over the two sides)."""
    value = _side_delta(remove, eps)
    if add is not None:
        value = max(value, _side_delta(add, eps))
    return min(1.0, value)


def epsilon_upper(remove, add, delta: float) -> float:
    """The smallest eps >= 0 (to ~1e-12, rounded up) with ``delta_upper`` <= delta; inf if none."""
    if delta_upper(remove, add, 0.0) <= delta:
        return 0.0
    hi = max((p.lower + p.probs.size) * p.interval for p in (remove, add) if p is not None)
    hi = max(hi, 0.0) * (1 + 8 * U) + 1e-300
    if delta_upper(remove, add, hi) > delta:
        return math.inf
    lo = 0.0
    while hi - lo > 1e-12 * max(1.0, hi):
        mid = 0.5 * (lo + hi)
        if delta_upper(remove, add, mid) <= delta:
            hi = mid
        else:
            lo = mid
    return hi


def error(remove, add) -> float:
    """The largest ``err`` of the two sides."""
    return max(remove.err, add.err if add is not None else 0.0)


def relative(remove, add) -> float:
    """The largest ``rel`` of the two sides."""
    return max(remove.rel, add.rel if add is not None else 0.0)
