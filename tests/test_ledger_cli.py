"""Tests of ``vflpriv ledger verify|show``: integrity, recomputed spend, exit codes."""
import json
import os
import subprocess
import sys

import pytest

from accounting import BudgetFilter, Gaussian, Laplace, Ledger, ReportNoisyMax
from vflpriv.cli.main import main


def pure_ledger(path, budget=None, n=3):
    # n Laplace releases of scale 2 (each 0.5-DP): basic composition gives exactly 0.5 n.
    led = Ledger(path, budget=budget)
    for t in range(n):
        led.append(Laplace(scale=2.0), party=f"party-{t % 2}", round=t, note="x")
    return led


def run_json(argv, capsys):
    code = main(argv)
    return code, json.loads(capsys.readouterr().out)


def test_verify_recomputes_a_pure_spend(tmp_path, capsys):
    p = tmp_path / "a.ledger"
    pure_ledger(p)
    code, doc = run_json(["ledger", "verify", str(p), "--json", "--accountant", "basic"], capsys)
    assert code == 0
    assert doc["valid"] is True and doc["records"] == 3 and doc["torn_tail"] is False
    assert doc["epsilon_spent"] == pytest.approx(1.5)  # closed form: 3 x 1/2
    assert doc["epsilon_spent_per_party"] == pytest.approx({"party-0": 1.0, "party-1": 0.5})
    assert doc["delta"] == 0.0 and doc["within_budget"] is None


def test_verify_uses_the_header_delta_and_budget(tmp_path, capsys):
    p = tmp_path / "b.ledger"
    led = Ledger(p, budget={"epsilon": 5.0, "delta": 1e-5})
    f = BudgetFilter(led, 5.0, 1e-5)
    for t in range(4):
        f.charge(Gaussian(sigma=4.0), party="party-0", round=t)
        f.charge(ReportNoisyMax("gumbel", 8.0), party="party-1", round=t)
    code, doc = run_json(["ledger", "verify", str(p), "--json"], capsys)
    assert code == 0 and doc["valid"] and doc["within_budget"] is True
    assert doc["delta"] == 1e-5 and doc["records"] == 8
    # same number as the filter that admitted the releases
    assert doc["epsilon_spent"] == pytest.approx(f.spent(), rel=1e-9)
    # Gaussian composition has a closed form (mu-GDP): 4 releases of mu = 1/4 = one of mu = 1/2;
    # at the same delta the party-0 spend equals that of one Gaussian with sigma 2.
    code, one = run_json(["ledger", "verify", str(_one_gaussian(tmp_path, 2.0)), "--json",
                          "--delta", "1e-5"], capsys)
    assert doc["epsilon_spent_per_party"]["party-0"] == pytest.approx(one["epsilon_spent"],
                                                                      rel=1e-6)


def _one_gaussian(tmp_path, sigma):
    p = tmp_path / "one.ledger"
    Ledger(p).append(Gaussian(sigma=sigma), party="party-0")
    return p


def test_over_budget_exits_1(tmp_path, capsys):
    p = tmp_path / "c.ledger"
    pure_ledger(p, budget={"epsilon": 1.0, "delta": 1e-6}, n=3)  # appended past the filter
    code, doc = run_json(["ledger", "verify", str(p), "--json", "--accountant", "basic"], capsys)
    assert code == 1 and doc["valid"] is True and doc["within_budget"] is False


def test_torn_tail_is_reported_and_valid(tmp_path, capsys):
    p = tmp_path / "d.ledger"
    pure_ledger(p)
    with open(p, "ab") as fh:
        fh.write(b'{"seq": 3, "run_id": "ab", "par')  # a crash in the middle of a write
    code, doc = run_json(["ledger", "verify", str(p), "--json"], capsys)
    assert code == 0 and doc["torn_tail"] is True and doc["records"] == 3


def test_corrupt_record_exits_2_with_one_line(tmp_path, capsys):
    p = tmp_path / "e.ledger"
    pure_ledger(p)
    lines = p.read_bytes().split(b"\n")
    lines[2] = lines[2].replace(b'"round":1', b'"round":9')  # alter a record, keep its CRC
    p.write_bytes(b"\n".join(lines))
    assert main(["ledger", "verify", str(p)]) == 2
    err = capsys.readouterr().err
    assert "checksum" in err and len(err.strip().splitlines()) == 1
    code = main(["ledger", "verify", str(p), "--json"])
    assert code == 2 and json.loads(capsys.readouterr().out)["valid"] is False


