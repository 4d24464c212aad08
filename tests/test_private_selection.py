"""Private selection with random stopping (accounting.PrivateSelection; Papernot & Steinke 2022,
"Hyperparameter Tuning with Renyi Differential Privacy", ICLR, arXiv:2110.03620v2, "PS22").

(a) brute force: for small discrete base mechanisms (a noisy score over a few candidates, on two
    neighbouring inputs) the EXACT output law of the selection (through the stopping law's
    probability generating function, checked against the series of PS22 Definition 1) and its
    exact Renyi divergences, in both directions, stay below the event's Renyi curve;
(b) the closed forms PS22 states (Corollary 3 for a pure-DP base, Corollary 4 for a Gaussian
    base, Theorem 6 at the order where a pure base's delta_hat is 0, E[K]), the limit gamma -> 1,
    and dp-accounting's own implementation of the same theorems;
(c) the accountants, the ledger and `vflpriv certify` with a selection in the plan.
"""
import json
import math

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from accounting import (ApproxDP, BudgetExceeded, BudgetFilter, Composed, Gaussian, Laplace,
                        Ledger, PoissonSubsampledGaussian, PrivateSelection, PureDP,
                        SelfComposed, UnsupportedEventError, ZCDP, event_from_dict,
                        flatten, get_accountant, read_ledger)
from accounting.accountants.rdp import DEFAULT_ORDERS, RDPAccountant, rdp_pure

TNB = "truncated_negative_binomial"
#: orders at which the exact divergences are compared with the curve (the curve's lambda_hat
#: ranges over the same grid)
ORDERS = [1.25, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0, 64.0]
DPS = 60


def _curve(event, orders=ORDERS):
    return RDPAccountant(orders=orders).rdp([(event, 1)])


# ------------------------------------------------------------------ (a) exact laws, brute force

def _pgf(event, t):
    """E[t^K] of the event's stopping law, in closed form (checked against the pmf series in
    test_pgf_is_the_series_of_definition_1)."""
    if event.stopping == "poisson":
        return mpmath.exp(mpmath.mpf(event.mu) * (t - 1))
    eta, gamma = mpmath.mpf(event.eta), mpmath.mpf(event.gamma)
    if eta == 0:
        return mpmath.log(1 - (1 - gamma) * t) / mpmath.log(gamma)
    return ((1 - (1 - gamma) * t) ** (-eta) - 1) / (gamma ** (-eta) - 1)


def _pmf_k(event, k):
    """P[K = k]: PS22 Definition 1 (truncated negative binomial, logarithmic at eta = 0) or
    Poisson."""
    if event.stopping == "poisson":
        mu = mpmath.mpf(event.mu)
        return mpmath.exp(-mu) * mu ** k / mpmath.factorial(k)
    eta, gamma = mpmath.mpf(event.eta), mpmath.mpf(event.gamma)
    if k < 1:
        return mpmath.mpf(0)
    if eta == 0:
        return (1 - gamma) ** k / (k * mpmath.log(1 / gamma))
    prod = mpmath.mpf(1)
    for ell in range(k):
        prod *= (ell + eta) / (ell + 1)
    return (1 - gamma) ** k / (gamma ** (-eta) - 1) * prod


def _selection_law(event, base_pmf):
    """Exact output law of A: the best of K independent draws of the base (outcomes listed from
    worst to best), plus the fixed output for K = 0 (Poisson) last.  P[A = o_i] = G(F_i) -
    G(F_{i-1}) with F the base's cdf and G the pgf (the K = 0 terms cancel), written through the
    survival S_i = P[Q > o_i] (sums of positive terms) so that no outcome's probability is a
    difference of two numbers near 1: for TNB, 1 - (1 - gamma) F = gamma + (1 - gamma) S."""
    surv = [mpmath.mpf(0)]
    for p in reversed(base_pmf[1:]):
        surv.append(surv[-1] + p)
    surv.reverse()                                   # surv[i] = P[Q > o_i]
    out = []
    for p, s_i in zip(base_pmf, surv):
        if event.stopping == "poisson":
            mu = mpmath.mpf(event.mu)
            out.append(mpmath.exp(-mu * s_i) * -mpmath.expm1(-mu * p))
            continue
        eta, gamma = mpmath.mpf(event.eta), mpmath.mpf(event.gamma)
        a = gamma + (1 - gamma) * s_i                # 1 - (1 - gamma) F_i
        step = mpmath.log1p((1 - gamma) * p / a)     # log(a_{i-1} / a_i)
        if eta == 0:
            out.append(step / -mpmath.log(gamma))
        else:
            out.append(a ** (-eta) * -mpmath.expm1(-eta * step) / (gamma ** (-eta) - 1))
    out.append(_pgf(event, mpmath.mpf(0)))          # P[K = 0]: 0 for the truncated laws
    return out


