"""Checkpoint and resume of dp-bcfw-secure's least-squares path on the remote backends (issue
31): the server's checkpoint holds no party state; every party saves its own (generator, x_k, u_k, c_k, the cross-products released to it,
A_k^T y + noise, its selected set, how many of its own ledger's records precede the save) on
its own disk when the server checkpoints, and resumes from it, replaying its own ledger's records
of the redone rounds (vflpriv/vertical/secure/checkpoints/saves.py).

References: the uninterrupted run with the same seed on the same backend's roles (the roles over
the in-process LocalLink; tests/test_flower_vertical.py and test_secure_intercept.py show they
equal flower-sim and the in-process run).  Interruptions: the server's link dies at a chosen
exchange (after the parties answered it: they charged the round), or the run's callback raises
after a round (flower-sim, whose ServerApp runs in this process).  Equality is exact: x, the
objective history, the intercept, the bytes, and every ledger's records (event, party, round,
note) -- one per release, none charged twice.
"""
import shutil

import numpy as np
import pytest

from accounting import read_ledger
from vflpriv.data import VerticalData, make_synthetic
from vflpriv.errors import InputError
from vflpriv.runtime.link import LocalLink, PartyRefused
from vflpriv.vertical import solve
from vflpriv.vertical.checkpoint import read_checkpoint

pytestmark = pytest.mark.filterwarnings("ignore")      # clipping notes and unpinned-key warnings

K = 3
PRIVATE = dict(algorithm="dp-bcfw-secure", epsilon=2.0, delta=1e-5, feature_bound=1.0,
               label_bound=1.0, iterations=5, seed=5, eta=1.0, label_party=0,
               fit_intercept=True)


class _Crash(RuntimeError):
    pass


def _data():
    A, y, _ = make_synthetic(n=120, d=12, density=0.3, sparsity=0.2, seed=0)
    return VerticalData.from_arrays(A, y, "balanced", parties=K)


def _keys(path):
    return [(r.party, r.round, r.note, r.event) for r in read_ledger(str(path)).records]


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    """The uninterrupted runs over the link: ``{name: (Solution, its ledger path)}``."""
    d = tmp_path_factory.mktemp("ls-ref")
    out = {}
    for name, kw in (("squared", PRIVATE),):
        led = d / f"{name}.ledger"
        out[name] = (solve(_data(), ledger=str(led), backend="local", **kw), led)
    return out


def _same_as(ref, ref_led, sol, led):
    assert np.array_equal(sol.x, ref.x)
    assert sol.objective == ref.objective and len(sol.objective) == PRIVATE["iterations"]
    assert sol.intercept == ref.intercept and sol.initial_objective == ref.initial_objective
    assert sol.extra["selections"] == ref.extra["selections"]
    assert sol.extra["intercepts"] == ref.extra["intercepts"]
    assert (sol.uplink, sol.downlink) == (ref.uplink, ref.downlink)
    assert sol.extra["bytes_by_type"] == ref.extra["bytes_by_type"]
    assert sol.released == ref.released
    # the server's ledger and every party's own: the same releases, each once
    assert _keys(led) == _keys(ref_led)
    assert len({r.run_id for r in read_ledger(str(led)).records}) == 1
    for k in range(K):
        assert _keys(f"{led}.party{k}") == _keys(f"{ref_led}.party{k}")
    assert sol.privacy["epsilon_spent"] == ref.privacy["epsilon_spent"]
    assert sol.privacy["releases"] == ref.privacy["releases"]
    spend = sol.extra["flower"]["party_spend"]
    ref_spend = ref.extra["flower"]["party_spend"]
    assert [spend[str(k)]["releases"] for k in range(K)] == \
        [ref_spend[str(k)]["releases"] for k in range(K)]
    assert [spend[str(k)]["epsilon"] for k in range(K)] == \
        [ref_spend[str(k)]["epsilon"] for k in range(K)]


def _dying(monkeypatch, kind, round, nth=1):
    """The server's link dies right after the ``nth`` exchange of ``kind`` in ``round`` was
    answered (the parties handled it: what they charge for it is on their ledgers)."""
    real, seen = LocalLink.exchange, []

    def exchange(self, requests, rnd, **kw):
        out = real(self, requests, rnd, **kw)
        if rnd == round and any(k == kind for _, _, k in requests):
            seen.append(1)
            if len(seen) == nth:
                raise _Crash("the server's machine died")
        return out

    monkeypatch.setattr(LocalLink, "exchange", exchange)
    return real


