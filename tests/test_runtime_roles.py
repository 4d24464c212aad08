"""Every family's roles, hosted over the in-process LocalLink (the Flower backends' code path:
the same run description, party configs, party roles rebuilt from pickled state per message,
real frames), end at the in-process run's result bit for bit: model, history, frame bytes and
spend.  No Ray, so these run in seconds; tests/test_flower_*.py check the same on Flower."""
import math

import numpy as np
import pytest

from accounting import read_ledger
from vflpriv.data import VerticalData, make_synthetic
from vflpriv.runtime.link import LocalLink, PartyRefused
from vflpriv.vertical.api import solve

PRIVATE = dict(algorithm="dp-bcfw", epsilon=4.0, delta=1e-5, feature_bound=1.0, label_bound=3.0)


def _data(K=3, n=60, d=24, seed=0):
    A, y, _ = make_synthetic(n=n, d=d, density=0.3, seed=seed)
    return VerticalData.from_arrays(A, y, "balanced", parties=K)


def _same(a, b):
    assert np.array_equal(a.x, b.x)
    assert a.objective == b.objective
    assert a.uplink == b.uplink and a.downlink == b.downlink
    assert a.uplink_framed == b.uplink_framed
    assert a.released == b.released


@pytest.mark.parametrize("kw", [dict(PRIVATE, iterations=4, seed=3),
                                dict(algorithm="dfw", iterations=3, seed=5),
                                dict(PRIVATE, algorithm="dp-bcfw-secure", iterations=3, seed=4,
                                     max_features=2)],
                         ids=["dp-bcfw", "dfw", "dp-bcfw-secure"])
def test_vertical_roles_over_local_link_equal_inprocess(tmp_path, kw):
    data = _data()
    led = {} if "epsilon" not in kw else {"a": str(tmp_path / "a.ledger"),
                                          "b": str(tmp_path / "b.ledger")}
    ref = solve(data, ledger=led.get("a"), **kw)
    sol = solve(data, ledger=led.get("b"), backend="local", **kw)
    _same(ref, sol)
    if led:
        assert ref.privacy["epsilon_spent"] == sol.privacy["epsilon_spent"]
        # every party's own ledger holds its releases, charged by the party role
        for k in range(data.K):
            assert read_ledger(f"{led['b']}.party{k}").records


def test_sparse_roles_over_local_link_equal_inprocess(tmp_path):
    from vflpriv.runtime.backends import FlowerOptions
    from vflpriv.sparse.api import fit

    spec = "synthetic-003:alpha=0.5,e=1.1,sparsity=5,seed=0,d=60,samples=30"
    kw = dict(clients=8, rounds=4, local_steps=2, tau=5, batch_size=12, lr=0.005, seed=0,
              participation="5", epsilon=4.0, delta=1e-5, privacy="record")
    a = fit(spec, "fediterht", ledger=str(tmp_path / "a.jsonl"), **kw)
    b = fit(spec, "fediterht", backend="local", ledger=str(tmp_path / "b.jsonl"),
            flower=FlowerOptions(run_dir=str(tmp_path / "run")), **kw)
    assert np.array_equal(a.x, b.x)
    assert a.objective == b.objective and a.uplink_bytes == b.uplink_bytes
    assert a.privacy["epsilon_spent"] == b.privacy["epsilon_spent"]


def test_horizontal_and_fedp3_roles_over_local_link_equal_inprocess(tmp_path):
    torch = pytest.importorskip("torch")
    from vflpriv.horizontal.fedp3 import MLP, FedP3
    from vflpriv.horizontal.local import LocalConfig
    from vflpriv.horizontal.partition import load_dataset, load_federated, make_clients
    from vflpriv.horizontal.runtime import run
    from vflpriv.horizontal.scaffold import Scaffold

    data = load_federated("digits", 4, seed=0)
    kw = dict(rounds=2, participation=1.0, local=LocalConfig(epochs=1, batch_size=10, lr=0.1),
              seed=5)

    def model():
        return MLP(64, 10, (8,))
    a = run(Scaffold(), data, model, **kw)
    b = run(Scaffold(), data, model, backend="local", **kw)
    assert torch.equal(a.theta, b.theta)
    assert a.accuracy_history == b.accuracy_history and a.meter.history == b.meter.history

    X, y, nc, _ = load_dataset("digits", seed=0)
    clients = make_clients(X, y, 3, alpha=math.inf, seed=0)
    kw = dict(model=lambda: MLP(64, 10, (8, 8)), rounds=2, local_steps=2, batch_size=16,
              epsilon=3.0, delta=1e-5, seed=2)
    e1 = FedP3(ledger=str(tmp_path / "in.ledger"), **kw).fit(clients, nc)
    e2 = FedP3(backend="local", **kw).fit(clients, nc)
    for p, q in zip(e1.net_.state_dict().values(), e2.net_.state_dict().values()):
        assert torch.equal(p, q)
    assert e1.accuracy_history_ == e2.accuracy_history_
    assert e1.epsilon_spent_ == pytest.approx(e2.epsilon_spent_, rel=1e-12, abs=0)


