"""The vertical methods on Flower: same model and spend as in process, per-party budgets, faults.

Every run here is seeded, so the in-process run is the reference: a Flower run moves the same
frames, so x, the objective history, the frame byte counts and the spend must agree bit for bit.
The deployment tests start real SuperLink/SuperNode processes on 127.0.0.1 (cleaned up by
LocalDeployment) and are bounded in time by their timeouts.
"""
import os
import time

import numpy as np
import pytest

flwr = pytest.importorskip("flwr")
pytest.importorskip("ray")
pytestmark = pytest.mark.usefixtures("one_ray")    # conftest: one Ray for all runs

from accounting import Ledger, read_ledger  # noqa: E402
from vflpriv.data import VerticalData, make_synthetic  # noqa: E402
from vflpriv.errors import InputError  # noqa: E402
from vflpriv.flower import FlowerOptions  # noqa: E402
from vflpriv.flower.link import PartyLost, PartyRefused  # noqa: E402
from vflpriv.vertical.api import solve  # noqa: E402

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


@pytest.mark.slow
def test_flower_sim_equals_inprocess_private_and_dfw(tmp_path):
    data = _data()
    kw = dict(iterations=4, seed=3, **PRIVATE)
    ref = solve(data, ledger=str(tmp_path / "a.ledger"), **kw)
    sol = solve(data, ledger=str(tmp_path / "b.ledger"), backend="flower-sim", **kw)
    _same(ref, sol)
    assert ref.privacy["epsilon_spent"] == sol.privacy["epsilon_spent"]
    assert ref.privacy["releases"] == sol.privacy["releases"]
    # each party's own ledger holds exactly its releases: one index per round, plus its features
    spend = sol.extra["flower"]["party_spend"]
    for k in range(data.K):
        recs = read_ledger(str(tmp_path / f"b.ledger.party{k}")).records
        assert len(recs) == spend[str(k)]["releases"] == 4 + sol.released[k]
        assert {r.party for r in recs} == {f"party {k}"}
    # Flower's messages carry our frames plus its envelope: strictly more bytes
    tot = sol.extra["flower"]["totals"]
    assert tot["uplink"] > tot["uplink_frames"] >= sum(sol.uplink_framed)
    # dFW: one mover per round, the others' gaps still travel
    ref = solve(data, algorithm="dfw", iterations=3, seed=5)
    sol = solve(data, algorithm="dfw", iterations=3, seed=5, backend="flower-sim")
    _same(ref, sol)


@pytest.mark.slow
def test_party_budget_refuses_before_any_release(tmp_path):
    data = _data(K=2)
    opts = FlowerOptions(party_budget=(0.5, 1e-5))      # smaller than the run's plan
    t0 = time.monotonic()
    with pytest.raises(PartyRefused) as err:
        solve(data, ledger=str(tmp_path / "s.ledger"), iterations=3, seed=1,
              backend="flower-sim", flower=opts, **PRIVATE)
    assert err.value.round == 0 and "budget" in str(err.value)
    assert time.monotonic() - t0 < 120
    # nothing released anywhere: the refusal came at setup, before the first round's charges
    assert read_ledger(str(tmp_path / "s.ledger")).records == []
    for k in range(2):
        p = tmp_path / f"s.ledger.party{k}"
        assert not p.exists() or read_ledger(str(p)).records == []


def test_backend_errors_name_the_value(tmp_path):
    data = _data(K=2)
    with pytest.raises(InputError, match="flower-simm"):
        solve(data, iterations=2, backend="flower-simm")
    with pytest.raises(InputError, match="in process only"):
        solve(data, algorithm="fw", iterations=2, backend="flower-sim")
    with pytest.raises(InputError, match="checkpoints"):
        solve(data, algorithm="bcfw", iterations=2, backend="flower-sim",
              checkpoint=str(tmp_path / "c.ckpt"))
    assert not (tmp_path / "c.ckpt").exists()