@pytest.mark.parametrize("content,argv_extra,match", [
    (None, [], "cannot read"),                      # missing file
    (b"", [], "empty"),                             # empty file
    (b"hello\nworld\n", [], "header"),              # not a ledger
    ("ok", ["--delta", "2"], "delta"),              # delta outside (0, 1)
    ("ok", ["--accountant", "nope"], "accountant"),
])
def test_bad_input_exits_2(tmp_path, capsys, content, argv_extra, match):
    p = tmp_path / "f.ledger"
    if content == "ok":
        pure_ledger(p)
    elif content is not None:
        p.write_bytes(content)
    for action in ("verify", "show"):
        assert main(["ledger", action, str(p), *argv_extra]) == 2
        err = capsys.readouterr().err
        assert match in err and len(err.strip().splitlines()) == 1


def test_delta_required_for_approximate_dp_without_budget(tmp_path, capsys):
    p = _one_gaussian(tmp_path, 1.0)
    assert main(["ledger", "verify", str(p)]) == 2
    assert "--delta" in capsys.readouterr().err


def test_show_prints_records_and_spend(tmp_path, capsys):
    p = tmp_path / "g.ledger"
    pure_ledger(p, n=4)
    assert main(["ledger", "show", str(p), "--accountant", "basic"]) == 0
    out = capsys.readouterr().out
    assert out.count("laplace(scale=2, sensitivity=1)") == 4
    assert "party-0: epsilon 1" in out and "party-1: epsilon 1" in out
    assert "total: epsilon 2" in out


def test_cli_subprocess_no_traceback(tmp_path):
    p = tmp_path / "h.ledger"
    p.write_bytes(b"{not json\n{}\n")
    r = subprocess.run([sys.executable, "-m", "vflpriv", "ledger", "verify", str(p)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_budget_verdict_uses_the_best_accountant_not_the_reported_one(tmp_path, capsys):
    # 100 releases of Laplace(scale 100) (0.01-DP each): basic composition reports exactly 1.0,
    # above the budget 0.5, but advanced composition gives about 0.16 at delta = 1e-5, so the
    # releases fit the budget (the "best" accountant, as BudgetFilter uses, decides).
    p = tmp_path / "i.ledger"
    led = Ledger(p, budget={"epsilon": 0.5, "delta": 1e-5})
    for t in range(100):
        led.append(Laplace(scale=100.0), party="server", round=t)
    code, doc = run_json(["ledger", "verify", str(p), "--json", "--accountant", "basic"], capsys)
    assert doc["epsilon_spent"] == pytest.approx(1.0)
    assert doc["budget_accountant"] == "best" and doc["within_budget"] is True and code == 0


def test_closed_output_pipe_exits_quietly(tmp_path, monkeypatch):
    """`vflpriv ledger show FILE | head -1`: the reader closes the pipe after one line.  The
    command exits 141 (as if killed by SIGPIPE) without a traceback or an error line, and the
    ledger is untouched."""
    path = tmp_path / "big.jsonl"
    with monkeypatch.context() as m:              # the same file without 2000 fsyncs (~5 s)
        m.setattr(os, "fsync", lambda fd: None)
        pure_ledger(path, n=2000)                 # ~170 KB of output: more than a pipe buffer
    before = path.read_bytes()
    proc = subprocess.Popen([sys.executable, "-m", "vflpriv", "ledger", "show", str(path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141
    assert first.startswith(b"seq") and err == ""
    assert path.read_bytes() == before


def test_text_leads_with_the_verdict_and_what_the_budget_governs(tmp_path, capsys):
    """A per-party budget of 1.2 over 5 Laplace(2) releases (each 0.5-DP; basic composition,
    closed form): party-0 holds 3 (1.5 > 1.2), party-1 2 (1.0); the total 2.5 is not what the
    budget governs.  The line after the file's is the verdict, naming the governed spend."""
    p = tmp_path / "pp.ledger"
    pure_ledger(p, budget={"epsilon": 1.2, "delta": 1e-5, "per_party": True,
                           "accountant": "basic"}, n=5)
    assert main(["ledger", "verify", str(p)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == ("budget: epsilon=1.2 at delta=1e-05 for each party's own releases (basic "
                        "accountant): EXCEEDED; largest party spend 1.5 (party party-0)")
    assert lines[2] == ("epsilon spent: 2.5 at delta=1e-05 (basic accountant) (all parties "
                        "together; the budget is per party)")
    q = tmp_path / "total.ledger"
    pure_ledger(q, budget={"epsilon": 2.0, "delta": 1e-5, "accountant": "basic"}, n=3)
    assert main(["ledger", "verify", str(q)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == ("budget: epsilon=2 at delta=1e-05 for all releases together (basic "
                        "accountant): within budget; spent 1.5")
    assert len(lines) == 2          # the spend is the governed one: not repeated
