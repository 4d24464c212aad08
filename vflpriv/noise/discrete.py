"""Exact discrete Gaussian noise on the integers (Canonne, Kamath, Steinke 2020, "The Discrete
Gaussian for Differential Privacy", NeurIPS; arXiv:2004.00010, Section 5, Algorithms 1-3).

N_Z(0, s2) has pmf proportional to exp(-x^2 / (2 s2)) on the integers x.  The sampler below uses
no floating point: ``s2`` is an exact rational (a ``fractions.Fraction``; a float sigma is the
dyadic rational it holds), every Bernoulli trial compares uniform 64-bit words of the generator
(a :func:`vflpriv.noise.generator`, ChaCha20) with the binary digits of an exact rational, and the
result is an exact draw, whatever the scale (the secure path's noise lives at 2^(2f) times the
real scale, up to 2^57).

* Bernoulli(p), p = a / b rational in [0, 1]: for b < 2^64, a uniform integer in [0, b) (numpy's
  unbiased bounded draw) below a; otherwise a uniform U in [0, 1) read 64 bits at a time against
  the binary digits of p, the first word that differs deciding U < p (a tie, probability 2^-64,
  reads the next word).  Exact for every rational p.
* Bernoulli(exp(-gamma)), gamma = a / b >= 0 (CKS Algorithm 1): floor(gamma) trials of
  Bernoulli(exp(-1)), each by the series below, then for the fractional part r in [0, 1): flip
  Bernoulli(r / k) for k = 1, 2, ... until one fails, and return whether that k is odd
  (P[k odd] = exp(-r)).
* discrete Laplace with scale t (CKS Algorithm 2): U uniform in {0..t-1}, kept with probability
  exp(-U/t); V geometric (the number of Bernoulli(exp(-1)) successes before the first failure);
  X = U + t V; a fair sign, rejecting (-, 0); Y = +-X.
* discrete Gaussian (CKS Algorithm 3): t = floor(sigma) + 1; draw Y discrete Laplace(t) and keep
  it with probability exp(-(|Y| - s2/t)^2 / (2 s2)).

Every step runs on all pending draws at once (numpy; the rationals as Python integers in object
arrays), so a release of 10^6 values is a few dozen vectorized passes, not 10^6 Python loops;
``tests/test_noise.py`` tests the draws against the exact pmf (chi-square) and times the rate.
A step with at most ``_FEW`` pending draws (a release of a few values: a selection's scores, one
cross-product) runs a plain-Python twin instead, numpy's per-call overhead being most of the
work there; each twin makes the same calls to the generator in the same order, so the draws are
the same (``tests/test_noise_discrete.py`` compares the two paths).
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..errors import InputError

_W = 64
_LIMIT = 1 << _W
#: draws made together (larger object arrays only run slower)
_CHUNK = 1 << 14
#: at most this many pending draws go through the plain-Python twin of a vectorized step
_FEW = 32


def _words(rng, m) -> np.ndarray:
    """m uniform 64-bit words as Python ints (object array)."""
    return rng.bit_generator.random_raw(m).astype(object)


def bernoulli_rational(rng, num, den) -> np.ndarray:
    """Bernoulli(num / den) for each pair (object arrays or ints, 0 <= num <= den, den > 0):
    exact, by comparing uniform 64-bit words with the digits of num / den."""
    num = np.asarray(num, dtype=object)
    den = np.broadcast_to(np.asarray(den, dtype=object), num.shape)
    m = num.shape[0]
    out = np.zeros(m, dtype=bool)
    small = den < _LIMIT
    if small.any():
        # den < 2^64: a uniform integer in [0, den) (numpy's unbiased bounded draw) below num
        i = np.flatnonzero(small)
        hi = den[i].astype(np.uint64)
        out[i] = rng.integers(0, hi, dtype=np.uint64) < num[i].astype(np.uint64)
    idx = np.flatnonzero(~small)
    rem, d = num[idx], np.array(den[idx], dtype=object)
    while idx.size:
        scaled = rem * (1 << _W)
        digit = scaled // d                      # the next 64 binary digits of the fraction
        rem = scaled - digit * d
        w = _words(rng, idx.size)
        less, more = w < digit, w > digit
        out[idx[less]] = True
        tie = ~(less | more)
        idx, rem, d = idx[tie], rem[tie], d[tie]
    return out


def bernoulli_exp(rng, num, den) -> np.ndarray:
    """Bernoulli(exp(-num/den)) for each pair (object arrays or ints, num >= 0, den > 0), exact
    (CKS Algorithm 1)."""
    num = np.asarray(num, dtype=object)
    den = np.broadcast_to(np.asarray(den, dtype=object), num.shape).copy()
    m = num.shape[0]
    if m <= _FEW:
        return _bernoulli_exp_few(rng, num.tolist(), den.tolist())
    whole = num // den
    frac = num - whole * den
    alive = np.ones(m, dtype=bool)
    # floor(gamma) trials of Bernoulli(exp(-1)): all must succeed
    todo = np.flatnonzero(whole > 0)
    left = whole[todo].copy()
    while todo.size:
        ok = _bernoulli_exp_fraction(rng, np.ones(todo.size, dtype=object),
                                     np.ones(todo.size, dtype=object))
        alive[todo[~ok]] = False
        left = left - 1
        keep = ok & (left > 0)
        todo, left = todo[keep], left[keep]
    idx = np.flatnonzero(alive)
    if idx.size:
        alive[idx] = _bernoulli_exp_fraction(rng, frac[idx], den[idx])
    return alive


def _bernoulli_exp_few(rng, num, den) -> np.ndarray:
    """:func:`bernoulli_exp` on a few draws (lists of Python ints): the same calls to ``rng`` in
    the same order, so the same draws (see :func:`_bernoulli_exp_fraction_few`)."""
    m = len(num)
    whole = [a // b for a, b in zip(num, den)]
    frac = [a - w * b for a, w, b in zip(num, whole, den)]
    alive = [True] * m
    todo = [i for i in range(m) if whole[i] > 0]
    left = [whole[i] for i in todo]
    while todo:
        ok = _bernoulli_exp_fraction_few(rng, [1] * len(todo), [1] * len(todo))
        for i, o in zip(todo, ok):
            if not o:
                alive[i] = False
        keep = [j for j in range(len(todo)) if ok[j] and left[j] > 1]
        todo, left = [todo[j] for j in keep], [left[j] - 1 for j in keep]
    out = np.array(alive, dtype=bool)
    idx = [i for i in range(m) if alive[i]]
    if idx:
        out[idx] = _bernoulli_exp_fraction_few(rng, [frac[i] for i in idx], [den[i] for i in idx])
    return out


def _bernoulli_exp_fraction(rng, num, den) -> np.ndarray:
    """Bernoulli(exp(-r)) for r = num/den in [0, 1]: the first k with Bernoulli(r/k) = 0 is odd
    with probability exp(-r).  Bernoulli(r/k) is [U k < r] for a fresh uniform U = (w + U')/2^64
    (w a 64-bit word): with R = floor(r 2^64), w < floor(R/k) decides yes and w k > R decides no,
    in uint64; the rest (probability below k 2^-64) asks U' < (r 2^64 - w k) / k exactly."""
    m = num.shape[0]
    out = np.zeros(m, dtype=bool)
    if m == 0:
        return out
    if m <= _FEW:
        return _bernoulli_exp_fraction_few(rng, num, den)
    R = ((num * _LIMIT) // den)                      # floor(r 2^64) < 2^64 for r < 1
    full = R >= _LIMIT                               # r = 1 exactly
    R = np.where(full, _LIMIT - 1, R).astype(np.uint64)
    k = np.ones(m, dtype=np.uint64)
    idx = np.arange(m)
    while idx.size:
        w = rng.bit_generator.random_raw(idx.size)
        kk, RR = k[idx], R[idx]
        yes = w < RR // kk
        no = ~yes & (w > RR // kk) & ~full[idx]
        # undecided: w == R // k, or r = 1 (R stands for 2^64 - 1): exact on the rest
        und = np.flatnonzero(~(yes | no))
        if und.size:
            j = idx[und]
            rest_num = num[j] * _LIMIT - w[und].astype(object) * kk[und].astype(object) * den[j]
            rest_den = kk[und].astype(object) * den[j]
            lo = rest_num < 0
            hi = rest_num >= rest_den
            mid = ~(lo | hi)
            res = np.zeros(und.size, dtype=bool)
            res[hi] = True
            if mid.any():
                res[mid] = bernoulli_rational(rng, rest_num[mid], rest_den[mid])
            yes[und] = res
        stop = idx[~yes]
        out[stop] = (k[stop] % 2) == 1
        k[idx[yes]] += np.uint64(1)
        idx = idx[yes]
    return out


def _bernoulli_exp_fraction_few(rng, num, den) -> np.ndarray:
    """:func:`_bernoulli_exp_fraction` on a few draws in plain Python integers: the same
    decisions from the same calls to ``rng`` in the same order (the words of one round drawn
    together, the rare undecided ones passed together to :func:`bernoulli_rational`), so the
    draws and the generator's state after them are identical (tests/test_noise.py); numpy's
    per-call overhead dominates arrays this small."""
    num, den = [int(v) for v in num], [int(v) for v in den]
    m = len(num)
    R = [(a * _LIMIT) // b for a, b in zip(num, den)]
    full = [r >= _LIMIT for r in R]
    R = [_LIMIT - 1 if f else r for r, f in zip(R, full)]
    k = [1] * m
    out = np.zeros(m, dtype=bool)
    idx = list(range(m))
    while idx:
        w = rng.bit_generator.random_raw(len(idx)).tolist()
        yes = [False] * len(idx)
        und = []
        for pos, i in enumerate(idx):
            q = R[i] // k[i]
            if w[pos] < q:
                yes[pos] = True
            elif not (w[pos] > q and not full[i]):
                und.append(pos)
        if und:
            rest = [(num[idx[p]] * _LIMIT - w[p] * k[idx[p]] * den[idx[p]], k[idx[p]] * den[idx[p]])
                    for p in und]
            mid = [j for j, (a, b) in enumerate(rest) if 0 <= a < b]
            for j, (a, b) in enumerate(rest):
                yes[und[j]] = a >= b
            if mid:
                got = bernoulli_rational(rng, np.array([rest[j][0] for j in mid], dtype=object),
                                         np.array([rest[j][1] for j in mid], dtype=object))
                for j, g in zip(mid, got):
                    yes[und[j]] = bool(g)
        nxt = []
        for pos, i in enumerate(idx):
            if yes[pos]:
                k[i] += 1
                nxt.append(i)
            else:
                out[i] = k[i] % 2 == 1
        idx = nxt
    return out


def _geometric_exp1(rng, m) -> np.ndarray:
    """The number of Bernoulli(exp(-1)) successes before the first failure (object array)."""
    if m <= _FEW:                                   # the same calls to rng, in plain Python
        return _objects(_geometric_exp1_few(rng, m))
    v = np.zeros(m, dtype=object)
    idx = np.arange(m)
    one = np.ones(m, dtype=object)
    while idx.size:
        ok = _bernoulli_exp_fraction(rng, one[:idx.size], one[:idx.size])
        v[idx[ok]] += 1
        idx = idx[ok]
    return v


def _uniform_below(rng, t: int, m: int) -> np.ndarray:
    """m uniform integers in {0, ..., t - 1} (object array), by rejection from whole words."""
    bits = max(1, (t - 1).bit_length())
    words = -(-bits // _W)
    if m <= _FEW:                                   # the same calls to rng, in plain Python
        return _objects(_uniform_below_few(rng, t, m))
    out = np.empty(m, dtype=object)
    idx = np.arange(m)
    while idx.size:
        u = np.zeros(idx.size, dtype=object)
        for _ in range(words):
            u = u * (1 << _W) + _words(rng, idx.size)
        u = u >> (words * _W - bits)
        ok = u < t
        out[idx[ok]] = u[ok]
        idx = idx[~ok]
    return out


def _objects(values) -> np.ndarray:
    """A list of Python ints as an object array."""
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def _geometric_exp1_few(rng, m) -> list:
    """:func:`_geometric_exp1` in plain Python (a list): the same calls to ``rng``."""
    v = [0] * m
    idx = list(range(m))
    while idx:
        ok = _bernoulli_exp_fraction_few(rng, [1] * len(idx), [1] * len(idx))
        idx = [i for i, o in zip(idx, ok) if o]
        for i in idx:
            v[i] += 1
    return v


def _uniform_below_few(rng, t: int, m: int) -> list:
    """:func:`_uniform_below` in plain Python (a list): the same calls to ``rng``."""
    bits = max(1, (t - 1).bit_length())
    words = -(-bits // _W)
    vals = [None] * m
    idx = list(range(m))
    while idx:
        u = [0] * len(idx)
        for _ in range(words):
            w = rng.bit_generator.random_raw(len(idx)).tolist()
            u = [a * (1 << _W) + b for a, b in zip(u, w)]
        u = [a >> (words * _W - bits) for a in u]
        for i, a in zip(idx, u):
            if a < t:
                vals[i] = a
        idx = [i for i, a in zip(idx, u) if a >= t]
    return vals


def _discrete_laplace_few(rng, t: int, m: int) -> list:
    """:func:`discrete_laplace` in plain Python (a list) for at most ``_FEW`` draws: the same
    calls to ``rng`` in the same order, so the same draws."""
    out = [None] * m
    need = list(range(m))
    while need:
        n = len(need)
        u = _uniform_below_few(rng, t, n)
        keep = _bernoulli_exp_few(rng, u, [t] * n)
        u = [a for a, k in zip(u, keep) if k]
        v = _geometric_exp1_few(rng, len(u))
        x = [a + t * b for a, b in zip(u, v)]
        neg = (rng.bit_generator.random_raw(len(u)) & np.uint64(1)).tolist()
        y = [-a if g else a for a, g in zip(x, neg) if not (g and a == 0)]
        take = min(len(y), n)
        for i, a in zip(need[:take], y[:take]):
            out[i] = a
        need = need[take:]
    return out


def discrete_laplace(rng, t: int, m: int) -> np.ndarray:
    """m draws of the discrete Laplace with scale t (pmf proportional to exp(-|x|/t)), exact
    (CKS Algorithm 2); an object array of Python ints."""
    if m <= _FEW:
        return _objects(_discrete_laplace_few(rng, t, m))
    out = np.empty(m, dtype=object)
    need = np.arange(m)
    while need.size:
        n = need.size
        u = _uniform_below(rng, t, n)
        keep = bernoulli_exp(rng, u, np.full(n, t, dtype=object))
        u = u[keep]
        v = _geometric_exp1(rng, u.size)
        x = u + t * v
        neg = rng.bit_generator.random_raw(u.size) & np.uint64(1) == 1
        ok = ~(neg & (x == 0))
        y = np.where(neg, -x, x)[ok]
        take = min(y.size, need.size)
        out[need[:take]] = y[:take]
        need = need[take:]
    return out


def _check_s2(sigma2) -> Fraction:
    try:
        s2 = Fraction(sigma2)
    except (TypeError, ValueError):
        raise InputError(f"the discrete Gaussian's variance parameter must be a rational number, "
                         f"got {sigma2!r}") from None
    if s2 <= 0:
        raise InputError(f"the discrete Gaussian's variance parameter must be > 0, got {sigma2!r}")
    return s2


def discrete_gaussian(rng, sigma2, size: int) -> np.ndarray:
    """``size`` exact draws of N_Z(0, sigma2) (CKS Algorithm 3) as an object array of Python
    ints.  ``sigma2``: the exact rational sigma^2 (Fraction, int or float, read exactly);
    ``rng``: a numpy Generator (the DP paths pass :func:`vflpriv.noise.generator`)."""
    s2 = _check_s2(sigma2)
    size = int(size)
    if size < 0:
        raise InputError(f"size must be >= 0, got {size}")
    t = math.isqrt(s2.numerator // s2.denominator) + 1          # floor(sigma) + 1, exactly
    a, b = s2.numerator, s2.denominator
    # gamma = (|Y| - s2/t)^2 / (2 s2) = (|Y| b t - a)^2 / (2 a b t^2)
    den = 2 * a * b * t * t
    out = np.empty(size, dtype=object)
    for lo in range(0, size, _CHUNK):               # object arrays stay cache-sized
        out[lo:lo + _CHUNK] = _gaussian_chunk(rng, t, a, b, den, min(_CHUNK, size - lo))
    return out


def _gaussian_chunk(rng, t, a, b, den, size):
    if size + size // 2 + 8 <= _FEW:                # the same calls to rng, in plain Python
        out, need = [None] * size, list(range(size))
        while need:
            n = len(need)
            y = _discrete_laplace_few(rng, t, n + n // 2 + 8)
            ok = _bernoulli_exp_few(rng, [(abs(v) * (b * t) - a) ** 2 for v in y],
                                    [den] * len(y))
            y = [v for v, o in zip(y, ok) if o]
            take = min(len(y), n)
            for i, v in zip(need[:take], y[:take]):
                out[i] = v
            need = need[take:]
        return _objects(out)
    out = np.empty(size, dtype=object)
    need = np.arange(size)
    while need.size:
        n = need.size
        y = discrete_laplace(rng, t, n + n // 2 + 8)
        num = (np.abs(y) * (b * t) - a) ** 2
        ok = bernoulli_exp(rng, num, np.full(y.size, den, dtype=object))
        y = y[ok]
        take = min(y.size, need.size)
        out[need[:take]] = y[:take]
        need = need[take:]
    return out


def ring_noise(rng, sigma, scale_bits: int, size: int, part=1) -> np.ndarray:
    """Exact N_Z(0, part (sigma 2^scale_bits)^2) as ring elements of Z_{2^64} (uint64, two's
    complement): the noise a party adds to its share of a value held at scale 2^scale_bits.
    ``sigma`` (real units) is read as the exact rational its float holds; ``part`` (a rational,
    e.g. 1/2 for one of two holders' halves) scales the variance exactly."""
    s2 = Fraction(sigma) ** 2 * Fraction(part) * (1 << (2 * int(scale_bits)))
    z = discrete_gaussian(rng, s2, size)
    if z.size and max(abs(int(v)) for v in (z.max(), z.min())) >= 1 << 63:
        raise InputError("discrete Gaussian noise beyond 2^63 in ring units: sigma or the scale "
                         "is too large for Z_{2^64}")
    return z.astype(np.int64).view(np.uint64)
