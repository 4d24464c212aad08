"""A deployed run's result for people and scripts (issue 51, item 2): ``result.json`` beside the
run description, with this run's spend computed from the server's ledger, and one log line."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("pandas")

from test_align_deploy import party_files, write_run  # noqa: E402

from accounting import get_accountant, read_ledger  # noqa: E402
from vflpriv.flower import result  # noqa: E402
from vflpriv.flower.apps import _write_result  # noqa: E402
from vflpriv.flower.spec import load_description  # noqa: E402
from vflpriv.runtime.backends import run_local  # noqa: E402


def test_result_json_of_a_run_and_of_a_refusal(tmp_path, capsys):
    paths, c = party_files(tmp_path)
    run, cfgs = write_run(tmp_path, paths, ["--epsilon", "2", "--delta", "1e-5",
                                            "--iterations", "4"])
    spec = load_description(run)
    spec["out"] = str(tmp_path / "desc" / "result.pkl")
    out = run_local(spec, cfgs)
    assert out["error"] is None
    _write_result(spec, out)
    doc = json.loads((tmp_path / "desc" / "result.json").read_text())
    assert doc["error"] is None and doc["n"] == c == doc["alignment"]["intersection_size"]
    assert len(doc["x"]) == 9 and doc["run_id"] == spec["run_id"]
    # the spend, recomputed here from the same ledger's records of this run
    ev = read_ledger(spec["ledger"]).event(run_id=spec["run_id"])
    rdp = get_accountant("rdp").epsilon(ev, 1e-5)
    assert doc["privacy"]["epsilon_spent"]["rdp"] == pytest.approx(rdp, rel=1e-12)
    assert 0 < doc["privacy"]["epsilon_spent"]["best"] <= 2.0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith(f"vflpriv: run {spec['run_id'][:12]} finished (secure, {c} rows)")
    assert "epsilon spent" in line
    # run again: the server's ledger cannot hold it; refused before the alignment
    out = run_local(spec, cfgs)
    _write_result(spec, out)
    doc = json.loads((tmp_path / "desc" / "result.json").read_text())
    assert doc["error"]["kind"] == "BudgetExceeded" and doc["error"]["phase"] == "budget"
    assert doc["privacy"]["releases"] == len([r for r in read_ledger(spec["ledger"]).records
                                              if r.run_id == spec["run_id"]])
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert "stopped in phase budget" in line and "BudgetExceeded" in line


def test_plain_drops_what_json_cannot_hold():
    import numpy as np

    assert result._plain({"a": np.arange(3), "b": object(), "c": float("nan"),
                          "d": (np.float64(1.5), None)}) == {"a": [0, 1, 2], "c": "nan",
                                                             "d": [1.5, None]}


def test_each_party_node_says_what_it_did(tmp_path, capsys):
    """party-log (written into every node config by `vflpriv flower spec`): each party's log
    names the run it accepted, the intersection size it saw, and every charge to its own ledger
    with this run's spend so far (recomputed from that ledger); a refusal says why."""
    paths, c = party_files(tmp_path)
    run, cfgs = write_run(tmp_path, paths, ["--epsilon", "2", "--delta", "1e-5",
                                            "--iterations", "3"])
    assert all(cfg.get("party-log") is True for cfg in cfgs)
    spec = load_description(run)
    capsys.readouterr()
    assert run_local(spec, cfgs)["error"] is None
    err = capsys.readouterr().err
    for k in range(3):
        assert f"vflpriv party {k}: run {spec['run_id'][:12]} (align) accepted at setup" in err
        assert f"vflpriv party {k}: run {spec['run_id'][:12]}: {c} of its" in err
        lines = [ln for ln in err.splitlines() if ln.startswith(f"vflpriv party {k}: ")
                 and "charged" in ln]
        assert lines, err
        records = [r for r in read_ledger(cfgs[k]["ledger"]).records
                   if r.run_id == spec["run_id"]]
        assert len(lines) == len(records)
        ev = read_ledger(cfgs[k]["ledger"]).event(run_id=spec["run_id"])
        final = get_accountant("rdp").epsilon(ev, 1e-5)
        assert f"this run has spent epsilon {final:.4g} at delta 1e-05 (rdp)" in lines[-1]
    # party 2's budget below the run's: its log says it refused, and why
    cfgs = [dict(cfg, ledger=str(tmp_path / f"second{k}.ledger")) for k, cfg in enumerate(cfgs)]
    cfgs[2] = dict(cfgs[2], **{"budget-epsilon": "0.5"})
    spec = dict(spec, ledger=str(tmp_path / "server2.ledger"))      # the server's has room
    capsys.readouterr()
    assert run_local(spec, cfgs)["error"] is not None
    err = capsys.readouterr().err
    assert "vflpriv party 2: refused 'setup' of run" in err
    assert "refuses the run before the alignment" in err
    assert "refused 'close'" not in err                 # the clean-up is not a refusal


