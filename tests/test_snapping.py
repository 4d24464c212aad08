"""Tests of the snapping mechanism (Mironov 2012, Section 5.2), accounting.snapping."""
import decimal
import math

import numpy as np
import pytest
from scipy.stats import chi2

from accounting import PureDP
from accounting.audit import epsilon_lower_bound
from accounting.snapping import (_ln_correctly_rounded, power_of_two_at_least, snapping_epsilon,
                                 snapping_event, snapping_laplace, snapping_scale,
                                 uniform_doubles)


@pytest.mark.parametrize("x,expected", [(1.0, 1.0), (1.5, 2.0), (0.3, 0.5), (4.0, 4.0),
                                        (math.nextafter(4.0, 5.0), 8.0), (3e-5, 2.0 ** -15)])
def test_power_of_two_at_least(x, expected):
    assert power_of_two_at_least(x) == expected


def test_epsilon_is_mironovs_theorem():
    # Theorem 1: (1/lambda + 2^-49 B/lambda)-DP for sensitivity 1.
    assert snapping_epsilon(1.0, 64.0) == pytest.approx(1.0 + 2.0 ** -49 * 64, rel=1e-15)
    assert snapping_epsilon(1.0, 64.0) >= 1.0 + 2.0 ** -49 * 64
    assert snapping_epsilon(0.5, 10.0) == pytest.approx((1 + 2.0 ** -49 * 10) / 0.5, rel=1e-15)
    # sensitivity 3 is rounded up to the power of two 4 (conservative)
    assert snapping_epsilon(8.0, 100.0, 3.0) == pytest.approx((4 + 2.0 ** -49 * 100) / 8)
    # huge B relative to lambda: the correction becomes visible
    assert snapping_epsilon(1.0, 2.0 ** 45) == pytest.approx(1.0 + 2.0 ** -4)
    assert isinstance(snapping_event(1.0, 64.0), PureDP)


@pytest.mark.parametrize("scale,bound", [(1.0, 1.0), (1.0, 0.5), (1.0, 2.0 ** 46), (0, 5.0),
                                         (1.0, float("nan")), (-1.0, 5.0)])
def test_outside_the_theorem_is_refused(scale, bound):
    with pytest.raises(ValueError):
        snapping_epsilon(scale, bound)


def test_scale_for_a_target_is_conservative_and_tight():
    for eps, b, d in [(1.0, 64.0, 1.0), (0.3, 1000.0, 0.5), (2.0, 50.0, 3.0)]:
        lam = snapping_scale(eps, b, d)
        assert snapping_epsilon(lam, b, d) <= eps
        assert snapping_epsilon(lam * (1 - 1e-12), b, d) > eps


def test_outputs_on_the_grid_and_clamped():
    rng = np.random.default_rng(0)
    y = snapping_laplace(0.3, 1.5, 6.0, size=20_000, rng=rng)  # Lambda = 2
    assert np.all(np.abs(y) <= 6.0)
    assert np.all(np.mod(y, 2.0) == 0)  # every output is a multiple of Lambda (6 = 3 x 2)
    # the input is clamped to [-B, B] first: a huge value behaves like B
    z = snapping_laplace(1e9, 1.5, 6.0, size=2000, rng=rng)
    assert np.all(z <= 6.0) and np.mean(z == 6.0) > 0.4
    with pytest.raises(ValueError, match="NaN"):
        snapping_laplace(float("nan"), 1.0, 6.0)


def test_distribution_is_rounded_laplace():
    # lambda = Lambda = 1, value 0, B = 20: P(out = j) = P(j - 1/2 <= L < j + 1/2) for
    # |j| < 20 (independent closed form of the Laplace CDF).  Chi-square over |j| <= 5 plus
    # the two tails, 200k draws, seeded; false-failure rate 1e-4 (the chi2 quantile).
    n = 200_000
    y = snapping_laplace(0.0, 1.0, 20.0, size=n, rng=np.random.default_rng(1))

    def cdf(x):
        return 0.5 * math.exp(x) if x < 0 else 1 - 0.5 * math.exp(-x)

    cells = list(range(-5, 6))
    p = [cdf(j + 0.5) - cdf(j - 0.5) for j in cells]
    p = [cdf(-5.5)] + p + [1 - cdf(5.5)]
    obs = [np.sum(y < -5)] + [np.sum(y == j) for j in cells] + [np.sum(y > 5)]
    stat = sum((o - n * q) ** 2 / (n * q) for o, q in zip(obs, p))
    assert stat < chi2.ppf(1 - 1e-4, len(p) - 1)


def test_uniform_doubles_weights_each_binade_by_its_length():
    # P(U* in [2^-k, 2^(1-k))) = 2^-k; and the mantissa bits are uniform (all 52 of them, unlike
    # a multiple-of-2^-53 uniform whose small values have trailing zero bits).  Each check is
    # within 5 standard errors: false-failure rate < 20 * 6e-7.
    n = 400_000
    u = uniform_doubles(n, np.random.default_rng(2))
    assert np.all((u > 0) & (u < 1))
    m, e = np.frexp(u)  # u = m 2^e, m in [0.5, 1): the binade is k = 1 - e
    for k in range(1, 8):
        p = 2.0 ** -k
        assert abs(np.mean(e == 1 - k) - p) < 5 * math.sqrt(p * (1 - p) / n)
    small = u[u < 2.0 ** -10]  # a 2^-53 grid would leave >= 10 trailing zero bits here
    assert small.size > 200
    last_bits = (np.frexp(small)[0] * 2.0 ** 53).astype(np.int64) & 1
    assert abs(last_bits.mean() - 0.5) < 5 * math.sqrt(0.25 / small.size)
    lowest = (m * 2.0 ** 53).astype(np.int64) & 1  # the last mantissa bit: fair coin
    assert abs(lowest.mean() - 0.5) < 5 * math.sqrt(0.25 / n)


def test_log_is_correctly_rounded():
    # Reference: the standard library's decimal ln at 60 digits, rounded once to a double (a
    # second, independent high-precision implementation).
    u = uniform_doubles(3000, np.random.default_rng(3))
    ctx = decimal.Context(prec=60)
    ref = np.array([float(ctx.ln(decimal.Decimal(x))) for x in u.tolist()])
    assert np.array_equal(_ln_correctly_rounded(u), ref)


def test_os_entropy_path():
    y = snapping_laplace(0.0, 1.0, 8.0, size=1000)  # rng=None: os.urandom
    assert np.all(np.abs(y) <= 8.0) and np.all(y == np.rint(y)) and np.unique(y).size > 3
    assert isinstance(snapping_laplace(0.0, 1.0, 8.0), float)


def test_audit_of_snapping_stays_below_its_claim():
    # f(D0) = 0 vs f(D1) = 1 with lambda = 1 (claim 1 + 2^-43): the bound must stay below the
    # claim (false-failure rate <= 0.05) and be far from 0 (the mechanism is tight here).
    rng = np.random.default_rng(4)
    a = snapping_laplace(0.0, 1.0, 64.0, size=30_000, rng=rng)
    b = snapping_laplace(1.0, 1.0, 64.0, size=30_000, rng=rng)
    lb = epsilon_lower_bound(a, b)
    assert 0.8 < lb <= snapping_epsilon(1.0, 64.0)
