"""``vflpriv bench peers --task regression`` (issue 52 item 5): its metrics against
scikit-learn's, central AdaSSP against least squares where the noise vanishes and its spend
against its target, and the command end to end on a generated table (the real tables come from
a cached wheel; tests/test_bench_peers.py does the same for classification)."""
import json

import numpy as np
import pytest
from sklearn.metrics import mean_squared_error, r2_score

from vflpriv.bench import peers_regression as R
from vflpriv.bench.tables import Table


def _table(n=1500, seed=0):
    rng = np.random.default_rng(seed)
    A = rng.uniform(0, 1, (n, 6))
    y = np.clip(A @ [0.8, -0.5, 0.3, 0, 0, 0.4] - 0.4 + 0.1 * rng.standard_normal(n), -1, 1)
    return Table("gen", A, y, 1.0, [[0, 1, 2], [3, 4, 5]], "generated")


def test_scores_are_scikit_learns():
    rng = np.random.default_rng(1)
    A, y = rng.normal(size=(50, 3)), rng.normal(size=50)
    x, b = rng.normal(size=3), 0.3
    s = R.scores(A, y, x, b, half=25.0)
    pred = A @ x + b
    assert s["test_r2"] == pytest.approx(r2_score(y, pred), rel=1e-12)
    assert s["test_rmse"] == pytest.approx(25.0 * np.sqrt(mean_squared_error(y, pred)),
                                           rel=1e-12)


def test_adassp_spends_its_target_and_tends_to_least_squares():
    t = _table(n=20000)
    out = R.adassp(t.A, t.y, 1e6, 1e-6, 1.0, seed=0)       # noise negligible
    Z = np.hstack([t.A, np.ones((len(t.y), 1))])
    w = np.linalg.lstsq(Z, t.y, rcond=None)[0]
    np.testing.assert_allclose(out["x"], w[:-1], atol=2e-3)
    assert out["b"] == pytest.approx(w[-1], abs=2e-3)
    small = R.adassp(t.A, t.y, 1.0, 1e-6, 1.0, seed=0)
    assert 0.9 < small["epsilon_spent"] <= 1.0 + 1e-9      # calibrated from below the target


def test_the_command_runs_every_system_it_has_and_pairs_them(tmp_path, monkeypatch, capsys):
    from vflpriv.cli.main import main

    monkeypatch.setattr(R, "load_regression_table", lambda name: (_table(), 10.0))
    monkeypatch.setattr(R, "TABLES", ("gen",))
    out = tmp_path / "r.json"
    assert main(["bench", "peers", "--task", "regression", "--tables", "gen", "--epsilons", "4",
                 "--seeds", "0,1", "--systems", "sklearn-ridge,adassp,fw,dpfw,dp-bcfw-secure",
                 "--iterations", "50", "--json", str(out), "-q"]) == 0
    doc = json.loads(out.read_text())
    by = {(r["system"], r["seed"]): r for r in doc["rows"]}
    assert by[("fw", 0)]["test_r2"] > 0.8 and by[("sklearn-ridge", 0)]["test_r2"] > 0.8
    for s in ("adassp", "dpfw", "dp-bcfw-secure"):
        assert by[(s, 0)]["epsilon_spent"] <= 4.0 + 1e-9
    assert doc["paired"] == []          # no opacus-replace asked: nothing to pair with
    assert main(["bench", "peers", "--task", "regression", "--systems", "lasso",
                 "--json", str(tmp_path / "x.json")]) == 2
    assert "'lasso'" in capsys.readouterr().err