def _renyi(p, q, lam):
    lam = mpmath.mpf(lam)
    s = mpmath.fsum(pi ** lam * qi ** (1 - lam) for pi, qi in zip(p, q) if pi > 0)
    return float(mpmath.log(s) / (lam - 1))


def _discrete_laplace_scores(eps0, scores0, shifts, lo, hi):
    """Base Q: a candidate c uniformly (data-independent), then (c, clamp(s_c + Z, lo, hi)) with Z
    discrete Laplace, P[Z = z] proportional to e^(-eps0 |z|); neighbouring inputs move each
    integer score by shifts[c] in {-1, 0, 1}, so Q is eps0-DP (its privacy loss is +-eps0 per
    candidate) and PureDP(eps0) describes it.  Outcomes ordered by (score, candidate)."""
    p = mpmath.exp(-mpmath.mpf(eps0))
    norm = (1 - p) / (1 + p)

    def tail_le(k):          # P[Z <= k], its small side computed directly
        return norm * p ** (-k) / (1 - p) if k <= 0 else 1 - norm * p ** (k + 1) / (1 - p)

    def law(s):
        out = {y: norm * p ** abs(y - s) for y in range(lo + 1, hi)}
        out[lo] = tail_le(lo - s)
        out[hi] = tail_le(s - hi)            # P[Z >= hi - s] = P[Z <= s - hi] (symmetry)
        return out

    m = len(scores0)
    keys = [(y, c) for y in range(lo, hi + 1) for c in range(m)]
    l0 = [law(s) for s in scores0]
    l1 = [law(s + d) for s, d in zip(scores0, shifts)]
    return ([l0[c][y] / m for y, c in keys], [l1[c][y] / m for y, c in keys])


def _gaussian_scores(sigma, scores0, shifts, width, levels):
    """Base Q: a candidate c uniformly, then (c, the bin of s_c + N(0, sigma^2) on a grid of
    ``levels`` bins of ``width``, the end bins open); post-processing of a Gaussian release with
    L2 sensitivity |shift| <= 1, so Gaussian(sigma, 1) describes it."""
    sigma = mpmath.mpf(sigma)
    edges = [mpmath.mpf(width) * (j - levels / 2) for j in range(1, levels)]

    def mass(za, zb):        # P[za < Z <= zb], from the nearer tail (no cancellation)
        if zb <= 0:
            return mpmath.ncdf(zb) - (mpmath.ncdf(za) if za != -mpmath.inf else 0)
        if za >= 0:
            return mpmath.ncdf(-za) - (mpmath.ncdf(-zb) if zb != mpmath.inf else 0)
        return 1 - mpmath.ncdf(za) - mpmath.ncdf(-zb)

    def law(s):
        z = [-mpmath.inf] + [(e - s) / sigma for e in edges] + [mpmath.inf]
        return [mass(z[j], z[j + 1]) for j in range(levels)]

    m = len(scores0)
    keys = [(j, c) for j in range(levels) for c in range(m)]
    l0 = [law(mpmath.mpf(s)) for s in scores0]
    l1 = [law(mpmath.mpf(s + d)) for s, d in zip(scores0, shifts)]
    return ([l0[c][j] / m for j, c in keys], [l1[c][j] / m for j, c in keys])


def _check_below_curve(event, p0, p1, slack=1e-9):
    a0, a1 = _selection_law(event, p0), _selection_law(event, p1)
    assert float(abs(mpmath.fsum(a0) - 1)) < 1e-30 and float(abs(mpmath.fsum(a1) - 1)) < 1e-30
    bound = _curve(event)
    worst = -math.inf
    for lam, b in zip(ORDERS, bound):
        exact = max(_renyi(a0, a1, lam), _renyi(a1, a0, lam))
        assert exact <= b + slack, (event, lam, exact, b)
        worst = max(worst, exact - b)
    return worst


stoppings = st.one_of(
    st.builds(lambda eta, g: dict(stopping=TNB, eta=eta, gamma=g),
              st.sampled_from([-0.9, -0.5, 0.0, 0.5, 1.0, 2.0, 4.0]),
              st.floats(0.02, 0.95)),
    st.builds(lambda mu: dict(stopping="poisson", mu=mu), st.floats(1.0, 40.0)))
candidates = st.lists(st.tuples(st.integers(-2, 2), st.sampled_from([-1, 0, 1])),
                      min_size=1, max_size=3)


