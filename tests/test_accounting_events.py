"""Privacy events: validation (every bad field raises ValueError naming it), serialisation,
flattening, and the import isolation of the ``accounting`` package."""
import math
import subprocess
import sys

import pytest

from accounting import (ApproxDP, Composed, Exponential, Gaussian, Laplace,
                        PoissonSubsampledGaussian, PureDP, ReportNoisyMax, SelfComposed, ZCDP,
                        calibrate, event_from_dict, flatten, get_accountant, report)
from accounting.accountants.pld import PLDAccountant
from accounting.accountants.rdp import RDPAccountant

NAN, INF = math.nan, math.inf
BAD_POSITIVE = [0, 0.0, -1, -1e-300, NAN, INF, -INF, "1.0", None, True]

# (constructor taking the value under test, name of the field the error must name)
POSITIVE_FIELDS = [
    (lambda v: Laplace(scale=v), "scale"),
    (lambda v: Laplace(scale=1.0, sensitivity=v), "sensitivity"),
    (lambda v: Gaussian(sigma=v), "sigma"),
    (lambda v: Gaussian(sigma=1.0, sensitivity=v), "sensitivity"),
    (lambda v: PoissonSubsampledGaussian(noise_multiplier=v, sample_rate=0.1), "noise_multiplier"),
    (lambda v: PoissonSubsampledGaussian(noise_multiplier=1.0, sample_rate=v), "sample_rate"),
    (lambda v: ReportNoisyMax("gumbel", scale=v), "scale"),
    (lambda v: ReportNoisyMax("laplace", scale=1.0, sensitivity=v), "sensitivity"),
    (lambda v: Exponential(epsilon=v), "epsilon"),
    (lambda v: PureDP(epsilon=v), "epsilon"),
    (lambda v: ZCDP(rho=v), "rho"),
]


@pytest.mark.parametrize("make, name", POSITIVE_FIELDS)
@pytest.mark.parametrize("value", BAD_POSITIVE, ids=repr)
def test_positive_fields_reject_bad_values(make, name, value):
    with pytest.raises(ValueError, match=name):
        make(value)


@pytest.mark.parametrize("value", [1.0000001, 2, INF])
def test_sample_rate_above_one(value):
    with pytest.raises(ValueError, match="sample_rate"):
        PoissonSubsampledGaussian(1.0, value)


@pytest.mark.parametrize("eps, delta, name", [
    (-0.1, 1e-6, "epsilon"), (NAN, 1e-6, "epsilon"), (INF, 1e-6, "epsilon"), ("1", 1e-6, "epsilon"),
    (1.0, -1e-9, "delta"), (1.0, 1.0, "delta"), (1.0, 1.5, "delta"), (1.0, NAN, "delta"),
    (1.0, INF, "delta"), (1.0, None, "delta"), (0.0, 0.0, "epsilon = 0 and delta = 0"),
])
def test_approx_dp_rejects(eps, delta, name):
    with pytest.raises(ValueError, match=name):
        ApproxDP(eps, delta)


def test_approx_dp_accepts_the_edges():
    assert ApproxDP(0.0, 1e-6).delta == 1e-6
    assert ApproxDP(1.0, 0.0).epsilon == 1.0


@pytest.mark.parametrize("noise", ["gauss", "Laplace", "", None, "permute_and_flip"])
def test_unknown_rnm_noise(noise):
    with pytest.raises(ValueError, match="noise"):
        ReportNoisyMax(noise, 1.0)


@pytest.mark.parametrize("make", [
    lambda r: Laplace(1.0, neighboring=r), lambda r: Gaussian(1.0, neighboring=r),
    lambda r: PoissonSubsampledGaussian(1.0, 0.1, neighboring=r),
    lambda r: ReportNoisyMax("laplace", 1.0, neighboring=r), lambda r: Exponential(1.0, neighboring=r),
    lambda r: PureDP(1.0, neighboring=r), lambda r: ApproxDP(1.0, 1e-6, neighboring=r),
    lambda r: ZCDP(1.0, neighboring=r)])
@pytest.mark.parametrize("relation", ["add-remove", "replace", "", None])
def test_unknown_neighboring_relation(make, relation):
    with pytest.raises(ValueError, match="neighboring"):
        make(relation)


@pytest.mark.parametrize("count", [0, -1, 1.0, 2.5, "3", None, True, NAN])
def test_self_composed_count(count):
    with pytest.raises(ValueError, match="count"):
        SelfComposed(PureDP(0.1), count)


def test_composite_events_reject_non_events():
    with pytest.raises(ValueError, match="event"):
        SelfComposed({"kind": "pure_dp", "epsilon": 1.0}, 2)
    with pytest.raises(ValueError, match="events"):
        Composed(())
    with pytest.raises(ValueError, match="events"):
        Composed([])
    with pytest.raises(ValueError, match="events"):
        Composed((PureDP(1.0), 1.0))


def test_numbers_are_stored_as_floats_and_events_are_frozen():
    e = Gaussian(2, sensitivity=3)
    assert isinstance(e.sigma, float) and isinstance(e.sensitivity, float)
    assert e.mu == pytest.approx(1.5, abs=0)
    with pytest.raises(AttributeError):
        e.sigma = 1.0
    assert ReportNoisyMax("exponential", scale=4.0, sensitivity=0.5).epsilon == 0.25
    assert Laplace(4.0, 2.0).epsilon == 0.5


