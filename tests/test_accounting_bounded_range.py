"""The bounded-range analyses of ``accounting.accountants.bounded_range`` against brute force.

* k = 1: the adaptive curve against the closed-form envelope (Dong-Durfee-Rogers' worst t).
* k = 2: against a brute-force search over adaptive strategies (t1, then t2 chosen after seeing
  the first outcome) on fine grids: a lower bound on the truth that the curve must not undercut,
  and should nearly reach.
* the dominating-pair PLD's single-step curve against the envelope.
"""
import math

import numpy as np
import pytest

from accounting import Exponential, ReportNoisyMax, SelfComposed, get_accountant
from accounting.accountants.bounded_range import (adaptive_curve, adaptive_delta, adaptive_epsilon,
                                                  bounded_range_pld, envelope_delta,
                                                  nonadaptive_delta)


def _one_step(eps, s, ts):
    """max over t in ts of p_t (1 - e^{s - t})_+ + (1 - p_t)(1 - e^{s - t + eps})_+ (vectorized in s)."""
    s = np.asarray(s, dtype=float)[..., None]
    p = (math.exp(eps) - np.exp(ts)) / math.expm1(eps)
    val = p * np.maximum(0, -np.expm1(s - ts)) + (1 - p) * np.maximum(0, -np.expm1(s - ts + eps))
    return val.max(axis=-1)


@pytest.mark.parametrize("eps", [0.05, 0.3, 1.0])
def test_one_selection_is_the_envelope(eps):
    for e in np.linspace(0, eps, 9)[:-1]:
        d = adaptive_delta(eps, 1, 32, e)
        exact = envelope_delta(eps, e)
        assert d >= exact * (1 - 1e-12)
        assert d <= exact + 2e-3 * eps          # chord between grid points of width eps/32
    assert envelope_delta(eps, 0.0) == pytest.approx(math.tanh(eps / 4), rel=1e-12)


@pytest.mark.parametrize("eps", [0.2, 1.0])
def test_two_adaptive_selections_against_brute_force(eps):
    ts = np.linspace(0, eps, 801)
    for e in (0.0, 0.3 * eps, 0.8 * eps, 1.5 * eps):
        # the second t is chosen after the first outcome: maximize each branch separately
        p1 = (math.exp(eps) - np.exp(ts)) / math.expm1(eps)
        brute = np.max(p1 * _one_step(eps, e - ts, ts) + (1 - p1) * _one_step(eps, e - ts + eps, ts))
        d = adaptive_delta(eps, 2, 32, e)
        assert d >= brute * (1 - 1e-9)
        assert d <= brute * 1.02 + 1e-4


@pytest.mark.parametrize("k, eps", [(5, 0.5), (30, 0.2), (100, 0.1)])
def test_adaptive_epsilon_between_nonadaptive_and_rdp(k, eps):
    ev = SelfComposed(Exponential(eps), k)
    opt = get_accountant("optimal").epsilon(ev, 1e-5)
    assert nonadaptive_delta(eps, k, opt, t_grid=32) <= 1e-5        # lower bound respected
    assert opt <= get_accountant("rdp").epsilon(ev, 1e-5)
    # Gumbel report-noisy-max with 2D/b = eps is the same selection
    gumbel = SelfComposed(ReportNoisyMax("gumbel", 2.0 / eps), k)
    assert get_accountant("optimal").epsilon(gumbel, 1e-5) == pytest.approx(opt, rel=1e-12)


def test_curve_is_monotone_and_inverse_is_consistent():
    s, w = adaptive_curve(0.1, 50, 16)
    assert np.all(np.diff(w) <= 1e-15) and w[0] <= 1 and w[-1] == 0
    for delta in (1e-3, 1e-6, 1e-9):
        e = adaptive_epsilon(0.1, 50, 16, delta)
        assert adaptive_delta(0.1, 50, 16, e) <= delta
        assert adaptive_delta(0.1, 50, 16, e - 1e-3) > delta


