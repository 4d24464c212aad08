"""The vectorized subsampled-Gaussian PLD equals dp-accounting's public constructor.

Reference: ``dp_accounting.pld.privacy_loss_distribution.from_gaussian_mechanism`` (pessimistic,
connect the dots, add/remove) on the same grid.  Agreement to 1e-7 in epsilon: both evaluate the
same closed-form hockey-stick curve; they differ only in floating-point rounding near the grid ends.
"""
import pytest

from accounting.accountants.analysis.fast_pld import subsampled_gaussian_pld


@pytest.mark.parametrize("sigma, q, steps", [(1.1, 256 / 60000, 2000), (0.8, 0.1, 50),
                                             (2.0, 0.01, 300), (1.0, 0.5, 5), (1.0, 1.0, 3)])
def test_matches_dp_accounting(sigma, q, steps):
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    ours = subsampled_gaussian_pld(sigma, q, 1e-3).self_compose(steps)
    ref = pld_lib.from_gaussian_mechanism(sigma, sampling_prob=q,
                                          value_discretization_interval=1e-3).self_compose(steps)
    for delta in (1e-3, 1e-6):
        assert ours.get_epsilon_for_delta(delta) == pytest.approx(
            ref.get_epsilon_for_delta(delta), abs=1e-7)
    for eps in (0.5, 2.0):
        assert ours.get_delta_for_epsilon(eps) == pytest.approx(
            ref.get_delta_for_epsilon(eps), abs=1e-10)