def _killed_party_deployment(tmp_path):
    """The in-process part of the test below (run at the session's start: conftest.py); returns
    the deployment to run on a thread: party 1's SuperNode is killed after round 1."""
    from vflpriv.vertical import remote as FV
    from vflpriv.flower.deploy import LocalDeployment
    from vflpriv.optim import SquaredLoss
    from vflpriv.vertical.engine import _seeds

    data = _data(K=2)
    # the in-process reference, planned for the same 3 rounds (same calibrated noise)
    ref4 = solve(data, ledger=str(tmp_path / "ref4.ledger"), iterations=3, seed=9, **PRIVATE)
    plan = ref4.noise_plan
    srv_ledger = str(tmp_path / "server.ledger")
    Ledger(srv_ledger, budget={"epsilon": 4.0, "delta": 1e-5, "accountant": "rdp"})
    spec = FV.make_spec(data, loss=SquaredLoss(), eta=1.0, iterations=3,
                        server_kwargs=dict(algorithm="bcfw", seed=9, noise_plan=plan,
                                           clip=_clip(plan), sampling=None),
                        private=True, ledger=srv_ledger, budget=(4.0, 1e-5), accountant="rdp",
                        run_id="deployed", connect_timeout=60, reply_timeout=300)
    ledgers = [str(tmp_path / f"p{k}.ledger") for k in range(2)]
    cfgs = FV.party_configs(data, str(tmp_path), private=True, budget=(4.0, 1e-5),
                            ledgers=ledgers, noise_entropy=FV.noise_entropy_of(_seeds(9)[2]))

    def run():
        with LocalDeployment(cfgs, str(tmp_path / "dep")) as dep:
            out = dep.run(spec, on_round=lambda r: dep.kill_node(1) if r == 1 else None,
                          timeout=400)
        return data, ref4, srv_ledger, ledgers, out

    return run


@pytest.mark.slow
@pytest.mark.deployment(prepare=_killed_party_deployment)
def test_deployment_equals_inprocess_then_a_killed_party_is_reported(deployment):
    """A real deployment on loopback, 2 parties, private: party 1's SuperNode is killed after
    round 1.  The completed round equals the in-process run's; the error names party 1 and
    round 1 (Flower reports a dead SuperNode after two missed 30 s heartbeats, so the deployment
    takes a minute or two: it runs from the session's start, conftest.py); every ledger is valid
    and holds each release once."""
    _, (data, ref4, srv_ledger, ledgers, out) = deployment
    err = out["error"]
    assert err["kind"] == "PartyLost" and err["party"] == 1 and err["round"] == 1, err
    assert out["t"] == 1
    # the round done equals the in-process run's first round (same plan, same seed)
    assert out["selections"] == ref4.extra["selections"][:1]
    assert np.array_equal(out["x"], _x_after(data, ref4.extra["selections"][:1]))
    # ledgers: valid, each release once; the server charged round 1's selections before asking
    srv = read_ledger(srv_ledger).records
    assert [r.round for r in srv if r.note == "signed index"] == [0, 1]
    counts = []
    for k in range(2):
        recs = read_ledger(ledgers[k]).records
        rounds = [r.round for r in recs if r.note == "signed index"]
        assert rounds == sorted(set(rounds)) and rounds[:1] == [0]
        counts.append(len(recs))
    # restart: the same ledgers carry what the lost run spent; a new 3-round run no longer fits
    # and is refused before any release (nothing is charged twice, nothing new is charged)
    from accounting import BudgetExceeded

    with pytest.raises(BudgetExceeded, match="before its first release"):
        solve(data, ledger=srv_ledger, iterations=3, seed=9, backend="flower-sim",
              flower=FlowerOptions(party_ledgers=tuple(ledgers)), **PRIVATE)
    assert len(read_ledger(srv_ledger).records) == len(srv)
    assert [len(read_ledger(p).records) for p in ledgers] == counts


def _x_after(data, selections, eta=1.0):
    """x after the given rounds of elementary-sampling BCFW-AS (gamma_t = 2 / (t + 2))."""
    x = np.zeros(data.d)
    for t, sel in enumerate(selections):
        gamma = 2.0 / (t + 2.0)
        for k, g, sign in sel:
            x[data.blocks[k]] *= 1.0 - gamma
            x[g] += gamma * eta * sign
    return x


def _clip(plan):
    d = plan.details
    return (1.0, 3.0, d["z_bound"], d["derivative_bound"])


