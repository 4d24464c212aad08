"""Issue 13, items 1-2: the ledger under concurrent writers, and a header that cannot be edited.

Several processes charging one ledger at once must serialize (advisory lock held from the budget
check through the durable append): the sequence stays consecutive, `verify` accepts the file and
the spend never passes the budget.  The header carries a checksum: an edited budget is corruption.
"""
import fcntl
import json
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time

import pytest

from accounting import (BudgetExceeded, BudgetFilter, Ledger, LedgerCorrupt, PureDP,
                        read_ledger)
from accounting.ledger import LedgerBusy
from vflpriv.cli.main import main

# these tests fork this process: not while a deployment thread runs (conftest.py)
pytestmark = pytest.mark.usefixtures("deployments_done")
STEP = 0.125          # exact in binary: 16 releases make the budget 2.0 exactly


def _charger(path, n, q):
    led = Ledger(path)
    bf = BudgetFilter(led, 2.0, 1e-5, accountant="basic")
    ok = 0
    for i in range(n):
        try:
            bf.charge(PureDP(STEP), party="p", round=i)
            ok += 1
        except BudgetExceeded:
            pass
    q.put(ok)


def test_processes_charging_at_once_serialize_and_keep_the_budget(tmp_path):
    path = str(tmp_path / "shared.ledger")
    Ledger(path, budget={"epsilon": 2.0, "delta": 1e-5})
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=_charger, args=(path, 10, q)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    accepted = sum(q.get(timeout=5) for _ in procs)
    c = read_ledger(path)                                   # consecutive seq, every CRC valid
    assert accepted == len(c.records) == 16                 # 40 asked, exactly 16 fit
    assert c.spend(1e-5, accountant="basic") == pytest.approx(2.0, abs=1e-12)


def test_a_stale_ledger_object_sees_other_writers_before_charging(tmp_path):
    path = tmp_path / "l.ledger"
    a = Ledger(path, budget={"epsilon": 1.0, "delta": 1e-5})
    b = Ledger(path)
    bf_a = BudgetFilter(a, 1.0, 1e-5, accountant="basic")
    bf_b = BudgetFilter(b, 1.0, 1e-5, accountant="basic")
    bf_a.charge(PureDP(0.75))
    with pytest.raises(BudgetExceeded):       # b never saw a's record when it was opened
        bf_b.charge(PureDP(0.5))
    bf_b.charge(PureDP(0.25))
    assert [r.seq for r in read_ledger(path).records] == [0, 1]


def test_a_held_lock_makes_a_writer_wait_then_fail_clearly(tmp_path):
    path = tmp_path / "l.ledger"
    led = Ledger(path, lock_timeout=0.3)
    with open(path, "rb") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        t0 = time.monotonic()
        with pytest.raises(LedgerBusy, match="locked by another process"):
            led.append(PureDP(0.1))
        assert time.monotonic() - t0 >= 0.3
    led.append(PureDP(0.1))                    # released: goes through
    assert len(read_ledger(path).records) == 1


def test_two_writers_of_one_run_id_are_refused(tmp_path):
    path = tmp_path / "l.ledger"
    a = Ledger(path, run_id="r")
    b = Ledger(path, run_id="r")
    a.append(PureDP(0.1))
    with pytest.raises(LedgerBusy, match="two runs resumed"):
        b.append(PureDP(0.1))
    assert len(read_ledger(path).records) == 1


def _edit_header(path, fn):
    lines = path.read_bytes().split(b"\n")
    h = json.loads(lines[0])
    fn(h)
    lines[0] = json.dumps(h).encode()
    path.write_bytes(b"\n".join(lines))


@pytest.mark.parametrize("edit", [
    lambda h: h["budget"].update(epsilon=200.0),
    lambda h: h["budget"].update(epsilon="abc"),
    lambda h: h.pop("crc"),
])
def test_an_edited_header_is_corruption(tmp_path, edit, capsys):
    path = tmp_path / "l.ledger"
    Ledger(path, budget={"epsilon": 2.0, "delta": 1e-5}).append(PureDP(0.1))
    _edit_header(path, edit)
    with pytest.raises(LedgerCorrupt, match="header"):
        read_ledger(path)
    with pytest.raises(LedgerCorrupt):
        Ledger(path)
    assert main(["ledger", "verify", str(path)]) == 2
    assert "checksum" in capsys.readouterr().err


