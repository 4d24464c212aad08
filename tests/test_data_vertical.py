"""vflpriv.data: partitions (paper 004 eq. 11), loaders, the synthetic generator, validation."""

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from scipy import stats

from vflpriv.data import (VerticalData, balanced_partition, group_partition, load,
                          make_partition, make_synthetic, parse_synthetic, random_partition)
from vflpriv.errors import InputError


def _is_partition(blocks, d):
    allc = np.concatenate(blocks)
    return sorted(allc.tolist()) == list(range(d)) and all(len(b) > 0 for b in blocks)


def test_balanced_partition_is_eq_11():
    # d divisible by K: block k is exactly [k d/K, (k+1) d/K)
    blocks = balanced_partition(12, 4)
    assert [b.tolist() for b in blocks] == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10, 11]]
    # not divisible: contiguous, sizes differ by at most one
    blocks = balanced_partition(10, 3)
    assert [len(b) for b in blocks] == [4, 3, 3]
    assert _is_partition(blocks, 10)
    assert all(np.all(np.diff(b) == 1) for b in blocks)


def test_random_partition_seeded_and_balanced():
    a, b = random_partition(50, 4, seed=3), random_partition(50, 4, seed=3)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert _is_partition(a, 50) and sorted(len(x) for x in a) == [12, 12, 13, 13]
    c = random_partition(50, 4, seed=4)
    assert not all(np.array_equal(x, y) for x, y in zip(a, c))


@pytest.mark.parametrize("groups, d, match", [
    ([[0, 1], [1, 2]], 3, "more than one party"),
    ([[0], [2]], 3, "column 1 is assigned to no party"),
    ([[0, 5], [1]], 3, "outside"),
    ([[0, 1, 2], []], 3, "non-empty"),
])
def test_group_partition_errors(groups, d, match):
    with pytest.raises(InputError, match=match):
        group_partition(groups, d)


def test_partition_spec_strings():
    blocks = make_partition("0-2,5;3-4", 6)
    assert [b.tolist() for b in blocks] == [[0, 1, 2, 5], [3, 4]]
    with pytest.raises(InputError, match="K=3 exceeds"):
        make_partition("balanced", 2, 3)
    with pytest.raises(InputError, match="must be 'balanced'"):
        make_partition("diagonal", 4, 2)
    with pytest.raises(InputError, match="cannot read"):
        make_partition("0-x;3", 4)


def test_vertical_data_validation():
    A = np.ones((4, 3))
    with pytest.raises(InputError, match="y has 3 entries but A has n=4"):
        VerticalData.from_arrays(A, np.ones(3), "balanced", parties=2)
    B = A.copy()
    B[2, 1] = np.nan
    with pytest.raises(InputError, match="row 2, column 1"):
        VerticalData.from_arrays(B, np.ones(4), "balanced", parties=2)
    S = sp.csc_matrix(A)
    S.data[4] = np.inf
    with pytest.raises(InputError, match="non-finite"):
        VerticalData.from_arrays(S, np.ones(4), "balanced", parties=2)
    with pytest.raises(InputError, match="position 0"):
        VerticalData.from_arrays(A, [np.inf, 1, 1, 1], "balanced", parties=2)
    with pytest.raises(InputError, match="exceeds the number of features"):
        VerticalData.from_arrays(A, np.ones(4), "balanced", parties=4)
    with pytest.raises(InputError, match="2-dimensional"):
        VerticalData.from_arrays(np.ones(4), np.ones(4), "balanced", parties=1)


