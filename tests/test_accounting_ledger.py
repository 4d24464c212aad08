"""The ledger: durable round trip, checksums, torn tails (crash mid-write) and the budget filter."""
import json
import math
import random

import pytest

from accounting import (BudgetExceeded, BudgetFilter, Composed, Gaussian, Laplace, Ledger,
                        LedgerCorrupt, PoissonSubsampledGaussian, PureDP, ReportNoisyMax,
                        SelfComposed, get_accountant, read_ledger)

EVENTS = [PureDP(0.1), Laplace(4.0, 0.5), ReportNoisyMax("gumbel", 8.0, 1.0),
          SelfComposed(Composed((PureDP(0.05), ReportNoisyMax("exponential", 20.0))), 3),
          PureDP(0.1)]


def _filled(tmp_path, n=len(EVENTS)):
    path = tmp_path / "run.ledger"
    led = Ledger(path, budget={"epsilon": 5.0, "delta": 1e-6}, run_id="run-1")
    for i, ev in enumerate(EVENTS[:n]):
        led.append(ev, party=f"p{i % 2}", round=i, note=f"release {i} \u03b5-budget \u2713")
    return path, led


def _line_starts(data: bytes):
    """Byte offsets where each line starts (line 0 = header)."""
    starts, pos = [], 0
    for line in data.split(b"\n")[:-1]:
        starts.append(pos)
        pos += len(line) + 1
    return starts


def test_round_trip(tmp_path):
    path, led = _filled(tmp_path)
    c = read_ledger(path)
    assert not c.torn_tail
    assert c.header["format"] == "vflpriv-ledger" and c.header["budget"] == {"epsilon": 5.0, "delta": 1e-6}
    assert [r.seq for r in c.records] == list(range(len(EVENTS)))
    assert [r.event for r in c.records] == EVENTS
    assert [r.party for r in c.records] == ["p0", "p1", "p0", "p1", "p0"]
    assert [r.round for r in c.records] == list(range(len(EVENTS)))
    assert all(r.run_id == "run-1" for r in c.records)
    assert c.records[2].note == "release 2 \u03b5-budget \u2713"
    # the spend is recomputed from the records: the composition of every release
    expected = get_accountant("rdp").epsilon(Composed(tuple(EVENTS)), 1e-6)
    assert c.spend(1e-6, accountant="rdp") == pytest.approx(expected, rel=1e-12)
    p0 = Composed((EVENTS[0], EVENTS[2], EVENTS[4]))
    assert c.spend(1e-6, accountant="optimal", party="p0") == pytest.approx(
        get_accountant("optimal").epsilon(p0, 1e-6), rel=1e-9)
    assert read_ledger(Ledger(tmp_path / "empty").path).spend(1e-6) == 0.0
    # each record is one JSON line with its CRC
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b"" and len(lines) == len(EVENTS) + 2
    assert all("crc" in json.loads(l) for l in lines[1:-1])


def test_reopening_continues_the_sequence(tmp_path):
    path, _ = _filled(tmp_path)
    led = Ledger(path, run_id="run-2")
    assert len(led.records) == len(EVENTS) and not led.repaired_torn_tail
    rec = led.append(Gaussian(3.0), party="server", round=9)
    assert rec.seq == len(EVENTS)
    c = read_ledger(path)
    assert [r.seq for r in c.records] == list(range(len(EVENTS) + 1))
    assert c.records[-1].run_id == "run-2" and c.records[0].run_id == "run-1"


def test_crc_detects_an_altered_record(tmp_path):
    path, _ = _filled(tmp_path)
    data = path.read_bytes()
    starts = _line_starts(data)
    for line in (2, len(starts) - 1):        # a middle record and the last (newline intact)
        # change the round number's digit: the record still parses but fails its CRC
        j = data.index(b'"round":', starts[line]) + len(b'"round":')
        altered = data[:j] + (b"7" if data[j:j + 1] != b"7" else b"8") + data[j + 1:]
        path.write_bytes(altered)
        with pytest.raises(LedgerCorrupt, match=f"line {line + 1}"):
            read_ledger(path)
        with pytest.raises(LedgerCorrupt):
            Ledger(path)
    path.write_bytes(data)
    assert len(read_ledger(path).records) == len(EVENTS)


