"""Audit of the LDP-FedP3 local step through vflpriv.horizontal.fedp3 (vflpriv.audit.horizontal).

False-failure rates (seeds are fixed, so CI is deterministic; the rates say how likely a correct
implementation is to fail on a fresh seed):
* the law check: two Kolmogorov-Smirnov tests at level 1e-3 each, <= 2e-3 together;
* each honest audit: a Clopper-Pearson bound at confidence 0.95, <= 0.05;
* the mis-calibrated clients draw a quarter of the claimed noise, or clip at three times the
  claimed norm: their true epsilon is several times the claim of 2, which 2e4 samples per side
  resolve (measured 4.34 for the quarter noise, 3.49 for the 3x clipping norm).
"""
import dataclasses
import math

import numpy as np
import pytest

pytest.importorskip("torch")

from scipy import stats  # noqa: E402

from accounting import PoissonSubsampledGaussian, get_accountant  # noqa: E402
from vflpriv.audit import audit_mechanism, registered, run_suite, unavailable  # noqa: E402
import vflpriv.audit as va  # noqa: E402
from vflpriv.audit.horizontal import make_local_step  # noqa: E402


@pytest.fixture(scope="module")
def honest():
    return make_local_step()


@pytest.fixture(scope="module")
def honest_draws(honest):
    """2e4 runs per side of the honest step (20 s of per-sample steps), drawn once from the
    stream the honest audit at seed 5 draws from: the law test and the audit check different
    properties of the same draws, each at its own stated false-failure rate."""
    return honest.sample(20_000, va._rng_for(5, honest.name))


def test_event_and_claim_come_from_the_accountant(honest):
    ev = honest.event
    assert isinstance(ev, PoissonSubsampledGaussian)
    assert ev.sample_rate == 0.5 and ev.neighboring == "add_remove"
    claim = get_accountant("best").epsilon(ev, honest.delta)
    assert claim == pytest.approx(2.0, abs=1e-3)          # z calibrated to the target
    assert "fedp3_local_step" in registered()


def test_event_is_what_fedp3_charges_per_step(tmp_path):
    # FedP3 charges SelfComposed(PoissonSubsampledGaussian(z, q), K) per round with q = b / m;
    # one step of it is the audited event type with the same neighbouring relation.
    from accounting import SelfComposed
    from vflpriv.horizontal.fedp3 import FedP3
    from vflpriv.horizontal.partition import ClientData

    rng = np.random.default_rng(0)
    X = rng.normal(size=(8, 4)).astype(np.float32)
    y = rng.integers(0, 2, 8)
    client = ClientData(X, y, X, y)
    model = FedP3(model="mlp", scheme="fedavg", rounds=1, local_steps=1, batch_size=4,
                  epsilon=2.0, delta=1e-5, clip=0.1, accountant="best",
                  ledger=str(tmp_path / "fedp3.ledger"), seed=0)
    model.fit([client], n_classes=2)
    from accounting import read_ledger
    records = read_ledger(model.ledger_.path).records
    assert len(records) == 1
    ev = records[0].event
    assert isinstance(ev, SelfComposed) and ev.count == 1
    assert isinstance(ev.event, PoissonSubsampledGaussian)
    assert ev.event.sample_rate == 0.5 and ev.event.neighboring == "add_remove"
    # same target, q, accountant and one step: the same calibrated noise multiplier as the audit's
    assert ev.event.noise_multiplier == pytest.approx(make_local_step().event.noise_multiplier,
                                                      rel=1e-3)


def test_released_projection_has_the_event_law(honest, honest_draws):
    """The engine path (Poisson batch, per-sample clipping at C, noise z C, division by b) gives
    score laws N(0, z^2) on D0 and (1-q) N(0, z^2) + q N(1, z^2) on D1: the score moves by
    exactly the clipped norm C, with probability q."""
    z, q = honest.event.noise_multiplier, honest.event.sample_rate
    d0, d1 = honest_draws
    s0, s1 = honest.score(d0), honest.score(d1)
    assert stats.kstest(s0, stats.norm(0, z).cdf).pvalue > 1e-3

    def mix_cdf(t):
        return (1 - q) * stats.norm.cdf(t, 0, z) + q * stats.norm.cdf(t, 1, z)
    assert stats.kstest(s1, mix_cdf).pvalue > 1e-3
    # and the KS test has power here: the law of a client sampling at twice the rate is rejected
    rate = min(1.0, 2 * q)
    assert stats.kstest(s1, lambda t: (1 - rate) * stats.norm.cdf(t, 0, z)
                        + rate * stats.norm.cdf(t, 1, z)).pvalue < 1e-3