@settings(derandomize=True, max_examples=40, deadline=None)
@given(eps0=st.floats(0.05, 3.0), stop=stoppings, cands=candidates)
def test_exact_divergence_below_the_bound_pure_base(eps0, stop, cands):
    mpmath.mp.dps = DPS
    scores0, shifts = zip(*cands)
    p0, p1 = _discrete_laplace_scores(eps0, scores0, shifts, -3, 3)
    _check_below_curve(PrivateSelection(PureDP(eps0), **stop), p0, p1)


@settings(derandomize=True, max_examples=30, deadline=None)
@given(sigma=st.floats(0.3, 5.0), stop=stoppings, cands=candidates)
def test_exact_divergence_below_the_bound_gaussian_base(sigma, stop, cands):
    mpmath.mp.dps = DPS
    scores0, shifts = zip(*cands)
    p0, p1 = _gaussian_scores(sigma, scores0, shifts, width=0.75, levels=8)
    _check_below_curve(PrivateSelection(Gaussian(sigma, 1.0), **stop), p0, p1)


def test_the_brute_force_has_power():
    """The exact divergence of the selection exceeds the base's own curve (selection is not free:
    a check that skipped the stopping terms would fail here), and its gap to the PS22 bound is
    modest (within a factor 3 at the order that matters)."""
    mpmath.mp.dps = DPS
    eps0 = 1.0
    p0, p1 = _discrete_laplace_scores(eps0, (0,), (1,), -3, 3)
    event = PrivateSelection(PureDP(eps0), TNB, eta=1.0, gamma=0.1)
    a0, a1 = _selection_law(event, p0), _selection_law(event, p1)
    base = rdp_pure(eps0, np.array(ORDERS))
    exact = [max(_renyi(a0, a1, lam), _renyi(a1, a0, lam)) for lam in ORDERS]
    assert any(e > b * 1.2 for e, b in zip(exact, base))
    bound = _curve(event)
    assert all(e <= b for e, b in zip(exact, bound))
    assert exact[-1] > bound[-1] / 3


@pytest.mark.parametrize("stop", [dict(stopping=TNB, eta=1.0, gamma=0.3),
                                  dict(stopping=TNB, eta=0.0, gamma=0.2),
                                  dict(stopping=TNB, eta=-0.6, gamma=0.1),
                                  dict(stopping=TNB, eta=2.5, gamma=0.4),
                                  dict(stopping="poisson", mu=3.5)])
def test_pgf_is_the_series_of_definition_1(stop):
    """The closed-form pgf used above equals sum_k P[K = k] t^k with P[K = k] from PS22
    Definition 1 (Poisson: the textbook pmf), and E[K] (``expected_count``) equals sum_k k P[K=k]."""
    mpmath.mp.dps = 40
    ev = PrivateSelection(PureDP(1.0), **stop)
    for t in (mpmath.mpf("0.3"), mpmath.mpf("0.9"), mpmath.mpf(1)):
        series = mpmath.nsum(lambda k: _pmf_k(ev, int(k)) * t ** int(k), [0, mpmath.inf])
        assert float(abs(series - _pgf(ev, t))) < 1e-25
    mean = mpmath.nsum(lambda k: k * _pmf_k(ev, int(k)), [1, mpmath.inf])
    assert ev.expected_count == pytest.approx(float(mean), rel=1e-13)


# ------------------------------------------------------------------ (b) closed forms

@pytest.mark.parametrize("eta,gamma", [(0.0, 0.001), (1.0, 0.001), (0.5, 0.001), (2.0, 0.02),
                                       (5.0, 0.005)])
def test_pure_base_tends_to_2_plus_eta_eps(eta, gamma):
    """PS22 Corollary 3: an eps-DP base gives a (2 + eta) eps-DP selection (Theorem 2 as lambda,
    lambda_hat -> inf; the geometric case eta = 1 is Liu-Talwar's 3 eps).  A single large order
    (as in dp-accounting's test) reaches it."""
    eps = 1.0
    ev = PrivateSelection(Laplace(1.0 / eps), TNB, eta=eta, gamma=gamma)
    (value,) = _curve(ev, [1e10])
    assert value == pytest.approx((2 + eta) * eps, rel=1e-8)


@pytest.mark.parametrize("rho,gamma,eta", [(0.01, 0.01, 0.0), (1.0, 0.1, 0.0), (0.5, 0.1, 0.5),
                                           (0.01, 0.01, 1.0), (1.0, 0.1, 1.0), (0.3, 0.2, 5.0)])
