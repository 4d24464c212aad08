"""The unpenalized intercept (vflpriv.optim.intercept) fitted jointly with the coefficients:
against a trusted solver's optimum over (x, b), in centralized FW and in dp-bcfw-secure's
logistic path, and the step's invariants."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize

from vflpriv.data import VerticalData
from vflpriv.optim import frank_wolfe, get_loss
from vflpriv.optim.intercept import H_MIN, INTERCEPT_BOUND, curvature, update
from vflpriv.vertical import solve

BLOCKS = [[0, 1, 2], [3, 4, 5]]


def _imbalanced(n=600, seed=0):
    """Features in [0, 1] (not centred) and ~10% positives: the case without an intercept
    ranks worse than chance (issue 30)."""
    rng = np.random.default_rng(seed)
    A = rng.uniform(0, 1, size=(n, 6))
    w = np.array([1.5, 0, -1.0, 0, 0.8, 0])
    p = 1 / (1 + np.exp(-(A @ w - 3.0)))
    y = np.where(rng.uniform(size=n) < p, 1.0, -1.0)
    return A, y


def _reference(A, y, eta):
    """min over (x, b), ||x_k||_1 <= eta per block, by SLSQP on x = x+ - x- (a trusted solver)."""
    n, d = A.shape

    def f(v):
        x = v[:d] - v[d:2 * d]
        m = A @ x + v[-1]
        return float(np.mean(np.logaddexp(0.0, -y * m)))

    cons = [{"type": "ineq", "fun": (lambda v, blk=blk: eta - v[blk].sum() - v[[d + j for j in
                                                                                blk]].sum())}
            for blk in BLOCKS]
    res = minimize(f, np.zeros(2 * d + 1), method="SLSQP", constraints=cons,
                   bounds=[(0, None)] * (2 * d) + [(None, None)],
                   options={"ftol": 1e-12, "maxiter": 500})
    assert res.success
    return res.fun, res.x[-1]


def test_fw_with_intercept_reaches_the_joint_optimum():
    A, y = _imbalanced()
    f_star, _ = _reference(A, y, 1.0)
    r = frank_wolfe(A, y, "logistic", 1.0, blocks=BLOCKS, iterations=3000, fit_intercept=True)
    assert r.objective[-1] - f_star < 1e-3          # FW: O(1/t) (Jaggi 2013, Theorem 1)
    # f is nearly flat along (x, b) -> (x + s v, b - s mean(A) v), so b itself is not pinned
    # down by the objective; its first-order condition df/db = 0 at the final x is
    dz = get_loss("logistic").derivative(A @ r.x + r.intercept, y)
    assert abs(np.mean(dz)) < 5e-3       # from ~0.4 at b = 0; damped steps rho_t = 2/(t + 2)
    # without it the same set cannot come close (the intercept is not in the l1 balls)
    r0 = frank_wolfe(A, y, "logistic", 1.0, blocks=BLOCKS, iterations=3000)
    assert r0.objective[-1] - f_star > 0.05


def test_secure_logistic_intercept_tracks_central_fw():
    """dp-bcfw-secure (non-private) computes the same joint iteration as FW with an intercept up
    to the sigmoid series' error: objective and intercept close, and both near the optimum."""
    A, y = _imbalanced()
    data = VerticalData.from_arrays(A, y, "0,1,2;3,4,5")
    sec = solve(data, loss="logistic", algorithm="dp-bcfw-secure", logistic_path="glm",
                eta=1.0, iterations=200, seed=0)
    fw = solve(data, loss="logistic", algorithm="fw", eta=1.0, iterations=200, step="fw")
    assert sec.intercept is not None and fw.intercept is not None
    assert abs(sec.intercept - fw.intercept) < 0.05
    assert abs(sec.final_objective - fw.final_objective) < 2e-3
    f_star, _ = _reference(A, y, 1.0)
    assert sec.final_objective - f_star < 0.01
    nob = solve(data, loss="logistic", algorithm="dp-bcfw-secure", logistic_path="glm",
                eta=1.0, iterations=200, seed=0, fit_intercept=False)
    assert nob.intercept is None and nob.final_objective > sec.final_objective + 0.05


