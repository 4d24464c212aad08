"""Conservative root finding for monotone privacy curves.

Every inverse the accountant computes (epsilon from a delta curve, noise from a target epsilon) is
a root of a monotone function.  Brent's method finds it to a tolerance; we then step to the *safe*
side of the root so the returned value never claims more privacy than the curve gives.
"""
from __future__ import annotations

import math
from typing import Callable


def _brentq(f, a, b, xtol, rtol=4 * 2.0 ** -52, maxiter=200):
    from scipy.optimize import brentq

    return brentq(f, a, b, xtol=xtol, rtol=rtol, maxiter=maxiter)


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
