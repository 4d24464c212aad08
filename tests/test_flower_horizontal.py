"""The horizontal methods on Flower's simulation runtime (issue 16): a seeded run gives the same
model, accuracy history, bytes and per-client spend as in process; each client's budget is its
own and refuses before any noise; 100 clients work.  Each test starts Ray once (about 10 s)."""
import json
import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("flwr")
pytest.importorskip("ray")
pytestmark = pytest.mark.usefixtures("one_ray")    # conftest: one Ray for all runs

from accounting import BudgetExceeded, BudgetFilter, Ledger, PoissonSubsampledGaussian, \
    SelfComposed  # noqa: E402

from vflpriv.cli.main import main  # noqa: E402
from vflpriv.flower import FlowerOptions  # noqa: E402
from vflpriv.flower.link import PartyRefused  # noqa: E402
from vflpriv.horizontal.fedavg import FedAvg  # noqa: E402
from vflpriv.horizontal.feddyn import FedDyn  # noqa: E402
from vflpriv.horizontal.fedp3 import MLP, FedP3  # noqa: E402
from vflpriv.horizontal.ldp import noise_multiplier  # noqa: E402
from vflpriv.horizontal.local import LocalConfig  # noqa: E402
from vflpriv.horizontal.partition import load_dataset, load_federated, make_clients  # noqa: E402
from vflpriv.horizontal.runtime import run  # noqa: E402

EPS, DELTA = 3.0, 1e-5


def spend_whole_plan(path, k, q, total):
    """Client k's account already paid for a whole earlier run: its next charge must fail."""
    led = Ledger(path, budget={"epsilon": EPS, "delta": DELTA, "per_party": True,
                               "accountant": "rdp"})
    f = BudgetFilter(led, EPS, DELTA, accountant="rdp", per_party=True)
    z = noise_multiplier(EPS, DELTA, q, total, "rdp")
    f.charge(SelfComposed(PoissonSubsampledGaussian(z, q), total), party=f"client-{k}",
             note="an earlier run")


def records(path):
    return len(Ledger(path).records)


@pytest.mark.slow
def test_feddyn_elastic_net_100_clients_private_same_as_inprocess_spent_client_stops(tmp_path):
    """100 clients, 2 rounds (FedDyn's g_k state carried by each client between rounds); client
    7's own ledger already holds a whole plan: it refuses round 0 before any noise, as in
    process, and the model, accuracy, bytes and every client's spend are the same."""
    K, rounds, spent = 100, 2, 7
    data = load_federated("digits", K, seed=0)
    local = LocalConfig(epochs=1, batch_size=10, lr=0.1)
    m = len(data.clients[spent][1])
    q, steps = local.batch_size / m, local.steps(m, True)
    ledgers = [str(tmp_path / f"client{k}.ledger") for k in range(K)]
    spend_whole_plan(ledgers[spent], spent, q, rounds * steps)     # its own ledger
    spend_whole_plan(tmp_path / "inprocess.ledger", spent, q, rounds * steps)
    kw = dict(rounds=rounds, participation=1.0, local=local, epsilon=EPS, delta=DELTA, seed=5)

    def model():
        return MLP(64, 10, (8,))
    a = run(FedDyn(5e-2, 1e-4, 5e-3), data, model, ledger=str(tmp_path / "inprocess.ledger"),
            **kw)
    b = run(FedDyn(5e-2, 1e-4, 5e-3), data, model, backend="flower-sim",
            flower=FlowerOptions(party_ledgers=tuple(ledgers)), **kw)
    assert torch.equal(a.theta, b.theta)                       # bit for bit
    assert a.accuracy_history == b.accuracy_history
    assert a.stopped_round == b.stopped_round
    assert [k for k, r in enumerate(b.stopped_round) if r is not None] == [spent]
    assert b.flower["stopped"] == [spent]
    assert b.epsilon_spent == pytest.approx(a.epsilon_spent, rel=1e-12, abs=0)
    assert a.meter.history == b.meter.history                  # same wire bytes, nonzeros
    # the refusing client charged nothing (refused before drawing noise); the others each round
    assert [records(p) for p in ledgers] == [1 if k == spent else rounds for k in range(K)]
    up = b.flower["bytes"]["uplink"]
    assert len(up) == K
    assert sum(v["frames"] for v in up.values()) >= b.meter.uplink_bytes
    assert all(v["flower"] > v["frames"] for v in up.values())


