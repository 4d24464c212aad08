"""Every value ``best`` and ``certify`` use is a proven upper bound (issues 32 and 35).

References, independent of the accountants: the exact optimal composition of k eps-DP releases
(Kairouz-Oh-Viswanath, summed in mpmath at 50 digits) and the exact mu-GDP profile (Balle & Wang
2018, in mpmath).  Each check evaluates the *true* delta at the epsilon an accountant reports and
requires it to be at most the delta asked for, so an answer below the truth fails.  Hypothesis
runs derandomized (no false-failure rate).
"""
import math
import random

import mpmath as mp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accounting import (Composed, Exponential, Gaussian, Laplace, PureDP, ReportNoisyMax,
                        SelfComposed, report)
from accounting.accountants import BestAccountant
from accounting.gaussian import gaussian_epsilon
from laplace_reference import laplace_delta_bounds

SETTINGS = settings(max_examples=8, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])
#: floats: an epsilon may sit this far (relative) below the exact value of the float parameters
#: (docs/certify.md section 6, "Floating point")
FLOAT_SLACK = 1e-12


def kov_delta_exact(k: int, eps: float, eps_g: float) -> mp.mpf:
    """delta of k-fold eps-DP randomized response at eps_g (Murtagh-Vadhan closed form)."""
    with mp.workdps(50):
        e, g = mp.mpf(eps), mp.mpf(eps_g)
        total = mp.mpf(0)
        for j in range(k + 1):
            loss = (k - 2 * j) * e
            if loss <= g:
                break
            total += mp.binomial(k, j) * mp.exp((k - j) * e) * (1 - mp.exp(g - loss))
        return total / (1 + mp.exp(e)) ** k


def _betainc(a, b, x):
    """Regularized incomplete beta I_x(a, b) by Lentz's continued fraction at the working
    precision (Numerical Recipes, 3rd ed., 6.4); converges in O(sqrt(a)) steps where mpmath's
    hypergeometric series does not converge (a, b ~ 1e5 and up)."""
    a, b, x = mp.mpf(a), mp.mpf(b), mp.mpf(x)
    if x > (a + 1) / (a + b + 2):
        return 1 - _betainc(b, a, 1 - x)
    tiny = mp.mpf(10) ** (-mp.mp.dps - 10)
    stop = mp.mpf(10) ** (-mp.mp.dps + 5)
    front = mp.exp(mp.loggamma(a + b) - mp.loggamma(a) - mp.loggamma(b) + a * mp.log(x)
                   + b * mp.log1p(-x)) / a

    def guard(v):
        return v if abs(v) > tiny else tiny

    c, d = mp.mpf(1), 1 / guard(1 - (a + b) * x / (a + 1))
    f, m = d, 1
    while True:
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1 / guard(1 + num * d)
            c = guard(1 + num / c)
            f *= d * c
        if abs(d * c - 1) < stop:
            return front * f
        m += 1


def kov_delta_any_count(k: int, eps: float, eps_g: float) -> mp.mpf:
    """The same KOV delta at any count, in closed form: with J ~ Bin(k, q), q = 1 / (1 + e^eps),
    the number of -eps outcomes, and m the largest j with (k - 2j) eps > eps_g,

        delta = P(Bin(k, q) <= m) - e^eps_g P(Bin(k, 1 - q) <= m)

    (the tilt e^{2 j eps} turns Bin(k, q) into Bin(k, 1 - q) with total weight e^{k eps});
    P(Bin(k, p) <= m) = I_{1-p}(k - m, m + 1).  Checked against the direct sum below."""
    with mp.workdps(40):
        e, g = mp.mpf(eps), mp.mpf(eps_g)
        q = 1 / (1 + mp.exp(e))
        m = int(mp.floor((k - g / e) / 2))
        while m >= 0 and (k - 2 * m) * e <= g:
            m -= 1
        if m < 0:
            return mp.mpf(0)
        if m >= k:
            return 1 - mp.exp(g - k * e)
        return _betainc(k - m, m + 1, 1 - q) - mp.exp(g) * _betainc(k - m, m + 1, q)