def test_local_link_reports_a_refusal_naming_the_party_and_round():
    class Role:
        def __init__(self, cfg, setup):
            self.k = int(cfg["party"])

        def handle(self, kind, frame, round):
            from vflpriv.runtime.roles import Refused

            if self.k == 1:
                raise Refused("my budget is spent")
            return "ok", frame

        def get_state(self):
            return {}

        def set_state(self, state):
            pass

    link = LocalLink([{"party": 0}, {"party": 1}], build=Role)
    link.connect(b"")
    assert link.exchange([(0, b'{"family": "x"}', "setup")], 0) == [b'{"family": "x"}']
    with pytest.raises(PartyRefused) as err:
        link.exchange([(0, b"{}", "setup"), (1, b"{}", "setup")], 3)
    assert err.value.party == 1 and err.value.round == 3 and "budget" in err.value.reason
    # tolerated: the party's slot is None and the link notes why
    out = link.exchange([(0, b"{}", "setup"), (1, b"{}", "setup")], 4, tolerate=True)
    assert out == [b"{}", None] and link.lost[-1][:2] == (1, 4)
    assert link.meter.totals()["downlink_frames"] == len(b'{"family": "x"}') + 4 * 2


def test_fedp3_continues_without_a_lost_client_as_if_it_had_left(tmp_path, monkeypatch):
    """FedP3 (LDP) over the local link, 4 clients, client 2's file deleted after round 1: the run
    goes on (the default, ``continue``) and ends at the model of an in-process run in which client
    2 is never sampled after round 1 and leaves the accuracy average then, bit for bit; client 2's
    own ledger holds only the rounds it answered."""
    torch = pytest.importorskip("torch")
    import os

    from vflpriv.horizontal.fedp3 import MLP, FedP3
    from vflpriv.horizontal.partition import load_dataset, make_clients
    from vflpriv.runtime.backends import FlowerOptions

    LOST, AFTER, rounds = 2, 1, 4
    X, y, nc, _ = load_dataset("digits", seed=0)
    clients = make_clients(X, y, 4, alpha=math.inf, seed=0)
    kw = dict(model=lambda: MLP(64, 10, (8, 8)), rounds=rounds, local_steps=2, batch_size=16,
              epsilon=3.0, delta=1e-5, seed=2)
    run_dir = str(tmp_path / "run")
    ledgers = tuple(str(tmp_path / f"c{k}.ledger") for k in range(4))

    def drop(t):
        if t == AFTER:
            os.remove(os.path.join(run_dir, f"client{LOST}.npz"))
    b = FedP3(backend="local", flower=FlowerOptions(run_dir=run_dir, party_ledgers=ledgers),
              **kw).fit(clients, nc, progress=drop)
    assert [(x["client"], x["round"]) for x in b.flower_["lost_clients"]] == [(LOST, AFTER + 1)]
    assert b.flower_["on_client_loss"] == "continue" and len(b.accuracy_history_) == rounds
    assert len(read_ledger(ledgers[LOST]).records) == AFTER + 1
    assert all(len(read_ledger(p).records) == rounds for k, p in enumerate(ledgers) if k != LOST)

    sample, evaluate = FedP3.sample, FedP3.evaluate

    def without_lost(self, t):
        chosen = sample(self, t)
        return chosen if t <= AFTER else [k for k in chosen if k != LOST]

    def evaluate_after_loss(self, t):
        if t == AFTER + 1:
            self.drop_client(LOST)
        return evaluate(self, t)
    monkeypatch.setattr(FedP3, "sample", without_lost)
    monkeypatch.setattr(FedP3, "evaluate", evaluate_after_loss)
    a = FedP3(ledger=str(tmp_path / "in.ledger"), **kw).fit(clients, nc)
    for p, q in zip(a.net_.state_dict().values(), b.net_.state_dict().values()):
        assert torch.equal(p, q)
    assert a.accuracy_history_ == b.accuracy_history_


