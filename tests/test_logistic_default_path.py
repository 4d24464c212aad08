"""dp-bcfw-secure's logistic default is the ssp path (vflpriv.vertical.config.choose_logistic_path):
the default run is the explicit ssp run; what only the glm path has is refused on the default
with one error naming --logistic-path glm, before anything is written; the path is reported."""
import json

import numpy as np
import pytest

from _cli import vflpriv
from vflpriv.data import VerticalData
from vflpriv.errors import InputError
from vflpriv.vertical import solve
from vflpriv.vertical.config import VerticalConfig, choose_logistic_path

PRIV = dict(algorithm="dp-bcfw-secure", loss="logistic", label_party=0, epsilon=1.0,
            delta=1e-6, feature_bound=1.0, label_bound=1.0, iterations=5, seed=3)


def _data(n=600, seed=0):
    rng = np.random.default_rng(seed)
    A = rng.uniform(-1, 1, (n, 6))
    y = np.where(A @ np.array([1.0, -1, 0.5, 0, 0, 1]) + 0.5 * rng.standard_normal(n) > 0,
                 1.0, -1.0)
    return VerticalData(A, y, [[0, 1, 2], [3, 4, 5]])


def test_the_default_is_the_ssp_run_itself():
    D = _data()
    for kw in (PRIV, dict(PRIV, epsilon=None, delta=None)):   # private and not
        a = solve(D, **kw)
        b = solve(D, logistic_path="ssp", **kw)
        assert a.extra["path"] == b.extra["path"] == "ssp"
        np.testing.assert_array_equal(a.x, b.x)
        assert a.intercept == b.intercept


def test_the_choice_is_for_dp_bcfw_secure_logistic_only():
    assert choose_logistic_path("dp-bcfw-secure", "logistic")[0] == "ssp"
    for algorithm, loss in (("dp-bcfw-secure", "squared"), ("dp-bcfw", "logistic"),
                            ("fw", "logistic")):
        assert choose_logistic_path(algorithm, loss) == (None, None)
    cfg = VerticalConfig(**PRIV)
    # the config keeps what was given (None) and resolves on use, so a copy chooses again
    assert cfg.logistic_path is None and cfg.resolved_logistic_path == "ssp"
    import dataclasses

    assert dataclasses.replace(cfg, seed=4).resolved_logistic_path == "ssp"
    glm = VerticalConfig(**dict(PRIV, logistic_path="glm"))
    assert glm.resolved_logistic_path == "glm" and glm.logistic_path_choice() == (None, None)
    assert glm.step is None        # its solver's "fw"; not read as a given step


@pytest.mark.parametrize("extra, needle", [
    ({"helper_party": 1}, "helper_party 1"),
    ({"step": "pgd"}, "step 'pgd'"),
    ({"step": "fw"}, "step 'fw'"),
])
def test_glm_only_options_are_refused_on_the_default_naming_glm(extra, needle):
    with pytest.raises(InputError, match="--logistic-path glm") as e:
        solve(_data(), **PRIV, **extra)
    assert needle in str(e.value) and "default logistic_path 'ssp'" in str(e.value)
    sol = solve(_data(), logistic_path="glm", **PRIV, **extra)     # the glm path takes it
    assert sol.extra["path"] == "glm"


def test_a_checkpoint_on_the_default_is_refused_before_any_file(tmp_path):
    led, ck = tmp_path / "l.jsonl", tmp_path / "c.npz"
    with pytest.raises(InputError, match=r"--logistic-path glm checkpoints its rounds"):
        solve(_data(), ledger=str(led), checkpoint=str(ck), **PRIV)
    assert not led.exists() and not ck.exists()


def test_cli_reports_the_default_and_refuses_glm_only_options(tmp_path):
    base = ["run", "--data",
            "synthetic:n=300,d=8,density=0.5,seed=0", "--parties", "2", "--loss", "logistic",
            "--algorithm", "dp-bcfw-secure", "--label-party", "0", "--epsilon", "1",
            "--delta", "1e-6", "--feature-bound", "1", "--label-bound", "1",
            "--iterations", "3", "--seed", "0"]
    out = tmp_path / "o.json"
    r = vflpriv(*base, "--json", out)                  # in this process: tests/_cli.py
    assert r.returncode == 0, r.stderr
    assert any(ln.startswith("default logistic_path = ssp: ") for ln in r.stdout.splitlines())
    js = json.loads(out.read_text())
    assert js["secure"]["path"] == "ssp" and js["defaults"][0]["name"] == "logistic_path"
    led = tmp_path / "l.jsonl"
    r = vflpriv(*base, "--helper-party", "1", "--ledger", led)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "--logistic-path glm" in r.stderr and "helper_party 1" in r.stderr
    assert not led.exists()


def test_reference_needs_the_balls_the_ssp_fit_keeps():
    """--reference certifies an optimum over l1 balls: with eta auto the ssp fit has none (a
    ridge), so it is refused naming --eta; with --eta R the fit keeps ||x_k||_1 <= R and the
    excess is against the optimum over the same balls (>= 0 up to the certificate's gap)."""
    with pytest.raises(InputError, match="give --eta"):
        solve(_data(), reference=True, **PRIV)
    sol = solve(_data(), reference=True, eta=1.0, **PRIV)
    assert sol.reference.certified
    assert all(np.abs(sol.x[b]).sum() <= 1.0 + 1e-9 for b in ([0, 1, 2], [3, 4, 5]))
    assert sol.excess_risk >= -1e-6


def test_a_checkpoint_from_before_the_switch_resumes_on_glm(tmp_path, monkeypatch):
    """A logistic run checkpointed while glm was the default saved no --logistic-path in its
    options; --resume takes the path its run's config recorded (glm), not today's default
    (which would refuse the checkpoint), and ends as the run did."""
    from vflpriv.cli.main import main
    from vflpriv.vertical.checkpoint import read_checkpoint, write_checkpoint

    monkeypatch.chdir(tmp_path)
    cli = ["run", "--data", "synthetic:n=200,d=12,seed=0", "--parties", "2", "--loss",
           "logistic", "--algorithm", "dp-bcfw-secure", "--label-party", "0", "--epsilon", "2",
           "--delta", "1e-5", "--feature-bound", "1", "--label-bound", "1", "--iterations", "4",
           "--seed", "3", "--quiet", "--ledger", "l.jsonl", "--checkpoint", "c.npz"]
    assert main(cli + ["--logistic-path", "glm", "--json", "a.json"]) == 0
    meta, arrays = read_checkpoint("c.npz")
    assert meta["config"]["logistic_path"] == "glm"
    meta["extra"]["cli"]["logistic_path"] = None          # as written before the switch
    write_checkpoint("c.npz", {k: v for k, v in meta.items() if k not in ("format", "version")},
                     arrays)
    assert main(["run", "--resume", "c.npz", "--json", "b.json", "--quiet"]) == 0
    a, b = (json.loads((tmp_path / f).read_text()) for f in ("a.json", "b.json"))
    assert b["secure"]["path"] == "glm" and b["objective"] == a["objective"]
