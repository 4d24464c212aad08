"""Cross-checks against dp-accounting 0.6 and (when installed) opacus, and between our compiled
kernels and their pure-Python reference."""
import logging
import math

import numpy as np
import pytest
from scipy import integrate, stats

from accounting import (_native, _reference, Gaussian, Laplace, PoissonSubsampledGaussian,
                        SelfComposed, get_accountant)
from accounting.accountants.rdp import DEFAULT_ORDERS, RDPAccountant

dp_accounting = pytest.importorskip("dp_accounting")
from dp_accounting import dp_event as de  # noqa: E402
from dp_accounting.rdp import rdp_privacy_accountant as rdpa  # noqa: E402

GRID = [(q, s, T) for q in (0.001, 0.01, 0.1, 0.5) for s in (0.8, 1.1, 3.0) for T in (10, 1000)]
INT_ORDERS = np.array([2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 32, 48, 63, 128, 256], dtype=float)


def _dp_rdp_eps(event, delta, orders=None):
    acc = rdpa.RdpAccountant(orders=None if orders is None else list(orders))
    acc.compose(event)
    return acc.get_epsilon_and_optimal_order(delta)


@pytest.fixture(autouse=True)
def _quiet_absl():
    # dp-accounting logs a warning for each fractional order it excludes (see below)
    logging.getLogger("absl").setLevel(logging.ERROR)


@pytest.mark.parametrize("sigma, T", [(0.5, 1), (1.0, 10), (3.0, 20), (10.0, 1000)])
def test_rdp_gaussian_matches_dp_accounting(sigma, T):
    ours = RDPAccountant().epsilon_and_order(SelfComposed(Gaussian(sigma), T), 1e-5)
    theirs = _dp_rdp_eps(de.SelfComposedDpEvent(de.GaussianDpEvent(sigma), T), 1e-5)
    assert ours[0] == pytest.approx(theirs[0], rel=1e-12) and ours[1] == theirs[1]


@pytest.mark.parametrize("scale, T", [(0.5, 1), (2.0, 1), (10.0, 50), (100.0, 1000)])
def test_rdp_laplace_matches_dp_accounting(scale, T):
    ours = RDPAccountant().epsilon_and_order(SelfComposed(Laplace(scale), T), 1e-5)
    theirs = _dp_rdp_eps(de.SelfComposedDpEvent(de.LaplaceDpEvent(scale), T), 1e-5)
    assert ours[0] == pytest.approx(theirs[0], rel=1e-10) and ours[1] == theirs[1]


def test_rdp_subsampled_gaussian_against_dp_accounting():
    """Integer orders: dp-accounting's series is the same sum, the values agree.  Fractional
    orders: dp-accounting 0.6.0 adds |C(alpha, i)| terms without their signs (its _log_comb is
    log|.| from gammaln) and gives up after 1000 terms (excluding the order), so its value is an
    upper bound of ours; ours equals opacus and numerical integration (tests below)."""
    for q, s, T in GRID:
        ev = SelfComposed(PoissonSubsampledGaussian(s, q), T)
        dev = de.SelfComposedDpEvent(de.PoissonSampledDpEvent(q, de.GaussianDpEvent(s)), T)
        ours_int = RDPAccountant(orders=INT_ORDERS).epsilon(ev, 1e-5)
        theirs_int = _dp_rdp_eps(dev, 1e-5, INT_ORDERS)[0]
        assert ours_int == pytest.approx(theirs_int, rel=1e-9), (q, s, T)
        ours = RDPAccountant().epsilon(ev, 1e-5)
        theirs = _dp_rdp_eps(dev, 1e-5)[0]
        assert ours <= theirs + 1e-12, (q, s, T)
        assert ours <= ours_int + 1e-12      # a superset of the orders never hurts


def test_order_exclusion_caveat_case():
    # notes 1.5: q=0.1, sigma=0.8, T=500: opacus 28.2499 (alpha 1.9); dp-accounting 28.6335
    # (alpha 2.0) because it drops alpha = 1.1..1.6 and overstates the other fractional orders
    ev = SelfComposed(PoissonSubsampledGaussian(0.8, 0.1), 500)
    eps, order = RDPAccountant().epsilon_and_order(ev, 1e-5)
    assert eps == pytest.approx(28.2499, abs=1e-4) and order == 1.9
    theirs = _dp_rdp_eps(de.SelfComposedDpEvent(de.PoissonSampledDpEvent(0.1, de.GaussianDpEvent(0.8)), 500), 1e-5)
    assert theirs[0] == pytest.approx(28.6335, abs=1e-4) and theirs[0] > eps


