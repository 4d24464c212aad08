"""The hopeless-noise warning of DP-BCFW-AS (vflpriv.vertical.privacy.learning_outlook): computed
from public quantities before anything is charged."""
import warnings

import pytest

from vflpriv.cli.main import main
from vflpriv.data import VerticalData, make_synthetic
from vflpriv.vertical import solve
from vflpriv.vertical.privacy import HopelessNoiseWarning, MemoryLedger


def _data():
    A, y, _ = make_synthetic(n=2000, d=200, density=0.05, sparsity=0.02, seed=0)
    return VerticalData.from_arrays(A, y, "balanced", parties=4)


def test_warns_before_anything_is_spent():
    led = MemoryLedger(budget={"epsilon": 4.0, "delta": 1e-6})
    with warnings.catch_warnings():
        warnings.simplefilter("error", HopelessNoiseWarning)
        with pytest.raises(HopelessNoiseWarning, match="largest residual"):
            solve(_data(), algorithm="dp-bcfw", iterations=20, epsilon=4.0, delta=1e-6,
                  feature_bound=1.0, label_bound=1.0, seed=0, ledger=led)
    assert led.records == []


def test_threshold_separates_the_measured_regimes():
    # docs/vertical_results.md: n = 1e5, K = 4, T = 50, B_a = B_y = eta = 1, Gumbel: eps 8
    # removed 13.9% (ratio 11.0, warned), eps 16 removed 45.8% (ratio 6.2, not warned)
    from vflpriv.optim import get_loss
    from vflpriv.vertical import privacy as P

    sens = P.sensitivities(get_loss("squared"), 1.0, 1.0, 4.0, 100000, 1.0, 1.0)
    out = {}
    for eps in (8.0, 16.0):
        plan = P.calibrate_accountant("gumbel", sens, eps, 1e-6, 50, 4, 0.5, "rdp")
        out[eps] = P.learning_outlook(plan, sens, 4, 1.0, 1.0, 1.0, 1.0)
    assert out[8.0]["hopeless"] and out[8.0]["ratio"] == pytest.approx(11.03, abs=0.01)
    assert not out[16.0]["hopeless"] and out[16.0]["ratio"] == pytest.approx(6.18, abs=0.01)


def test_no_warning_where_the_noise_is_small():
    # few releases, a large epsilon: predictor noise below the residual bound
    with warnings.catch_warnings():
        warnings.simplefilter("error", HopelessNoiseWarning)
        sol = solve(_data(), algorithm="dp-bcfw", iterations=2, epsilon=200.0, delta=1e-6,
                    feature_bound=1.0, label_bound=1.0, seed=0)
    out = sol.noise_plan.details["outlook"]
    assert not out["hopeless"] and out["predictor_noise"] < out["residual_bound"]


def test_cli_prints_one_warning_line(capsys):
    code = main(["run", "--data", "synthetic:n=2000,d=200", "--algorithm", "dp-bcfw", "--parties",
                 "4", "--iterations", "20", "--epsilon", "4", "--delta", "1e-6", "--feature-bound",
                 "1", "--label-bound", "1", "--seed", "0"])
    err = capsys.readouterr().err
    assert code == 0
    lines = [l for l in err.splitlines() if "warning" in l]
    # one line for the outlook; the parties' own clipping notes (synthetic features are standard
    # normal, so B_a = 1 clips about a third of them: vertical/clipshare.py) are lines of their own
    hopeless = [l for l in lines if "expected to learn little" in l]
    assert len(hopeless) == 1
    assert hopeless[0].startswith("vflpriv run: warning: DP-BCFW-AS is expected to learn little")
    assert all(l.startswith("vflpriv run: warning: ") for l in lines)
    assert all("clips" in l for l in lines if l not in hopeless)
