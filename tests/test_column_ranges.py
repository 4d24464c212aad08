"""Public column ranges (issue 52 item 3): each column clipped to its declared range and scaled
into [-1, 1] by max(|low|, |high|), the model written back in raw units.

References: the clipping and scaling recomputed with numpy column by column (dense and sparse,
ranges that hold 0 and ranges that do not), counts of out-of-range values counted directly;
a raw table with its ranges against the same table pre-scaled by hand (the same seeded run must
give the same held-out AUC, and the raw model the scaled one divided by the factors); the
estimator's ``bounds`` against the same comparison; bad files refused by name before any work.
"""
import json
import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from vflpriv.cli.main import main
from vflpriv.data.ranges import apply_ranges, read_ranges, to_raw
from vflpriv.errors import InputError

FMT = "vflpriv-column-ranges/1"


def _reference(X, low, high):
    X = np.asarray(X, dtype=float)
    out = np.empty_like(X)
    counts = np.zeros(X.shape[1], dtype=int)
    for j in range(X.shape[1]):
        col = X[:, j]
        counts[j] = int(sum(1 for v in col if v < low[j] or v > high[j]))
        out[:, j] = np.minimum(np.maximum(col, low[j]), high[j]) / max(abs(low[j]), abs(high[j]))
    return out, counts


@settings(max_examples=25, deadline=None, derandomize=True)
@given(st.integers(1, 30), st.integers(1, 6), st.integers(0, 10 ** 6), st.booleans())
def test_clipping_and_scaling_match_a_column_by_column_reference(n, d, seed, sparse):
    rng = np.random.default_rng(seed)
    X = rng.normal(0, 5, (n, d)) * (rng.uniform(size=(n, d)) < 0.6)
    low = rng.uniform(-8, 2, d)
    high = low + rng.uniform(0.5, 10, d)            # some ranges exclude 0
    got, factors, counts = apply_ranges(sp.csr_matrix(X) if sparse else X, low, high)
    ref, ref_counts = _reference(X, low, high)
    got = got.toarray() if sp.issparse(got) else got
    assert np.array_equal(counts, ref_counts)
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-15)
    assert np.all(np.abs(got) <= 1.0)
    np.testing.assert_array_equal(factors, np.maximum(np.abs(low), np.abs(high)))
    w = rng.normal(size=d)                          # the raw model predicts as the scaled one
    clipped_raw = np.clip(X, low, high)
    np.testing.assert_allclose(clipped_raw @ to_raw(w, factors), got @ w, rtol=1e-12, atol=1e-12)


def test_a_sparse_column_whose_range_holds_zero_stays_sparse():
    X = sp.csr_matrix(np.array([[0.0, 5.0], [3.0, 0.0], [0.0, 0.0]]))
    out, _, counts = apply_ranges(X, [-1.0, 1990.0], [2.0, 2020.0])
    assert sp.issparse(out)
    assert out[:, 0].nnz == 1                        # column 0 kept its one stored value
    assert counts.tolist() == [1, 3]                 # 3 > 2; year 5, 0, 0 all below 1990


def _write(tmp_path, doc, name="r.json"):
    p = tmp_path / name
    p.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return str(p)


@pytest.mark.parametrize("doc, needle", [
    ({"format": FMT, "ranges": {"a": [1, 1]}}, "'a'"),
    ({"format": FMT, "ranges": {"a": [0, "x"]}}, "'a'"),
    ({"format": FMT, "ranges": {"a": [0, 1e400]}}, "'a'"),
    ({"format": FMT, "ranges": {"a": [0]}}, "'a'"),
    ({"format": FMT, "ranges": {}}, "no range"),
    ({"ranges": {"a": [0, 1]}}, "not a ranges file"),
    ("column,low,high\na,2,1\n", "'a'"),
])
def test_a_bad_ranges_file_is_refused_naming_the_entry(tmp_path, doc, needle):
    name = "r.csv" if isinstance(doc, str) else "r.json"
    with pytest.raises(InputError, match=needle):
        read_ranges(_write(tmp_path, doc, name))


def test_a_csv_of_ranges_reads_as_the_json():
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        from pathlib import Path

        a = _write(Path(d), "column,low,high\nage,18,90\nyear,1990,2020\n", "r.csv")
        b = _write(Path(d), {"format": FMT, "ranges": {"age": [18, 90], "year": [1990, 2020]}})
        assert read_ranges(a) == read_ranges(b) == {"age": (18.0, 90.0), "year": (1990.0, 2020.0)}


def _tables(tmp_path, n=2000):
    rng = np.random.default_rng(0)
    age, income = rng.uniform(18, 90, n), rng.lognormal(10, 0.6, n)
    score, year = rng.normal(0, 50, n), rng.integers(1990, 2021, n).astype(float)
    z = 0.04 * (age - 50) + 2e-5 * (income - 25000) + 0.01 * score + 0.05 * (year - 2005)
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-z))).astype(int)
    raw = pd.DataFrame(dict(age=age, income=income, score=score, year=year, y=y))
    R = {"age": [18, 90], "income": [0, 200000], "score": [-120, 120], "year": [1990, 2020]}
    scaled = raw.copy()
    for c, (lo, hi) in R.items():
        scaled[c] = np.clip(raw[c], lo, hi) / max(abs(lo), abs(hi))
    raw.to_csv(tmp_path / "raw.csv", index=False)
    scaled.to_csv(tmp_path / "scaled.csv", index=False)
    ranges = _write(tmp_path, {"format": FMT, "ranges": R}, "ranges.json")
    clipped = int(((raw["score"] < -120) | (raw["score"] > 120)).sum())
    return ranges, R, clipped


