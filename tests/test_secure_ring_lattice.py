"""The secure paths charge their ring noise with its lattice stated (docs/sensitivity.md 4.9.1):
the event a run charges carries the resolution and the coordinates of the discrete Gaussian the
ring actually draws (read off the sampler's calls, the fraction bits recomputed here from the
public bounds), the parties' events equal the server's, and under ``best`` the spend is at most
the Renyi spend of the same sigma and never below an exact computation (at small scale, where
the discrete profile can be enumerated)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from accounting import get_accountant, read_ledger
from accounting.gaussian import gaussian_epsilon
from vflpriv.data import VerticalData
from vflpriv.vertical import solve
from vflpriv.vertical.secure.ssp import release as S

from test_ring_noise_tv import exact_delta, sum_pmf

BLOCKS = [[0, 1, 2], [3, 4], [5, 6, 7, 8]]
DELTA = 1e-6


def _classification(n=300, seed=0):
    rng = np.random.default_rng(seed)
    A = rng.uniform(-1, 1, size=(n, 9))
    w = np.array([2.0, 0, -1.5, 0, 1.0, 0, 0, -1.0, 0])
    p = 1 / (1 + np.exp(-(A @ w - 0.5)))
    return A, np.where(rng.uniform(size=n) < p, 1.0, -1.0)


def _ring_spy(monkeypatch, module):
    """Every call of the ring's discrete Gaussian sampler in ``module``: (sigma, scale bits,
    coordinates, part)."""
    calls = []
    orig = module.ring_noise

    def spy(rng, sigma, scale_bits, size, part=1):
        calls.append((float(sigma), int(scale_bits), int(size), part))
        return orig(rng, sigma, scale_bits, size, part)

    monkeypatch.setattr(module, "ring_noise", spy)
    return calls


def _frac_bits(magnitude):
    """The ring's rule, written out: the largest f <= 24 with magnitude 2^{2f} < 2^62."""
    f = 24
    while magnitude * 2.0 ** (2 * f) >= 2.0 ** 62:
        f -= 1
    return f


def _events(led):
    return [r.event for r in (read_ledger(led) if isinstance(led, str) else led).records]


def _check_spend(sol, event):
    """best at most the Renyi bound of the same event (strictly below at the ring's scale), and
    not below the continuous Gaussian's exact epsilon (the TV term only adds)."""
    spent = sol.privacy["epsilon_spent"]
    rdp = get_accountant("rdp").epsilon(event, DELTA)
    assert spent["best"] <= spent["rdp"] == pytest.approx(rdp, rel=1e-12)
    assert spent["best"] < 0.97 * rdp
    assert spent["best"] >= gaussian_epsilon(event.gaussian_mu, DELTA)
    assert spent["best"] <= 1.0


# -- ssp ------------------------------------------------------------------------------------

def _ssp_kw(**extra):
    kw = dict(algorithm="dp-bcfw-secure", loss="logistic", logistic_path="ssp", label_party=0,
              epsilon=1.0, delta=DELTA, feature_bound=1.0, label_bound=1.0, seed=0,
              accountant="best")
    kw.update(extra)
    return kw


def test_ssp_charges_the_ring_lattice_it_draws(monkeypatch, tmp_path):
    from vflpriv.vertical.secure.ssp import party as SP

    calls = _ring_spy(monkeypatch, SP)          # the parts of the cross-blocks (ssp/gram.py)
    A, y = _classification()
    led = str(tmp_path / "run.jsonl")
    sol = solve(VerticalData(A, y, BLOCKS), ledger=led, **_ssp_kw())
    (event,) = _events(led)
    sigma = sol.noise_plan.feature_sigma
    assert event.sigma == sigma
    # the fraction bits from the public bounds: n rows, entries within B_a s, labels within 1,
    # plus 40 sigma of noise and 1 of rounding
    s = sol.extra["scale"]
    f = _frac_bits(A.shape[0] * s * max(s, 1.0) + 40 * sigma + 1)
    assert {c[1] for c in calls} == {2 * f} and sol.extra["frac_bits"] == f
    # svec holds sqrt(2) M_ij: the step sqrt(2) 2^-2f, at or above the true one
    assert event.resolution == pytest.approx(math.sqrt(2) * 2.0 ** (-2 * f), rel=1e-15)
    assert event.resolution >= math.sqrt(2) * 2.0 ** (-2 * f)
    # every drawn ring coordinate is stated, and nothing else: the cross-blocks (3*2 + 3*4 +
    # 2*4) and A_k^T y for the two parties without the label (2 + 4)
    assert event.coordinates == sum(c[2] for c in calls) == 26 + 6
    # the noise the ring draws in lattice units is the event's sigma / resolution
    for c in calls:
        assert c[0] * 2.0 ** c[1] == pytest.approx(event.sigma / event.resolution, rel=1e-12)
    for party_ledger in sol.extra["party_ledgers"]:
        assert _events(party_ledger) == [event]
    _check_spend(sol, event)


