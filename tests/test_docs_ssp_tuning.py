"""docs/ssp_tuning.md is docs/ssp_tuning.json (written by docs/ssp_tuning.py), and the study's
one formula, the Stein estimate of the quadratic loss from the noisy statistics, is unbiased."""
import importlib.util
import json
import math
import os
import re

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _study():
    spec = importlib.util.spec_from_file_location("ssp_tuning",
                                                  os.path.join(ROOT, "docs", "ssp_tuning.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _read(name):
    with open(os.path.join(ROOT, "docs", name)) as fh:
        return fh.read()


def test_the_page_is_the_json():
    mod, doc, page = _study(), json.loads(_read("ssp_tuning.json")), _read("ssp_tuning.md")
    assert doc["systems"] == list(mod.SYSTEMS) and doc["seeds"] == list(mod.SEEDS)
    for line in mod.table_lines(doc["summary"]):
        assert line in page, line
    # every mean is the mean of its rows
    for e in doc["summary"]:
        cell = [r for r in doc["rows"] if r["table"] == e["table"] and r["epsilon"] == e["epsilon"]]
        assert len(cell) == len(mod.SEEDS)
        for s in mod.SYSTEMS:
            assert abs(np.mean([r[s] for r in cell]) - e[s]) < 5e-5
    flat = re.sub(r"\s+", " ", page)
    S = {(e["table"], e["epsilon"]): e for e in doc["summary"]}
    # the page's claims, recomputed
    below = sum(S[k]["split_select"] < S[k]["rule"] for k in S)
    assert f"below the rule in {below} of 18 cells" in flat
    gain = max(S[k]["oracle_ridge"] - S[k]["rule"] for k in S)
    assert f"at most {gain:.3f}" in flat
    near = sum(abs(S[k]["sure_select"] - S[k]["rule"]) <= 0.004 + 5e-5 for k in S)
    assert f"within 0.004 of the rule in {near} of 18 cells" in flat
    worse = [k for k in S if S[k]["clip_q90"] < S[k]["rule"] - 0.0015]
    assert "clip_q90 is never more than 0.0015 below the rule" in flat and not worse


def test_stein_estimate_is_unbiased():
    """E[sure(M + E)] = E[true quadratic loss of the fit from M + E] over the svec noise E, for a
    well-conditioned G (the eigenvalue floor never acts).  4000 draws; the mean paired difference is compared with 5 standard errors of the paired difference (false-failure rate
    below 1e-6 by the normal approximation; the paired differences have finite moments)."""
    mod = _study()
    rng = np.random.default_rng(3)
    n, d, sigma = 60, 8, 4.0
    Z = rng.normal(0.0, 1.0, (n, d))
    y = np.sign(Z[:, 0] - 0.5 * Z[:, 1] + rng.normal(0, 1, n))
    M0 = mod.noisy_m(Z, y, 0.0, rng)
    diffs, naive = [], []
    for _ in range(4000):
        M = mod.noisy_m(Z, y, sigma, rng)
        w, P = mod.ridge_fit(M, sigma * math.sqrt(d + 2))
        true = mod.quad_loss(M0, w)
        diffs.append(mod.sure(M, w, P, sigma) - true)
        naive.append(mod.quad_loss(M, w) - true)
    diffs, naive = np.array(diffs), np.array(naive)
    assert abs(diffs.mean()) <= 5.0 * diffs.std(ddof=1) / math.sqrt(diffs.size)
    # the plain plug-in loss is optimistic by more than that (the test has power)
    assert naive.mean() < -5.0 * naive.std(ddof=1) / math.sqrt(naive.size)


def test_the_study_fits_as_the_path_did():
    """The study's closed form (it also returns P for the Stein term) is the ssp fit of its
    time, before the intercept left the ridge: (G+ + lam I)^-1 2h over (x, b) with G's
    eigenvalues floored at 0 (checked against numpy's solve where G is positive definite).  The
    page says so; the shipped fit is tested in tests/test_vertical_secure_ssp.py."""
    mod = _study()
    rng = np.random.default_rng(5)
    Z = rng.uniform(-1, 1, (50, 5))
    y = np.sign(rng.normal(size=50))
    M = mod.noisy_m(Z, y, 0.0, rng)
    w, _ = mod.ridge_fit(M, 7.0)
    np.testing.assert_allclose(w, np.linalg.solve(M[:6, :6] + 7.0 * np.eye(6), 2 * M[:6, 6]),
                               rtol=1e-10)
    with open(os.path.join(ROOT, "docs", "ssp_tuning.md")) as fh:
        assert "the fit of that time" in fh.read()


def test_the_quantile_score_counts_rows_at_or_below():
    """With a negligible noise scale the private quantile is the grid point whose count is
    nearest 0.9 n, checked against a brute-force count."""
    mod = _study()
    norms = np.random.default_rng(6).uniform(0, 2, 1000)
    grid = 2.0 * 2.0 ** (-np.arange(33) / 4.0)
    brute = grid[int(np.argmin([abs((norms <= c).sum() - 900) for c in grid]))]
    assert mod.dp_quantile(norms, 2.0, 1e9, np.random.default_rng(0)) == brute
