"""vflpriv.kernels.ring_matmul: products over Z/2^64, bit for bit.

References are independent of the kernel: Python integers (object arrays, exact, reduced
mod 2^64 at the end) on small shapes, numpy's uint64 einsum (wrapping integer sums) on larger
ones.  ``ring_matmul`` sends results thinner than ``BLAS_MIN`` to einsum, so every 2-D check
also runs the float64 limb path itself (``_limb_matmul``) on the same operands; its chunking is
reached with a small ``chunk`` (or with the default chunk and a summation longer than it).
"""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from vflpriv.kernels import ring_matmul as R
from vflpriv.kernels.ring_matmul import (
    max_chunk,
    ring_matmul,
    ring_spmatmul,
    ring_vecmat,
)

MOD = 1 << 64
EDGES = [0, 1, 2, (1 << 63) - 1, 1 << 63, (1 << 63) + 1, MOD - 2, MOD - 1, (1 << 22) - 1,
         1 << 22, (1 << 43) - 1, 1 << 43, 0xFFFF_FFFF, 1 << 32]


def _exact(a, b):
    """a @ b with Python integers, reduced mod 2^64 (the ring product by definition)."""
    r = np.asarray(a).astype(object) @ np.asarray(b).astype(object)
    if np.ndim(r) == 0:
        return np.array(int(r) % MOD, dtype=np.uint64)
    return np.vectorize(lambda x: x % MOD, otypes=[object])(r).astype(np.uint64)


def _words(rng, shape, edge_share=0.3):
    """Uniform words with a share of edge values (all-ones limbs, the sign bit, 0)."""
    x = rng.integers(0, MOD, size=shape, dtype=np.uint64)
    mask = rng.random(shape) < edge_share
    x[mask] = rng.choice(np.array(EDGES, dtype=np.uint64), size=int(mask.sum()))
    return x


def _same(x, y):
    x, y = np.asarray(x), np.asarray(y)
    assert x.dtype == np.uint64 and x.shape == y.shape
    assert np.array_equal(x, y)


def _check(a, b, expected, chunk=None):
    """ring_matmul(a, b) and, for 2-D operands, the limb path and (torch installed) torch's int64
    product on them, all equal ``expected``."""
    _same(ring_matmul(a, b, chunk=chunk), expected)
    if np.ndim(a) == 2 and np.ndim(b) == 2 and a.shape[1]:
        _same(R._limb_matmul(a, b, chunk or max_chunk(), R.LIMB_OFFSETS), expected)
        if R._has_torch():
            _same(R._torch_matmul(a, b), expected)


def test_max_chunk_is_the_float64_bound():
    # 22-bit limbs: (2^22 - 1)^2 per term, so 512 terms stay <= 2^53 and 513 may not
    w = max(b - a for a, b in zip(R.LIMB_OFFSETS, list(R.LIMB_OFFSETS[1:]) + [64]))
    worst = (2 ** w - 1) ** 2
    c = max_chunk()
    assert c * worst <= 2 ** 53 < (c + 1) * worst


@pytest.mark.parametrize("m,n,q", [(4, 9, 5), (7, 33, 4), (12, 40, 9), (3, 5, 2), (1, 6, 8)])
@pytest.mark.parametrize("chunk", [None, 1, 3, 16])
def test_small_shapes_against_python_integers(m, n, q, chunk):
    rng = np.random.default_rng(m * 1000 + n * 10 + q)
    a, b = _words(rng, (m, n)), _words(rng, (n, q))
    _check(a, b, _exact(a, b), chunk)


def test_all_edge_value_pairs():
    e = np.array(EDGES, dtype=np.uint64)
    # every edge word against every other, in a summation of every length 1..len(EDGES)
    a = np.tile(e, (len(e), 1))                     # row r: all edges
    b = np.diag(e).astype(np.uint64)                # picks one edge per column
    _check(a, b, _exact(a, b))
    full = np.full((6, 600), MOD - 1, dtype=np.uint64)
    _check(full, full.T, _exact(full, full.T))   # (-1)(-1) n = n, 600 > chunk


