"""Floating-point-safe Laplace noise: Mironov's snapping mechanism.

The attack (Mironov, "On significance of the least significant bits for differential privacy",
ACM CCS 2012, Sections 3-4).  A textbook Laplace sampler computes f(D) + lambda * ln(U) (with a
random sign) in floating point, with U a double from a uniform generator.  Doubles are not the
reals: U takes only multiples of 2^-53, ln and the products round, and the set of doubles that
f(D) + noise can produce depends on f(D) in its low-order bits.  Many outputs can be produced from
f(D) but not from f(D') (and vice versa), so an observer who sees such an output knows which
dataset was used: the privacy loss is infinite, whatever lambda is.  Mironov recovered the input
from a large fraction of outputs of several libraries' Laplace samplers.

The fix (Mironov 2012, Section 5.2, the snapping mechanism), for f with sensitivity 1 and
parameters lambda (noise scale) and B (a bound)::

    f~(D) = clamp_B( round_Lambda( clamp_B(f(D)) (+) S (x) lambda (x) LN(U*) ) )

where clamp_B(x) = max(-B, min(B, x)); U* is uniform on the doubles in (0, 1), each with
probability equal to its unit in the last place (the real-valued uniform rounded down to a
double), S is a uniform random sign, (+) and (x) are IEEE double operations, LN is the natural
logarithm *exactly rounded* to the nearest double, and round_Lambda rounds to the nearest multiple
of Lambda, the smallest power of 2 >= lambda.

Theorem 1 of Mironov 2012 (Section 5.2): this f~ is (1/lambda + 2^-49 B/lambda)-differentially
private when lambda < B < 2^46 lambda.  (diffprivlib's ``Snapping`` uses the form
eps_eff = (eps - 2 eta) / (1 + 12 B eta), eta = 2^-53, from a re-derivation of the same proof; its
correction 12 * 2^-53 B/lambda + 2^-52 is smaller than 2^-49 B/lambda whenever B > lambda, so
the theorem's form used here is the more conservative of the two.)

Sensitivity Delta != 1: scaling by a power of two is exact in binary floating point (away from
overflow and subnormals), so running the mechanism with (lambda, B) on f of sensitivity Delta_2 =
2^ceil(log2 Delta) >= Delta is exactly Delta_2 times the unit-sensitivity mechanism with
(lambda/Delta_2, B/Delta_2) on f/Delta_2.  The claim is therefore

    epsilon = (Delta_2 + 2^-49 B) / lambda,     valid when lambda < B < 2^46 lambda.

Rounding Delta up to a power of two is conservative (a function with sensitivity Delta also has
sensitivity Delta_2).

What this implementation does to meet the theorem's hypotheses:

* U*: an exponent k >= 1 with P(k) = 2^-k (the position of the first 1 bit in a stream of random
  bits) and 52 uniform mantissa bits: U* = (1 + M 2^-52) 2^-k, which gives each double in
  [2^-k, 2^(1-k)) probability 2^-k 2^-52, its ulp.  Bits come from the operating system
  (``os.urandom``) unless a numpy Generator is passed (seeded: reproducible, not for deployment).
* LN: numpy's and libm's ``log`` are not correctly rounded (on 20,000 uniform doubles numpy's
  ``np.log`` differed from the correctly rounded value in 53 cases and ``math.log`` in 11, on the
  machine where this was written).  We evaluate ln(U*) with 200-bit arithmetic (mpmath, or the
  standard library's ``decimal`` at 60 digits when mpmath is missing) and round once to the
  nearest double.  That is the correctly rounded value unless ln(U*) lies within a relative
  2^-199 of a midpoint between two doubles; the hardest-to-round cases of ln on doubles are
  known from exhaustive searches to be nowhere near that close.  It costs about 20 us per draw.
* round_Lambda: x / Lambda, ``rint``, times Lambda: exact, because Lambda is a power of two.

The default Laplace noise elsewhere in vflpriv (numpy ``Generator.laplace``) is *not* protected
against this attack: see docs/audit.md.
"""
from __future__ import annotations

import math
import os

__all__ = ["snapping_epsilon", "snapping_scale", "snapping_event", "snapping_laplace",
           "uniform_doubles", "power_of_two_at_least"]

#: Mironov 2012, Theorem 1: the additive correction is 2^-49 * B / lambda
_CORRECTION = 2.0 ** -49
_MAX_RATIO = 2.0 ** 46


def power_of_two_at_least(x: float) -> float:
    """The smallest power of two >= x > 0 (exact: from the binary exponent)."""
    if not (isinstance(x, (int, float)) and math.isfinite(x) and x > 0):
        raise ValueError(f"need a positive finite number, got {x!r}")
    m, e = math.frexp(float(x))  # x = m 2^e, 0.5 <= m < 1
    return math.ldexp(1.0, e - 1) if m == 0.5 else math.ldexp(1.0, e)


def _check(scale, bound, sensitivity):
    for name, v in (("scale", scale), ("bound", bound), ("sensitivity", sensitivity)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and v > 0):
            raise ValueError(f"snapping {name} must be a positive finite number, got {v!r}")
    if not scale < bound < _MAX_RATIO * scale:
        raise ValueError(f"snapping needs scale < bound < 2^46 * scale (Mironov 2012, Thm 1), got "
                         f"scale={scale!r}, bound={bound!r}")


