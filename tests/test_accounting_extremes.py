"""Extreme parameters: accountants answer with a valid bound or say "unsupported", never crash.

Found in review: 3 x PureDP(1000) made the advanced accountant overflow (e^1000) and the PLD build
a grid of 2e7 points and overflow in dp-accounting.
"""
import math

import pytest

from accounting import Composed, PureDP, SelfComposed, report
from accounting.accountants.optimal import kov_delta


def test_huge_pure_epsilon():
    rep = report(SelfComposed(PureDP(1000.0), 3), delta=1e-5)
    assert rep.values["basic"] == pytest.approx(3000.0)
    assert rep.values["advanced"] == pytest.approx(3000.0)  # DRV overflows: basic caps it
    assert rep.values["pld"] is None                     # outside the PLD grid: unsupported
    # optimal: closed form at the returned epsilon meets the target delta, and the value is just
    # below basic composition (k-fold RR: delta(3000 - x) ~ x for small x)
    eps = rep.values["optimal"]
    assert kov_delta(3, 1000.0, 0.0, eps) <= 1e-5
    assert 3000 - 2e-5 < eps < 3000
    assert rep.best_value == eps


def test_huge_heterogeneous_pure_epsilon_is_unsupported_by_grid_accountants():
    rep = report(Composed((PureDP(1000.0), PureDP(2.0))), delta=1e-5)
    assert rep.values["optimal"] is None and rep.values["pld"] is None
    assert rep.values["basic"] == pytest.approx(1002.0)
    assert rep.best_value <= 1002.0 + 1e-2
