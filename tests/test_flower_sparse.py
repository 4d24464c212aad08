"""The sparse methods on Flower (issue #16): the per-client path equals the vectorized one (what
makes a ClientApp, computing alone, agree with the in-process run), and a seeded run on
flower-sim ends at the same model, bit for bit, with the same spend and the same wire bytes as in
process.  Each flower-sim run starts Ray (~8-10 s), so the cases are few and combined."""
import json
import math

import numpy as np
import pytest

pytest.importorskip("flwr")
pytestmark = pytest.mark.usefixtures("one_ray")    # conftest: one Ray for all runs

from vflpriv.sparse import BatchSchedule, Participation, make_strategy, run  # noqa: E402
from vflpriv.sparse.api import fit  # noqa: E402
from vflpriv.sparse.losses import LogisticLoss, SoftmaxLoss, SquaredLoss  # noqa: E402
from vflpriv.sparse.privacy import PrivacyPlan  # noqa: E402
from vflpriv.sparse.shards import make_shards  # noqa: E402

SPEC = "synthetic-003:alpha=0.5,e=1.1,sparsity=5,seed=0,d=60,samples=30"


def _unbalanced(N=7, d=24, seed=1, labels="real"):
    rng = np.random.default_rng(seed)
    parts = []
    for n in rng.integers(6, 30, size=N):
        Z = rng.standard_normal((int(n), d))
        y = rng.standard_normal(int(n))
        if labels == "binary":
            y = (y > 0).astype(float)
        elif labels == "classes":
            y = rng.integers(0, 3, size=int(n)).astype(float)
        parts.append((Z, y))
    return parts


CASES = [  # (algorithm, loss, privacy level); every layout below
    ("fedht", "squared", None), ("fediterht", "squared", "record"),
    ("fedgradmp", "squared", "client"), ("fedgradmp-inexact", "logistic", None),
    ("feddualavg", "squared", "record"), ("fedavg", "squared", "client"),
    ("fedmid", "softmax", None), ("diht", "squared", "record"),
]


def test_per_client_path_equals_vectorized_bit_for_bit(monkeypatch):
    # unequal clients, minibatches smaller and larger than some n_i, L of N participation:
    # each client's numbers depend on (seed, round, client) only, never on its batch-mates
    import copy

    # the spend report (a PLD per run, ~0.7 s) is not under test here; the noise is
    monkeypatch.setattr(PrivacyPlan, "summary", lambda self: None)

    part = Participation("fixed", 4)
    for alg, loss_name, level in CASES:
        labels = {"logistic": "binary", "softmax": "classes"}.get(loss_name, "real")
        parts = _unbalanced(labels=labels)
        K = 1 if alg == "diht" else 2
        counts = np.array([Z.shape[0] for Z, _ in parts])
        plan = None if level is None else PrivacyPlan(       # calibrated once, copied fresh
            level, 5.0, 1e-5, 1.0, rounds=3, local_steps=K, participation=part, counts=counts,
            batch_size=10)
        for layout in ("dense", "sparse"):
            xs = []
            for vectorize in (True, False):
                loss = {"squared": SquaredLoss, "logistic": LogisticLoss,
                        "softmax": lambda: SoftmaxLoss(classes=3)}[loss_name]()
                sh = make_shards(parts, loss, layout)
                res = run(make_strategy(alg, 4, K), sh, rounds=3, lr=0.02,
                          batch=BatchSchedule(10), seed=3, participation=part,
                          privacy=copy.deepcopy(plan), vectorize=vectorize)
                xs.append((res.x, res.uplink_bytes))
            assert np.array_equal(xs[0][0], xs[1][0]), (alg, layout)
            assert xs[0][1] == xs[1][1]
            assert np.count_nonzero(xs[0][0]) > 0