def _launch_deployment(tmp_path):
    """In the main thread at the session's start: the party files and the description.  The
    deployment runs on a thread (conftest.py): a real SuperLink and SuperNodes on 127.0.0.1 and
    `vflpriv flower launch` run twice, each as its own process (a thread cannot share this
    process's stdout); what each printed and left is returned for the test to check."""
    import contextlib
    import importlib.util
    import io
    import os
    import subprocess
    import sys

    if importlib.util.find_spec("flwr") is None:
        return lambda: None                 # the test skips
    with contextlib.redirect_stdout(io.StringIO()):
        paths, c = party_files(tmp_path)
        run, cfgs = write_run(tmp_path, paths, ["--epsilon", "2", "--delta", "1e-5",
                                                "--iterations", "3"])
    desc, env = os.path.dirname(run), dict(os.environ)

    def read(*parts):
        try:
            with open(os.path.join(desc, *parts)) as fh:
                return fh.read()
        except OSError:                     # none written: the exit code and output say why
            return None

    def deploy():
        from vflpriv.flower.deploy import LocalDeployment

        launches = []
        with LocalDeployment(cfgs, tmp_path / "dep", idle_poll=0.1) as dep:
            for _ in range(2):
                p = subprocess.run([sys.executable, "-m", "vflpriv", "flower", "launch", desc,
                                    "--superlink", f"127.0.0.1:{dep.port}", "--insecure", "-q"],
                                   cwd=str(tmp_path), env=env, capture_output=True, text=True,
                                   timeout=900)
                launches.append((p.returncode, p.stdout, p.stderr, read("result.json"),
                                 read("flwr-home", "config.toml")))
        return c, dep.port, launches

    return deploy


@pytest.mark.slow
@pytest.mark.deployment(prepare=_launch_deployment)
def test_launch_submits_a_description_and_exits_by_its_result(deployment):
    """`vflpriv flower launch DIR`: no hand-written Flower connection file; on a real SuperLink
    and SuperNodes on 127.0.0.1 the run finishes (exit 0, the result's line with the epsilon
    spent), and the same description run again is refused by the server's ledger before the
    alignment (exit 1, the reason printed).  It runs from the session's start (conftest.py)."""
    pytest.importorskip("flwr")
    _, (c, port, launches) = deployment
    (code, out, err, result_json, config), (code2, out2, err2, _, _) = launches
    assert code == 0, out + err
    assert f"finished (secure, {c} rows); epsilon spent" in out
    doc = json.loads(result_json)
    assert doc["error"] is None and doc["n"] == c
    assert f'address = "127.0.0.1:{port}"' in config and "insecure = true" in config
    assert code2 == 1 and "stopped in phase budget" in out2
    assert "vflpriv flower launch: the run stopped:" in err2