def laplace_delta_exact(k: int, eps: float, eps_g: float) -> mp.mpf:
    """delta at eps_g of k Laplace releases with eps = sensitivity / scale, exactly.

    Under P one release's privacy loss is +eps w.p. 1/2, -eps w.p. e^-eps / 2, and eps - 2Y
    w.p. (1 - e^-eps) / 2 with Y ~ Exp(1) truncated to [0, eps].  Given a releases at +eps,
    c continuous and d = k - a - c at -eps, S = s0 - 2T with s0 = (a + c - d) eps and T a sum of
    c truncated exponentials, and delta = sum P(a, c, d) (P(T < tau) - e^{eps_g - s0}
    E[e^{2T}; T < tau]), tau = (s0 - eps_g) / 2.  Inclusion-exclusion on the truncations:
    (1 - e^-eps)^c f_T(t) = sum_j C(c, j) (-e^-eps)^j Gamma_c(t - j eps) (Gamma_c the Gamma(c, 1)
    density), whose integrals are incomplete gamma functions."""
    with mp.workdps(60 + 2 * k):
        e, g = mp.mpf(eps), mp.mpf(eps_g)
        total = mp.mpf(0)
        for a in range(k + 1):
            for c in range(k - a + 1):
                d = k - a - c
                s0 = (a + c - d) * e
                tau = (s0 - g) / 2
                if tau <= 0:
                    continue
                weight = (mp.factorial(k) / (mp.factorial(a) * mp.factorial(c) * mp.factorial(d))
                          * mp.mpf(0.5) ** k * (-mp.expm1(-e)) ** c * mp.exp(-d * e))
                if c == 0:
                    total += weight * (1 - mp.exp(g - s0))
                    continue
                prob = moment = mp.mpf(0)
                for j in range(c + 1):
                    u = tau - j * e
                    if u <= 0:
                        break
                    coef = mp.binomial(c, j) * (-mp.exp(-e)) ** j
                    prob += coef * mp.gammainc(c, 0, u, regularized=True)
                    moment += coef * mp.exp(2 * j * e) * _tilted_gamma_cdf(c, u)
                norm = (-mp.expm1(-e)) ** c
                total += weight * (prob - mp.exp(g - s0) * moment) / norm
        return total


def _tilted_gamma_cdf(c: int, u) -> mp.mpf:
    """int_0^u t^{c-1} e^t dt / (c-1)! = u^c / (c-1)! sum_n u^n / (n! (c + n)): positive terms."""
    total, term, n = mp.mpf(0), mp.mpf(1), 0
    while True:
        add = term / (c + n)
        total += add
        if n > u and add < total * mp.mpf(10) ** (-mp.mp.dps):
            break
        n += 1
        term *= u / n
    return u ** c / mp.factorial(c - 1) * total


def gdp_delta_exact(mu: float, eps: float) -> mp.mpf:
    with mp.workdps(60):
        m, e = mp.mpf(mu), mp.mpf(eps)
        return mp.ncdf(m / 2 - e / m) - mp.exp(e) * mp.ncdf(-m / 2 - e / m)


@pytest.mark.slow
def test_issue32_pure_dp_x300_at_1e12_is_not_certified_below_exact():
    ev = SelfComposed(PureDP(0.1), 300)
    rep = report(ev, delta=1e-12)
    assert rep.best_value > 13.031            # the exact value is 13.0319748
    assert kov_delta_exact(300, 0.1, rep.best_value * (1 + FLOAT_SLACK)) <= 1e-12
    for name, v in rep.values.items():
        if v is not None and math.isfinite(v):
            assert kov_delta_exact(300, 0.1, v * (1 + FLOAT_SLACK)) <= 1e-12, name


@pytest.mark.slow
@SETTINGS
@given(eps=st.floats(0.005, 1.0), k=st.integers(1, 10_000), log_delta=st.floats(-15, -2))
def test_best_and_every_row_never_below_kov(eps, k, log_delta):
    """Pure DP, counts to 1e4, deltas to 1e-15: every finite row of the report (pld included) and
    BestAccountant are at least the exact optimum."""
    delta = 10.0 ** log_delta
    ev = SelfComposed(PureDP(eps), k) if k > 1 else PureDP(eps)
    rep = report(ev, delta=delta)
    best = BestAccountant().epsilon(ev, delta)
    for name, v in list(rep.values.items()) + [("best", best)]:
        if v is not None and math.isfinite(v):
            assert kov_delta_exact(k, eps, v * (1 + FLOAT_SLACK)) <= delta, (name, v)


