"""One round number for a lost client (issue 35, item 5): a sparse run over the local link whose
client 2 loses its data file after round 1 fails in round 2.  With ``--on-client-loss continue``
the JSON's ``lost_clients`` says round 2; with ``stop`` the ``PartyLost`` error says round 2 too
(it said 3, Flower's message round = run round + 1).  Both are the run's 0-based round: rounds
0 and 1 completed, the loss is in the third round, index 2.  Over the in-process local link (the
same roles and frames as on Flower, no Ray), so it is fast."""
import os

import pytest

from vflpriv.runtime.backends import FlowerOptions
from vflpriv.runtime.link import PartyLost
from vflpriv.sparse.api import fit

SPEC = "synthetic-003:alpha=0.5,e=1.1,sparsity=3,seed=0,d=16,samples=20"
N, ROUNDS, LOST, AFTER = 4, 4, 2, 1
KW = dict(clients=N, rounds=ROUNDS, local_steps=1, tau=3, batch_size=8, lr=0.01, seed=3)


def _drop_after(run_dir, completed):
    def callback(t, _):
        completed.append(t)
        if t == AFTER:          # after round AFTER: the client's storage is gone
            os.remove(os.path.join(run_dir, f"client{LOST}.npz"))
    return callback


@pytest.mark.parametrize("policy", ["continue", "stop"])
def test_lost_client_round_is_the_runs_round_in_json_and_error(tmp_path, policy):
    run_dir = str(tmp_path / "run")
    completed = []
    opts = FlowerOptions(run_dir=run_dir, on_client_loss=policy)
    if policy == "continue":
        res = fit(SPEC, "fediterht", backend="local", flower=opts,
                  callback=_drop_after(run_dir, completed), **KW)
        rounds = [x["round"] for x in res.to_dict()["lost_clients"]]
        assert [x["client"] for x in res.lost_clients] == [LOST]
    else:
        with pytest.raises(PartyLost) as info:
            fit(SPEC, "fediterht", backend="local", flower=opts,
                callback=_drop_after(run_dir, completed), **KW)
        assert info.value.party == LOST
        assert f"lost at round {AFTER + 1}" in str(info.value)
        rounds = [info.value.round]
    # rounds 0..AFTER completed (the callback's t is the run's 0-based round), the loss is in
    # the next one
    assert completed[:AFTER + 1] == list(range(AFTER + 1))
    assert rounds == [AFTER + 1]
