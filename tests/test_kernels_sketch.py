"""Tests of the seeded sketches in vflpriv.kernels (compiled and numpy reference).

Statistical tests are seeded (deterministic in CI) and state their false-failure rate.
"""
import subprocess
import sys
import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import special, stats

import vflpriv.kernels as K
from vflpriv.kernels import reference as R

KINDS = ("gaussian", "countsketch")
PATHS = [K, R]
PATH_IDS = ["kernel", "reference"]


def _matrix(n=300, d=40, density=0.05, seed=0, dtype=np.float64, index_dtype=np.int32):
    A = sp.random(n, d, density=density, format="csc", random_state=seed, dtype=dtype)
    A.indices = A.indices.astype(index_dtype)
    A.indptr = A.indptr.astype(index_dtype)
    return A


# ---------------------------------------------------------------- J @ A with J rebuilt from seed
@pytest.mark.parametrize("mod", PATHS, ids=PATH_IDS)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("m", [1, 17, 64])
def test_sketch_of_dense_matrix_equals_J_times_A(mod, kind, m):
    A = np.random.default_rng(1).standard_normal((150, 12))
    A[:, 3] = 0.0                                  # an empty column
    J = R.sketch_operator(150, m, 2024, kind)      # J rebuilt from the seed alone
    want = J @ A
    cols = [0, 3, 11, 5, 5]                        # any order, repeats allowed
    got = mod.sketch_columns(A, cols, m, 2024, kind)
    assert got.shape == (m, len(cols))
    np.testing.assert_allclose(got, want[:, cols], rtol=0, atol=1e-12)
    np.testing.assert_allclose(mod.sketch_matrix(A, m, 2024, kind), want, rtol=0, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("kind", KINDS)
def test_sparse_inputs_float32_and_int64_indices(dtype, index_dtype, kind):
    A = _matrix(dtype=dtype, index_dtype=index_dtype)
    want = R.sketch_operator(300, 20, 5, kind) @ A.toarray().astype(np.float64)
    for mod in PATHS:
        got = mod.sketch_columns(A, np.arange(40), 20, 5, kind)
        assert got.dtype == np.float64
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
        np.testing.assert_allclose(mod.sketch_matrix(A.tocsr(), 20, 5, kind), want, rtol=0, atol=1e-12)


def test_duplicate_entries_add_up():
    # A CSC matrix with a repeated (row, col) entry means the sum, as in its dense form.
    A = sp.csc_array((np.array([1.0, 2.0, 3.0]), np.array([4, 4, 7]), np.array([0, 3])), shape=(10, 1))
    want = R.sketch_operator(10, 8, 3) @ np.array([0, 0, 0, 0, 3.0, 0, 0, 3.0, 0, 0])
    for mod in PATHS:
        np.testing.assert_allclose(mod.sketch_columns(A, [0], 8, 3)[:, 0], want, atol=1e-12)


@pytest.mark.skipif(not K.compiled, reason="extension not built")
@pytest.mark.parametrize("kind", KINDS)
def test_compiled_and_reference_sketches_agree(kind):
    A = _matrix(n=2000, d=60, density=0.02, seed=3)
    for seed in (0, 1, 2**64 - 1):
        a = K.sketch_columns(A, np.arange(60), 33, seed, kind)
        b = R.sketch_columns(A, np.arange(60), 33, seed, kind)
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)
        np.testing.assert_allclose(K.sketch_column_norms(2000, 33, seed, kind),
                                   R.sketch_column_norms(2000, 33, seed, kind), rtol=1e-13)


# ---------------------------------------------------------------- the law of J
def test_inverse_normal_cdf_matches_scipy():
    # AS 241 against scipy.special.ndtri (an independent implementation) over the whole range.
    p = np.concatenate([np.linspace(0, 1, 200_001)[1:-1], 10.0 ** -np.arange(1, 17),
                        1 - 10.0 ** -np.arange(1, 16), [2.0 ** -53, 1 - 2.0 ** -53]])
    z, want = R.ndtri_as241(p), special.ndtri(p)
    assert np.max(np.abs(z - want) / np.maximum(np.abs(want), 1e-3)) < 1e-14