def test_gaussian_base_is_corollary_4(rho, gamma, eta):
    """PS22 Corollary 4 (rho-zCDP base, rho <= log(1/gamma)): with lambda_hat =
    sqrt(log(1/gamma) / rho) among the orders, eps'(lambda) = rho (lambda - 1) + log E[K] /
    (lambda - 1) + 2 (1 + eta) sqrt(rho log(1/gamma)) - eta rho above lambda* = 1 + sqrt(log E[K]
    / rho), its value at lambda* below (monotonicity)."""
    ev = PrivateSelection(ZCDP(rho), TNB, eta=eta, gamma=gamma)
    L, logm = -math.log(gamma), math.log(ev.expected_count)
    star = 1 + math.sqrt(logm / rho)
    orders = sorted({1.1, 2.0, math.sqrt(L / rho), star, 3.0, 5.0, 10.0, 100.0, 1000.0} - {1.0})
    orders = [o for o in orders if o > 1]
    const = 2 * (1 + eta) * math.sqrt(rho * L) - eta * rho
    for lam, value in zip(orders, _curve(ev, orders)):
        lam_eff = max(lam, star)
        want = rho * (lam_eff - 1) + logm / (lam_eff - 1) + const
        assert value == pytest.approx(want, rel=1e-9, abs=1e-12), lam


@pytest.mark.parametrize("eps,mu", [(1.0, 1.0), (0.1, 2.0), (1.0, 10.0), (0.01, 100.0),
                                    (2.0, 1000.0), (0.5, 1.5)])
def test_poisson_pure_base_at_the_order_where_delta_hat_vanishes(eps, mu):
    """PS22 Theorem 6 with an eps-DP base at lambda = 1 + 1 / (e^eps - 1): e^eps_hat = 1 + 1 /
    (lambda - 1) = e^eps, so delta_hat = 0 and eps' = eps(lambda) + log(mu) (e^eps - 1), the
    value dp-accounting's test expects (there with its own base curve)."""
    lam = 1 + 1 / math.expm1(eps)
    ev = PrivateSelection(PureDP(eps), "poisson", mu=mu)
    value = _curve(ev, [lam, 1e10])[0]
    want = float(rdp_pure(eps, np.array([lam]))[0]) + math.log(mu) * math.expm1(eps)
    # eps_hat is rounded down two ulps (so the theorem's condition holds in floating point):
    # delta_hat is then a few ulps of e^eps above 0
    assert value == pytest.approx(want, rel=1e-9, abs=1e-12)


def test_expected_counts():
    """E[K]: 1 / gamma for the geometric law (eta = 1); (1/gamma - 1) / log(1/gamma) for the
    logarithmic one (eta = 0), its eta -> 0 limit continuous; mu for Poisson."""
    g = 0.05
    assert PrivateSelection(PureDP(1), TNB, eta=1, gamma=g).expected_count == \
        pytest.approx(1 / g, rel=1e-14)
    log_law = PrivateSelection(PureDP(1), TNB, eta=0, gamma=g).expected_count
    assert log_law == pytest.approx((1 / g - 1) / math.log(1 / g), rel=1e-14)
    assert PrivateSelection(PureDP(1), TNB, eta=1e-13, gamma=g).expected_count == \
        pytest.approx(log_law, rel=1e-11)
    assert PrivateSelection(PureDP(1), "poisson", mu=7.5).expected_count == \
        pytest.approx(7.5, rel=1e-15)
    # E[K] grows with eta and falls with gamma (the ledger's dominance relies on it)
    for eta in (-0.9, -0.3, 0.0, 0.7, 3.0):
        ks = [PrivateSelection(PureDP(1), TNB, eta=eta, gamma=g).expected_count
              for g in (0.001, 0.01, 0.1, 0.5, 0.99)]
        assert ks == sorted(ks, reverse=True) and ks[-1] > 1
    for g in (0.001, 0.1, 0.9):
        ks = [PrivateSelection(PureDP(1), TNB, eta=eta, gamma=g).expected_count
              for eta in (-0.9, -0.3, 0.0, 0.7, 3.0)]
        assert ks == sorted(ks)


@pytest.mark.parametrize("eta", [-0.5, 0.0, 1.0, 3.0])
def test_gamma_to_one_is_the_base(eta):
    """gamma -> 1: K = 1 almost surely, E[K] -> 1 and log(1/gamma) -> 0; the curve tends to the
    base's (the lambda_hat -> 1 limit is what makes this exact in the limit)."""
    base = SelfComposed(PoissonSubsampledGaussian(1.1, 0.01), 100)
    ev = PrivateSelection(base, TNB, eta=eta, gamma=1 - 1e-9)
    acc = RDPAccountant()
    diff = acc.rdp([(ev, 1)]) - acc.rdp(flatten(base))
    # (1 + eta) log(1/gamma) + log(E[K]) / (lambda - 1), both of order 1e-9
    assert np.all(diff >= 0) and np.max(diff) < 1e-7


