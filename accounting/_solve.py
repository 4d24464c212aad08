"""Conservative root finding for monotone privacy curves.

Every inverse the accountant computes (epsilon from a delta curve, noise from a target epsilon) is
a root of a monotone function.  Brent's method finds it to a tolerance; we then step to the *safe*
side of the root so the returned value never claims more privacy than the curve gives.
"""
from __future__ import annotations

import math
from typing import Callable


def brentq(f, a: float, b: float, xtol: float = 1e-12, rtol: float = 4 * 2.0 ** -52,
           maxiter: int = 200) -> float:
    """Brent's method (Brent 1973, ch. 4; the zeroin algorithm, as in scipy's ``brentq``).

    Our own copy so that calibration does not import ``scipy.optimize`` (about 0.4-1.5 s here),
    which would dominate the cost of an RDP calibration (about 25 ms).  ``f(a)`` and ``f(b)``
    must have opposite signs; returns x with |x - root| <= xtol + rtol |x|.
    """
    fa, fb = f(a), f(b)
    if fa == 0:
        return a
    if fb == 0:
        return b
    if (fa > 0) == (fb > 0):
        raise ValueError(f"f(a) and f(b) must have opposite signs (a={a}, b={b})")
    c, fc = a, fa
    d = e = b - a
    for _ in range(maxiter):
        if (fb > 0) == (fc > 0):
            c, fc = a, fa
            d = e = b - a
        if abs(fc) < abs(fb):
            a, b, c = b, c, b
            fa, fb, fc = fb, fc, fb
        tol = 2 * rtol * abs(b) + 0.5 * xtol
        m = 0.5 * (c - b)
        if abs(m) <= tol or fb == 0:
            return b
        if abs(e) >= tol and abs(fa) > abs(fb):
            s = fb / fa
            if a == c:                      # secant step
                p, q = 2 * m * s, 1 - s
            else:                           # inverse quadratic interpolation
                q, r = fa / fc, fb / fc
                p = s * (2 * m * q * (q - r) - (b - a) * (r - 1))
                q = (q - 1) * (r - 1) * (s - 1)
            if p > 0:
                q = -q
            p = abs(p)
            if 2 * p < min(3 * m * q - abs(tol * q), abs(e * q)):
                e, d = d, p / q             # accept interpolation
            else:
                d = e = m                   # bisection
        else:
            d = e = m
        a, fa = b, fb
        b += d if abs(d) > tol else (tol if m > 0 else -tol)
        fb = f(b)
    raise RuntimeError(f"Brent's method did not converge in {maxiter} iterations")


_brentq = brentq


def smallest_x_with(g: Callable[[float], float], target: float, lo: float, hi: float,
                    xtol: float = 1e-9) -> float:
    """Smallest x in [lo, hi] (up to xtol, rounded up) with g(x) <= target, g non-increasing.

    Returns ``lo`` if g(lo) <= target and ``math.inf`` if g(hi) > target.
    """
    glo = g(lo)
    if glo <= target:
        return lo
    if g(hi) > target:
        return math.inf
    x = _brentq(lambda t: g(t) - target, lo, hi, xtol=xtol)
    # Step right until the guarantee holds: Brent's answer may sit a hair left of the root.
    step = max(xtol, abs(x) * 1e-12)
    while g(x) > target:
        x = min(hi, x + step)
        step *= 2
    return x


def expand_bracket(g: Callable[[float], float], target: float, start: float,
                   decreasing: bool, lower: float = 0.0, max_steps: int = 200,
                   factor: float = 2.0):
    """Find [a, b] around the root of g(x) = target starting from ``start`` (> lower).

    Steps grow geometrically by ``factor``; a factor near 1 suits a start known to be close.
    """
    a = b = float(start)
    ga = g(a)
    for _ in range(max_steps):
        over = ga > target
        if over == decreasing:   # need to move right
            b = lower + (a - lower) * factor
            gb = g(b)
            if (gb > target) != over:
                return a, b
            a, ga = b, gb
        else:                    # need to move left (towards ``lower``)
            b = a
            a = lower + (a - lower) / factor
            ga = g(a)
            if (ga > target) != over:
                return a, b
        factor = min(2.0, factor * factor)   # accelerate if the start was not close after all
    raise ValueError(f"could not bracket the target {target} starting from {start}")
