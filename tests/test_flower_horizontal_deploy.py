"""LDP-FedP3 on a real Flower deployment (``--backend flower``: a SuperLink and one SuperNode
process per client on 127.0.0.1, ``flwr run``): the same weights and per-client spend as in
process, each client's releases in its own ledger.  About a minute (process start-up)."""
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("flwr")

from accounting import Ledger  # noqa: E402

from vflpriv.flower import FlowerOptions  # noqa: E402
from vflpriv.horizontal.fedp3 import MLP, FedP3  # noqa: E402
from vflpriv.horizontal.partition import load_dataset, make_clients  # noqa: E402


@pytest.mark.slow
def test_ldp_fedp3_on_a_local_deployment_same_as_inprocess(tmp_path):
    X, y, nc, _ = load_dataset("digits", seed=0)
    clients = make_clients(X, y, 3, alpha=0.5, seed=0)
    kw = dict(model=lambda: MLP(64, 10, (16, 16)), rounds=2, local_steps=2, batch_size=16,
              epsilon=3.0, delta=1e-5, seed=4)
    a = FedP3(ledger=str(tmp_path / "in.ledger"), **kw).fit(clients, nc)
    ledgers = tuple(str(tmp_path / f"c{k}.ledger") for k in range(3))
    b = FedP3(backend="flower", flower=FlowerOptions(party_ledgers=ledgers,
                                                      run_dir=str(tmp_path / "run")),
              **kw).fit(clients, nc)
    assert all(torch.equal(a.global_weights_[k], b.global_weights_[k])
               for k in a.global_weights_)
    assert a.accuracy_history_ == b.accuracy_history_
    assert b.epsilon_spent_ == pytest.approx(a.epsilon_spent_, rel=1e-12, abs=0)
    assert [len(Ledger(p).records) for p in ledgers] == [2, 2, 2]
    assert b.flower_["backend"] == "flower"
    assert b.flower_["totals"]["uplink"] > sum(b.uplink_bytes_)