@pytest.mark.parametrize("name", ["squared"])
def test_resumed_over_a_link_from_each_partys_own_save_equals_the_uninterrupted_run(
        tmp_path, monkeypatch, references, name):
    """Checkpoints every 2 rounds; the run dies in round 3 after every party charged its
    selections: the server's last checkpoint is of round 2 and each party has its saves of
    rounds 0 and 2.  A party whose save is gone refuses at setup, before any release; with its
    save back the resume redoes rounds 2 and 3 from the saves, replaying their records in the
    server's ledger and in each party's own, and ends as the uninterrupted run."""
    ref, ref_led = references[name]
    kw = PRIVATE
    data = _data()
    led, ck = tmp_path / "l.ledger", tmp_path / "c.ckpt"
    real = _dying(monkeypatch, "select", 3)
    with pytest.raises(Exception, match="died"):
        solve(data, ledger=str(led), checkpoint=str(ck), checkpoint_every=2, backend="local",
              **kw)
    monkeypatch.setattr(LocalLink, "exchange", real)
    meta, _ = read_checkpoint(ck)
    assert (meta["state"]["stage"], meta["state"]["t"]) == ("ready", 2)
    assert "party0_x" not in read_checkpoint(ck)[1]          # no party state at the server
    assert len(read_ledger(str(led)).records) > meta["ledger_length"]     # records to replay
    for k in range(K):
        assert sorted(p.name for p in tmp_path.glob(f"c.ckpt.party{k}.t*")) == \
            [f"c.ckpt.party{k}.t0", f"c.ckpt.party{k}.t2"]
        assert [r.round for r in read_ledger(f"{led}.party{k}").records][-1] == 3
    before = {p: _keys(p) for p in [led] + [f"{led}.party{k}" for k in range(K)]}
    # a party whose save is gone: refused at its setup, nothing charged anywhere
    save = tmp_path / "c.ckpt.party1.t2"
    save.rename(tmp_path / "kept")
    with pytest.raises(PartyRefused) as err:
        solve(data, ledger=str(led), checkpoint=str(ck), checkpoint_every=2, resume=True,
              backend="local", **kw)
    assert err.value.party == 1 and "cannot resume from round 2" in err.value.reason
    assert {p: _keys(p) for p in before} == before
    (tmp_path / "kept").rename(save)
    sol = solve(data, ledger=str(led), checkpoint=str(ck), checkpoint_every=2, resume=True,
                backend="local", **kw)
    _same_as(ref, ref_led, sol, led)


def test_resumed_from_before_the_setup_replays_the_label_release(tmp_path, monkeypatch,
                                                                  references):
    """The run dies in the label's secure product, after the label release A_k^T y was charged
    by the server and by every party but before the checkpoint after the setup: the server's
    checkpoint is the one before any release (stage start), no party has a save, and the
    resume replays every record of the run in each ledger instead of charging it again."""
    ref, ref_led = references["squared"]
    data, led, ck = _data(), tmp_path / "l.ledger", tmp_path / "c.ckpt"
    real = _dying(monkeypatch, "holder", 0)
    with pytest.raises(Exception, match="died"):
        solve(data, ledger=str(led), checkpoint=str(ck), backend="local", **PRIVATE)
    monkeypatch.setattr(LocalLink, "exchange", real)
    assert read_checkpoint(ck)[0]["state"]["stage"] == "start"
    assert [r.note for r in read_ledger(str(led)).records] == ["secure: A_k^T y"]
    for k in range(K):
        assert [r.note for r in read_ledger(f"{led}.party{k}").records] == ["secure: A_k^T y"]
    assert not list(tmp_path.glob("c.ckpt.party*"))
    sol = solve(data, ledger=str(led), checkpoint=str(ck), resume=True, backend="local",
                **PRIVATE)
    _same_as(ref, ref_led, sol, led)


