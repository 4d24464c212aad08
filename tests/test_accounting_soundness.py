"""No accountant answers below the truth, at any delta from 0.5 down to 1e-300 (issue #11).

Property-based sweep (hypothesis) over every event kind, every accountant, epsilon-for-delta and
delta-for-epsilon.  The truth comes from an independent computation at high precision (mpmath):

* exact where a closed form exists: compositions of Gaussians (mu-GDP, Balle & Wang's profile),
  of one generic eps-DP or (eps, delta0)-DP release (Kairouz-Oh-Viswanath's formula, term by term at
  400 digits), one Laplace release (delta(e) = 1 - e^{(e - eps)/2});
* a lower bound on the truth elsewhere, which an answer must not go below either: bounded-range
  selections (the non-adaptive optimum of Dong, Durfee, Rogers 2020), zCDP (a Gaussian with the
  same rho is rho-zCDP), k Laplace releases and Poisson-subsampled Gaussians (dp-accounting's
  optimistic PLD, which rounds losses down and drops tail mass).

An epsilon answer e at delta is sound iff truth_delta(e) <= delta; a delta answer d at epsilon is
sound iff d >= truth_delta(epsilon).  The relative slack 1e-9 on delta is far below any difference
a deployment can see and covers the floating point of the references themselves; epsilons are
doubles, so an answer may sit up to 1e-14 (relative) below the truth: ten releases of
Laplace(scale=10) spend exactly 1, and a float sum rounding to 0.99999999999999989 must not refuse
a budget of 1 (see docs/certify.md, "Floating point").
"""
import functools
import math

import mpmath
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accounting import (ApproxDP, Exponential, Gaussian, Laplace, PoissonSubsampledGaussian, PureDP,
                        ReportNoisyMax, SelfComposed, ZCDP, get_accountant, report)
from accounting.accountants import UnsupportedEventError
from accounting.accountants.bounded_range import nonadaptive_delta

NAMES = ("basic", "advanced", "optimal", "rdp", "pld", "best")
SLACK = 1e-9
ULPS = 1e-14
SETTINGS = settings(max_examples=15, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])

# delta = 10^-x: half the draws in [0.01, 0.5] (large deltas read the far end of every curve)
log10_delta = st.one_of(st.floats(min_value=-math.log10(0.5), max_value=2.0),
                        st.floats(min_value=-math.log10(0.5), max_value=300.0))
epsilons = st.floats(min_value=0.0, max_value=60.0)


# ------------------------------------------------------------------ references (mpmath)

def mp_gaussian_delta(mu, eps):
    with mpmath.workdps(60):
        mu, eps = mpmath.mpf(mu), mpmath.mpf(eps)
        # erfc keeps the relative precision of far tails (ncdf(-40) is 1e-350, not 0)
        phi = lambda x: mpmath.erfc(-x / mpmath.sqrt(2)) / 2
        return max(mpmath.mpf(0), phi(mu / 2 - eps / mu) - mpmath.exp(eps) * phi(-mu / 2 - eps / mu))


def mp_kov_delta(k, eps, d0, eps_g):
    with mpmath.workdps(400):
        e, eg = mpmath.mpf(eps), mpmath.mpf(eps_g)
        s = mpmath.fsum(mpmath.binomial(k, j) * (mpmath.exp((k - j) * e) - mpmath.exp(eg + j * e))
                        for j in range(k + 1) if (k - 2 * j) * e > eg)
        return 1 - (1 - mpmath.mpf(d0)) ** k * (1 - s / (1 + mpmath.exp(e)) ** k)


def mp_laplace_delta(eps, eps_g):
    with mpmath.workdps(60):
        return max(mpmath.mpf(0), -mpmath.expm1((mpmath.mpf(eps_g) - eps) / 2))


@functools.lru_cache(maxsize=4)
def optimistic_pld(event):
    """dp-accounting's optimistic PLD (a lower bound on the truth) of k Laplace or subsampled
    Gaussian releases; built once per event (events are frozen dataclasses), not once for each
    accountant's answer."""
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    leaf, k = event.event, event.count
    if isinstance(leaf, Laplace):
        pld = pld_lib.from_laplace_mechanism(leaf.scale, sensitivity=leaf.sensitivity,
                                             pessimistic_estimate=False,
                                             value_discretization_interval=1e-3)
    else:
        pld = pld_lib.from_gaussian_mechanism(leaf.noise_multiplier, sampling_prob=leaf.sample_rate,
                                              pessimistic_estimate=False,
                                              value_discretization_interval=1e-3)
    return pld.self_compose(k) if k > 1 else pld