@pytest.mark.parametrize("shape,mean", [(0.0, 5.0), (0.5, 100.0), (1.0, 10.0), (2.0, 50.0),
                                        (5.0, 1000.0)])
def test_tnb_agrees_with_dp_accounting(shape, mean):
    """dp-accounting's ``_compute_rdp_repeat_and_select`` (the same Theorem 2, lambda_hat over the
    orders, gamma found from the mean by bisection, rounded down) gives the same curve, to its
    bisection's tolerance."""
    ra = pytest.importorskip("dp_accounting.rdp.rdp_privacy_accountant")
    from dp_accounting import dp_event

    sigma = 3.0
    theirs = ra.RdpAccountant(orders=list(DEFAULT_ORDERS))
    theirs.compose(dp_event.RepeatAndSelectDpEvent(dp_event.GaussianDpEvent(sigma), mean, shape))
    gamma = ra._gamma_truncated_negative_binomial(shape, mean)
    ours = _curve(PrivateSelection(Gaussian(sigma), TNB, eta=shape, gamma=gamma), DEFAULT_ORDERS)
    assert np.allclose(ours, theirs._rdp, rtol=1e-8, atol=0)


@pytest.mark.parametrize("sigma,mean", [(1.0, 10.0), (3.0, 100.0), (10.0, 1e4)])
def test_poisson_is_below_dp_accounting(sigma, mean):
    """Poisson (Theorem 6): ours takes delta_hat from the exact Gaussian profile where the base is
    Gaussian (dp-accounting converts its Renyi curve), so it is at most dp-accounting's."""
    ra = pytest.importorskip("dp_accounting.rdp.rdp_privacy_accountant")
    from dp_accounting import dp_event

    theirs = ra.RdpAccountant(orders=list(DEFAULT_ORDERS))
    theirs.compose(dp_event.RepeatAndSelectDpEvent(dp_event.GaussianDpEvent(sigma), mean,
                                                   math.inf))
    ours = _curve(PrivateSelection(Gaussian(sigma), "poisson", mu=mean), DEFAULT_ORDERS)
    assert np.all(ours <= theirs._rdp * (1 + 1e-12))


# ------------------------------------------------------------------ (c) accountants, ledger, plan

SEL = PrivateSelection(Composed((SelfComposed(PoissonSubsampledGaussian(1.1, 0.01), 200),
                                 Gaussian(10.0))), TNB, eta=1.0, gamma=0.1)


def test_only_rdp_and_best_support_it():
    for name in ("basic", "advanced", "optimal", "pld"):
        acc = get_accountant(name)
        assert not acc.supports(SEL)
        with pytest.raises(UnsupportedEventError, match="private_selection"):
            acc.epsilon(SEL, 1e-5)
    eps = get_accountant("rdp").epsilon(SEL, 1e-5)
    assert get_accountant("best").epsilon_and_source(SEL, 1e-5) == (eps, "rdp")
    # a base the Renyi accountant cannot analyse makes the selection unsupported everywhere
    bad = PrivateSelection(ApproxDP(1.0, 1e-6), "poisson", mu=3.0)
    assert not get_accountant("rdp").supports(bad)
    with pytest.raises(UnsupportedEventError):
        get_accountant("best").epsilon(bad, 1e-5)


def test_it_composes_like_any_leaf():
    acc = RDPAccountant()
    one = acc.rdp([(SEL, 1)])
    g = Gaussian(5.0)
    both = Composed((SEL, g, SelfComposed(SEL, 2)))
    assert np.allclose(acc.rdp([(SEL, 3), (g, 1)]), 3 * one + acc.rdp([(g, 1)]), rtol=1e-14)
    assert acc.epsilon(both, 1e-6) == pytest.approx(acc.epsilon(Composed((SelfComposed(SEL, 3),
                                                                          g)), 1e-6), rel=1e-14)
    # the selection costs more than one run of its base, less than E[K] runs composed
    e_sel = acc.epsilon(SEL, 1e-6)
    assert acc.epsilon(SEL.base, 1e-6) < e_sel < acc.epsilon(SelfComposed(SEL.base, 10), 1e-6)


def test_round_trip_and_validation():
    assert event_from_dict(json.loads(json.dumps(SEL.to_dict()))) == SEL
    pois = PrivateSelection(Gaussian(2.0, neighboring="replace_one"), "poisson", mu=4)
    assert pois.neighboring == "replace_one" and event_from_dict(pois.to_dict()) == pois
    with pytest.raises(ValueError, match=r"unknown field\(s\) \['shape'\]"):
        event_from_dict(dict(SEL.to_dict(), shape=1.0))