def test_gaussian_entries_are_iid_normal_with_variance_one_over_m():
    # KS test of sqrt(m) J against N(0, 1) on 120000 entries (alpha = 1e-4), plus independence of
    # the columns: the off-diagonal Gram entries of sqrt(m) J are mean-zero with variance m, so
    # max |G_ij| / sqrt(m) over 190 pairs exceeds 5 with probability < 190 * 6e-7 = 1.1e-4.
    m, n = 200, 600
    J = R.sketch_operator(n, m, 77)
    assert stats.kstest(np.sqrt(m) * J.ravel(), "norm").pvalue > 1e-4
    G = (np.sqrt(m) * J[:, :20]).T @ (np.sqrt(m) * J[:, :20])
    off = G[~np.eye(20, dtype=bool)]
    assert np.max(np.abs(off)) / np.sqrt(m) < 5


def test_countsketch_has_one_signed_entry_per_column_and_uniform_buckets():
    # Structure is exact; bucket counts uniform (chi-square, 20000 columns, alpha = 1e-4) and
    # signs balanced (binomial, alpha = 1e-4): false-failure rate 2e-4.
    m, n = 16, 20000
    bucket, sign = R.countsketch_cells(np.arange(n), m, K.sketch_key(9, "countsketch"))
    J = R.sketch_operator(n, m, 9, "countsketch")
    assert np.array_equal(np.count_nonzero(J, axis=0), np.ones(n))
    assert np.array_equal(J[bucket, np.arange(n)], sign)
    assert stats.chisquare(np.bincount(bucket, minlength=m)).pvalue > 1e-4
    assert stats.binomtest(int((sign > 0).sum()), n).pvalue > 1e-4


def test_different_seeds_and_kinds_give_unrelated_sketches():
    J0, J1 = R.sketch_operator(500, 50, 0), R.sketch_operator(500, 50, 1)
    # Correlation of 25000 independent N(0,1) pairs: |r| < 0.03 fails with probability < 2e-6.
    assert abs(np.corrcoef(J0.ravel(), J1.ravel())[0, 1]) < 0.03


