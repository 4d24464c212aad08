"""Progress bars (vflpriv.cli.progress): drawn on a terminal, silent otherwise and with --quiet;
Ctrl-C leaves a valid ledger, one line on stderr and exit code 130."""
import fcntl
import os
import pty
import signal
import struct
import subprocess
import sys
import termios
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPARSE = ["sparse", "--data", "gapminder", "--rounds", "30", "--tau", "2"]


def _on_terminal(args):
    """Run ``vflpriv ARGS`` with stdout and stderr on a 100 x 24 pseudo-terminal."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    env = {k: v for k, v in os.environ.items() if k != "VFLPRIV_NO_PROGRESS"}
    p = subprocess.Popen([sys.executable, "-m", "vflpriv", *args], cwd=ROOT, stdout=slave,
                         stderr=slave, stdin=subprocess.DEVNULL, env=env)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:          # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert p.wait(timeout=600) == 0, out
    return out.decode("utf-8", "replace")


def test_bar_on_a_terminal_and_finished_before_the_results():
    out = _on_terminal(SPARSE)
    assert "30/30" in out and "round/s" in out
    assert out.index("30/30") < out.index("objective")


def test_quiet_on_a_terminal():
    out = _on_terminal(SPARSE + ["--quiet"])
    assert "30/30" not in out and "\r" not in out.replace("\r\n", "")
    assert "objective" in out


def test_silent_when_not_a_terminal():
    r = subprocess.run([sys.executable, "-m", "vflpriv", *SPARSE], cwd=ROOT, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0 and r.stderr == "" and "\r" not in r.stdout


def test_ctrl_c_leaves_a_valid_ledger(tmp_path):
    ledger = tmp_path / "run.ledger"
    cmd = [sys.executable, "-m", "vflpriv", "run", "--data", "synthetic:n=300,d=500",
           "--algorithm", "dp-bcfw", "--epsilon", "1e6", "--delta", "1e-5", "--feature-bound",
           "1", "--label-bound", "1", "--iterations", "1000000", "--ledger", str(ledger)]
    # Ctrl-C as on a terminal: SIGINT at its default in the child.  A test run started in the
    # background (nohup, `cmd &` without job control, some CI runners) passes SIGINT on *ignored*;
    # Python then keeps ignoring it (as it should) and the million-round run would never stop.
    # (a Python that sets it and execs the command, same pid; not a preexec function: unsafe with
    # threads in this process)
    restore = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
               "os.execv(sys.executable, [sys.executable] + sys.argv[1:])")
    p = subprocess.Popen([sys.executable, "-c", restore] + cmd[1:], cwd=ROOT,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    # the event: the ledger holds a few releases (however long start-up takes on a loaded
    # machine); the deadline is only a safety net against a run that hangs
    deadline = time.monotonic() + 600
    while not (ledger.exists() and ledger.read_text().count("\n") >= 5):
        assert p.poll() is None, p.communicate()[1]
        assert time.monotonic() < deadline, "no 5 ledger lines in 600 s"
        time.sleep(0.02)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=600)
    assert p.returncode == 130
    lines = [ln for ln in err.splitlines() if ": warning:" not in ln]
    assert lines == ["vflpriv: interrupted"], err
    r = subprocess.run([sys.executable, "-m", "vflpriv", "ledger", "verify", str(ledger)],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "valid ledger" in r.stdout, r.stdout + r.stderr


def test_audit_reports_each_mechanism():
    from vflpriv.audit import registered, run_suite

    name = sorted(registered())[0]
    seen = []
    run_suite([name], samples=200, progress=seen.append)
    assert seen == [0]


@pytest.mark.parametrize("cmd", ["run", "sparse", "audit", "fedp3", "horizontal", "certify",
                                 "bench sparse"])
def test_every_command_has_quiet_and_help_shows_defaults(cmd):
    from vflpriv.cli.main import build_parser

    parser = build_parser()
    sub = parser._subparsers._group_actions[0].choices[cmd.split()[0]]
    if " " in cmd:
        sub = sub._subparsers._group_actions[0].choices[cmd.split()[1]]
    assert "--quiet" in sub._option_string_actions
    if cmd != "certify":                 # certify has no option with a default
        assert "default" in sub.format_help()


def test_help_shows_defaults_once():
    from vflpriv.cli.main import build_parser

    run = " ".join(build_parser()._subparsers._group_actions[0].choices["run"].format_help().split())
    assert "dp-bcfw-secure (the default)" in run and "--iterations ITERATIONS default: 100" in run
    assert "(default 2, or the shipped data set's own split)" in run   # said once, not twice


def test_ledger_header_records_the_accountant(tmp_path):
    import json

    ledger = tmp_path / "a.ledger"
    # pld cannot guard dp-bcfw-secure (its ring noise): the paper's algorithm, which it can
    r = subprocess.run([sys.executable, "-m", "vflpriv", "run", "--data", "synthetic:n=200,d=100",
                        "--algorithm", "dp-bcfw", "--epsilon", "1", "--delta", "1e-5",
                        "--feature-bound", "1", "--label-bound", "1", "--iterations", "3",
                        "--accountant", "PLD",
                        "--ledger", str(ledger)], cwd=ROOT, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    header = json.loads(ledger.read_text().splitlines()[0])
    assert header["budget"]["accountant"] == "pld"


@pytest.mark.parametrize("acc", ["basic", "advanced", "optimal"])
def test_run_refuses_an_accountant_that_cannot_guard_it_up_front(acc):
    r = subprocess.run([sys.executable, "-m", "vflpriv", "run", "--data", "no-such-file.csv",
                        "--epsilon", "1", "--delta", "1e-5", "--accountant", acc], cwd=ROOT,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1
    assert f"--accountant {acc} cannot guard --algorithm dp-bcfw" in r.stderr


def test_compare_calibration_prints():
    r = subprocess.run([sys.executable, "-m", "vflpriv", "run", "--data", "synthetic:n=200,d=100",
                        "--algorithm", "dp-bcfw", "--epsilon", "1", "--delta", "1e-5",
                        "--feature-bound", "1", "--label-bound", "1", "--iterations", "3",
                        "--compare-calibration"],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "calibration comparison" in r.stdout and "paper" in r.stdout


def test_certify_finds_the_shipped_examples_from_any_directory(tmp_path):
    env = {**os.environ, "PYTHONPATH": ROOT}
    out = {}
    for plan in ("vertical_selection", "vflpriv/examples/dpsgd.toml"):
        r = subprocess.run([sys.executable, "-m", "vflpriv", "certify", plan], cwd=tmp_path,
                           env=env, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0 and "CERTIFIED" in r.stdout, r.stderr
        out[plan] = r.stdout
    # the example's neighbours are the engine's (replace_one); the numbers docs quote are unchanged
    assert "neighboring = replace_one" in out["vertical_selection"]
    assert "4.345590" in out["vertical_selection"]


def test_printed_lines_never_land_on_the_bar_line():
    code = ("from vflpriv.cli.progress import Progress\n"
            "b = Progress(3, 'r')\n"
            "for t in range(3):\n"
            "    print('released', t); b(t)\n"
            "print('done')\n")
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    p = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=slave, stderr=slave,
                         stdin=subprocess.DEVNULL)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert p.wait(timeout=600) == 0
    text = out.decode("utf-8", "replace")
    for t in range(3):          # each printed line is whole, right after the bar was cleared
        assert f"\rreleased {t}\r\n" in text
    assert "3/3" in text and text.rstrip().endswith("done")
