"""`vflpriv run` (JSON fields, exit codes) and the estimators VerticalDPLasso /
VerticalDPLogisticRegression."""
import json

import numpy as np
import pandas as pd
import pytest
from sklearn.exceptions import NotFittedError

from accounting import Ledger, PureDP
from vflpriv.cli.main import main
from vflpriv.errors import InputError
from vflpriv.estimators import VerticalDPLasso, VerticalDPLogisticRegression

SYN = "synthetic:n=150,d=300,density=0.05,sparsity=0.02,seed=1"


def test_run_json_fields(tmp_path, capsys):
    out = tmp_path / "r.json"
    rc = main(["run", "--data", SYN, "--parties", "3", "--algorithm", "bcfw", "--iterations", "60",
               "--eta", "1", "--reference", "--json", str(out)])
    assert rc == 0
    d = json.loads(out.read_text())
    for key in ("objective", "initial_objective", "final_objective", "reference_objective",
                "excess_risk", "epsilon_spent", "delta", "uplink_bytes", "downlink_bytes",
                "uplink_bytes_naive", "support_size", "iterations", "seconds", "seed"):
        assert key in d, key
    assert len(d["objective"]) == 60 and d["iterations"] == 60
    assert d["final_objective"] == d["objective"][-1]
    assert d["excess_risk"] == pytest.approx(d["final_objective"] - d["reference_objective"])
    assert d["excess_risk"] >= -1e-9
    assert set(d["uplink_bytes"]) == {"0", "1", "2"}
    # non-private: no epsilon is claimed
    assert d["private"] is False and d["epsilon_spent"] == {"best": None}
    assert "bcfw: 60 iterations" in capsys.readouterr().out


def test_run_private_json(tmp_path):
    out, led = tmp_path / "r.json", tmp_path / "l.jsonl"
    rc = main(["run", "--data", SYN, "--algorithm", "dp-bcfw", "--parties", "2", "--iterations",
               "10", "--epsilon", "2", "--delta", "1e-5", "--feature-bound", "3", "--label-bound",
               "3", "--rnm", "gumbel", "--ledger", str(led), "--json", str(out),
               "--compare-calibration"])
    assert rc == 0
    d = json.loads(out.read_text())
    assert d["private"] is True
    assert d["epsilon_spent"]["best"] <= 2.0 and d["delta"] == 1e-5
    assert d["calibration_comparison"]["accountant"]["epsilon"] <= 2.0
    # minus the header, the run's reservation line and its end line (docs/ledger.md)
    assert d["privacy"]["releases"] == len(led.read_text().splitlines()) - 3


@pytest.mark.parametrize("argv, match", [
    (["--data", SYN, "--algorithm", "dp-bcfw"], "needs --epsilon"),
    (["--data", SYN, "--epsilon", "one"], "--epsilon: must be"),
    (["--data", SYN, "--epsilon", "1", "--delta", "1e-5"], "feature_bound"),
    (["--data", SYN, "--algorithm", "bcfw", "--eta", "-1"], "eta"),
    (["--data", SYN, "--algorithm", "bcfw", "--parties", "999"], "exceeds the number of features"),
    (["--data", "nope.csv", "--algorithm", "bcfw"], "does not exist"),
    (["--data", SYN, "--algorithm", "bcfw", "--sampling", "nice:abc"], "integer tau"),
    (["--data", SYN, "--algorithm", "bcfw", "--partition", "0-10;11-299", "--parties", "3"], "2 parties"),
    (["--data", SYN, "--algorithm", "fw", "--epsilon", "1", "--delta", "1e-5"], "non-private"),
])
def test_run_bad_input_exit_2(argv, match, capsys):
    try:
        code = main(["run", *argv])
    except SystemExit as exc:            # argparse refuses a typed option as it reads it
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert match in err and "Traceback" not in err and err.count("\n") == 1


