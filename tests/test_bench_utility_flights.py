"""`vflpriv bench utility --data flights`: a row per (n, algorithm, epsilon) with the gap removed
recomputed from its own objectives, the label at party 0 for dp-bcfw-secure, the rows a seeded
subsample; bad n exits 2 before any fit."""
import json
import os

import pytest

from _cli import vflpriv

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _bench(*args):
    """``vflpriv bench utility --data flights ...`` from the repository's root, in this process
    (tests/_cli.py)."""
    return vflpriv("bench", "utility", "--data", "flights", "--loss", "logistic", *args, cwd=ROOT)


def test_flights_frontier_rows(tmp_path):
    out = tmp_path / "u.json"
    r = _bench("--n", "3000", "--epsilons", "4", "--iterations", "5", "--eta", "2",
               "--algorithms", "dp-bcfw-secure,dpfw", "--json", str(out))
    assert r.returncode == 0, r.stderr
    rows = json.loads(out.read_text())["rows"]
    assert [(x["n"], x["algorithm"]) for x in rows] == [(3000, "dp-bcfw-secure"), (3000, "dpfw")]
    for x in rows:
        assert x["gap_removed"] == pytest.approx((x["f0"] - x["final"]) /
                                                 (x["f0"] - x["reference"]))
        assert x["epsilon_spent"] <= 4.0 + 1e-9
    assert rows[0]["label_party"] == 0


def test_flights_n_too_large_exits_2():
    r = _bench("--n", "10000000")
    assert r.returncode == 2 and "237774 rows" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.slow
def test_replot_draws_the_committed_frontier_and_refuses_bad_input(tmp_path):
    """--replot redraws a figure from a committed JSON, running nothing; bad input is one line,
    exit 2, nothing written (in this process: tests/_cli.py)."""
    def cli(*a):
        return vflpriv("bench", "utility", *a, cwd=ROOT)

    out = tmp_path / "f.png"
    r = cli("--replot", "docs/utility_frontier_flights.json", "--plot", str(out))
    assert r.returncode == 0, r.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    r = cli("--replot", "docs/utility_frontier_flights.json")
    assert r.returncode == 2 and r.stderr.strip().endswith("--replot needs --plot FILE.png (where to draw)")
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    r = cli("--replot", str(bad), "--plot", str(tmp_path / "g.png"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "g.png").exists()
