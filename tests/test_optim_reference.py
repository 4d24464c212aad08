"""Reference optimum against scikit-learn's Lasso, scipy's SLSQP and the KKT conditions."""
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import minimize
from sklearn.linear_model import Lasso

from vflpriv.errors import InputError
from vflpriv.optim import (LogisticLoss, ReferenceNotCertified, SquaredLoss, fw_gap,
                           project_l1_balls, reference_optimum)


def _sparse_regression(seed=0, n=80, d=120, k=6, noise=0.05):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, d))
    x = np.zeros(d)
    x[rng.choice(d, k, replace=False)] = rng.standard_normal(k) * 2
    return A, A @ x + noise * rng.standard_normal(n)


@pytest.mark.parametrize("alpha", [0.5, 0.05])
def test_single_ball_matches_sklearn_lasso_at_its_own_radius(alpha):
    # Independent reference: sklearn's Lasso at alpha solves the constrained problem with
    # eta = ||w_alpha||_1 (the penalty is the constraint's multiplier).
    A, y = _sparse_regression()
    w = Lasso(alpha=alpha, fit_intercept=False, tol=1e-14, max_iter=200000).fit(A, y).coef_
    eta = float(np.abs(w).sum())
    res = reference_optimum(A, y, "squared", eta=eta)
    assert res.certified and res.relative_gap <= 1e-8
    assert res.solver.startswith("sklearn-lasso")
    f_w = SquaredLoss().objective(A, w, y)
    assert res.objective == pytest.approx(f_w, rel=1e-9)
    np.testing.assert_allclose(res.x, w, atol=1e-6)
    # The ball's KKT multiplier is the penalty; the Brent search on alpha only needs the support,
    # so its own alpha is looser.
    assert res.multipliers[0] == pytest.approx(alpha, rel=1e-7)
    assert res.lasso_alpha == pytest.approx(alpha, rel=1e-2)


def test_certificate_bounds_suboptimality_of_every_feasible_point():
    A, y = _sparse_regression(1)
    blocks = [np.arange(0, 60), np.arange(60, 120)]
    res = reference_optimum(A, y, "squared", blocks=blocks, eta=[1.0, 2.0])
    loss = SquaredLoss()
    # f* >= f(x_ref) - gap: no feasible point may beat that lower bound.
    rng = np.random.default_rng(0)
    for _ in range(200):
        v = project_l1_balls(res.x + 0.3 * rng.standard_normal(120), blocks, [1.0, 2.0])
        assert loss.objective(A, v, y) >= res.objective - res.gap - 1e-15
    # And the reported gap is the FW gap recomputed from scratch.
    g = loss.gradient(A, res.x, y)
    assert res.gap == pytest.approx(max(fw_gap(res.x, g, blocks, [1.0, 2.0]), 0.0), abs=1e-14)


def test_fista_and_sklearn_routes_agree():
    A, y = _sparse_regression(2, n=60, d=200)
    M = sp.csc_matrix(A)
    a = reference_optimum(M, y, eta=3.0, solver="lasso")
    b = reference_optimum(M, y, eta=3.0, solver="fista")
    assert a.solver.startswith("sklearn-lasso") and b.solver.startswith("fista")
    assert a.certified and b.certified
    assert a.objective == pytest.approx(b.objective, rel=1e-8)
    np.testing.assert_allclose(a.x, b.x, atol=1e-5)


def test_product_of_balls_satisfies_kkt():
    A, y = _sparse_regression(3)
    blocks = [np.arange(0, 40), np.arange(40, 80), np.arange(80, 120)]
    radii = np.array([0.5, 1.0, 50.0])                # the last block's ball is not binding
    res = reference_optimum(A, y, "squared", blocks=blocks, eta=radii)
    g = SquaredLoss().gradient(A, res.x, y)
    for idx, r in zip(blocks, radii):
        xb, gb = res.x[idx], g[idx]
        lam = np.max(np.abs(gb))
        S = xb != 0
        if np.abs(xb).sum() < r * (1 - 1e-9):
            assert lam < 1e-6                         # inactive ball: stationary block
        else:
            np.testing.assert_allclose(gb[S], -lam * np.sign(xb[S]), atol=1e-7)


