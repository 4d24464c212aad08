"""``RemoteConfig``, what ``vflpriv.sparse.remote.run`` takes (issue 31 item 5): built from a
``SparseConfig`` with the fields ``fit`` passed before as keywords, frozen, the backend refused
with the messages ``run`` raised, and a run over the local link (the Flower roles and frames,
no Flower) that equals the in-process run bit for bit."""
import dataclasses

import numpy as np
import pytest

from vflpriv.errors import InputError
from vflpriv.runtime.backends import FlowerOptions
from vflpriv.sparse import BatchSchedule, Participation
from vflpriv.sparse.api import fit
from vflpriv.sparse.config import RemoteConfig, SparseConfig

SPEC = "synthetic-003:alpha=0.5,e=1.1,sparsity=3,seed=0,d=16,samples=20"


def test_of_carries_every_option_run_needs():
    cfg = SparseConfig("fediterht", clients=4, rounds=3, lr=0.01, batch_size=8, epsilon=2.0,
                       delta=1e-5, ledger="s.jsonl", seed=3, tol=0.5, backend="local",
                       weights="uniform", l2=0.1)
    part, batch = Participation("full"), BatchSchedule(8)
    rc = RemoteConfig.of(cfg, part, batch)
    assert (rc.backend, rc.rounds, rc.participation, rc.batch) == ("local", 3, part, batch)
    assert (rc.loss, rc.l2, rc.lr, rc.weights, rc.seed) == ("squared", 0.1, 0.01, "uniform", 3)
    assert rc.privacy == {"level": "record", "epsilon": 2.0, "delta": 1e-5, "clip": 1.0,
                          "accountant": "rdp", "ledger": "s.jsonl"}
    assert rc.strategy_kw == {"tol": 0.5, "radius": None, "server_lr": 1.0}
    assert rc.evaluate is True and rc.flower == FlowerOptions()      # None: the defaults
    assert RemoteConfig.of(dataclasses.replace(cfg, epsilon=float("inf")), part,
                           batch).privacy is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        rc.rounds = 4
    assert dataclasses.replace(rc) == rc


@pytest.mark.parametrize("backend, needle", [
    ("inprocess", "sparse.remote.run runs the Flower backends; inprocess is "
                  "vflpriv.sparse.runtime.run"),
    ("flwr", "--backend must be one of inprocess, flower-sim, flower, got 'flwr'"),
])
def test_backend_refused_on_construction(backend, needle):
    with pytest.raises(InputError) as info:
        RemoteConfig(backend, 3, Participation("full"), BatchSchedule())
    assert str(info.value) == needle


def test_local_link_run_equals_inprocess_bit_for_bit(tmp_path):
    kw = dict(clients=4, rounds=3, local_steps=2, tau=3, batch_size=8, lr=0.01, seed=3,
              epsilon=2.0, delta=1e-5)
    a = fit(SPEC, "fediterht", ledger=str(tmp_path / "a.jsonl"), **kw)
    b = fit(SPEC, "fediterht", backend="local", ledger=str(tmp_path / "b.jsonl"), **kw)
    assert np.array_equal(a.x, b.x) and a.objective == b.objective
    assert a.uplink_bytes_per_client == b.uplink_bytes_per_client
    assert b.flower["backend"] == "local" and b.flower["rounds_completed"] == 3
    assert set(b.flower["party_spend"]) == {"0", "1", "2", "3"}