# ---------------------------------------------------------------- determinism across processes
def test_sketch_is_deterministic_across_processes():
    code = ("import numpy as np, scipy.sparse as sp, vflpriv.kernels as K;"
            "A = sp.random(400, 30, density=0.05, format='csc', random_state=4);"
            "print(K.sketch_columns(A, np.arange(30), 25, 123456789, 'gaussian').tobytes().hex());"
            "print(K.sketch_columns(A, np.arange(30), 25, 123456789, 'countsketch').tobytes().hex())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    A = sp.random(400, 30, density=0.05, format="csc", random_state=4)
    assert out[0] == K.sketch_columns(A, np.arange(30), 25, 123456789, "gaussian").tobytes().hex()
    assert out[1] == K.sketch_columns(A, np.arange(30), 25, 123456789, "countsketch").tobytes().hex()


# ---------------------------------------------------------------- column norms
@pytest.mark.parametrize("mod", PATHS, ids=PATH_IDS)
def test_column_norms_are_exact(mod):
    J = R.sketch_operator(700, 31, 42)
    np.testing.assert_allclose(mod.sketch_column_norms(700, 31, 42), np.linalg.norm(J, axis=0),
                               rtol=1e-13)
    cols = [699, 0, 5]
    np.testing.assert_allclose(mod.sketch_column_norms(700, 31, 42, columns=cols),
                               np.linalg.norm(J[:, cols], axis=0), rtol=1e-13)
    assert np.array_equal(mod.sketch_column_norms(700, 31, 42, "countsketch"), np.ones(700))
    assert mod.sketch_column_norms(0, 31, 42).shape == (0,)


def test_max_column_norm_bounds_the_sketch_sensitivity():
    # ||J (a + delta e_i) - J a|| = |delta| ||J[:, i]|| <= |delta| max_i ||J[:, i]||, equality at argmax.
    n, m, seed = 400, 30, 8
    norms = K.sketch_column_norms(n, m, seed)
    top = K.max_sketch_column_norm(n, m, seed)
    i = int(np.argmax(norms))
    a = sp.csc_array(np.random.default_rng(0).standard_normal((n, 1)))
    b = a.toarray()
    b[i] += 0.5
    diff = K.sketch_columns(sp.csc_array(b), [0], m, seed) - K.sketch_columns(a, [0], m, seed)
    assert np.linalg.norm(diff) == pytest.approx(0.5 * top, rel=1e-12)


# ---------------------------------------------------------------- edge cases
@pytest.mark.parametrize("mod", PATHS, ids=PATH_IDS)
def test_empty_columns_and_empty_selection(mod):
    A = sp.csc_array((50, 4))
    assert np.array_equal(mod.sketch_columns(A, [0, 3], 10, 1), np.zeros((10, 2)))
    assert mod.sketch_columns(A, [], 10, 1).shape == (10, 0)
    assert np.array_equal(mod.sketch_matrix(A, 10, 1), np.zeros((10, 4)))


@pytest.mark.parametrize("mod", PATHS, ids=PATH_IDS)
@pytest.mark.parametrize("args,match", [
    (dict(columns=[4]), "column index 4"),
    (dict(columns=[-1]), "column index -1"),
    (dict(m=0), "m"),
    (dict(seed=-1), "seed"),
    (dict(seed=2**64), "seed"),
    (dict(seed=1.5), "seed"),
    (dict(kind="srht"), "srht"),
])
def test_bad_arguments_raise_value_error(mod, args, match):
    kw = dict(columns=[0], m=5, seed=1, kind="gaussian")
    kw.update(args)
    with pytest.raises(ValueError, match=match):
        mod.sketch_columns(_matrix(n=20, d=4), kw["columns"], kw["m"], kw["seed"], kw["kind"])


@pytest.mark.parametrize("mod", PATHS, ids=PATH_IDS)
def test_corrupt_row_index_is_refused(mod):
    A = sp.csc_array((np.array([1.0]), np.array([0]), np.array([0, 1])), shape=(5, 1))
    A.indices[0] = 9   # corrupt the matrix after construction
    with pytest.raises(ValueError, match="row index 9"):
        mod.sketch_columns(A, [0], 4, 1)


# ---------------------------------------------------------------- memory
@pytest.mark.parametrize("mod", PATHS, ids=PATH_IDS)
@pytest.mark.parametrize("kind", KINDS)
def test_memory_does_not_grow_with_n(mod, kind):
    # Same number of columns and nonzeros per column, n from 1e3 to 1e6: the peak of Python-traced
    # allocations (numpy reports to tracemalloc) stays within 32 KiB of the small case, while an
    # explicit J would need m * n * 8 = 160 MB at n = 1e6.
    m, d, nnz = 20, 50, 30
    peaks = []
    for n in (1_000, 1_000_000):
        rng = np.random.default_rng(n)
        rows = np.concatenate([rng.choice(n, nnz, replace=False) for _ in range(d)]).astype(np.int32)
        A = sp.csc_array((rng.standard_normal(d * nnz), rows, np.arange(0, d * nnz + 1, nnz,
                                                                           dtype=np.int32)),
                         shape=(n, d))
        mod.sketch_columns(A, np.arange(d), m, 3, kind)  # warm caches and imports
        tracemalloc.start()
        mod.sketch_columns(A, np.arange(d), m, 3, kind)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    assert peaks[1] <= peaks[0] + 32 * 1024


@pytest.mark.parametrize("mod", PATHS, ids=PATH_IDS)
def test_countsketch_sparse_output_equals_dense(mod):
    A = _matrix(n=500, d=70, density=0.1, seed=6)   # nnz > n: the per-row table path
    B = _matrix(n=500, d=5, density=0.01, seed=7)   # nnz < n: hashing per nonzero
    for M in (A, B):
        got = mod.sketch_matrix(M, 9, 4, "countsketch", sparse_output=True)
        assert got.format == "csc"
        want = R.sketch_operator(500, 9, 4, "countsketch") @ M.toarray()
        np.testing.assert_allclose(got.toarray(), want, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="sparse_output"):
        mod.sketch_matrix(A, 9, 4, "gaussian", sparse_output=True)
