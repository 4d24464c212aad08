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
    #: accountant -> why its epsilon is infinite (only for those that answered inf)
    reasons: dict = field(default_factory=dict)

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
        except MemoryError as exc:     # sizes are decided up front; this is the last guard
            values[acc.name] = None
            why[acc.name] = (f"the {acc.name} accountant needs more memory than there is for "
                             f"this plan ({exc}); the other rows answer")
    valid = {k: v for k, v in values.items() if v is not None}
    if not valid:
        raise UnsupportedEventError("no accountant supports this event: " + "; ".join(why.values()))
    best = min(valid, key=lambda k: valid[k])
    reasons = {}
    if delta is not None:
        for name in accountants:
            acc = _make(name) if isinstance(name, str) else name
            if values.get(acc.name) == math.inf:
                reasons[acc.name] = acc.why_infinite(event, delta)
    return Report(values, best, valid[best], delta=delta, epsilon=epsilon, unsupported=why,
                  reasons=reasons)


class BestAccountant(Accountant):
    """Minimum over the given accountants (all by default) that support the event.

    When ``optimal`` is exact for the plan (a Gaussian-only plan, k releases of one generic
    (eps, delta)-DP mechanism; ``OptimalComposition.is_exact``) no valid accountant can go below
    it, so the numerical PLD accountant is skipped: the answer costs microseconds instead of
    a PLD convolution.  ``epsilon_and_source`` / ``delta_and_source`` say which accountant gave
    the value.
    """

    name = "best"
    #: accountants that are slow and never below an exact optimum
    NUMERICAL = ("pld",)

    def __init__(self, accountants=COST_ORDER):
        self.accountants = [(_make(a) if isinstance(a, str) else a) for a in accountants]

    def supports_leaf(self, leaf, neighboring):
        return any(a.supports_leaf(leaf, neighboring) for a in self.accountants)

    def _supports_leaves(self, leaves, relation):
        return any(a._supports_leaves(leaves, relation) for a in self.accountants)

    def _candidates(self, leaves, relation):
        usable = [a for a in self.accountants if a._supports_leaves(leaves, relation)]
        exact = any(isinstance(a, OptimalComposition) and a.is_exact(leaves) for a in usable)
        if exact:
            usable = [a for a in usable if a.name not in self.NUMERICAL]
        return usable

    def _evaluate(self, leaves, relation, query, value):
        results = [(getattr(a, query)(leaves, relation, value), a.name)
                   for a in self._candidates(leaves, relation)]
        if not results:
            return (math.inf, None) if query == "_epsilon" else (1.0, None)
        return min(results, key=lambda r: r[0])

    def _epsilon(self, leaves, relation, delta):
        return self._evaluate(leaves, relation, "_epsilon", delta)[0]

    def _delta(self, leaves, relation, epsilon):
        return self._evaluate(leaves, relation, "_delta", epsilon)[0]

    def epsilon_and_source(self, event, delta):
        """(epsilon, name of the accountant that gave it)."""
        delta = check_delta(delta)
        leaves, relation = self._prepare(event)
        value, name = self._evaluate(leaves, relation, "_epsilon", delta)
        return float(value), name

    def delta_and_source(self, event, epsilon):
        """(delta, name of the accountant that gave it)."""
        epsilon = check_epsilon(epsilon)
        leaves, relation = self._prepare(event)
        value, name = self._evaluate(leaves, relation, "_delta", epsilon)
        return float(min(1.0, value)), name


def get_accountant(name: str) -> Accountant:
    """An accountant by name: one of ACCOUNTANT_NAMES or 'best'."""
    if name == "best":
        return BestAccountant()
    if name not in ACCOUNTANT_NAMES:
        raise ValueError(f"unknown accountant {name!r}; choose from "
                         f"{', '.join(ACCOUNTANT_NAMES + ('best',))}")
    return _make(name)