def test_torn_last_record_at_every_byte_offset(tmp_path):
    path, _ = _filled(tmp_path)
    data = path.read_bytes()
    last = _line_starts(data)[-1]
    end_json = len(data) - 1             # position of the final newline
    n_before = len(EVENTS) - 1
    for cut in range(last + 1, end_json):
        path.write_bytes(data[:cut])
        c = read_ledger(path)
        assert c.torn_tail, cut
        assert c.torn_bytes == cut - last
        assert [r.event for r in c.records] == EVENTS[:n_before], cut     # earlier records intact
    # cut exactly at a record boundary: nothing torn, one record fewer
    path.write_bytes(data[:last])
    c = read_ledger(path)
    assert not c.torn_tail and len(c.records) == n_before
    # only the newline lost: the record itself is complete, checksummed, and read (counted)
    path.write_bytes(data[:end_json])
    c = read_ledger(path)
    assert not c.torn_tail and [r.event for r in c.records] == EVENTS


def test_torn_tail_is_repaired_on_reopen_and_the_sequence_continues(tmp_path):
    path, _ = _filled(tmp_path)
    data = path.read_bytes()
    last = _line_starts(data)[-1]
    path.write_bytes(data[:last + 17])
    led = Ledger(path)
    assert led.repaired_torn_tail and len(led.records) == len(EVENTS) - 1
    assert path.read_bytes() == data[:last]           # the torn bytes are cut, nothing else
    assert led.append(PureDP(0.7)).seq == len(EVENTS) - 1
    c = read_ledger(path)
    assert not c.torn_tail
    assert [r.event for r in c.records] == EVENTS[:-1] + [PureDP(0.7)]


def test_missing_final_newline_is_completed_before_appending(tmp_path):
    path, _ = _filled(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[:-1])
    led = Ledger(path)
    assert len(led.records) == len(EVENTS)
    led.append(PureDP(0.7))
    c = read_ledger(path)
    assert [r.event for r in c.records] == EVENTS + [PureDP(0.7)] and not c.torn_tail


