"""(epsilon, delta) descriptions of the events that have one without choosing a free parameter."""
from __future__ import annotations

from ...events import ApproxDP, Exponential, Laplace, PureDP, ReportNoisyMax


def dp_params(leaf):
    """(epsilon, delta) of a leaf that is (epsilon, delta)-DP by itself, or None."""
    if isinstance(leaf, (Laplace, ReportNoisyMax)):
        return leaf.epsilon, 0.0
    if isinstance(leaf, (Exponential, PureDP)):
        return leaf.epsilon, 0.0
    if isinstance(leaf, ApproxDP):
        return leaf.epsilon, leaf.delta
    return None
