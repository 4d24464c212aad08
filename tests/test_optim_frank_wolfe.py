"""Frank-Wolfe and DP-FW: Jaggi's rate against the computed curvature, epsilon=inf equals FW,
spend equals the calibration, the budget filter refuses before any noise, noisy-max statistics."""
import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import integrate, stats

import accounting
from vflpriv.errors import InputError
from vflpriv.optim import (dp_frank_wolfe, frank_wolfe, noisy_lmo, reference_optimum,
                           score_sensitivity)
from vflpriv.optim.losses import LogisticLoss, SquaredLoss


def _problem(seed=0, n=60, d=25):
    rng = np.random.default_rng(seed)
    A = rng.uniform(-1, 1, (n, d))
    x = np.zeros(d)
    x[:4] = [1.5, -1.0, 0.8, 0.5]
    y = np.clip(A @ x + 0.1 * rng.standard_normal(n), -3, 3)
    return A, y


def test_fw_rate_against_computed_curvature():
    A, y = _problem()
    n, eta, T = A.shape[0], 1.5, 300
    # Curvature of f = (1/2n)||Ax - y||^2 on the l1 ball (Jaggi 2013, eq. (3)):
    # C_f = sup_{x,s in M} (1/n)||A(s - x)||^2, a convex function of (x, s), so its maximum is at a
    # pair of vertices: C_f = (eta^2/n) max_{i,j} (G_ii + G_jj + 2|G_ij|), G = A^T A.
    G = A.T @ A
    dg = np.diag(G)
    C_f = eta ** 2 / n * np.max(dg[:, None] + dg[None, :] + 2 * np.abs(G))
    f_star = reference_optimum(A, y, eta=eta).objective
    res = frank_wolfe(A, y, "squared", eta, iterations=T)
    t = np.arange(1, T + 1)
    h = res.objective[1:] - f_star
    assert np.all(h <= 2 * C_f / (t + 2) + 1e-12)          # Jaggi, Theorem 1
    assert np.all(res.gap >= res.objective[:-1] - f_star - 1e-12)   # weak duality
    # Jaggi, Theorem 2 (beta = 27/8): some k in 1..K has gap <= 2 beta C_f / (K + 2).
    K = T - 1
    assert np.min(res.gap[1:]) <= 2 * 27 / 8 * C_f / (K + 2)
    # The iterates stay feasible and the history is the objective of the iterate.
    assert np.abs(res.x).sum() <= eta * (1 + 1e-12)
    assert res.objective[-1] == pytest.approx(SquaredLoss().objective(A, res.x, y), rel=1e-10)
    assert res.objective[-1] - f_star < 0.05 * (res.objective[0] - f_star)


@pytest.mark.parametrize("sparse", [False, True])
def test_dp_fw_with_infinite_epsilon_equals_fw(sparse):
    A, y = _problem(1)
    M = sp.csc_matrix(A) if sparse else A
    blocks = [np.arange(0, 10), np.arange(10, 25)]
    for loss in ("squared", "logistic"):
        yy = y if loss == "squared" else np.sign(y)
        fw = frank_wolfe(M, yy, loss, [1.0, 0.5], blocks=blocks, iterations=80)
        dp = dp_frank_wolfe(M, yy, loss, [1.0, 0.5], blocks=blocks, iterations=80,
                            feature_bound=1.0, label_bound=3.0, epsilon=math.inf, rng=0)
        np.testing.assert_array_equal(dp.x, fw.x)
        np.testing.assert_array_equal(dp.objective, fw.objective)
        np.testing.assert_array_equal(dp.coords, fw.coords)
        assert dp.privacy["epsilon"]["best"] == math.inf


