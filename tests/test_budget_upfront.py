"""Issue 13, items 2-3: the ledger's header budget governs every later run, and a run that
cannot fit in what remains is refused before its first release, with the numbers."""
import json
import re

import numpy as np
import pytest

import accounting as acc
from vflpriv.cli.main import main
from vflpriv.data import VerticalData, make_synthetic
from vflpriv.vertical import solve

RUN = ["run", "--data", "synthetic:n=200,d=40,seed=1", "--parties", "2", "--feature-bound", "1",
       "--label-bound", "1", "--delta", "1e-5", "--seed", "3"]


def _spent_ledger(tmp_path, eps=2.0, first=1.0):
    led = tmp_path / "l.ledger"
    assert main(RUN + ["--epsilon", str(first), "--ledger", str(led), "--iterations", "20"]) == 0
    return led


def test_asking_for_more_than_the_header_budget_is_refused_up_front(tmp_path, capsys):
    led = tmp_path / "l.ledger"
    acc.Ledger(led, budget={"epsilon": 2.0, "delta": 1e-5})
    before = led.read_bytes()
    rc = main(RUN + ["--epsilon", "100", "--ledger", str(led), "--iterations", "20",
                     "--algorithm", "dp-bcfw"])
    err = capsys.readouterr().err
    assert rc == 1
    assert "before its first release" in err and "epsilon=2 governs" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert led.read_bytes() == before                     # nothing recorded, nothing spent


def test_a_run_that_cannot_fit_is_refused_and_its_advice_is_honest(tmp_path, capsys):
    led = _spent_ledger(tmp_path, first=1.0)     # header budget: epsilon 1 (that run's own)
    capsys.readouterr()
    before = led.read_bytes()
    rc = main(RUN + ["--epsilon", "1", "--ledger", str(led), "--iterations", "20"])
    err = capsys.readouterr().err
    assert rc == 1 and led.read_bytes() == before
    m = re.search(r"([\d.]+) spent, ([\d.]+) remaining; .* spend to ([\d.]+)", err)
    assert m, err
    spent, remaining, total = map(float, m.groups())
    assert spent == pytest.approx(1.0, rel=0.2) and total > 1.0
    assert spent + remaining == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize("algorithm", ["dp-bcfw", "dpfw"])
def test_the_largest_epsilon_it_names_does_fit(tmp_path, capsys, algorithm):
    led = tmp_path / "l.ledger"
    acc.Ledger(led, budget={"epsilon": 2.0, "delta": 1e-5})
    run = RUN + ["--algorithm", algorithm, "--ledger", str(led), "--iterations", "20"]
    assert main(run + ["--epsilon", "1.5"]) == 0
    capsys.readouterr()
    before = led.read_bytes()
    assert main(run + ["--epsilon", "1.5"]) == 1
    err = capsys.readouterr().err
    fit = re.search(r"epsilon <= ([\d.e-]+) fits", err)
    assert fit and "20 iterations need" in err, err
    e = float(fit.group(1))
    assert 0 < e < 1.5 and led.read_bytes() == before
    out = tmp_path / "r.json"
    assert main(run + ["--epsilon", repr(e), "--json", str(out)]) == 0, capsys.readouterr().err
    if algorithm == "dp-bcfw":          # the header's budget, not the run's epsilon, governed
        assert json.loads(out.read_text())["privacy"]["budget"] == {"epsilon": 2.0,
                                                                    "delta": 1e-5}
    assert main(["ledger", "verify", str(led)]) == 0      # within budget


def test_the_smallest_noise_it_names_fits_and_less_does_not(tmp_path):
    from vflpriv.vertical import privacy as P

    led = acc.Ledger(tmp_path / "l.ledger", budget={"epsilon": 1.0, "delta": 1e-5})
    led.append(acc.Gaussian(8.0, neighboring="replace_one"), party="x")
    bf = acc.BudgetFilter(led, 1.0, 1e-5, accountant="rdp")
    sens = P.Sensitivity(1.0, 1.0, 0.01, 2.0)

    def planned(rounds, c=1.0):
        return P.plan_event("laplace", c * 0.05, c * 20.0, sens, rounds, 2)

    c = P.smallest_noise_factor(bf, planned, 30, ())
    assert c > 1
    assert bf.fits(planned(30, c)) and not bf.fits(planned(30, c / 1.01))


def _data():
    A, y, _ = make_synthetic(n=150, d=20, seed=2)
    return VerticalData.from_arrays(A, y, parties=2)


@pytest.mark.parametrize("algorithm", ["dp-bcfw", "dpfw"])
def test_python_api_refuses_up_front(tmp_path, algorithm):
    path = tmp_path / "l.ledger"
    acc.Ledger(path, budget={"epsilon": 1.0, "delta": 1e-5}).append(acc.PureDP(0.9, neighboring="replace_one"))
    before = path.read_bytes()
    with pytest.raises(acc.BudgetExceeded, match="before its first release") as info:
        solve(_data(), algorithm=algorithm, epsilon=1.0, delta=1e-5, feature_bound=1.0,
              label_bound=1.0, iterations=10, ledger=str(path), seed=0)
    assert info.value.spent == pytest.approx(0.9, rel=0.05)
    assert path.read_bytes() == before


def test_estimator_refuses_up_front_and_uses_the_header_budget(tmp_path):
    from vflpriv.estimators import VerticalDPLasso

    path = tmp_path / "l.ledger"
    acc.Ledger(path, budget={"epsilon": 0.5, "delta": 1e-5})
    before = path.read_bytes()
    rng = np.random.default_rng(0)
    X = rng.standard_normal((100, 6))
    est = VerticalDPLasso(epsilon=50.0, delta=1e-5, feature_bound=1.0, label_bound=1.0,
                          ledger=str(path), max_iter=5, random_state=0, algorithm="dp-bcfw")
    with pytest.raises(acc.BudgetExceeded, match="epsilon=0.5 governs"):
        est.fit(X, X[:, 0])
    assert path.read_bytes() == before


def test_fedp3_refuses_up_front_when_a_client_cannot_fit(tmp_path, capsys):
    pytest.importorskip("torch")
    led = tmp_path / "f.ledger"
    argv = ["fedp3", "--data", "synthetic", "--clients", "2", "--rounds", "2", "--epsilon", "1",
            "--local-steps", "2", "--seed", "0", "--ledger", str(led)]
    assert main(argv) == 0
    capsys.readouterr()
    before = led.read_bytes()
    assert main(argv) == 1                   # each client already spent its budget
    err = capsys.readouterr().err
    assert "client-0's budget" in err and "before its first release" in err, err
    assert "Traceback" not in err and led.read_bytes() == before
