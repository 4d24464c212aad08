"""Audit of one DP-BCFW-AS party-iteration through the engine's Party (vflpriv.audit.vertical).

False-failure rates: each audit is a Clopper-Pearson lower bound at confidence 0.95, so an
honest mechanism fails ``lower <= claim`` with probability <= 0.05 per call; the seeds are fixed,
so CI is deterministic.  The mis-calibrated party draws a quarter of the claimed noise: its true
epsilon is about 4x the claim, far above what 2e4 samples per side resolve.
"""
import pytest

from accounting import flatten, get_accountant
from vflpriv.audit import audit_mechanism, registered
from vflpriv.audit.vertical import make_iteration
from vflpriv.vertical.privacy import plan_event, sensitivities
from vflpriv.optim.losses import SquaredLoss


def test_event_is_what_the_engine_records():
    mech = make_iteration("laplace")
    sens = sensitivities(SquaredLoss(), 1.0, 1.0, 1.0, 8, 1.0)
    rnm, gauss = mech.event.events
    # the engine's own one-round, one-party plan with the same scales
    plan = plan_event("laplace", rnm.scale, gauss.sigma, sens, rounds=1, parties=1)
    assert flatten(mech.event) == flatten(plan)
    assert rnm.epsilon == pytest.approx(1.0)              # 2 Delta_idx / b
    assert get_accountant("optimal").epsilon(gauss, 1e-5) <= 1.0
    assert "dp_bcfw_iteration" in registered()


@pytest.mark.parametrize("noise", ["laplace", "gumbel", "exponential"])
def test_honest_iteration_holds_its_claim(noise):
    row = audit_mechanism(make_iteration(noise), samples=20_000, seed=5)
    assert row["ok"] and row["lower_bound"] <= row["claimed_epsilon"]
    assert row["lower_bound"] > 0.3        # not vacuous: the pair and score do separate D0, D1


def test_miscalibrated_party_is_caught():
    row = audit_mechanism(make_iteration("laplace", noise_factor=0.25), samples=20_000, seed=2)
    assert not row["ok"] and row["lower_bound"] > row["claimed_epsilon"]
