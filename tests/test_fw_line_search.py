"""The non-private learner: Frank-Wolfe with the exact line-search step and the intercept at its
exact minimizer (vflpriv.optim.line_search), and its radius by cross-validation
(vflpriv.optim.eta_cv), checked against brute-force minimization, a certified optimum and
scikit-learn's own log-loss."""
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize_scalar
from sklearn.metrics import log_loss
from sklearn.model_selection import StratifiedKFold

from _cli import vflpriv
from vflpriv.data import VerticalData
from vflpriv.errors import InputError
from vflpriv.optim import frank_wolfe, get_loss, reference_optimum
from vflpriv.optim.eta_cv import GRID, cross_validate_eta
from vflpriv.optim.line_search import best_intercept, fw_step
from vflpriv.vertical import solve

LOSSES = ("logistic", "squared", "smoothed-hinge")
BLOCKS = [[0, 1, 2], [3, 4, 5]]


def _imbalanced(n=600, seed=0):
    """Features in [0, 1], about 10% positives (the shape of issue 30's insurance table)."""
    rng = np.random.default_rng(seed)
    A = rng.uniform(0, 1, size=(n, 6))
    p = 1 / (1 + np.exp(-(A @ np.array([1.5, 0, -1.0, 0, 0.8, 0]) - 3.0)))
    return A, np.where(rng.uniform(size=n) < p, 1.0, -1.0)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(LOSSES), st.integers(0, 2**32 - 1), st.floats(0.1, 20.0))
def test_the_step_minimizes_phi_on_0_1_better_than_a_fine_grid(loss_name, seed, scale):
    """phi(gamma*) <= min over 2001 grid points of [0, 1] (+ round-off): the step is the exact
    minimizer of the convex phi, including at the ends of the interval."""
    loss = get_loss(loss_name)
    rng = np.random.default_rng(seed)
    n = 50
    z, d = rng.normal(0, scale, n), rng.normal(0, scale, n)
    y = np.where(rng.uniform(size=n) < 0.3, 1.0, -1.0)
    g = fw_step(loss, z, d, y)
    assert 0.0 <= g <= 1.0
    phi = lambda u: float(np.mean(loss.value(z + u * d, y)))  # noqa: E731
    grid = np.linspace(0.0, 1.0, 2001)
    assert phi(g) <= min(phi(u) for u in grid) + 1e-12 * max(1.0, phi(g))


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(LOSSES), st.integers(0, 2**32 - 1))
def test_the_intercept_is_the_bounded_minimizer(loss_name, seed):
    """Against scipy's bounded scalar minimizer (a trusted solver) on |b| <= 8."""
    loss = get_loss(loss_name)
    rng = np.random.default_rng(seed)
    m = rng.normal(0, 3, 80)
    y = np.where(rng.uniform(size=80) < rng.uniform(0.01, 0.99), 1.0, -1.0)
    b = best_intercept(loss, m, y, 8.0)
    f = lambda v: float(np.mean(loss.value(m + v, y)))  # noqa: E731
    ref = minimize_scalar(f, bounds=(-8.0, 8.0), method="bounded",
                          options={"xatol": 1e-12}).x
    assert -8.0 <= b <= 8.0
    assert f(b) <= f(ref) + 1e-12
    # a warm start anywhere in (or out of) the range finds the same minimizer
    for start in (rng.uniform(-7.9, 7.9), -7.99, 7.99, 20.0):
        assert f(best_intercept(loss, m, y, 8.0, start=start)) <= f(ref) + 1e-12


@pytest.mark.parametrize("loss_name", ["logistic", "squared"])
def test_line_search_fw_reaches_the_certified_optimum_and_never_goes_up(loss_name):
    """200 line-search rounds on an imbalanced, uncentred table reach the certified optimum over
    (x, b) within 1e-4 (the 2 / (t + 2) step stays further away), and f never increases (gamma
    = 0 is a candidate and b is re-minimized)."""
    A, y = _imbalanced()
    if loss_name == "squared":
        y = A @ np.array([0.5, 0, -0.3, 0, 0.2, 0]) + 0.4 + np.random.default_rng(1).normal(
            0, 0.1, A.shape[0])
    ref = reference_optimum(A, y, loss_name, blocks=BLOCKS, eta=1.0, intercept_bound=8.0)
    assert ref.certified
    line = frank_wolfe(A, y, loss_name, 1.0, blocks=BLOCKS, iterations=200,
                       fit_intercept=True, step="line")
    plain = frank_wolfe(A, y, loss_name, 1.0, blocks=BLOCKS, iterations=200,
                        fit_intercept=True, step="fw")
    assert line.objective[-1] - ref.objective < 1e-4
    assert line.objective[-1] < plain.objective[-1]
    assert np.all(np.diff(line.objective) <= 1e-12)
    for k, blk in enumerate(BLOCKS):
        assert np.abs(line.x[blk]).sum() <= 1.0 + 1e-12