@pytest.mark.parametrize("kwargs,needle", [
    (dict(stopping="uniform"), "stopping must be one of"),
    (dict(stopping=TNB, eta=-1.0, gamma=0.1), "eta must be a finite number > -1, got -1.0"),
    (dict(stopping=TNB, eta=math.inf, gamma=0.1), "eta must be a finite number, got inf"),
    (dict(stopping=TNB, eta=1.0, gamma=1.0), "gamma must be in (0, 1)"),
    (dict(stopping=TNB, eta=1.0, gamma=0.0), "gamma must be in (0, 1)"),
    (dict(stopping=TNB, eta=1.0, gamma=math.nan), "gamma must be a finite number, got nan"),
    (dict(stopping=TNB, gamma=0.1), "truncated_negative_binomial stopping needs eta"),
    (dict(stopping=TNB, eta=1.0, gamma=0.1, mu=3.0), "got mu=3.0"),
    (dict(stopping="poisson"), "poisson stopping needs mu"),
    (dict(stopping="poisson", mu=0.0), "mu must be a positive finite number, got 0.0"),
    (dict(stopping="poisson", mu=0.5), "mu must be >= 1 (a mean of at least one run"),
    (dict(stopping="poisson", mu=2.0, gamma=0.5), "got gamma=0.5"),
    (dict(stopping="poisson", mu=True), "mu must be a number, got True"),
])
def test_bad_parameters_are_named(kwargs, needle):
    with pytest.raises(ValueError) as exc:
        PrivateSelection(Gaussian(1.0), **kwargs)
    assert needle in str(exc.value)


def test_a_base_that_mixes_relations_is_refused():
    with pytest.raises(ValueError, match="base: the events mix neighbouring relations"):
        PrivateSelection(Composed((Gaussian(1.0), Gaussian(1.0, neighboring="replace_one"))),
                         "poisson", mu=2.0)
    with pytest.raises(ValueError, match="base must be a DpEvent"):
        PrivateSelection("gaussian", "poisson", mu=2.0)


def test_ledger_charges_and_refuses(tmp_path):
    path = str(tmp_path / "l")
    eps1 = get_accountant("best").epsilon(SEL, 1e-6)
    eps2 = get_accountant("best").epsilon(SelfComposed(SEL, 2), 1e-6)
    f = BudgetFilter(Ledger(path), epsilon=(eps1 + eps2) / 2, delta=1e-6)
    f.charge(SEL, note="tuning")
    with pytest.raises(BudgetExceeded):
        f.charge(SEL, note="a second tuning")
    led = read_ledger(path)
    assert [r.event for r in led.records] == [SEL]
    assert led.spend(1e-6) == pytest.approx(eps1, rel=1e-14)


def test_ledger_show_names_the_selection(tmp_path, capsys):
    from vflpriv.cli.main import main

    path = str(tmp_path / "l")
    Ledger(path).append(SEL, note="tuning")
    assert main(["ledger", "show", path, "--delta", "1e-6"]) == 0
    assert ("private_selection(truncated_negative_binomial, eta=1, gamma=0.1; best of K runs of "
            "[200 x poisson_subsampled_gaussian(noise_multiplier=1.1, sample_rate=0.01) + "
            "gaussian(sigma=10, sensitivity=1)])") in capsys.readouterr().out


def test_ledger_reserves_and_covers(tmp_path):
    led = Ledger(str(tmp_path / "l"))
    cheaper = PrivateSelection(SEL.base, TNB, eta=0.5, gamma=0.2)
    dearer = PrivateSelection(SEL.base, TNB, eta=1.0, gamma=0.05)
    rec = led.reserve(SelfComposed(SEL, 2), party="server")
    assert led.covers(SEL) and led.covers(cheaper) and not led.covers(dearer)
    assert not led.covers(PrivateSelection(SEL.base, "poisson", mu=2.0))
    led.append(cheaper, party="server")            # uses one reserved unit of SEL
    assert led.remaining(rec.run_id) == {SEL: 1}
    led.append(SEL, party="server")
    assert led.remaining(rec.run_id) == {} and not led.covers(SEL)
    led.end_reservation()
    assert read_ledger(led.path).event() == Composed((cheaper, SEL))


