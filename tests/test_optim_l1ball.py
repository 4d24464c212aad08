"""l1-ball projection and LMO against independent references (KKT conditions, bisection, brute force)."""
import itertools

import numpy as np
import pytest

from vflpriv.errors import InputError
from vflpriv.optim import (check_blocks, lmo_l1_ball, lmo_l1_balls, project_l1_ball,
                           project_l1_balls)


def bisection_projection(v, eta, iters=200):
    """Independent reference: theta solves sum max(|v| - theta, 0) = eta, found by bisection."""
    if np.abs(v).sum() <= eta:
        return v.copy()
    lo, hi = 0.0, np.abs(v).max()
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        if np.maximum(np.abs(v) - mid, 0).sum() > eta:
            lo = mid
        else:
            hi = mid
    theta = 0.5 * (lo + hi)
    return np.sign(v) * np.maximum(np.abs(v) - theta, 0)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("eta", [0.1, 1.0, 3.0])
def test_projection_matches_bisection_and_kkt(seed, eta):
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(50) * rng.choice([0.1, 1, 5], 50)
    p = project_l1_ball(v, eta)
    np.testing.assert_allclose(p, bisection_projection(v, eta), atol=1e-12)
    if np.abs(v).sum() > eta:
        # KKT of min 1/2||p - v||^2 s.t. ||p||_1 <= eta: v - p = theta * subgradient of ||p||_1,
        # theta >= 0, active constraint: on the support v_j - p_j = theta sign(p_j), off it
        # |v_j| <= theta.
        assert np.abs(p).sum() == pytest.approx(eta, rel=1e-12)
        S = p != 0
        theta = (v - p)[S] / np.sign(p[S])
        assert np.ptp(theta) < 1e-12 and theta[0] >= 0
        assert np.all(np.abs(v[~S]) <= theta[0] + 1e-12)
        assert np.all(np.sign(p[S]) == np.sign(v[S]))


def test_projection_is_the_nearest_feasible_point():
    # Brute-force property: no random feasible point is closer to v than the projection.
    rng = np.random.default_rng(1)
    v = rng.standard_normal(6) * 2
    p = project_l1_ball(v, 1.0)
    cands = rng.standard_normal((20000, 6))
    cands = cands / np.abs(cands).sum(axis=1, keepdims=True) * rng.uniform(0, 1, (20000, 1))
    assert np.linalg.norm(p - v) <= np.min(np.linalg.norm(cands - v, axis=1)) + 1e-12


def test_projection_edge_cases():
    v = np.array([0.2, -0.3, 0.1])
    np.testing.assert_array_equal(project_l1_ball(v, 1.0), v)          # inside: unchanged
    np.testing.assert_array_equal(project_l1_ball(v, 0.0), np.zeros(3))
    np.testing.assert_allclose(project_l1_ball(np.array([3.0, 3.0]), 1.0), [0.5, 0.5])  # ties


def test_product_projection_is_blockwise():
    rng = np.random.default_rng(2)
    v = rng.standard_normal(20) * 3
    blocks = [np.arange(0, 7), np.arange(7, 20)]
    p = project_l1_balls(v, blocks, [1.0, 2.0])
    np.testing.assert_allclose(p[:7], bisection_projection(v[:7], 1.0), atol=1e-12)
    np.testing.assert_allclose(p[7:], bisection_projection(v[7:], 2.0), atol=1e-12)


def test_lmo_is_brute_force_vertex_minimum():
    rng = np.random.default_rng(3)
    g = rng.standard_normal(9)
    eta = 2.5
    j, sign = lmo_l1_ball(g, eta)
    verts = [(i, s) for i in range(9) for s in (-1.0, 1.0)]
    best = min(verts, key=lambda v: v[1] * eta * g[v[0]])
    assert (j, sign) == best
    blocks = [np.array([0, 4, 8]), np.array([1, 2, 3]), np.array([5, 6, 7])]
    coords, signs, radii = lmo_l1_balls(g, blocks, [1.0, 2.0, 3.0])
    # Brute force over all products of block vertices (6^3 = 216 candidates).
    per_block = [[(i, s) for i in b for s in (-1.0, 1.0)] for b in blocks]
    best = min(itertools.product(*per_block),
               key=lambda c: sum(s * r * g[i] for (i, s), r in zip(c, radii)))
    assert list(zip(coords.tolist(), signs.tolist())) == [(i, s) for i, s in best]


@pytest.mark.parametrize("blocks, match", [
    ([[0, 1], [1, 2, 3]], "column 1 appears more than once"),
    ([[0, 1], [2]], "column 3 belongs to no block"),
    ([[0, 1, 2, 3], []], "block 1 must be a non-empty"),
    ([[0, 1, 2, 7]], "column index 7 outside"),
    ([[0.0, 1.0, 2.0, 3.0]], "integer column indices"),
])
def test_bad_blocks(blocks, match):
    with pytest.raises(InputError, match=match):
        check_blocks(blocks, 4)


def test_bad_projection_inputs():
    with pytest.raises(InputError, match="eta"):
        project_l1_ball(np.ones(3), -1.0)
    with pytest.raises(InputError, match="non-finite"):
        project_l1_ball(np.array([1.0, np.nan]), 1.0)
    with pytest.raises(InputError, match="1-d"):
        project_l1_ball(np.ones((2, 2)), 1.0)
    with pytest.raises(InputError, match="2 radii for 3 blocks"):
        project_l1_balls(np.ones(3), [[0], [1], [2]], [1.0, 2.0])