def test_checkpoints_on_a_link_are_no_longer_refused_and_bad_resumes_are(tmp_path):
    """The squared loss on a remote backend takes --checkpoint (it used to be refused: "for the
    in-process run").  Refused before any release: a private checkpointed run without a ledger
    file, a resume with other options than the checkpoint's run or of a checkpoint whose
    parties' states are elsewhere (InputError, at the command), and a party's save of another
    run (PartyRefused, at that party's setup)."""
    data = _data()
    kw = dict(PRIVATE, iterations=2)
    with pytest.raises(InputError, match="needs a ledger file"):
        solve(data, checkpoint=str(tmp_path / "x.ckpt"), backend="local", **kw)
    runs = {}
    for name in ("a", "b"):
        d = tmp_path / name
        d.mkdir()
        sol = solve(data, ledger=str(d / "l.ledger"), checkpoint=str(d / "c.ckpt"),
                    backend="local", **kw)
        runs[name] = (sol, d / "l.ledger", d / "c.ckpt")
        assert read_checkpoint(d / "c.ckpt")[0]["state"]["t"] == 2
        # a save after every round (checkpoint_every 1): the last two are kept
        assert sorted(p.name for p in d.glob("c.ckpt.party0.t*")) == \
            ["c.ckpt.party0.t1", "c.ckpt.party0.t2"]
    _, led, ck = runs["b"]
    ledgers = [led] + [f"{led}.party{k}" for k in range(K)]
    before = [_keys(p) for p in ledgers]
    with pytest.raises(InputError, match="resume: epsilon=1.0 but the checkpoint's run used"):
        solve(data, ledger=str(led), checkpoint=str(ck), resume=True, backend="local",
              **dict(kw, epsilon=1.0))
    # the parties' states are in their own saves, not in the checkpoint: not for an in-process
    # resume; and an in-process run's checkpoint (every party's state in it) not for a link
    with pytest.raises(InputError, match="written by a run on a remote backend"):
        solve(data, ledger=str(led), checkpoint=str(ck), resume=True, **kw)
    d = tmp_path / "inprocess"
    d.mkdir()
    solve(data, ledger=str(d / "l.ledger"), checkpoint=str(d / "c.ckpt"), **kw)
    with pytest.raises(InputError, match="written by an in-process run"):
        solve(data, ledger=str(d / "l.ledger"), checkpoint=str(d / "c.ckpt"), resume=True,
              backend="local", **kw)
    shutil.copy(tmp_path / "a" / "c.ckpt.party2.t2", tmp_path / "b" / "c.ckpt.party2.t2")
    with pytest.raises(PartyRefused) as err:
        solve(data, ledger=str(led), checkpoint=str(ck), resume=True, backend="local", **kw)
    assert err.value.party == 2 and "is not of this run's round 2" in err.value.reason
    assert [_keys(p) for p in ledgers] == before


@pytest.mark.slow
@pytest.mark.usefixtures("one_ray")                  # conftest: one Ray for all runs
def test_resumed_on_flower_sim_equals_the_uninterrupted_run(tmp_path, references):
    """On Flower's simulation runtime (each party a ClientApp; its saves in its node config's
    checkpoint file): the run's callback raises after its third round (t = 2; checkpoints every
    2 rounds, the last after two rounds, so the third round's releases are on every ledger
    beyond it); the resume equals the uninterrupted run."""
    pytest.importorskip("flwr")
    pytest.importorskip("ray")
    ref, ref_led = references["squared"]
    data, led, ck = _data(), tmp_path / "l.ledger", tmp_path / "c.ckpt"

    def crash(t, _):
        if t == 2:
            raise _Crash("the run was stopped")

    with pytest.raises(Exception, match="stopped"):
        solve(data, ledger=str(led), checkpoint=str(ck), checkpoint_every=2, callback=crash,
              backend="flower-sim", **PRIVATE)
    assert read_checkpoint(ck)[0]["state"]["t"] == 2
    for k in range(K):
        assert [r.round for r in read_ledger(f"{led}.party{k}").records][-1] == 2
        assert (tmp_path / f"c.ckpt.party{k}.t2").exists()
    sol = solve(data, ledger=str(led), checkpoint=str(ck), checkpoint_every=2, resume=True,
                backend="flower-sim", **PRIVATE)
    _same_as(ref, ref_led, sol, led)
    assert sol.extra["backend"] == "flower-sim"
