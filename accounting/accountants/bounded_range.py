"""Privacy of epsilon-bounded-range selections (exponential mechanism, Gumbel report-noisy-max)
under adaptive composition: the exact optimum (``adaptive_curve``), the exact per-step Renyi curve
(``rdp_bounded_range_exact``) and a dominating pair for PLD composition (``bounded_range_pld``).

A mechanism is eps-bounded-range (eps-BR; Durfee & Rogers 2019) when, for every pair of neighbours,
its privacy loss takes values in an interval [t - eps, t] for some t in [0, eps].  For a fixed t the
hockey-stick divergence is largest for the two-point pair M_t whose loss is t with probability
p_t = (e^eps - e^t) / (e^eps - 1) and t - eps otherwise (Dong, Durfee, Rogers 2020, "Optimal
differential privacy composition for exponential mechanisms", Lemma 3.2: a convex function of
e^-L under a mean constraint is maximal at the ends of the range).

Adaptive composition lets the adversary pick t at every step, so we use one pair that dominates
every M_t at once: the upper envelope of their hockey-stick curves.  For 0 <= e' <= eps the
maximum over t of p_t (1 - e^{e' - t}) is reached at t = (eps + e')/2:

    delta(e') = (e^{eps/2} - e^{e'/2})^2 / (e^eps - 1),                 0 <= e' <= eps,

and the curve at e' < 0 follows from the symmetry of the family (M_t swapped is M_{eps - t}).
A pointwise maximum of hockey-stick curves is convex in e^{e'}, hence the curve of a pair
(P*, Q*) (Zhu, Dong, Wang 2022, "Optimal accounting of differential privacy via characteristic
function", Lemma 21 and Thm 10: a pair that dominates each step of an adaptive composition
dominates the composition).  Its privacy loss under P* is continuous on [-eps, eps] with survival
function S(l) = P*(L > l) = delta(l) - delta'(l):

    S(l) = 1 - expm1((eps + l)/2) / expm1(eps)                       for -eps <= l <= 0,
    S(l) = e^{(eps + l)/2} expm1((eps - l)/2) / expm1(eps)           for  0 <= l <= eps.

**Exact adaptive optimum (``adaptive_curve``).**  Let W_m(s) be the largest
E_P[(1 - e^{s - L})_+] over adaptive compositions of m eps-BR selections, L their total loss.
W_0(s) = (1 - e^s)_+, and given the history the next selection's loss lies in [t - eps, t] with
E_P[e^-L] = 1; g_{m-1}(v) = W_{m-1}(log v) is convex in v (induction: a supremum of convex
functions), so Jensen's two-point bound gives

    W_m(s) = max_{t in [0, eps]}  p_t W_{m-1}(s - t) + (1 - p_t) W_{m-1}(s - t + eps),

attained by generalized randomized response with t chosen from the history; delta(e') = W_k(e').
We evaluate it on the grid s in h Z with h = eps / M (so s - t_j and s - t_j + eps stay on the
grid for t_j = j h) and bound the maximum over each cell t in [t_j, t_{j+1}] from above: by
convexity W(s - t) lies below the chord between its values at the cell's ends (linear in e^-t),
which makes the objective c0 + c1 e^t + c2 e^-t, maximized in closed form.  Every grid value is
therefore an upper bound on the truth, and the error shrinks as M grows (tested against the
non-adaptive optimum, a lower bound).

**Exact per-step Renyi divergence (``rdp_bounded_range_exact``).**  E_P[e^{(a-1) L}] of M_t is
maximized over t at e^t = l (e^{(l+1) eps} - 1) e^{-l eps} / ((l + 1)(1 - e^{-l eps})), l = a - 1
(set the derivative in x = e^t to zero); its log / l is the worst-case order-a Renyi divergence of
one eps-BR selection, never above the eps^2 a / 8 of Cesar & Rogers (Hoeffding's lemma bounds the
same moment generating function).

(The PLD accountant builds this pair itself, by connect the dots in closed form with proven
float error: ``analysis.pld_leaves.bounded_range``; ``bounded_range_pld`` is the dp-accounting version, kept
for cross-checks.)  ``bounded_range_pld`` discretizes the envelope pair pessimistically (each loss
rounded up to the grid), which
can only increase every delta of every composition (the hockey stick is increasing in the loss).
At e' = 0 one selection gives tanh(eps/4), against tanh(eps/2) for eps-randomized response.

The non-adaptive optimum of Dong, Durfee and Rogers (the same t for every step, maximized over t)
is a lower bound on the truth; ``nonadaptive_delta`` computes it so tests can check the envelope is
never below it.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np


def envelope_delta(eps: float, eps_prime: float) -> float:
    """delta(e') of one eps-BR selection against the worst neighbours (the envelope above)."""
    if eps_prime >= eps:
        return 0.0
    if eps_prime >= 0:
        # (e^{eps/2} - e^{e'/2})^2 / (e^eps - 1), written without cancellation
        return math.exp(eps_prime) * math.expm1((eps - eps_prime) / 2) ** 2 / math.expm1(eps)
    return -math.expm1(eps_prime) + math.exp(eps_prime) * envelope_delta(eps, -eps_prime)


def survival(eps: float, losses: np.ndarray) -> np.ndarray:
    """S(l) = P*(L > l) of the dominating pair, vectorized."""
    l = np.clip(np.asarray(losses, dtype=np.float64), -eps, eps)
    neg = 1.0 - np.expm1((eps + np.minimum(l, 0.0)) / 2) / math.expm1(eps)
    pos = np.exp((eps + np.maximum(l, 0.0)) / 2) * np.expm1((eps - np.maximum(l, 0.0)) / 2) \
        / math.expm1(eps)
    return np.clip(np.where(l <= 0, neg, pos), 0.0, 1.0)


@lru_cache(maxsize=32)
def bounded_range_pld(eps: float, interval: float):
    """Pessimistic dp-accounting PLD of the pair that dominates every eps-BR selection."""
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    lo, hi = math.floor(-eps / interval), math.ceil(eps / interval)
    grid = np.arange(lo, hi + 1)
    s = survival(eps, grid * interval)
    # mass of (x_{i-1}, x_i] goes to x_i (rounded up: pessimistic); S(x_lo) = 1 at x_lo <= -eps.
    mass = np.concatenate(([1.0 - s[0]], s[:-1] - s[1:]))
    mass = np.maximum(mass, 0.0)
    pmf = {int(i): float(m) for i, m in zip(grid, mass) if m > 0}
    return pld_lib.PrivacyLossDistribution.create_from_rounded_probability(
        pmf, infinity_mass=0.0, value_discretization_interval=interval,
        pessimistic_estimate=True)


def nonadaptive_delta(eps: float, k: int, eps_prime: float, t_grid: int = 64) -> float:
    """A lower bound on the delta of k adaptively composed eps-BR selections: the exact delta of
    k copies of one two-point pair M_t, maximized over t on a grid (Dong, Durfee, Rogers 2020)."""
    import mpmath

    best = mpmath.mpf(0)
    e = mpmath.mpf(eps)
    with mpmath.workdps(60):
        for i in range(1, t_grid):
            t = e * i / t_grid
            p = (mpmath.exp(e) - mpmath.exp(t)) / mpmath.expm1(e)
            total = mpmath.mpf(0)
            for j in range(k + 1):          # j selections at loss t, k - j at t - eps
                loss = j * t + (k - j) * (t - e)
                if loss <= eps_prime:
                    continue
                total += (mpmath.binomial(k, j) * p ** j * (1 - p) ** (k - j)
                          * -mpmath.expm1(eps_prime - loss))
            best = max(best, total)
    return float(best)


def rdp_bounded_range_exact(eps: float, orders: np.ndarray) -> np.ndarray:
    """The worst-case Renyi divergence of one eps-BR selection at each order (see module doc)."""
    a = np.asarray(orders, dtype=np.float64)
    lam = a - 1.0
    # t* = log x*, in a form that neither overflows nor cancels at large orders or epsilons
    t = (np.log(lam / (lam + 1)) + eps + np.log(-np.expm1(-(lam + 1) * eps))
         - np.log(-np.expm1(-lam * eps)))
    t = np.clip(t, 0.0, eps)
    log_mgf = lam * t + np.log1p(-(np.expm1(t) / math.expm1(eps)) * -np.expm1(-lam * eps))
    # t is the maximizer only up to rounding; any t gives a lower value, so re-evaluating at a
    # rounded t could be optimistic by a few ulps: add them back.
    return log_mgf / lam * (1 + 1e-12) + 1e-15


#: the cost cap of the exact adaptive computation: steps x grid points x cells
ADAPTIVE_MAX_WORK = 6e7
ADAPTIVE_MIN_CELLS = 4


def adaptive_cells(k: int) -> int | None:
    """Cells per selection for k selections within the cost cap (None: too costly)."""
    cells = int(min(32, math.sqrt(ADAPTIVE_MAX_WORK / (2.0 * k * k))))
    return cells if cells >= ADAPTIVE_MIN_CELLS else None


@lru_cache(maxsize=16)
def adaptive_curve(eps: float, k: int, cells: int):
    """(s grid, W_k on it): upper bounds on the exact delta(s) of k adaptive eps-BR selections."""
    h = eps / cells
    e_eps = math.exp(eps)
    n_side = (k + 1) * cells
    s = np.arange(-n_side, n_side + 1) * h
    exact_left = np.maximum(0.0, -np.expm1(np.minimum(s, 0.0)))   # W_m(s) for s <= -m eps
    w = exact_left.copy()                                          # W_0
    t = np.arange(cells + 1) * h
    x, u = np.exp(t), np.exp(-t)
    p = (e_eps - x) / (e_eps - 1.0)
    for m in range(1, k + 1):
        # W_m is exact (1 - e^s) below -m eps and 0 above m eps; only s >= -(k - m) eps is
        # needed by the later steps.  Compute the window in between.
        lo = n_side - min(m, k - m + 1) * cells
        hi = n_side + m * cells + 1

        def at(j):                       # W_{m-1}(s - j h) on the window
            return w[lo - j: hi - j]

        best = np.zeros(hi - lo)
        for j in range(cells):
            a0, a1, b0, b1 = at(j), at(j + 1), at(j - cells), at(j + 1 - cells)
            f0 = p[j] * a0 + (1 - p[j]) * b0
            f1 = p[j + 1] * a1 + (1 - p[j + 1]) * b1
            dd = (e_eps - 1.0) * (u[j] - u[j + 1])
            c1 = (b1 - a1) / (e_eps - 1.0) + ((a0 - a1) - (b0 - b1)) * u[j + 1] / dd
            c2 = (b0 - b1) / (u[j] - u[j + 1]) + ((a0 - a1) - (b0 - b1)) * e_eps / dd
            c0 = f1 - c1 * x[j + 1] - c2 / x[j + 1]
            with np.errstate(invalid="ignore", divide="ignore"):
                xs = np.sqrt(c2 / c1)
                inner = (c1 < 0) & (c2 < 0) & (xs > x[j]) & (xs < x[j + 1])
                fi = np.where(inner, c0 - 2 * np.sqrt(c1 * c2), 0.0)
            np.maximum(best, np.maximum(np.maximum(f0, f1), fi), out=best)
        new = exact_left.copy()
        new[hi:] = 0.0
        # floating-point slack: a relative 1e-12 per step keeps every value an upper bound
        new[lo:hi] = np.minimum(1.0, best * (1 + 1e-12))
        w = new
    # Below the last window the values are placeholders (1 - e^s is a lower bound of W_k there):
    # replace them with 1, a valid upper bound, so no reader can mistake them for answers.
    w[:n_side - cells] = 1.0
    w.setflags(write=False)
    return s, w


def single_epsilon(eps: float, delta: float) -> float:
    """Exact epsilon of one eps-BR selection at delta: the inverse of ``envelope_delta``
    (e^{e/2} = e^{eps/2} - sqrt(delta (e^eps - 1))), rounded up."""
    if delta >= envelope_delta(eps, 0.0):
        return 0.0
    u = math.exp(eps / 2) - math.sqrt(delta * math.expm1(eps))
    e = min(eps, 2 * math.log(u) * (1 + 1e-12) + 1e-15)
    while envelope_delta(eps, e) > delta and e < eps:
        e = min(eps, e + 1e-12 * max(1.0, e))
    return max(0.0, e)


def adaptive_delta(eps: float, k: int, cells: int, eps_prime: float) -> float:
    """delta at eps_prime from the curve: the chord in e^s between grid points (W is convex in
    e^s, so the chord lies above it).  One selection: the closed form."""
    if k == 1:
        return envelope_delta(eps, max(0.0, eps_prime))
    s, w = adaptive_curve(eps, k, cells)
    if eps_prime >= s[-1]:
        return 0.0
    i = int(np.searchsorted(s, eps_prime, side="right"))
    if i == 0:
        return 1.0
    v0, v1, v = math.exp(s[i - 1]), math.exp(s[i]), math.exp(eps_prime)
    return float(min(1.0, w[i - 1] + (v - v0) * (w[i] - w[i - 1]) / (v1 - v0)))


def adaptive_epsilon(eps: float, k: int, cells: int, delta: float) -> float:
    """Smallest e' with the chord bound <= delta (rounded up); one selection: the closed form."""
    if k == 1:
        return single_epsilon(eps, delta)
    s, w = adaptive_curve(eps, k, cells)
    below = np.nonzero(w <= delta)[0]
    i = int(below[0])
    if i == 0 or s[i] <= 0:
        return max(0.0, float(s[i]))
    v0, v1 = math.exp(s[i - 1]), math.exp(s[i])
    v = v0 + (delta - w[i - 1]) * (v1 - v0) / (w[i] - w[i - 1])
    e = math.log(v) * (1 + 1e-12) + 1e-12
    e = min(float(s[i]), e)
    while adaptive_delta(eps, k, cells, e) > delta:   # guard rounding: stay on the safe side
        e = min(float(s[i]), e + 1e-9 * max(1.0, e))
    return max(0.0, e)
