"""A sparse run on a real Flower deployment (``--backend flower``'s machinery: a SuperLink and one
SuperNode process per client on 127.0.0.1), started from the files ``vflpriv flower spec sparse``
writes for separate machines: the ServerApp reads ``run.json``, each SuperNode the node config
read back from its ``node<i>.toml``.  Client 1's data file is deleted after round 0, so its
ClientApp fails on round 1; under the default ``--on-client-loss continue`` the run goes on and
ends, bit for bit, at the model of a hand-written reference loop (every client in round 0, the
remaining two after), and each client's own ledger holds the rounds it answered.  About a minute
(process start-up, a ClientApp process per message).

The file is deleted from a thread as soon as the deployment's progress file says round 0 is done
(polled every 0.1 s), while round 1's message to client 1 still has to reach its SuperNode (which
polls every few seconds) and start a ClientApp process (about a second): the deletion wins by
seconds.  Were it ever to lose, client 1 would answer round 1 and fail at round 2, and the
assertion on the lost round fails: a loud failure, never a false pass."""
import contextlib
import io
import os

import numpy as np
import pytest

pytest.importorskip("flwr")

from accounting import read_ledger  # noqa: E402

from vflpriv.cli.main import main  # noqa: E402
from vflpriv.flower.deploy import LocalDeployment  # noqa: E402
from vflpriv.flower.spec import load_description, read_node_config  # noqa: E402
from vflpriv.sparse import Participation, make_strategy, wire  # noqa: E402
from vflpriv.sparse.data import load_federated  # noqa: E402
from vflpriv.sparse.losses import SquaredLoss  # noqa: E402
from vflpriv.sparse.privacy import PrivacyPlan  # noqa: E402
from vflpriv.sparse.runtime import client_generators, client_replies  # noqa: E402
from vflpriv.sparse.shards import make_shards  # noqa: E402

SPEC = "synthetic-003:alpha=0.5,e=1.1,sparsity=3,seed=0,d=16,samples=20"
N, ROUNDS, LOST, AFTER, SEED = 3, 3, 1, 0, 3
ARGS = ["--data", SPEC, "--clients", str(N), "--rounds", str(ROUNDS), "--local-steps", "2",
        "--tau", "3", "--batch-size", "8", "--lr", "0.01", "--seed", str(SEED), "--epsilon", "4",
        "--delta", "1e-5", "--privacy", "record", "--clip", "1", "--algorithm", "fediterht"]


def _reference():
    fd = load_federated(SPEC, N, seed=SEED)
    sh = make_shards(fd.parts, SquaredLoss(), "dense")
    strat = make_strategy("fediterht", 3, 2, tol=None, radius=None, server_lr=1.0)
    strat.lr, strat.blocks = 0.01, getattr(sh, "c", 1)
    plan = PrivacyPlan("record", 4.0, 1e-5, 1.0, rounds=ROUNDS, local_steps=2,
                       participation=Participation("full"), counts=sh.counts, batch_size=8)
    p = np.full(N, 1.0 / N)
    state = strat.init_state(sh.d)
    for t in range(ROUNDS):
        S = np.arange(N) if t <= AFTER else np.array([i for i in range(N) if i != LOST])
        plan.charged_steps = 2
        start = wire.decode(wire.encode(strat.broadcast(state)))
        V = client_replies(strat, sh, S, t, start, lr=0.01, batch=8,
                           rngs=client_generators(SEED, t, S), privacy=plan)
        state = strat.aggregate(state, (p[S] / p[S].sum()) @ V)
    return strat.model(state)


def _lost_client_deployment(tmp_path):
    """Writes the run's files (in the main thread, at the session's start: conftest.py) and
    returns the deployment to run on a thread: client 1's data file goes after round 0."""
    out = tmp_path / "desc"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = main(["flower", "spec", "sparse", "--out", str(out), "--connect-timeout", "60",
                     *ARGS])
    cfgs = [read_node_config(str(out / f"node{i}.toml")) for i in range(N)]

    def run():
        assert code == 0, printed.getvalue()
        spec = load_description(str(out / "run.json"))
        with LocalDeployment(cfgs, str(tmp_path / "dep")) as dep:
            res = dep.run(spec, timeout=240,
                          on_round=lambda r: os.remove(cfgs[LOST]["data"]) if r == AFTER + 1
                          else None)
        return code, printed.getvalue(), spec, cfgs, res

    return run


@pytest.mark.slow
@pytest.mark.deployment(prepare=_lost_client_deployment)
def test_sparse_deployment_from_a_written_spec_survives_a_lost_client(deployment):
    tmp_path, (code, printed, spec, cfgs, res) = deployment
    out = tmp_path / "desc"
    assert code == 0
    assert "vflpriv flower node" in printed
    assert spec["family"] == "sparse" and spec["on_client_loss"] == "continue"
    assert [c["data"] for c in cfgs] == [str(out / f"client{i}.npz") for i in range(N)]

    assert res["error"] is None, res["error"]
    assert [(x["client"], x["round"]) for x in res["lost_clients"]] == [(LOST, AFTER + 1)]
    # the description of a private run carries no noise entropy (issue 32): each client's DP
    # noise is its own OS entropy, so the model is the reference's shape, not its bits
    assert not any("noise-entropy" in (out / f"node{i}.toml").read_text() for i in range(N))
    ref = _reference()
    assert res["final"].shape == ref.shape and np.all(np.isfinite(res["final"]))
    assert not np.array_equal(res["final"], ref)
    counts = [len(read_ledger(c["ledger"]).records) for c in cfgs]
    assert counts == [ROUNDS if i != LOST else AFTER + 1 for i in range(N)]
