"""The distributed discrete Gaussian event (accounting.events.DistributedDiscreteGaussian):
its Renyi curve against a brute-force Renyi divergence of the actual sum of discrete Gaussians,
its place in the accountants, the ledger and plan files (docs/sensitivity.md 5.7)."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from accounting import (Composed, DiscreteGaussian, read_ledger, DistributedDiscreteGaussian, SelfComposed,
                        event_from_dict, get_accountant)


def _log_sum_pmf(total_var, m, half):
    """log pmf of the sum of m independent N_Z(0, total_var / m) on [-half, half], computed in
    log space (no underflow: the tails decide the divergence at large orders)."""
    from scipy.special import logsumexp

    var = total_var / m
    x = np.arange(-2 * half, 2 * half + 1, dtype=np.float64)
    lg = -x * x / (2.0 * var)
    lg -= logsumexp(lg)                          # one summand's log pmf, support 4 half + 1
    out, xs = lg, x
    for _ in range(m - 1):                       # log of the convolution, term by term
        z = np.arange(-2 * half, 2 * half + 1)
        terms = out[None, :] + np.interp(z[:, None] - xs[None, :], x, lg, left=-np.inf,
                                         right=-np.inf)
        out, xs = logsumexp(terms, axis=1), z.astype(np.float64)
    keep = np.abs(xs) <= half
    return out[keep]


def _renyi_shift(logp, shift, alpha):
    """D_alpha(P + shift || P) = 1/(alpha-1) log sum_z P(z-shift)^alpha P(z)^(1-alpha), the sum
    over the window where both are known (the window is wide enough that the rest is < e^-200)."""
    from scipy.special import logsumexp

    lq, lp = logp[:-shift], logp[shift:]
    return logsumexp(alpha * lq + (1.0 - alpha) * lp) / (alpha - 1.0)


def _window(s2, shift, alpha):
    return int(alpha * shift + 60 * math.sqrt(s2)) + 60


@pytest.mark.parametrize("s2,m,shift", [(1.0, 2, 1), (2.0, 2, 1), (1.0, 3, 2), (4.0, 2, 3),
                                        (0.6, 2, 1)])
@pytest.mark.parametrize("alpha", [1.5, 2.0, 8.0, 32.0])
def test_curve_is_above_the_brute_force_divergence(s2, m, shift, alpha):
    """At small variances, where tau matters, the event's alpha mu^2 / 2 bounds the exact
    divergence of the sum of m discrete Gaussians shifted by an integer (brute force)."""
    exact = _renyi_shift(_log_sum_pmf(s2, m, _window(s2, shift, alpha)), shift, alpha)
    ev = DistributedDiscreteGaussian(math.sqrt(s2), float(shift), summands=m, dimension=1)
    bound = alpha * ev.mu ** 2 / 2.0
    assert exact <= bound * (1 + 1e-9), (exact, bound)
    # and the plain Gaussian curve is NOT always enough at such variances: the correction counts
    assert ev.mu > shift / math.sqrt(s2)


@settings(max_examples=40, deadline=None)
@given(st.floats(0.6, 6.0), st.integers(1, 4), st.floats(1.1, 16.0))
def test_curve_bounds_the_sum_of_two(s2, shift, alpha):
    logp = _log_sum_pmf(s2, 2, _window(s2, shift, alpha))
    ev = DistributedDiscreteGaussian(math.sqrt(s2), float(shift), summands=2)
    assert _renyi_shift(logp, shift, alpha) <= alpha * ev.mu ** 2 / 2.0 * (1 + 1e-9)


def test_at_the_rings_scale_the_correction_vanishes():
    """At s = 3 2^12 per lattice step tau underflows: mu is the Gaussian's, rounded up."""
    ev = DistributedDiscreteGaussian(3.0, 1.0, summands=2, dimension=5000,
                                     granularity=2.0 ** -12)
    assert 0 < ev.tau < 1e-300
    assert 1 / 3 < ev.mu <= (1 / 3) * (1 + 1e-15)
    rdp = get_accountant("rdp")
    a = rdp.epsilon(SelfComposed(ev, 200), 1e-6)
    b = rdp.epsilon(SelfComposed(DiscreteGaussian(3.0, 1.0), 200), 1e-6)
    assert b <= a <= b * (1 + 1e-12)


def test_outside_the_proposition_there_is_no_guarantee():
    ev = DistributedDiscreteGaussian(0.5, 1.0, summands=2)       # variance 1/8 per summand
    assert math.isinf(ev.mu)
    assert math.isinf(get_accountant("rdp").epsilon(ev, 1e-6))


def test_only_the_renyi_accountants_support_it():
    ev = DistributedDiscreteGaussian(3.0, 1.0, granularity=2.0 ** -12)
    assert get_accountant("rdp").supports(ev) and get_accountant("best").supports(ev)
    for name in ("pld", "optimal", "basic", "advanced"):
        assert not get_accountant(name).supports(ev), name


@pytest.mark.parametrize("field,value", [("summands", 0), ("dimension", 1.5),
                                         ("granularity", -1.0), ("summands", True)])