PLAN = """
name = "dpsgd-with-tuning"
delta = 1e-5
target_epsilon = {target}
[[release]]
mechanism = "private_selection"
stopping = "truncated_negative_binomial"
eta = 1.0
gamma = 0.1
[[release.base]]
mechanism = "poisson_subsampled_gaussian"
noise_multiplier = 1.1
sample_rate = 0.004266666666666667
count = 1000
[[release.base]]
mechanism = "gaussian"
sigma = 20.0
{extra}
"""


def _plan_event():
    base = Composed((SelfComposed(PoissonSubsampledGaussian(1.1, 0.004266666666666667), 1000),
                     Gaussian(20.0)))
    return PrivateSelection(base, TNB, eta=1.0, gamma=0.1)


def _certify(tmp_path, capsys, text):
    from vflpriv.cli.main import main

    p = tmp_path / "plan.toml"
    p.write_text(text)
    code = main(["certify", str(p), "--json"])
    out = capsys.readouterr()
    return code, (json.loads(out.out) if code in (0, 1) else out.err)


def test_certify_certifies_and_refuses_a_plan_with_tuning(tmp_path, capsys):
    want = get_accountant("rdp").epsilon(_plan_event(), 1e-5)
    # one run alone, for scale: tuning costs something
    assert want > get_accountant("best").epsilon(_plan_event().base, 1e-5)
    code, cert = _certify(tmp_path, capsys, PLAN.format(target=want * 1.01, extra=""))
    assert code == 0 and cert["certified"] is True
    assert cert["best"] == {"accountant": "rdp", "epsilon": want}
    assert cert["epsilon"]["pld"] is None and "private_selection" in cert["unsupported"]["pld"]
    code, cert = _certify(tmp_path, capsys, PLAN.format(target=want * 0.99, extra=""))
    assert code == 1 and cert["certified"] is False
    # composed with a release outside the tuning (the final model's extra release)
    extra = '[[release]]\nmechanism = "gaussian"\nsigma = 8.0\n'
    code, cert = _certify(tmp_path, capsys, PLAN.format(target=100.0, extra=extra))
    both = get_accountant("rdp").epsilon(Composed((_plan_event(), Gaussian(8.0))), 1e-5)
    assert code == 0 and cert["best"]["epsilon"] == pytest.approx(both, rel=1e-14)


@pytest.mark.parametrize("old,new,needle", [
    ("gamma = 0.1", "gamma = 1.5", "release[0] (private_selection): gamma must be in (0, 1) "
                                   "(the stopping probability), got 1.5"),
    ("eta = 1.0", "eta = -2.0", "eta must be a finite number > -1, got -2.0"),
    ("eta = 1.0", 'eta = "one"', "release[0].eta must be a number, got 'one'"),
    ('stopping = "truncated_negative_binomial"', 'stopping = "uniform"',
     "stopping must be one of ('truncated_negative_binomial', 'poisson'), got 'uniform'"),
    ('stopping = "truncated_negative_binomial"', 'stopping = "poisson"\nmu = 3.0',
     "release[0] (private_selection): eta is a truncated_negative_binomial parameter; poisson "
     "stopping takes mu only, got eta=1.0"),
    ('stopping = "truncated_negative_binomial"\neta = 1.0\ngamma = 0.1',
     'stopping = "poisson"\nmu = 0.5', "mu must be >= 1 (a mean of at least one run"),
    ("gamma = 0.1", "gamma = 0.1\nshape = 2", "release[0]: unknown parameter(s) 'shape'"),
    ("sigma = 20.0", "sigma = -2.0",
     "release[0].base[1] (gaussian): sigma must be a positive finite number, got -2.0"),
    ("count = 1000", "count = 0", "release[0].base[0].count must be an integer >= 1, got 0"),
    ('mechanism = "gaussian"', 'mechanism = "private_selection"',
     "release[0].base[1].mechanism: a private selection's base cannot itself be"),
])
def test_certify_bad_values_exit_2_naming_them(tmp_path, capsys, old, new, needle):
    text = PLAN.format(target=5.0, extra="")
    assert old in text
    code, err = _certify(tmp_path, capsys, text.replace(old, new, 1))
    assert code == 2 and needle in err and "Traceback" not in err


def test_certify_needs_a_base(tmp_path, capsys):
    text = ('delta = 1e-5\n[[release]]\nmechanism = "private_selection"\n'
            'stopping = "poisson"\nmu = 5.0\n')
    code, err = _certify(tmp_path, capsys, text)
    assert code == 2 and "release[0].base is missing" in err


# ------------------------------------------------------------------ the audit entry