@pytest.mark.parametrize("budget, needle", [
    ('{"epsilon": NaN, "delta": 1e-5}', "nan"), ('{"epsilon": -2.0, "delta": 1e-5}', "-2.0"),
    ('{"epsilon": 2.0, "delta": 7}', "7"), ('"lots"', "lots")])
def test_nonsense_budgets_in_a_legacy_header_are_corruption(tmp_path, budget, needle, capsys):
    path = tmp_path / "l.ledger"
    path.write_text('{"format": "vflpriv-ledger", "version": 1, "created": 0, "budget": %s}\n'
                    % budget)
    with pytest.raises(LedgerCorrupt, match=needle):
        read_ledger(path)
    assert main(["ledger", "verify", str(path)]) == 2      # corruption, not "EXCEEDED" (1)
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and needle in err


def test_a_fifo_or_directory_is_not_a_ledger(tmp_path):
    import os
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(LedgerCorrupt, match="not a regular file"):
        Ledger(tmp_path / "fifo")
    with pytest.raises(LedgerCorrupt, match="not a regular file"):
        Ledger(tmp_path)


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN = [sys.executable, "-m", "vflpriv", "run", "--data", "synthetic:n=200,d=40,seed=1",
       "--parties", "2", "--feature-bound", "1", "--label-bound", "1", "--delta", "1e-5",
       "--iterations", "15", "--seed", "3"]