def test_ssp_calibrates_below_the_renyi_sigma():
    """The same target under best gives a smaller sigma than under rdp (the Renyi bound costs
    about 6 to 7 percent of sigma at these epsilons), and rdp's own run is unchanged."""
    A, y = _classification(n=150)
    data = VerticalData(A, y, BLOCKS)
    ref = solve(data, **_ssp_kw(accountant="rdp"))
    sol = solve(data, **_ssp_kw())
    ratio = sol.noise_plan.feature_sigma / ref.noise_plan.feature_sigma
    assert 0.9 < ratio < 0.96
    assert ref.noise_plan.feature_sigma == S.calibrate_sigma(1.0, DELTA, 1.0, "rdp")


def test_ssp_roles_charge_the_servers_event(tmp_path):
    """Over a runtime link each party role builds its event from the public setup: equal to
    the server's, on every ledger."""
    A, y = _classification(n=120)
    data = VerticalData(A, y, BLOCKS)
    kw = _ssp_kw(label_party=1)
    ref = solve(data, ledger=str(tmp_path / "a.ledger"), **kw)
    sol = solve(data, ledger=str(tmp_path / "b.ledger"), backend="local", **kw)
    (event,) = _events(str(tmp_path / "b.ledger"))
    assert event.resolution is not None and event.coordinates == 26 + 3 + 4
    assert _events(str(tmp_path / "a.ledger")) == [event]
    assert [_events(pl) for pl in sol.extra["party_ledgers"]] == [[event]] * 3
    assert ref.privacy["epsilon_spent"] == sol.privacy["epsilon_spent"]


@pytest.mark.parametrize("s,shift,eps", [(0.6, 1, 0.5), (1.0, 2, 1.0), (2.5, 1, 0.2)])
def test_ssp_event_is_above_the_exact_discrete_profile(s, shift, eps):
    """The path's event builder at a scale where the discrete profile is enumerable: one ring
    coordinate, the sensitivity sqrt(2) R^2 a ``shift`` of lattice steps, s lattice units of
    noise; every accountant's delta is above the exact one."""
    sens = S.sensitivity(1.0)
    g = sens / shift
    event = S.release_event(s * g, 1.0, (g, 1))
    exact = exact_delta(sum_pmf(s, 1), shift, eps)
    for name in ("optimal", "pld", "best"):
        assert get_accountant(name).delta(event, eps) >= exact, name


# -- least squares --------------------------------------------------------------------------

def _regression(n=200, seed=1):
    rng = np.random.default_rng(seed)
    A = rng.uniform(-1, 1, size=(n, 9))
    y = np.clip(A @ np.array([0.8, 0, -0.5, 0, 0.3, 0, 0, -0.4, 0]) + 0.1 * rng.normal(size=n),
                -1, 1)
    return A, y


def _ls_kw(**extra):
    kw = dict(algorithm="dp-bcfw-secure", iterations=4, label_party=0, epsilon=4.0,
              delta=DELTA, feature_bound=1.0, label_bound=1.0, eta=1.0, seed=0,
              accountant="best")
    kw.update(extra)
    return kw


def _ring_events(events):
    return [e for e in events if getattr(e, "kind", None) == "discrete_gaussian"]


