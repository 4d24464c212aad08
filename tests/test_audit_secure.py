"""Audit of dp-bcfw-secure's selection and cross-product release (vflpriv.audit.secure).

False-failure rates: each audit is a Clopper-Pearson lower bound at confidence 0.95, so an
honest mechanism fails ``lower <= claim`` with probability <= 0.05 per call; the seeds are fixed,
so CI is deterministic.  The mis-calibrated variants draw a quarter of the claimed noise (true
epsilon about 4x the claim), which 2e4 samples per side resolve (measured lower bounds 1.8 and 2.6
against claims of 1).
"""
import pytest

from accounting import get_accountant
from vflpriv.audit import audit_mechanism, registered
from vflpriv.audit.secure import make_release, make_selection
from vflpriv.vertical.secure import privacy as SP


def test_events_are_what_the_protocol_records():
    sel = make_selection("gumbel")
    sens = SP.sensitivities(1.0, 1.0, 1.0, 8, SP.row_clips(1.0, None, [4, 1]))
    assert sel.event.sensitivity == pytest.approx(sens.index)
    assert sel.event.epsilon == pytest.approx(1.0)
    rel = make_release()
    assert rel.event.sensitivity == pytest.approx(2.0)          # 2 B_a C with B_a = C = 1
    assert get_accountant("best").epsilon(rel.event, 1e-5) <= 1.0 + 1e-9
    assert {"dp_bcfw_secure_selection", "dp_bcfw_secure_release"} <= set(registered())


@pytest.mark.parametrize("make", [lambda: make_selection("gumbel"),
                                  lambda: make_selection("laplace"), make_release])
def test_honest_releases_hold_their_claim(make):
    row = audit_mechanism(make(), samples=20_000, seed=3)
    assert row["ok"] and row["lower_bound"] > 0.3


@pytest.mark.parametrize("make", [lambda: make_selection("gumbel", noise_factor=0.25),
                                  lambda: make_release(noise_factor=0.25)])
def test_miscalibrated_releases_are_caught(make):
    row = audit_mechanism(make(), samples=20_000, seed=2)
    assert not row["ok"] and row["lower_bound"] > row["claimed_epsilon"]