def test_synthetic_generator_matches_section_v():
    n, d, density, sparsity = 400, 500, 0.02, 0.01
    A, y, x = make_synthetic(n=n, d=d, density=density, sparsity=sparsity, seed=7, noise=0.001)
    assert sp.isspmatrix_csc(A) and A.shape == (n, d)
    assert A.nnz == round(density * n * d)          # scipy.sparse.random draws exactly this many
    assert np.count_nonzero(x) == round(sparsity * d)
    # nonzeros ~ N(0, 1): Kolmogorov-Smirnov, false-failure rate 1e-3 at this seed-fixed sample
    assert stats.kstest(A.data, "norm").pvalue > 1e-3
    # residual y - A x ~ N(0, 0.001): chi-square interval for the variance, two-sided 1e-4
    r = y - A @ x
    lo, hi = stats.chi2.ppf([5e-5, 1 - 5e-5], n) / n * 0.001
    assert lo < np.mean(r ** 2) < hi
    # reproducible
    A2, y2, _ = make_synthetic(n=n, d=d, density=density, sparsity=sparsity, seed=7)
    assert (A2 != A).nnz == 0 and np.array_equal(y, y2)


def test_synthetic_spec():
    kw = parse_synthetic("synthetic:n=2000,d=20000,density=0.01,sparsity=0.01,seed=0")
    assert kw["n"] == "2000" and kw["d"] == "20000"
    A, y, names = load("synthetic:n=30,d=40,density=0.2,seed=1")
    assert A.shape == (30, 40) and y.shape == (30,) and names is None
    with pytest.raises(InputError, match="unknown synthetic option 'rows'"):
        load("synthetic:rows=3")
    with pytest.raises(InputError, match="density must be in"):
        load("synthetic:n=10,d=10,density=2")
    with pytest.raises(InputError, match="n must be an integer"):
        load("synthetic:n=1.5")


def test_loaders_svmlight_csv(tmp_path):
    from sklearn.datasets import dump_svmlight_file

    rng = np.random.default_rng(0)
    X = sp.random(20, 6, density=0.4, random_state=1, format="csr")
    y = rng.integers(0, 2, 20) * 2 - 1.0
    path = tmp_path / "d.svm"
    dump_svmlight_file(X, y, str(path))
    A, yy, _ = load(str(path))
    assert np.allclose(A.toarray(), X.toarray()) and np.array_equal(yy, y)

    df = pd.DataFrame(rng.standard_normal((5, 3)), columns=["a", "b", "c"])
    df["target"] = [1.0, 2, 3, 4, 5]
    csv = tmp_path / "t.csv"
    df.to_csv(csv, index=False)
    A, yy, names = load(str(csv), label="target")
    assert names == ["a", "b", "c"] and np.allclose(A, df[["a", "b", "c"]].to_numpy())
    with pytest.raises(InputError, match="--label"):
        load(str(csv))
    with pytest.raises(InputError, match="label column 'y' is not in"):
        load(str(csv), label="y")
    with pytest.raises(InputError, match="does not exist"):
        load(str(tmp_path / "missing.csv"))
    df["s"] = "x"
    df.to_csv(csv, index=False)
    with pytest.raises(InputError, match="column 's'"):
        load(str(csv), label="target")


def test_from_dataframe_party_mapping():
    df = pd.DataFrame({"a": [1.0, 2, 3], "b": [0.0, 1, 0], "c": [5.0, 5, 6], "y": [1.0, -1, 1]})
    v = VerticalData.from_dataframe(df, "y", {"bank": ["a", "c"], "clinic": ["b"]})
    assert v.K == 2 and v.party_names == ["bank", "clinic"]
    assert v.feature_names == ["a", "c", "b"]
    assert np.array_equal(v.block(1), df[["b"]].to_numpy())
    with pytest.raises(InputError, match="more than one party"):
        VerticalData.from_dataframe(df, "y", {"p": ["a"], "q": ["a", "b"]})
    with pytest.raises(InputError, match="label column"):
        VerticalData.from_dataframe(df, "y", {"p": ["a", "y"]})
    with pytest.raises(InputError, match="different row"):
        VerticalData.from_dataframes({"p": df[["a"]], "q": df[["b"]].iloc[:2]}, df["y"])