def test_least_squares_charges_the_ring_lattice_it_draws(monkeypatch, tmp_path):
    from vflpriv.vertical.secure.base import party as BP

    calls = _ring_spy(monkeypatch, BP)
    A, y = _regression()
    led = str(tmp_path / "run.jsonl")
    sol = solve(VerticalData(A, y, BLOCKS), ledger=led, **_ls_kw())
    events = _events(led)
    ring = _ring_events(events)
    sigma = sol.noise_plan.feature_sigma
    f = _frac_bits(A.shape[0] * 1.0 * 1.0 + 40 * sigma + 1)
    assert {c[1] for c in calls} == {2 * f} and sol.extra["frac_bits"] == f
    assert ring and all(e.resolution == 2.0 ** (-2 * f) and e.sigma == sigma for e in ring)
    # every drawn ring coordinate is stated once: the label's A_k^T y and each new feature's
    # products with the other blocks
    assert sum(e.coordinates for e in ring) == sum(c[2] for c in calls)
    for c in calls:
        assert c[0] * 2.0 ** c[1] == pytest.approx(sigma / 2.0 ** (-2 * f), rel=1e-12)
    # each party charged the same releases as the server, lattice included
    for party_ledger in sol.extra["party_ledgers"]:
        assert _ring_events(_events(party_ledger)) == ring
    # the whole run under best: at most the Renyi spend of the same events
    from accounting import Composed

    run = Composed(tuple(events))
    spent = sol.privacy["epsilon_spent"]
    assert spent["best"] <= get_accountant("rdp").epsilon(run, DELTA) + 1e-12
    assert spent["best"] <= 4.0


def test_least_squares_plan_states_the_lattice_and_calibrates_lower():
    """The plan's feature unit states the step of the ring the run uses and K max_l sum_{k != l}
    p_k coordinates; under best the same target gives a smaller sigma than under rdp."""
    from accounting import flatten

    A, y = _regression(n=150)
    data = VerticalData(A, y, BLOCKS)
    ref = solve(data, **_ls_kw(accountant="rdp"))
    sol = solve(data, **_ls_kw())
    assert sol.noise_plan.feature_sigma < ref.noise_plan.feature_sigma
    leaves = [e for e, _ in flatten(sol.noise_plan.event) if e.kind == "discrete_gaussian"]
    f = sol.extra["frac_bits"]
    assert leaves and all(e.resolution == 2.0 ** (-2 * f) for e in leaves)
    assert {e.coordinates for e in leaves} == {3 * max(9 - 3, 9 - 2, 9 - 4)}


def test_least_squares_roles_charge_the_servers_events(tmp_path):
    A, y = _regression(n=120)
    data = VerticalData(A, y, BLOCKS)
    sol = solve(data, ledger=str(tmp_path / "b.ledger"), backend="local", **_ls_kw())
    ring = _ring_events(_events(str(tmp_path / "b.ledger")))
    assert ring and all(e.resolution is not None for e in ring)
    for party_ledger in sol.extra["party_ledgers"]:
        assert _ring_events(_events(party_ledger)) == ring


# -- glm ------------------------------------------------------------------------------------

def _glm_kw(**extra):
    kw = dict(algorithm="dp-bcfw-secure", loss="logistic", logistic_path="glm", iterations=3,
              label_party=0, epsilon=2.0, delta=DELTA, feature_bound=1.0, label_bound=1.0,
              eta=1.0, seed=0, accountant="best")
    kw.update(extra)
    return kw


@pytest.mark.parametrize("intercept", [False, True])
def test_glm_charges_the_ring_lattice_it_draws(monkeypatch, tmp_path, intercept):
    from vflpriv.vertical.secure.glm import party as GP

    calls = _ring_spy(monkeypatch, GP)
    A, y = _classification(n=150)
    led = str(tmp_path / "run.jsonl")
    sol = solve(VerticalData(A, y, BLOCKS), ledger=led, **_glm_kw(fit_intercept=intercept))
    events = _events(led)
    assert len(events) == 3 and len(set(events)) == 1
    event = events[0]
    # the scales the ring drew at: the scores' and (with the intercept) the word's, coarser
    bits = {c[1] for c in calls}
    assert len(bits) == (2 if intercept else 1)
    assert event.resolution == 2.0 ** -min(bits)
    # every score of every party each round, and the intercept's word
    assert event.coordinates == 9 + (1 if intercept else 0)
    for c in calls:               # sigma in the event's units is the sampler's at its scale
        assert c[0] == event.sigma
    for party_ledger in sol.extra["party_ledgers"]:
        assert _events(party_ledger) == events
    spent = sol.privacy["epsilon_spent"]
    from accounting import SelfComposed

    assert spent["best"] <= get_accountant("rdp").epsilon(SelfComposed(event, 3), DELTA)
    assert spent["best"] <= 2.0


