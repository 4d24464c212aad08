"""Caps on what an event description can make the accountant do (issue 53, item 2): nesting
depth (accounting.events.MAX_NESTING), a self-composition's count (MAX_COUNT) and a private
selection's expected number of runs (MAX_SELECTIONS), enforced by the events themselves, so a
plan, ``certify``, a ledger read and a run on that ledger refuse alike, naming the cap, and
nothing hangs or ends in a RecursionError line."""
import contextlib
import io
import json
import signal

import pytest

import accounting.events as E
from accounting.events import (Composed, Gaussian, PrivateSelection, SelfComposed,
                               event_from_dict)
from accounting.ledger import _crc
from vflpriv.cli.main import main

G = Gaussian(2.0)


@contextlib.contextmanager
def _within(seconds):
    """Fail instead of hanging: SIGALRM after ``seconds``."""
    def boom(*_):
        raise TimeoutError(f"took over {seconds} s")

    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _nested(depth, leaf=None):
    d = leaf or G.to_dict()
    for _ in range(depth):
        d = {"kind": "composed", "events": [d]}
    return d


def test_nesting_is_capped_when_built():
    e = G
    for _ in range(E.MAX_NESTING):
        e = Composed((e,))
    assert E.nesting(e) == E.MAX_NESTING
    with pytest.raises(ValueError, match=r"accounting\.events\.MAX_NESTING"):
        SelfComposed(e, 2)
    with pytest.raises(ValueError, match=r"MAX_NESTING"):
        PrivateSelection(e, "poisson", mu=2.0)


@pytest.mark.parametrize("depth", [E.MAX_NESTING + 1, 400, 5000, 100000])
def test_nesting_is_capped_when_read(depth):
    """A description nested deeper than the cap is refused before it is rebuilt (5000 levels
    ended in RecursionError)."""
    with _within(20), pytest.raises(ValueError, match=r"MAX_NESTING") as exc:
        event_from_dict(_nested(depth))
    assert "recursion" not in str(exc.value)
    assert event_from_dict(_nested(E.MAX_NESTING)) == event_from_dict(_nested(E.MAX_NESTING))


def test_self_composed_count_is_capped():
    assert SelfComposed(G, E.MAX_COUNT).count == E.MAX_COUNT
    with pytest.raises(ValueError, match=r"accounting\.events\.MAX_COUNT"):
        SelfComposed(G, 10 ** 30)
    with pytest.raises(ValueError, match=r"MAX_COUNT"):
        event_from_dict({"kind": "self_composed", "event": G.to_dict(), "count": 10 ** 30})


@pytest.mark.parametrize("stop", [dict(stopping="poisson", mu=1e300),
                                  dict(stopping="truncated_negative_binomial", eta=1.0,
                                       gamma=1e-300),
                                  dict(stopping="truncated_negative_binomial", eta=3.0,
                                       gamma=1e-7)])
def test_selection_count_is_capped(stop):
    with pytest.raises(ValueError, match=r"accounting\.events\.MAX_SELECTIONS"):
        PrivateSelection(G, **stop)
    # at the cap it is still accepted
    assert PrivateSelection(G, "poisson", mu=float(E.MAX_SELECTIONS)).expected_count == \
        pytest.approx(E.MAX_SELECTIONS)


def _run(argv, capsys):
    capsys.readouterr()
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code
    out = capsys.readouterr()
    return rc, out.err


def test_certify_refuses_a_selection_over_the_cap(tmp_path, capsys):
    plan = tmp_path / "plan.toml"
    plan.write_text('delta = 1e-5\n[[release]]\nmechanism = "private_selection"\n'
                    'stopping = "poisson"\nmu = 1e300\n[[release.base]]\n'
                    'mechanism = "gaussian"\nsigma = 2.0\n')
    with _within(20):
        rc, err = _run(["certify", str(plan)], capsys)
    assert rc == 2 and "MAX_SELECTIONS" in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err


RUN = ["run", "--data", "synthetic:n=60,d=6,seed=1", "--parties", "2", "--feature-bound", "1",
       "--label-bound", "1", "--iterations", "2", "--seed", "1", "--epsilon", "0.5", "--delta",
       "1e-5", "--quiet"]


@pytest.fixture(scope="module")
def ledger_lines(tmp_path_factory):
    path = tmp_path_factory.mktemp("led") / "L.ledger"
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        assert main(RUN + ["--ledger", str(path)]) in (0, None), sink.getvalue()
    return path.read_text().splitlines()


def _edited(lines, event):
    """The ledger with its third line's event replaced, the checksum made valid again."""
    rec = json.loads(lines[2])
    assert "event" in rec
    rec.pop("crc")
    rec["event"] = "@EVENT@"
    rec["crc"] = "@CRC@"
    text = json.dumps(rec, sort_keys=True, separators=(",", ":"))
    ev = _text(event)
    body = json.loads(lines[2])
    body.pop("crc")
    body["event"] = event
    try:
        crc = _crc(body)
    except RecursionError:            # too deep for the encoder: the checksum cannot match
        crc = "00000000"
    line = text.replace('"@EVENT@"', ev).replace("@CRC@", crc)
    return lines[:2] + [line] + lines[3:]


def _text(event):
    """Canonical JSON of ``event``, deep chains of composed written without recursion."""
    depth = 0
    while isinstance(event, dict) and event.get("kind") == "composed" \
            and len(event["events"]) == 1:
        event, depth = event["events"][0], depth + 1
    inner = json.dumps(event, sort_keys=True, separators=(",", ":"))
    return '{"events":[' * depth + inner + '],"kind":"composed"}' * depth


HUGE = {
    "deep-40": _nested(40),
    "deep-300": _nested(300),
    "deep-5000": _nested(5000),
    "count-1e30": {"kind": "self_composed", "event": G.to_dict(), "count": 10 ** 30},
    "selection-mu-1e300": {"kind": "private_selection", "base": G.to_dict(),
                           "stopping": "poisson", "mu": 1e300},
}


@pytest.mark.parametrize("name", sorted(HUGE))
def test_an_edited_ledger_is_refused_by_verify_and_by_a_run(name, ledger_lines, tmp_path,
                                                            capsys):
    path = tmp_path / "E.ledger"
    path.write_text("\n".join(_edited(ledger_lines, HUGE[name])) + "\n")
    before = path.read_bytes()
    cap = "MAX_NESTING" if name.startswith("deep") else (
        "MAX_COUNT" if name.startswith("count") else "MAX_SELECTIONS")
    for argv in (["ledger", "verify", str(path)], RUN + ["--ledger", str(path)]):
        with _within(60):
            rc, err = _run(argv, capsys)
        assert rc == 2, (argv[0], err)
        assert "Traceback" not in err and "recursion" not in err.lower(), err
        assert "line 3" in err and cap in err, err
        assert path.read_bytes() == before