def test_client_app_side_alone_equals_its_row_of_the_batch_and_keeps_its_own_budget(tmp_path):
    # the ClientApp's handler without Flower: client 1 of 3 unequal clients (padded to the
    # federation's n_max) answers a round with the bits of its row of the in-process batch,
    # charges its own ledger first, and refuses a plan over its own budget
    from accounting import BudgetExceeded, read_ledger
    from vflpriv.sparse.remote import SparseParty, party_configs, public_setup
    from vflpriv.sparse import wire
    from vflpriv.sparse.runtime import client_generators, client_replies

    parts = _unbalanced(N=3)
    sh = make_shards(parts, SquaredLoss(), "dense")
    strat = make_strategy("fediterht", 4, 2)
    strat.lr = 0.02
    batch, part = BatchSchedule(10), Participation("full")
    priv = {"level": "record", "epsilon": 4.0, "delta": 1e-5, "clip": 1.0, "accountant": "rdp"}
    setup = json.loads(json.dumps(public_setup(sh, strat, batch=batch, loss="squared", l2=0.0,
                                               rounds=3, participation=part, privacy=priv)))
    led = [str(tmp_path / f"tight{i}.jsonl") for i in range(3)]
    tight = party_configs(parts, str(tmp_path), privacy=dict(priv, party_budget=(1.0, 1e-5)),
                          ledgers=led, seed=5)
    with pytest.raises(BudgetExceeded):
        SparseParty(tight[1], setup).handle("setup", b"", 0)
    led = [str(tmp_path / f"ok{i}.jsonl") for i in range(3)]
    cfgs = party_configs(parts, str(tmp_path), privacy=dict(priv, party_budget=(4.0, 1e-5)),
                         ledgers=led, seed=5)
    side = SparseParty(cfgs[1], setup)
    assert side.handle("setup", b"", 0) == ("ok", b"")
    start = np.zeros(sh.d)
    start[[1, 5, 7]] = [0.5, -1.0, 2.0]
    kind, reply = side.handle("round", wire.encode(start), 1)       # Flower round 1 = round 0
    assert kind == "update" and len(read_ledger(led[1]).records) == 1
    plan = PrivacyPlan("record", 4.0, 1e-5, 1.0, rounds=3, local_steps=2, participation=part,
                       counts=sh.counts, batch_size=10)
    plan.charged_steps = 2
    V = client_replies(strat, sh, np.arange(3), 0, start, lr=0.02, batch=10,
                       rngs=client_generators(5, 0, range(3)), privacy=plan)
    assert np.array_equal(wire.decode(reply), V[1])


def _same_run(a, b):
    assert np.array_equal(a.x, b.x)                      # bit for bit
    assert a.objective == b.objective
    assert a.participants == b.participants
    assert a.uplink_bytes_per_client == b.uplink_bytes_per_client
    assert a.downlink_bytes_per_client == b.downlink_bytes_per_client


def test_fedht_on_flower_sim_equals_inprocess_and_meters_flower_bytes():
    kw = dict(clients=8, rounds=4, local_steps=2, tau=5, batch_size=12, lr=0.005, seed=0,
              participation="5")
    a = fit(SPEC, "fedht", **kw)
    b = fit(SPEC, "fedht", backend="flower-sim", **kw)
    _same_run(a, b)
    assert b.objective[-1] < b.objective[0]
    f = b.to_dict()["flower"]
    json.dumps(f)
    # the wire bytes that crossed Flower are the ones the in-process run counts
    assert f["uplink_wire_bytes_sent"] == f["uplink_inprocess_bytes"] == sum(a.uplink_bytes)
    assert f["downlink_wire_bytes_sent"] == f["downlink_inprocess_bytes"] == sum(a.downlink_bytes)
    # a Flower message carries the frame plus its record dict and metadata
    assert f["uplink_flower_bytes"] > f["uplink_inprocess_bytes"]
    assert sum(c["uplink_flower"] for c in f["per_client"].values()) == f["uplink_flower_bytes"]
    for k, c in f["per_client"].items():
        took = sum(int(k) in p for p in a.participants)
        assert (c["uplink_flower"] > c["uplink_inprocess"] > 0) == (took > 0)
    assert b.settings["backend"] == "flower-sim" and "flower" not in a.to_dict()


