"""Flower is optional: without it everything else imports and runs, and the Flower backends say
what to install (one line, exit code 2, before any file is touched)."""
import subprocess
import sys

import pytest

from vflpriv.errors import InputError


def test_importing_the_project_does_not_import_flower():
    code = ("import sys, accounting, vflpriv, vflpriv.flower, vflpriv.flower.apps, "
            "vflpriv.vertical.remote, vflpriv.vertical, vflpriv.cli.main; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('flwr', 'ray')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_missing_flower_gives_the_install_hint(monkeypatch, tmp_path):
    from vflpriv.flower import require_flwr

    monkeypatch.setitem(sys.modules, "flwr", None)       # import flwr -> ImportError
    with pytest.raises(InputError, match=r'pip install .*\.\[flower\].*flwr\[simulation\]==1\.41\.0'):
        require_flwr("flower")


def test_cli_without_flower_exits_2_before_touching_files(tmp_path):
    ledger = tmp_path / "run.ledger"
    code = ("import sys; sys.modules['flwr'] = None; from vflpriv.cli.main import main; "
            "sys.exit(main(sys.argv[1:]))")
    out = subprocess.run([sys.executable, "-c", code, "run", "--data",
                          "synthetic:n=40,d=10,density=0.5", "--parties", "2", "--algorithm",
                          "dp-bcfw", "--epsilon", "2", "--delta", "1e-5", "--feature-bound", "1",
                          "--label-bound", "1", "--iterations", "2", "--backend", "flower-sim",
                          "--ledger", str(ledger)], capture_output=True, text=True)
    assert out.returncode == 2, out.stderr
    assert "flower" in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert not ledger.exists()


def test_bad_backend_name_exits_2():
    out = subprocess.run([sys.executable, "-m", "vflpriv", "run", "--data",
                          "synthetic:n=40,d=10,density=0.5", "--backend", "flowr"],
                         capture_output=True, text=True)
    assert out.returncode == 2 and "flowr" in out.stderr and "Traceback" not in out.stderr


def test_paths_reach_other_processes_absolute(tmp_path, monkeypatch):
    """A deployed ServerApp and ClientApps run in other working directories: every file path
    they get (data, ledgers, result) is made absolute first (a relative --ledger once went to
    the run's temporary directory)."""
    pytest.importorskip("flwr")
    from vflpriv.flower.apps import absolute_paths
    from vflpriv.flower.deploy import LocalDeployment

    monkeypatch.chdir(tmp_path)
    spec = {"ledger": "run.ledger", "privacy": {"ledger": "c.ledger", "level": "record"},
            "blocks": [[0, 1]], "name": "digits"}
    out = absolute_paths(spec)
    assert out["ledger"] == str(tmp_path / "run.ledger")
    assert out["privacy"] == {"ledger": str(tmp_path / "c.ledger"), "level": "record"}
    assert out["blocks"] == [[0, 1]] and out["name"] == "digits"
    dep = LocalDeployment([{"party": 0, "data": "p0.npz", "ledger": "p0.ledger"}], "dep")
    assert dep.cfgs == [{"party": 0, "data": str(tmp_path / "p0.npz"),
                         "ledger": str(tmp_path / "p0.ledger")}]
    assert dep.run_dir == str(tmp_path / "dep")


@pytest.mark.parametrize("value", ["abc", "0", "-1", "61", "nan"])
def test_a_bad_idle_poll_is_refused_naming_it(value, tmp_path, monkeypatch):
    """``VFLPRIV_IDLE_POLL`` (a LocalDeployment's default idle poll) that is not 0.01..60 s is
    one InputError naming the value and the variable, before any process or file."""
    pytest.importorskip("flwr")
    from vflpriv.flower.deploy import IDLE_POLL_ENV, LocalDeployment

    monkeypatch.setenv(IDLE_POLL_ENV, value)
    with pytest.raises(InputError, match=f"{IDLE_POLL_ENV}.*got '{value}'"):
        LocalDeployment([{"party": 0}], str(tmp_path / "dep"))
    assert not (tmp_path / "dep").exists()
