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


def gdp_delta_exact(mu: float, eps: float) -> mp.mpf:
    with mp.workdps(60):
        m, e = mp.mpf(mu), mp.mpf(eps)
        return mp.ncdf(m / 2 - e / m) - mp.exp(e) * mp.ncdf(-m / 2 - e / m)


def test_issue32_pure_dp_x300_at_1e12_is_not_certified_below_exact():
    ev = SelfComposed(PureDP(0.1), 300)
    rep = report(ev, delta=1e-12)
    assert rep.best_value > 13.031            # the exact value is 13.0319748
    assert kov_delta_exact(300, 0.1, rep.best_value * (1 + FLOAT_SLACK)) <= 1e-12
    for name, v in rep.values.items():
        if v is not None and math.isfinite(v):
            assert kov_delta_exact(300, 0.1, v * (1 + FLOAT_SLACK)) <= 1e-12, name


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
