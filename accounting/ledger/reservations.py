"""Reservations (module docstring of :mod:`accounting.ledger`): a run's whole plan written before
its first release, what a release consumes of it, and its end; ``ends_reservations`` ends the
reservations of the runs a call started.
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
import math
import os
import uuid
import weakref
from fractions import Fraction

from ..events import DiscreteGaussian, DpEvent, Gaussian
from .format import END, RESERVE, LedgerRecord
from .pools import (_LATTICE_GAUSSIAN, _LATTICE_TV, _gaussian_pools, _leaf_counts, _pool_key,
                    _pool_needs, _pooled, dominates)


#: the Ledger objects that reserved inside the innermost :func:`ends_reservations` call
_SCOPE: contextvars.ContextVar = contextvars.ContextVar("vflpriv_ledger_scope", default=None)


class Reservations:
    """The reservation half of a :class:`~.file.Ledger` (module docstring): a run's whole
    worst-case plan written before its first release, what it still holds, what a release
    consumes of it, and its end."""

    def _reservation_state(self) -> dict:
        # {run_id: {party: (leaf counts, time, seq)}, ("used", run_id): {party: leaf counts}}
        if not hasattr(self, "_res"):
            self._res = {}
        return self._res

    def live_reservations(self) -> dict:
        """{run_id: {party: (reserved leaf counts, time, seq)}} of runs that have not ended."""
        return {k: v for k, v in self._reservation_state().items() if not isinstance(k, tuple)}

    def remaining(self, run_id: str, party=None) -> dict:
        """What a live reservation still holds, as {leaf event: count}: the reserved leaves minus
        the units the run's releases since have used (of one party, or pooled over its
        parties).  Gaussian leaves are held as one pool of mu^2 per neighbouring relation
        (Gaussians compose exactly: mu^2 adds, Dong, Roth, Su 2022), returned as one Gaussian
        with the remaining mu."""
        res = self._reservation_state()
        held = res.get(run_id, {})
        used = res.get(("used", run_id), {})
        total: dict = {}
        pools: dict = {}
        for p, (leaves, _, _) in held.items():
            if party is not None and p != str(party):
                continue
            per = used.get(p, {})
            for leaf, n in leaves.items():
                if _pooled(leaf):
                    continue
                n -= per.get(leaf, 0)
                if n > 0:
                    total[leaf] = total.get(leaf, 0) + n
            for key, pool in _gaussian_pools(leaves).items():
                left = pool - per.get(key, 0)
                if left > 0:
                    pools[key] = pools.get(key, 0) + left
        for (name, rel), left in pools.items():
            if name in (_LATTICE_GAUSSIAN, _LATTICE_TV):
                continue        # returned as the discrete pool's Renyi charge (an upper bound)
            cls = Gaussian if name == "mu2" else DiscreteGaussian
            g = cls(1.0 / math.sqrt(float(left)), neighboring=rel)
            total[g] = total.get(g, 0) + 1
        return total

    def covers(self, event, party=None, run_id=None) -> bool:
        """Whether a run's live reservation (default: this run's) still holds ``event``."""
        run_id = self.run_id if run_id is None else run_id
        if run_id not in self.live_reservations():
            return False
        return self._consume(run_id, party, event, commit=False)

    def _consume(self, run_id, party, event, commit) -> bool:
        """Take ``event``'s leaves from the run's reservation: Gaussians from the reserved mu^2
        pool (exact sums of squares, as fractions); other leaves from the same leaf, else from a
        reserved leaf that dominates it (``dominates``).  The party's own reservation first,
        then any of the run's.  Returns whether everything was covered; with ``commit`` the
        units are used."""
        res = self._reservation_state()
        held = res.get(run_id, {})
        used = res.setdefault(("used", run_id), {}) if commit else {
            p: dict(v) for p, v in res.get(("used", run_id), {}).items()}
        if party is not None and (self.budget or {}).get("per_party"):
            order = [str(party)] if str(party) in held else []   # a party's own budget only
        else:
            order = ([str(party)] if party is not None and str(party) in held else []) + \
                [p for p in held if party is None or p != str(party)]
        covered = True
        for leaf, n in _leaf_counts(event).items():
            if _pooled(leaf) and getattr(leaf, "resolution", None) is not None:
                covered = self._consume_lattice(leaf, n, held, used, order) and covered
                continue
            if _pooled(leaf):
                need = n * Fraction(leaf.mu) ** 2
                key = _pool_key(leaf)
                for p in order:
                    pool = _gaussian_pools(held[p][0]).get(key, 0)
                    per = used.setdefault(p, {})
                    take = min(need, pool - per.get(key, 0))
                    if take > 0:
                        per[key] = per.get(key, 0) + take
                        need -= take
                    if not need:
                        break
                covered = covered and need == 0
                continue
            for p in order:
                reserved = held[p][0]
                per = used.setdefault(p, {})
                for cand in ([leaf] if leaf in reserved else []) + \
                        [r for r in reserved if r != leaf and dominates(r, leaf)]:
                    take = min(n, reserved[cand] - per.get(cand, 0))
                    if take > 0:
                        per[cand] = per.get(cand, 0) + take
                        n -= take
                    if not n:
                        break
                if not n:
                    break
            covered = covered and n == 0
        return covered

    @staticmethod
    def _consume_lattice(leaf, n, held, used, order) -> bool:
        """Take a discrete Gaussian with its lattice stated from the reservation: from the
        lattice pools a share that fits in all three (Renyi mu^2, Gaussian mu^2, TV), party by
        party; what is left from the plain discrete pool's Renyi mu^2 (a reservation that holds
        a plain discrete Gaussian was checked by its Renyi bound alone, since no other
        accountant supports one, and the Renyi mu^2 is all that bound sees).  Whether all of
        it was covered."""
        needs = _pool_needs(leaf, n)
        left = Fraction(1)                           # the share of the release still to cover
        for p in order:
            pools = _gaussian_pools(held[p][0])
            per = used.setdefault(p, {})
            share = left
            for key, amount in needs.items():
                if amount > 0:
                    share = min(share, max(Fraction(0), pools.get(key, 0) - per.get(key, 0))
                                / amount)
            if share > 0:
                for key, amount in needs.items():
                    per[key] = per.get(key, 0) + share * amount
                left -= share
            if not left:
                return True
        need = left * Fraction(leaf.mu) ** 2
        key = (f"mu2:{DiscreteGaussian.kind}", leaf.neighboring)
        for p in order:
            pool = _gaussian_pools(held[p][0]).get(key, 0)
            per = used.setdefault(p, {})
            take = min(need, pool - per.get(key, 0))
            if take > 0:
                per[key] = per.get(key, 0) + take
                need -= take
            if not need:
                return True
        return False

    def reserved_counts(self, party=None, exclude_run=None) -> dict:
        """{leaf: count} still held by every live reservation (of one party), except
        ``exclude_run``'s."""
        total: dict = {}
        for run in self.live_reservations():
            if run == exclude_run:
                continue
            for leaf, n in self.remaining(run, party).items():
                total[leaf] = total.get(leaf, 0) + n
        return total

    def reserve(self, event: DpEvent, *, party="server", note: str = "") -> LedgerRecord:
        """Write this run's reservation of ``event`` (its whole remaining plan) durably.  Call it
        under :meth:`transaction` after the budget check (``BudgetFilter.check_plan`` does)."""
        record = self._write_line(event, RESERVE, party=party, round=0, note=note)
        self._own_reservation()
        return record

    def _own_reservation(self):
        """This object's run now holds a live reservation it must end: the innermost
        :func:`ends_reservations` scope ends it, else this object's finalizer."""
        scope = _SCOPE.get()
        if scope is not None and self not in scope:
            scope.append(self)
        if self.path is not None and getattr(self, "_finalizer", None) is None:
            # last resort when no scope ends it: the run is over when its Ledger object is
            # gone (or the interpreter exits); a killed process leaves it for the CLI
            self._finalizer = weakref.finalize(self, _end_quietly, type(self), self.path,
                                               self.run_id, self.lock_timeout)

    def take_over_reservation(self) -> bool:
        """A resumed run (this ledger opened under the interrupted run's id) takes over that
        run's live reservation, so it ends when this run ends, like one it made.  A resume
        whose remaining plan is checked writes a new reservation that replaces it anyway; one
        with nothing left to check (killed after its last checkpoint) would otherwise leave the
        killed run's reservation live, blocking the unused part of its plan until someone
        expired it by hand.  Returns whether there was one."""
        with self.transaction():
            if self.run_id not in self.live_reservations():
                return False
        self._own_reservation()
        return True

    def end_reservation(self, run_id: str | None = None, *, note: str = "run ended") -> bool:
        """End a run's live reservation (default: this ledger's run), releasing what it did not
        use.  Returns whether there was one."""
        run_id = self.run_id if run_id is None else str(run_id)
        with self.transaction():
            if run_id not in self.live_reservations():
                return False
            self._write_line(None, END, party="-", round=0, note=note, run_id=run_id)
        if run_id == self.run_id and getattr(self, "_finalizer", None) is not None:
            self._finalizer.detach()
            self._finalizer = None
        return True

    @contextlib.contextmanager
    def reservation_scope(self):
        """Ends this run's reservation when the block exits, by return or by exception."""
        try:
            yield self
        finally:
            self.close_reservation()

    def close_reservation(self, note: str = "run ended") -> None:
        """End this run's reservation if it is live, through a fresh view of the file (another
        process of this run, e.g. a Flower ServerApp, may have appended its releases since this
        object last looked).  Never raises: the run's own outcome is what the caller reports;
        a reservation that could not be ended stays visible to ``vflpriv ledger``."""
        if self.path is None or getattr(self, "_finalizer", None) is None:
            return
        self._finalizer()              # runs _end_quietly once and detaches itself


def ends_reservations(fn):
    """Decorator for a run's entry point: every reservation a Ledger makes during the call is
    ended when it returns or raises (what the run did not use is released).  Nested calls end
    their own; a crash (SIGKILL, power loss) leaves the reservation for ``vflpriv ledger``."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        token = _SCOPE.set([])
        try:
            return fn(*args, **kwargs)
        finally:
            ledgers = _SCOPE.get()
            _SCOPE.reset(token)
            for led in ledgers:
                led.close_reservation()
    return wrapper


def _end_quietly(ledger_class, path, run_id, lock_timeout):
    with contextlib.suppress(Exception):
        if os.path.isfile(path):
            ledger_class(path, run_id=uuid.uuid4().hex,
                         lock_timeout=lock_timeout).end_reservation(
                run_id, note="run ended (ledger closed)")
