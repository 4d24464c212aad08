"""DP-BCFW-AS privacy: eps=inf equals BCFW-AS, ledger spend = calibration, refusal before noise,
noise levels, sensitivities against brute force, paper calibration, bad inputs."""
import math

import numpy as np
import pytest
from scipy import stats

from accounting import (BudgetExceeded, BudgetFilter, Composed, Gaussian, ReportNoisyMax,
                        SelfComposed, get_accountant, read_ledger)
from vflpriv.data import VerticalData, make_synthetic
from vflpriv.errors import InputError
from vflpriv.optim import SquaredLoss, LogisticLoss
from vflpriv.vertical import Sampling, run_vertical, solve
from vflpriv.vertical import messages as M
from vflpriv.vertical import privacy as P
from vflpriv.vertical.engine import Party
from vflpriv.vertical.sketch import Sketch

PRIV = dict(epsilon=1.0, delta=1e-5, feature_bound=3.0, label_bound=3.0)


@pytest.fixture(scope="module")
def data():
    A, y, _ = make_synthetic(n=200, d=400, density=0.05, sparsity=0.02, seed=5)
    return VerticalData.from_arrays(A, y, "balanced", parties=3)


@pytest.mark.parametrize("sketch, m, sampling", [("identity", None, "elementary"),
                                                  ("gaussian", 20, "nice:150"),
                                                  ("countsketch", 12, "distributed:30")])
def test_eps_inf_is_bcfw_bit_for_bit(data, sketch, m, sampling):
    a = solve(data, algorithm="dp-bcfw", epsilon=math.inf, eta=1.0, iterations=40, sketch=sketch,
              sketch_dim=m, sampling=sampling, seed=11, **{k: PRIV[k] for k in
                                                            ("feature_bound", "label_bound")})
    b = solve(data, algorithm="bcfw", eta=1.0, iterations=40, sketch=sketch, sketch_dim=m,
              sampling=sampling, seed=11)
    assert np.array_equal(a.x, b.x)
    assert a.objective == b.objective
    assert a.uplink == b.uplink and a.privacy is None and b.privacy is None


def _expected_event(sol, plan, K):
    """The composition the run should have charged, rebuilt from the selections alone."""
    sens = plan.details
    seen, events = set(), []
    for sel in sol.extra["selections"]:
        events.append(SelfComposed(ReportNoisyMax(plan.noise, plan.index_scale, sens["sens_index"],
                                                  neighboring="replace_one"), len(sel)))
        new = [(k, j) for k, j, _ in sel if (k, j) not in seen]
        seen.update(new)
        if new:
            events.append(Gaussian(plan.feature_sigma, math.sqrt(len(new)) * sens["sens_feature"],
                                   neighboring="replace_one"))
    return Composed(tuple(events))


@pytest.mark.parametrize("rnm", ["laplace", "gumbel", "exponential"])
def test_ledger_spend_equals_calibration(data, tmp_path, rnm):
    T = 25
    path = tmp_path / "ledger.jsonl"
    sol = solve(data, algorithm="dp-bcfw", eta=1.0, iterations=T, rnm=rnm, ledger=str(path),
                release_cache=False, report_accountants=("rdp",), **PRIV)
    plan = sol.noise_plan
    rdp = get_accountant("rdp")
    # the calibrated plan meets the target under the accountant, and not by a wide margin
    assert plan.epsilon <= 1.0 and plan.epsilon > 1.0 - 1e-6
    assert rdp.epsilon(plan.event, 1e-5) == pytest.approx(plan.epsilon, rel=1e-12)
    # without the cache every round releases K indices and K features: spend == calibration
    led = read_ledger(str(path))
    assert len(led.records) == 2 * T
    assert {r.event.to_dict()["kind"] for r in led.records} >= {"gaussian"}
    assert led.spend(1e-5, accountant="rdp") == pytest.approx(plan.epsilon, rel=1e-9)
    assert sol.privacy["epsilon_spent"]["rdp"] == pytest.approx(plan.epsilon, rel=1e-9)
    leaf = led.records[0].event.event
    assert leaf.noise == rnm and leaf.scale == plan.index_scale


def test_ledger_spend_with_cache_is_recomputed_from_selections(data):
    sol = solve(data, algorithm="dp-bcfw", eta=1.0, iterations=30, report_accountants=("rdp",),
                **PRIV)
    rdp = get_accountant("rdp")
    expected = rdp.epsilon(_expected_event(sol, sol.noise_plan, data.K), 1e-5)
    assert sol.privacy["spent_by_budget_accountant"] == pytest.approx(expected, rel=1e-9)
    assert expected <= sol.noise_plan.epsilon <= 1.0


