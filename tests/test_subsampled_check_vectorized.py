"""The subsampled-Gaussian check's lower bound on a measure's delta (``measure_delta_lower``) is
computed by a running sum and scipy's lfilter: it must equal the plain recursion's value bit for
bit (the same operations in the same order), so the recursion's proven error bound still holds."""
from __future__ import annotations

import numpy as np
import pytest

from accounting.accountants.analysis import pld_grid as grid
from accounting.accountants.analysis import subsampled_check as check


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


def test_log_mgf_is_above_the_exact_one():
    """The Chernoff range's log moment generating function (``analysis.pld_grid._log_mgf``, computed by
    blocks of rows and raised by its rounding bound) is at or above the exact value (mpmath)
    and at or above scipy's row-by-row logsumexp, by at most 1e-10 here."""
    import mpmath as mp
    from scipy.special import logsumexp

    rng = np.random.default_rng(3)
    for n in (1, 7, 300, 50_000):
        losses = (np.arange(n) - n // 3) * 1e-3
        w = rng.random(n) ** 8
        w /= w.sum()
        lam = grid._Chernoff.ORDERS / max(1e-300, float(np.abs(losses).max()))
        got = grid._log_mgf(lam, losses, w)
        ref = np.array([logsumexp(l * losses, b=w) for l in lam])
        assert np.all(got >= ref) and np.all(got - ref <= 1e-10)
        if n <= 300:
            with mp.workdps(40):
                for j in range(0, lam.size, 7):
                    exact = mp.log(mp.fsum(mp.mpf(float(wi)) * mp.e ** (
                        mp.mpf(float(lam[j])) * mp.mpf(int(i) - n // 3) / 1000)
                        for i, wi in enumerate(w)))
                    assert got[j] >= exact
