"""Local (record-level, per-client) DP for the horizontal runtime: the noise plan from the
accountant and the per-client budget charge (torch-free).

A client with m records, expected batch b and K local steps per round runs K DP-SGD steps per round
it takes part in, each a ``PoissonSubsampledGaussian(z, q)`` release with q = b/m w.r.t. its own
records (add/remove neighbours).  Over the run it can take part in every round, so z is calibrated
by :func:`accounting.calibrate` such that ``SelfComposed(PoissonSubsampledGaussian(z, q), R K)``
is (epsilon, delta)-DP.  Before a round's noise is drawn, the round's
``SelfComposed(PoissonSubsampledGaussian(z, q), K)`` is charged to the client's account in an
:class:`accounting.BudgetFilter`; a charge that would overspend is refused and the client stops
taking part.  The spend reported is the filter's, recomputed by the accountant from the ledger.
"""
from __future__ import annotations

import math

from accounting import BudgetExceeded, BudgetFilter, Ledger, PoissonSubsampledGaussian, \
    SelfComposed, calibrate


def noise_multiplier(epsilon, delta, q, total_steps, accountant="rdp") -> float:
    """z such that ``total_steps`` Poisson(q) DP-SGD steps are (epsilon, delta)-DP (the same
    function for the server in process and for a remote client computing its own noise)."""
    try:
        return calibrate(lambda z: SelfComposed(PoissonSubsampledGaussian(z, q), total_steps),
                         epsilon, delta, guess=1.0, accountant=accountant, decreasing=True).value
    except ValueError as exc:
        from ..errors import uncalibrated

        raise uncalibrated(exc, epsilon, delta, accountant) from None


class LocalDP:
    def __init__(self, epsilon: float, delta: float, clip: float, rounds: int, *,
                 accountant: str = "rdp", ledger=None, prefix: str = "horizontal-"):
        self.epsilon, self.delta, self.clip, self.rounds = epsilon, delta, clip, rounds
        self.accountant = accountant
        led = ledger if isinstance(ledger, Ledger) else None
        if led is None:
            path = ledger
            if path is None:
                import tempfile
                path = tempfile.mkstemp(prefix=prefix, suffix=".ledger")[1]
                open(path, "w").close()
            led = Ledger(path, budget={"epsilon": epsilon, "delta": delta, "per_party": True,
                                       "accountant": accountant})
        self.ledger = led
        # the ledger's header budget governs (a run cannot raise it by asking for more)
        b_eps, b_delta = led.governing_budget(epsilon, delta, per_party=True)
        self.filter = BudgetFilter(led, b_eps, b_delta, accountant=accountant, per_party=True)
        self._z = {}

    def noise_multiplier(self, q: float, steps: int) -> float:
        """z such that R rounds of ``steps`` Poisson(q) DP-SGD steps are (epsilon, delta)-DP."""
        key = (q, steps)
        if key not in self._z:
            self._z[key] = noise_multiplier(self.epsilon, self.delta, q, self.rounds * steps,
                                            self.accountant)
        return self._z[key]

    def round_event(self, q: float, steps: int):
        """One round of a client: ``SelfComposed(PoissonSubsampledGaussian(z, q), steps)``."""
        return SelfComposed(PoissonSubsampledGaussian(self.noise_multiplier(q, steps), q), steps)

    def charge_event(self, event, client: int, rnd: int, note: str) -> bool:
        """Charge ``event`` to client ``client``; False (nothing charged) if it would overspend."""
        try:
            self.filter.charge(event, party=f"client-{client}", round=rnd, note=note)
        except BudgetExceeded:
            return False
        return True

    def refuse_if_spent(self, first_rounds: dict) -> None:
        """Refuse the run before any round (:class:`BudgetExceeded`, nothing charged) when no
        client can pay even its first round (``first_rounds``: client -> that round's event):
        a run on a spent ledger would otherwise go through every round with every client
        refused, release nothing and exit 0.  A client that can pay takes part as usual, and
        one whose budget runs out later stops then (module docstring)."""
        f = self.filter
        if math.isinf(f.epsilon) or any(f.fits(ev, party=f"client-{k}")
                                        for k, ev in first_rounds.items()):
            return
        k = min(first_rounds, key=lambda c: f.spent(f"client-{c}"))
        spent = f.spent(f"client-{k}")
        after = f.would_spend(first_rounds[k], party=f"client-{k}")
        raise BudgetExceeded(
            f"run refused before its first release: no client's budget can pay one round; "
            f"each client's budget is epsilon={f.epsilon:g} at delta={f.delta:g}, the least "
            f"spent (client-{k}) has {spent:.6g} spent, {max(f.epsilon - spent, 0):.6g} "
            f"remaining, and its first round would take it to {after:.6g} "
            f"({f.accountant.name} accountant); nothing was released",
            spent=spent, would_spend=after, budget=(f.epsilon, f.delta))

    def spent(self, client: int) -> float:
        return self.filter.spent(f"client-{client}")
