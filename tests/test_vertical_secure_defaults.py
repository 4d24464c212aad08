"""dp-bcfw-secure's defaults (vflpriv.vertical.secure.defaults): chosen from public quantities
only (two data sets with the same public shape get the same choices whatever their values), the
user's values are kept and not listed, the Gumbel rule's premise holds in the accountant, a
default run stays within its budget, and `vflpriv run` prints what it chose and why."""
import math
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vflpriv.data import VerticalData
from vflpriv.errors import InputError
from vflpriv.vertical import solve
from vflpriv.vertical.secure.defaults import choose

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PRIV = dict(algorithm="dp-bcfw-secure", epsilon=4.0, delta=1e-6, feature_bound=1.0,
            label_bound=1.0, iterations=4, seed=0, squared_path="fw")


def _data(rng, n=120, sizes=(3, 5, 4)):
    A = rng.standard_normal((n, sum(sizes))) * rng.uniform(0.1, 5.0)
    y = A[:, 0] - A[:, 4] + 0.1 * rng.standard_normal(n)
    starts = np.cumsum((0,) + sizes)
    return VerticalData(A, y, [np.arange(starts[i], starts[i + 1]) for i in range(len(sizes))])


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 2 ** 32 - 1), st.integers(0, 2 ** 32 - 1))
def test_defaults_do_not_depend_on_the_data(s1, s2):
    a = solve(_data(np.random.default_rng(s1)), **PRIV)
    b = solve(_data(np.random.default_rng(s2)), **PRIV)
    assert a.extra["defaults"] == b.extra["defaults"]
    assert a.extra["row_clips"] == b.extra["row_clips"]
    assert a.noise_plan.to_dict()["feature_sigma"] == b.noise_plan.to_dict()["feature_sigma"]


def test_row_clip_rule_is_the_geometric_midpoint_of_the_possible_norms():
    """C_k = sqrt(B_a * B_a sqrt(p_k)) per party (computed here from the definition)."""
    sol = solve(_data(np.random.default_rng(0)), **dict(PRIV, feature_bound=2.5))
    for c, p in zip(sol.extra["row_clips"], (3, 5, 4)):
        assert c == pytest.approx(math.sqrt(2.5 * 2.5 * math.sqrt(p)), rel=1e-12)
    names = [d["name"] for d in sol.extra["defaults"]]
    assert names == ["rnm", "split", "max_features", "row_clip"]
    assert sol.extra["rnm"] == "gumbel" and sol.extra["split"] == 0.5
    assert sol.extra["feature_cap"] == 5                        # min(10, largest block)


def test_given_values_are_kept_and_not_listed():
    sol = solve(_data(np.random.default_rng(0)), row_clip=1.5, rnm="laplace", split=0.3,
                max_features=2, **PRIV)
    assert sol.extra["defaults"] == []
    assert sol.extra["row_clips"] == [1.5, 1.5, 1.5]
    assert sol.extra["rnm"] == "laplace" and sol.extra["split"] == 0.3
    assert sol.extra["feature_cap"] == 2


def test_gumbel_needs_half_the_laplace_scale_in_the_accountant():
    """The rule's premise, checked in the accountant: at one (epsilon, delta) and plan, the
    calibrated Gumbel selection scale is half the Laplace one (within the calibration's
    tolerance)."""
    from vflpriv.vertical.secure import privacy as SP

    clips = SP.row_clips(1.0, 4.0, [500] * 4)
    sens = SP.sensitivities(1.0, 1.0, 1.0, 10 ** 5, clips)
    scale = {r: SP.calibrate(r, sens, 4.0, 1e-6, 200, 4, 10, 0.5, "rdp").index_scale
             for r in ("laplace", "gumbel")}
    assert scale["gumbel"] == pytest.approx(scale["laplace"] / 2, rel=0.02)


def test_default_run_spends_within_its_budget():
    sol = solve(_data(np.random.default_rng(1), n=400), **dict(PRIV, iterations=20))
    assert sol.privacy["spent_by_budget_accountant"] <= 4.0 + 1e-9


def test_logistic_paths_list_the_path_and_the_row_clip():
    """The default path (ssp) is listed with its reason before the row clip; a path given is
    not listed (a value the user gave is used as given)."""
    rng = np.random.default_rng(2)
    D = _data(rng)
    D = VerticalData(D.A, np.where(D.y > 0, 1.0, -1.0), D.blocks)
    priv = {k: v for k, v in PRIV.items() if k != "squared_path"}
    sol = solve(D, loss="logistic", **priv)
    assert [d["name"] for d in sol.extra["defaults"]] == ["logistic_path", "row_clip"]
    assert sol.extra["defaults"][0]["value"] == "ssp" == sol.extra["path"]
    glm = solve(D, loss="logistic", logistic_path="glm", **priv)
    assert [d["name"] for d in glm.extra["defaults"]] == ["row_clip"]


def test_private_run_without_feature_bound_names_it():
    with pytest.raises(InputError, match="feature_bound"):
        solve(_data(np.random.default_rng(0)), **dict(PRIV, feature_bound=None))


def test_cli_prints_the_chosen_values_and_why():
    r = subprocess.run([sys.executable, "-m", "vflpriv", "run", "--data",
                        "synthetic:n=300,d=40,density=0.2,sparsity=0.05", "--parties", "2",
                        "--algorithm", "dp-bcfw-secure", "--epsilon", "4", "--delta", "1e-6",
                        "--feature-bound", "1", "--label-bound", "1", "--iterations", "3",
                        "--seed", "0", "--row-clip", "2", "--squared-path", "fw"], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("default ")]
    assert [ln.split()[1] for ln in lines] == ["rnm", "split", "max_features"]
    assert "half the Laplace scale" in lines[0]
    r = subprocess.run([sys.executable, "-m", "vflpriv", "run", "--data",
                        "synthetic:n=300,d=40", "--algorithm", "dp-bcfw-secure", "--epsilon",
                        "4", "--delta", "1e-6", "--label-bound", "1"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "feature_bound" in r.stderr and "Traceback" not in r.stderr
