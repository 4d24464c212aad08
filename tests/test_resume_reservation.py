"""A resumed run takes over its run's live reservation and ends it (issue 35, item 1).

A run killed with SIGKILL leaves its reservation live (nothing ran to end it).  Its resume opens
the ledger under the same run id; whether or not the resume has a remaining plan to check and
re-reserve (killed after its first checkpoint: yes; after its last: nothing remains), the
reservation must end with the resumed run, so `vflpriv ledger verify` then lists none.  Before the
fix a resume killed after its last checkpoint left "1 live reservation(s)" behind.

The kill is a real SIGKILL that the run sends itself at a fixed point (right after its first
checkpoint is on disk, or when it would end its reservation: after its last checkpoint), so the
moment does not depend on the machine's speed.
"""
import json
import os
import signal
import subprocess
import sys

import pytest

from vflpriv.cli.main import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: the run kills itself: after the first checkpoint written, or instead of ending its reservation
#: (after its last checkpoint)
KILLER = """
import os, signal, sys
import accounting.ledger as L
import vflpriv.vertical.checkpoint as C
point = sys.argv[1]
write = C.write_checkpoint
def write_then_die(*a, **k):
    write(*a, **k)
    if point == "first":
        os.kill(os.getpid(), signal.SIGKILL)
C.write_checkpoint = write_then_die
if point == "last":
    L.Ledger.close_reservation = lambda self, *a, **k: os.kill(os.getpid(), signal.SIGKILL)
from vflpriv.cli.main import main
main(sys.argv[2:])
"""

ALGORITHMS = {
    "dp-bcfw": [],
    "dp-bcfw-secure": [],
    "dp-bcfw-secure-logistic": ["--loss", "logistic", "--logistic-path", "glm"],  # rounds
}


def _run_argv(algorithm, tmp_path):
    algo = algorithm.replace("-logistic", "")
    return (["run", "--data", "synthetic:n=120,d=12,seed=0", "--parties", "2", "--algorithm", algo,
             "--epsilon", "2", "--delta", "1e-5", "--feature-bound", "1", "--label-bound", "1",
             "--iterations", "4", "--seed", "3", "--quiet", "--ledger", str(tmp_path / "l.jsonl"),
             "--checkpoint", str(tmp_path / "c.npz")] + ALGORITHMS[algorithm])


def _reservations(ledger, capsys):
    capsys.readouterr()
    assert main(["ledger", "verify", str(ledger), "--json"]) == 0
    v = json.loads(capsys.readouterr().out)
    assert v["valid"] is True, v
    return v["reservations"]


@pytest.mark.slow
@pytest.mark.parametrize("point", ["first", "last"])
@pytest.mark.parametrize("algorithm", list(ALGORITHMS))
def test_resume_ends_the_killed_runs_reservation(algorithm, point, tmp_path, capsys):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", KILLER, point] + _run_argv(algorithm, tmp_path),
                       capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    assert r.returncode == -signal.SIGKILL, r.stderr
    # the killed run's reservation is live (else this test would check nothing)
    live = _reservations(tmp_path / "l.jsonl", capsys)
    assert len(live) == 1, live
    assert main(["run", "--resume", str(tmp_path / "c.npz"), "--quiet"]) == 0
    assert _reservations(tmp_path / "l.jsonl", capsys) == []