def test_dp_fw_spend_equals_calibration(tmp_path):
    A, y = _problem(2)
    delta, T = 1e-5, 30
    ledger = accounting.Ledger(tmp_path / "ledger.jsonl")
    filt = accounting.BudgetFilter(ledger, epsilon=1.0, delta=delta)
    res = dp_frank_wolfe(A, y, "squared", 1.0, iterations=T, feature_bound=1.0, label_bound=3.0,
                         epsilon=1.0, delta=delta, budget_filter=filt, rng=3)
    cal = res.privacy["calibration"]
    assert cal["epsilon"] <= 1.0
    contents = accounting.read_ledger(tmp_path / "ledger.jsonl")
    assert len(contents.records) == T
    assert contents.spend(delta) == pytest.approx(cal["epsilon"], rel=1e-9)
    assert res.privacy["epsilon"]["best"] == pytest.approx(cal["epsilon"], rel=1e-9)
    # Every record is the Laplace noisy max with the declared-bound sensitivity.
    ev = contents.records[0].event
    assert ev == accounting.ReportNoisyMax("laplace", res.privacy["noise_scale"],
                                           res.privacy["sensitivity"])
    assert res.privacy["sensitivity"] == pytest.approx(
        2 * 1.0 * SquaredLoss().derivative_bound(1.0, 3.0) / A.shape[0])


def test_budget_filter_refuses_before_noise(tmp_path):
    A, y = _problem(3)
    delta, scale = 1e-5, 0.5
    sens = score_sensitivity("squared", A.shape[0], 1.0, 3.0, [1.0])
    one = accounting.ReportNoisyMax("laplace", scale, sens)
    budget = accounting.get_accountant("best").epsilon(accounting.SelfComposed(one, 10), delta)
    filt = accounting.BudgetFilter(accounting.Ledger(tmp_path / "l.jsonl"),
                                   epsilon=budget * (1 + 1e-9), delta=delta)
    rng = np.random.default_rng(7)
    # the whole run (20 selections) does not fit: refused up front, nothing drawn (issue 13)
    with pytest.raises(accounting.BudgetExceeded, match="before its first release"):
        dp_frank_wolfe(A, y, "squared", 1.0, iterations=20, feature_bound=1.0, label_bound=3.0,
                       noise_scale=scale, delta=delta, budget_filter=filt, rng=rng)
    assert accounting.read_ledger(tmp_path / "l.jsonl").records == []
    assert rng.standard_normal() == np.random.default_rng(7).standard_normal()

    class Racing(accounting.BudgetFilter):
        """The up-front check passed, then (as if another run spent meanwhile) releases do not
        fit: the per-release filter still refuses before the noise."""
        def check_plan(self, *a, **k):
            return 0.0
    filt = Racing(accounting.Ledger(tmp_path / "l2.jsonl"), epsilon=budget * (1 + 1e-9),
                  delta=delta)
    rng = np.random.default_rng(7)
    with pytest.raises(accounting.BudgetExceeded, match="release refused"):
        dp_frank_wolfe(A, y, "squared", 1.0, iterations=20, feature_bound=1.0, label_bound=3.0,
                       noise_scale=scale, delta=delta, budget_filter=filt, rng=rng)
    assert len(accounting.read_ledger(tmp_path / "l2.jsonl").records) == 10
    # The generator advanced by exactly 10 selections' noise (2d draws each): the refused
    # eleventh selection drew nothing.
    ref = np.random.default_rng(7)
    ref.laplace(0.0, scale, size=(10, 2 * A.shape[1]))
    assert rng.standard_normal() == ref.standard_normal()