@SETTINGS
@given(sigma=st.floats(0.5, 50.0), k=st.integers(1, 10_000), log_delta=st.floats(-15, -2),
       laplace_scale=st.floats(5.0, 100.0), m=st.integers(1, 100))
def test_gaussian_and_mixed_rows_never_below_gdp(sigma, k, log_delta, laplace_scale, m):
    """Gaussians (exact mu-GDP) and Gaussians composed with Laplace releases (whose exact value is
    above the Gaussians' alone): every finite row is at least the GDP value of the Gaussian part."""
    delta = 10.0 ** log_delta
    gauss = SelfComposed(Gaussian(sigma=sigma), k)
    mu = math.sqrt(k) / sigma
    for ev in (gauss, Composed([gauss, SelfComposed(Laplace(scale=laplace_scale), m)])):
        rep = report(ev, delta=delta)
        for name, v in rep.values.items():
            if v is not None and math.isfinite(v):
                assert gdp_delta_exact(mu, v * (1 + FLOAT_SLACK)) <= delta, (name, v)


def test_gaussian_optimal_rounds_up_at_300_random_points():
    """Issue 35 item 4: mu in [1e-3, 1e5], delta down to 1e-280, against mpmath at 60 digits."""
    rng = random.Random(20261126)
    cases = [(0.00314762, 1.37e-280)] + [(10 ** rng.uniform(-3, 5), 10 ** rng.uniform(-280, -1))
                                         for _ in range(300)]
    for mu, delta in cases:
        eps = gaussian_epsilon(mu, delta)
        assert gdp_delta_exact(mu, eps) <= delta, (mu, delta, eps)


@pytest.mark.parametrize("event", [
    Composed([SelfComposed(ReportNoisyMax("gumbel", 20.0, 1.0), 50),
              SelfComposed(ReportNoisyMax("exponential", 20.0, 1.0), 50)]),
    Composed([SelfComposed(Exponential(0.5), 100), SelfComposed(PureDP(0.5), 100)]),
    SelfComposed(ReportNoisyMax("gumbel", 20.0, 1.0), 100),
    SelfComposed(Laplace(scale=10.0), 100),
    SelfComposed(PureDP(0.1), 100),
])
def test_best_accountant_is_the_minimum_of_the_report(event):
    """Issue 35 item 2: BestAccountant equals report().best (it skips PLD only where the optimal
    row is exact, and then PLD cannot be lower)."""
    rep = report(event, delta=1e-5)
    value, source = BestAccountant().epsilon_and_source(event, 1e-5)
    assert value == pytest.approx(rep.best_value, rel=1e-12)
    assert value <= min(v for v in rep.values.values() if v is not None) * (1 + 1e-12)


def test_references_agree():
    """The closed forms above against each other and against one hand-checkable case."""
    assert kov_delta_any_count(300, 0.1, 13.0) == pytest.approx(kov_delta_exact(300, 0.1, 13.0),
                                                                 rel=1e-25)
    # one Laplace release: delta(g) = 1 - e^{(g - eps)/2} for 0 <= g <= eps (Balle & Wang 2018)
    e, g = 0.7, 0.3
    assert laplace_delta_exact(1, e, g) == pytest.approx(1 - mp.exp((g - e) / 2), rel=1e-30)
    # the Laplace mechanism is eps-DP: its k-fold delta is below KOV's
    assert laplace_delta_exact(5, 0.5, 1.0) < kov_delta_exact(5, 0.5, 1.0)


@SETTINGS
@given(scale=st.floats(1.0, 20.0), k=st.integers(1, 10), log_delta=st.floats(-15, -2))
def test_laplace_rows_never_below_exact_and_best_within_1_percent(scale, k, log_delta):
    """Laplace k-fold against its exact profile: no row below it; best within 1.01x of it."""
    delta = 10.0 ** log_delta
    eps = 1.0 / scale
    ev = SelfComposed(Laplace(scale=scale), k) if k > 1 else Laplace(scale=scale)
    rep = report(ev, delta=delta)
    for name, v in rep.values.items():
        if v is not None and math.isfinite(v):
            assert laplace_delta_exact(k, eps, v * (1 + FLOAT_SLACK)) <= delta, (name, v)
    if rep.best_value > 0:
        assert laplace_delta_exact(k, eps, rep.best_value / 1.01) > delta


