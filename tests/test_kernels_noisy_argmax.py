"""Tests of vflpriv.kernels.noisy_argmax / signed_noisy_argmax (compiled and numpy reference).

Statistical tests are seeded (deterministic in CI); each states its false-failure rate, i.e. the
probability that a correct implementation fails it for a fresh seed.
"""
import os
import subprocess
import sys

import numpy as np
import pytest
from scipy import integrate, stats

import vflpriv.kernels as K
from vflpriv.kernels import reference as R

NOISES = ("laplace", "gumbel", "exponential")
needs_compiled = pytest.mark.skipif(not K.compiled, reason="extension not built")


def _counts(fn, scores, noise, scale, seed, draws, signed=False):
    rng = np.random.default_rng(seed)
    size = 2 * len(scores) if signed else len(scores)
    counts = np.zeros(size, dtype=np.int64)
    for _ in range(draws):
        if signed:
            i, s = fn(scores, noise, scale, rng)
            counts[2 * i + (0 if s == 1 else 1)] += 1
        else:
            counts[fn(scores, noise, scale, rng)] += 1
    return counts


def _gof_pvalue(counts, probs):
    expected = probs * counts.sum()
    return stats.chisquare(counts, expected).pvalue


def _rnm_probabilities(scores, noise, scale):
    """P(argmax_i (s_i + Z_i) = i) by numerical integration of f_i * prod_{j != i} F_j: an
    independent reference that shares nothing with the kernels' transforms."""
    dist = {"laplace": stats.laplace(scale=scale), "gumbel": stats.gumbel_r(scale=scale),
            "exponential": stats.expon(scale=scale)}[noise]
    probs = []
    for i, si in enumerate(scores):
        others = [sj for j, sj in enumerate(scores) if j != i]

        def integrand(x, si=si, others=others):
            return dist.pdf(x - si) * np.prod([dist.cdf(x - sj) for sj in others])
        lo, hi = min(scores) - 60 * scale, max(scores) + 60 * scale
        pts = sorted(set(scores))
        probs.append(integrate.quad(integrand, lo, hi, points=pts, limit=400, epsabs=1e-12)[0])
    return np.array(probs)


