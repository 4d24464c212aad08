"""Hostile input, table-driven (issue 32, "Hostile input"): numbers at the float limits, devices
and FIFOs, ledgers of another kind or already spent, signals.

Each row is a command, the exit code it must end with and words its stderr must contain (the bad
value, named).  Every row also checks: no traceback; for a refusal (exit 1 or 2) exactly one
message line (warnings aside), and no file under the test's folder created, changed or removed
(a ledger keeps its bytes: nothing was released, and it still verifies).  The commands run in
this process through ``vflpriv.cli.main.main``; only the signal rows start a process.

Rows that failed before the fixes (the audit's cases): ``--epsilon 1e309`` ran non-private
(exit 0); ``--epsilon -inf`` said "expected one argument"; ``--delta 1e-300`` said "could not
bracket"; ``--iterations`` / ``--clients`` of 1e9 ran for ever; a FIFO as data or plan hung and
``/dev/zero`` was read until memory ran out; ``certify`` looped on an exponential mechanism of
epsilon 1e-320; ``vflpriv sparse`` on a ``vflpriv run`` ledger appended past the budget and left
it unverifiable (exit 0); a ledger spent to its last 1e-9 ended in "could not bracket" (exit 2)
instead of the refusal (exit 1); ``bench utility --row-clip -1`` computed before refusing;
``flower node`` started on port 99999 and on a CA file that is no certificate; ``vflpriv
horizontal`` on a spent ledger refused every client every round and exited 0.
"""
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

import accounting as acc
from vflpriv.cli.main import main
from _files import snapshot as _snapshot, message_lines as _message_lines  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SYN = "synthetic:n=60,d=20,seed=0"
PRIV = ["--feature-bound", "1", "--label-bound", "1"]
RUN = ["run", "--data", SYN, "--parties", "2", "--iterations", "3", "--seed", "0", "--quiet"]
PRIVATE = RUN + ["--epsilon", "1", "--delta", "1e-5"] + PRIV
SPARSE = ["sparse", "--data", "synthetic-003:alpha=0.5,e=1.1,sparsity=3,seed=0,d=16,samples=20",
          "--clients", "3", "--rounds", "2", "--lr", "0.05", "--seed", "0", "--quiet"]
SPARSE_PRIVATE = SPARSE + ["--epsilon", "1", "--delta", "1e-5"]
HUGE = "1" + "0" * 30


# -- files the rows use ---------------------------------------------------------------------

def _fifo(tp):
    p = tp / "fifo"
    if not p.exists():
        os.mkfifo(p)
    return str(p)


def _file(tp, name, text):
    p = tp / name
    p.write_text(text)
    return str(p)


def _plan(tp, release, count=1000):
    return _file(tp, "plan.toml", f"delta = 1e-5\n[[release]]\n{release}\ncount = {count}\n")


@pytest.fixture(scope="module")
def run_ledger(tmp_path_factory):
    """A ledger written by `vflpriv run` (one shared budget, replace-one neighbours)."""
    p = tmp_path_factory.mktemp("run-ledger") / "l.jsonl"
    assert main(PRIVATE + ["--ledger", str(p)]) == 0
    return p


def _copy(src, tp, name="l.jsonl"):
    shutil.copy(src, tp / name)
    return str(tp / name)


def _spent(tp, left=1e-9, relation="replace_one", per_party=False):
    """A ledger whose spend is epsilon = 1 - ``left`` of its budget 1 (rdp, delta 1e-5)."""
    from scipy.optimize import brentq

    rdp = acc.get_accountant("rdp")
    scale = brentq(lambda s: rdp.epsilon(acc.Laplace(s, neighboring=relation), 1e-5) - (1 - left),
                   0.5, 10.0, xtol=1e-15)
    p = tp / "spent.jsonl"
    budget = {"epsilon": 1.0, "delta": 1e-5, "accountant": "rdp"}
    if per_party:
        budget["per_party"] = True
    led = acc.Ledger(p, budget=budget)
    for party in (["client-0", "client-1", "client-2"] if per_party else ["server"]):
        led.append(acc.Laplace(scale, neighboring=relation), party=party)
    return str(p)


def _sparse_ledger(tp):
    """A ledger written by a client-level `vflpriv sparse` run (add/remove neighbours)."""
    p = tp / "sparse.jsonl"
    assert main(SPARSE_PRIVATE + ["--privacy", "client", "--ledger", str(p)]) == 0
    return str(p)