def test_the_chunking_is_needed_and_done():
    # 2^16 terms of up to 44 bits: one unchunked float64 product per limb pair reaches ~2^59 and
    # drops low bits (seen on this seed), the chunked product is exact
    n = 1 << 16
    rng = np.random.default_rng(11)
    a, b = _words(rng, (4, n), 0.0), _words(rng, (n, 4), 0.0)
    expected = np.einsum("ij,jk->ik", a, b)
    assert not np.array_equal(R._limb_matmul(a, b, n, R.LIMB_OFFSETS), expected)
    _same(R._limb_matmul(a, b, max_chunk(), R.LIMB_OFFSETS), expected)
    _same(ring_matmul(a, b), expected)
    _same(ring_matmul(a, b, chunk=300), expected)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_property_against_python_integers(data):
    m = data.draw(st.integers(0, 10), label="m")
    n = data.draw(st.integers(0, 40), label="n")
    q = data.draw(st.integers(0, 10), label="q")
    words = st.one_of(st.sampled_from(EDGES), st.integers(0, MOD - 1))
    a = data.draw(hnp.arrays(np.uint64, (m, n), elements=words), label="a")
    b = data.draw(hnp.arrays(np.uint64, (n, q), elements=words), label="b")
    chunk = data.draw(st.one_of(st.none(), st.integers(1, 45)), label="chunk")
    _check(a, b, _exact(a, b), chunk)


@settings(max_examples=15, deadline=None)
@given(m=st.integers(4, 24), q=st.integers(4, 24), n=st.integers(513, 1400),
       seed=st.integers(0, 2 ** 32 - 1))
def test_property_past_the_default_chunk_against_einsum(m, q, n, seed):
    # summations longer than max_chunk(): the default chunking binds
    rng = np.random.default_rng(seed)
    a, b = _words(rng, (m, n)), _words(rng, (n, q))
    _check(a, b, np.einsum("ij,jk->ik", a, b))


def test_gram_blocks_against_einsum():
    rng = np.random.default_rng(5)
    A, B = _words(rng, (3000, 30)), _words(rng, (3000, 17))
    _check(A.T, B, np.einsum("ji,jk->ik", A, B))
    _check(A.T, A, np.einsum("ji,jk->ik", A, A), chunk=77)
    G = _words(rng, (700, 70))               # past BLAS_MIN: ring_matmul takes the limbs itself
    _same(ring_matmul(G.T, G), np.einsum("ji,jk->ik", G, G))


def test_the_size_rule_takes_torch_for_large_products_and_the_same_words(monkeypatch):
    """With torch (the test extra installs it) a Gram block past TORCH_MIN goes through torch's
    int64 product; without it (the lookup forced False) through the limbs: the same words, and
    both equal einsum's wrapping sums."""
    pytest.importorskip("torch")
    rng = np.random.default_rng(8)
    A, B = _words(rng, (4096, 40)), _words(rng, (4096, 33))
    calls = []
    real = R._torch_matmul
    monkeypatch.setattr(R, "_torch_matmul", lambda a, b: calls.append(1) or real(a, b))
    with_torch = ring_matmul(A.T, B)
    assert calls == [1]
    monkeypatch.setattr(R, "_TORCH", [False])
    without = ring_matmul(A.T, B)
    assert calls == [1]
    _same(with_torch, without)
    _same(without, np.einsum("ji,jk->ik", A, B))
    # thin results, or little work, stay on einsum / the limbs
    monkeypatch.setattr(R, "_TORCH", [True])
    ring_matmul(A[:, :4].T, B)
    ring_matmul(A[:64, :10].T, B[:64, :10])
    assert calls == [1]


def test_non_contiguous_operands():
    rng = np.random.default_rng(6)
    big = _words(rng, (50, 70))
    a = big[::2, 1::3]                              # strided rows and columns
    b = np.asfortranarray(_words(rng, (a.shape[1], 40)))[:, ::-2]
    assert not a.flags.c_contiguous and not b.flags.c_contiguous
    _check(a, b, _exact(a, b), chunk=5)
    v = big[::3, 7]
    _same(ring_vecmat(v, big[::3, ::2]), _exact(v, big[::3, ::2]))


