"""Closed forms against the reference values of ``notes-accounting-landscape.md`` (section 6,
computed there with mpmath at 50 digits and confirmed by dp-accounting, autodp, opacus, PRV) and
against independent high-precision re-implementations (mpmath) of the same formulas."""
import math

import mpmath
import numpy as np
import pytest
from scipy import integrate

from accounting import ApproxDP, Gaussian, Laplace, PureDP, SelfComposed, get_accountant
from accounting.accountants.optimal import kov_delta, kov_epsilon
from accounting.accountants.rdp import (RDPAccountant, rdp_bounded_range, rdp_gaussian,
                                        rdp_laplace, rdp_pure)
from accounting.gaussian import gaussian_delta, gaussian_epsilon, gaussian_sigma

mpmath.mp.dps = 40

# ------------------------------------------------------------------ analytic Gaussian (6.1)

# (sigma, delta, epsilon): notes table 6.1 (Delta = 1), 8 decimals.
GAUSSIAN_EPS = [(1.0, 1e-5, 4.37717810), (2.0, 1e-5, 1.99309140), (5.0, 1e-6, 0.83411755),
                (0.5, 1e-3, 7.58127992)]
# (mu, epsilon, delta): notes table 6.1, 11 significant digits.
GAUSSIAN_DELTA = [(1, 0, 0.38292492255), (1, 0.5, 0.23842170813), (1, 1, 0.12693673751),
                  (1, 2, 0.020923635821), (0.5, 0, 0.19741265137), (0.5, 0.5, 0.052440323288),
                  (0.5, 1, 6.8295949831e-3), (0.5, 2, 9.4391686349e-6), (2, 1, 0.50986166005),
                  (2, 2, 0.33189799878)]
# (epsilon, delta, sigma): the inverse, notes 6.1 (three libraries agree), 6 decimals.
GAUSSIAN_SIGMA = [(1.0, 1e-5, 3.730632), (0.5, 1e-6, 8.057618), (2.0, 1e-5, 1.993812),
                  (4.0, 1e-5, 1.081162)]


@pytest.mark.parametrize("sigma, delta, expected", GAUSSIAN_EPS)
def test_analytic_gaussian_epsilon_table(sigma, delta, expected):
    eps = gaussian_epsilon(1.0 / sigma, delta)
    assert eps == pytest.approx(expected, abs=1e-6)
    # conservative: the returned epsilon meets delta, and it is the smallest that does (1e-9)
    assert gaussian_delta(1.0 / sigma, eps) <= delta
    assert gaussian_delta(1.0 / sigma, eps - 1e-9) > delta


@pytest.mark.parametrize("sigma, delta, expected", GAUSSIAN_EPS)
def test_optimal_accountant_single_gaussian_is_the_analytic_value(sigma, delta, expected):
    # the sensitivity enters only through mu = sensitivity / sigma
    opt = get_accountant("optimal")
    assert opt.epsilon(Gaussian(sigma), delta) == pytest.approx(expected, abs=1e-6)
    assert opt.epsilon(Gaussian(3 * sigma, sensitivity=3.0), delta) == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("mu, eps, expected", GAUSSIAN_DELTA)
def test_analytic_gaussian_delta_table(mu, eps, expected):
    assert gaussian_delta(mu, eps) == pytest.approx(expected, rel=1e-9)


def _mp_gaussian_delta(mu, eps):
    mu, eps = mpmath.mpf(mu), mpmath.mpf(eps)
    return mpmath.ncdf(mu / 2 - eps / mu) - mpmath.exp(eps) * mpmath.ncdf(-mu / 2 - eps / mu)


@pytest.mark.parametrize("mu", [0.05, 0.3, 1.0, 3.0, 10.0])
@pytest.mark.parametrize("eps", [0.0, 0.1, 1.0, 5.0, 20.0])
def test_gaussian_delta_matches_mpmath(mu, eps):
    # Balle & Wang 2018 Thm 8 evaluated at 40 digits; our float version works in log space,
    # so it keeps its relative accuracy deep in the tail (e.g. mu = 0.3, eps = 5: ~1e-33).
    ref = float(_mp_gaussian_delta(mu, eps))
    assert gaussian_delta(mu, eps) == pytest.approx(ref, rel=1e-8, abs=1e-300)


