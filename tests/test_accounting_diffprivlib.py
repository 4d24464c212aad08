"""Cross-checks of the ledger's arithmetic against diffprivlib (IBM), an independent implementation.

diffprivlib's ``BudgetAccountant`` composes (epsilon, delta) spends: epsilon by the sum (slack 0),
delta as 1 - prod(1 - delta_i) (never more than the sum our basic accountant charges), and with a
slack the smallest of the sum, Dwork-Rothblum-Vadhan and Kairouz-Oh-Viswanath's bounds.  Its
mechanisms' own calibrations (Laplace scale, analytic Gaussian sigma) check our events' epsilons.
Nothing here is random.
"""
import math
import random

import pytest

from accounting import (ApproxDP, Composed, Laplace, Ledger, PureDP, ReportNoisyMax, SelfComposed,
                        get_accountant, read_ledger)
from accounting.accountants.analysis.dp_params import dp_params

dpl = pytest.importorskip("diffprivlib")


def _leaves(event):
    """The (epsilon, delta) of every release in ``event``, one per release."""
    if isinstance(event, SelfComposed):
        return _leaves(event.event) * event.count
    if isinstance(event, Composed):
        return [x for e in event.events for x in _leaves(e)]
    return [dp_params(event)]


def _random_events(seed, n=60):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        kind = rng.choice(["pure", "laplace", "rnm", "approx", "composed"])
        if kind == "pure":
            out.append(PureDP(rng.uniform(0.01, 0.5)))
        elif kind == "laplace":
            out.append(Laplace(rng.uniform(1, 20), rng.uniform(0.1, 2)))
        elif kind == "rnm":
            out.append(ReportNoisyMax(rng.choice(["laplace", "gumbel", "exponential"]),
                                      rng.uniform(1, 20), rng.uniform(0.1, 2)))
        elif kind == "approx":
            out.append(ApproxDP(rng.uniform(0.01, 0.3), rng.uniform(0, 1e-7)))
        else:
            out.append(SelfComposed(Composed((PureDP(0.05), ApproxDP(0.02, 1e-8))),
                                    rng.randint(1, 4)))
    return out


@pytest.mark.parametrize("seed", [0, 1])
def test_ledger_basic_composition_matches_budget_accountant(tmp_path, seed):
    # Write a ledger, read it back, recompute its spend with the basic accountant, and feed the
    # same releases to diffprivlib: epsilon agrees to rounding; our delta (the sum) is at least
    # diffprivlib's 1 - prod(1 - delta_i) and exceeds it by at most sum_{i<j} delta_i delta_j.
    path = tmp_path / "x.ledger"
    led = Ledger(path, budget={"epsilon": 100.0, "delta": 1e-3})
    for i, ev in enumerate(_random_events(seed)):
        led.append(ev, party=f"p{i % 3}", round=i)
    contents = read_ledger(path)
    spends = [x for r in contents.records for x in _leaves(r.event)]
    acc = dpl.BudgetAccountant()
    for e, d in spends:
        acc.spend(e, d)
    theirs = acc.total()                      # Budget: an (epsilon, delta) tuple
    event = contents.event()
    basic = get_accountant("basic")
    d_sum = sum(d for _, d in spends)
    ours_eps = basic.epsilon(event, d_sum * (1 + 1e-9) + 1e-300)   # summation-order rounding
    assert ours_eps == pytest.approx(theirs[0], rel=1e-12)
    ours_delta = basic.delta(event, ours_eps * (1 + 1e-12))
    assert ours_delta == pytest.approx(d_sum, rel=1e-12)
    assert theirs[1] <= ours_delta * (1 + 1e-12)
    assert ours_delta - theirs[1] <= d_sum ** 2 / 2 + 1e-300
    # per party, the same arithmetic on the records of that party
    for party in ("p0", "p1", "p2"):
        ps = [x for r in contents.records if r.party == party for x in _leaves(r.event)]
        a = dpl.BudgetAccountant()
        for e, d in ps:
            a.spend(e, d)
        assert contents.spend(1e-3, "basic", party=party) == pytest.approx(a.total()[0],
                                                                           rel=1e-12)


def test_advanced_composition_brackets_diffprivlib():
    # 100 x 0.1-DP at delta 1e-5: our optimal accountant is exact (KOV), diffprivlib's bound
    # (min of sum, DRV with the tanh drift, KOV's closed form) is valid, so exact <= theirs; our
    # "advanced" uses DRV's looser drift eps (e^eps - 1), so theirs <= ours.
    acc = dpl.BudgetAccountant(slack=1e-5)
    for _ in range(100):
        acc.spend(0.1, 0.0)
    theirs = acc.total()                      # Budget: an (epsilon, delta) tuple
    assert theirs[1] == pytest.approx(1e-5)
    ev = SelfComposed(PureDP(0.1), 100)
    exact = get_accountant("optimal").epsilon(ev, 1e-5)
    ours_adv = get_accountant("advanced").epsilon(ev, 1e-5)
    assert exact == pytest.approx(4.306791, abs=1e-5)
    assert exact <= theirs[0] <= ours_adv
    assert theirs[0] == pytest.approx(5.298110, abs=1e-5)


def test_event_epsilons_match_diffprivlib_mechanisms():
    from diffprivlib.mechanisms import GaussianAnalytic
    from diffprivlib.mechanisms import Laplace as DLaplace

    from accounting.gaussian import gaussian_sigma

    for eps, sens in [(0.5, 2.0), (1.0, 1.0), (3.0, 0.25)]:
        m = DLaplace(epsilon=eps, delta=0.0, sensitivity=sens)
        scale = math.sqrt(m.variance(0.0) / 2)          # Laplace variance 2 b^2
        assert Laplace(scale, sens).epsilon == pytest.approx(eps, rel=1e-12)
    for eps, delta in [(1.0, 1e-5), (0.3, 1e-6), (4.0, 1e-3)]:
        g = GaussianAnalytic(epsilon=eps, delta=delta, sensitivity=1.0)
        assert gaussian_sigma(eps, delta) == pytest.approx(math.sqrt(g.variance(0.0)), rel=1e-9)