def test_100_clients_record_level_dp_on_flower_sim_same_model_and_spend(tmp_path):
    # FedIter-HT, record-level DP: every client charges its own ledger before its noise and
    # draws that noise from its own generator; the server's ledger keeps the same records
    kw = dict(clients=100, rounds=2, local_steps=2, tau=3, batch_size=5, lr=0.01, seed=1,
              epsilon=3.0, delta=1e-5, privacy="record", clip=1.0)
    spec = "synthetic-003:alpha=0.5,e=1.1,sparsity=3,seed=0,d=12,samples=10"
    a = fit(spec, "fediterht", **kw)
    from vflpriv.flower import FlowerOptions

    b = fit(spec, "fediterht", backend="flower-sim", ledger=str(tmp_path / "server.jsonl"),
            flower=FlowerOptions(run_dir=str(tmp_path / "run")), **kw)
    _same_run(a, b)
    assert a.privacy["epsilon_spent"] == b.privacy["epsilon_spent"]
    assert b.privacy["releases"] == a.privacy["releases"] == 2 * 100
    spend = b.flower["party_spend"]
    assert len(spend) == 100 and all(v["releases"] == 2 for v in spend.values())
    rdp = b.privacy["epsilon_spent"]["rdp"]
    assert all(math.isclose(v["epsilon"], rdp) for v in spend.values()) and rdp <= 3.0 + 1e-9


def test_cli_client_level_fedgradmp_on_flower_sim_matches_inprocess(tmp_path, capsys):
    # client-level DP with Poisson participation: each ClientApp clips its update, the
    # ServerApp adds the noise to the aggregate; the JSON gains the flower section
    from vflpriv.cli.main import main

    argv = ["sparse", "--algorithm", "fedgradmp", "--data", SPEC, "--clients", "6", "--rounds",
            "3", "--local-steps", "2", "--tau", "5", "--batch-size", "12", "--seed", "2",
            "--participation", "poisson:0.7", "--epsilon", "8", "--delta", "1e-5", "--privacy",
            "client", "--clip", "2", "--quiet"]
    out = {}
    for backend in ("inprocess", "flower-sim"):
        path = tmp_path / f"{backend}.json"
        assert main(argv + ["--backend", backend, "--json", str(path)]) == 0
        out[backend] = json.loads(path.read_text())
    a, b = out["inprocess"], out["flower-sim"]
    for key in ("objective", "relative_error", "participants", "uplink_bytes_per_client",
                "epsilon_spent", "model_nnz"):
        assert a[key] == b[key], key
    assert "flower" not in a and b["backend"] == "flower-sim"
    f = b["flower"]
    assert f["uplink_inprocess_bytes"] == f["uplink_wire_bytes_sent"] == sum(a["uplink_bytes"])
    assert f["uplink_flower_bytes"] > f["uplink_inprocess_bytes"]
    assert "flower-sim: uplink" in capsys.readouterr().out


@pytest.mark.parametrize("extra, needle", [
    (["--backend", "flwr"], "--backend"),
    (["--backend", "flower-sim", "--connect-timeout", "0"], "--connect-timeout"),
    (["--backend", "flower-sim", "--connect-timeout", "nan"], "--connect-timeout"),
])
def test_cli_bad_backend_input_is_one_line_exit_2(capsys, extra, needle):
    from vflpriv.cli.main import main

    try:
        code = main(["sparse", "--data", SPEC, "--rounds", "2", "--quiet", *extra])
    except SystemExit as exc:          # argparse's choices
        code = exc.code
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and needle in err, err


def test_sparse_flower_module_needs_no_flower_to_import_and_cli_says_what_to_install(tmp_path):
    import subprocess
    import sys

    code = ("import sys, vflpriv.sparse.remote, vflpriv.sparse.api, vflpriv.cli.sparse; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('flwr', 'ray')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    ledger = tmp_path / "run.ledger"
    code = ("import sys; sys.modules['flwr'] = None; from vflpriv.cli.main import main; "
            "sys.exit(main(sys.argv[1:]))")
    out = subprocess.run([sys.executable, "-c", code, "sparse", "--data", SPEC, "--rounds", "2",
                          "--epsilon", "2", "--delta", "1e-5", "--lr", "0.01", "--backend",
                          "flower-sim", "--ledger", str(ledger)], capture_output=True, text=True)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "flwr[simulation]" in out.stderr and not ledger.exists()
