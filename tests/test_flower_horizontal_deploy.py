"""LDP-FedP3 on a real Flower deployment (``--backend flower``: a SuperLink and one SuperNode
process per client on 127.0.0.1, ``flwr run``): the same weights and per-client spend as in
process, each client's releases in its own ledger.  About a minute (process start-up), so the
deployed fit runs from the session's start (conftest.py), in a child Python: its side of the fit
sets torch's global seed and thread count, which must not change under this process's tests."""
import os
import pickle
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("flwr")

from accounting import Ledger  # noqa: E402

from vflpriv.flower import FlowerOptions  # noqa: E402
from vflpriv.horizontal.fedp3 import MLP, FedP3  # noqa: E402
from vflpriv.horizontal.partition import load_dataset, make_clients  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _clients_and_options():
    X, y, nc, _ = load_dataset("digits", seed=0)
    clients = make_clients(X, y, 3, alpha=0.5, seed=0)
    kw = dict(model=lambda: MLP(64, 10, (16, 16)), rounds=2, local_steps=2, batch_size=16,
              epsilon=3.0, delta=1e-5, seed=4)
    return clients, nc, kw


def _ledgers(tmp):
    return tuple(os.path.join(tmp, f"c{k}.ledger") for k in range(3))


def deployed_fit(tmp):
    """The fit on ``--backend flower`` (run in the child Python); its results go to a pickle."""
    clients, nc, kw = _clients_and_options()
    ledgers = _ledgers(tmp)
    b = FedP3(backend="flower", flower=FlowerOptions(party_ledgers=ledgers,
                                                      run_dir=os.path.join(tmp, "run")),
              **kw).fit(clients, nc)
    with open(os.path.join(tmp, "b.pkl"), "wb") as fh:
        pickle.dump({k: getattr(b, k) for k in ("global_weights_", "accuracy_history_",
                                                "epsilon_spent_", "flower_", "uplink_bytes_")},
                    fh)


def _deployment(tmp_path):
    def run():
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [ROOT, os.path.dirname(os.path.abspath(__file__))]
            + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
        code = "import sys, test_flower_horizontal_deploy as t; t.deployed_fit(sys.argv[1])"
        r = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
        with open(tmp_path / "b.pkl", "rb") as fh:
            return _ledgers(str(tmp_path)), pickle.load(fh)

    return run


@pytest.mark.slow
@pytest.mark.deployment(prepare=_deployment)
def test_ldp_fedp3_on_a_local_deployment_same_as_inprocess(tmp_path, deployment):
    clients, nc, kw = _clients_and_options()
    a = FedP3(ledger=str(tmp_path / "in.ledger"), **kw).fit(clients, nc)
    _, (ledgers, b) = deployment
    assert all(torch.equal(a.global_weights_[k], b["global_weights_"][k])
               for k in a.global_weights_)
    assert a.accuracy_history_ == b["accuracy_history_"]
    assert b["epsilon_spent_"] == pytest.approx(a.epsilon_spent_, rel=1e-12, abs=0)
    assert [len(Ledger(p).records) for p in ledgers] == [2, 2, 2]
    assert b["flower_"]["backend"] == "flower"
    assert b["flower_"]["totals"]["uplink"] > sum(b["uplink_bytes_"])
