"""The accountant interface: interpret events, say plainly which ones are not supported."""
from __future__ import annotations

import math
from abc import ABC, abstractmethod

from ..events import DpEvent, flatten, neighboring_of


class UnsupportedEventError(ValueError):
    """The accountant has no valid analysis for (part of) this event."""


def check_delta(delta) -> float:
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    return float(delta)


def check_epsilon(epsilon) -> float:
    if (isinstance(epsilon, bool) or not isinstance(epsilon, (int, float))
            or math.isnan(epsilon) or epsilon < 0 or math.isinf(epsilon)):
        raise ValueError(f"epsilon must be a finite number >= 0, got {epsilon!r}")
    return float(epsilon)


class Accountant(ABC):
    """Interprets a :class:`~accounting.events.DpEvent` as an (epsilon, delta) guarantee.

    ``epsilon(event, delta)`` and ``delta(event, epsilon)`` return valid upper bounds (numerical
    accountants round pessimistically) or raise :class:`UnsupportedEventError`.  They never
    return a number they cannot justify.  ``math.inf`` / ``1.0`` mean "no useful guarantee".
    """

    name: str = "accountant"
    #: True when the value is exact (up to floating point), False for an upper bound.
    exact: bool = False

    @abstractmethod
    def supports_leaf(self, leaf: DpEvent, neighboring: str) -> bool:
        """Whether this accountant has a valid analysis of one leaf event."""

    def supports(self, event: DpEvent) -> bool:
        try:
            relation = neighboring_of(event)
            leaves = flatten(event)
        except ValueError:
            return False
        return self._supports_leaves(leaves, relation)

    def _supports_leaves(self, leaves, relation) -> bool:
        return all(self.supports_leaf(leaf, relation) for leaf, _ in leaves)

    def _prepare(self, event: DpEvent):
        relation = neighboring_of(event)
        leaves = flatten(event)
        if not self._supports_leaves(leaves, relation):
            bad = [leaf.kind for leaf, _ in leaves if not self.supports_leaf(leaf, relation)]
            limit = None if bad else self._limit_reason(leaves)
            raise UnsupportedEventError(limit or (
                f"the {self.name} accountant does not support {', '.join(sorted(set(bad))) or 'this mix of events'}"
                f" (neighboring={relation})"))
        return leaves, relation

    def _limit_reason(self, leaves) -> str | None:
        """Why supported leaves are declined as a whole (a size limit), or None."""
        return None

    def epsilon(self, event: DpEvent, delta: float) -> float:
        delta = check_delta(delta)
        leaves, relation = self._prepare(event)
        return float(self._epsilon(leaves, relation, delta))

    def delta(self, event: DpEvent, epsilon: float) -> float:
        epsilon = check_epsilon(epsilon)
        leaves, relation = self._prepare(event)
        return float(min(1.0, self._delta(leaves, relation, epsilon)))

    def why_infinite(self, event: DpEvent, delta: float) -> str:
        """Why ``epsilon(event, delta)`` is infinite: the reason reported beside the value."""
        leaves, relation = self._prepare(event)
        own = sum(getattr(l, "delta", 0.0) * n for l, n in leaves)
        if own > 0:
            lost = -math.expm1(sum(n * math.log1p(-getattr(l, "delta", 0.0)) for l, n in leaves))
            if lost >= delta:
                return (f"the releases' own deltas already fail with probability {lost:.3g} >= "
                        f"delta = {delta:g}: no epsilon can hold")
        return self._why_infinite(leaves, relation, delta)

    def _why_infinite(self, leaves, relation, delta) -> str:
        return f"the {self.name} bound gives no finite epsilon at delta = {delta:g}"

    @abstractmethod
    def _epsilon(self, leaves, relation, delta) -> float: ...

    @abstractmethod
    def _delta(self, leaves, relation, epsilon) -> float: ...
