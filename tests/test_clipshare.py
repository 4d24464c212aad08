"""Each party warns, locally, when its declared bounds clip a large share of its own values
(vflpriv.vertical.clipshare): the count against a brute-force count, the threshold both ways,
and the warning from every place a party's block is clipped (DP-BCFW-AS, dp-bcfw-secure's
least-squares and logistic parties, the files written for Flower)."""
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from vflpriv.errors import ClippingWarning
from vflpriv.vertical.clipshare import THRESHOLD, clipped_share, warn_if_clipped


def _caught(fn):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        fn()
    return [str(x.message) for x in w if issubclass(x.category, ClippingWarning)]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-10, 10), min_size=1, max_size=60), st.floats(0.01, 5))
def test_share_equals_a_brute_force_count(values, bound):
    clipped, total = clipped_share(np.array(values), bound)
    assert total == len(values)
    assert clipped == sum(1 for v in values if abs(v) > bound)


def test_sparse_counts_the_stored_values():
    A = sp.csc_matrix(np.array([[0.0, 3.0], [0.0, 0.0], [0.5, -2.0]]))
    assert clipped_share(A, 1.0) == (2, 3)


def test_warns_above_the_threshold_and_not_at_it():
    n = 200
    at = np.zeros((n, 1)) + 0.5
    at[: int(THRESHOLD * n)] = 2.0             # exactly 5%: no warning
    assert _caught(lambda: warn_if_clipped(3, at, None, 1.0, None)) == []
    above = at.copy()
    above[int(THRESHOLD * n)] = 2.0            # one more value: warning, with the count
    msgs = _caught(lambda: warn_if_clipped(3, above, None, 1.0, None))
    assert len(msgs) == 1
    assert msgs[0].startswith("party 3: --feature-bound 1 clips 6% of its feature values (11 of 200)")
    y = np.full(n, 4.0)
    msgs = _caught(lambda: warn_if_clipped(0, at, y, 1.0, 3.0))
    assert len(msgs) == 1 and "--label-bound 3 clips 100% of its labels (200 of 200)" in msgs[0]


def _diabetes_raw():
    from vflpriv.data import load_named

    return load_named("diabetes", scaled=False).vertical()


def _scaled_diabetes():
    from vflpriv.data import load_named

    return load_named("diabetes").vertical()


def test_engine_party_warns_on_the_unscaled_diabetes_set_only():
    """The README's old Flower example: --feature-bound 3 --label-bound 3 on the unscaled set
    clips most features and every label; the shipped (scaled) set clips nothing."""
    from vflpriv.vertical import solve

    raw = _diabetes_raw()
    expect = [int(np.sum(np.abs(raw.A[:, b]) > 3)) for b in raw.blocks]
    kw = dict(algorithm="dp-bcfw", epsilon=4.0, delta=1e-5, feature_bound=3.0, label_bound=3.0,
              iterations=2, seed=0)
    msgs = _caught(lambda: solve(raw, **kw))
    assert len(msgs) == 3          # two parties' features, the labels once
    assert msgs[0].startswith("party 0: --feature-bound 3 clips ")
    assert f"of its feature values ({expect[0]} of " in msgs[0]
    assert msgs[2].startswith("party 1: --feature-bound 3 clips ")
    assert f"of its feature values ({expect[1]} of " in msgs[2]
    assert "party 0: --label-bound 3 clips 100% of its labels (442 of 442)" in msgs[1]
    kw.update(feature_bound=1.0, label_bound=1.0)
    assert _caught(lambda: solve(_scaled_diabetes(), **kw)) == []


@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_secure_parties_warn(loss):
    from vflpriv.vertical import solve

    d = _scaled_diabetes()
    y = np.where(d.y > np.median(d.y), 1.0, -1.0) if loss == "logistic" else d.y
    from vflpriv.data import VerticalData

    d = VerticalData(d.A, y, d.blocks)
    kw = dict(algorithm="dp-bcfw-secure", epsilon=4.0, delta=1e-5, feature_bound=0.5,
              label_bound=1.0, iterations=2, seed=0, loss=loss, label_party=0)
    msgs = _caught(lambda: solve(d, **kw))
    expect = [int(np.sum(np.abs(d.A[:, b]) > 0.5)) for b in d.blocks]
    for k in (0, 1):
        assert any(m.startswith(f"party {k}: --feature-bound 0.5 clips ") and
                   f"({expect[k]} of " in m for m in msgs), msgs
    assert not any("labels" in m for m in msgs)


def test_flower_party_files_warn_in_the_writing_process(tmp_path):
    from vflpriv.vertical.remote import party_configs

    d = _diabetes_raw()
    msgs = _caught(lambda: party_configs(d, str(tmp_path), private=True, budget=(4.0, 1e-5),
                                         ledgers=[str(tmp_path / f"l{k}") for k in range(2)],
                                         label_party=1, bounds=(3.0, 3.0)))
    assert [m.split(":")[0] for m in msgs] == ["party 0", "party 1", "party 1"]
    assert "--label-bound 3 clips 100% of its labels (442 of 442)" in msgs[2]


def test_a_role_rebuilt_per_message_warns_at_setup_only():
    """A deployed SuperNode rebuilds the party's role for every message: its warning on its own
    data is given once, at setup, not once per round."""
    import json

    from vflpriv.runtime.roles import PartyRole, answer

    class Role(PartyRole):
        def __init__(self, cfg, setup):
            warn_if_clipped(int(cfg["party"]), np.full(10, 5.0), None, 1.0, None)

        def handle(self, kind, frame, round):
            return "ok", b""

        def get_state(self):
            return {}

        def set_state(self, state):
            pass

    store = {}
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        answer(Role, {"party": 2}, store, "setup", json.dumps({"n": 10}).encode(), 0)
        for t in range(1, 4):
            answer(Role, {"party": 2}, store, "round", b"", t)
    said = [str(x.message) for x in w if issubclass(x.category, ClippingWarning)]
    assert len(said) == 1 and said[0].startswith("party 2: --feature-bound 1 clips 100%")
