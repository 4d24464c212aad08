"""Losses: gradients vs finite differences, smoothness and derivative bounds vs brute force."""
import numpy as np
import pytest
import scipy.sparse as sp

from vflpriv.errors import InputError
from vflpriv.optim import LogisticLoss, SmoothedHingeLoss, SquaredLoss, get_loss

LOSSES = [SquaredLoss(), LogisticLoss(), SmoothedHingeLoss()]


def _problem(seed=0, n=30, d=8, labels="pm1"):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, d))
    y = np.sign(rng.standard_normal(n)) if labels == "pm1" else rng.standard_normal(n)
    return A, y, rng.standard_normal(d) * 0.5


def test_values_match_paper_table_v():
    # Paper 004 Table V, written out by hand for one sample.
    z, y = np.array([0.3]), np.array([-1.0])
    assert SquaredLoss().value(z, y)[0] == pytest.approx(0.5 * 1.3 ** 2)
    assert LogisticLoss().value(z, y)[0] == pytest.approx(np.log(1 + np.exp(0.3)))
    assert SmoothedHingeLoss().value(z, y)[0] == pytest.approx(0.5 * 1.3 ** 2)
    assert SmoothedHingeLoss().value(np.array([2.0]), np.array([1.0]))[0] == 0.0


@pytest.mark.parametrize("loss", LOSSES, ids=lambda l: l.name)
@pytest.mark.parametrize("sparse", [False, True])
def test_gradient_matches_central_differences(loss, sparse):
    A, y, x = _problem(labels="pm1" if loss.name != "squared" else "real")
    M = sp.csc_matrix(A) if sparse else A
    g = loss.gradient(M, x, y)
    h = 1e-6
    fd = np.array([(loss.objective(M, x + h * e, y) - loss.objective(M, x - h * e, y)) / (2 * h)
                   for e in np.eye(x.size)])
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)
    # The objective is the mean over samples (paper 004 Definition 5).
    assert loss.objective(M, x, y) == pytest.approx(np.mean(loss.value(A @ x, y)))


@pytest.mark.parametrize("loss", LOSSES, ids=lambda l: l.name)
@pytest.mark.parametrize("label_bound", [0.5, 1.0, 2.0])
def test_smoothness_and_derivative_bound_hold_on_a_grid(loss, label_bound):
    z_bound = 3.0
    z = np.linspace(-z_bound, z_bound, 2001)
    worst_slope, worst_abs = 0.0, 0.0
    for yv in np.linspace(-label_bound, label_bound, 41):
        d = loss.derivative(z, yv)
        worst_abs = max(worst_abs, np.max(np.abs(d)))
        worst_slope = max(worst_slope, np.max(np.abs(np.diff(d) / np.diff(z))))
    bound = loss.derivative_bound(z_bound, label_bound)
    assert worst_abs <= bound + 1e-12
    assert worst_abs >= 0.99 * bound            # the bound is tight (attained at the corners)
    assert worst_slope <= loss.smoothness(label_bound) + 1e-9
    assert worst_slope >= 0.99 * loss.smoothness(label_bound)


def test_lipschitz_bounds_gradient_changes():
    A, y, x = _problem(1)
    loss = LogisticLoss()
    L = loss.lipschitz(sp.csc_matrix(A), label_bound=1.0)
    assert L == pytest.approx(0.25 * np.linalg.norm(A, 2) ** 2 / A.shape[0], rel=1e-5)
    rng = np.random.default_rng(0)
    for _ in range(50):
        u, v = rng.standard_normal((2, A.shape[1]))
        gu, gv = loss.gradient(A, u, y), loss.gradient(A, v, y)
        assert np.linalg.norm(gu - gv) <= L * np.linalg.norm(u - v) * (1 + 1e-12)


def test_bad_loss_inputs():
    with pytest.raises(InputError, match="'hinge'"):
        get_loss("hinge")
    with pytest.raises(InputError, match="label_bound"):
        LogisticLoss().smoothness(-1.0)
    with pytest.raises(InputError, match="z_bound"):
        SquaredLoss().derivative_bound(float("nan"), 1.0)