def _unreachable_party_deployment(tmp_path):
    """The test below's deployment (started at the session's start: conftest.py): party 1's
    SuperNode is never started."""
    from vflpriv.vertical import remote as FV
    from vflpriv.flower.deploy import LocalDeployment
    from vflpriv.optim import SquaredLoss

    data = _data()
    spec = FV.make_spec(data, loss=SquaredLoss(), eta=1.0, iterations=2,
                        server_kwargs=dict(algorithm="bcfw", seed=1), private=False,
                        connect_timeout=4, reply_timeout=60)
    cfgs = FV.party_configs(data, str(tmp_path), private=False)

    def run():
        t0 = time.monotonic()
        with LocalDeployment(cfgs, str(tmp_path / "dep"), absent=(1,)) as dep:
            # the 4 s connect timeout starts when the ServerApp does: first wait for the two
            # SuperNodes that are started to have registered (a line in their logs), so a slow
            # start-up of theirs cannot turn "2 of 3" into "1 of 3"
            _wait_for_line([os.path.join(dep.logs, f"supernode{k}.log") for k in (0, 2)],
                           "SuperNode ID:", dep.nodes.values())
            out = dep.run(spec, timeout=120)
        return out, time.monotonic() - t0

    return run


def _wait_for_line(paths, needle, procs, safety=300):
    """Wait until every file in ``paths`` holds a line with ``needle``; fail at once if one of
    ``procs`` exits first (``safety`` s: only a net against a hang)."""
    deadline = time.monotonic() + safety
    while True:
        texts = []
        for p in paths:
            try:
                with open(p, errors="replace") as fh:
                    texts.append(fh.read())
            except OSError:
                texts.append("")
        if all(needle in t for t in texts):
            return
        assert all(p.poll() is None for p in procs), texts
        assert time.monotonic() < deadline, texts
        time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.deployment(prepare=_unreachable_party_deployment)
def test_unreachable_party_is_named_within_the_connect_timeout(deployment):
    tmp_path, (out, seconds) = deployment
    assert seconds < 120
    assert out["error"]["kind"] == "PartyLost" and out["t"] == 0
    assert "2 of 3" in out["error"]["message"]
    assert not os.path.exists(tmp_path / "dep" / "result.pkl.tmp")


@pytest.mark.slow
def test_secure_on_flower_sim_equals_inprocess(tmp_path):
    """dp-bcfw-secure: party-to-party messages relayed (encrypted) by the ServerApp; same x,
    objective, frame bytes and spend as in process."""
    data = _data(n=50, d=18)
    kw = dict(PRIVATE, algorithm="dp-bcfw-secure", iterations=3, seed=4, max_features=2)
    ref = solve(data, ledger=str(tmp_path / "a.ledger"), **kw)
    sol = solve(data, ledger=str(tmp_path / "b.ledger"), backend="flower-sim", **kw)
    _same(ref, sol)
    assert ref.privacy["epsilon_spent"] == sol.privacy["epsilon_spent"]
    assert sol.extra["secure_products"] == ref.extra["secure_products"]
    # every party's own ledger holds every release of the run (each touches its people)
    n_server = len(read_ledger(str(tmp_path / "b.ledger")).records)
    for k in range(data.K):
        assert len(read_ledger(str(tmp_path / f"b.ledger.party{k}")).records) == n_server


def test_secure_channel_authenticates_sender_receiver_kind_round():
    from vflpriv.runtime.roles import Refused
    from vflpriv.vertical.secure.mpc.channel import OVERHEAD, Channel, new_key_pair

    keys = [new_key_pair() for _ in range(3)]
    pubs = {k: pk for k, (_, pk) in enumerate(keys)}
    ch = [Channel(k, sk, pubs, "run") for k, (sk, _) in enumerate(keys)]
    msg = bytes(range(200))
    blob = ch[0].seal(1, "MaskedVector", 5, msg)
    assert len(blob) == len(msg) + OVERHEAD and msg not in blob
    assert ch[1].open(0, "MaskedVector", 5, blob) == msg
    for bad in [lambda: ch[2].open(0, "MaskedVector", 5, blob),      # not its message
                lambda: ch[1].open(0, "ResultShare", 5, blob),       # other kind
                lambda: ch[1].open(0, "MaskedVector", 6, blob),      # replayed in another round
                lambda: ch[1].open(2, "MaskedVector", 5, blob),      # claimed sender
                lambda: ch[1].open(0, "MaskedVector", 5, blob[:-1] + bytes([blob[-1] ^ 1]))]:
        with pytest.raises(Refused, match="does not authenticate"):
            bad()
    # a fresh nonce every time: the same frame never gives the same ciphertext
    assert ch[0].seal(1, "MaskedVector", 5, msg) != blob
    # another run's keys do not open it
    other = Channel(1, keys[1][0], pubs, "another run")
    with pytest.raises(Refused):
        other.open(0, "MaskedVector", 5, blob)