def test_bad_fields_are_refused_by_name(field, value):
    kw = dict(sigma=3.0, sensitivity=1.0)
    kw[field] = value
    with pytest.raises(ValueError, match=field):
        DistributedDiscreteGaussian(**kw)


def test_round_trip_and_ledger_pool(tmp_path):
    from accounting import Ledger

    ev = DistributedDiscreteGaussian(3.0, 1.0, summands=2, dimension=7,
                                     granularity=2.0 ** -12, neighboring="replace_one")
    assert event_from_dict(ev.to_dict()) == ev
    path = str(tmp_path / "l")
    led = Ledger(path)
    for _ in range(3):
        led.append(ev, party="server", note="a distributed discrete Gaussian")
    led.append(DiscreteGaussian(2.0, 1.0, neighboring="replace_one"), note="a discrete one")
    want = get_accountant("rdp").epsilon(
        Composed((SelfComposed(ev, 3), DiscreteGaussian(2.0, 1.0, neighboring="replace_one"))),
        1e-6)
    assert read_ledger(path).spend(1e-6, "rdp") == pytest.approx(want, rel=1e-12)


def test_a_reservation_pools_it_with_its_proven_mu(tmp_path):
    """What is left of a reservation of 3 releases after 1 is one discrete Gaussian pool of
    2 mu'^2 (mu' the event's proven mu, not sensitivity / sigma)."""
    from accounting import Ledger

    ev = DistributedDiscreteGaussian(0.9, 1.0, summands=2, dimension=3)   # tau matters here
    assert ev.mu > 1.0 / 0.9 * 1.01
    led = Ledger(str(tmp_path / "l"))
    rec = led.reserve(SelfComposed(ev, 3), party="server")
    led.append(ev, party="server")
    left = led.remaining(rec.run_id, party="server")
    (pooled, n), = left.items()
    assert isinstance(pooled, DiscreteGaussian) and n == 1
    assert pooled.mu == pytest.approx(math.sqrt(2) * ev.mu, rel=1e-12)


def test_audit_entry_stays_below_its_claim():
    """``vflpriv audit --mechanism distributed_discrete_gaussian``: the empirical lower bound
    from the exact samplers' sum is below the claim (a bound above it would refute the claim;
    false-failure rate 1e-2: the audit's confidence 0.99)."""
    from vflpriv.audit import audit_mechanism, registered

    row = audit_mechanism(registered()["distributed_discrete_gaussian"](), samples=20000,
                          seed=0, confidence=0.99)
    assert row["claimed_epsilon"] == pytest.approx(1.0, abs=1e-3)
    assert row["ok"] and row["lower_bound"] <= row["claimed_epsilon"]
    assert row["lower_bound"] > 0.1         # the sampler adds the noise it claims, not more


def test_audit_md_quotes_the_committed_audit():
    """docs/audit.md's figure is docs/audit/distributed_discrete_gaussian.json."""
    import json
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[1]
    d = json.loads((root / "docs/audit/distributed_discrete_gaussian.json").read_text())
    m = d["mechanisms"][0]
    assert (m["name"], m["samples"], d["seed"]) == ("distributed_discrete_gaussian", 100000, 0)
    page = " ".join((root / "docs/audit.md").read_text().split())
    assert (f"docs/audit/distributed_discrete_gaussian.json`: lower bound "
            f"{m['lower_bound']:.4f} against the claim {m['claimed_epsilon']:.1f} "
            f"({m['seconds']:.1f} s)") in page
    page = " ".join((root / "docs/sensitivity.md").read_text().split())
    assert f"lower bound {m['lower_bound']:.4f} against the claim 1.0" in page


def test_a_plan_file_with_it_is_certified_by_rdp(tmp_path, capsys):
    """`vflpriv certify` reads the mechanism from a plan file (integers kept as integers) and
    certifies by the RDP bound of the same event; a fractional summand count exits 2 naming
    it, before anything is computed."""
    from vflpriv.cli.main import main

    plan = tmp_path / "p.toml"
    body = ('name = "logistic path"\ndelta = 1e-6\ntarget_epsilon = 1.0\n'
            'neighboring = "replace_one"\n\n[[release]]\n'
            'mechanism = "distributed_discrete_gaussian"\nsigma = 548.18\nsensitivity = 8.555\n'
            'summands = {m}\ndimension = 10\ngranularity = 5.9604644775390625e-08\ncount = 200\n')
    plan.write_text(body.format(m=2))
    assert main(["certify", str(plan)]) == 0
    out = capsys.readouterr().out
    ev = DistributedDiscreteGaussian(548.18, 8.555, summands=2, dimension=10,
                                     granularity=2.0 ** -24, neighboring="replace_one")
    want = get_accountant("rdp").epsilon(SelfComposed(ev, 200), 1e-6)
    assert f"best          {want:.6f}   (rdp)" in out and "CERTIFIED" in out
    plan.write_text(body.format(m=2.5))
    assert main(["certify", str(plan)]) == 2
    assert "summands must be an integer >= 1, got 2.5" in capsys.readouterr().err
