"""The subsampled-Gaussian check's lower bound on a measure's delta (``measure_delta_lower``) is
computed by a running sum and scipy's lfilter: it must equal the plain recursion's value bit for
bit (the same operations in the same order), so the recursion's proven error bound still holds."""
from __future__ import annotations

import numpy as np
import pytest

from accounting.accountants import _pld_grid as grid
from accounting.accountants import _subsampled_check as check


@pytest.mark.parametrize("n", [1, 2, 3, 17, 5000])
@pytest.mark.parametrize("interval", [1e-4, 1e-3, 0.37])
def test_vectorized_equals_the_loop(n, interval):
    rng = np.random.default_rng(n)
    probs = rng.random(n) ** 8             # many orders of magnitude, like a PLD's masses
    probs /= probs.sum()
    p = grid.GridPmf(interval, 0, -n // 2, probs, 1e-12, 0.0, 0.0)
    assert np.array_equal(check.measure_delta_lower(p), check._measure_delta_lower_loop(p))


def test_on_the_dp_sgd_step():
    from dp_accounting import NeighboringRelation

    from accounting import PoissonSubsampledGaussian
    from accounting.accountants import pld as pld_module

    leaf = PoissonSubsampledGaussian(1.1, 256 / 60000)
    raw, k = pld_module._subsampled_pld(leaf, NeighboringRelation.ADD_OR_REMOVE_ONE, 1e-3)
    for side in grid.sides(raw, 1e-3, k):
        assert np.array_equal(check.measure_delta_lower(side),
                              check._measure_delta_lower_loop(side))