def truth_delta(event, eps_g):
    """The exact delta at eps_g, or a lower bound on it (see the module docstring)."""
    leaf, k = event.event, event.count
    if isinstance(leaf, Gaussian):
        return mp_gaussian_delta(math.sqrt(k) * leaf.mu, eps_g)
    if isinstance(leaf, ZCDP):
        return mp_gaussian_delta(math.sqrt(2 * leaf.rho * k), eps_g)
    if isinstance(leaf, Laplace) and k == 1:
        return mp_laplace_delta(leaf.epsilon, eps_g)
    if isinstance(leaf, (Laplace, PoissonSubsampledGaussian)):
        # the optimistic PLD still reports ~1e-15 per composition of truncated tail mass where
        # the truth is 0 (k Laplace releases at eps_g = k eps): take it off
        value = optimistic_pld(event).get_delta_for_epsilon(eps_g) - 2e-15 * k
        return mpmath.mpf(max(0.0, value))
    if getattr(leaf, "bounded_range", False):
        return mpmath.mpf(nonadaptive_delta(leaf.epsilon, k, eps_g, t_grid=16))
    eps = leaf.epsilon
    d0 = leaf.delta if isinstance(leaf, ApproxDP) else 0.0
    return mp_kov_delta(k, eps, d0, eps_g)


# ------------------------------------------------------------------ events

counts = st.integers(min_value=1, max_value=60)
small_eps = st.floats(min_value=0.01, max_value=2.0)

EVENTS = {
    "gaussian": st.builds(lambda s, k: SelfComposed(Gaussian(s), k),
                          st.floats(min_value=2.0, max_value=30.0), counts),
    "pure_dp": st.builds(lambda e, k: SelfComposed(PureDP(e), k), small_eps, counts),
    "approx_dp": st.builds(lambda e, d, k: SelfComposed(ApproxDP(e, d), k), small_eps,
                           st.floats(min_value=1e-12, max_value=1e-4), counts),
    "rnm_laplace": st.builds(lambda b, k: SelfComposed(ReportNoisyMax("laplace", b), k),
                             st.floats(min_value=1.0, max_value=100.0), counts),
    "rnm_exponential": st.builds(lambda b, k: SelfComposed(ReportNoisyMax("exponential", b), k),
                                 st.floats(min_value=1.0, max_value=100.0), counts),
    "rnm_gumbel": st.builds(lambda b, k: SelfComposed(ReportNoisyMax("gumbel", b), k),
                            st.floats(min_value=1.0, max_value=100.0), counts),
    "exponential": st.builds(lambda e, k: SelfComposed(Exponential(e), k), small_eps, counts),
    "laplace": st.builds(lambda b, k: SelfComposed(Laplace(b), k),
                         st.floats(min_value=0.5, max_value=50.0), counts),
    "zcdp": st.builds(lambda r, k: SelfComposed(ZCDP(r), k),
                      st.floats(min_value=1e-4, max_value=1.0), counts),
    "subsampled_gaussian": st.builds(
        lambda s, q, k: SelfComposed(PoissonSubsampledGaussian(s, q), k),
        st.floats(min_value=0.8, max_value=5.0), st.floats(min_value=0.001, max_value=0.2),
        st.integers(min_value=1, max_value=20)),
}


def _answers(event, query, value):
    out = {}
    for name in NAMES:
        acc = get_accountant(name)
        try:
            out[name] = acc.epsilon(event, value) if query == "epsilon" else acc.delta(event, value)
        except UnsupportedEventError:
            continue
    return out


@pytest.mark.parametrize("kind", sorted(EVENTS))
def test_no_epsilon_below_the_truth(kind):
    @SETTINGS
    @given(event=EVENTS[kind], x=log10_delta)
    def check(event, x):
        delta = 10.0 ** -x
        for name, eps in _answers(event, "epsilon", delta).items():
            assert not math.isnan(eps), (name, event, delta)
            assert eps >= 0
            if math.isinf(eps):
                continue                    # no guarantee claimed: valid
            truth = truth_delta(event, eps * (1 + ULPS))
            assert truth <= delta * (1 + SLACK), (name, event, delta, eps, float(truth))

    check()


@pytest.mark.parametrize("kind", sorted(EVENTS))
def test_no_delta_below_the_truth(kind):
    @SETTINGS
    @given(event=EVENTS[kind], eps=epsilons)
    def check(event, eps):
        answers = _answers(event, "delta", eps)
        truth = truth_delta(event, eps)         # one truth for every accountant's answer
        # a positive truth below 1e-300 may underflow to 0 in a double computation
        required = truth * (1 - SLACK) if truth >= 1e-300 else 0
        for name, d in answers.items():
            assert not math.isnan(d), (name, event, eps)
            assert 0.0 <= d <= 1.0
            assert d >= required, (name, event, eps, d, float(truth))

    check()


@SETTINGS
@given(e=small_eps, d0=st.floats(min_value=1e-8, max_value=1e-3), k=counts, x=log10_delta)
def test_no_finite_epsilon_where_none_exists(e, d0, k, x):
    """k releases of (e, d0)-DP cannot be (eps, delta)-DP for any eps when
    delta < 1 - (1 - d0)^k (the chance that some release fails outright): inf everywhere."""
    delta = 10.0 ** -x
    if not delta < -math.expm1(k * math.log1p(-d0)):
        return
    event = SelfComposed(ApproxDP(e, d0), k)
    for name, eps in _answers(event, "epsilon", delta).items():
        assert eps == math.inf, (name, eps)
    rep = report(event, delta=delta)
    assert all(rep.reasons[name] for name, v in rep.values.items() if v == math.inf)