@pytest.mark.parametrize("shapes", [((0, 5), (5, 3)), ((4, 0), (0, 6)), ((4, 5), (5, 0)),
                                    ((0,), (0, 3)), ((3, 0), (0,)), ((0,), (0,)),
                                    ((6, 0), (0, 6))])
def test_empty_operands(shapes):
    a = np.zeros(shapes[0], dtype=np.uint64)
    b = np.zeros(shapes[1], dtype=np.uint64)
    _same(ring_matmul(a, b), (a @ b).astype(np.uint64))


def test_one_dimensional_cases():
    rng = np.random.default_rng(7)
    M, v, u = _words(rng, (23, 9)), _words(rng, 23), _words(rng, 9)
    _same(ring_matmul(v, M), _exact(v, M))
    _same(ring_matmul(M, u), _exact(M, u))
    _same(ring_matmul(v, v), _exact(v, v))
    _same(ring_vecmat(v, M), _exact(v, M))


def test_int64_words_are_their_twos_complement():
    rng = np.random.default_rng(8)
    a = rng.integers(-2 ** 63, 2 ** 63, size=(6, 11), dtype=np.int64)
    b = rng.integers(-2 ** 63, 2 ** 63, size=(11, 5), dtype=np.int64)
    _same(ring_matmul(a, b), _exact(a.view(np.uint64), b.view(np.uint64)))
    _same(R._limb_matmul(a.view(np.uint64), b.view(np.uint64), 4, R.LIMB_OFFSETS),
          _exact(a.view(np.uint64), b.view(np.uint64)))


def test_refuses_non_words_and_bad_shapes():
    with pytest.raises(TypeError):
        ring_matmul(np.ones((2, 2)), np.ones((2, 2), dtype=np.uint64))
    with pytest.raises(TypeError):
        ring_vecmat(np.ones(2, dtype=np.uint32), np.ones((2, 2), dtype=np.uint64))
    with pytest.raises(ValueError):
        ring_matmul(np.ones((2, 3), dtype=np.uint64), np.ones((2, 3), dtype=np.uint64))
    with pytest.raises(ValueError):
        ring_matmul(np.ones((2, 2), dtype=np.uint64), np.ones((2, 2), dtype=np.uint64),
                    chunk=max_chunk() + 1)


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
@pytest.mark.parametrize("xdim", [1, 2])
def test_sparse_times_dense_against_python_integers(fmt, xdim):
    rng = np.random.default_rng(9)
    dense = _words(rng, (40, 25))
    dense[rng.random(dense.shape) < 0.6] = 0
    S = sp.csr_matrix(dense).asformat(fmt)
    x = _words(rng, (25,) if xdim == 1 else (25, 4))
    out = ring_spmatmul(S, x)
    _same(out, _exact(dense, x))
    # the transpose view the secure code multiplies with (CSC of a CSR block)
    z = _words(rng, 40)
    _same(ring_spmatmul(sp.csr_matrix(dense).T, z), _exact(dense.T, z))


def test_sparse_keeps_uint64_with_int64_operands():
    # numpy promotes uint64 with int64 to float64; the kernel reads int64 as words instead
    rng = np.random.default_rng(10)
    dense = _words(rng, (30, 8), edge_share=0.5)
    S = sp.csr_matrix(dense)
    x = rng.integers(-2 ** 63, 2 ** 63, size=8, dtype=np.int64)
    _same(ring_spmatmul(S, x), _exact(dense, x.view(np.uint64)))
    Si = sp.csr_matrix(dense.view(np.int64))
    _same(ring_spmatmul(Si, x.view(np.uint64)), _exact(dense, x.view(np.uint64)))
    with pytest.raises(TypeError):
        ring_spmatmul(sp.csr_matrix(np.ones((2, 2))), np.ones(2, dtype=np.uint64))
    with pytest.raises(TypeError):
        ring_spmatmul(dense, x)
