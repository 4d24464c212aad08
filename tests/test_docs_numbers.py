"""Figures in the docs are traceable to committed output: each check below reads a committed JSON
(written by the command named in it) and asserts the page quotes what that JSON holds, so a page
cannot drift from its source, and the JSON cannot silently go stale when the command changes."""
import json
import os
import re

import pytest

from vflpriv.units import format_bytes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _page(name):
    with open(os.path.join(ROOT, "docs", name)) as fh:
        return fh.read()


def _json(name):
    with open(os.path.join(ROOT, "docs", name)) as fh:
        return json.load(fh)


def _removed(doc):
    return 100.0 * (doc["initial_objective"] - doc["final_objective"]) / \
        (doc["initial_objective"] - doc["reference_objective"])


def test_demo_json_is_the_current_demo():
    """docs/demo.json (`vflpriv demo --json docs/demo.json`) holds the runs the demo makes now."""
    from vflpriv.cli import demo

    runs = _json("demo.json")["runs"]
    assert [r["command"] for r in runs] == [
        "vflpriv " + " ".join(["run", "--data", demo.DATA, "--parties", "4", "--eta", "1",
                               "--seed", "0", "--reference", *extra]) for extra in demo.RUNS]


def test_vertical_md_quotes_the_demo():
    runs = {r["algorithm"]: r for r in _json("demo.json")["runs"]}
    m = re.search(r"In `vflpriv demo` \(n = 5e4, d = 400, T = 100, eps = 4\) it removes (\d+)%, "
                  r"against (\d+)% for\s+dp-bcfw-secure", _page("vertical.md"))
    assert m, "the sentence quoting the demo is not on docs/vertical.md any more"
    assert int(m.group(1)) == round(_removed(runs["dp-bcfw"]))
    assert int(m.group(2)) == round(_removed(runs["dp-bcfw-secure"]))
    # and the demo's predictor-noise ratio quoted by the warning's paragraph
    ratio = runs["dp-bcfw"]["privacy"]["calibration"]["outlook"]["ratio"]
    assert f"the demo's {ratio:.1f}" in _page("vertical.md")


@pytest.mark.parametrize("contender,key", [
    ("compiled", "compiled"), ("reference", "reference"),
    ("materialize J once (`standard_normal`) and use J[:, rows]", "materialized_J")])
def test_kernels_md_sketch_columns_memory_is_the_json(contender, key):
    b = _json("kernels_bench.json")["sketch_columns"]["peak_extra_bytes"][key]
    row = next(line for line in _page("kernels.md").splitlines()
               if line.startswith(f"| {contender} |"))
    shown = row.rstrip(" |").rsplit("|", 1)[1].strip()
    digits = 0 if b >= 1e5 and b < 1e6 else 1
    assert shown == format_bytes(b, digits)


@pytest.mark.parametrize("contender,key", [
    ("gaussian compiled", "gaussian_compiled"), ("gaussian reference", "gaussian_reference"),
    ("scikit-learn GaussianRandomProjection", "sklearn_GaussianRandomProjection"),
    ("countsketch compiled, sparse output", "countsketch_compiled_sparse_output"),
    ("countsketch compiled, dense output", "countsketch_compiled"),
    ("scipy clarkson_woodruff_transform (sparse output)", "scipy_clarkson_woodruff_transform")])
def test_kernels_md_sketch_matrix_memory_is_the_json(contender, key):
    b = _json("kernels_bench.json")["sketch_matrix"]["peak_extra_bytes"][key]
    row = next(line for line in _page("kernels.md").splitlines()
               if line.startswith(f"| {contender} |"))
    assert row.rstrip(" |").rsplit("|", 1)[1].strip() == f"{b / 1e6:.1f}"


def test_certify_md_quotes_the_recorded_calibration():
    """docs/certify.md's DP-SGD calibration: the noise and the time are those of the committed
    run (docs/certify_calibration.json); the RDP-alone noise is recomputed here."""
    from accounting import PoissonSubsampledGaussian, SelfComposed, calibrate

    cal = _json("certify_calibration.json")["calibrated"]
    page = _page("certify.md")
    assert cal["accountant"] == "pld"
    assert f"gives {cal['noise_multiplier']:.5f} (PLD)" in page
    assert f"calibration took {cal['seconds']:.2f} s in the run recorded in" in page
    m = re.search(r"where RDP alone\s+needs (\d\.\d{5})", page)
    rdp = calibrate(lambda s: SelfComposed(PoissonSubsampledGaussian(
        noise_multiplier=s, sample_rate=256 / 60000), 14100), 3.0, 1e-5, guess=1.1,
        accountant="rdp", decreasing=True)
    assert m and float(m.group(1)) == round(rdp.value, 5)