def test_bad_step_is_refused_naming_it():
    A, y = _imbalanced(n=30)
    with pytest.raises(InputError, match="'newton'"):
        frank_wolfe(A, y, "logistic", 1.0, step="newton")
    data = VerticalData.from_arrays(A, y, "0,1,2;3,4,5")
    for algorithm in ("dpfw", "dp-bcfw", "bcfw"):
        with pytest.raises(InputError, match="'line'"):
            solve(data, loss="logistic", algorithm=algorithm, step="line", iterations=2)


def _sklearn_cv_log_loss(A, y, eta, seed, iterations):
    """scikit-learn's log_loss of the pooled held-out probabilities of the 3 stratified folds'
    fits at radius ``eta`` (its own formula, not ours)."""
    probs, labels = [], []
    for tr, te in StratifiedKFold(3, shuffle=True, random_state=seed).split(A, y > 0):
        r = frank_wolfe(A[tr], y[tr], "logistic", eta, blocks=BLOCKS, iterations=iterations,
                        fit_intercept=True, step="line")
        probs.append(1 / (1 + np.exp(-(A[te] @ r.x + r.intercept))))
        labels.append(y[te] > 0)
    return log_loss(np.concatenate(labels), np.concatenate(probs))


def test_cross_validation_scores_are_sklearn_log_losses_and_the_best_wins():
    """Each candidate's score is the held-out log-loss scikit-learn computes from the fold
    fits' probabilities (its own formula, not ours), pooled over the folds; the smallest wins."""
    A, y = _imbalanced(n=300)
    eta, rep = cross_validate_eta(A, y, "logistic", 0.5, blocks=BLOCKS, iterations=50,
                                  fit_intercept=True, seed=3)
    assert rep["candidates"][:len(GRID)] == [0.5 * m for m in GRID]
    for cand, score in zip(rep["candidates"], rep["scores"]):
        assert score == pytest.approx(_sklearn_cv_log_loss(A, y, cand, 3, 50), rel=1e-9)
    assert eta == rep["candidates"][int(np.argmin(rep["scores"]))] == rep["chosen"]


def test_too_few_rows_for_the_folds_keep_the_rule():
    A, y = _imbalanced(n=40)
    y[:] = -1.0
    y[:2] = 1.0                                 # 2 positives: fewer than 3 folds
    eta, rep = cross_validate_eta(A, y, "logistic", 0.5, blocks=BLOCKS, iterations=5)
    assert eta == 0.5 and rep["scores"] is None and "2 rows" in rep["skipped"]


def test_solve_fw_defaults_report_the_selection_and_dpfw_without_noise_is_plain_fw():
    A, y = _imbalanced()
    data = VerticalData.from_arrays(A, y, "0,1,2;3,4,5")
    sol = solve(data, loss="logistic", algorithm="fw", iterations=60, seed=0)
    assert sol.selection is not None and sol.selection["private"] is False
    assert sol.eta == sol.selection["chosen"] and sol.eta in sol.selection["candidates"]
    assert "cross-validation" in sol.eta_rule
    assert sol.seconds >= sol.selection["seconds"] > 0      # the run's time includes choosing
    assert json.loads(json.dumps(sol.to_dict()["selection"]))["chosen"] == sol.eta
    # DP-FW without noise keeps DP-FW's iteration (2 / (t + 2), the public rule's radius)
    d = solve(data, loss="logistic", algorithm="dpfw", iterations=60, seed=0)
    p = solve(data, loss="logistic", algorithm="fw", step="fw", iterations=60, seed=0)
    assert d.selection is None and d.eta == p.eta
    np.testing.assert_allclose(d.x, p.x, rtol=0, atol=1e-12)