def test_run_plot_without_matplotlib(tmp_path, capsys, monkeypatch):
    import builtins
    real = builtins.__import__

    def fake(name, *a, **k):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError("no matplotlib")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", fake)
    rc = main(["run", "--data", SYN, "--algorithm", "bcfw", "--plot", str(tmp_path / "p.png")])
    assert rc == 2 and "matplotlib" in capsys.readouterr().err
    assert not (tmp_path / "p.png").exists()


def test_run_overspend_exit_1(tmp_path, capsys):
    led = tmp_path / "l.jsonl"
    Ledger(str(led)).append(PureDP(0.99, neighboring="replace_one"), party="earlier", note="previous release")
    rc = main(["run", "--data", SYN, "--iterations", "5", "--epsilon", "1", "--delta", "1e-5",
               "--feature-bound", "3", "--label-bound", "3", "--ledger", str(led)])
    assert rc == 1
    assert "refused before its first release" in capsys.readouterr().err   # up front (issue 13)
    assert len(led.read_text().splitlines()) == 2     # header + the earlier record only


def test_estimators_fit_predict_score():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 8))
    y = 2 * X[:, 1] - X[:, 6] + 0.01 * rng.standard_normal(200)
    est = VerticalDPLasso(parties=2, eta=2.0, max_iter=300, random_state=0).fit(X, y)
    assert est.coef_.shape == (8,) and len(est.history_) == 300
    assert set(np.flatnonzero(np.abs(est.coef_) > 0.3)) == {1, 6}
    assert est.score(X, y) > 0.9
    assert np.allclose(est.predict(X), X @ est.coef_ + est.intercept_)
    assert est.privacy_ is None and sum(est.bytes_["uplink"]) > 0
    priv = VerticalDPLasso(parties=2, eta=2.0, max_iter=20, epsilon=1.0, delta=1e-5,
                           feature_bound=4.0, label_bound=8.0, random_state=0).fit(X, y)
    assert priv.privacy_["epsilon_spent"]["best"] <= 1.0
    with pytest.raises(InputError, match="X has 5 features, but VerticalDPLasso is expecting 8"):
        est.predict(X[:, :5])
    with pytest.raises(NotFittedError, match="not fitted"):
        VerticalDPLasso().predict(X)


def test_logistic_estimator_with_dataframe_partition():
    rng = np.random.default_rng(1)
    X = pd.DataFrame(rng.standard_normal((300, 4)), columns=["age", "bmi", "income", "debt"])
    y = np.where(X["bmi"] - X["debt"] > 0, "sick", "well")
    est = VerticalDPLogisticRegression(eta=3.0, max_iter=200, random_state=0,
                                       algorithm="dp-bcfw", label_party=None).fit(
        X, y, partition={"clinic": ["age", "bmi"], "bank": ["income", "debt"]})
    assert list(est.classes_) == ["sick", "well"]
    assert est.score(X, y) > 0.9
    assert np.allclose(est.predict_proba(X).sum(axis=1), 1.0)
    with pytest.raises(InputError, match="Only binary classification"):
        VerticalDPLogisticRegression().fit(X, np.arange(300) % 3)


def test_compare_calibration_uses_the_runs_own_sketch(tmp_path):
    """An unseeded run draws its Gaussian sketch from entropy; the side-by-side comparison must
    be computed on that same sketch (same largest column norm, hence the same feature sigma),
    not on a sketch of its own."""
    sigmas = []
    for i in range(2):
        out = tmp_path / f"c{i}.json"
        assert main(["run", "--data", "synthetic:n=300,d=60,seed=0", "--algorithm", "dp-bcfw",
                     "--parties", "2", "--iterations", "3", "--epsilon", "1", "--delta", "1e-5",
                     "--feature-bound", "1", "--label-bound", "1", "--sketch", "gaussian",
                     "--sketch-dim", "40", "--compare-calibration", "--json", str(out)]) == 0
        doc = json.loads(out.read_text())
        run_sigma = doc["privacy"]["calibration"]["feature_sigma"]
        assert doc["calibration_comparison"]["accountant"]["feature_sigma"] == \
            pytest.approx(run_sigma, rel=1e-12)
        sigmas.append(run_sigma)
    assert sigmas[0] != sigmas[1]      # the two unseeded runs did draw different sketches
