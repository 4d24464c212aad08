"""Reservations in the ledger (issue 23, part 2).

A run writes its whole worst-case plan as a reservation under the lock before its first release;
other runs' checks count it; releases inside it are always allowed; the unused part is released
when the run ends (also on exceptions); a crash leaves it for `vflpriv ledger release/expire`.
Budgets here use the ``basic`` accountant with releases of 0.125 (exact in binary), so which runs
fit is a count, and the spend is recomputed by the accountant from the file.
"""
import json
import multiprocessing as mp
import os
import signal
import time

import pytest

from accounting import (BudgetExceeded, BudgetFilter, Gaussian, Ledger, PureDP, ReportNoisyMax,
                        SelfComposed, read_ledger)
from accounting.ledger import dominates, ends_reservations
from vflpriv.cli.main import main

# these tests fork this process: not while a deployment thread runs (conftest.py)
pytestmark = pytest.mark.usefixtures("deployments_done")
STEP = 0.125
PLAN = SelfComposed(PureDP(STEP), 4)          # one run: 4 releases, epsilon 0.5 by basic


def _run(path, barrier, q, pause):
    """One run: up-front check (which reserves), then its 4 releases, then the end."""
    led = Ledger(path)
    bf = BudgetFilter(led, 2.0, 1e-5, accountant="basic")

    @ends_reservations
    def body():
        try:
            bf.check_plan(PLAN)
        except BudgetExceeded:
            return "refused"
        for i in range(4):
            time.sleep(pause)              # interleave with the other runs' releases
            bf.charge(PureDP(STEP), party="p", round=i)
        return "finished"

    barrier.wait(30)
    try:
        q.put(body())
    except BudgetExceeded:
        q.put("refused mid-run")