@pytest.mark.parametrize("eps", [0.1, 0.5, 2.0])
def test_pld_pair_dominates_the_envelope(eps):
    pld = bounded_range_pld(eps, 1e-4)
    for e in np.linspace(0, eps, 7)[:-1]:
        d = pld.get_delta_for_epsilon(float(e))
        assert d >= envelope_delta(eps, float(e)) * (1 - 1e-9)
        assert d <= envelope_delta(eps, float(e)) + 1e-3


@pytest.mark.parametrize("k, eps", [(20, 0.1), (50, 0.1), (10, 0.5)])
def test_large_deltas_do_not_read_the_placeholder_region(k, eps):
    """Regression: below the last window the curve held 1 - e^s (a lower bound, not W_k), and
    epsilon at a large delta could be read there as 0.  The non-adaptive optimum is a lower
    bound on the truth at every delta."""
    ev = SelfComposed(Exponential(eps), k)
    for delta in (0.45, 0.3, 0.2, 0.15, 0.1, 0.05):
        opt = get_accountant("optimal").epsilon(ev, delta)
        assert nonadaptive_delta(eps, k, opt, t_grid=32) <= delta * (1 + 1e-9)


@pytest.mark.parametrize("eps", [0.05, 0.5, 2.0])
def test_one_selection_uses_the_closed_form(eps):
    """k = 1: the exact envelope (no grid); its inverse meets delta and 1e-9 less does not."""
    for delta in (0.3, 1e-2, 1e-5, 1e-10):
        e = get_accountant("optimal").epsilon(Exponential(eps), delta)
        assert envelope_delta(eps, e) <= delta
        if e > 1e-9:
            assert envelope_delta(eps, e - 1e-9) > delta
    # the example scale: one 0.5-BR selection at 1e-5 is 0.49603, the grid gave 0.49899
    assert get_accountant("optimal").epsilon(Exponential(0.5), 1e-5) == pytest.approx(0.496030, abs=1e-5)


@pytest.mark.slow
def test_no_cliff_past_the_adaptive_cap():
    """Issue 35 item 3: at eps = 0.1 the adaptive optimum is computed up to 1369 selections; at
    1370 the optimal row used to fall back to KOV of pure DP (21.91).  Past the cap it composes
    blocks of the optimum through dominating pairs: it grows by about one selection's increment,
    stays below RDP, and is never below the non-adaptive optimum (a lower bound on the truth)."""
    from accounting.accountants.bounded_range import adaptive_cells, nonadaptive_delta

    assert adaptive_cells(1369) is not None and adaptive_cells(1370) is None
    opt = get_accountant("optimal")
    gumbel = ReportNoisyMax("gumbel", 20.0, 1.0)
    v = {k: opt.epsilon(SelfComposed(gumbel, k), 1e-5) for k in (1368, 1369, 1370, 1371)}
    step = v[1369] - v[1368]
    assert 0 < v[1370] - v[1369] <= 2 * step
    assert 0 < v[1371] - v[1370] <= 2 * step
    assert v[1370] < get_accountant("rdp").epsilon(SelfComposed(gumbel, 1370), 1e-5)
    assert nonadaptive_delta(0.1, 1370, v[1370], t_grid=16) <= 1e-5


@pytest.mark.parametrize("eps", [1e-320, 1e-300, 1e-17, 1e-12, 1e-9])
def test_tiny_bounded_range_epsilon_answers_and_stays_a_bound(eps):
    """Issue 32: a bounded-range selection whose eps leaves e^eps - 1 without digits (below
    1e-8; 0 below ~1e-16, where the adaptive analysis never returned) is analysed as the pure
    eps-DP release it also is: an answer, between 0 and basic composition's k eps, and the same
    as the optimal accountant's for PureDP(eps)."""
    from accounting import Exponential, PureDP, SelfComposed, get_accountant

    opt = get_accountant("optimal")
    got = opt.epsilon(SelfComposed(Exponential(eps), 1000), 1e-5)
    assert 0.0 <= got <= 1000 * eps + 1e-300
    assert got == opt.epsilon(SelfComposed(PureDP(eps), 1000), 1e-5)