def test_a_raw_table_with_its_ranges_learns_as_the_same_table_prescaled(tmp_path, capsys):
    ranges, R, clipped = _tables(tmp_path)
    common = ["--label", "y", "--loss", "logistic", "--label-bound", "1", "--epsilon", "1",
              "--delta", "1e-5", "--seed", "2", "--test-fraction", "0.2", "-q"]
    assert main(["run", "--data", str(tmp_path / "raw.csv"), "--ranges", ranges, *common,
                 "--json", str(tmp_path / "r.json"), "--model-out", str(tmp_path / "m")]) == 0
    err = capsys.readouterr().err
    assert clipped > 0 and f"{clipped} value" in err and "score" in err
    assert main(["run", "--data", str(tmp_path / "scaled.csv"), "--feature-bound", "1", *common,
                 "--json", str(tmp_path / "s.json"), "--model-out", str(tmp_path / "ms")]) == 0
    r, s = (json.loads((tmp_path / f).read_text()) for f in ("r.json", "s.json"))
    assert r["test_auc"] == s["test_auc"] and r["test_auc"] > 0.65
    assert r["ranges"]["clipped"] == {"1": {"score": clipped}}
    for k in (0, 1):
        raw_m = json.loads((tmp_path / "m" / f"party{k}.json").read_text())
        sc_m = json.loads((tmp_path / "ms" / f"party{k}.json").read_text())
        factors = [max(abs(v) for v in R[c]) for c in raw_m["columns"]]
        np.testing.assert_allclose(raw_m["coef"], np.asarray(sc_m["coef"]) / factors,
                                   rtol=1e-12)


def test_ranges_are_refused_beside_a_feature_bound_and_must_cover_every_column(tmp_path, capsys):
    ranges, _, _ = _tables(tmp_path, n=200)
    base = ["run", "--data", str(tmp_path / "raw.csv"), "--label", "y", "--loss", "logistic",
            "--label-bound", "1", "--epsilon", "1", "--delta", "1e-5", "--json",
            str(tmp_path / "o.json")]
    assert main(base + ["--ranges", ranges, "--feature-bound", "1"]) == 2
    assert "--feature-bound" in capsys.readouterr().err
    part = _write(tmp_path, {"format": FMT, "ranges": {"age": [18, 90]}}, "part.json")
    assert main(base + ["--ranges", part]) == 2
    assert "no range for column 'income'" in capsys.readouterr().err
    extra = _write(tmp_path, {"format": FMT, "ranges": {"age": [18, 90], "income": [0, 1],
                                                         "score": [-1, 1], "year": [0, 1],
                                                         "agee": [0, 1]}}, "extra.json")
    assert main(base + ["--ranges", extra]) == 2
    assert "'agee'" in capsys.readouterr().err
    assert not (tmp_path / "o.json").exists()


def test_the_estimator_takes_bounds_and_answers_in_raw_units():
    from vflpriv.estimators import VerticalDPLogisticRegression

    rng = np.random.default_rng(1)
    X = np.column_stack([rng.uniform(18, 90, 600), rng.normal(0, 50, 600)])
    y = (0.05 * (X[:, 0] - 50) + 0.02 * X[:, 1] + rng.normal(0, 1, 600) > 0).astype(int)
    low, high = np.array([18.0, -100.0]), np.array([90.0, 100.0])
    kw = dict(parties=2, epsilon=2.0, delta=1e-5, random_state=0, max_iter=50)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")           # the unaccounted-fits note, said once
        m = VerticalDPLogisticRegression(bounds=(low, high), **kw).fit(X, y)
        Xs = np.clip(X, low, high) / np.maximum(np.abs(low), np.abs(high))
        ref = VerticalDPLogisticRegression(feature_bound=1.0, **kw).fit(Xs, y)
    np.testing.assert_allclose(m.coef_, ref.coef_ / np.maximum(np.abs(low), np.abs(high)),
                               rtol=1e-12)
    assert m.intercept_ == ref.intercept_
    np.testing.assert_allclose(m.decision_function(np.clip(X, low, high)),
                               ref.decision_function(Xs), rtol=1e-9, atol=1e-12)
    assert m.bounds_clipped_.tolist() == [0, int((np.abs(X[:, 1]) > 100).sum())]
    with pytest.raises(InputError, match="feature_bound"):
        VerticalDPLogisticRegression(bounds=(low, high), feature_bound=1.0, **kw).fit(X, y)
    with pytest.raises(InputError, match="column 1"):
        VerticalDPLogisticRegression(bounds=([0, 5], [1, 5]), **kw).fit(X, y)