def test_logistic_matches_slsqp_on_split_variables():
    # Independent reference: x = u - v with u, v >= 0 and sum(u + v) <= eta is a smooth problem
    # with linear constraints, which scipy's SLSQP solves from the outside.
    rng = np.random.default_rng(4)
    A = rng.standard_normal((40, 6))
    y = np.sign(A @ rng.standard_normal(6) + 0.5 * rng.standard_normal(40))
    eta, loss = 1.5, LogisticLoss()
    res = reference_optimum(A, y, loss, eta=eta)
    assert res.certified and res.solver == "fista"

    def fun(w):
        return loss.objective(A, w[:6] - w[6:], y)

    def jac(w):
        g = loss.gradient(A, w[:6] - w[6:], y)
        return np.concatenate([g, -g])

    out = minimize(fun, np.zeros(12), jac=jac, method="SLSQP", bounds=[(0, None)] * 12,
                   constraints=[{"type": "ineq", "fun": lambda w: eta - w.sum(),
                                 "jac": lambda w: -np.ones(12)}],
                   options={"ftol": 1e-14, "maxiter": 1000})
    assert out.success
    assert res.objective <= out.fun + 1e-12           # ours is at least as good...
    assert res.objective == pytest.approx(out.fun, rel=1e-7)   # ...and they agree


def test_uncertified_result_raises_or_is_flagged():
    A, y = _sparse_regression(5)
    with pytest.raises(ReferenceNotCertified, match="not certified"):
        reference_optimum(A, y, "logistic", eta=2.0, tol=1e-15, max_iter=3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = reference_optimum(np.sign(A), np.sign(y), "logistic", eta=2.0, tol=1e-15,
                                max_iter=3, on_failure="flag")
    assert not res.certified and res.relative_gap > 1e-15
    assert any("not certified" in str(w.message) for w in caught)


def test_zero_radius_and_zero_labels():
    A, y = _sparse_regression(6)
    res = reference_optimum(A, y, eta=0.0)
    assert res.certified and not np.any(res.x) and res.gap == 0.0
    res = reference_optimum(A, np.zeros_like(y), eta=1.0)
    assert res.certified and res.objective == 0.0


@pytest.mark.parametrize("kwargs, match", [
    (dict(eta=-1.0), "eta"),
    (dict(solver="cvxpy"), "solver must be"),
    (dict(on_failure="ignore"), "on_failure"),
    (dict(tol=0.0), "tol"),
    (dict(solver="lasso", loss="logistic"), "squared loss and a single block"),
    (dict(loss="hinge"), "loss must be"),
])
def test_bad_reference_inputs(kwargs, match):
    A, y = _sparse_regression(7, n=10, d=5, k=2)
    with pytest.raises(InputError, match=match):
        reference_optimum(A, y, **kwargs)


def test_bad_data():
    A, y = _sparse_regression(8, n=10, d=5, k=2)
    with pytest.raises(InputError, match="length n=10"):
        reference_optimum(A, y[:-1])
    A2 = A.copy()
    A2[0, 0] = np.inf
    with pytest.raises(InputError, match="non-finite"):
        reference_optimum(A2, y)


def test_inactive_constraint_gives_least_squares():
    # n > d and a large ball: the optimum is numpy's least-squares solution, by either route.
    A, y = _sparse_regression(9, n=100, d=10, k=3)
    x_ls = np.linalg.lstsq(A, y, rcond=None)[0]
    for solver in ("auto", "fista"):
        res = reference_optimum(A, y, eta=10 * np.abs(x_ls).sum(), solver=solver)
        assert res.certified
        np.testing.assert_allclose(res.x, x_ls, atol=1e-7)
        assert res.multipliers[0] < 1e-8


def test_interpolating_problem_is_certified_against_the_decrease():
    # d > n, noiseless labels, a ball that contains the truth: f* = 0 and the relative gap is
    # measured against f(0) - f(x) (module docstring), which FISTA + polish reach.
    A, y = _sparse_regression(10, n=40, d=100, k=3, noise=0.0)
    res = reference_optimum(sp.csc_matrix(A), y, blocks=[np.arange(50), np.arange(50, 100)],
                            eta=100.0)
    assert res.certified and res.objective < 1e-10
    f0 = SquaredLoss().objective(A, np.zeros(100), y)
    assert res.gap <= 1e-8 * f0