def _mixed(tp):
    """A ledger as the old `vflpriv sparse` left a `vflpriv run` ledger: both relations."""
    p = tp / "mixed.jsonl"
    led = acc.Ledger(p, budget={"epsilon": 1.0, "delta": 1e-5})
    led.append(acc.Laplace(4.0, neighboring="replace_one"), party="server")
    led.append(acc.Laplace(4.0, neighboring="add_remove"), party="server")
    return str(p)


def _node(tp, data):
    return _file(tp, "node.toml", f'party = 0\ndata = "{data}"\n')


def _party_file(tp):
    (tp / "c.npz").write_bytes(b"x")
    return "c.npz"


def _key_pem(tp):
    from cryptography.hazmat.primitives import serialization as ser
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    pem = Ed25519PrivateKey.generate().private_bytes(ser.Encoding.PEM, ser.PrivateFormat.PKCS8,
                                                     ser.NoEncryption())
    (tp / "key.pem").write_bytes(pem)
    return str(tp / "key.pem")


# -- the table ------------------------------------------------------------------------------
# (id, argv or fn(tmp_path, run_ledger) -> argv, exit code, words stderr must contain)
ROWS = [
    # numbers at the float limits
    ("eps-1e309", RUN + ["--epsilon", "1e309", "--delta", "1e-5"] + PRIV, 2,
     ["'1e309'", "too large", "inf"]),
    ("eps-minus-1e309", RUN + ["--epsilon", "-1e309", "--delta", "1e-5"] + PRIV, 2, ["'-1e309'"]),
    ("eps-minus-inf", RUN + ["--epsilon", "-inf", "--delta", "1e-5"] + PRIV, 2, ["-inf"]),
    ("eps-nan", RUN + ["--epsilon", "nan", "--delta", "1e-5"] + PRIV, 2, ["nan"]),
    ("eps-minus-zero", RUN + ["--epsilon", "-0", "--delta", "1e-5"] + PRIV, 2,
     ["--epsilon", "'-0'"]),
    ("eps-subnormal", RUN + ["--epsilon", "1e-320", "--delta", "1e-5"] + PRIV, 2,
     ["--epsilon 1e-320"]),
    ("eps-subnormal-sparse", SPARSE + ["--epsilon", "1e-320", "--delta", "1e-5"], 2,
     ["--epsilon 1e-320", "--delta 1e-05"]),
    ("eps-minus-1e-3-sparse", SPARSE + ["--epsilon", "-1e-3", "--delta", "1e-5"], 2, ["-1e-3"]),
    ("eps-1e309-sparse", SPARSE + ["--epsilon", "1e309", "--delta", "1e-5"], 2, ["'1e309'"]),
    ("eps-1e309-horizontal", ["horizontal", "--epsilon", "1e309", "--rounds", "1"], 2,
     ["'1e309'"]),
    ("delta-1e-300", RUN + ["--epsilon", "1", "--delta", "1e-300"] + PRIV, 2,
     ["--delta 1e-300", "--epsilon 1"]),
    ("delta-1e-400-underflow", RUN + ["--epsilon", "1", "--delta", "1e-400"] + PRIV, 2,
     ["'1e-400'", "underflows"]),
    ("delta-minus-zero", RUN + ["--epsilon", "1", "--delta", "-0"] + PRIV, 2, ["-0.0"]),
    ("row-clip-subnormal-secure", RUN + ["--algorithm", "dp-bcfw-secure", "--epsilon", "1",
                                         "--delta", "1e-5", "--row-clip", "1e-320"] + PRIV, 2,
     ["--row-clip", "1e-320"]),
    ("split-subnormal", RUN + ["--epsilon", "1", "--delta", "1e-5", "--split", "1e-320"] + PRIV,
     2, ["--split 1e-320"]),
    ("ledger-expire-negative-duration", lambda tp, rl: [
        "ledger", "expire", _copy(rl, tp), "--older-than", "-1s"], 2, ["'-1s'"]),
    ("connect-timeout-nan", RUN + ["--algorithm", "bcfw", "--connect-timeout", "nan"], 2,
     ["--connect-timeout", "nan"]),
    ("lr-1e999-sparse", SPARSE + ["--lr", "1e999"], 2, ["--lr", "'1e999'"]),
    ("eta-1e999", RUN + ["--algorithm", "bcfw", "--eta", "1e999"], 2, ["--eta", "'1e999'"]),
    ("iterations-1e9", RUN + ["--algorithm", "bcfw", "--iterations", "1000000000"], 2,
     ["at most 1,000,000", "1,000,000,000"]),
    ("iterations-float-text", RUN + ["--algorithm", "bcfw", "--iterations", "1e9"], 2, ["'1e9'"]),
    ("iterations-huge-int", RUN + ["--algorithm", "bcfw", "--iterations", HUGE], 2,
     ["at most 1,000,000"]),
    ("clients-1e9-sparse", SPARSE + ["--clients", "1000000000"], 2,
     ["--clients", "at most 100,000"]),
    ("rounds-huge-sparse", SPARSE + ["--rounds", HUGE], 2, ["--rounds", "at most"]),
    ("clients-1e9-horizontal", ["horizontal", "--clients", "1000000000", "--rounds", "1"], 2,
     ["--clients", "at most 100,000"]),
    ("synthetic-d-huge-sparse", ["sparse", "--data", f"synthetic-003:d={HUGE}", "--rounds", "1"],
     2, ["clients x samples x d", " GB)"]),
    ("run-synthetic-n-1e11", RUN + ["--algorithm", "bcfw", "--data",
                                    "synthetic:n=100000000000,d=2000"], 2,
     ["100,000,000,000", "nonzeros"]),
    ("run-synthetic-n-1e29", RUN + ["--algorithm", "bcfw", "--data", f"synthetic:n={HUGE},d=20"],
     2, ["nonzeros"]),
    ("certify-exponential-1e-320", lambda tp, rl: ["certify", _plan(
        tp, 'mechanism = "exponential"\nepsilon = 1e-320')], 2, ["epsilon = 1e-320", "1e-15"]),
    ("certify-gumbel-tiny", lambda tp, rl: ["certify", _plan(
        tp, 'mechanism = "report_noisy_max"\nnoise = "gumbel"\nscale = 1e20')], 2,
     ["scale = 1e+20"]),
    ("certify-plan-1e309", lambda tp, rl: ["certify", _file(
        tp, "p.toml", 'delta = 1e-5\ntarget_epsilon = 1e309\n[[release]]\nmechanism = "laplace"'
        '\nscale = 1.0\n')], 2, ["p.toml", "1e309", "too large"]),
    ("certify-plan-1e-400", lambda tp, rl: ["certify", _file(
        tp, "p.toml", 'delta = 1e-400\n[[release]]\nmechanism = "laplace"\nscale = 1.0\n')], 2,
     ["1e-400", "underflows"]),
    ("certify-pure-dp-subnormal", lambda tp, rl: ["certify", _plan(
        tp, 'mechanism = "pure_dp"\nepsilon = 1e-320')], 0, []),
    ("bench-utility-row-clip-negative", ["bench", "utility", "--row-clip", "-1"], 2,
     ["--row-clip", "-1.0"]),
    ("bench-utility-eta-inf", ["bench", "utility", "--eta", "inf"], 2, ["--eta", "inf"]),
    # devices and FIFOs: refused by what they are, never opened
    ("run-data-fifo", lambda tp, rl: RUN + ["--algorithm", "bcfw", "--data", _fifo(tp)], 2,
     ["FIFO", "fifo"]),
    ("run-data-dev-zero", RUN + ["--algorithm", "bcfw", "--data", "/dev/zero"], 2,
     ["/dev/zero", "character device"]),
    # a consortium's own files (--party-data, vflpriv predict): refused before any read
    ("party-data-fifo", lambda tp, rl: ["run", "--party-data", f"0={_fifo(tp)}",
                                        "--party-data", "1=/dev/null", "--id", "id", "--label",
                                        "y", "--algorithm", "fw"], 2, ["FIFO"]),
    ("party-data-dev-zero", ["run", "--party-data", "0=/dev/zero", "--party-data", "1=/dev/zero",
                             "--id", "id", "--label", "y", "--algorithm", "fw"], 2,
     ["/dev/zero", "character device"]),
    ("party-data-index-huge", ["run", "--party-data", "99999999999999999999=a.csv",
                               "--party-data", "1=b.csv", "--id", "id", "--label", "y"], 2,
     ["party 0 has no file"]),
    ("party-data-no-equals", ["run", "--party-data", "a.csv", "--party-data", "1=b.csv",
                              "--id", "id", "--label", "y"], 2, ["'a.csv'", "I=FILE"]),
    ("predict-model-fifo", lambda tp, rl: ["predict", "--model", _fifo(tp), "--party-data",
                                           "0=a.csv", "--party-data", "1=b.csv", "--id", "id"],
     2, ["--model", "not a directory"]),
    ("sparse-data-fifo", lambda tp, rl: ["sparse", "--data", _fifo(tp), "--clients", "2"], 2,
     ["FIFO"]),
    ("sparse-data-dev-zero", ["sparse", "--data", "/dev/zero", "--clients", "2"], 2,
     ["/dev/zero", "not a regular file"]),
    ("certify-plan-fifo", lambda tp, rl: ["certify", _fifo(tp)], 2, ["fifo", "regular file"]),
    ("certify-plan-dev-zero", ["certify", "/dev/zero"], 2, ["/dev/zero", "regular file"]),
    ("run-resume-fifo", lambda tp, rl: ["run", "--resume", _fifo(tp)], 2, ["FIFO"]),
    ("ledger-verify-fifo", lambda tp, rl: ["ledger", "verify", _fifo(tp)], 2, ["regular file"]),
    ("run-ledger-fifo", lambda tp, rl: PRIVATE + ["--ledger", _fifo(tp)], 2, ["fifo"]),
    ("flower-node-config-fifo", lambda tp, rl: ["flower", "node", _fifo(tp), "--superlink",
                                                "127.0.0.1:9092", "--insecure"], 2, ["FIFO"]),
    ("flower-node-data-dev-zero", lambda tp, rl: ["flower", "node", _node(tp, "/dev/zero"),
                                                  "--superlink", "127.0.0.1:9092", "--insecure"],
     2, ["/dev/zero", "not a regular file"]),
    ("flower-node-port-99999", lambda tp, rl: ["flower", "node", _node(tp, _party_file(tp)),
                                               "--superlink", "127.0.0.1:99999", "--insecure"],
     2, ["99999", "1 to 65535"]),
    ("flower-node-port-word", lambda tp, rl: ["flower", "node", _node(tp, _party_file(tp)),
                                              "--superlink", "example.org:https",
                                              "--root-certificates", _key_pem(tp)], 2,
     ["'https'"]),
    ("flower-node-ca-not-a-certificate", lambda tp, rl: [
        "flower", "node", _node(tp, _party_file(tp)), "--superlink", "example.org:9092",
        "--root-certificates", _key_pem(tp)], 2, ["key.pem", "not a PEM certificate"]),
    ("flower-node-ca-fifo", lambda tp, rl: [
        "flower", "node", _node(tp, _party_file(tp)), "--superlink", "example.org:9092",
        "--root-certificates", _fifo(tp)], 2, ["--root-certificates", "FIFO"]),
    # ledgers of another kind, or spent
    ("sparse-record-on-run-ledger", lambda tp, rl: SPARSE_PRIVATE + [
        "--privacy", "record", "--ledger", _copy(rl, tp)], 2,
     ["one shared budget", "one budget per party"]),
    ("sparse-client-on-run-ledger", lambda tp, rl: SPARSE_PRIVATE + [
        "--privacy", "client", "--ledger", _copy(rl, tp)], 2,
     ["l.jsonl", "replace_one", "add_remove"]),
    ("run-on-sparse-ledger", lambda tp, rl: PRIVATE + ["--ledger", _sparse_ledger(tp)], 2,
     ["sparse.jsonl", "add_remove", "replace_one"]),
    ("ledger-verify-mixed", lambda tp, rl: ["ledger", "verify", _mixed(tp)], 2,
     ["mixed.jsonl", "1 under add_remove, 1 under replace_one"]),
    ("run-on-fully-spent-ledger", lambda tp, rl: PRIVATE + ["--ledger", _spent(tp)], 1,
     ["run refused before its first release", "1 spent", "remaining"]),
    ("secure-on-fully-spent-ledger", lambda tp, rl: PRIVATE + [
        "--algorithm", "dp-bcfw-secure", "--ledger", _spent(tp)], 1, ["remaining"]),
    ("dpfw-on-over-spent-ledger", lambda tp, rl: PRIVATE + [
        "--algorithm", "dpfw", "--ledger", _spent(tp, left=-1.0)], 1, ["2 spent", "0 remaining"]),
    ("sparse-on-spent-ledger", lambda tp, rl: SPARSE_PRIVATE + [
        "--privacy", "client", "--ledger", _spent(tp, relation="add_remove")], 1,
     ["run refused before its first release", "remaining"]),
    ("horizontal-on-spent-ledger", lambda tp, rl: [
        "horizontal", "--data", "synthetic", "--clients", "3", "--rounds", "2",
        "--participation", "1", "--epsilon", "1", "--delta", "1e-5", "--seed", "0", "--quiet",
        "--ledger", _spent(tp, relation="add_remove", per_party=True)], 1,
     ["no client's budget can pay one round", "remaining"]),
    ("sparse-asks-more-than-the-header", lambda tp, rl: SPARSE + [
        "--epsilon", "5", "--delta", "1e-5", "--privacy", "client",
        "--ledger", _spent(tp, left=0.1, relation="add_remove")], 1,
     ["the budget is epsilon=1 ", "remaining"]),
    ("sparse-record-on-spent-ledger", lambda tp, rl: SPARSE_PRIVATE + [
        "--privacy", "record", "--ledger", _spent(tp, relation="add_remove", per_party=True)], 1,
     ["client-0", "remaining"]),
]


