"""The exact discrete Gaussian (vflpriv.noise.discrete) against its pmf, and its accounting
(accounting.DiscreteGaussian) against independent computations of its privacy."""
import math
import time
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from accounting import (REPLACE_ONE, DiscreteGaussian, Gaussian, SelfComposed, get_accountant,
                        report)
from vflpriv import noise
from vflpriv.errors import InputError
from vflpriv.noise.discrete import (bernoulli_exp, bernoulli_rational, discrete_gaussian,
                                    discrete_laplace, ring_noise)

#: every chi-square test below fails a correct sampler with probability 1e-6 (its threshold is
#: the chi-square quantile at 1 - 1e-6 for its degrees of freedom)
FALSE_FAILURE = 1e-6


def _pmf(s2, lo, hi):
    """Exact N_Z(0, s2) probabilities of lo..hi (mpmath, 40 digits; the normalizer sums
    |x| <= 40 sigma + 10, the rest being below exp(-800))."""
    mpmath.mp.dps = 40
    s2 = mpmath.mpf(s2.numerator) / s2.denominator
    X = int(40 * mpmath.sqrt(s2)) + 10
    w = lambda x: mpmath.exp(-mpmath.mpf(x) ** 2 / (2 * s2))
    Z = mpmath.fsum(w(x) for x in range(-X, X + 1))
    return [w(x) / Z for x in range(lo, hi + 1)]


def _chi2_ok(counts, probs):
    counts, probs = np.asarray(counts, float), np.asarray(probs, float)
    n = counts.sum()
    stat = float(((counts - n * probs) ** 2 / (n * probs)).sum())
    return stat, stats.chi2.isf(FALSE_FAILURE, len(counts) - 1)


@pytest.mark.parametrize("s2", [Fraction(1, 4), Fraction(2), Fraction(19, 2), Fraction(121)])
def test_draws_follow_the_exact_pmf(s2):
    """Bins: each integer with an expected count >= 20, the two tails merged."""
    n = 60_000
    z = discrete_gaussian(noise.generator(7), s2, n).astype(np.int64)
    X = 0
    while float(_pmf(s2, X + 1, X + 1)[0]) * n >= 20:
        X += 1
    p = [float(v) for v in _pmf(s2, -X, X)]
    tail = (1 - sum(p)) / 2
    counts = [int((z < -X).sum())] + [int((z == x).sum()) for x in range(-X, X + 1)] + \
        [int((z > X).sum())]
    probs = [tail] + p + [tail]
    if tail * n < 5:                           # too small to be a bin: fold into the ends
        counts = [counts[0] + counts[1]] + counts[2:-2] + [counts[-2] + counts[-1]]
        probs = [probs[0] + probs[1]] + probs[2:-2] + [probs[-2] + probs[-1]]
    stat, limit = _chi2_ok(counts, probs)
    assert stat < limit, (stat, limit)


def test_ring_scale_draws_have_gaussian_quantiles_and_uniform_low_bits():
    """sigma = 2.5 at scale 2^40 (the secure path's size): the counts between the continuous
    Gaussian's deciles (which the discrete one matches to a relative 1e-(10^24), by Poisson
    summation) and the low 4 bits (uniform to the same precision; Mironov's attack on
    floating-point noise reads them)."""
    sigma, bits, n = 2.5, 40, 60_000
    z = ring_noise(noise.generator(3), sigma, bits, n).view(np.int64)
    s = sigma * 2.0 ** bits
    edges = stats.norm.ppf(np.linspace(0, 1, 11)[1:-1]) * s
    counts = np.bincount(np.searchsorted(edges, z), minlength=10)
    stat, limit = _chi2_ok(counts, np.full(10, 0.1))
    assert stat < limit
    low = np.bincount((z & 15).astype(np.int64), minlength=16)
    stat, limit = _chi2_ok(low, np.full(16, 1 / 16))
    assert stat < limit