def test_runs_started_at_once_either_finish_or_are_refused_up_front(tmp_path):
    """7 runs of 0.5 on a budget of 2.0, all released at one barrier: exactly 4 start and all of
    them finish, 3 are refused before any release, and the ledger spends exactly 2.0."""
    path = str(tmp_path / "shared.ledger")
    Ledger(path, budget={"epsilon": 2.0, "delta": 1e-5})
    ctx = mp.get_context("fork")
    q, barrier = ctx.Queue(), ctx.Barrier(7)
    procs = [ctx.Process(target=_run, args=(path, barrier, q, 0.01 * (i % 3)))
             for i in range(7)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    outcomes = sorted(q.get(timeout=5) for _ in procs)
    assert outcomes == ["finished"] * 4 + ["refused"] * 3
    c = read_ledger(path)
    assert len(c.records) == 16 and len(c.reservations) == 4 and len(c.ends) == 4
    assert c.live_reservations() == []
    assert c.spend(1e-5, accountant="basic") == pytest.approx(2.0, abs=1e-12)
    assert c.spend(1e-5, accountant="best") <= 2.0 + 1e-12


def test_a_release_outside_the_plan_counts_other_reservations(tmp_path):
    path = tmp_path / "l.ledger"
    a = Ledger(path, budget={"epsilon": 1.0, "delta": 1e-5})
    b = Ledger(path)
    fa = BudgetFilter(a, 1.0, 1e-5, accountant="basic")
    fb = BudgetFilter(b, 1.0, 1e-5, accountant="basic")
    fa.check_plan(PLAN)                                    # a holds 0.5
    with pytest.raises(BudgetExceeded, match="held by other runs' reservations"):
        fb.check_plan(SelfComposed(PureDP(STEP), 5))       # 0.625 does not fit next to it
    for _ in range(4):                                     # b's unplanned releases: 0.5 fit
        fb.charge(PureDP(STEP))
    with pytest.raises(BudgetExceeded):
        fb.charge(PureDP(STEP))
    for i in range(4):                                     # a's reserved releases always fit
        fa.charge(PureDP(STEP), round=i)
    assert read_ledger(path).spend(1e-5, accountant="basic") == pytest.approx(1.0)


def test_the_unused_part_is_released_when_the_run_ends_even_by_an_exception(tmp_path):
    path = tmp_path / "l.ledger"
    led = Ledger(path, budget={"epsilon": 1.0, "delta": 1e-5})
    bf = BudgetFilter(led, 1.0, 1e-5, accountant="basic")

    @ends_reservations
    def failing_run():
        bf.check_plan(SelfComposed(PureDP(STEP), 8))      # the whole budget
        bf.charge(PureDP(STEP))
        raise RuntimeError("the run failed after one release")

    with pytest.raises(RuntimeError):
        failing_run()
    other = BudgetFilter(Ledger(path), 1.0, 1e-5, accountant="basic")
    other.check_plan(SelfComposed(PureDP(STEP), 7))        # the 7 unused units are free again
    c = read_ledger(path)
    assert len(c.ends) == 1 and len(c.live_reservations()) == 1


def test_smaller_releases_spend_a_dominating_reservation(tmp_path):
    """A round that releases fewer features than its worst case (a Gaussian of smaller mu) is
    inside the reservation of the larger Gaussian: Gaussians are held as a pool of mu^2 (their
    composition is exact), so 3 reserved Gaussians of mu 0.1 cover 12 of mu 0.05, and no more."""
    assert dominates(Gaussian(2.0, 2.0), Gaussian(2.0, 1.0))
    assert not dominates(Gaussian(2.0, 1.0), Gaussian(2.0, 2.0))
    assert not dominates(PureDP(0.1), Gaussian(1.0))
    led = Ledger(tmp_path / "l.ledger", budget={"epsilon": 1.0, "delta": 1e-5})
    bf = BudgetFilter(led, 1.0, 1e-5)
    bf.check_plan(SelfComposed(Gaussian(20.0, 2.0), 3))
    assert bf.within_reservation(Gaussian(20.0, 1.0))
    assert not bf.within_reservation(Gaussian(20.0, 4.0))       # mu 0.2 > what is held
    for _ in range(12):
        assert bf.within_reservation(Gaussian(20.0, 1.0))
        bf.charge(Gaussian(20.0, 1.0))
    assert not bf.within_reservation(Gaussian(20.0, 1.0))
    assert led.remaining(led.run_id) == {}
    rl = Ledger(tmp_path / "l.ledger", budget={"epsilon": 1.0, "delta": 1e-5})
    led2 = BudgetFilter(rl, 1.0, 1e-5)
    led2.check_plan(ReportNoisyMax("laplace", 20.0))
    assert led2.within_reservation(ReportNoisyMax("laplace", 40.0))      # dominated
    assert not led2.within_reservation(ReportNoisyMax("gumbel", 40.0))   # another mechanism


def _crash(path, q):
    led = Ledger(path)
    BudgetFilter(led, 1.0, 1e-5, accountant="basic").check_plan(SelfComposed(PureDP(STEP), 8))
    q.put(led.run_id)
    time.sleep(60)                                       # killed here, reservation held


def test_a_crash_leaves_a_reservation_that_the_cli_shows_and_releases(tmp_path, capsys):
    path = str(tmp_path / "l.ledger")
    Ledger(path, budget={"epsilon": 1.0, "delta": 1e-5})
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_crash, args=(path, q))
    p.start()
    run_id = q.get(timeout=30)
    os.kill(p.pid, signal.SIGKILL)
    p.join(10)
    with pytest.raises(BudgetExceeded):                  # the dead run still holds the budget
        BudgetFilter(Ledger(path), 1.0, 1e-5, accountant="basic").check_plan(PureDP(STEP))
    assert main(["ledger", "show", path]) == 0
    assert run_id in capsys.readouterr().out
    assert main(["ledger", "verify", path, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["reservations"][0]["run_id"] == run_id
    size = os.path.getsize(path)
    assert main(["ledger", "release", path, "no-such-run"]) == 2     # bad input: one line
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no-such-run" in err[0] and os.path.getsize(path) == size
    assert main(["ledger", "release", path, run_id[:8]]) == 0
    assert read_ledger(path).live_reservations() == []
    BudgetFilter(Ledger(path), 1.0, 1e-5, accountant="basic").check_plan(PureDP(STEP))


def test_expire_older_than(tmp_path, capsys):
    path = str(tmp_path / "l.ledger")
    led = Ledger(path, budget={"epsilon": 1.0, "delta": 1e-5})
    BudgetFilter(led, 1.0, 1e-5, accountant="basic").check_plan(PLAN)
    size = os.path.getsize(path)
    assert main(["ledger", "expire", path, "--older-than", "abc"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'abc'" in err[0] and os.path.getsize(path) == size
    assert main(["ledger", "expire", path, "--older-than", "1h"]) == 0
    assert "expired 0" in capsys.readouterr().out
    assert main(["ledger", "expire", path, "--older-than", "0s"]) == 0
    assert read_ledger(path).live_reservations() == []


def test_an_old_ledger_without_reservations_still_loads(tmp_path):
    """A version-2 ledger (no reservation lines) reads and continues as before."""
    import zlib

    def crc(obj):
        return format(zlib.crc32(json.dumps(obj, sort_keys=True, separators=(",", ":"))
                                 .encode()) & 0xFFFFFFFF, "08x")

    header = {"format": "vflpriv-ledger", "version": 2, "created": 1.0,
              "budget": {"epsilon": 1.0, "delta": 1e-5}}
    header["crc"] = crc(header)
    rec = {"seq": 0, "run_id": "old", "party": "p", "round": 0, "time": 1.0,
           "event": PureDP(STEP).to_dict(), "note": ""}
    rec["crc"] = crc(rec)
    path = tmp_path / "v2.ledger"
    path.write_text(json.dumps(header) + "\n" + json.dumps(rec) + "\n")
    c = read_ledger(path)
    assert len(c.records) == 1 and c.reservations == []
    bf = BudgetFilter(Ledger(path), 1.0, 1e-5, accountant="basic")
    bf.check_plan(SelfComposed(PureDP(STEP), 7))
    with pytest.raises(BudgetExceeded):
        BudgetFilter(Ledger(path), 1.0, 1e-5, accountant="basic").check_plan(PureDP(STEP))


def test_per_party_budgets_reserve_per_party(tmp_path):
    """On a ledger with one budget per party (local DP), client-0's releases are covered by
    client-0's reservation only."""
    led = Ledger(tmp_path / "l.ledger",
                 budget={"epsilon": 1.0, "delta": 1e-5, "per_party": True})
    bf = BudgetFilter(led, 1.0, 1e-5, accountant="basic", per_party=True)
    bf.check_plan(SelfComposed(PureDP(STEP), 2), party="client-0")
    bf.check_plan(SelfComposed(PureDP(STEP), 8), party="client-1")
    for _ in range(2):
        assert bf.within_reservation(PureDP(STEP), party="client-0")
        bf.charge(PureDP(STEP), party="client-0")
    assert not bf.within_reservation(PureDP(STEP), party="client-0")
    assert bf.within_reservation(PureDP(STEP), party="client-1")
