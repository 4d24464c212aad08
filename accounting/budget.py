"""The budget filter: refuses a release (or a whole planned run) that would take a ledger's
spend past its budget, before anything is released.

Every check and the durable append that follows it happen under the ledger's inter-process lock
(:meth:`accounting.ledger.Ledger.transaction`), after the ledger has read what other processes
appended, so the budget holds across processes sharing one ledger file.
"""
from __future__ import annotations

import math

from .accountants import get_accountant
from .accountants.base import check_delta, check_epsilon
from .events import DpEvent
from .ledger import Ledger, LedgerRecord, _compose_counts


class BudgetExceeded(RuntimeError):
    """A release would take the spend past the budget; nothing was released or recorded."""

    def __init__(self, message, *, spent=None, would_spend=None, budget=None):
        super().__init__(message)
        self.spent, self.would_spend, self.budget = spent, would_spend, budget


class BudgetFilter:
    """Refuses a release that would take the spend past (epsilon, delta), before it happens.

    ``charge(event, party=..., round=...)`` computes what the ledger's releases plus ``event``
    would cost; if that exceeds the budget it raises :class:`BudgetExceeded` and records nothing;
    otherwise it appends the record durably and returns it.  The check and the append happen under
    the ledger's lock, after reading what other processes appended, so the budget holds across
    processes.  Draw the noise only after ``charge`` returns.  ``per_party=True`` keeps one budget
    per party (each party's records compose alone, e.g. local DP); otherwise all releases share
    one budget.  :meth:`check_plan` refuses a whole planned run up front.
    """

    def __init__(self, ledger: Ledger, epsilon: float, delta: float, *, accountant: str = "best",
                 per_party: bool = False):
        self.ledger = ledger
        # Only +inf means "no budget"; NaN and -inf are bad input, not an unlimited budget.
        self.epsilon = math.inf if epsilon == math.inf else check_epsilon(epsilon)
        if not self.epsilon > 0:
            raise ValueError(f"budget epsilon must be positive, got {epsilon!r}")
        self.delta = check_delta(delta)
        self.accountant = get_accountant(accountant)
        self.per_party = per_party

    def _with(self, event, party, exclude=()):
        counts = self.ledger.counts(party if self.per_party else None, exclude)
        counts[event] = counts.get(event, 0) + 1
        return _compose_counts(counts)

    def would_spend(self, event: DpEvent, party="server", exclude=()) -> float:
        """Epsilon (by the filter's accountant) after releasing ``event``."""
        return self.accountant.epsilon(self._with(event, party, exclude), self.delta)

    def fits(self, event: DpEvent, party="server", exclude=()) -> bool:
        """Whether the spend after ``event`` stays within the budget.

        With the ``best`` accountant the minimum over accountants is within budget exactly when
        one of them is, so the cheap ones are asked first and the costly PLD only when needed.
        """
        if math.isinf(self.epsilon):
            return True
        total = self._with(event, party, exclude)
        for acc in getattr(self.accountant, "accountants", [self.accountant]):
            if acc.supports(total) and acc.epsilon(total, self.delta) <= self.epsilon:
                return True
        return False

    def spent(self, party=None, exclude=()) -> float:
        counts = self.ledger.counts(party if self.per_party else None, exclude)
        ev = _compose_counts(counts)
        return 0.0 if ev is None else self.accountant.epsilon(ev, self.delta)

    def charge(self, event: DpEvent, *, party="server", round: int = 0, note: str = "") -> LedgerRecord:
        with self.ledger.transaction():
            if not self.fits(event, party):
                before, after = self.spent(party), self.would_spend(event, party)
                raise BudgetExceeded(
                    f"release refused: it would take the spend from epsilon={before:.6g} to "
                    f"{after:.6g}, past the budget epsilon={self.epsilon:g} at "
                    f"delta={self.delta:g} ({self.accountant.name} accountant); nothing was "
                    "released", spent=before, would_spend=after, budget=(self.epsilon, self.delta))
            return self.ledger.append(event, party=party, round=round, note=note)

    def check_plan(self, planned: DpEvent, *, party="server", exclude=(), advice=None) -> float:
        """Refuse a run whose whole planned spend ``planned`` does not fit in what remains.

        Returns the spend after the plan.  On refusal raises :class:`BudgetExceeded` naming the
        spend so far, what remains, what the plan needs and ``advice()`` (a callable returning
        text such as the largest run that fits; called only on refusal).  ``exclude``: records
        already in the ledger that the plan covers again (a resumed run's replayed releases).
        """
        if math.isinf(self.epsilon):
            return 0.0
        with self.ledger.transaction():
            if self.fits(planned, party, exclude):
                return self.would_spend(planned, party, exclude)
            before = self.spent(party, exclude)
            after = self.would_spend(planned, party, exclude)
        hint = advice() if advice is not None else ""
        scope = f"party {party}'s" if self.per_party else "the"
        raise BudgetExceeded(
            f"run refused before its first release: {scope} budget is epsilon={self.epsilon:g} "
            f"at delta={self.delta:g}, {before:.6g} spent, {max(self.epsilon - before, 0):.6g} "
            f"remaining; this run's planned releases would take the spend to {after:.6g} "
            f"({self.accountant.name} accountant)" + (f"; {hint}" if hint else "")
            + "; nothing was released", spent=before, would_spend=after,
            budget=(self.epsilon, self.delta))