def test_bernoulli_pieces_are_exact_in_distribution():
    g = noise.generator(11)
    n = 200_000
    # p = 1/3 with a denominator past 2^64 (the digit path) and below it (bounded draws)
    for den in (3, 3 * (1 << 70)):
        hits = bernoulli_rational(g, np.full(n, den // 3, dtype=object),
                                  np.full(n, den, dtype=object)).sum()
        stat, limit = _chi2_ok([hits, n - hits], [1 / 3, 2 / 3])
        assert stat < limit
    for num, den in ((1, 3), (5, 2), (7 << 80, 3 << 80)):
        hits = bernoulli_exp(g, np.full(n, num, dtype=object), np.full(n, den, dtype=object)).sum()
        p = math.exp(-num / den)
        stat, limit = _chi2_ok([hits, n - hits], [p, 1 - p])
        assert stat < limit
    t = 3
    y = discrete_laplace(g, t, n).astype(np.int64)
    q = math.exp(-1 / t)
    p0 = (1 - q) / (1 + q)
    probs = [p0 * q ** abs(x) for x in range(-6, 7)]
    counts = [int((y == x).sum()) for x in range(-6, 7)]
    probs, counts = probs + [1 - sum(probs)], counts + [n - sum(counts)]
    stat, limit = _chi2_ok(counts, probs)
    assert stat < limit


def test_ring_noise_is_twos_complement_and_seeded_draws_repeat():
    a = ring_noise(noise.generator(5), 1.5, 20, 1000)
    b = ring_noise(noise.generator(5), 1.5, 20, 1000)
    assert a.dtype == np.uint64 and np.array_equal(a, b)
    signed = a.view(np.int64)
    assert (signed < 0).any() and (signed > 0).any()
    assert abs(np.std(signed) / (1.5 * 2 ** 20) - 1) < 0.2
    with pytest.raises(InputError):
        discrete_gaussian(noise.generator(0), 0, 3)


def test_rate(capsys):
    """Draws per second at the ring's scale (reported, and a floor far below what is measured so
    that a shared machine does not fail it)."""
    n = 100_000
    t0 = time.perf_counter()
    ring_noise(noise.generator(1), 2.5, 40, n)
    rate = n / (time.perf_counter() - t0)
    with capsys.disabled():
        print(f"\ndiscrete Gaussian at scale 2^40: {rate:,.0f} draws/s")
    assert rate > 5_000


# -- accounting --------------------------------------------------------------------------------
def _exact_delta(sigma, sens, eps, k=1):
    """delta(eps) of k compositions of the 1-d discrete Gaussian with integer shift ``sens``,
    by brute force: the privacy loss is (2 sens X + sens^2) / (2 sigma^2)-linear in the sum of
    the k draws X, whose pmf is the k-fold convolution of the exact pmf (mpmath)."""
    s2 = Fraction(sigma) ** 2
    X = int(40 * sigma) + 10
    p = _pmf(s2, -X, X)
    # the k-fold convolution in doubles: every term is a product of nonnegative numbers, so each
    # entry is off by at most ~k (2X+1) 2^-53 relative (no cancellation), far below the margins
    # the tests below leave (the pmf itself is exact to 40 digits)
    one = np.array([float(v) for v in p])
    dist = one
    for _ in range(k - 1):
        dist = np.convolve(dist, one)
    S = np.arange(dist.size) - k * X
    # P = N_Z(0)^k, Q = N_Z(sens)^k per coordinate; loss at P-draws with sum S:
    # log P/Q = sum ((x - sens)^2 - x^2) / (2 s2) = (k sens^2 - 2 sens S) / (2 s2)
    s2m = mpmath.mpf(s2.numerator) / s2.denominator
    return float(mpmath.fsum(mpmath.mpf(ps) * max(0, 1 - mpmath.exp(
        eps - (k * sens * sens - 2 * sens * int(s)) / (2 * s2m)))
        for s, ps in zip(S, dist) if ps > 0))


@pytest.mark.parametrize("sigma,sens,k,delta", [(1.5, 1, 1, 1e-5), (0.75, 1, 1, 1e-3),
                                                (2.0, 3, 2, 1e-6), (4.0, 1, 4, 1e-8)])
def test_rdp_epsilon_is_an_upper_bound_of_the_exact_one(sigma, sens, k, delta):
    """The accountant's epsilon holds (the brute-force delta at it is <= delta), and it is not
    far above the exact one (where delta(eps) crosses delta)."""
    ev = SelfComposed(DiscreteGaussian(sigma, sens), k) if k > 1 else DiscreteGaussian(sigma, sens)
    eps = get_accountant("best").epsilon(ev, delta)
    assert _exact_delta(sigma, sens, eps, k) <= delta
    assert _exact_delta(sigma, sens, 0.8 * eps, k) > delta     # and not loose by 25%


def test_dp_accounting_discrete_gaussian_pld_agrees_and_is_below():
    """dp-accounting's own DiscreteGaussianPrivacyLoss (an independent PLD of the same 1-d
    mechanism): within 1e-3 of the brute force, and below the Renyi bound."""
    from dp_accounting.pld import privacy_loss_distribution as pldlib

    sigma, sens, delta = 1.5, 1, 1e-5
    pld = pldlib.from_discrete_gaussian_mechanism(sigma, sensitivity=sens,
                                                  value_discretization_interval=1e-4)
    e_pld = pld.get_epsilon_for_delta(delta)
    assert abs(_exact_delta(sigma, sens, e_pld) - delta) < 1e-3 * delta + 1e-7
    assert e_pld <= get_accountant("rdp").epsilon(DiscreteGaussian(sigma, sens), delta)


def test_only_the_renyi_bound_supports_it_and_it_never_counts_as_gaussian():
    ev = DiscreteGaussian(3.0 * 2 ** 30, 2.0 ** 30, neighboring=REPLACE_ONE)
    r = report(ev, delta=1e-6)
    assert r.best_accountant == "rdp"
    assert all(v is None for k, v in r.values.items() if k != "rdp")
    assert r.values["rdp"] == get_accountant("rdp").epsilon(
        Gaussian(3.0, 1.0, neighboring=REPLACE_ONE), 1e-6)


@settings(max_examples=25, deadline=None)
@given(sigma=st.floats(0.6, 4.0), sens=st.integers(1, 3),
       delta=st.sampled_from([1e-2, 1e-4, 1e-6, 1e-9]))
def test_renyi_epsilon_holds_for_the_exact_mechanism(sigma, sens, delta):
    eps = get_accountant("best").epsilon(DiscreteGaussian(sigma, sens), delta)
    assert _exact_delta(sigma, sens, eps) <= delta * (1 + 1e-9)


@settings(max_examples=30, deadline=None)
@given(draws=st.lists(st.integers(0, 40), max_size=5), seed=st.integers(0, 2 ** 32))
def test_a_restored_generator_continues_the_discrete_stream(draws, seed):
    g = noise.generator(seed)
    for m in draws:
        discrete_gaussian(g, Fraction(9, 4), m)
    h = noise.generator(0)
    noise.restore(h, noise.state(g))
    assert np.array_equal(discrete_gaussian(g, Fraction(9, 4), 50),
                          discrete_gaussian(h, Fraction(9, 4), 50))


def test_the_audit_entry_runs_and_holds():
    from vflpriv.audit import registered, run_suite

    assert "discrete_gaussian" in registered()
    res = run_suite(["discrete_gaussian"], samples=20_000, seed=0)
    row = res["mechanisms"][0]
    assert res["ok"] and 0 < row["lower_bound"] <= row["claimed_epsilon"]
    assert row["event"]["kind"] == "discrete_gaussian" and row["tradeoff"]["mu_claimed"] is None


@settings(max_examples=40, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2 ** 32), size=st.integers(1, 40),
       s2=st.sampled_from([Fraction(1, 4), Fraction(19, 2), Fraction(13, 7) * (1 << 60)]))