@pytest.mark.parametrize("argv, code, words", [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_hostile_input(argv, code, words, tmp_path, run_ledger, capsys):
    if callable(argv):
        argv = argv(tmp_path, run_ledger)
    if argv[0] == "flower":
        pytest.importorskip("flwr")
    if argv[0] == "horizontal":
        pytest.importorskip("torch")
    capsys.readouterr()
    before = _snapshot(tmp_path)
    try:
        rc = main(argv)
    except SystemExit as exc:            # argparse's own errors
        rc = exc.code
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    assert rc == code, err
    for w in words:
        assert w in err, (w, err)
    if code:
        assert len(_message_lines(err)) == 1, err
        assert _snapshot(tmp_path) == before, "a file was created, changed or removed"
        for name in before:
            if name.endswith(".jsonl") and "mixed" not in name:   # the ledgers still verify
                rc = main(["ledger", "verify", str(tmp_path / name)])
                out = capsys.readouterr()
                assert rc in (0, 1) and "error" not in out.err, out.err


def test_sparse_refused_on_a_run_ledger_leaves_it_verifiable(tmp_path, run_ledger, capsys):
    """The audit's worst case, end to end: both sparse levels are refused, and `vflpriv ledger
    verify` still accepts the ledger with the spend it had (nothing appended)."""
    led = _copy(run_ledger, tmp_path)
    capsys.readouterr()
    assert main(["ledger", "verify", led, "--json"]) == 0
    before = json.loads(capsys.readouterr().out)
    for level in ("record", "client"):
        assert main(SPARSE_PRIVATE + ["--privacy", level, "--ledger", led]) == 2
    capsys.readouterr()
    assert main(["ledger", "verify", led, "--json"]) == 0
    after = json.loads(capsys.readouterr().out)
    assert after["valid"] is True and after["records"] == before["records"]
    assert after["epsilon_spent"] == before["epsilon_spent"] <= 1.0


def test_literal_inf_still_means_non_private(capsys):
    """Only 1e309 is refused: --epsilon inf spelled out is the documented non-private run."""
    assert main(RUN + ["--algorithm", "bcfw", "--epsilon", "inf"]) == 0
    assert math.isinf(float("inf"))
    assert "non-private" in capsys.readouterr().out


# -- signals --------------------------------------------------------------------------------
#: start the command once the interpreter is up: its own start-up (site, .pth files, runpy finding
#: the module: the first ~50 ms, and runpy's last step of well under 1 ms after 'up' is printed)
#: is Python's, before any vflpriv code can run; from there on Ctrl-C is vflpriv's to handle
# The child's command starts with a Python that sets SIGINT to its default and execs the real
# one (same pid), as under a terminal's Ctrl-C: a test run started in the background (nohup,
# `cmd &` without job control) passes SIGINT on ignored, and a Python started with SIGINT ignored
# keeps ignoring it.  (Not a preexec function: unsafe with threads in this process.)
SIGINT_DEFAULT = [sys.executable, "-c", "import os, signal, sys; "
                  "signal.signal(signal.SIGINT, signal.SIG_DFL); "
                  "os.execv(sys.executable, [sys.executable] + sys.argv[1:])"]


#: `python -m vflpriv` with its module found and compiled before 'up' (runpy's own search for
#: vflpriv.__main__ is Python's, and on a loaded machine it took more than 10 ms: a signal there
#: is not vflpriv's to handle); after 'up' only vflpriv's __main__ runs
STARTER = ("import sys, vflpriv, importlib.util; "
           "spec = importlib.util.find_spec('vflpriv.__main__'); "
           "code = spec.loader.get_code('vflpriv.__main__'); "
           "sys.argv[0] = spec.origin; "
           "sys.stdout.write('up\\n'); sys.stdout.flush(); "
           "exec(code, {'__name__': '__main__', '__spec__': spec, '__file__': spec.origin})")


@pytest.mark.slow
def test_ctrl_c_during_start_up_is_one_line_exit_130():
    """SIGINT at 10 ms to 0.3 s after the interpreter is up (imports of numpy/scipy, option parsing,
    loading the data, the run): exit 130 and `vflpriv: interrupted`, never a traceback.  (A
    process that Python ends by re-raising SIGINT on itself, return code -2, is what a shell
    reports as 130 too; 0: the run had finished.)"""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    interrupted = 0
    for delay in (0.01, 0.02, 0.05, 0.1, 0.2, 0.3):
        p = subprocess.Popen(SIGINT_DEFAULT + ["-c", STARTER] + RUN + ["--algorithm", "bcfw"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                             cwd=ROOT)
        assert p.stdout.readline() == "up\n"
        time.sleep(delay)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=600)
        assert "Traceback" not in err, (delay, err)
        assert p.returncode in (0, 130, -signal.SIGINT), (delay, p.returncode, err)
        if p.returncode == 130:
            assert err.strip().splitlines()[-1] == "vflpriv: interrupted", (delay, err)
        if p.returncode:          # -SIGINT: Python re-raised the signal on itself, no message
            interrupted += 1
    assert interrupted >= 3, "the signals must land before the run ends"


def _children(pid):
    """Pids whose parent is ``pid`` (from /proc)."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                out.append(int(name))
    return out


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_flower_node_leaves_no_superexec_behind(tmp_path, sig):
    """`vflpriv flower node` stopped (SIGTERM, Ctrl-C) while its SuperNode waits for a SuperLink
    that is not there: the SuperNode and the flower-superexec it started are gone afterwards
    (they run in their own process group, which vflpriv ends however it stops)."""
    pytest.importorskip("flwr")
    import socket

    with socket.socket() as s:           # a free port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    node = _node(tmp_path, _party_file(tmp_path))
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.Popen(SIGINT_DEFAULT + ["-m", "vflpriv", "flower", "node", node, "--superlink",
                                           f"127.0.0.1:{port}", "--insecure"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
                         cwd=ROOT)
    family = []
    deadline = time.monotonic() + 600    # the event: a SuperNode with its SuperExec child;
    while time.monotonic() < deadline:   # the deadline is only a net against a hang
        supernodes = _children(p.pid)
        family = supernodes + [c for s in supernodes for c in _children(s)]
        if len(family) >= 2 or p.poll() is not None:
            break
        time.sleep(0.1)
    assert len(family) >= 2, ("no SuperNode with a SuperExec child", p.poll())
    p.send_signal(sig)
    _, err = p.communicate(timeout=600)
    assert "Traceback" not in err, err
    deadline = time.monotonic() + 120    # gone (an event); the deadline is a net
    while any(_alive(q) for q in family) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(q) for q in family), [q for q in family if _alive(q)]


def test_budget_filter_refuses_another_relation_before_writing(tmp_path):
    """The accountant's own guard, through the API: a charge or a plan under another relation
    than the ledger's releases raises ValueError naming both, and the file keeps its bytes; the
    same relation is charged as usual."""
    p = tmp_path / "l.jsonl"
    led = acc.Ledger(p, budget={"epsilon": 10.0, "delta": 1e-5})
    bf = acc.BudgetFilter(led, 10.0, 1e-5, accountant="rdp")
    bf.charge(acc.Laplace(4.0, neighboring="replace_one"))
    before = p.read_bytes()
    other = acc.Laplace(4.0, neighboring="add_remove")
    for attempt in (lambda: bf.charge(other), lambda: bf.check_plan(acc.SelfComposed(other, 3))):
        with pytest.raises(ValueError, match="replace_one.*add_remove"):
            attempt()
        assert p.read_bytes() == before
    bf.charge(acc.Laplace(8.0, neighboring="replace_one"))
    assert len(acc.read_ledger(p).records) == 2