QSA = [(q, s) for q in (1e-4, 0.01, 0.5, 0.9) for s in (0.5, 2.0, 20.0)]


def test_log_a_compiled_vs_reference_vs_dp_accounting():
    # the pure-Python twin and the compiled kernel are the same series
    for q, s in QSA:
        ref = _reference.log_a_subsampled_gaussian(q, s, DEFAULT_ORDERS)
        if _native.compiled:
            from accounting import _kernels

            fast = _kernels.log_a_subsampled_gaussian(q, s, DEFAULT_ORDERS)
            # CPython's math.lgamma is not libm's: ~1e-15 relative apart at lgamma(52) ~ 152,
            # so log A agrees to ~1e-13 absolute
            assert np.allclose(fast, ref, rtol=1e-10, atol=1e-12), (q, s)
        assert np.allclose(_native.log_a_subsampled_gaussian(q, s, DEFAULT_ORDERS), ref,
                           rtol=1e-10, atol=1e-12)
        ints = np.ascontiguousarray(DEFAULT_ORDERS[DEFAULT_ORDERS == np.round(DEFAULT_ORDERS)])
        theirs = np.array([rdpa._compute_log_a(q, s, int(a)) for a in ints])
        ours = _native.log_a_subsampled_gaussian(q, s, ints)
        assert np.allclose(ours, theirs, rtol=1e-10, atol=1e-14), (q, s)
        frac = np.ascontiguousarray(DEFAULT_ORDERS[DEFAULT_ORDERS != np.round(DEFAULT_ORDERS)][::14])
        theirs_f = np.array([rdpa._compute_log_a(q, s, a) for a in frac])
        assert np.all(_native.log_a_subsampled_gaussian(q, s, frac) <= theirs_f * (1 + 1e-12) + 1e-15)


def _log_a_quad(q, s, alpha):
    """A_alpha = E_{z ~ N(0, s^2)} [((1 - q) + q exp((2z - 1) / (2 s^2)))^alpha] (Mironov et al.
    2019, Sec 3), by adaptive quadrature."""
    f = lambda z: math.exp(stats.norm.logpdf(z, 0, s)
                           + alpha * math.log((1 - q) + q * math.exp((2 * z - 1) / (2 * s * s))))
    val = integrate.quad(f, -40 * s, 40 * s + alpha, points=[0.0, 0.5, 1.0], limit=400,
                         epsabs=0, epsrel=1e-12)[0]
    return math.log(val)


@pytest.mark.parametrize("q, s, alpha", [(0.9, 2.0, 1.5), (0.01, 1.0, 1.5), (0.5, 5.0, 2.5),
                                         (0.1, 0.8, 1.9), (0.1, 0.8, 1.1), (0.3, 1.2, 3.3),
                                         (0.05, 2.0, 7.0)])
def test_log_a_against_numerical_integration(q, s, alpha):
    ours = _native.log_a_subsampled_gaussian(q, s, np.array([alpha]))[0]
    assert ours == pytest.approx(_log_a_quad(q, s, alpha), rel=1e-7)
    assert _reference.log_a_subsampled_gaussian(q, s, np.array([alpha]))[0] == pytest.approx(ours, rel=1e-12)


@pytest.mark.parametrize("k, eps", [(1, 0.5), (10, 0.1), (100, 1.0), (1000, 0.01)])
def test_kov_compiled_vs_reference(k, eps):
    for frac in (0.0, 0.1, 0.5, 0.9):
        a = _reference.kov_delta_pure(k, eps, frac * k * eps)
        b = _native.kov_delta_pure(k, eps, frac * k * eps)
        assert b == pytest.approx(a, rel=1e-12, abs=1e-300)


@pytest.mark.parametrize("scale, T, delta", [(1.0, 1, 1e-5), (10.0, 10, 1e-5), (10.0, 100, 1e-5)])
def test_pld_laplace_matches_dp_accounting(scale, T, delta):
    from dp_accounting.pld import pld_privacy_accountant as plda

    acc = plda.PLDAccountant()
    acc.compose(de.LaplaceDpEvent(scale), T)
    theirs = acc.get_epsilon(delta)
    ours = get_accountant("pld").epsilon(SelfComposed(Laplace(scale), T), delta)
    # ours: our own connect-the-dots Laplace PMF, read with its proven float error added; theirs:
    # dp-accounting's.  Both are upper bounds on the same profile and agree closely.
    assert ours == pytest.approx(theirs, abs=2e-5)
    if T == 1:
        assert ours == pytest.approx(1.0 / scale, abs=1e-3)   # Laplace: exactly 1/b-DP at small delta
    else:   # Laplace PLD beats the generic pure-DP optimum (notes 6.3)
        assert ours < get_accountant("optimal").epsilon(SelfComposed(Laplace(scale), T), delta)


