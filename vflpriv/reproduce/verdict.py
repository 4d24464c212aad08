"""The verdict rule of ``vflpriv reproduce``: a claim over seeds, decided by a 95% t-interval.

Every claim is reduced to one measured quantity q per seed (a ratio, a margin, a slope) and a
threshold c with a direction ("q > c", "q >= c", "q < c", "q <= c").  Over n seeds with mean m and
sample standard deviation s the two-sided 95% interval is the Student t interval

    m +- t_{0.975, n-1} s / sqrt(n)          (scipy.stats.t.ppf; e.g. t = 4.30 for n = 3,
                                               2.78 for n = 5)

(Student 1908; any statistics text, e.g. Wasserman, *All of Statistics*, 6.3.2).  The claim

- **holds** when the whole interval clears the threshold (for "q > c": low > c),
- **does not hold** when the whole interval is on the other side (for "q > c": high <= c),
- is **inconclusive** otherwise, when n < 2 (no interval), or when any seed cannot measure q
  (e.g. a comparison between two runs of which neither learns).

For ">=" / "<=" the boundary is counted as clearing (low >= c holds; high < c does not).
The seeds' values are treated as independent draws (each seed redraws the data and the run).
"""
from __future__ import annotations

import math

OPS = (">", ">=", "<", "<=")
VERDICTS = ("holds", "does not hold", "inconclusive")


def t_interval(values, level=0.95):
    """``(mean, low, high)`` of the Student t interval; low = high = None for n < 2."""
    from scipy.stats import t

    v = [float(x) for x in values]
    n = len(v)
    if n == 0:
        raise ValueError("no values")
    m = math.fsum(v) / n
    if n < 2:
        return m, None, None
    s = math.sqrt(math.fsum((x - m) ** 2 for x in v) / (n - 1))
    h = float(t.ppf(0.5 + level / 2, n - 1)) * s / math.sqrt(n)
    return m, m - h, m + h


def decide(values, op, threshold):
    """``(verdict, mean, [low, high])`` for the claim "q OP threshold" measured as ``values``
    (one per seed; None = not measurable on that seed)."""
    if op not in OPS:
        raise ValueError(f"op must be one of {OPS}, got {op!r}")
    got = [v for v in values if v is not None and math.isfinite(v)]
    if not got:
        return "inconclusive", None, [None, None]
    m, lo, hi = t_interval(got)
    if len(got) < len(values) or lo is None:
        return "inconclusive", m, [lo, hi]
    c = float(threshold)
    if op == ">":
        verdict = "holds" if lo > c else "does not hold" if hi <= c else "inconclusive"
    elif op == ">=":
        verdict = "holds" if lo >= c else "does not hold" if hi < c else "inconclusive"
    elif op == "<":
        verdict = "holds" if hi < c else "does not hold" if lo >= c else "inconclusive"
    else:
        verdict = "holds" if hi <= c else "does not hold" if lo > c else "inconclusive"
    return verdict, m, [lo, hi]