ALL_KINDS = [
    Laplace(2.0, 0.5), Gaussian(1.5, 2.0, neighboring="replace_one"),
    PoissonSubsampledGaussian(1.1, 256 / 60000), ReportNoisyMax("gumbel", 3.0, 0.25),
    ReportNoisyMax("exponential", 3.0), Exponential(0.3), PureDP(0.2), ApproxDP(0.5, 1e-7),
    ZCDP(0.01), SelfComposed(Composed((PureDP(0.1), SelfComposed(Laplace(3.0), 4))), 7),
]


@pytest.mark.parametrize("event", ALL_KINDS, ids=lambda e: e.kind)
def test_dict_round_trip(event):
    import json

    d = event.to_dict()
    assert event_from_dict(json.loads(json.dumps(d))) == event


@pytest.mark.parametrize("bad, match", [
    ({"kind": "laplace", "scale": -1.0}, "scale"),
    ({"kind": "laplace", "scale": 1.0, "shape": 2}, "shape"),
    ({"kind": "cauchy", "scale": 1.0}, "cauchy"),
    ({"scale": 1.0}, "not an event"),
    ([1, 2], "not an event"),
    ({"kind": "self_composed", "event": {"kind": "pure_dp", "epsilon": 1.0}, "count": 0}, "count"),
    ({"kind": "composed", "events": []}, "events"),
])
def test_event_from_dict_rejects(bad, match):
    with pytest.raises(ValueError, match=match):
        event_from_dict(bad)


def test_flatten_merges_identical_leaves_and_multiplies_counts():
    a, b = PureDP(0.1), Laplace(2.0)
    ev = Composed((SelfComposed(Composed((a, SelfComposed(b, 3))), 5), a, SelfComposed(a, 2)))
    assert flatten(ev) == [(a, 5 + 1 + 2), (b, 15)]


# --------------------------------------------------------------------------- accountant inputs

@pytest.mark.parametrize("name", ["basic", "advanced", "optimal", "rdp", "pld", "best"])
@pytest.mark.parametrize("delta", [0, 0.0, 1, 1.0, -1e-5, 2.0, NAN, INF, "1e-5", None, True])
def test_accountant_epsilon_rejects_bad_delta(name, delta):
    with pytest.raises(ValueError, match="delta"):
        get_accountant(name).epsilon(PureDP(1.0), delta)


@pytest.mark.parametrize("name", ["basic", "advanced", "optimal", "rdp", "pld", "best"])
@pytest.mark.parametrize("epsilon", [-1e-9, NAN, INF, -INF, "1", None, True])
def test_accountant_delta_rejects_bad_epsilon(name, epsilon):
    with pytest.raises(ValueError, match="epsilon"):
        get_accountant(name).delta(PureDP(1.0), epsilon)


@pytest.mark.parametrize("name", ["Best", "prv", "gdp", "", "rdp "])
def test_unknown_accountant(name):
    with pytest.raises(ValueError, match="unknown accountant"):
        get_accountant(name)


def test_report_needs_exactly_one_of_delta_and_epsilon():
    with pytest.raises(ValueError, match="exactly one"):
        report(PureDP(1.0))
    with pytest.raises(ValueError, match="exactly one"):
        report(PureDP(1.0), delta=1e-5, epsilon=1.0)
    with pytest.raises(ValueError, match="delta"):
        report(PureDP(1.0), delta=1.0)
    with pytest.raises(ValueError, match="epsilon"):
        report(PureDP(1.0), epsilon=NAN)


@pytest.mark.parametrize("orders", [[1.0, 2.0], [0.5], [NAN], [[2.0, 3.0]]])
def test_rdp_orders_must_exceed_one(orders):
    with pytest.raises(ValueError, match="orders"):
        RDPAccountant(orders=orders)


@pytest.mark.parametrize("interval", [0.0, -1e-4, NAN])
def test_pld_discretisation_must_be_positive(interval):
    with pytest.raises(ValueError, match="value_discretization_interval"):
        PLDAccountant(value_discretization_interval=interval)


@pytest.mark.parametrize("kwargs, match", [
    ({"target_epsilon": 0.0}, "target epsilon"), ({"target_epsilon": -1.0}, "target epsilon"),
    ({"target_epsilon": NAN}, "target epsilon"), ({"target_epsilon": INF}, "target epsilon"),
    ({"target_delta": 0.0}, "delta"), ({"target_delta": 1.0}, "delta"),
    ({"target_delta": NAN}, "delta"),
    ({"guess": 0.0}, "guess"), ({"guess": -2.0}, "guess"), ({"guess": NAN}, "guess"),
    ({"guess": INF}, "guess"), ({"accountant": "moments"}, "unknown accountant"),
])
def test_calibrate_rejects(kwargs, match):
    args = {"target_epsilon": 1.0, "target_delta": 1e-5, **kwargs}
    with pytest.raises(ValueError, match=match):
        calibrate(lambda s: Gaussian(s), **args)


# --------------------------------------------------------------------------- import isolation

def test_import_accounting_loads_neither_torch_nor_vflpriv():
    # Fresh interpreter: the test process itself may already hold torch (opacus cross-checks).
    code = (
        "import sys, accounting\n"
        "from accounting import SelfComposed, PoissonSubsampledGaussian, get_accountant\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'vflpriv', 'opacus'))\n"
        "assert not bad, bad\n"
        "assert 'dp_accounting' not in sys.modules, 'dp_accounting loaded at import'\n"
        # computing with an accountant (the compiled RDP path) must not pull torch either
        "get_accountant('rdp').epsilon(SelfComposed(PoissonSubsampledGaussian(1.0, 0.01), 10), 1e-5)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'vflpriv', 'opacus'))\n"
        "assert not bad, bad\n"
        "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