def test_glm_roles_charge_the_servers_event(tmp_path):
    A, y = _classification(n=100)
    data = VerticalData(A, y, BLOCKS)
    kw = _glm_kw(fit_intercept=True, iterations=2)
    ref = solve(data, ledger=str(tmp_path / "a.ledger"), **kw)
    sol = solve(data, ledger=str(tmp_path / "b.ledger"), backend="local", **kw)
    events = _events(str(tmp_path / "b.ledger"))
    assert len(events) == 2 and events[0].resolution is not None
    assert _events(str(tmp_path / "a.ledger")) == events
    assert [_events(pl) for pl in sol.extra["party_ledgers"]] == [events] * 3
    assert ref.privacy["epsilon_spent"] == sol.privacy["epsilon_spent"]


def test_pld_guards_every_path_and_optimal_is_refused():
    """pld accounts for the ring noise now that every ring release states its lattice; the
    spend it reports for a run calibrated by it is within its target, as its own ledger says."""
    from vflpriv.errors import InputError

    A, y = _classification(n=100)
    data = VerticalData(A, y, BLOCKS)
    sol = solve(data, **_ssp_kw(accountant="pld"))
    assert sol.privacy["epsilon_spent"]["pld"] <= 1.0 < sol.privacy["epsilon_spent"]["rdp"]
    with pytest.raises(InputError, match="--accountant optimal cannot guard"):
        solve(data, **_ssp_kw(accountant="optimal"))


@pytest.mark.parametrize("s,eps", [(0.6, 0.5), (1.5, 1.0)])
def test_least_squares_event_is_above_the_exact_discrete_profile(s, eps):
    """``round_feature_event`` on a ring of 8 fraction bits (step 2^-16), two parties of one
    column, the peer's row clip 2^-17: one feature's product moves by one lattice step, the
    noise is s steps; every accountant's delta is above the exact one of that pair."""
    from vflpriv.vertical.secure import privacy as SP

    g = 2.0 ** -16
    clips = [1.0, 2.0 ** -17]
    event = SP.round_feature_event(s * g, 1.0, clips, [0], ring=(8, [1, 1]))
    assert (event.resolution, event.coordinates) == (g, 1)
    assert event.sensitivity == pytest.approx(g, rel=1e-15)
    exact = exact_delta(sum_pmf(s, 1), 1, eps)
    for name in ("optimal", "pld", "best"):
        assert get_accountant(name).delta(event, eps) >= exact, name


@pytest.mark.parametrize("s,eps", [(0.8, 0.5), (2.0, 1.0)])
def test_glm_event_is_above_the_exact_sum_profile(s, eps):
    """``round_event`` with its lattice, three parties of one column, one summed score (the
    party outside {L, H}): a neighbour pair that moves only the summed score by one lattice
    step has the exact profile of the sum of two N_Z(0, s^2 / 2); the charge is above it."""
    from vflpriv.vertical.secure.glm.party import glm_sensitivity, round_event

    g = 2.0 ** -20
    clips = [g / 2, g / 2, g / 2]
    D = 1.0 / math.sqrt(3.0)                   # sensitivity 2 D sqrt(3 (g/2)^2) = g
    assert glm_sensitivity(D, clips) == pytest.approx(g, rel=1e-12)
    event = round_event(s * g, D, clips, summed=1, lattice=(g, 3))
    exact = exact_delta(sum_pmf(s, 2), 1, eps)
    for name in ("optimal", "pld", "best"):
        assert get_accountant(name).delta(event, eps) >= exact, name