@pytest.mark.slow
@pytest.mark.parametrize("eps,count,delta", [(1e-9, 10 ** 11, 1e-6), (1e-3, 10 ** 9, 1e-10),
                                             (0.05, 10 ** 7, 1e-8)])
def test_huge_counts_near_exact_and_proven(eps, count, delta):
    """Issue 32: homogeneous pure DP at any count: best is a proven bound within 1.01x of the
    exact optimum (1e11 releases of 1e-9-DP at delta 1e-6: exact 0.000743, advanced 2.24x)."""
    ev = SelfComposed(PureDP(eps), count)
    value = BestAccountant().epsilon(ev, delta)
    assert kov_delta_any_count(count, eps, value * (1 + FLOAT_SLACK)) <= delta
    assert kov_delta_any_count(count, eps, value / 1.01) > delta


@pytest.mark.slow
def test_huge_count_laplace_within_1_percent_of_kov_when_eps_is_tiny():
    """Laplace at eps = 1e-6 is randomized response up to O(eps) (its continuous part has mass
    (1 - e^-eps) / 2): 1e10 releases, best within 1.01x of KOV's exact value and, being a
    proven bound on a mechanism KOV dominates, at most KOV's value times 1.0001."""
    ev = SelfComposed(Laplace(scale=1e6), 10 ** 10)
    value = BestAccountant().epsilon(ev, 1e-6)
    assert kov_delta_any_count(10 ** 10, 1e-6, value / 1.01) > 1e-6


def test_laplace_any_count_reference_agrees_with_the_direct_sum():
    """tests/laplace_reference.py (conditioned on the number of continuous outcomes, its sums done
    as exact integer convolutions) against laplace_delta_exact above (a triple sum), to 40
    digits, across counts, epsilons and thresholds on both sides of the atoms."""
    for k, eps, g in [(1, 0.7, 0.3), (2, 0.5, 0.0), (3, 0.5, 0.1), (5, 0.5, 1.0), (8, 1.0, 2.0),
                      (10, 0.2, 0.5), (12, 0.3, 0.1), (24, 0.2, 3.0)]:
        lower, upper = laplace_delta_bounds(k, eps, g)
        exact = laplace_delta_exact(k, eps, g)
        with mp.workdps(60):
            assert lower <= exact * (1 + mp.mpf(10) ** -40), (k, eps, g)
            assert upper >= exact * (1 - mp.mpf(10) ** -40), (k, eps, g)
            assert upper - lower < mp.mpf(10) ** -30


@pytest.mark.slow
@pytest.mark.parametrize("scale,count,delta,exact", [
    (5.0, 1000, 1e-12, 60.5357117),     # issue 32: pld 60.521260 was below the exact value
    (50.0, 10_000, 1e-15, None),
])
def test_laplace_counts_to_1e4_against_the_exact_profile(scale, count, delta, exact):
    """Issue 32: Laplace k-fold at counts to 1e4 and deltas to 1e-15 against its exact profile
    (tests/laplace_reference.py): the lowest finite row of the report, hence every row and best,
    is a proven bound (the true delta there is at most the delta asked for), and best is within
    1.01x of the exact epsilon."""
    rep = report(SelfComposed(Laplace(scale=scale), count), delta=delta)
    lowest = min(v for v in rep.values.values() if v is not None and math.isfinite(v))
    assert laplace_delta_bounds(count, 1 / scale, lowest * (1 + FLOAT_SLACK))[1] <= delta
    assert laplace_delta_bounds(count, 1 / scale, rep.best_value / 1.01)[0] > delta
    if exact is not None:
        assert rep.best_value > exact


@pytest.mark.slow
@pytest.mark.parametrize("delta", [1e-6, 1e-12, 1e-15])
def test_laplace_24_fold_at_small_deltas(delta):
    """24 Laplace releases at eps = 0.2 (scale 5) against the exact profile, deltas to 1e-15:
    no row below it, best within 1.01x of it."""
    ev = SelfComposed(Laplace(scale=5.0), 24)
    rep = report(ev, delta=delta)
    for name, v in rep.values.items():
        if v is not None and math.isfinite(v):
            assert laplace_delta_exact(24, 0.2, v * (1 + FLOAT_SLACK)) <= delta, (name, v)
    assert laplace_delta_exact(24, 0.2, rep.best_value / 1.01) > delta