def test_audit_sampler_draws_the_best_of_k_scores():
    """The audit's inversion sampler has the law of the best of K ~ Geometric(gamma) scores:
    P[best <= t] = G(Phi((t - s) / sigma)) with G(x) = gamma x / (1 - (1 - gamma) x).  DKW:
    sup |F_n - F| <= sqrt(log(2 / 1e-6) / (2 n)) except with probability 1e-6."""
    from scipy.stats import norm

    from vflpriv.audit import registered
    from vflpriv.audit.mechanisms import SELECTION_GAMMA

    mech = registered()["private_selection"]()
    sigma = mech.event.base.sigma
    n = 20000
    out0, out1 = mech.sample(n, np.random.default_rng(5))
    g = SELECTION_GAMMA
    for out, s in ((out0, 0.0), (out1, 1.0)):
        x = np.sort(mech.score(out))
        phi = norm.cdf((x - s) / sigma)
        exact = g * phi / (1 - (1 - g) * phi)
        emp_hi, emp_lo = np.arange(1, n + 1) / n, np.arange(n) / n
        gap = max(np.max(np.abs(emp_hi - exact)), np.max(np.abs(emp_lo - exact)))
        assert gap < math.sqrt(math.log(2 / 1e-6) / (2 * n))
        assert set(np.unique(out[:, 1])) == {0.0, 1.0, 2.0}


def test_audit_entry_holds_its_claim_and_the_json_is_committed():
    """`vflpriv audit --mechanism private_selection`: the claim is the accountant's (1 at 1e-5),
    the lower bound below it (confidence 0.99: false-failure rate 1e-2); docs/audit.md quotes
    docs/audit/private_selection.json."""
    import pathlib

    from vflpriv.audit import audit_mechanism, registered

    row = audit_mechanism(registered()["private_selection"](), samples=20000, seed=0,
                          confidence=0.99)
    assert row["claimed_epsilon"] == pytest.approx(1.0, abs=1e-3)
    assert row["ok"] and 0.05 < row["lower_bound"] <= row["claimed_epsilon"]
    root = pathlib.Path(__file__).resolve().parents[1]
    d = json.loads((root / "docs/audit/private_selection.json").read_text())
    m = d["mechanisms"][0]
    assert (m["name"], m["samples"], d["seed"], d["ok"]) == ("private_selection", 100000, 0, True)
    assert event_from_dict(m["event"]) == registered()["private_selection"]().event
    page = " ".join((root / "docs/audit.md").read_text().split())
    assert (f"docs/audit/private_selection.json`: lower bound {m['lower_bound']:.4f} against "
            f"the claim {m['claimed_epsilon']:.1f}") in page


def test_certify_md_section_7_is_recomputed(tmp_path, capsys):
    """docs/certify.md section 7: the plan's table is what `vflpriv certify` prints for it, and
    the costs quoted below it are the accountant's."""
    import pathlib
    import re

    from dp_accounting.rdp import rdp_privacy_accountant as ra

    from vflpriv.cli.main import main

    page = (pathlib.Path(__file__).resolve().parents[1] / "docs/certify.md").read_text()
    plan = re.search(r"```toml\n# plans/tuning.toml\n(.*?)```", page, re.S).group(1)
    (tmp_path / "tuning.toml").write_text(plan)
    assert main(["certify", str(tmp_path / "tuning.toml")]) == 0
    out = capsys.readouterr().out
    shown = re.search(r"\$ vflpriv certify plans/tuning.toml\n(.*?)```", page, re.S).group(1)
    assert out == shown
    flat = " ".join(page.split())
    best = get_accountant("best")
    base = _plan_event().base
    geo = lambda m: PrivateSelection(base, TNB, eta=1.0, gamma=1 / m)          # noqa: E731
    tnb = lambda eta: PrivateSelection(                                          # noqa: E731
        base, TNB, eta=eta, gamma=ra._gamma_truncated_negative_binomial(eta, 10.0))
    pois = lambda m: PrivateSelection(base, "poisson", mu=float(m))            # noqa: E731
    e = lambda ev: f"{best.epsilon(ev, 1e-5):.4f}"                              # noqa: E731
    assert (f"one run alone {e(base)} (pld); ten runs composed {e(SelfComposed(base, 10))} (pld); "
            f"the selection {e(geo(10))} (geometric), {e(tnb(0.5))} (eta = 0.5), {e(tnb(0.0))} "
            f"(logarithmic, eta = 0), {e(pois(10))} (Poisson). At E[K] = 50: fifty runs composed "
            f"{e(SelfComposed(base, 50))}, the geometric selection {e(geo(50))}, Poisson "
            f"{e(pois(50))}.") in flat
    code, cert = _certify(tmp_path, capsys, plan.replace("target_epsilon = 2.0",
                                                         "target_epsilon = 1.8"))
    assert code == 1 and cert["certified"] is False
