"""Calibration: the value of one free parameter that meets a target (epsilon, delta).

``calibrate(make_event, target_epsilon, target_delta, guess=...)`` brackets the root of
``epsilon(param) = target`` by doubling/halving from the guess, then runs Brent's method and steps
to the safe side, so the returned parameter always satisfies ``epsilon(param) <= target``
(conservative, unlike a bisection that stops on the wrong side; opacus#346).

With ``accountant="best"`` every accountant that supports the plan is calibrated separately and
the most favourable valid answer is kept: min over accountants of epsilon(param) is monotone in the
parameter, so its root is the most favourable of the per-accountant roots.  The cheap accountants go
first and narrow the bracket for the expensive ones.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable

from ._solve import brentq, expand_bracket
from .accountants import ACCOUNTANT_NAMES, UnsupportedEventError, get_accountant
from .accountants.base import check_delta
from .events import DpEvent

#: evaluation cost order: cheap closed forms first, PLD last.
_COST_ORDER = ("basic", "advanced", "rdp", "optimal", "pld")


@dataclass
class CalibrationResult:
    value: float            # the calibrated parameter
    epsilon: float          # epsilon at that value, from ``accountant``
    accountant: str
    evaluations: int
    seconds: float
    per_accountant: dict    # accountant name -> calibrated value (None when unsupported)


def _solve_one(acc, make_event, target_epsilon, delta, guess, lower, upper, discrete, decreasing,
               factor=2.0, rtol=1e-7):
    """(value, evaluations, decreasing) for one accountant; ``decreasing=None`` is detected."""
    evals = 0

    def eps(p):
        nonlocal evals
        evals += 1
        return acc.epsilon(make_event(int(round(p)) if discrete else p), delta)

    if decreasing is None:
        e1, e2 = eps(guess), eps(guess * 1.5)
        decreasing = e2 < e1
    if discrete:
        value = _solve_discrete(eps, target_epsilon, guess, decreasing, lower, upper)
        return value, evals, decreasing
    a, b = (lower, upper) if (lower is not None and upper is not None) else \
        expand_bracket(eps, target_epsilon, guess, decreasing, lower=lower or 0.0, factor=factor)
    ea, eb = eps(a), eps(b)
    safe = b if decreasing else a              # the end that satisfies the target
    if (ea > target_epsilon) == (eb > target_epsilon):
        good = [p for p, e in ((a, ea), (b, eb)) if e <= target_epsilon]
        if not good:
            raise ValueError(f"no value of the parameter in [{a}, {b}] meets epsilon <= {target_epsilon}")
        return (min(good) if decreasing else max(good)), evals, decreasing
    def f(p):
        e = eps(p)
        return (e if math.isfinite(e) else 1e300) - target_epsilon
    # rtol 1e-7 on the parameter is far below anything a deployment can tell apart, and each
    # evaluation of a PLD accountant costs ~0.3 s.
    x = brentq(f, a, b, xtol=1e-12, rtol=rtol)
    # Step to the safe side until the guarantee holds.
    step = max(abs(x) * rtol, 1e-15)
    while eps(x) > target_epsilon:
        x = x + step if decreasing else x - step
        step *= 2
        if (decreasing and x > safe) or (not decreasing and x < safe):
            x = safe
            break
    return x, evals, decreasing


#: the coarse grid of the PLD calibration's first pass (10x the default interval: ~8x cheaper)
COARSE_FACTOR = 10.0


def _solve_pld(acc, make_event, target_epsilon, delta, start, lower, upper, decreasing,
               rtol=1e-7):
    """PLD calibration, coarse to fine: (value, evaluations, decreasing).

    1. Solve on a grid COARSE_FACTOR times coarser (cheap evaluations, bracketed from ``start``,
       e.g. the RDP answer).  Pessimistic PLDs on nested grids only grow as the grid coarsens, so
       the coarse root already meets the target on the fine grid, a hair on the safe side.
    2. On the fine grid, regula falsi (Illinois) between the coarse root and a point on the other
       side placed from the coarse slope: two to four fine evaluations instead of a dozen.
    The fine grid decides: the returned value meets the target under ``acc`` itself.
    """
    from .accountants.pld import PLDAccountant

    coarse = PLDAccountant(acc.interval * COARSE_FACTOR)
    value_c, n_c, decreasing = _solve_one(coarse, make_event, target_epsilon, delta, start, lower,
                                          upper, False, decreasing, factor=1.05, rtol=1e-6)
    evals = n_c

    def fine(p):
        nonlocal evals
        evals += 1
        return acc.epsilon(make_event(p), delta)

    e_c = fine(value_c)
    if e_c > target_epsilon:          # grids not nested as assumed: plain solve from here
        value, n, _ = _solve_one(acc, make_event, target_epsilon, delta, value_c, lower, upper,
                                 False, decreasing, factor=1.05, rtol=rtol)
        return value, evals + n, decreasing
    # the slope from the coarse curve at the root places the other end of the bracket
    step = max(abs(value_c) * 1e-4, 1e-12)
    e_s = coarse.epsilon(make_event(value_c - step if decreasing else value_c + step), delta)
    evals += 1
    slope = (e_s - target_epsilon) / step            # epsilon change per unit towards unsafe
    gap = target_epsilon - e_c
    if slope <= 0 or gap <= rtol * target_epsilon:
        return value_c, evals, decreasing
    move = 2.0 * gap / slope
    other = value_c - move if decreasing else value_c + move
    if lower is not None:
        other = max(other, lower)
    if upper is not None:
        other = min(other, upper)
    e_o = fine(other)
    if e_o <= target_epsilon:                        # still safe: it is the better answer
        return _solve_one(acc, make_event, target_epsilon, delta, other, lower, upper, False,
                          decreasing, factor=1.05, rtol=rtol)[0], evals, decreasing
    # Illinois regula falsi on [safe, unsafe] = [value_c, other]
    safe, f_safe = value_c, e_c - target_epsilon
    bad, f_bad = other, e_o - target_epsilon
    side = 0
    for _ in range(30):
        if abs(bad - safe) <= rtol * abs(safe):
            break
        x = bad - f_bad * (bad - safe) / (f_bad - f_safe)
        if not (min(safe, bad) < x < max(safe, bad)):
            x = 0.5 * (safe + bad)
        f_x = fine(x) - target_epsilon
        if f_x <= 0:
            safe, f_safe = x, f_x
            if side == -1:
                f_bad /= 2
            side = -1
        else:
            bad, f_bad = x, f_x
            if side == 1:
                f_safe /= 2
            side = 1
        if -f_safe <= rtol * target_epsilon:         # epsilon within rtol of the target
            break
    return safe, evals, decreasing


def _optimal_is_exact(event) -> bool:
    from .accountants.optimal import OptimalComposition
    from .events import flatten, neighboring_of

    acc = OptimalComposition()
    try:
        leaves, relation = flatten(event), neighboring_of(event)
    except ValueError:
        return False
    return acc._supports_leaves(leaves, relation) and acc.is_exact(leaves)


def _solve_discrete(eps, target, guess, decreasing, lower, upper):
    """Integer parameter: the most favourable integer that meets the target."""
    lo = max(1, int(lower) if lower is not None else 1)
    if decreasing:   # e.g. nothing natural; smallest integer with eps <= target
        hi = max(lo, int(guess))
        while eps(hi) > target:
            hi *= 2
            if upper is not None and hi > upper:
                raise ValueError("no integer value meets the target")
        while lo < hi:
            mid = (lo + hi) // 2
            if eps(mid) <= target:
                hi = mid
            else:
                lo = mid + 1
        return hi
    # increasing (e.g. a count): the largest integer with eps <= target
    if eps(lo) > target:
        raise ValueError(f"even {lo} release(s) exceed the target epsilon {target}")
    hi = max(lo + 1, int(guess))
    while eps(hi) <= target:
        lo, hi = hi, hi * 2
        if upper is not None and hi > upper:
            return lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if eps(mid) <= target:
            lo = mid
        else:
            hi = mid
    return lo


def calibrate(make_event: Callable[[float], DpEvent], target_epsilon: float, target_delta: float,
              *, guess: float = 1.0, accountant: str = "best", lower: float | None = None,
              upper: float | None = None, discrete: bool = False,
              decreasing: bool | None = None) -> CalibrationResult:
    """Solve for the parameter of ``make_event`` so that epsilon <= target_epsilon at target_delta.

    ``decreasing`` says whether epsilon falls as the parameter grows (noise scales: True;
    epsilons, sample rates, counts: False); None detects it from two evaluations.
    """
    if not (isinstance(target_epsilon, (int, float)) and target_epsilon > 0
            and math.isfinite(target_epsilon)):
        raise ValueError(f"target epsilon must be a positive finite number, got {target_epsilon!r}")
    delta = check_delta(target_delta)
    if not (isinstance(guess, (int, float)) and guess > 0 and math.isfinite(guess)):
        raise ValueError(f"the starting guess must be a positive finite number, got {guess!r}")
    if discrete:
        # Every event the solver builds has an integer parameter; so must the probes below.
        make_event = (lambda f: lambda p: f(int(round(p))))(make_event)
    t0 = time.perf_counter()
    names = [n for n in _COST_ORDER if n in ACCOUNTANT_NAMES] if accountant == "best" else [accountant]
    probe = make_event(guess)
    if accountant == "best" and _optimal_is_exact(probe):
        # no valid accountant goes below an exact optimum: skip the PLD convolutions
        names = [n for n in names if n != "pld"]
    per, evals, best = {}, 0, None
    why = {}                                 # reason -> the accountants that gave it
    seed = None
    if accountant in ("pld", "optimal") and not discrete and get_accountant("rdp").supports(probe):
        # A cheap RDP answer is a close starting point for the costly accountant (RDP bounds
        # are looser, so the root is near and usually on a known side).
        try:
            seed, n, decreasing = _solve_one(get_accountant("rdp"), make_event,
                                             float(target_epsilon), delta, guess, lower, upper,
                                             discrete, decreasing)
            evals += n
        except ValueError:
            seed = None
    for name in names:
        acc = get_accountant(name)
        if not acc.supports(probe):
            per[name] = None
            continue
        # Start the next (more expensive) accountant from the best answer so far: its root is
        # usually close, so bracketing takes few of its costly evaluations.
        start = best[1] if best is not None else (seed or guess)
        close = best is not None or seed is not None
        try:
            # The direction is a property of the parameter, the same for every accountant:
            # detected once (two evaluations) and passed on.
            if name == "pld" and not discrete:
                value, n, decreasing = _solve_pld(acc, make_event, float(target_epsilon), delta,
                                                  start, lower, upper, decreasing)
            else:
                value, n, decreasing = _solve_one(acc, make_event, float(target_epsilon), delta,
                                                  start, lower, upper, discrete, decreasing,
                                                  factor=1.05 if close else 2.0)
        except ValueError as exc:
            if accountant != "best":
                raise
            why.setdefault(str(exc), []).append(name)
            per[name] = None
            continue
        evals += n
        per[name] = value
        if best is None or (value < best[1] if decreasing else value > best[1]):
            best = (name, value)
    if best is None and why:
        # the accountants' own reasons (``even 1 release(s) exceed the target epsilon``), not
        # a generic "no accountant supports" that hides them
        raise ValueError("no accountant could calibrate the plan: " + "; ".join(
            f"{reason} ({', '.join(names)})" for reason, names in why.items()))
    if best is None:
        raise UnsupportedEventError("no accountant supports the plan being calibrated")
    name, value = best
    eps = get_accountant(name).epsilon(make_event(value), delta)
    return CalibrationResult(value=value, epsilon=eps, accountant=name, evaluations=evals,
                             seconds=time.perf_counter() - t0, per_accountant=per)