def snapping_epsilon(scale: float, bound: float, sensitivity: float = 1.0) -> float:
    """Epsilon of the snapping mechanism: (Delta_2 + 2^-49 B) / lambda (module docstring).

    The result is rounded up by one ulp so that floating-point evaluation cannot understate it.
    """
    _check(scale, bound, sensitivity)
    d2 = power_of_two_at_least(sensitivity)
    return math.nextafter((d2 + _CORRECTION * bound) / scale, math.inf)


def snapping_scale(epsilon: float, bound: float, sensitivity: float = 1.0) -> float:
    """The smallest lambda (up to an ulp) whose snapping epsilon is <= ``epsilon``."""
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or \
            not (math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be a positive finite number, got {epsilon!r}")
    d2 = power_of_two_at_least(sensitivity)
    lam = (d2 + _CORRECTION * bound) / epsilon
    while snapping_epsilon(lam, bound, sensitivity) > epsilon:
        lam = math.nextafter(lam, math.inf)
    return lam


def snapping_event(scale: float, bound: float, sensitivity: float = 1.0):
    """The ledger event of one snapping release: ``PureDP(snapping_epsilon(...))``."""
    from .events import PureDP

    return PureDP(epsilon=snapping_epsilon(scale, bound, sensitivity))


def _words(n: int, rng):
    """n uniform 64-bit words: from the OS unless a numpy Generator is given."""
    import numpy as np

    if rng is None:
        return np.frombuffer(os.urandom(8 * n), dtype=np.uint64).copy()
    return rng.integers(0, 2 ** 64 - 1, size=n, dtype=np.uint64, endpoint=True)


def _bit_length(w):
    import numpy as np

    w = w.copy()
    bl = np.zeros(w.shape, dtype=np.int64)
    for s in (32, 16, 8, 4, 2, 1):
        big = (w >> np.uint64(s)) != 0
        bl += s * big
        w = np.where(big, w >> np.uint64(s), w)
    return bl + (w != 0)


def uniform_doubles(n: int, rng=None):
    """n draws of U*: uniform on the doubles in (0, 1), each with probability its ulp."""
    import numpy as np

    # exponent: k = 1 + number of leading zero bits of a random bit stream; P(k) = 2^-k.
    k = np.zeros(n, dtype=np.int64)
    todo = np.arange(n)
    while todo.size:
        w = _words(todo.size, rng)
        nz = w != 0
        k[todo[nz]] += 64 - _bit_length(w[nz]) + 1
        k[todo[~nz]] += 64  # 64 zero bits (probability 2^-64): keep reading the stream
        todo = todo[~nz]
    k = np.minimum(k, 1022)  # below 2^-1022 doubles are subnormal (probability 2^-1022)
    mant = _words(n, rng) >> np.uint64(12)  # 52 uniform bits
    return np.ldexp(1.0 + mant.astype(np.float64) * 2.0 ** -52, -k)


def _ln_correctly_rounded(u):
    """ln(u) rounded once to the nearest double (module docstring)."""
    import numpy as np

    vals = u.tolist()
    try:
        import mpmath
    except ImportError:
        import decimal

        ctx = decimal.Context(prec=60)
        out = [float(ctx.ln(decimal.Decimal(x))) for x in vals]
    else:
        ctx = mpmath.MPContext()
        ctx.prec = 200
        out = [float(ctx.log(x)) for x in vals]
    return np.asarray(out, dtype=np.float64)


def snapping_laplace(value, scale: float, bound: float, sensitivity: float = 1.0, *,
                     size=None, rng=None):
    """Release ``value`` with snapping Laplace noise (Mironov 2012, Section 5.2).

    ``value`` (scalar or array) is the true statistic, with declared sensitivity
    ``sensitivity``; the output lies in [-bound, bound] on the grid of multiples of Lambda, the
    smallest power of two >= scale.  The release is ``snapping_epsilon(scale, bound,
    sensitivity)``-DP; record ``snapping_event(...)`` in the ledger *before* calling this.

    ``rng=None`` draws the random bits from the operating system; a numpy Generator makes the
    draw reproducible (tests and audits only).  ``size`` draws that many independent releases of
    a scalar ``value``.
    """
    import numpy as np

    _check(scale, bound, sensitivity)
    x = np.asarray(value, dtype=np.float64)
    if not np.all(np.isfinite(x)):
        raise ValueError("snapping: value contains NaN or inf")
    if size is not None:
        x = np.broadcast_to(x, (size,) if np.ndim(size) == 0 else tuple(size))
    shape = x.shape
    n = int(np.prod(shape)) if shape else 1
    lam = float(scale)
    big_lambda = power_of_two_at_least(lam)
    u = uniform_doubles(n, rng)
    sign_bits = _words((n + 63) // 64, rng)
    signs = np.unpackbits(sign_bits.view(np.uint8))[:n].astype(np.float64) * 2.0 - 1.0
    noise = signs * (lam * _ln_correctly_rounded(u))  # S (x) lambda (x) LN(U*)
    y = np.clip(x.reshape(-1), -bound, bound) + noise
    y = np.rint(y / big_lambda) * big_lambda  # exact: Lambda is a power of two
    y = np.clip(y, -bound, bound)
    return y.reshape(shape) if shape else float(y[0])