def test_torn_header(tmp_path):
    path = tmp_path / "h.ledger"
    Ledger(path)
    header = path.read_bytes()
    for cut in (1, len(header) // 2, len(header) - 2):
        path.write_bytes(header[:cut])
        c = read_ledger(path)
        assert c.torn_tail and c.records == []
    led = Ledger(path)                       # rewrites the header and goes on
    led.append(PureDP(1.0))
    assert [r.event for r in read_ledger(path).records] == [PureDP(1.0)]


@pytest.mark.parametrize("damage", ["cut_middle_line", "drop_middle_line", "swap_lines",
                                    "garbage_line", "bad_last_with_newline", "bad_header"])
def test_corruption_before_the_last_record_raises(tmp_path, damage):
    path, _ = _filled(tmp_path)
    data = path.read_bytes()
    lines = data.split(b"\n")[:-1]
    if damage == "cut_middle_line":
        lines[2] = lines[2][:len(lines[2]) // 2]
    elif damage == "drop_middle_line":
        del lines[2]                          # sequence numbers no longer consecutive
    elif damage == "swap_lines":
        lines[2], lines[3] = lines[3], lines[2]
    elif damage == "garbage_line":
        lines.insert(3, b"not json")
    elif damage == "bad_last_with_newline":
        lines[-1] = lines[-1][:-5]            # complete line (newline written) but broken
    elif damage == "bad_header":
        lines[0] = b'{"format": "something-else", "version": 1}'
    path.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(LedgerCorrupt):
        read_ledger(path)
    with pytest.raises(LedgerCorrupt):
        Ledger(path)


def test_unreadable_or_empty_files(tmp_path):
    with pytest.raises(LedgerCorrupt):
        read_ledger(tmp_path / "missing")
    (tmp_path / "empty").write_bytes(b"")
    with pytest.raises(LedgerCorrupt, match="empty"):
        read_ledger(tmp_path / "empty")
    with pytest.raises(ValueError, match="event"):
        Ledger(tmp_path / "x").append({"kind": "pure_dp", "epsilon": 1.0})


# ------------------------------------------------------------------------ budget filter

def test_budget_filter_refuses_before_writing(tmp_path):
    led = Ledger(tmp_path / "b.ledger")
    filt = BudgetFilter(led, epsilon=1.0, delta=1e-5, accountant="basic")
    for _ in range(3):
        filt.charge(PureDP(0.3), party="server")
    before = (tmp_path / "b.ledger").read_bytes()
    with pytest.raises(BudgetExceeded) as info:
        filt.charge(PureDP(0.3), party="server")
    assert (tmp_path / "b.ledger").read_bytes() == before       # nothing recorded
    assert len(led.records) == 3
    assert info.value.spent == pytest.approx(0.9) and info.value.would_spend == pytest.approx(1.2)
    assert info.value.budget == (1.0, 1e-5)
    filt.charge(PureDP(0.1))                                     # what still fits is accepted
    assert read_ledger(tmp_path / "b.ledger").spend(1e-5, accountant="basic") == pytest.approx(1.0)


def test_budget_filter_with_best_uses_the_tightest_accountant(tmp_path):
    # 10 x 0.1-DP: basic says 1.0 > 0.995, the optimal composition says 0.99369 (fits)
    led = Ledger(tmp_path / "best.ledger")
    filt = BudgetFilter(led, epsilon=0.995, delta=1e-5)
    for _ in range(10):
        filt.charge(PureDP(0.1))
    assert filt.spent() == pytest.approx(0.99369118, abs=1e-6)
    with pytest.raises(BudgetExceeded):
        for _ in range(20):
            filt.charge(PureDP(0.1))
    assert len(led.records) == 10
    assert read_ledger(tmp_path / "best.ledger").spend(1e-5) <= 0.995


def test_accepted_spend_never_exceeds_the_budget(tmp_path):
    """Random streams of releases against the RDP filter: every refusal leaves the file as it
    was, and the spend recomputed from the file never passes the budget."""
    rng = random.Random(20240607)
    for trial in range(3):
        path = tmp_path / f"r{trial}.ledger"
        led = Ledger(path)
        budget = rng.choice([0.5, 1.0, 2.0])
        filt = BudgetFilter(led, epsilon=budget, delta=1e-6, accountant="rdp")
        refused = 0
        for _ in range(40):
            ev = rng.choice([PureDP(rng.uniform(0.01, 0.3)), Laplace(rng.uniform(2, 40)),
                             Gaussian(rng.uniform(2, 20)), ReportNoisyMax("gumbel", rng.uniform(5, 50)),
                             PoissonSubsampledGaussian(rng.uniform(0.8, 3), rng.uniform(0.001, 0.1))])
            before = path.read_bytes()
            try:
                filt.charge(ev, party="p", round=0)
            except BudgetExceeded as exc:
                refused += 1
                assert exc.would_spend > budget
                assert path.read_bytes() == before
        spend = read_ledger(path).spend(1e-6, accountant="rdp")
        assert spend <= budget
        assert refused > 0                     # the budget was actually reached
        assert filt.spent() == pytest.approx(spend, rel=1e-12)


def test_per_party_budgets(tmp_path):
    led = Ledger(tmp_path / "pp.ledger")
    local = BudgetFilter(led, epsilon=1.0, delta=1e-5, accountant="basic", per_party=True)
    for _ in range(2):
        local.charge(PureDP(0.5), party="alice")
    with pytest.raises(BudgetExceeded):
        local.charge(PureDP(0.5), party="alice")
    local.charge(PureDP(0.5), party="bob")          # bob has his own budget
    local.charge(PureDP(0.5), party="bob")
    assert local.spent("alice") == pytest.approx(1.0) and local.spent("bob") == pytest.approx(1.0)
    c = read_ledger(tmp_path / "pp.ledger")
    assert c.spend(1e-5, accountant="basic", party="alice") == pytest.approx(1.0)
    assert c.spend(1e-5, accountant="basic") == pytest.approx(2.0)
    # a shared filter on the same ledger sees 2.0 already spent and refuses anything
    shared = BudgetFilter(led, epsilon=1.5, delta=1e-5, accountant="basic")
    with pytest.raises(BudgetExceeded):
        shared.charge(PureDP(0.01), party="carol")


def test_budget_filter_rejects_bad_budgets(tmp_path):
    led = Ledger(tmp_path / "bad.ledger")
    for eps in (0.0, -1.0, math.nan, -math.inf, "1"):
        with pytest.raises(ValueError, match="epsilon"):
            BudgetFilter(led, eps, 1e-5)
    for d in (0.0, 1.0, math.nan):
        with pytest.raises(ValueError, match="delta"):
            BudgetFilter(led, 1.0, d)
    with pytest.raises(ValueError, match="unknown accountant"):
        BudgetFilter(led, 1.0, 1e-5, accountant="moments")
    # an infinite budget is explicit: everything is recorded
    unlimited = BudgetFilter(led, math.inf, 1e-5)
    unlimited.charge(PureDP(100.0))
    assert len(read_ledger(tmp_path / "bad.ledger").records) == 1