def test_the_results_page_quotes_its_json():
    """docs/regression_peers.md's R^2 tables and paired verdicts are the JSON's, cell by cell."""
    import os
    import re

    root = os.path.join(os.path.dirname(__file__), "..", "docs")
    doc = json.load(open(os.path.join(root, "regression_peers.json")))
    page = open(os.path.join(root, "regression_peers.md")).read()
    summ = {(s["table"], s["system"], s["epsilon"]): s for s in doc["summary"]}
    priv = ["opacus-replace", "adassp", "dpfw", "dp-bcfw-secure"]
    checked = 0
    for m in re.finditer(r"^\| (\w+) \| (0\.5|1|4) \| (-?\d+\.\d{3}) \| (-?\d+\.\d{3}) \| "
                         r"(-?\d+\.\d{3}) \| (-?\d+\.\d{3}) \|$", page, re.M):
        t, e = m.group(1), float(m.group(2))
        for s, v in zip(priv, m.groups()[2:]):
            assert f"{summ[(t, s, e)]['test_r2']:.3f}" == v, (t, s, e)
            checked += 1
    assert checked == 4 * 3 * 4
    paired = {(p["table"], p["epsilon"], p["system"]): p for p in doc["paired"]}
    found = 0
    for m in re.finditer(r"^\| (\w+) \| (0\.5|1|4) \| ([+-]\d+\.\d{3}): (\w+) \| "
                         r"([+-]\d+\.\d{3}): (\w+) \| ([+-]\d+\.\d{3}): (\w+) \|$", page, re.M):
        t, e = m.group(1), float(m.group(2))
        for i, s in enumerate(("dp-bcfw-secure", "dpfw", "adassp")):
            p = paired[(t, e, s)]
            assert (f"{p['mean_difference']:+.3f}", p["verdict"]) == \
                (m.group(3 + 2 * i), m.group(4 + 2 * i)), (t, e, s)
        found += 1
    assert found == 4 * 3


def test_the_one_release_page_quotes_its_json_and_the_earlier_page():
    """docs/regression_one_release.md's table: the default's R^2 and DP-SGD's and AdaSSP's from
    its JSON, `before` from docs/regression_peers.json, the paired verdicts from its JSON."""
    import os
    import re

    root = os.path.join(os.path.dirname(__file__), "..", "docs")
    doc = json.load(open(os.path.join(root, "regression_one_release.json")))
    old = json.load(open(os.path.join(root, "regression_peers.json")))
    page = open(os.path.join(root, "regression_one_release.md")).read()
    S = {(s["table"], s["system"], s["epsilon"]): s["test_r2"] for s in doc["summary"]}
    O = {(s["table"], s["system"], s["epsilon"]): s["test_r2"] for s in old["summary"]}
    P = {(p["table"], p["epsilon"], p["system"]): p for p in doc["paired"]}
    assert doc["command"].split("--json")[0].strip() == (
        "vflpriv bench peers --task regression --tables boston,carseats,wage,bikeshare "
        "--epsilons 0.5,1,4 --delta 1e-06 --seeds 0,1,2,3,4,5,6,7,8,9 --systems "
        "sklearn-ridge,opacus-replace,adassp,fw,dpfw,dp-bcfw-secure")
    found = 0
    for m in re.finditer(r"^\| (\w+) \| (0\.5|1|4) \| (-?\d+\.\d{3}) \| (-?\d+\.\d{3}) \| "
                         r"(-?\d+\.\d{3}) \| (-?\d+\.\d{3}) \| ([+-]\d+\.\d{3}): (\w+) \|$",
                         page, re.M):
        t, e = m.group(1), float(m.group(2))
        assert f"{O[(t, 'dp-bcfw-secure', e)]:.3f}" == m.group(3)
        for s, v in zip(("dp-bcfw-secure", "opacus-replace", "adassp"), m.groups()[3:6]):
            assert f"{S[(t, s, e)]:.3f}" == v, (t, s, e)
        p = P[(t, e, "dp-bcfw-secure")]
        assert (f"{p['mean_difference']:+.3f}", p["verdict"]) == (m.group(7), m.group(8))
        # DP-SGD's splits and noise are seeded: the same figures as the earlier page
        assert S[(t, "opacus-replace", e)] == O[(t, "opacus-replace", e)]
        found += 1
    assert found == 12
