"""Basic and advanced composition of (epsilon, delta)-DP releases.

* Basic: (sum eps_i, sum delta_i) (Dwork, McSherry, Nissim, Smith 2006; Dwork & Roth Thm 3.16).
* Advanced (Dwork, Rothblum, Vadhan 2010, Thm III.3; heterogeneous form as in Dwork & Roth Thm
  3.20): for any delta' > 0 the adaptive composition is (eps', delta' + sum delta_i)-DP with

      eps' = sqrt(2 ln(1/delta') * sum eps_i^2) + sum eps_i (e^{eps_i} - 1).

  Basic composition is valid too, so ``advanced`` reports the smaller of the two bounds (a few
  large releases make the DRV bound exceed sum eps_i: Laplace k = 10 at eps 1 gives 32.4 vs 10).

Both support only events with a parameter-free (epsilon, delta) description: Laplace, report-noisy-
max, exponential, pure and approximate DP.  Gaussian, subsampled Gaussian and zCDP need a choice
of per-release delta; these accountants refuse them rather than pick one silently.
"""
from __future__ import annotations

import math

from .base import Accountant
from .analysis.dp_params import dp_params


class BasicComposition(Accountant):
    name = "basic"

    def supports_leaf(self, leaf, neighboring):
        return dp_params(leaf) is not None

    def _epsilon(self, leaves, relation, delta):
        eps = sum(dp_params(l)[0] * n for l, n in leaves)
        d = sum(dp_params(l)[1] * n for l, n in leaves)
        return eps if d <= delta else math.inf

    def _delta(self, leaves, relation, epsilon):
        eps = sum(dp_params(l)[0] * n for l, n in leaves)
        d = sum(dp_params(l)[1] * n for l, n in leaves)
        return d if epsilon >= eps else 1.0


class AdvancedComposition(Accountant):
    name = "advanced"

    def supports_leaf(self, leaf, neighboring):
        return dp_params(leaf) is not None

    @staticmethod
    def _sums(leaves):
        s2 = sum(dp_params(l)[0] ** 2 * n for l, n in leaves)
        # e^eps overflows past eps ~ 709; the bound is then infinite (useless, still valid).
        drift = sum(dp_params(l)[0] * (math.expm1(dp_params(l)[0]) if dp_params(l)[0] < 700
                                       else math.inf) * n for l, n in leaves)
        d = sum(dp_params(l)[1] * n for l, n in leaves)
        return s2, drift, d

    def _epsilon(self, leaves, relation, delta):
        basic = BasicComposition()._epsilon(leaves, relation, delta)
        s2, drift, d = self._sums(leaves)
        slack = delta - d
        if slack <= 0 or math.isinf(drift):
            return basic
        return min(basic, math.sqrt(2 * math.log(1 / slack) * s2) + drift)

    def _delta(self, leaves, relation, epsilon):
        basic = BasicComposition()._delta(leaves, relation, epsilon)
        s2, drift, d = self._sums(leaves)
        if epsilon <= drift or math.isinf(drift):
            return basic
        return min(basic, d + math.exp(-((epsilon - drift) ** 2) / (2 * s2)))