def test_intercept_refused_where_not_fitted():
    from vflpriv.errors import InputError

    A, y = _imbalanced(n=50)
    data = VerticalData.from_arrays(A, y, "0,1,2;3,4,5")
    with pytest.raises(InputError, match="intercept"):
        solve(data, loss="smoothed-hinge", algorithm="dp-bcfw-secure", fit_intercept=True,
              iterations=2)
    with pytest.raises(InputError, match="fit_intercept"):
        solve(data, loss="logistic", algorithm="fw", fit_intercept="yes", iterations=2)


@settings(max_examples=200, deadline=None)
@given(b=st.floats(-50, 50), g=st.floats(-1e3, 1e3), t=st.integers(0, 10_000))
def test_step_stays_in_the_public_range(b, g, t):
    logistic = get_loss("logistic")
    nb = update(logistic, b, g, t, INTERCEPT_BOUND)
    assert -INTERCEPT_BOUND <= nb <= INTERCEPT_BOUND
    assert H_MIN <= curvature(logistic, b) <= 0.25
    # a step against the derivative's sign, never along it
    if g > 0 and abs(b) < INTERCEPT_BOUND:
        assert nb <= b
    sq = get_loss("squared")
    assert update(sq, b, g, t) == pytest.approx(b - 2.0 / (t + 2.0) * g)
    assert math.isfinite(update(sq, b, g, t, 1.0))


def test_dpfw_intercept_plan_and_charges():
    """DP-FW with an intercept: the plan is T K selections and T Laplace releases of the
    intercept's derivative (sensitivity 2 L / n, scale b Delta_b / Delta), every one charged, and
    the spend is the accountant's epsilon of exactly that plan (<= the target)."""
    from accounting import Laplace, ReportNoisyMax, get_accountant

    A, y = _imbalanced(n=500)
    data = VerticalData.from_arrays(A, y, "0,1,2;3,4,5")
    T = 20
    sol = solve(data, loss="logistic", algorithm="dpfw", eta=1.0, iterations=T, seed=0,
                epsilon=2.0, delta=1e-6, feature_bound=1.0, label_bound=1.0)
    recs = sol.ledger.records
    lap = [r.event for r in recs if isinstance(r.event, Laplace)]
    rnm = [r.event for r in recs if isinstance(r.event, ReportNoisyMax)]
    assert len(lap) == T and len(rnm) == 2 * T
    # L = sigmoid(B_a sum eta + B_b) = sigmoid(2 + 8) for the logistic loss
    assert lap[0].sensitivity == pytest.approx(2.0 / (1 + math.exp(-10.0)) / 500, rel=1e-12)
    assert lap[0].scale == pytest.approx(rnm[0].scale * lap[0].sensitivity / rnm[0].sensitivity)
    assert sol.intercept is not None and -8 <= sol.intercept <= 8
    assert get_accountant("rdp").epsilon(sol.ledger.event(), 1e-6) <= 2.0 + 1e-9
    # the reported objective is f(x_T, b_T) on the data as given
    f = get_loss("logistic").objective(A, sol.x, y, Ax=A @ sol.x + sol.intercept)
    assert sol.final_objective == pytest.approx(f)


def test_reference_with_an_intercept_matches_slsqp_and_bounds_the_runs():
    """reference_optimum(..., intercept_bound=8): certified, and equal to SLSQP's joint optimum
    (an independent solver); every run with an intercept then has a non-negative excess risk
    against it (the reference solves the same problem)."""
    from vflpriv.optim import reference_optimum

    A, y = _imbalanced()
    f_star, _ = _reference(A, y, 1.0)
    ref = reference_optimum(A, y, "logistic", blocks=BLOCKS, eta=1.0, intercept_bound=8.0)
    assert ref.certified and ref.intercept is not None and ref.x.shape == (6,)
    assert ref.objective == pytest.approx(f_star, abs=1e-6)
    data = VerticalData.from_arrays(A, y, "0,1,2;3,4,5")
    # the iterative learners (dp-bcfw-secure's glm path; its default ssp path fits the loss's
    # quadratic expansion, not the loss)
    for algorithm, path in (("fw", {}), ("dp-bcfw-secure", {"logistic_path": "glm"})):
        sol = solve(data, loss="logistic", algorithm=algorithm, eta=1.0, iterations=100,
                    reference=True, seed=0, **path)
        assert sol.reference.intercept is not None
        assert 0 <= sol.excess_risk < 0.01
