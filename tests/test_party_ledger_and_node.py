"""A party's own ledger and node (issue 51): `vflpriv ledger init` makes a ledger with the party's
budget across runs; a run never turns its --epsilon into a new ledger's budget silently; two
`vflpriv flower node`s on one host take different ports."""
from __future__ import annotations

import json
import socket

import pytest

from vflpriv.cli.main import main

RUN = ["run", "--data", "synthetic:n=200,d=8,seed=1", "--parties", "2", "--algorithm",
       "dp-bcfw", "--epsilon", "1", "--delta", "1e-5", "--feature-bound", "1",
       "--label-bound", "1", "--iterations", "3", "--quiet", "--seed", "1"]


def _records(path):
    return [json.loads(line) for line in open(path)][1:]


def test_ledger_init_sets_a_budget_across_runs(tmp_path, capsys):
    led = tmp_path / "bank.ledger"
    assert main(["ledger", "init", str(led), "--budget-epsilon", "1.5", "--delta", "1e-5"]) == 0
    assert "budget epsilon 1.5 at delta 1e-05, nothing spent" in capsys.readouterr().out
    header = json.loads(open(led).readline())
    assert header["budget"] == {"epsilon": 1.5, "delta": 1e-5}
    assert main(RUN + ["--ledger", str(led)]) == 0           # 1 of 1.5
    assert "was new" not in capsys.readouterr().out           # its budget was set by init
    spent = _records(led)
    assert spent
    # a second run of epsilon 1 does not fit what is left: refused before any release (the
    # runs are seeded: what the first one spent, hence what is left, depends on its noise)
    code = main(RUN + ["--ledger", str(led)])
    assert code != 0
    assert _records(led) == spent
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize("argv,needle", [
    (["--budget-epsilon", "-1", "--delta", "1e-5"], "--budget-epsilon"),
    (["--budget-epsilon", "nan", "--delta", "1e-5"], "--budget-epsilon"),
    (["--budget-epsilon", "1", "--delta", "1"], "--delta"),
    (["--budget-epsilon", "1", "--delta", "0"], "--delta"),
    (["--budget-epsilon", "1", "--delta", "1e-5", "--accountant", "magic"], "--accountant"),
])
def test_ledger_init_refuses_bad_values_and_writes_nothing(tmp_path, capsys, argv, needle):
    led = tmp_path / "p.ledger"
    with pytest.raises(SystemExit) as exc:
        raise SystemExit(main(["ledger", "init", str(led)] + argv))
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not led.exists()


def test_ledger_init_never_overwrites(tmp_path, capsys):
    led = tmp_path / "p.ledger"
    assert main(["ledger", "init", str(led), "--budget-epsilon", "2", "--delta", "1e-6"]) == 0
    before = led.read_bytes()
    assert main(["ledger", "init", str(led), "--budget-epsilon", "9", "--delta", "1e-6"]) == 2
    assert "exists" in capsys.readouterr().err and led.read_bytes() == before


def test_a_new_ledger_from_a_run_says_its_budget(tmp_path, capsys):
    led = tmp_path / "new.ledger"
    assert main(RUN + ["--ledger", str(led)]) == 0
    cap = capsys.readouterr()
    assert (f"  ledger: {led} was new: its whole budget is this run's target, epsilon 1 at "
            "delta 1e-05 (vflpriv ledger init sets a budget across runs)") in cap.out
    assert "ledger" not in cap.err                       # stderr stays for errors and warnings
    # bad input with a new ledger: one error line, nothing about the ledger, no file
    other = tmp_path / "other.ledger"
    assert main(RUN[:2] + ["MISSING.csv"] + RUN[3:] + ["--ledger", str(other)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and not other.exists()


def _node_toml(tmp_path):
    (tmp_path / "c.npz").write_bytes(b"x")
    p = tmp_path / "node.toml"
    p.write_text('party = 0\ndata = "c.npz"\nunpinned = true\n')
    return str(p)


def _port(out):
    argv = out.split()
    return int(argv[argv.index("--port") + 1])


def test_two_nodes_on_one_host_take_different_free_ports(tmp_path, capsys):
    node = _node_toml(tmp_path)
    base = ["flower", "node", node, "--superlink", "127.0.0.1:9092", "--insecure", "--print"]
    assert main(base) == 0
    a = _port(capsys.readouterr().out)
    # hold a's port as a running node would: the next node gets another
    with socket.socket() as s:
        s.bind(("127.0.0.1", a))
        assert main(base) == 0
        b = _port(capsys.readouterr().out)
    assert a != b and 1 <= a <= 65535 and 1 <= b <= 65535
    assert main(base + ["--port", "9123"]) == 0
    assert _port(capsys.readouterr().out) == 9123


@pytest.mark.parametrize("port", ["0", "65536", "x", "1e4", "-5"])
def test_a_bad_node_port_is_refused(tmp_path, capsys, port):
    node = _node_toml(tmp_path)
    with pytest.raises(SystemExit) as exc:
        raise SystemExit(main(["flower", "node", node, "--superlink", "127.0.0.1:9092",
                               "--insecure", "--print", "--port", port]))
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--port" in err and "Traceback" not in err


def test_a_node_asks_for_work_every_half_second_by_default(tmp_path, capsys):
    """`vflpriv flower node` runs the same SuperNode through vflpriv.flower.node_launcher with
    its idle poll at --idle-poll seconds (default 0.5; Flower's own 3 s made every exchange of a
    deployed run wait); refused outside [0.01, 60]."""
    node = _node_toml(tmp_path)
    base = ["flower", "node", node, "--superlink", "127.0.0.1:9092", "--insecure", "--print"]
    assert main(base) == 0
    argv = capsys.readouterr().out.split()
    assert argv[1:4] == ["-m", "vflpriv.flower.node_launcher", "0.5"]
    assert argv[4:6] == ["--superlink", "127.0.0.1:9092"]
    assert main(base + ["--idle-poll", "3"]) == 0
    assert capsys.readouterr().out.split()[3] == "3.0"
    with pytest.raises(SystemExit) as exc:
        main(base + ["--idle-poll", "0"])
    assert exc.value.code == 2 and "--idle-poll" in capsys.readouterr().err