def test_honest_local_step_holds_its_claim(honest, honest_draws):
    def sample(n, rng):                     # the draws audit_mechanism makes here, made once
        assert n == 20_000 and rng.bit_generator.state == \
            va._rng_for(5, honest.name).bit_generator.state
        return honest_draws

    row = audit_mechanism(dataclasses.replace(honest, sample=sample), samples=20_000, seed=5)
    assert row["ok"] and row["lower_bound"] <= row["claimed_epsilon"]
    assert row["lower_bound"] > 0.3        # not vacuous: the pair and score do separate D0, D1


@pytest.mark.parametrize("kw", [{"noise_factor": 0.25}, {"clip_factor": 3.0}],
                         ids=["quarter-noise", "clip-3x"])
def test_miscalibrated_client_is_caught(kw):
    row = audit_mechanism(make_local_step(**kw), samples=20_000, seed=2)
    assert not row["ok"] and row["lower_bound"] > row["claimed_epsilon"]


def test_record_must_be_clipped():
    with pytest.raises(ValueError, match="does not exceed the clipping norm"):
        make_local_step(clip=100.0)


def test_unavailable_mechanisms_are_reported_not_dropped(monkeypatch, capsys):
    from vflpriv.cli.main import main

    registered()
    monkeypatch.setitem(va.UNAVAILABLE, "needs_something", "needs something (pip install it)")
    assert unavailable()["needs_something"].startswith("needs something")
    with pytest.raises(ValueError, match="cannot run here: needs something"):
        run_suite(["needs_something"], samples=100)
    res = run_suite(["laplace"], samples=1000)
    assert res["skipped"] == []          # only an audit of everything lists what it skipped
    assert main(["audit", "--list"]) == 0
    assert "needs_something (unavailable: needs something" in capsys.readouterr().out
    assert main(["audit", "--mechanism", "needs_something"]) == 2
    err = capsys.readouterr().err
    assert "needs_something" in err and "Traceback" not in err
    assert not math.isnan(res["mechanisms"][0]["lower_bound"])


def test_without_torch_the_step_is_listed_and_skipped():
    """An installation without the torch extra: the entry is declared unavailable with the
    reason, an audit of everything reports it as skipped, and the rest still runs."""
    import subprocess
    import sys
    code = (
        "import sys, json\n"
        "class NoTorch:\n"                 # torch is not installed, as far as Python can tell
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'torch' or name.startswith('torch.'):\n"
        "            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, NoTorch())\n"
        "from vflpriv.audit import run_suite, unavailable\n"
        "res = run_suite(['laplace'], samples=1000)\n"
        "print(json.dumps(unavailable()))\n"
        "from vflpriv.cli.main import main\n"
        "sys.exit(main(['audit', '--mechanism', 'fedp3_local_step']))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert '"fedp3_local_step": "needs torch' in proc.stdout
    assert "cannot run here: needs torch" in proc.stderr and "Traceback" not in proc.stderr


# -- the shared runtime's local DP step (FedAvg / FedProx / SCAFFOLD / FedDyn with local DP) ------

def test_runtime_step_is_registered_and_charged_as_the_audited_event(tmp_path):
    from accounting import SelfComposed, read_ledger
    from vflpriv.audit.horizontal import make_runtime_step
    from vflpriv.horizontal.fedavg import FedAvg
    from vflpriv.horizontal.local import LocalConfig
    from vflpriv.horizontal.models import MLP
    from vflpriv.horizontal.partition import FederatedData
    from vflpriv.horizontal.runtime import run

    assert "horizontal_local_step" in registered()
    mech = make_runtime_step()
    rng = np.random.default_rng(0)
    X = rng.normal(size=(8, 4)).astype(np.float32)
    y = rng.integers(0, 2, 8)
    data = FederatedData([(X, y)], X, y, 2, None)
    res = run(FedAvg(), data, lambda: MLP(4, 2, hidden=(4,)), rounds=1, epsilon=2.0, delta=1e-5,
              clip=0.1, accountant="best", ledger=str(tmp_path / "h.ledger"), seed=0,
              local=LocalConfig(epochs=0.5, batch_size=4))
    (rec,) = read_ledger(res.ledger).records
    ev = rec.event
    assert isinstance(ev, SelfComposed) and ev.count == 1
    assert ev.event.sample_rate == 0.5 and ev.event.neighboring == "add_remove"
    assert ev.event.noise_multiplier == pytest.approx(mech.event.noise_multiplier, rel=1e-3)


def test_runtime_step_holds_its_claim_and_a_quarter_noise_client_is_caught():
    from vflpriv.audit.horizontal import make_runtime_step
    row = audit_mechanism(make_runtime_step(), samples=20_000, seed=5)
    assert row["ok"] and 0.3 < row["lower_bound"] <= row["claimed_epsilon"]
    bad = audit_mechanism(make_runtime_step(noise_factor=0.25), samples=20_000, seed=2)
    assert not bad["ok"] and bad["lower_bound"] > bad["claimed_epsilon"]