def test_cli_step_line_for_a_private_algorithm_exits_2_naming_it():
    r = vflpriv("run", "--data", "synthetic:n=50,d=6,density=1,sparsity=0.5", "--algorithm",
                "dp-bcfw", "--step", "line", "--epsilon", "1", "--delta", "1e-5",
                "--feature-bound", "1", "--label-bound", "1")     # in this process: tests/_cli.py
    assert r.returncode == 2, r.stderr
    assert "'line'" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("kw, needle", [({"folds": 1}, "folds"), ({"folds": 2.5}, "folds"),
                                        ({"grid": (1.0, -2.0)}, "-2.0"), ({"grid": ()}, "grid"),
                                        ({"grid": ("a",)}, "'a'"), ({"grid": (float("inf"),)}, "inf"),
                                        ({"extend": -1}, "-1"), ({"extend": 1.5}, "1.5")])
def test_bad_cross_validation_options_are_refused_naming_them(kw, needle):
    A, y = _imbalanced(n=60)
    with pytest.raises(InputError, match=needle):
        cross_validate_eta(A, y, "logistic", 0.5, blocks=BLOCKS, iterations=5, **kw)


def test_the_selection_shows_its_fits_through_a_callbacks_phase():
    """A callback with a ``phase`` (the CLI's progress bar) gets one phase for the selection,
    its total the folds' fits (3 x 7), ticked once per fit in order, and closed before the
    refit, whose rounds then reach the callback.  The CLI's own bar draws nothing off a
    terminal."""
    from vflpriv.cli.progress import Progress
    from vflpriv.optim.eta_cv import FOLDS

    events = []

    class Callback:
        def __call__(self, t, f=None):
            events.append(("round", t, f))

        def phase(self, desc, total, unit="it"):
            events.append(("phase", desc, total, unit))

            class Tick:
                def __enter__(self):
                    return lambda t: events.append(("fit", t))

                def __exit__(self, *exc):
                    events.append(("phase end",))
                    return False
            return Tick()

    A, y = _imbalanced(n=300)
    solve(VerticalData.from_arrays(A, y, "0,1,2;3,4,5"), loss="logistic", algorithm="fw",
          iterations=5, callback=Callback())
    n = FOLDS * len(GRID)
    assert events[0] == ("phase", "choosing eta (3-fold CV)", n, "fit")
    assert events[1:n + 1] == [("fit", t) for t in range(n)]
    assert events[n + 1] == ("phase end",)
    assert [e[:2] for e in events[n + 2:]] == [("round", t) for t in range(5)]   # the refit
    with Progress(5, "fw").phase("choosing eta", n, unit="fit") as bar:   # pytest: no terminal
        assert bar._bar is None


def test_the_grid_is_widened_while_its_largest_radius_wins():
    """A radius far below what the data want (eta0 = 0.01 on separable-ish data): the grid's end
    wins, so doublings are scored (each a real 3-fold score, here recomputed by scikit-learn's
    log_loss) until one no longer wins or the cap is reached; the winner is the argmin of every
    scored candidate.  With extend=0 the grid is the old one."""
    from vflpriv.optim.eta_cv import EXTEND

    A, y = _imbalanced(n=300)
    eta, rep = cross_validate_eta(A, y, "logistic", 0.01, blocks=BLOCKS, iterations=30,
                                  fit_intercept=True, seed=1)
    k = rep["extended"]
    assert 1 <= k <= EXTEND
    assert rep["multiples"] == list(GRID) + [GRID[-1] * 2.0 ** (j + 1) for j in range(k)]
    assert len(rep["scores"]) == len(rep["candidates"]) == len(GRID) + k
    s = rep["scores"]
    # every extension was earned: before each doubling, the then-largest scored best
    for j in range(k):
        m = len(GRID) + j
        assert int(np.argmin(s[:m])) == m - 1
    assert k == EXTEND or int(np.argmin(s)) != len(s) - 1     # it stopped for a reason
    assert eta == rep["candidates"][int(np.argmin(s))] == rep["chosen"]
    assert s[-1] == pytest.approx(_sklearn_cv_log_loss(A, y, rep["candidates"][-1], 1, 30),
                                  rel=1e-9)
    _, rep0 = cross_validate_eta(A, y, "logistic", 0.01, blocks=BLOCKS, iterations=30,
                                 fit_intercept=True, seed=1, extend=0)
    assert rep0["extended"] == 0 and rep0["candidates"] == [0.01 * m for m in GRID]
    assert rep0["scores"] == s[:len(GRID)]