@pytest.mark.slow
def test_fedp3_cli_flower_sim_same_json_as_inprocess(tmp_path):
    argv = ["fedp3", "--clients", "4", "--rounds", "2", "--hidden", "16,16", "--local-steps",
            "3", "--participation", "0.5", "--epsilon", "4", "--seed", "1", "-q"]
    assert main([*argv, "--json", str(tmp_path / "in.json")]) == 0
    assert main([*argv, "--backend", "flower-sim", "--json", str(tmp_path / "sim.json")]) == 0
    a = json.loads((tmp_path / "in.json").read_text())
    b = json.loads((tmp_path / "sim.json").read_text())
    for key in ("accuracy_history", "client_accuracy", "epsilon_spent", "uplink_bytes",
                "downlink_bytes", "noise_multiplier", "stopped_round", "layer_sets"):
        assert a[key] == b[key], key
    f = b["flower"]
    assert f["backend"] == "flower-sim"
    assert f["inprocess_uplink_bytes"] == sum(a["uplink_bytes"])
    assert f["uplink_flower_bytes"] > f["uplink_frame_bytes"] >= f["inprocess_uplink_bytes"]
    assert set(f["per_client"]["uplink"]) == {"0", "1", "2", "3"}


@pytest.mark.slow
def test_fedp3_client_refuses_its_plan_at_setup(tmp_path):
    X, y, nc, _ = load_dataset("digits", seed=0)
    clients = make_clients(X, y, 3, alpha=math.inf, seed=0)
    kw = dict(model=lambda: MLP(64, 10, (8, 8)), rounds=2, local_steps=2, batch_size=16,
              epsilon=EPS, delta=DELTA, seed=2)
    steps_total = 2 * 2
    ledgers = [str(tmp_path / f"c{k}.ledger") for k in range(3)]
    spend_whole_plan(ledgers[1], 1, 16 / clients[1].m, steps_total)
    spend_whole_plan(tmp_path / "in.ledger", 1, 16 / clients[1].m, steps_total)
    with pytest.raises(BudgetExceeded):
        FedP3(ledger=str(tmp_path / "in.ledger"), **kw).fit(clients, nc)
    with pytest.raises(PartyRefused) as err:
        FedP3(backend="flower-sim", flower=FlowerOptions(party_ledgers=tuple(ledgers)),
              **kw).fit(clients, nc)
    assert err.value.party == 1 and "BudgetExceeded" in err.value.reason
    assert [records(p) for p in ledgers] == [0, 1, 0]           # nobody released anything


def test_bad_backend_is_one_line_exit_2(capsys):
    for command in ("horizontal", "fedp3"):
        with pytest.raises(SystemExit) as exit_:
            main([command, "--backend", "grpc"])
        assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all("--backend" in line for line in err)
    with pytest.raises(Exception, match="--backend must be one of"):
        run(FedAvg(), None, None, rounds=1, backend="grpc")


def test_without_flower_the_backends_say_what_to_install(monkeypatch, capsys):
    import sys

    monkeypatch.setitem(sys.modules, "flwr", None)          # import flwr -> ImportError
    assert main(["fedp3", "--backend", "flower-sim", "--rounds", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pip install" in err[0] and "flwr" in err[0]


def test_clients_rebuild_the_same_model_from_its_description():
    from vflpriv.horizontal.hosting import build_net, describe_model
    from vflpriv.horizontal.models import build_model

    for make in (lambda: build_model("cnn", 64, 10, (1, 8, 8)), lambda: build_model("mlp", 64, 10),
                 lambda: MLP(64, 10, (5,), bias=False)):
        torch.manual_seed(3)
        a = make()
        torch.manual_seed(3)
        b = build_net(json.loads(json.dumps(describe_model(a))))
        assert type(a) is type(b)
        sa, sb = a.state_dict(), b.state_dict()
        assert list(sa) == list(sb) and all(torch.equal(sa[k], sb[k]) for k in sa)