def test_launch_refuses_bad_input_before_starting_anything(tmp_path, capsys):
    from vflpriv.cli.main import main

    paths, _ = party_files(tmp_path)
    run, _ = write_run(tmp_path, paths, ["--epsilon", "2", "--delta", "1e-5",
                                         "--iterations", "3"])
    import os

    desc = os.path.dirname(run)
    for argv, needle in ((["--superlink", "example.org:9093", "--insecure"], "loopback"),
                         (["--superlink", "127.0.0.1:0", "--insecure"], "127.0.0.1:0"),
                         (["--superlink", "example.org:9093"], "--root-certificates"),
                         (["--superlink", "127.0.0.1:9093", "--insecure", "--timeout", "-1"],
                          "--timeout")):
        capsys.readouterr()
        with pytest.raises(SystemExit) as exc:
            raise SystemExit(main(["flower", "launch", desc] + argv))
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert needle in err and "Traceback" not in err
        assert not os.path.exists(os.path.join(desc, "flwr-home"))


def test_a_party_ledger_named_in_its_schema_holds_its_budget_across_runs(tmp_path, capsys):
    """`vflpriv flower schema --ledger FILE` (issue 51): every description written from the
    schema names the party's own ledger, not a new one in each run's folder, so the budget the
    party gave it with `vflpriv ledger init` holds across runs: a second run that does not fit
    is refused by that party before the alignment."""
    import os

    from vflpriv.cli.main import main
    from vflpriv.flower.spec import read_node_config

    paths, _ = party_files(tmp_path)
    schemas = []
    for k, p in enumerate(paths):
        home = os.path.dirname(p)
        led = os.path.join(home, f"own{k}.ledger")
        assert main(["ledger", "init", led, "--budget-epsilon", "3" if k != 1 else "1.2",
                     "--delta", "1e-5"]) == 0
        s = os.path.join(home, f"schema{k}.json")
        assert main(["flower", "schema", "--party-data", p, "--id", "cid",
                     *(["--label", "y"] if k == 0 else []), "--json", s, "--identity-key",
                     os.path.join(home, f"party{k}_identity.key"), "--ledger", led]) == 0
        schemas += ["--party-schema", f"{k}={s}"]
    results = []
    for run in ("first", "second"):
        out = tmp_path / run
        assert main(["flower", "spec", "run", "--out", str(out), *schemas, "--label", "y",
                     "--label-party", "0", "--algorithm", "dp-bcfw-secure", "--feature-bound",
                     "1", "--label-bound", "1", "--epsilon", "1", "--delta", "1e-5",
                     "--iterations", "3"]) == 0
        cfgs = [read_node_config(str(out / f"node{k}.toml")) for k in range(3)]
        assert [c["ledger"] for c in cfgs] == [os.path.join(os.path.dirname(p), f"own{k}.ledger")
                                               for k, p in enumerate(paths)]
        results.append(run_local(load_description(str(out / "run.json")), cfgs))
    assert results[0]["error"] is None
    err = results[1]["error"]
    assert err["kind"] == "PartyRefused" and err["party"] == 1 and err["phase"] == "alignment"
    assert "refuses the run before the alignment" in err["reason"]
    # party 1's ledger holds the first run only; the others' too
    for k, p in enumerate(paths):
        runs = {r.run_id for r in read_ledger(os.path.join(os.path.dirname(p),
                                                           f"own{k}.ledger")).records}
        assert len(runs) == 1


def test_launch_without_a_superlink_exits_1_with_the_reason(tmp_path, capsys):
    """No SuperLink at the address: flwr run ends without a result; launch says so in one line
    and exits 1 (the run did not finish), never a traceback."""
    pytest.importorskip("flwr")
    import os

    from vflpriv.cli.main import main

    paths, _ = party_files(tmp_path)
    run, _ = write_run(tmp_path, paths, ["--epsilon", "2", "--delta", "1e-5",
                                         "--iterations", "3"])
    capsys.readouterr()
    code = main(["flower", "launch", os.path.dirname(run), "--superlink", "127.0.0.1:1",
                 "--insecure", "-q"])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    assert err.startswith("vflpriv flower launch: the run stopped: the Flower run ended "
                          "without a result") and len(err.strip().splitlines()) == 1