def test_analytic_gaussian_matches_dp_accounting():
    from accounting.gaussian import gaussian_epsilon, gaussian_sigma

    for sigma, delta in [(1.0, 1e-5), (2.0, 1e-5), (5.0, 1e-6), (0.5, 1e-3)]:
        assert gaussian_epsilon(1 / sigma, delta) == pytest.approx(
            dp_accounting.get_epsilon_gaussian(sigma, delta), abs=1e-6)
    for eps, delta in [(1.0, 1e-5), (0.5, 1e-6), (2.0, 1e-5), (4.0, 1e-5)]:
        assert gaussian_sigma(eps, delta) == pytest.approx(
            dp_accounting.get_sigma_gaussian(eps, delta), abs=1e-5)


# ------------------------------------------------------------------------------ opacus

def test_rdp_against_opacus():
    pytest.importorskip("torch")
    pytest.importorskip("opacus")
    from opacus.accountants import RDPAccountant as OpacusRDP
    from opacus.accountants.analysis.rdp import compute_rdp, get_privacy_spent

    alphas = np.array(OpacusRDP.DEFAULT_ALPHAS, dtype=float)
    ours_acc = RDPAccountant(orders=alphas)
    # opacus' series runs in pure Python (~0.3 s per case under load): a spread-out subset
    for q, s, T in GRID[::4] + [(0.1, 0.8, 500), (256 / 60000, 1.1, 14100)]:
        ev = SelfComposed(PoissonSubsampledGaussian(s, q), T)
        theirs_rdp = np.asarray(compute_rdp(q=q, noise_multiplier=s, steps=T, orders=alphas))
        ours_rdp = ours_acc.rdp([(PoissonSubsampledGaussian(s, q), T)])
        # both sum the same series and stop at terms below e^-30; where log A is ~1e-6 that
        # leaves ~1e-8 relative differences (quadrature cannot tell which is closer)
        assert np.allclose(ours_rdp, theirs_rdp, rtol=1e-7, atol=1e-9), (q, s, T)
        theirs_eps, theirs_alpha = get_privacy_spent(orders=alphas, rdp=theirs_rdp, delta=1e-5)
        ours_eps, ours_alpha = ours_acc.epsilon_and_order(ev, 1e-5)
        assert ours_eps == pytest.approx(max(0.0, theirs_eps), rel=1e-9, abs=1e-8), (q, s, T)
        assert ours_alpha == theirs_alpha
    # the DP-SGD example and the caveat case (notes 1.5)
    assert ours_acc.epsilon(SelfComposed(PoissonSubsampledGaussian(1.1, 256 / 60000), 14100), 1e-5) == \
        pytest.approx(2.600343, abs=1e-6)
    assert ours_acc.epsilon(SelfComposed(PoissonSubsampledGaussian(0.8, 0.1), 500), 1e-5) == \
        pytest.approx(28.2499, abs=1e-4)


def test_pld_against_opacus_prv_and_gdp():
    # opacus' PRV accountant (Gopi et al. 2021) is an independent numerical composition whose
    # get_epsilon returns its upper estimate (eps_error 0.01 by default): our PLD must not exceed
    # it and must be within its error.  opacus' GDP accountant is a central-limit approximation
    # and can fall BELOW the truth; `vflpriv bench accounting` shows it for magnitude only.
    pytest.importorskip("torch")
    pytest.importorskip("opacus")
    import warnings

    from opacus.accountants import GaussianAccountant, PRVAccountant

    from accounting import get_accountant

    for s, q, T in [(1.0, 0.01, 1000), (1.1, 256 / 60000, 14100)]:
        prv = PRVAccountant()
        prv.history = [(s, q, T)]
        theirs = prv.get_epsilon(1e-5)
        ours = get_accountant("pld").epsilon(SelfComposed(PoissonSubsampledGaussian(s, q), T), 1e-5)
        assert ours <= theirs + 1e-6 and theirs - ours <= 0.02, (s, q, T, ours, theirs)
    gdp = GaussianAccountant()
    gdp.history = [(1.0, 0.01, 1000)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        approx = gdp.get_epsilon(1e-5)
    assert approx < 1.7 < 1.82 < get_accountant("pld").epsilon(
        SelfComposed(PoissonSubsampledGaussian(1.0, 0.01), 1000), 1e-5)
