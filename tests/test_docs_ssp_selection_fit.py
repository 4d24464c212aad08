"""docs/ssp_selection_fit.md is docs/ssp_selection_fit.json (written by docs/ssp_selection_fit.py):
its table, its claims recomputed from the rows, and the sensitivity of a block-weighted release
against the two closed forms the page derives."""
import importlib.util
import json
import math
import os
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _study():
    spec = importlib.util.spec_from_file_location(
        "ssp_selection_fit", os.path.join(ROOT, "docs", "ssp_selection_fit.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _read(name):
    with open(os.path.join(ROOT, "docs", name)) as fh:
        return fh.read()


def test_the_page_is_the_json():
    mod = _study()
    doc, page = json.loads(_read("ssp_selection_fit.json")), _read("ssp_selection_fit.md")
    assert doc["systems"] == list(mod.SYSTEMS) and doc["seeds"] == list(mod.SEEDS)
    assert len(doc["summary"]) == len(mod.TABLES) * len(mod.EPSILONS) == 22
    for line in mod.table_lines(doc["summary"]):
        assert line in page, line
    for e in doc["summary"]:
        cell = [r for r in doc["rows"] if r["table"] == e["table"] and r["epsilon"] == e["epsilon"]]
        assert len(cell) == len(mod.SEEDS)
        for s in mod.SYSTEMS:
            assert abs(np.mean([r[s] for r in cell]) - e[s]) < 5e-5
    flat = re.sub(r"\s+", " ", page)
    S = doc["summary"]

    def diffs(s):
        return [e[s] - e["rule"] for e in S]

    ridge = diffs("oracle_ridge")
    top = max(S, key=lambda e: e["oracle_ridge"] - e["rule"])
    assert (f"gains at most {max(ridge):.3f} ({top['table']}, eps {top['epsilon']:g}) and "
            f"{np.mean(ridge):.3f} on average") in flat
    split = diffs("split_select")
    assert (f"below the rule in {sum(v < 0 for v in split)} of 22 cells, by "
            f"{-np.mean(split):.3f} on average") in flat
    assert sum(v <= 0 for v in diffs("clip_dp_q90")) == 22
    assert "at or below the rule in all 22 cells" in flat
    by = {(e["table"], e["epsilon"]): e for e in S}
    for t, eps in (("oj", (0.5, 1.0)), ("college", (0.5, 1.0)), ("bikeshare", (0.5,))):
        for e in eps:
            gain = by[(t, e)]["clip_q90"] - by[(t, e)]["rule"]
            assert f"{gain:+.3f}" in flat, (t, e)
    cw = diffs("cross_weighted")
    assert (f"above the rule in {sum(v > 0 for v in cw)} cells and below it in "
            f"{sum(v < 0 for v in cw)}, with a mean change of {np.mean(cw):.4f}") in flat


def test_shipped_weights_give_the_shipped_sensitivity():
    from vflpriv.vertical.secure.ssp import release as S

    mod = _study()
    assert mod.weighted_sensitivity(1.0, 1.0, 1.0, 1.0) == pytest.approx(S.sensitivity(1.0))
    # the tilted weights: the second pair at its worst cosine, (w_y^2 - w_1^2) / (2 w_G^2)
    wy2 = 2 - mod.W1 ** 2
    closed = math.sqrt(8.0 * (1 + mod.W1 ** 2 + wy2 + 1) + 2.0 * (wy2 - mod.W1 ** 2) ** 2)
    assert mod.weighted_sensitivity(1.0, mod.W1, math.sqrt(wy2), 1.0) == \
        pytest.approx(closed, rel=1e-6)
    assert closed / S.sensitivity(1.0) == pytest.approx(1.032, abs=5e-4)   # the page's 3%


@settings(max_examples=30, deadline=None)
@given(st.tuples(*[st.floats(0.2, 2.0)] * 4))
def test_brute_force_sensitivity_holds_both_binding_pairs(w):
    """The brute-force maximum is at least each closed form (u' = -u with the same label;
    u' orthogonal to u with the label flipped) and at most their sum over all blocks' worst
    cases, an upper bound (each block's own maximum): 2 S^2 wG^2 + 2 (w1^2 + wy^2) 4S + 8 w1y^2."""
    wG, w1, wy, w1y = w
    got = _study().weighted_sensitivity(wG, w1, wy, w1y) ** 2
    pair1 = 16.0 * (w1 ** 2 + wy ** 2)
    pair2 = 8.0 * (wG ** 2 + w1 ** 2 + wy ** 2 + w1y ** 2)
    assert got >= max(pair1, pair2) * (1 - 1e-9)
    assert got <= (8.0 * wG ** 2 + 16.0 * (w1 ** 2 + wy ** 2) + 8.0 * w1y ** 2) * (1 + 1e-9)


def test_brute_force_sensitivity_against_random_row_pairs():
    """No random pair of admissible rows exceeds the brute-force maximum (an independent check
    of its search: 20000 pairs at and inside the norm bound, labels +-1)."""
    mod = _study()
    rng = np.random.default_rng(5)
    w = (1.3, 0.8, 1.1, 0.6)
    bound = mod.weighted_sensitivity(*w) ** 2
    iu = np.triu_indices(6)
    # svec weights: sqrt 2 off the diagonal, block weights by coordinate (4 features, 1, y)
    W = np.ones((6, 6))
    W[:4, :4], W[:4, 4], W[4, :4], W[:4, 5], W[5, :4] = w[0], w[1], w[1], w[2], w[2]
    W[4, 5] = W[5, 4] = w[3]
    worst = 0.0
    for _ in range(20000):
        zs = []
        for _ in range(2):
            u = rng.normal(size=4)
            u *= math.sqrt(2.0) * rng.uniform(0.5, 1.0) ** 0.1 / np.linalg.norm(u)
            zs.append(np.concatenate([u, [1.0, rng.choice([-1.0, 1.0])]]))
        D = np.outer(zs[0], zs[0]) - np.outer(zs[1], zs[1])
        D = W * D
        sv = np.where(iu[0] == iu[1], 1.0, 2.0) * D[iu] ** 2
        sv[iu[0] * 6 + iu[1] == 4 * 6 + 4] = 0.0          # 1^T 1 = n: not released
        sv[iu[0] * 6 + iu[1] == 5 * 6 + 5] = 0.0          # y^T y: not released
        worst = max(worst, float(sv.sum()))
    assert worst <= bound * (1 + 1e-9)
    assert worst >= 0.8 * bound          # the random search comes near the maximum