def test_the_few_draws_path_is_the_vectorized_path(seed, size, s2):
    """Few pending draws go through a plain-Python twin of the vectorized Bernoulli(exp(-r))
    step; it must make the same calls to the generator in the same order: the same draws and the
    same generator state after them, so seeded runs and the chi-square tests above carry over.
    Sizes up to 40 cross the threshold (32) inside a call; r = 1 (the geometric's trials) takes
    the exact undecided branch."""
    import vflpriv.noise.discrete as D

    runs, default = [], D._FEW
    try:
        for few in (default, 0):
            D._FEW = few
            g = noise.generator(seed)
            z = discrete_gaussian(g, s2, size).tolist()
            b = D._bernoulli_exp_fraction(g, np.array([1, 3, 0, 5] * 3, dtype=object),
                                          np.array([1, 7, 9, 5] * 3, dtype=object)).tolist()
            runs.append((z, b, int(g.bit_generator.random_raw())))
    finally:
        D._FEW = default
    assert runs[0] == runs[1]


def test_few_draws_path_bernoulli_exp_is_exact_in_distribution():
    """Bernoulli(exp(-1/3)) one draw per call (the few-draws path), chi-square at 1e-6."""
    g = noise.generator(12)
    n = 20_000
    hits = sum(bool(bernoulli_exp(g, np.array([1], dtype=object), np.array([3], dtype=object))[0])
               for _ in range(n))
    p = math.exp(-1 / 3)
    stat, limit = _chi2_ok([hits, n - hits], [p, 1 - p])
    assert stat < limit
