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
