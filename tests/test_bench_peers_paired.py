"""The paired comparisons of ``vflpriv bench peers`` (vflpriv/bench/peers_paired.py): the
interval against scipy's paired t-test, the pairing by seed, and the verdicts."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from vflpriv.bench import peers_paired as P


def _rows(table, eps, system, aucs, seeds=None):
    seeds = range(len(aucs)) if seeds is None else seeds
    return [{"table": table, "epsilon": eps, "system": system, "seed": s, "test_auc": a}
            for s, a in zip(seeds, aucs)]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=2, max_size=30))
def test_interval_is_scipys_paired_t_interval(pairs):
    a, b = np.array(pairs).T
    rows = _rows("t", 1.0, "dp-bcfw-secure", a) + _rows("t", 1.0, "opacus-replace", b)
    (p,) = P.paired(rows)
    assert p["reference"] == "opacus-replace" and p["seeds"] == len(a)
    assert p["mean_difference"] == pytest.approx(np.mean(a - b), abs=1e-12)
    if np.std(a - b) < 1e-9:
        return                      # scipy: nan (or round-off) for constant differences
    ci = stats.ttest_rel(a, b).confidence_interval(0.95)
    assert p["ci95"] == pytest.approx([ci.low, ci.high], abs=1e-9)
    assert p["verdict"] == ("above" if ci.low > 0 else "below" if ci.high < 0 else "level")


def test_pairs_by_seed_and_skips_seeds_one_side_lacks():
    # seeds listed in different orders, one seed only on the system's side
    rows = (_rows("t", 0.5, "dp-bcfw-secure", [0.7, 0.8, 0.9, 0.1], seeds=[2, 0, 1, 9])
            + _rows("t", 0.5, "opacus-replace", [0.5, 0.6, 0.4], seeds=[1, 2, 0]))
    (p,) = P.paired(rows)
    # seed 0: 0.8 - 0.4, seed 1: 0.9 - 0.5, seed 2: 0.7 - 0.6
    assert p["seeds"] == 3 and p["mean_difference"] == pytest.approx((0.4 + 0.4 + 0.1) / 3)


def test_reference_falls_back_to_opacus_and_nothing_without_one():
    rows = _rows("t", 1.0, "dp-bcfw-secure", [0.9, 0.8]) + _rows("t", 1.0, "opacus", [0.5, 0.6])
    assert P.paired(rows)[0]["reference"] == "opacus"
    assert P.paired(_rows("t", 1.0, "dp-bcfw-secure", [0.9, 0.8])) == []
    # non-private rows (epsilon None) and unavailable ones (no AUC) take no part
    rows += [{"table": "t", "epsilon": None, "system": "sklearn", "seed": 0, "test_auc": 0.9},
             {"table": "t", "epsilon": 1.0, "system": "dp-bcfw-secure-glm", "seed": 0}]
    assert [p["system"] for p in P.paired(rows)] == ["dp-bcfw-secure"]


def test_one_seed_has_no_interval():
    (p,) = P.paired(_rows("t", 1.0, "dp-bcfw-secure", [0.9]) + _rows("t", 1.0, "opacus", [0.5]))
    assert p["ci95"] is None and p["verdict"] == "one seed"
    assert P.lines([p]) == ["- t, eps 1: `dp-bcfw-secure` minus `opacus`, paired over 1 seeds: "
                            "+0.400: one seed"]


def test_clear_differences_get_their_verdicts():
    up = _rows("t", 1.0, "dp-bcfw-secure", [0.80, 0.81, 0.82, 0.83])
    ref = _rows("t", 1.0, "opacus-replace", [0.70, 0.70, 0.71, 0.72])
    assert P.paired(up + ref)[0]["verdict"] == "above"
    down = _rows("t", 1.0, "dp-bcfw-secure", [0.60, 0.61, 0.62, 0.60])
    assert P.paired(down + ref)[0]["verdict"] == "below"
