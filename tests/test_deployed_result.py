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