def test_concurrent_cli_runs_on_one_ledger_keep_it_valid_and_within_budget(tmp_path):
    """Three runs of epsilon 0.9 started at once on a budget of 2.0.  Each reserves its whole
    worst-case plan before its first release (issue 23), so a run that starts finishes (exit 0)
    and a run that does not fit is refused up front (exit 1, nothing recorded): never mid-run,
    as before reservations, when both passed the up-front check and the later one was then
    refused by a release."""
    ledger = tmp_path / "runs.ledger"
    Ledger(ledger, budget={"epsilon": 2.0, "delta": 1e-5})
    procs = [subprocess.Popen(RUN + ["--epsilon", "0.9", "--ledger", str(ledger)], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(3)]
    outs = [p.communicate(timeout=240) for p in procs]
    codes = sorted(p.returncode for p in procs)
    for (_, err), p in zip(outs, procs):
        assert "Traceback" not in err
        if p.returncode == 1:
            assert "before its first release" in err, err
    assert codes[0] == 0 and set(codes) <= {0, 1}, outs
    c = read_ledger(ledger)
    assert len({r.run_id for r in c.records}) == codes.count(0)   # refused runs recorded nothing
    assert c.live_reservations() == []                              # every run ended its own
    rc = subprocess.run([sys.executable, "-m", "vflpriv", "ledger", "verify", str(ledger),
                         "--json"], capture_output=True, text=True, cwd=ROOT)
    assert rc.returncode == 0, rc.stderr
    out = json.loads(rc.stdout)
    assert out["within_budget"] is True
    assert out["epsilon_spent"] <= 2.0 * (1 + 1e-9)


def test_resume_on_a_ledger_another_run_appended_to(tmp_path):
    """The checkpoint counts its own run's records, so other runs' records in between (a shared
    ledger) neither block the resume nor get mistaken for this run's pending releases."""
    import numpy as np

    from vflpriv.data import VerticalData, make_synthetic
    from vflpriv.vertical import solve

    A, y, _ = make_synthetic(n=80, d=16, seed=0)
    data = VerticalData.from_arrays(A, y, parties=2)
    kw = dict(epsilon=2.0, delta=1e-5, feature_bound=1.0, label_bound=1.0, iterations=5, seed=4)
    ref = solve(data, ledger=str(tmp_path / "ref.ledger"), **kw)

    class Stop(Exception):
        pass

    def stop_after_round_3(t, f):
        if t == 3:
            raise Stop
    led, ck = tmp_path / "shared.ledger", tmp_path / "c.npz"
    Ledger(led, budget={"epsilon": 3.0, "delta": 1e-5})      # room for the other run
    with pytest.raises(Stop):
        solve(data, ledger=str(led), checkpoint=str(ck), checkpoint_every=3,
              callback=stop_after_round_3, **kw)
    from vflpriv.vertical.checkpoint import read_checkpoint
    meta, _ = read_checkpoint(ck)
    assert meta["state"]["t"] == 3 and meta["run_records"] < len(read_ledger(led).records)
    Ledger(led).append(PureDP(0.01, neighboring="replace_one"), party="other", round=0)
    sol = solve(data, ledger=str(led), checkpoint=str(ck), resume=True, **kw)
    np.testing.assert_array_equal(sol.x, ref.x)
    c = read_ledger(led)
    run_id = sol.ledger.run_id
    mine = [(r.event, r.party, r.round, r.note) for r in c.records if r.run_id == run_id]
    assert mine == [(r.event, r.party, r.round, r.note) for r in read_ledger(
        tmp_path / "ref.ledger").records]
    assert sum(r.party == "other" for r in c.records) == 1


def test_two_resumes_of_one_checkpoint_at_once_never_spend_twice(tmp_path):
    run = RUN[:-4] + ["--iterations", "300", "--seed", "5", "--epsilon", "1"]
    ref, led, ck = tmp_path / "ref.ledger", tmp_path / "l.ledger", tmp_path / "c.npz"
    assert subprocess.run(run + ["--ledger", str(ref)], cwd=ROOT,
                          capture_output=True).returncode == 0
    p = subprocess.Popen(run + ["--ledger", str(led), "--checkpoint", str(ck),
                                "--checkpoint-every", "40", "--log-releases"], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in p.stdout:
        if line.startswith("released round") and int(line.split()[-1]) >= 60:
            break
    p.send_signal(signal.SIGKILL)
    p.communicate(timeout=30)
    resumes = [subprocess.Popen([sys.executable, "-m", "vflpriv", "run", "--resume", str(ck)],
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True) for _ in range(2)]
    outs = [r.communicate(timeout=240) for r in resumes]
    codes = sorted(r.returncode for r in resumes)
    assert codes[0] == 0 and set(codes) <= {0, 2}, outs
    for (_, err), code in zip(outs, [r.returncode for r in resumes]):
        assert "Traceback" not in err
        if code == 2:
            assert "two runs resumed" in err or "locked" in err, err
    key = lambda r: (r.party, r.round, r.note, r.event)  # noqa: E731
    assert [key(r) for r in read_ledger(led).records] == [key(r) for r in
                                                          read_ledger(ref).records]


def test_a_torn_line_left_by_a_crashed_writer_is_cut_under_the_lock(tmp_path):
    path = tmp_path / "l.ledger"
    a = Ledger(path)
    a.append(PureDP(0.1))
    with open(path, "ab") as fh:              # another process died mid-write
        fh.write(b'{"seq":1,"run_id":"x","par')
    a.append(PureDP(0.2))
    c = read_ledger(path)
    assert [r.event for r in c.records] == [PureDP(0.1), PureDP(0.2)] and not c.torn_tail
    assert a.repaired_torn_tail


def test_a_ledger_deleted_while_in_use_is_not_recreated(tmp_path):
    path = tmp_path / "l.ledger"
    a = Ledger(path)
    a.append(PureDP(0.1))
    path.unlink()
    with pytest.raises(LedgerCorrupt, match="cannot open ledger"):
        a.append(PureDP(0.1))
    assert not path.exists()


def test_another_writers_record_without_its_newline_is_kept(tmp_path):
    path = tmp_path / "l.ledger"
    a, b = Ledger(path), Ledger(path)
    a.append(PureDP(0.1))
    b.append(PureDP(0.2))
    path.write_bytes(path.read_bytes()[:-1])      # b crashed just before its newline
    a.append(PureDP(0.3))
    assert [r.event for r in read_ledger(path).records] == [PureDP(0.1), PureDP(0.2),
                                                             PureDP(0.3)]


def test_verify_refuses_a_fifo_instead_of_blocking(tmp_path, capsys):
    import os
    os.mkfifo(tmp_path / "fifo")
    assert main(["ledger", "verify", str(tmp_path / "fifo")]) == 2
    assert "not a regular file" in capsys.readouterr().err