def test_sensitivity_bound_holds_on_adversarial_neighbours():
    # Brute force over neighbouring datasets inside the declared bounds: no score (gradient
    # coordinate) moves by more than Delta, under replace-one or add/remove, at feasible x.
    rng = np.random.default_rng(4)
    n, d, B_a, B_y, eta = 12, 5, 0.7, 2.0, 1.3
    for loss in (SquaredLoss(), LogisticLoss()):
        delta_s = score_sensitivity(loss, n, B_a, B_y, [eta])
        worst = 0.0
        for _ in range(300):
            A = rng.choice([-B_a, B_a], (n, d)) * rng.uniform(0.5, 1, (n, d))
            y = rng.choice([-B_y, B_y], n)
            x = rng.standard_normal(d)
            x *= eta / np.abs(x).sum()
            g = loss.gradient(A, x, y)
            A2, y2 = A.copy(), y.copy()
            A2[0] = B_a * rng.choice([-1, 1], d)
            y2[0] = rng.choice([-B_y, B_y])
            worst = max(worst, np.max(np.abs(loss.gradient(A2, x, y2) - g)),
                        np.max(np.abs(loss.gradient(A[1:], x, y[1:]) - g)))
        assert worst <= delta_s
        assert worst >= 0.3 * delta_s                  # the bound is not wildly loose


def test_noisy_max_selection_frequencies():
    # P(score i wins) = int f_b(z - s_i) prod_{j != i} F_b(z - s_j) dz (Laplace noise), by
    # quadrature; chi-square test over 20000 seeded draws, false-failure rate 1e-4.
    g, b = np.array([0.3, -0.5, 0.1]), 0.4
    s = np.empty(6)
    s[0::2], s[1::2] = g, -g
    lap = stats.laplace(scale=b)
    p = np.array([integrate.quad(lambda z, i=i: lap.pdf(z - s[i]) * np.prod(
        [lap.cdf(z - s[j]) for j in range(6) if j != i]), -40, 40, points=list(s), limit=200)[0]
        for i in range(6)])
    assert p.sum() == pytest.approx(1.0, abs=1e-6)
    rng = np.random.default_rng(11)
    N = 20000
    counts = np.zeros(6)
    for _ in range(N):
        j, sign = noisy_lmo(g, b, rng)
        counts[2 * j + (0 if sign < 0 else 1)] += 1
    chi2 = np.sum((counts - N * p) ** 2 / (N * p))
    assert chi2 < stats.chi2.ppf(1 - 1e-4, df=5)


@pytest.mark.parametrize("kwargs, match", [
    (dict(epsilon=1.0, noise_scale=1.0, delta=1e-5), "exactly one of epsilon"),
    (dict(), "exactly one of epsilon"),
    (dict(epsilon=1.0), "delta is required"),
    (dict(epsilon=-1.0, delta=1e-5), "epsilon must be a positive"),
    (dict(noise_scale=1.0), "delta is required"),
    (dict(epsilon=1.0, delta=1e-5, feature_bound=0.0), "feature_bound"),
    (dict(epsilon=1.0, delta=1e-5, label_bound=float("inf")), "label_bound"),
    (dict(epsilon=1.0, delta=1e-5, neighboring="swap"), "neighboring"),
    (dict(epsilon=1.0, delta=1e-5, iterations=0), "iterations"),
    (dict(epsilon=1.0, delta=1e-5, derivative_clip=-1.0), "derivative_clip"),
])
def test_bad_dp_inputs(kwargs, match):
    A, y = _problem(5, n=10, d=4)
    args = dict(iterations=5, feature_bound=1.0, label_bound=3.0)
    args.update(kwargs)
    with pytest.raises(InputError, match=match):
        dp_frank_wolfe(A, y, "squared", 1.0, **args)


def test_bad_fw_inputs(tmp_path):
    A, y = _problem(6, n=10, d=4)
    with pytest.raises(InputError, match="iterations"):
        frank_wolfe(A, y, iterations=1.5)
    with pytest.raises(InputError, match="eta"):
        frank_wolfe(A, y, eta=float("nan"))
    with pytest.raises(InputError, match="shape"):
        frank_wolfe(A[0], y)
    filt = accounting.BudgetFilter(accounting.Ledger(tmp_path / "x.jsonl"), 1.0, 1e-5)
    with pytest.raises(InputError, match="finite budget"):
        dp_frank_wolfe(A, y, iterations=3, feature_bound=1, label_bound=3, epsilon=math.inf,
                       budget_filter=filt)
