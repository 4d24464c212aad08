"""diffprivlib's centralized baselines in ``vflpriv bench utility`` and the lazy-import rule for
the optional heavy dependencies (``import accounting`` loads none of torch, opacus, diffprivlib)."""
import json
import subprocess
import sys

import numpy as np
import pytest

from vflpriv.cli.main import main

pytest.importorskip("diffprivlib")


def test_linreg_baseline_runs_side_by_side(tmp_path, capsys):
    out = tmp_path / "u.json"
    assert main(["bench", "utility", "--n", "400", "--d", "24", "--epsilons", "2,64",
                 "--iterations", "3", "--algorithms", "dpfw,dpl-linreg",
                 "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    base = [r for r in rows if r["algorithm"] == "dpl-linreg"]
    assert [r["epsilon"] for r in base] == [2.0, 64.0]
    for r in base:
        assert r["library"] == "diffprivlib" and r["epsilon_spent"] == r["epsilon"]
        assert np.isfinite(r["final"]) and r["f0"] == pytest.approx(
            next(x["f0"] for x in rows if x["algorithm"] == "dpfw"))
    assert "dpl-linreg" in capsys.readouterr().out


def test_logreg_baseline_runs_or_says_why(tmp_path, capsys):
    # diffprivlib 0.6.6's LogisticRegression cannot be built under scikit-learn >= 1.8 (it passes
    # the removed multi_class=): the bench then reports the row as skipped with the reason.
    out = tmp_path / "u.json"
    assert main(["bench", "utility", "--n", "300", "--d", "12", "--epsilons", "4",
                 "--iterations", "2", "--loss", "logistic", "--algorithms", "dpl-logreg",
                 "--json", str(out)]) == 0
    (row,) = json.loads(out.read_text())["rows"]
    if "skipped" in row:
        assert "scikit-learn" in row["skipped"]
    else:
        assert np.isfinite(row["final"])


def test_baseline_must_match_the_loss(capsys):
    assert main(["bench", "utility", "--n", "300", "--d", "12", "--algorithms",
                 "dpl-logreg"]) == 2
    assert "optimizes the logistic loss" in capsys.readouterr().err


def test_heavy_dependencies_stay_lazy():
    code = ("import sys, accounting, accounting.audit, vflpriv.bench.baselines; "
            "print(*[m in sys.modules for m in ('torch', 'opacus', 'diffprivlib', 'sklearn')])")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert p.stdout.split() == ["False"] * 4, p.stdout + p.stderr