@pytest.mark.parametrize("name", ["scaffold", "feddyn"])
def test_scaffold_and_feddyn_continue_without_a_lost_client(tmp_path, monkeypatch, name):
    """SCAFFOLD and FedDyn (their server state c / h carries every client's last contribution)
    over the local link, client 2's file deleted after round 1: the run goes on and ends at the
    model of an in-process run whose sampler leaves client 2 out from round 2 on, bit for bit --
    the lost client's last contribution stays in c / h exactly as a client's that is not
    sampled (docs/flower.md, "A lost client")."""
    torch = pytest.importorskip("torch")
    import os

    from vflpriv.horizontal.feddyn import FedDyn
    from vflpriv.horizontal.fedp3 import MLP
    from vflpriv.horizontal.local import LocalConfig
    from vflpriv.horizontal.partition import load_federated
    from vflpriv.horizontal.runtime import _StrategyRun, run
    from vflpriv.horizontal.scaffold import Scaffold
    from vflpriv.runtime.backends import FlowerOptions

    LOST, AFTER, rounds = 2, 1, 4
    make = {"scaffold": Scaffold, "feddyn": lambda: FedDyn(5e-2, 1e-4, 5e-3)}[name]
    data = load_federated("digits", 4, seed=0)
    kw = dict(rounds=rounds, participation=1.0, seed=5,
              local=LocalConfig(epochs=1, batch_size=32, lr=0.1))

    def model():
        return MLP(64, 10, (8,))
    run_dir = str(tmp_path / "run")

    def drop(t):
        if t == AFTER:
            os.remove(os.path.join(run_dir, f"client{LOST}.npz"))
    b = run(make(), data, model, backend="local", progress=drop,
            flower=FlowerOptions(run_dir=run_dir), **kw)
    assert [(x["client"], x["round"]) for x in b.flower["lost_clients"]] == [(LOST, AFTER + 1)]
    assert b.flower["rounds_completed"] == rounds

    sample = _StrategyRun.sample

    def without_lost(self, t):
        chosen = sample(self, t)
        return chosen if t <= AFTER else [k for k in chosen if k != LOST]
    monkeypatch.setattr(_StrategyRun, "sample", without_lost)
    a = run(make(), data, model, **kw)
    assert torch.equal(a.theta, b.theta)
    assert a.accuracy_history == b.accuracy_history


def test_secure_helpers_over_local_link_serve_only_what_their_own_ledgers_charged(
        tmp_path, monkeypatch):
    """dp-bcfw-secure at K = 4 as roles over LocalLink: every block's helper h(k) = k + 1 mod K
    serves products for other holders (K - 2 per new feature), gated by its own ledger like the
    holder (issue 33); the gate's state survives between messages.  A helper whose charges of
    a round are lost refuses before drawing any noise, naming the release."""
    from vflpriv.vertical.secure.squares.party import SecureParty

    kw = dict(PRIVATE, algorithm="dp-bcfw-secure", iterations=3, seed=4, max_features=2,
              label_party="all")
    data = _data(K=4)
    ref = solve(data, ledger=str(tmp_path / "a.ledger"), **kw)
    sol = solve(data, ledger=str(tmp_path / "b.ledger"), backend="local", **kw)
    _same(ref, sol)
    assert sol.extra["bytes_by_type"]["TripleToHelper"][0] == 2 * sum(sol.released)
    real = SecureParty.charge_features

    def forgetful(self, msg, t):              # party 2 charges, but its helper gate forgets
        real(self, msg, t)
        if self.k == 2:
            self._help_owed.clear()

    monkeypatch.setattr(SecureParty, "charge_features", forgetful)
    with pytest.raises(PartyRefused) as err:
        solve(data, ledger=str(tmp_path / "c.ledger"), backend="local", **kw)
    assert err.value.party == 2 and "refused to help release" in err.value.reason