def test_budget_filter_refuses_before_any_noise(data):
    sens = P.sensitivities(SquaredLoss(), 3.0, 3.0, 3.0, data.n, 1.0)
    plan = P.calibrate_accountant("laplace", sens, 1.0, 1e-5, rounds=10, parties=3)
    plan.details.update(sens_index=sens.index, sens_feature=sens.feature)
    ledger = P.MemoryLedger()
    filt = BudgetFilter(ledger, 1.0, 1e-5, accountant="rdp")
    box = {}

    def factory(parties):
        from vflpriv.vertical.transport import InProcessTransport
        box["t"] = InProcessTransport(parties)
        box["parties"] = parties
        return box["t"]

    with pytest.raises(BudgetExceeded):
        run_vertical(data, SquaredLoss(), 1.0, 20, noise_plan=plan, budget_filter=filt,
                     clip=(3.0, 3.0, sens.z_bound, sens.derivative_bound), release_cache=False,
                     transport_factory=factory)
    meter = box["t"].meter
    # rounds 0..9 ran; the index charge of round 10 was refused before any party was asked
    assert len(ledger.records) == 20
    for k in range(3):
        assert max(meter.per_round(k, "uplink")) == 9
        assert max(meter.per_round(k, "downlink")) == 9


def test_feature_noise_has_calibrated_variance():
    # a_hat - J a over 300 releases x m=40 coordinates ~ N(0, sigma^2): chi-square interval for
    # the variance, two-sided false-failure rate 1e-4 (seeded, so CI is deterministic).
    import scipy.sparse as sp
    A = sp.random(60, 4, density=0.5, random_state=0, format="csc")
    y = np.ones(60)
    sigma = 0.7
    p = Party(0, A, y, SquaredLoss(), 1.0, noise="gumbel", index_scale=0.1, feature_sigma=sigma,
              clip=(1.0, 1.0, 1.0, 2.0), noise_seed=np.random.SeedSequence(3))
    p.sampling = Sampling("elementary", [np.arange(4)])
    p.setup(M.Setup(7, 8, 60, 40, "gaussian", 1), None)
    p.handle(M.Round(np.zeros(40)), 0)
    i = p._pending[0]
    clean = Sketch("gaussian", 60, 40, 7).apply_column(p.A, i)
    res = np.concatenate([p.handle(M.FeatureRequest(1), 0).a_hat - clean for _ in range(300)])
    N = res.size
    lo, hi = stats.chi2.ppf([5e-5, 1 - 5e-5], N) / N * sigma ** 2
    assert lo < np.mean(res ** 2) < hi


@pytest.mark.parametrize("loss, By, c", [(SquaredLoss(), 2.0, None), (LogisticLoss(), 1.0, None),
                                         (SquaredLoss(), 2.0, 0.5)])
def test_index_sensitivity_brute_force(loss, By, c):
    # Replace one row by worst-case values within the declared bounds; every score must move by
    # at most Delta_idx = 2 B_a L / n, and adversarial rows reach at least half of it.
    rng = np.random.default_rng(0)
    n, p, Ba, eta, K = 40, 6, 1.5, 1.0, 2
    sens = P.sensitivities(loss, Ba, By, K * eta, n, 1.0, derivative_clip=c)
    if c is not None:
        assert sens.index == pytest.approx(2 * Ba * c / n)
    q = rng.uniform(-5, 5, n)            # public aggregate (clipped to +-R inside the party)
    A = rng.uniform(-Ba, Ba, (n, p))
    y = rng.choice([-By, By], n)
    clip = (Ba, By, sens.z_bound, sens.derivative_bound)
    s0 = Party(0, A, y, loss, eta, clip=clip, noise_seed=1)
    s0.sketch = Sketch("identity", n, None, 0)
    g0 = s0.scores(q)
    worst = 0.0
    for _ in range(300):
        j = rng.integers(n)
        A2, y2 = A.copy(), y.copy()
        A2[j] = rng.choice([-Ba, Ba], p) * rng.choice([1.0, 10.0])   # beyond the bound: clipped
        y2[j] = rng.choice([-By, By]) * rng.choice([1.0, 5.0])
        s1 = Party(0, A2, y2, loss, eta, clip=clip, noise_seed=1)
        s1.sketch = s0.sketch
        worst = max(worst, np.abs(s1.scores(q) - g0).max())
    assert worst <= sens.index * (1 + 1e-12)
    assert worst >= 0.5 * sens.index


