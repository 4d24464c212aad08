"""``best``: the smallest valid value over every accountant that supports the event.

Each accountant returns a valid upper bound, so their minimum is a valid upper bound too.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from .base import Accountant, UnsupportedEventError, check_delta, check_epsilon
from .composition import AdvancedComposition, BasicComposition
from .optimal import OptimalComposition
from .pld import PLDAccountant
from .rdp import RDPAccountant

ACCOUNTANT_NAMES = ("basic", "advanced", "optimal", "rdp", "pld")
#: the same accountants, cheapest first (used where any one valid answer suffices)
COST_ORDER = ("basic", "advanced", "rdp", "optimal", "pld")


def _make(name: str) -> Accountant:
    return {"basic": BasicComposition, "advanced": AdvancedComposition,
            "optimal": OptimalComposition, "rdp": RDPAccountant, "pld": PLDAccountant}[name]()


@dataclass
class Report:
    """Every accountant's value (None = unsupported) and the best one."""

    values: dict
    best_accountant: str | None
    best_value: float
    delta: float | None = None
    epsilon: float | None = None
    unsupported: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        key = "epsilon" if self.delta is not None else "delta"
        return {key: dict(self.values),
                "best": {"accountant": self.best_accountant, key: self.best_value}}


def report(event, *, delta: float | None = None, epsilon: float | None = None,
           accountants=ACCOUNTANT_NAMES) -> Report:
    """Evaluate ``event`` with every named accountant: epsilon at ``delta`` or delta at ``epsilon``."""
    if (delta is None) == (epsilon is None):
        raise ValueError("give exactly one of delta or epsilon")
    if delta is not None:
        delta = check_delta(delta)
    else:
        epsilon = check_epsilon(epsilon)
    values, why = {}, {}
    for name in accountants:
        acc = _make(name) if isinstance(name, str) else name
        try:
            values[acc.name] = (acc.epsilon(event, delta) if delta is not None
                                else acc.delta(event, epsilon))
        except UnsupportedEventError as exc:
            values[acc.name] = None
            why[acc.name] = str(exc)
    valid = {k: v for k, v in values.items() if v is not None}
    if not valid:
        raise UnsupportedEventError("no accountant supports this event: " + "; ".join(why.values()))
    best = min(valid, key=lambda k: valid[k])
    return Report(values, best, valid[best], delta=delta, epsilon=epsilon, unsupported=why)


class BestAccountant(Accountant):
    """Minimum over the given accountants (all by default) that support the event."""

    name = "best"

    def __init__(self, accountants=COST_ORDER):
        self.accountants = [(_make(a) if isinstance(a, str) else a) for a in accountants]

    def supports_leaf(self, leaf, neighboring):
        return any(a.supports_leaf(leaf, neighboring) for a in self.accountants)

    def _supports_leaves(self, leaves, relation):
        return any(a._supports_leaves(leaves, relation) for a in self.accountants)

    def _epsilon(self, leaves, relation, delta):
        vals = [a._epsilon(leaves, relation, delta) for a in self.accountants
                if a._supports_leaves(leaves, relation)]
        return min(vals) if vals else math.inf

    def _delta(self, leaves, relation, epsilon):
        vals = [a._delta(leaves, relation, epsilon) for a in self.accountants
                if a._supports_leaves(leaves, relation)]
        return min(vals) if vals else 1.0


def get_accountant(name: str) -> Accountant:
    """An accountant by name: one of ACCOUNTANT_NAMES or 'best'."""
    if name == "best":
        return BestAccountant()
    if name not in ACCOUNTANT_NAMES:
        raise ValueError(f"unknown accountant {name!r}; choose from "
                         f"{', '.join(ACCOUNTANT_NAMES + ('best',))}")
    return _make(name)
