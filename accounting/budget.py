"""The budget filter: refuses a release (or a whole planned run) that would take a ledger's
spend past its budget, before anything is released.

Every check and the durable append that follows it happen under the ledger's inter-process lock
(:meth:`accounting.ledger.Ledger.transaction`), after the ledger has read what other processes
appended, so the budget holds across processes sharing one ledger file.

Reservations: :meth:`BudgetFilter.check_plan` admits a run only if the releases so far, what every
other run's live reservation still holds and this run's whole plan fit together, and then writes
the plan as this run's reservation (same lock).  The invariant kept is

    spend(releases + every live reservation's remainder) <= budget,

so a release inside the run's own reservation is always allowed (it only moves leaves from the
reservation to the releases), and any other release or reservation is checked against all of it.
A run that releases something its reservation does not hold (a plan that was not a leaf-wise
worst case) loses its reservation at that release and is held release by release from then on,
as before reservations (counting both would count the same spend twice).
Runs started at once on one ledger: those admitted finish, the rest are refused before their
first release.  The ledger depends on nothing here; this module builds on the ledger.
"""
from __future__ import annotations

import math

from .accountants import get_accountant
from .accountants.base import check_delta, check_epsilon
from .events import DpEvent, flatten, neighboring_of
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

    def _held(self, party, own):
        """{leaf: count} the live reservations still hold (this run's too when ``own``)."""
        held = getattr(self.ledger, "reserved_counts", None)
        if held is None:
            return {}
        return held(party if self.per_party else None,
                    exclude_run=None if own else self.ledger.run_id)

    def _with(self, event, party, exclude=(), own=False):
        counts = self.ledger.counts(party if self.per_party else None, exclude)
        for leaf, n in self._held(party, own).items():
            counts[leaf] = counts.get(leaf, 0) + n
        counts[event] = counts.get(event, 0) + 1
        return _compose_counts(counts)

    def would_spend(self, event: DpEvent, party="server", exclude=(), own=False) -> float:
        """Epsilon (by the filter's accountant) after releasing ``event``, counting what other
        runs' live reservations still hold (and this run's with ``own``)."""
        return self.accountant.epsilon(self._with(event, party, exclude, own), self.delta)

    def within_reservation(self, event: DpEvent, party="server") -> bool:
        """Whether ``event`` fits in what this run's own live reservation still holds."""
        covers = getattr(self.ledger, "covers", None)
        return bool(covers and covers(event, party if self.per_party else None))

    def fits(self, event: DpEvent, party="server", exclude=(), own=False) -> bool:
        """Whether the spend after ``event`` stays within the budget (other runs' live
        reservations counted; this run's own too with ``own``).

        With the ``best`` accountant the minimum over accountants is within budget exactly when
        one of them is, so the cheap ones are asked first and the costly PLD only when needed.
        """
        if math.isinf(self.epsilon):
            return True
        total = self._with(event, party, exclude, own)
        for acc in getattr(self.accountant, "accountants", [self.accountant]):
            if acc.supports(total) and acc.epsilon(total, self.delta) <= self.epsilon:
                return True
        return False

    def spent(self, party=None, exclude=()) -> float:
        counts = self.ledger.counts(party if self.per_party else None, exclude)
        ev = _compose_counts(counts)
        return 0.0 if ev is None else self.accountant.epsilon(ev, self.delta)

    def check_relation(self, event: DpEvent) -> None:
        """Refuse (ValueError, nothing written) an event whose neighbouring relation differs from
        the releases already in the ledger: spends under add/remove and replace-one neighbours do
        not compose, so appending it would leave a ledger no accountant can verify (a sparse run
        on a vertical run's ledger)."""
        relations = getattr(self.ledger, "relations", None)
        if relations is None:
            return
        have = relations()
        new = neighboring_of(event)
        if have and new not in have:
            where = getattr(self.ledger, "path", None)
            raise ValueError(
                f"ledger {where!r} holds releases under the {' and '.join(sorted(have))} "
                f"neighbouring relation; this run's releases are under {new}: their spends do not "
                "compose, use another ledger" if where else
                f"the ledger holds releases under {' and '.join(sorted(have))} neighbours, this "
                f"release is under {new}: their spends do not compose")

    def charge(self, event: DpEvent, *, party="server", round: int = 0, note: str = "") -> LedgerRecord:
        """Record ``event`` durably if it fits; a release inside this run's own reservation
        always does (the reservation was checked with everything else when it was made)."""
        with self.ledger.transaction():
            self.check_relation(event)
            if self.within_reservation(event, party):
                return self.ledger.append(event, party=party, round=round, note=note)
            if self.ledger.run_id in getattr(self.ledger, "live_reservations", dict)():
                # The run releases something its plan did not hold (its plan was not a leaf-wise
                # worst case): its reservation ends here, and from now on each release is held
                # to everything else, as without reservations.  Counting both the reservation and
                # the release would count the same spend twice.
                self.ledger.end_reservation(note="a release outside the reservation: held "
                                                 "release by release from here")
            if not self.fits(event, party):
                before, after = self.spent(party), self.would_spend(event, party)
                raise BudgetExceeded(
                    f"release refused: it would take the spend from epsilon={before:.6g} to "
                    f"{after:.6g}, past the budget epsilon={self.epsilon:g} at "
                    f"delta={self.delta:g} ({self.accountant.name} accountant); nothing was "
                    "released", spent=before, would_spend=after, budget=(self.epsilon, self.delta))
            return self.ledger.append(event, party=party, round=round, note=note)

    def check_plan(self, planned: DpEvent, *, party="server", exclude=(), advice=None,
                   reserve: bool = True) -> float:
        """Refuse a run whose whole planned spend ``planned`` does not fit in what remains, and
        reserve it when it does.

        What remains is the budget after the ledger's releases and what the other runs' live
        reservations still hold.  On success (and with ``reserve``, on a ledger file) the plan,
        minus ``exclude``, is written as this run's reservation under the same lock: later
        releases inside it are always allowed; end it with :meth:`Ledger.end_reservation` (or
        ``Ledger.reservation_scope``) when the run ends.  Returns the spend after the plan.  On
        refusal raises :class:`BudgetExceeded` naming the spend so far, what remains, what the
        plan needs and ``advice()`` (a callable returning text such as the largest run that
        fits; called only on refusal).  ``exclude``: records already in the ledger that the plan
        covers again (a resumed run's replayed releases).
        """
        if math.isinf(self.epsilon):
            return 0.0
        with self.ledger.transaction():
            self.check_relation(planned)
            if self.fits(planned, party, exclude):
                after = self.would_spend(planned, party, exclude)
                if reserve and getattr(self.ledger, "path", None) is not None:
                    self.ledger.reserve(_minus(planned, exclude), party=party,
                                        note="worst-case plan")
                return after
            before = self.spent(party, exclude)
            after = self.would_spend(planned, party, exclude)
            held = self._held(party, False)
        try:
            hint = advice() if advice is not None else ""
        except (ValueError, ArithmeticError):
            # The advice (what would fit) searches noise and epsilon with the accountant; on a
            # ledger spent to its last 1e-9 that search can fail ("could not bracket").  The
            # refusal with its numbers is the answer, so it is never replaced by that failure.
            hint = "the budget is used up: nothing fits"
        scope = f"party {party}'s" if self.per_party else "the"
        others = ""
        if held:
            eps_held = self.accountant.epsilon(_compose_counts(held), self.delta)
            others = f", {eps_held:.6g} held by other runs' reservations"
        raise BudgetExceeded(
            f"run refused before its first release: {scope} budget is epsilon={self.epsilon:g} "
            f"at delta={self.delta:g}, {before:.6g} spent{others}, "
            f"{max(self.epsilon - before, 0):.6g} remaining; this run's planned releases would "
            f"take the spend to {after:.6g} ({self.accountant.name} accountant)"
            + (f"; {hint}" if hint else "")
            + "; nothing was released", spent=before, would_spend=after,
            budget=(self.epsilon, self.delta))


def _minus(planned: DpEvent, exclude) -> DpEvent:
    """``planned`` without the leaves of ``exclude`` (records it covers again)."""
    counts = dict(flatten(planned))
    for r in exclude:
        for leaf, n in flatten(r.event):
            if leaf in counts:
                counts[leaf] -= n
    return _compose_counts({k: v for k, v in counts.items() if v > 0}) or planned