def test_feature_sensitivity_is_attained():
    # ||J (a - a')|| for a one-row change of size 2 B_a is at most 2 B_a max_j ||J e_j||, with
    # equality at the row of the largest column norm.
    S = Sketch("gaussian", 80, 10, seed=4)
    norms = np.array([np.linalg.norm([S.transpose_apply(e)[j] for e in np.eye(10)])
                      for j in range(80)])
    sens = P.sensitivities(SquaredLoss(), 2.0, 1.0, 1.0, 80, S.max_column_norm())
    j = int(np.argmax(norms))
    assert sens.feature == pytest.approx(2 * 2.0 * norms[j], rel=1e-12)


def test_paper_calibration_closed_forms_and_refusal(data):
    sk = Sketch("identity", data.n, None, 0)
    sens = P.sensitivities(SquaredLoss(), 3.0, 3.0, 3.0, data.n, 1.0)
    plan = P.calibrate_paper("laplace", sens, 1.0, 1e-5, 50, 3, 1.0, data.n, 3.0,
                             sk.spectral_norm())
    G = 3.0 * (9.0 + 3.0)
    assert plan.index_scale == pytest.approx(8 * G * 1.0 * math.sqrt(2 * 50 * math.log(2e5))
                                             / (data.n * 1.0))
    assert plan.feature_sigma == pytest.approx(
        3.0 * math.sqrt(150) * math.sqrt(2 * (math.log(1e5) + 0.5)) / 0.5)
    assert plan.epsilon == pytest.approx(get_accountant("rdp").epsilon(plan.event, 1e-5))
    # Here the closed forms overspend under exact accounting (their index noise divides the
    # sensitivity by K): the run is refused before any release.
    assert plan.epsilon > 1.0
    with pytest.raises(InputError, match="nothing was released"):
        solve(data, iterations=50, calibration="paper", eta=1.0, **PRIV)


@pytest.mark.parametrize("kwargs, match", [
    (dict(epsilon=1.0, delta=None, feature_bound=1, label_bound=1), "needs delta"),
    (dict(epsilon=1.0, delta=1e-5, label_bound=1), "feature_bound"),
    (dict(epsilon=1.0, delta=1e-5, feature_bound=1), "label_bound"),
    (dict(epsilon=1.0, delta=1e-5, feature_bound=-1, label_bound=1), "positive finite"),
    (dict(epsilon=-1.0, delta=1e-5), "epsilon must be"),
    (dict(epsilon=1.0, delta=1e-5, feature_bound=1, label_bound=1, split=1.0), "split"),
    (dict(epsilon=1.0, delta=1e-5, feature_bound=1, label_bound=1, algorithm="bcfw"), "non-private"),
    (dict(epsilon=1.0, delta=1e-5, feature_bound=1, label_bound=1, rnm="cauchy"), "rnm"),
    (dict(epsilon=1.0, delta=1e-5, feature_bound=1, label_bound=1, calibration="x"), "calibration"),
])
def test_private_bad_inputs(data, kwargs, match):
    with pytest.raises(InputError, match=match):
        solve(data, iterations=3, **{"algorithm": "dp-bcfw", **kwargs})


def test_clipping_to_declared_bounds(data):
    p = Party(0, data.block(0) * 100, data.y * 100, SquaredLoss(), 1.0,
              clip=(0.5, 0.25, 1.0, 2.0), noise_seed=0)
    assert np.abs(p.A.data).max() <= 0.5 and np.abs(p.y).max() <= 0.25


def test_tiny_noise_selects_the_exact_vertices(data):
    # With a huge epsilon the report-noisy-max noise is negligible against the score gaps: the
    # private run must pick the same signed vertices as BCFW-AS (checks the sign convention of
    # the compiled noisy argmax against the exact LO).  Bounds cover the data, so clipping is
    # inactive.
    Ba = float(np.abs(data.A.data).max())
    By = float(np.abs(data.y).max())
    a = solve(data, algorithm="dp-bcfw", eta=1.0, iterations=3, epsilon=1e5, delta=1e-5,
              feature_bound=Ba, label_bound=By, report_accountants=("rdp",), seed=0)
    b = solve(data, algorithm="bcfw", eta=1.0, iterations=3, seed=0)   # same parties asked
    assert a.noise_plan.index_scale < 1e-3
    assert a.extra["selections"] == b.extra["selections"]
