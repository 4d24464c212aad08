"""Empirical privacy audits: a statistically valid lower bound on epsilon from samples.

An (epsilon, delta)-DP mechanism M satisfies, for every pair of neighbouring datasets D0, D1 and
every event S of the output space (Dwork & Roth 2014, Def. 2.4),

    P[M(D0) in S] <= exp(epsilon) * P[M(D1) in S] + delta      (and the same with D0, D1 swapped).

So any event S whose probabilities we can bound from samples gives a lower bound

    epsilon >= ln( (P_a(S) - delta) / P_b(S) )     (a, b) = (D0, D1) or (D1, D0).

This is the distinguishing-test audit of Jagielski, Ullman & Oprea (2020) and Nasr et al. (2021):
the events are threshold tests on a scalar score, S_t = {score > t} and its complement
{score <= t} (the "output < t" direction), each taken in both orders of the two datasets, so four
tests per threshold.  P_a is replaced by its Clopper-Pearson lower confidence bound and P_b by its
Clopper-Pearson upper bound (exact binomial intervals; ``scipy.stats.beta`` quantiles).

Choosing the threshold
----------------------
The best threshold is found by looking at data, and a bound computed on the same data at the best
of many thresholds is not valid without a correction.  Two corrections are implemented:

* ``method="split"`` (the default): the samples of each side are shuffled (seeded permutation,
  independent of the values) and split into a selection part (``select_fraction``, 20 %) and a
  test part.  On the selection part every candidate (threshold, direction, order) is scored by the
  bound Bonferroni would give there, and the best is kept; on the test part only that single test
  is evaluated, with each confidence bound at level alpha/2 (alpha = 1 - confidence).  The test
  part is independent of the choice, so no multiplicity correction is needed.
* ``method="bonferroni"``: a grid of ``thresholds`` candidates is fixed first (given by the
  caller, or the quantiles of a small pilot part of the samples, ``pilot_fraction``, which are
  then not used for testing: a grid read off the tested samples themselves would not be
  independent of them), every one of the 4 * len(grid) tests is evaluated on the remaining
  samples with each confidence bound at level alpha / (2 * number of tests), and the maximum is
  returned (a union bound over all tests).

* ``method="tradeoff"``: a pilot grid (``pilot_fraction``) of thresholds dense in both tails,
  and one-sided Clopper-Pearson upper bounds on all 4 tail probabilities per threshold at level
  alpha / (4 * number of thresholds): a simultaneous confidence envelope of the distinguisher's
  ROC.  It returns the (epsilon, delta) bound valid for any mechanism and, in ``mu``, a lower
  bound on the Gaussian-DP parameter from the whole ROC (:func:`tradeoff_bound` has the
  argument; docs/audit.md, "The trade-off audit").

Why split is the default: it tests with the mild quantile z_{alpha/2} = 1.96 on 80 % of the
samples, where Bonferroni over 200 thresholds * 4 tests needs z_{alpha/1600} = 4.0.  Measured on
the Laplace mechanism with epsilon = 1 (f(D0) = 0, f(D1) = 1, scale 1), confidence 0.95, default
arguments, mean [min, max] of the bound over independent seeds (100 seeds; 10 at 1e6):

    n per side   split                   bonferroni (200 thresholds, 10 % pilot)
    1e4          0.926 [0.855, 0.990]    0.886 [0.829, 0.944]
    1e5          0.977 [0.951, 0.996]    0.964 [0.951, 0.981]
    1e6          0.993 [0.990, 1.001]    0.989 [0.985, 0.995]

Split is the tighter of the two on average at every size (Bonferroni varies less from seed to
seed).  Selecting with a plain argmax of the estimated ratio instead of the Bonferroni-level
score gave a mean of 0.943 at 1e5 with outliers down to 0.62 (it picks thresholds whose small
counts were lucky), hence the stricter selection score.

Validity: with probability at least ``confidence`` over the samples, the returned value is <= the
true epsilon of the mechanism on that pair (hence <= any valid claim).  The number is a lower
bound for *this* pair of datasets and *this* score: a weak pair or score audits low, never high.

Vector or index outputs: pass ``score``, a function mapping an array of outputs (first axis =
samples) to one real number per sample, e.g. the projection on a direction or ``out == j``.

``import accounting`` stays cheap: numpy and scipy are imported inside the functions.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

__all__ = ["epsilon_lower_bound", "audit_samples", "AuditBound", "clopper_pearson",
           "tradeoff_bound"]

METHODS = ("split", "bonferroni", "tradeoff")


@dataclass(frozen=True)
class AuditBound:
    """The result of a threshold-test audit.

    ``epsilon`` is the lower bound (>= 0).  The chosen test is: event ``score > threshold``
    (``direction=">"``) or ``score <= threshold`` (``direction="<="``), with probability
    ``p_lower`` (lower confidence bound) under dataset ``order[0]`` and ``p_upper`` (upper
    confidence bound) under ``order[1]``; ``counts`` are the hits and sample sizes behind them.
    """

    epsilon: float
    delta: float
    confidence: float
    method: str
    threshold: float | None
    direction: str | None
    order: tuple | None
    p_lower: float | None
    p_upper: float | None
    counts: tuple | None
    n0: int
    n1: int
    tests: int
    mu: float | None = None
    gdp_epsilon: float | None = None

    def to_dict(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


def clopper_pearson(k, n, level):
    """One-sided Clopper-Pearson bounds (lower, upper) for a binomial proportion.

    ``P[p < lower] <= level`` and ``P[p > upper] <= level`` exactly (Clopper & Pearson 1934):
    lower = Beta^{-1}(level; k, n - k + 1) (0 when k = 0), upper = Beta^{-1}(1 - level; k + 1,
    n - k) (1 when k = n).  ``k`` may be an array.
    """
    import numpy as np
    from scipy.stats import beta

    k = np.asarray(k, dtype=float)
    n = np.broadcast_to(np.asarray(n, dtype=float), k.shape)
    with np.errstate(invalid="ignore", divide="ignore"):
        lo = np.where(k > 0, beta.ppf(level, np.maximum(k, 1), n - k + 1), 0.0)
        hi = np.where(k < n, beta.ppf(1.0 - level, k + 1, np.maximum(n - k, 1)), 1.0)
    return lo, hi


def _scores(samples, score, name):
    import numpy as np

    if score is not None:
        if not callable(score):
            raise ValueError(f"score must be a callable mapping outputs to reals, got {score!r}")
        samples = score(samples)
    arr = np.asarray(samples)
    if arr.dtype == bool:
        arr = arr.astype(float)
    if arr.ndim != 1:
        raise ValueError(f"{name}: need one real score per sample (a 1-D array), got shape "
                         f"{arr.shape}; pass score= to reduce vector or index outputs")
    if not np.issubdtype(arr.dtype, np.number):
        raise ValueError(f"{name}: scores must be numbers, got dtype {arr.dtype}")
    arr = arr.astype(float)
    if arr.size < 2:
        raise ValueError(f"{name}: need at least 2 samples, got {arr.size}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: scores contain NaN or inf (first at index "
                         f"{int(np.flatnonzero(~np.isfinite(arr))[0])})")
    return arr


def _candidates(pool, k):
    """Up to k candidate thresholds: the distinct values when there are few (discrete outputs),
    else k quantiles of the pooled scores (each threshold t defines {score > t})."""
    import numpy as np

    uniq = np.unique(pool)
    if uniq.size <= k:
        return uniq[:-1] if uniq.size > 1 else uniq  # {> max} is empty: drop it
    qs = np.quantile(pool, np.linspace(0.0, 1.0, k + 2)[1:-1], method="lower")
    return np.unique(qs)


def _tail_candidates(pool, k):
    """Up to k thresholds for the trade-off audit: the distinct values when there are few, else
    quantiles of the pooled scores at probabilities spaced geometrically from 1/len(pool) to 1/2
    in each tail (the (epsilon, delta) bound at a small delta lives in the tails, the GDP fit in
    the middle: both get candidates)."""
    import numpy as np

    uniq = np.unique(pool)
    if uniq.size <= k:
        return uniq[:-1] if uniq.size > 1 else uniq
    half = max(1, k // 2)
    p = np.geomspace(1.0 / pool.size, 0.5, half)
    qs = np.quantile(pool, np.concatenate([p, 1.0 - p]), method="lower")
    return np.unique(qs)


def _hits(sorted_scores, thresholds):
    """Number of scores > t for every threshold t (scores sorted ascending)."""
    import numpy as np

    return sorted_scores.size - np.searchsorted(sorted_scores, thresholds, side="right")


def _bounds(k0, n0, k1, n1, level, delta):
    """ln((P_a_lo - delta) / P_b_hi) for the four tests at every threshold, as an array of shape
    (4, T): rows (>, d0/d1), (>, d1/d0), (<=, d0/d1), (<=, d1/d0)."""
    import numpy as np

    lo0, hi0 = clopper_pearson(k0, n0, level)
    lo1, hi1 = clopper_pearson(k1, n1, level)
    clo0, chi0 = clopper_pearson(n0 - k0, n0, level)  # complement {score <= t}
    clo1, chi1 = clopper_pearson(n1 - k1, n1, level)
    num = np.stack([lo0, lo1, clo0, clo1]) - delta
    den = np.stack([hi1, hi0, chi1, chi0])
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where((num > 0) & (den > 0), np.log(np.maximum(num, 1e-300) / den), -np.inf)
    return out


_TESTS = ((">", ("d0", "d1")), (">", ("d1", "d0")), ("<=", ("d0", "d1")), ("<=", ("d1", "d0")))


def _check_args(delta, confidence, method, thresholds, pilot_fraction):
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not 0 <= delta < 1:
        raise ValueError(f"delta must be in [0, 1), got {delta!r}")
    if (isinstance(confidence, bool) or not isinstance(confidence, (int, float))
            or not 0 < confidence < 1):
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if isinstance(thresholds, numbers.Integral) and not isinstance(thresholds, bool):
        if thresholds < 1:
            raise ValueError(f"thresholds must be >= 1, got {thresholds!r}")
    if not 0 < pilot_fraction < 1:
        raise ValueError(f"pilot_fraction must be in (0, 1), got {pilot_fraction!r}")


def audit_samples(samples_d0, samples_d1, delta: float = 0.0, confidence: float = 0.95, *,
                  score=None, method: str = "split", thresholds=200,
                  pilot_fraction: float = 0.1, select_fraction: float = 0.2,
                  seed: int = 0) -> AuditBound:
    """Threshold-test lower bound on epsilon with its details; see the module docstring.

    Parameters
    ----------
    samples_d0, samples_d1 : array-like
        Independent outputs of the mechanism on the two neighbouring datasets (first axis =
        samples).  Scalars, or anything ``score`` maps to one real per sample.
    delta : float in [0, 1)
        The delta of the claim being audited; the bound is ln((P_a - delta) / P_b).
    confidence : float in (0, 1)
        The returned epsilon is <= the true epsilon with probability >= confidence.
    score : callable, optional
        Maps an array of outputs to a 1-D array of real scores.
    method : "split", "bonferroni" or "tradeoff"
        How the choice of the best threshold is paid for (module docstring); "tradeoff" also
        returns the GDP bound ``mu`` and its ``gdp_epsilon``.
    thresholds : int or array-like
        Number of candidate thresholds (quantiles), or an explicit data-independent grid (with
        ``"bonferroni"`` an explicit grid needs no pilot and all samples are used for testing).
    pilot_fraction : float
        With ``"bonferroni"`` and an int ``thresholds``: the share of samples spent choosing the
        grid.
    select_fraction : float
        With ``"split"``: the share of samples spent choosing the test (the rest tests it).
    seed : int
        Seed of the random split (the split must not depend on the sample values; a seeded
        permutation keeps the audit reproducible).
    """
    import numpy as np

    _check_args(delta, confidence, method, thresholds, pilot_fraction)
    if not 0 < select_fraction < 1:
        raise ValueError(f"select_fraction must be in (0, 1), got {select_fraction!r}")
    s0 = _scores(samples_d0, score, "samples_d0")
    s1 = _scores(samples_d1, score, "samples_d1")
    alpha = 1.0 - float(confidence)
    delta = float(delta)
    rng = np.random.default_rng(seed)
    s0, s1 = s0[rng.permutation(s0.size)], s1[rng.permutation(s1.size)]
    grid = None
    if not isinstance(thresholds, (int, np.integer)) or isinstance(thresholds, bool):
        grid = np.unique(np.asarray(thresholds, dtype=float))
        if grid.ndim != 1 or grid.size == 0 or not np.all(np.isfinite(grid)):
            raise ValueError(f"thresholds must be a positive int or a non-empty 1-D array of "
                             f"finite numbers, got {thresholds!r}")

    if method == "tradeoff":
        if grid is None:
            m0, m1 = max(1, int(pilot_fraction * s0.size)), max(1, int(pilot_fraction * s1.size))
            grid = _tail_candidates(np.concatenate([s0[:m0], s1[:m1]]), int(thresholds))
            s0, s1 = s0[m0:], s1[m1:]
        return tradeoff_bound(np.sort(s0), np.sort(s1), grid, delta, confidence)

    if method == "bonferroni":
        if grid is None:
            m0, m1 = max(1, int(pilot_fraction * s0.size)), max(1, int(pilot_fraction * s1.size))
            grid = _candidates(np.concatenate([s0[:m0], s1[:m1]]), int(thresholds))
            s0, s1 = s0[m0:], s1[m1:]
        t0, t1 = np.sort(s0), np.sort(s1)
        tests = 4 * grid.size
        level = alpha / (2 * tests)
        b = _bounds(_hits(t0, grid), t0.size, _hits(t1, grid), t1.size, level, delta)
        row, col = np.unravel_index(int(np.argmax(b)), b.shape)
        k0, k1 = int(_hits(t0, grid[col:col + 1])[0]), int(_hits(t1, grid[col:col + 1])[0])
        return _result(b[row, col], row, grid[col], k0, t0.size, k1, t1.size, level, delta,
                       confidence, "bonferroni", tests)

    # split: choose on the first select_fraction of the (shuffled) samples, test on the rest.
    h0, h1 = max(1, int(s0.size * select_fraction)), max(1, int(s1.size * select_fraction))
    sel0, sel1 = np.sort(s0[:h0]), np.sort(s1[:h1])
    tst0, tst1 = np.sort(s0[h0:]), np.sort(s1[h1:])
    if grid is None:
        grid = _candidates(np.concatenate([sel0, sel1]), int(thresholds))
    level = alpha / 2.0
    # Score each candidate by the bound Bonferroni would give on the selection part: the strict
    # level penalises thresholds whose selection counts are small and therefore lucky (a plain
    # argmax of the estimate picks such thresholds and then tests poorly: the winner's curse).
    sel_level = alpha / (2 * 4 * grid.size)
    b_sel = _bounds(_hits(sel0, grid), sel0.size, _hits(sel1, grid), sel1.size, sel_level, delta)
    row, col = np.unravel_index(int(np.argmax(b_sel)), b_sel.shape)
    t = grid[col:col + 1]
    k0, k1 = int(_hits(tst0, t)[0]), int(_hits(tst1, t)[0])
    b = _bounds(np.array([k0]), tst0.size, np.array([k1]), tst1.size, level, delta)[row, 0]
    return _result(b, row, float(t[0]), k0, tst0.size, k1, tst1.size, level, delta, confidence,
                   "split", 1)


def tradeoff_bound(sorted0, sorted1, grid, delta: float = 0.0,
                   confidence: float = 0.95) -> AuditBound:
    """Lower bounds from a confidence envelope of the distinguisher's ROC (trade-off curve).

    ``grid`` must be fixed without looking at ``sorted0`` / ``sorted1`` (sorted test scores of
    the two datasets).  Every threshold t gives two tests of D0 against D1, "reject D0 when
    score > t" and "... when score <= t", with type I / type II errors (alpha, beta) =
    (P0(> t), P1(<= t)) and (P0(<= t), P1(> t)).  The four tail probabilities per threshold
    get one-sided Clopper-Pearson *upper* bounds at level (1 - confidence) / (4 T), so with
    probability >= confidence all 2T points (alpha_hi, beta_hi) hold at once (a union bound),
    and the true trade-off function f = T(M(D0), M(D1)) satisfies f(alpha_hi) <= beta_hi at
    every one of them (f is non-increasing and the threshold test achieves (alpha, beta)).

    * ``epsilon``, valid for ANY mechanism: (epsilon, delta)-DP is equivalent to f >= f_{eps,
      delta} = max(0, 1 - delta - e^eps alpha, e^-eps (1 - delta - alpha)) (Dong, Roth & Su
      2022, Prop. 2.5 / Wasserman & Zhou 2010), so a point with beta_hi below f_{eps,delta}
      refutes eps: epsilon >= max over points of ln((1 - delta - beta_hi) / alpha_hi) and
      ln((1 - delta - alpha_hi) / beta_hi).  (Chords between points add nothing: f_{eps,delta}
      is convex.)
    * ``mu``, valid for ANY mechanism as a statement about Gaussian DP: mu-GDP is f >= G_mu,
      G_mu(alpha) = Phi(Phi^-1(1 - alpha) - mu), so no mu' < max over points of
      Phi^-1(1 - alpha_hi) - Phi^-1(beta_hi) is satisfied.  This uses the whole ROC, the dense
      middle included.  ``gdp_epsilon`` is mu converted to epsilon at ``delta``
      (:func:`accounting.gaussian.gaussian_epsilon`): it refutes every Gaussian claim with a
      smaller epsilon at ``delta`` (an accountant's claim for a ``Gaussian`` event is exactly
      such a claim: its privacy profile is G_mu's), but it is NOT a lower bound on a general
      mechanism's epsilon at delta (a randomized response is refuted as mu-GDP for large mu
      while its epsilon is small).
    """
    import numpy as np
    from scipy.stats import norm

    from .gaussian import gaussian_epsilon

    grid = np.asarray(grid, dtype=float)
    alpha = 1.0 - float(confidence)
    level = alpha / (4 * grid.size)
    n0, n1 = sorted0.size, sorted1.size
    k0, k1 = _hits(sorted0, grid), _hits(sorted1, grid)
    b = _bounds(k0, n0, k1, n1, level, float(delta))
    row, col = np.unravel_index(int(np.argmax(b)), b.shape)
    res = _result(b[row, col], row, grid[col], int(k0[col]), n0, int(k1[col]), n1, level,
                  float(delta), confidence, "tradeoff", 4 * grid.size)
    _, a_gt0 = clopper_pearson(k0, n0, level)       # P0(> t)
    _, a_le0 = clopper_pearson(n0 - k0, n0, level)  # P0(<= t)
    _, b_gt1 = clopper_pearson(k1, n1, level)       # P1(> t)
    _, b_le1 = clopper_pearson(n1 - k1, n1, level)  # P1(<= t)
    A = np.concatenate([a_gt0, a_le0])
    B = np.concatenate([b_le1, b_gt1])
    with np.errstate(divide="ignore", invalid="ignore"):
        m = norm.isf(A) - norm.ppf(B)
    m = m[np.isfinite(m)]
    mu = float(max(0.0, m.max())) if m.size else 0.0
    gdp = gaussian_epsilon(mu, delta) if (mu > 0 and delta > 0) else (math.inf if mu > 0 and
                                                                       delta == 0 else 0.0)
    from dataclasses import replace

    return replace(res, mu=mu, gdp_epsilon=float(gdp))


def _result(value, row, threshold, k0, n0, k1, n1, level, delta, confidence, method, tests):
    direction, order = _TESTS[row]
    if direction == "<=":
        k0, k1 = n0 - k0, n1 - k1
    ka, na, kb, nb = (k0, n0, k1, n1) if order == ("d0", "d1") else (k1, n1, k0, n0)
    lo, _ = clopper_pearson(ka, na, level)
    _, hi = clopper_pearson(kb, nb, level)
    eps = float(value) if math.isfinite(value) and value > 0 else 0.0
    return AuditBound(epsilon=eps, delta=delta, confidence=float(confidence), method=method,
                      threshold=float(threshold), direction=direction, order=order,
                      p_lower=float(lo), p_upper=float(hi), counts=(ka, na, kb, nb),
                      n0=int(n0), n1=int(n1), tests=int(tests))


def epsilon_lower_bound(samples_d0, samples_d1, delta: float = 0.0, confidence: float = 0.95,
                        **kwargs) -> float:
    """A lower bound on epsilon valid with probability >= ``confidence``.

    Threshold tests in both directions and both orders with Clopper-Pearson intervals; the
    choice of threshold is paid for by a split (default) or Bonferroni (module docstring).
    Keyword arguments (``score``, ``method``, ``thresholds``, ``pilot_fraction``, ``seed``) are
    those of :func:`audit_samples`.

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> lb = epsilon_lower_bound(rng.laplace(0, 1, 100000), rng.laplace(1, 1, 100000))
    >>> 0.93 < lb <= 1.0
    True
    """
    return audit_samples(samples_d0, samples_d1, delta, confidence, **kwargs).epsilon