# ---------------------------------------------------------------- compiled == reference (exactly)
@needs_compiled
@pytest.mark.parametrize("noise", NOISES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_compiled_matches_reference_draw_for_draw(noise, dtype):
    # Same words, same transforms: the same index from the same seed, and the Generator ends in
    # the same state (can fail: any difference in the stream, transform or filter shows up).
    scores = np.random.default_rng(11).standard_normal(3000).astype(dtype)
    for fn_c, fn_r in [(K.noisy_argmax, R.noisy_argmax),
                       (K.signed_noisy_argmax, R.signed_noisy_argmax)]:
        a, b = np.random.default_rng(5), np.random.default_rng(5)
        for scale in (0.05, 1.0, 30.0):
            got = [fn_c(scores, noise, scale, a) for _ in range(40)]
            want = [fn_r(scores, noise, scale, b) for _ in range(40)]
            assert got == want
        assert a.bit_generator.state == b.bit_generator.state


@needs_compiled
def test_strided_scores_are_read_in_place():
    base = np.random.default_rng(2).standard_normal(4000)
    view = base[::4]
    a, b = np.random.default_rng(9), np.random.default_rng(9)
    got = [K.noisy_argmax(view, "gumbel", 0.3, a) for _ in range(50)]
    want = [R.noisy_argmax(np.ascontiguousarray(view), "gumbel", 0.3, b) for _ in range(50)]
    assert got == want


# ---------------------------------------------------------------- distributions
@pytest.mark.parametrize("noise", NOISES)
@pytest.mark.parametrize("signed", [False, True])
def test_compiled_and_reference_agree_in_distribution(noise, signed):
    # Two-sample chi-square test of homogeneity between the compiled and the reference path run
    # on independent seeds, 6000 draws each.  alpha = 1e-3 per case, 6 cases: false-failure rate
    # at most 0.6% for fresh seeds (these seeds are fixed, so CI is deterministic).
    scores = np.array([0.0, 0.4, 0.9, -0.3, 0.7])
    fc = K.signed_noisy_argmax if signed else K.noisy_argmax
    fr = R.signed_noisy_argmax if signed else R.noisy_argmax
    c1 = _counts(fc, scores, noise, 0.5, 101, 6000, signed)
    c2 = _counts(fr, scores, noise, 0.5, 202, 6000, signed)
    keep = (c1 + c2) > 0
    p = stats.chi2_contingency(np.vstack([c1[keep], c2[keep]]))[1]
    assert p > 1e-3


@pytest.mark.parametrize("fn", [K.noisy_argmax, R.noisy_argmax], ids=["kernel", "reference"])
def test_gumbel_selects_with_softmax_probabilities(fn):
    # Gumbel-max: P(i) = softmax(s / scale)_i exactly.  Chi-square goodness of fit, 20000 draws,
    # alpha = 1e-4 per path (false-failure rate 2e-4 for both paths together).
    scores = np.array([1.0, 0.2, -0.5, 0.8, 0.0, 1.3])
    scale = 0.7
    probs = np.exp(scores / scale) / np.exp(scores / scale).sum()
    counts = _counts(fn, scores, "gumbel", scale, 7, 20000)
    assert _gof_pvalue(counts, probs) > 1e-4


def test_signed_gumbel_is_softmax_over_both_signs():
    # Candidates +s and -s: P(i, +) proportional to exp(s_i / scale), P(i, -) to exp(-s_i / scale).
    # Chi-square goodness of fit, 20000 draws, alpha = 1e-4.
    scores = np.array([0.5, -0.2, 0.1])
    scale = 0.4
    logits = np.ravel(np.column_stack([scores, -scores])) / scale
    probs = np.exp(logits) / np.exp(logits).sum()
    counts = _counts(K.signed_noisy_argmax, scores, "gumbel", scale, 8, 20000, signed=True)
    assert _gof_pvalue(counts, probs) > 1e-4


@pytest.mark.parametrize("noise", ["laplace", "exponential"])
def test_laplace_and_exponential_match_integrated_probabilities(noise):
    # Selection law against numerical integration (scipy.stats densities): chi-square goodness of
    # fit, 20000 draws, alpha = 1e-4 per noise (false-failure rate 2e-4 in all).
    scores = np.array([0.3, 0.0, -0.4, 0.6])
    probs = _rnm_probabilities(scores, noise, 0.5)
    assert abs(probs.sum() - 1) < 1e-6
    counts = _counts(K.noisy_argmax, scores, noise, 0.5, 9, 20000)
    assert _gof_pvalue(counts, probs) > 1e-4


@pytest.mark.parametrize("noise,dist", [("laplace", stats.laplace), ("gumbel", stats.gumbel_r),
                                        ("exponential", stats.expon)])
def test_noise_transform_has_the_stated_law(noise, dist):
    # The inverse-CDF transform of the raw words against scipy's distribution: Kolmogorov-Smirnov,
    # 200000 draws, alpha = 1e-4 per noise.
    words = np.random.default_rng(3).integers(0, 2**64, size=200_000, dtype=np.uint64)
    z = R.noise_from_words(words, noise, 2.0)
    assert np.isfinite(z).all()
    assert stats.kstest(z, dist(scale=2.0).cdf).pvalue > 1e-4


def test_extreme_words_give_finite_noise():
    # Words 0 and 2^64 - 1 are the extreme grid points U = 2^-53 and 1 - 2^-53: no log(0).
    words = np.array([0, 2**64 - 1, 2**63, 2**63 - 1], dtype=np.uint64)
    for noise in NOISES:
        assert np.isfinite(R.noise_from_words(words, noise, 1.0)).all()


# ---------------------------------------------------------------- edge cases
@pytest.mark.parametrize("fn", [K.noisy_argmax, R.noisy_argmax], ids=["kernel", "reference"])
def test_length_one(fn):
    rng = np.random.default_rng(0)
    assert all(fn(np.array([3.0]), noise, 1.0, rng) == 0 for noise in NOISES for _ in range(20))


def test_signed_length_one_chooses_the_sign_by_noise():
    # d = 1 signed: P(+) = softmax([s, -s] / scale)[0] = 1 / (1 + exp(-2 s / scale)) under Gumbel.
    # Binomial test, 20000 draws, alpha = 1e-4.
    rng = np.random.default_rng(4)
    signs = [K.signed_noisy_argmax([0.3], "gumbel", 1.0, rng) for _ in range(20000)]
    assert {i for i, _ in signs} == {0}
    plus = sum(1 for _, s in signs if s == 1)
    assert stats.binomtest(plus, 20000, 1 / (1 + np.exp(-0.6))).pvalue > 1e-4


@pytest.mark.parametrize("noise", NOISES)
def test_ties_are_broken_uniformly_by_noise(noise):
    # Equal scores: every index equally likely.  Chi-square, 10000 draws, alpha = 1e-4 per noise.
    counts = _counts(K.noisy_argmax, np.full(5, 0.25), noise, 1.0, 12, 10000)
    assert _gof_pvalue(counts, np.full(5, 0.2)) > 1e-4


@pytest.mark.parametrize("fn", [K.noisy_argmax, R.noisy_argmax, K.signed_noisy_argmax,
                                R.signed_noisy_argmax])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nonfinite_scores_raise_naming_the_index(fn, bad):
    scores = np.array([0.1, 0.2, bad, 0.3])
    with pytest.raises(ValueError, match=r"scores\[2\]"):
        fn(scores, "laplace", 1.0, np.random.default_rng(0))


@pytest.mark.parametrize("fn", [K.noisy_argmax, R.noisy_argmax])
@pytest.mark.parametrize("kwargs,match", [
    (dict(scores=[], noise="laplace", scale=1.0), "empty"),
    (dict(scores=[[1.0, 2.0]], noise="laplace", scale=1.0), "1-D"),
    (dict(scores=[1.0], noise="cauchy", scale=1.0), "cauchy"),
    (dict(scores=[1.0], noise="laplace", scale=0.0), "scale"),
    (dict(scores=[1.0], noise="laplace", scale=float("nan")), "scale"),
    (dict(scores=["a"], noise="laplace", scale=1.0), "real"),
])
def test_bad_arguments_raise_value_error(fn, kwargs, match):
    with pytest.raises(ValueError, match=match):
        fn(kwargs["scores"], kwargs["noise"], kwargs["scale"], np.random.default_rng(0))


@pytest.mark.parametrize("fn", [K.noisy_argmax, R.noisy_argmax])
def test_rng_must_be_a_generator(fn):
    with pytest.raises(ValueError, match="Generator"):
        fn([1.0, 2.0], "laplace", 1.0, np.random.RandomState(0))
    with pytest.raises(ValueError, match="Generator"):
        fn([1.0, 2.0], "laplace", 1.0, 42)


def test_force_reference_environment_variable():
    code = ("import numpy as np, vflpriv.kernels as K, accounting._native as N;"
            "print(K.compiled, N.compiled, K.noisy_argmax([0.0, 5.0], 'laplace', 0.01,"
            " np.random.default_rng(0)))")
    env = dict(os.environ, VFLPRIV_FORCE_REFERENCE="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "False", "1"]
