"""A vectorized construction of the Poisson-subsampled Gaussian PLD for dp-accounting.

dp-accounting builds the "connect the dots" PLD of a mechanism from its hockey-stick curve
delta(eps) on a grid of ~4e4 epsilons (for the DP-SGD example at interval 1e-4).  Its generic
``get_delta_for_epsilon`` inverts the privacy loss one grid point at a time in Python, which is
~85% of the accountant's time.  For the Gaussian the inverse has a closed form, so here it is
computed for the whole grid at once; everything else (grid, tails, rounding, composition) is
dp-accounting's own code.  The result is the same PLD up to floating-point rounding (tested:
``tests/test_accounting_fast_pld.py`` compares epsilons with dp-accounting's public constructor).

Inverse privacy loss of the Gaussian with sensitivity s and standard deviation sigma, with
sampling probability q (dp-accounting's conventions, privacy_loss_mechanism.py):

* REMOVE: x(eps) = -s/2 - L(eps) sigma^2 / s,  L(eps) = log(1 + (e^eps - 1)/q)   (eps > log(1 - q))
* ADD:    x(eps) = s + (-s/2 - L(eps) sigma^2 / s), L(eps) = -log(1 + (e^-eps - 1)/q)  (eps < -log(1 - q))

and delta(eps) = mu_upper_cdf(x) - e^eps mu_lower_cdf(x), clipped to [0, 1].
"""
from __future__ import annotations

import math
import numbers

import numpy as np


def _fast_class():
    from dp_accounting.pld import privacy_loss_mechanism as plm

    class FastGaussianPrivacyLoss(plm.GaussianPrivacyLoss):
        def get_delta_for_epsilon(self, epsilon):
            if self.adjacency_type not in (plm.AdjacencyType.ADD, plm.AdjacencyType.REMOVE):
                return super().get_delta_for_epsilon(epsilon)
            is_scalar = isinstance(epsilon, numbers.Number)
            eps = np.array([epsilon], dtype=float) if is_scalar else np.asarray(epsilon, dtype=float)
            q, s, var = self.sampling_prob, self.sensitivity, self.standard_deviation ** 2
            deltas = np.zeros_like(eps)
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                if self.adjacency_type == plm.AdjacencyType.REMOVE:
                    if q == 1.0:
                        idx = np.ones_like(eps, dtype=bool)
                        loss = eps
                    else:
                        idx = eps > math.log1p(-q)
                        deltas[~idx] = -np.expm1(eps[~idx])
                        d = eps[idx] - math.log(q)
                        loss = d + np.log1p(-np.exp(math.log(1 / q - 1) - d))
                    x = -0.5 * s - loss * var / s
                else:
                    if q == 1.0:
                        idx = np.ones_like(eps, dtype=bool)
                        loss = eps
                    else:
                        idx = eps < -math.log1p(-q)
                        d = -eps[idx] - math.log(q)
                        loss = -(d + np.log1p(-np.exp(math.log(1 / q - 1) - d)))
                    x = s + (-0.5 * s - loss * var / s)
                deltas[idx] = self.mu_upper_cdf(x) - np.exp(eps[idx] + self.mu_lower_log_cdf(x))
            deltas = np.clip(deltas, 0, 1)
            return float(deltas[0]) if is_scalar else deltas

    return FastGaussianPrivacyLoss


_CLASS = None


def subsampled_gaussian_pld(noise_multiplier: float, sampling_prob: float, interval: float):
    """dp-accounting's ``from_gaussian_mechanism`` (add/remove, pessimistic, connect the dots),
    with the vectorized hockey-stick curve above."""
    global _CLASS
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    build = getattr(pld_lib, "_create_pld_pmf_from_monotone_privacy_loss", None)
    for_sub = getattr(pld_lib, "_pld_for_subsampled_mechanism", None)
    if build is None or for_sub is None:   # internals moved: use the public (slower) path
        return pld_lib.from_gaussian_mechanism(noise_multiplier, sensitivity=1.0,
                                               sampling_prob=sampling_prob,
                                               value_discretization_interval=interval)
    if _CLASS is None:
        _CLASS = _fast_class()

    def single(adjacency_type):
        loss = _CLASS(noise_multiplier, sensitivity=1.0, pessimistic_estimate=True,
                      log_mass_truncation_bound=-50, sampling_prob=sampling_prob,
                      adjacency_type=adjacency_type)
        return build(loss, pessimistic_estimate=True, value_discretization_interval=interval,
                     use_connect_dots=True)

    return for_sub(single, sampling_prob)
