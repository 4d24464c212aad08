"""The verdict rule of ``vflpriv reproduce`` (vflpriv/reproduce/verdict.py): the t-interval against
published t quantiles and a coverage simulation, the decision rule's cases and symmetries, and
claims combined over seeds."""
import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from vflpriv.reproduce import Claim, combine
from vflpriv.reproduce.verdict import decide, t_interval

# Two-sided 95% Student t quantiles t_{0.975, df} (any printed t table, e.g. NIST/SEMATECH
# e-Handbook of Statistical Methods, Table 1.3.6.7.2).
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 9: 2.262}


def test_interval_matches_the_printed_t_table():
    for df, t in T975.items():
        v = list(range(df + 1))                       # 0..df: mean df/2
        m = df / 2
        s = math.sqrt(sum((x - m) ** 2 for x in v) / df)
        mean, lo, hi = t_interval(v)
        assert mean == m
        assert abs((hi - m) / (s / math.sqrt(df + 1)) - t) < 1e-3
        assert abs((m - lo) - (hi - m)) < 1e-12


def test_interval_covers_95_percent_of_normal_means():
    # 4000 intervals of n = 5 N(3, 2^2) draws: the count covering 3 is Binomial(4000, 0.95),
    # mean 3800, sd 13.8; |count - 3800| < 70 (5 sd) fails with probability < 1e-6.
    rng = np.random.default_rng(1)
    hits = 0
    for _ in range(4000):
        _, lo, hi = t_interval(rng.normal(3.0, 2.0, size=5))
        hits += lo <= 3.0 <= hi
    assert abs(hits - 3800) < 70


def test_rule_cases():
    assert decide([2.0, 2.1, 1.9], ">", 1.0)[0] == "holds"
    assert decide([0.0, 0.1, -0.1], ">", 1.0)[0] == "does not hold"
    assert decide([0.0, 2.0, 1.0], ">", 1.0)[0] == "inconclusive"          # interval straddles
    assert decide([2.0], ">", 1.0)[0] == "inconclusive"                    # one seed: no interval
    assert decide([2.0, None, 2.0], ">", 1.0)[0] == "inconclusive"         # a seed cannot measure
    assert decide([1.0, 1.0], ">=", 1.0)[0] == "holds"                     # boundary counts
    assert decide([1.0, 1.0], ">", 1.0)[0] == "does not hold"
    v, m, iv = decide([0.5, 0.6, 0.7], "<", 1.0)
    assert v == "holds" and abs(m - 0.6) < 1e-12 and iv[0] < m < iv[1]


finite = st.floats(-1e6, 1e6, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(st.lists(finite, min_size=2, max_size=8), finite, st.sampled_from([">", ">="]))
def test_rule_is_symmetric_and_agrees_with_the_mean(values, c, op):
    v, m, (lo, hi) = decide(values, op, c)
    mirrored = decide([-x for x in values], op.replace(">", "<"), -c)[0]
    assert v == mirrored
    if v == "holds":
        assert m >= c and lo >= c
    if v == "does not hold":
        assert m <= c and hi <= c


def test_combine_keeps_the_json_names_and_the_seeds():
    per_seed = [[Claim("q above 1", "qualitative", f"seed {s}", 2.0 + 0.1 * s, ">", 1.0, "q")]
                for s in (0, 1, 2)]
    (row,) = combine(per_seed, [0, 1, 2])
    assert row.verdict == "holds" and row.seeds == [0, 1, 2] and row.values == [2.0, 2.1, 2.2]
    assert abs(row.mean - 2.1) < 1e-12 and row.interval[0] < 2.1 < row.interval[1]
    assert row.rule == "q > 1" and "seed 0" in row.measured