def test_gaussian_delta_at_zero_is_2phi_minus_1():
    for mu in (0.1, 0.5, 1.0, 2.0, 7.0):
        assert gaussian_delta(mu, 0.0) == pytest.approx(float(2 * mpmath.ncdf(mu / 2) - 1), rel=1e-12)


@pytest.mark.parametrize("eps, delta, expected", GAUSSIAN_SIGMA)
def test_analytic_gaussian_sigma_calibration(eps, delta, expected):
    sigma = gaussian_sigma(eps, delta)
    assert sigma == pytest.approx(expected, abs=1e-6)
    assert gaussian_delta(1.0 / sigma, eps) <= delta          # conservative
    assert gaussian_delta(1.0 / (sigma * (1 - 1e-9)), eps) > delta  # and tight
    assert gaussian_sigma(eps, delta, sensitivity=2.5) == pytest.approx(2.5 * sigma, rel=1e-12)


def test_gaussian_closed_form_rejects_bad_input():
    with pytest.raises(ValueError, match="mu"):
        gaussian_delta(0.0, 1.0)
    with pytest.raises(ValueError, match="epsilon"):
        gaussian_delta(1.0, -0.1)
    with pytest.raises(ValueError, match="delta"):
        gaussian_epsilon(1.0, 0.0)
    with pytest.raises(ValueError, match="epsilon"):
        gaussian_sigma(0.0, 1e-5)


# ------------------------------------------------------- Kairouz-Oh-Viswanath optimal (6.3)

# (k, eps, delta0, delta, epsilon_opt): notes 6.3 (8 decimals; the delta0 > 0 rows 6 decimals)
KOV = [(10, 0.1, 0.0, 1e-5, 0.99369118), (100, 0.1, 0.0, 1e-5, 4.30679137),
       (1000, 0.01, 0.0, 1e-6, 1.36544671), (10, 0.5, 1e-6, 1e-4, 4.989639),
       (100, 0.1, 1e-7, 1e-5, 6.378069)]
# DRV advanced composition sqrt(2k ln 1/delta) eps + k eps (e^eps - 1) and basic k eps (notes 6.3)
DRV = {(10, 0.1): 1.6226, (100, 0.1): 5.8502, (1000, 0.01): 1.7628}


def _kov_event(k, eps, d0):
    return SelfComposed(ApproxDP(eps, d0) if d0 > 0 else PureDP(eps), k)


@pytest.mark.parametrize("k, eps, d0, delta, expected", KOV)
def test_kov_optimal_composition_table(k, eps, d0, delta, expected):
    value = get_accountant("optimal").epsilon(_kov_event(k, eps, d0), delta)
    assert value == pytest.approx(expected, abs=1e-6)
    # conservative and tight on the exact curve
    assert kov_delta(k, eps, d0, value) <= delta
    assert kov_delta(k, eps, d0, value - 1e-8) > delta


def _mp_kov_delta(k, eps, d0, eps_g):
    """The notes' formula, term by term, at 40 digits (no log-space tricks)."""
    e, eg = mpmath.mpf(eps), mpmath.mpf(eps_g)
    s = sum(mpmath.binomial(k, j) * max(mpmath.mpf(0), mpmath.exp((k - j) * e) - mpmath.exp(eg + j * e))
            for j in range(k + 1))
    return 1 - (1 - mpmath.mpf(d0)) ** k * (1 - s / (1 + mpmath.exp(e)) ** k)


@pytest.mark.parametrize("k, eps, d0", [(1, 0.5, 0.0), (2, 1.0, 0.0), (3, 0.3, 1e-6), (10, 0.1, 0.0),
                                        (10, 0.5, 1e-6), (57, 0.2, 0.0), (200, 0.05, 1e-8)])
