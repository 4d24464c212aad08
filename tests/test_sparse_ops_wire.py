"""Sparse primitives and the wire format, against brute force."""
import itertools

import numpy as np
import pytest

from vflpriv.sparse import wire
from vflpriv.sparse.ops import hard_threshold, project_l2_ball, support_scores, topk_mask


def _brute_topk(a, k):
    order = sorted(range(a.shape[0]), key=lambda j: (-abs(a[j]), j))[:k]
    m = np.zeros(a.shape[0], dtype=bool)
    m[order] = True
    return m


def test_topk_matches_brute_force_with_ties():
    rng = np.random.default_rng(0)
    for _ in range(300):
        d = int(rng.integers(1, 12))
        a = rng.integers(-3, 4, size=d).astype(float)      # many ties and zeros
        k = int(rng.integers(0, d + 2))
        assert (topk_mask(a, k) == _brute_topk(a, k)).all()
    A = rng.integers(-2, 3, size=(20, 9)).astype(float)
    M = topk_mask(A, 4)
    assert all((M[i] == _brute_topk(A[i], 4)).all() for i in range(20))


def test_hard_threshold_keeps_fewer_when_sparse():
    x = np.array([0.0, 3.0, 0.0, -1.0])
    assert (hard_threshold(x, 3) == x).all()
    assert (hard_threshold(x, 1) == np.array([0, 3.0, 0, 0])).all()
    assert (hard_threshold(np.array([1.0, -1.0, 1.0]), 2) == np.array([1.0, -1.0, 0])).all()


def test_ball_and_support_scores():
    x = np.array([3.0, 4.0])
    assert np.allclose(project_l2_ball(x, 1.0), [0.6, 0.8])
    assert (project_l2_ball(x, 10.0) == x).all()
    assert support_scores(np.array([1.0, 0, 2, 0]), np.array([1.0, 1, 0, 0])) == (0.5, 0.5)


@pytest.mark.parametrize("d,nnz", [(1000, 10), (1000, 400), (7840, 5000), (50, 50), (64, 0)])
def test_encoding_is_the_smallest_and_round_trips(d, nnz):
    rng = np.random.default_rng(d + nnz)
    x = np.zeros(d)
    x[rng.choice(d, nnz, replace=False)] = rng.standard_normal(nnz)
    msg = wire.encode(x)
    assert (wire.decode(msg) == x).all()
    sizes = {12 + 8 * d, 12 + 12 * nnz, 12 + (d + 7) // 8 + 8 * nnz}
    assert len(msg) == min(sizes)


def test_notes_examples_pick_the_expected_encoding():
    assert wire.best_encoding(1000, 10) == wire.COO          # tau << d
    assert wire.best_encoding(7840, 5000) == wire.BITMAP     # MNIST softmax tau=500/class
    assert wire.best_encoding(1000, 1000) == wire.DENSE


def test_decode_refuses_garbage():
    msg = wire.encode(np.ones(4))
    with pytest.raises(ValueError):
        wire.decode(msg + b"x")
    with pytest.raises(ValueError):
        wire.decode(b"XX" + msg[2:])


def test_sparse_rows_path_matches_brute_force():
    rng = np.random.default_rng(1)
    d = 5000
    A = np.zeros((6, d))
    for r in range(6):
        nz = rng.choice(d, int(rng.integers(0, 40)), replace=False)
        A[r, nz] = rng.integers(-3, 4, nz.shape[0])
    for k in (1, 5, 30, 60):
        M = topk_mask(A, k)
        for r in range(6):
            assert (M[r] == _brute_topk(A[r], k)).all()
        H = hard_threshold(A, k)
        for r in range(6):
            ref = np.where(_brute_topk(A[r], k), A[r], 0.0)
            assert (H[r] == ref).all()