def test_kov_delta_matches_mpmath(k, eps, d0):
    for frac in (0.0, 0.05, 0.2, 0.5, 0.8, 0.99):
        eps_g = frac * k * eps
        with mpmath.workdps(400):       # no absolute tolerance: tiny deltas must be right too
            ref = float(_mp_kov_delta(k, eps, d0, eps_g))
        assert kov_delta(k, eps, d0, eps_g) == pytest.approx(ref, rel=1e-9, abs=0)


@pytest.mark.parametrize("k, eps", [(5, 0.3), (12, 0.1), (40, 0.7)])
def test_kov_theorem_3_3_grid_points(k, eps):
    """KOV 2015 Thm 3.3: at eps_g = (k - 2i) eps the optimal delta is
    delta_i = sum_{l < i} C(k, l) (e^{(k-l) eps} - e^{(k-2i+l) eps}) / (1 + e^eps)^k."""
    for i in range(0, k // 2 + 1):
        ref = sum(math.comb(k, l) * (math.exp((k - l) * eps) - math.exp((k - 2 * i + l) * eps))
                  for l in range(i)) / (1 + math.exp(eps)) ** k
        assert kov_delta(k, eps, 0.0, (k - 2 * i) * eps) == pytest.approx(ref, rel=1e-9, abs=1e-16)


@pytest.mark.parametrize("eps", [0.01, 0.1, 0.5, 1.0, 2.0, 5.0])
def test_one_pure_release_delta_at_zero_is_tanh(eps):
    # k = 1: randomized response, delta(0) = TV distance = (e^eps - 1)/(e^eps + 1) = tanh(eps/2)
    assert get_accountant("optimal").delta(PureDP(eps), 0.0) == pytest.approx(math.tanh(eps / 2), rel=1e-12)
    assert get_accountant("optimal").delta(PureDP(eps), eps) == 0.0
    # k = 1 inverse: delta(e) = (e^eps - e^e) / (1 + e^eps) for e < eps
    d = 1e-4
    exact = math.log(math.exp(eps) - d * (1 + math.exp(eps)))
    assert get_accountant("optimal").epsilon(PureDP(eps), d) == pytest.approx(exact, abs=1e-9)


def test_kov_returns_inf_when_the_deltas_alone_exceed_the_target():
    # (1 - (1 - 1e-4)^20) ~ 2e-3 > 1e-3: no epsilon achieves delta = 1e-3
    assert kov_epsilon(20, 0.5, 1e-4, 1e-3) == math.inf
    assert get_accountant("optimal").epsilon(SelfComposed(ApproxDP(0.5, 1e-4), 20), 1e-3) == math.inf


@pytest.mark.parametrize("k, eps, d0, delta, _", KOV)
def test_drv_advanced_and_basic_composition(k, eps, d0, delta, _):
    event = _kov_event(k, eps, d0)
    slack = delta - k * d0       # DRV: the total delta is delta' + sum delta_i
    drv = math.sqrt(2 * k * math.log(1 / slack)) * eps + k * eps * math.expm1(eps)
    # advanced reports the smaller of DRV and basic composition (both valid)
    assert get_accountant("advanced").epsilon(event, delta) == pytest.approx(min(drv, k * eps),
                                                                             rel=1e-12)
    assert get_accountant("basic").epsilon(event, delta) == pytest.approx(k * eps, rel=1e-12)
    if (k, eps) in DRV and d0 == 0:
        assert drv == pytest.approx(DRV[(k, eps)], abs=1e-4)
    # and both are looser than the optimal composition
    assert get_accountant("optimal").epsilon(event, delta) <= min(drv, k * eps)


def test_basic_and_advanced_delta():
    ev = SelfComposed(ApproxDP(0.2, 1e-7), 50)
    basic, adv = get_accountant("basic"), get_accountant("advanced")
    assert basic.delta(ev, 10.0) == pytest.approx(5e-6, rel=1e-12)
    assert basic.delta(ev, 9.999) == 1.0
    assert basic.epsilon(ev, 4e-6) == math.inf     # the per-release deltas alone exceed it
    # advanced: delta(eps) = sum delta_i + exp(-(eps - drift)^2 / (2 sum eps_i^2)), the inverse
    # of the epsilon formula
    e = adv.epsilon(ev, 1e-5)
    assert adv.delta(ev, e) == pytest.approx(1e-5, rel=1e-9)
    assert adv.epsilon(ev, 4e-6) == math.inf


# ------------------------------------------------------------------------- RDP closed forms

def test_randomized_response_rdp_at_eps1_alpha2():
    """The RDP of eps-randomized response (the worst eps-DP mechanism), derived here from the
    Renyi divergence of P = (p, 1-p) from Q = (1-p, p), p = e^eps / (1 + e^eps):

        D_2(P||Q) = log( p^2 / (1-p) + (1-p)^2 / p ) = log( (e^2 + e^-1) / (1 + e) ) = 0.7353...
    """
    p = math.e / (1 + math.e)
    closed = math.log(p * p / (1 - p) + (1 - p) ** 2 / p)
    assert closed == pytest.approx(math.log((math.e ** 2 + math.exp(-1)) / (1 + math.e)), rel=1e-14)
    assert closed == pytest.approx(0.7353, abs=5e-5)              # the notes' value
    assert rdp_pure(1.0, np.array([2.0]))[0] == pytest.approx(closed, rel=1e-13)
    assert RDPAccountant(orders=[2.0]).rdp([(PureDP(1.0), 1)])[0] == pytest.approx(closed, rel=1e-13)


@pytest.mark.parametrize("eps", [0.01, 0.1, 1.0, 3.0, 10.0])
def test_pure_dp_rdp_curve_properties(eps):
    a = np.array([1.01, 1.5, 2.0, 3.7, 10.0, 64.0, 1024.0])
    p = 1 / (1 + mpmath.exp(-eps))   # Renyi divergence of RR, term by term at 40 digits
    direct = np.array([float(mpmath.log(p ** x * (1 - p) ** (1 - x) + (1 - p) ** x * p ** (1 - x))
                             / (x - 1)) for x in map(mpmath.mpf, a)])
    curve = rdp_pure(eps, a)
    assert np.allclose(curve, direct, rtol=1e-10, atol=1e-300)
    # eps-DP implies D_alpha <= eps and eps^2/2-zCDP (Bun & Steinke 2016, Prop 3.3)
    assert np.all(curve <= eps * (1 + 1e-12))
    assert np.all(curve <= a * eps * eps / 2 * (1 + 1e-12))
    # the Laplace mechanism is eps-DP, so RR (the worst case) dominates its curve
    assert np.all(rdp_laplace(eps, a) <= curve * (1 + 1e-12))
    # bounded range: the exact worst case over the two-point pairs M_t (brute force over t at
    # 40 digits), never above the pure-DP curve nor alpha eps^2 / 8 (Cesar & Rogers 2021)
    br = rdp_bounded_range(eps, a)
    assert np.all(br <= np.minimum(curve, a * eps * eps / 8) * (1 + 1e-12))
    e = mpmath.mpf(eps)
    for x, value in zip(map(mpmath.mpf, a), br):
        def m(t):
            return ((mpmath.exp(e) - mpmath.exp(t)) * mpmath.exp((x - 1) * t)
                    + (mpmath.exp(t) - 1) * mpmath.exp((x - 1) * (t - e))) / mpmath.expm1(e)
        # a coarse grid over t, then a fine one around its best point
        t0 = max((e * i / 200 for i in range(1, 200)), key=m)
        mgf = max(m(t0 + e * i / 200 / 400) for i in range(-400, 401))
        brute = float(mpmath.log(mpmath.mpf(mgf)) / (x - 1))
        assert brute <= value * (1 + 1e-9) + 1e-300      # an upper bound of the grid maximum
        assert value == pytest.approx(brute, rel=1e-6)    # and the grid's maximum is close


def _renyi_quad(logp, logq, alpha, points, span):
    # span: the integrand is below e^-50 of its peak beyond it
    f = lambda x: math.exp(alpha * logp(x) + (1 - alpha) * logq(x))
    lo, hi = min(points) - span, max(points) + span
    val = integrate.quad(f, lo, hi, points=points, limit=400, epsabs=0, epsrel=1e-12)[0]
    return math.log(val) / (alpha - 1)


@pytest.mark.parametrize("b", [0.5, 1.0, 3.0])
@pytest.mark.parametrize("alpha", [1.5, 2.0, 5.0, 12.0])
def test_laplace_rdp_against_numerical_integration(b, alpha):
    # D_alpha(Lap(0, b) || Lap(1, b)) by quadrature vs Mironov 2017 Prop 6
    logp = lambda x: -abs(x) / b - math.log(2 * b)
    logq = lambda x: -abs(x - 1) / b - math.log(2 * b)
    ref = _renyi_quad(logp, logq, alpha, [0.0, 1.0], span=60 * b)
    assert rdp_laplace(1.0 / b, np.array([alpha]))[0] == pytest.approx(ref, rel=1e-8)


@pytest.mark.parametrize("sigma", [0.7, 2.0])
@pytest.mark.parametrize("alpha", [1.5, 8.0])
def test_gaussian_rdp_against_numerical_integration(sigma, alpha):
    norm = math.log(sigma * math.sqrt(2 * math.pi))
    logp = lambda x: -x * x / (2 * sigma ** 2) - norm
    logq = lambda x: -(x - 1) ** 2 / (2 * sigma ** 2) - norm
    ref = _renyi_quad(logp, logq, alpha, [0.0, 1.0], span=20 * sigma * alpha)
    assert rdp_gaussian(1.0 / sigma, np.array([alpha]))[0] == pytest.approx(ref, rel=1e-8)


def test_rdp_conversion_is_balle_et_al_2020():
    """eps = min_a rdp(a) + log((a-1)/a) - (log delta + log a)/(a - 1) (Balle et al. 2020 Thm 21),
    checked by hand on a curve whose optimum we know: rho-zCDP at a fine order grid."""
    rho, delta = 0.05, 1e-6
    orders = np.linspace(1.01, 200, 20000)
    acc = RDPAccountant(orders=orders)
    from accounting import ZCDP

    expected = min(rho * a + math.log((a - 1) / a) - (math.log(delta) + math.log(a)) / (a - 1)
                   for a in orders)
    assert acc.epsilon(ZCDP(rho), delta) == pytest.approx(expected, rel=1e-12)
    # and it is tighter than the classic Mironov conversion rho + 2 sqrt(rho log 1/delta)
    assert expected < rho + 2 * math.sqrt(rho * math.log(1 / delta))


# ------------------------------------------------------------------ small deltas (issue #11)

@pytest.mark.parametrize("k, eps, delta, exact", [(100, 0.1, 1e-20, 8.6650), (1000, 0.01, 1e-50, 4.5996),
                                                  (100, 0.1, 1e-12, None), (100, 0.1, 1e-300, None)])
def test_kov_is_right_at_tiny_deltas(k, eps, delta, exact):
    """Regression: delta was computed as 1 - keep (1 - pure), which rounds every pure term below
    ~5e-17 to 0, so epsilon at delta = 1e-20 came out as 7.9469 (exact 8.6650) for every delta
    down to 1e-300.  Checked against the formula at 400 digits: the returned epsilon meets delta
    and 1e-7 less does not."""
    value = get_accountant("optimal").epsilon(SelfComposed(PureDP(eps), k), delta)
    with mpmath.workdps(400):
        assert _mp_kov_delta(k, eps, 0, value) <= delta * (1 + 1e-9)
        if value < k * eps - 1e-6:
            assert _mp_kov_delta(k, eps, 0, value - 1e-7) > delta
    if exact is not None:
        assert value == pytest.approx(exact, abs=1e-4)


def test_kov_delta_at_epsilon_8_is_not_zero():
    d = get_accountant("optimal").delta(SelfComposed(PureDP(0.1), 100), 8.0)
    with mpmath.workdps(400):
        ref = float(_mp_kov_delta(100, 0.1, 0, 8.0))
    assert ref > 1e-18 and d == pytest.approx(ref, rel=1e-9) and d >= ref
