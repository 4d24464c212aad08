"""dp-bcfw-secure with the logistic loss (the GLM path: label at one party, derivatives under
secret sharing every round) on every backend: its party roles over the in-process LocalLink
(the Flower backends' code path, no Ray), on Flower's simulation runtime, from the files of
``vflpriv flower spec run`` and on a real loopback deployment.

What "the same run" means here.  The selections (hence the coefficients x), the frame bytes of
every message kind, the ledgers and the spend are those of the in-process run, bit for bit.
The intercept and the objective are equal up to the rounding of the sigmoid's unit factors:
masks come from the OS in every run (issue 32) and the factors are truncated per share, so the
derivatives move by about 2^-f_c per term from run to run -- in process too (two in-process runs
with one seed differ the same way; tests/test_vertical_secure_checkpoint.py).  Without an
intercept the objective is a function of x alone, and is equal bit for bit.
"""
import numpy as np
import pytest

from accounting import read_ledger
from vflpriv.data import VerticalData
from vflpriv.runtime.link import PartyRefused
from vflpriv.vertical.api import solve

# the glm path given explicitly (the logistic default is ssp: test_vertical_secure_ssp.py)
PRIVATE = dict(algorithm="dp-bcfw-secure", loss="logistic", logistic_path="glm", epsilon=4.0,
               delta=1e-5, feature_bound=1.0, label_bound=1.0, iterations=3, seed=4)
PLAIN = dict(algorithm="dp-bcfw-secure", loss="logistic", logistic_path="glm", iterations=3,
             seed=4, fit_intercept=False)


def _binary(n=240, d=12, K=3, seed=0):
    """Features in [-1, 1] and labels in {-1, +1} from a sparse logistic model."""
    rng = np.random.default_rng(seed)
    A = np.clip(rng.normal(size=(n, d)) / 4, -1, 1)
    w = np.zeros(d)
    w[:4] = [6.0, -4.0, 4.0, -2.8]
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-A @ w)), 1.0, -1.0)
    return VerticalData.from_arrays(A, y, "balanced", parties=K)


def _same(ref, sol, exact):
    assert np.array_equal(ref.x, sol.x)
    assert ref.extra["selections"] == sol.extra["selections"]
    assert (ref.uplink, ref.downlink) == (sol.uplink, sol.downlink)
    assert (ref.uplink_framed, ref.downlink_framed) == (sol.uplink_framed, sol.downlink_framed)
    assert ref.extra["bytes_by_type"] == sol.extra["bytes_by_type"]
    assert ref.initial_objective == sol.initial_objective
    if exact:
        assert ref.objective == sol.objective and ref.intercept == sol.intercept
    else:
        assert sol.objective == pytest.approx(ref.objective, abs=1e-5)
        assert sol.intercept == pytest.approx(ref.intercept, abs=1e-4)
        assert sol.intercept != 0.0


def _same_spend(ref, sol, ledger, K, T):
    assert ref.privacy["epsilon_spent"] == sol.privacy["epsilon_spent"]
    assert ref.privacy["releases"] == sol.privacy["releases"] == T
    # each party's own ledger: every round's one Gaussian (it touches every party's people),
    # charged by the party role itself
    for k in range(K):
        recs = read_ledger(f"{ledger}.party{k}").records
        assert [r.round for r in recs] == list(range(T))
        assert {r.note for r in recs} == {"secure glm: noisy scores"}


def test_glm_roles_over_local_link_equal_inprocess(tmp_path):
    data = _binary()
    ref = solve(data, ledger=str(tmp_path / "a.ledger"), **PRIVATE)
    sol = solve(data, ledger=str(tmp_path / "b.ledger"), backend="local", **PRIVATE)
    _same(ref, sol, exact=False)
    _same_spend(ref, sol, tmp_path / "b.ledger", data.K, 3)
    assert sol.extra["backend"] == "local" and sol.extra["path"] == "glm"
    # the label at party 2, helper party 0: the roles follow the run's L and H
    kw = dict(PLAIN, label_party=2, helper_party=0)
    _same(solve(data, **kw), solve(data, backend="local", **kw), exact=True)


def test_a_party_adds_noise_only_for_what_its_own_ledger_charged(tmp_path, monkeypatch):
    """Issue 32 at the party: its holder gate is armed by its own ledger's charge in the role
    (message ``glm_round``), not by the server's word; a party that charged nothing refuses to
    add noise to its shares, naming itself and the round, and nothing was released."""
    from vflpriv.vertical.secure.glm.party import GlmParty

    monkeypatch.setattr(GlmParty, "charge", lambda self, t: None)    # the party's charge lost
    with pytest.raises(PartyRefused) as err:
        solve(_binary(), ledger=str(tmp_path / "s.ledger"), backend="local", **PRIVATE)
    assert err.value.round == 0 and "refused to release noisy" in err.value.reason
    assert err.value.party in (0, 1)          # L or H, the holders of d's shares


def test_a_written_logistic_description_runs_from_its_files_alone(tmp_path, capsys):
    """``vflpriv flower spec run --loss logistic``: labels in the label party's file only,
    pinned keys, the server's ledger with the whole plan checked; the files alone, run with the
    roles over the local link, complete.  A non-private description ends at the in-process x."""
    pytest.importorskip("flwr")
    from vflpriv.cli.main import main
    from vflpriv.flower.spec import load_description, read_node_config
    from vflpriv.runtime.backends import FlowerOptions, run_local
    from vflpriv.runtime.partydata import load_party_data

    from vflpriv.runtime.keys import Pinning, new_identity

    keys = {k: str(tmp_path / f"party{k}_own.key") for k in range(3)}
    fps = {k: new_identity(path) for k, path in keys.items()}     # each party's own key
    out = tmp_path / "desc"
    assert main(["flower", "spec", "run", "--out", str(out), "--data",
                 "synthetic:n=120,d=12,density=0.5,seed=0", "--parties", "3", "--loss",
                 "logistic", "--algorithm", "dp-bcfw-secure", "--epsilon", "2", "--delta",
                 "1e-5", "--feature-bound", "1", "--label-bound", "1", "--iterations", "2",
                 "--label-party", "1", "--logistic-path", "glm", "--fingerprints",
                 ",".join(f"{k}={fp}" for k, fp in fps.items())]) == 0
    capsys.readouterr()
    spec = load_description(str(out / "run.json"))
    assert spec["family"] == "glm" and spec["glm"]["label_party"] == 1
    # each party's identity-key set to where it keeps its own key
    cfgs = [dict(read_node_config(str(out / f"node{k}.toml")), **{"identity-key": keys[k]})
            for k in range(3)]
    assert [load_party_data(c["data"])[1].size for c in cfgs] == [0, 120, 0]
    assert all(c.get("peer-fingerprints") for c in cfgs)
    assert read_ledger(str(out / "server.ledger")).records == []
    res = run_local(spec, cfgs)
    assert res["error"] is None and res["t"] == 2 and len(res["intercepts"]) == 2
    for k in range(3):
        assert len(read_ledger(str(out / f"party{k}.ledger")).records) == 2

    data = _binary(n=120)
    plain = dict(PLAIN, fit_intercept=True)
    out2 = tmp_path / "plain"
    solve(data, backend="flower", flower=FlowerOptions(spec_dir=str(out2),
                                                       pinning=Pinning(fps, keys)), **plain)
    res2 = run_local(load_description(str(out2 / "run.json")),
                     [read_node_config(str(out2 / f"node{k}.toml")) for k in range(3)])
    ref = solve(data, **plain)
    assert np.array_equal(res2["x"], ref.x)
    assert res2["intercept"] == pytest.approx(ref.intercept, abs=1e-4)


@pytest.mark.slow
@pytest.mark.usefixtures("one_ray")                  # conftest: one Ray for all runs
def test_logistic_on_flower_sim_equals_inprocess(tmp_path):
    """Flower's simulation runtime (Ray): each party a ClientApp, the party-to-party messages
    sealed and relayed by the ServerApp; private with the intercept, and non-private without
    it (the objective then bit for bit)."""
    pytest.importorskip("flwr")
    pytest.importorskip("ray")
    data = _binary()
    ref = solve(data, ledger=str(tmp_path / "a.ledger"), **PRIVATE)
    sol = solve(data, ledger=str(tmp_path / "b.ledger"), backend="flower-sim", **PRIVATE)
    _same(ref, sol, exact=False)
    _same_spend(ref, sol, tmp_path / "b.ledger", data.K, 3)
    tot = sol.extra["flower"]["totals"]
    assert tot["uplink"] > tot["uplink_frames"] >= sum(sol.uplink_framed)
    _same(solve(data, **PLAIN), solve(data, backend="flower-sim", **PLAIN), exact=True)


def test_least_squares_holders_serve_only_what_their_own_ledgers_charged(tmp_path, monkeypatch):
    """The same gate in the least-squares roles: a holder serves its new feature (or the label)
    only after its own ledger charged it; the gate's state survives between messages (a role
    is rebuilt for every message), so a party whose charge was lost refuses."""
    from vflpriv.vertical.secure.squares.party import SecureParty

    kw = dict(algorithm="dp-bcfw-secure", epsilon=4.0, delta=1e-5, feature_bound=1.0,
              label_bound=3.0, iterations=2, seed=4, max_features=2)
    data = _binary(n=60)
    ref = solve(data, ledger=str(tmp_path / "a.ledger"), **kw)
    sol = solve(data, ledger=str(tmp_path / "b.ledger"), backend="local", **kw)
    assert np.array_equal(ref.x, sol.x) and ref.objective == sol.objective
    monkeypatch.setattr(SecureParty, "charge_features", lambda self, msg, t: None)
    with pytest.raises(PartyRefused) as err:
        solve(data, ledger=str(tmp_path / "c.ledger"), backend="local", **kw)
    assert (err.value.party, err.value.round) == (0, 0) and "A_k^T y" in err.value.reason


class _Crash(RuntimeError):
    pass


def test_logistic_resumes_over_a_link_from_each_partys_own_save(tmp_path, monkeypatch):
    """Checkpoints on a remote backend (roles over the local link): the server's checkpoint
    holds no party state; every party saves its own (generator, x_k, u_k, intercepts, how many
    of its ledger's records precede it) on its own disk when the server checkpoints.  The run
    dies in round 3 after every party charged it (checkpoints every 2 rounds: the last after
    round 1); the resume redoes rounds 2 and 3 from the saves, replaying their charges in the
    server's ledger and in each party's own, and ends as the uninterrupted run: the same x,
    one record per round in every ledger, the same spend."""
    from vflpriv.runtime.link import LocalLink

    data = _binary()
    kw = dict(PRIVATE, iterations=5)
    ref = solve(data, ledger=str(tmp_path / "ref.ledger"), **kw)
    led, ck = tmp_path / "l.ledger", tmp_path / "c.ckpt"
    real = LocalLink.exchange

    def dying(self, requests, round, **k):
        if round == 3 and any(kind == "glm_factors" for _, _, kind in requests):
            raise _Crash("the server's machine died")
        return real(self, requests, round, **k)

    monkeypatch.setattr(LocalLink, "exchange", dying)
    with pytest.raises(Exception, match="died"):
        solve(data, ledger=str(led), checkpoint=str(ck), checkpoint_every=2, backend="local",
              **kw)
    monkeypatch.setattr(LocalLink, "exchange", real)
    assert [r.round for r in read_ledger(str(led)).records] == [0, 1, 2, 3]
    for k in range(data.K):      # each party charged round 3 before the server died
        assert [r.round for r in read_ledger(f"{led}.party{k}").records] == [0, 1, 2, 3]
        assert sorted(p.name for p in tmp_path.glob(f"c.ckpt.party{k}.t*")) == \
            [f"c.ckpt.party{k}.t0", f"c.ckpt.party{k}.t2"]
    # a party whose save is gone cannot resume: refused at setup, before any release
    save = tmp_path / "c.ckpt.party1.t2"
    save.rename(tmp_path / "kept")
    with pytest.raises(PartyRefused) as err:
        solve(data, ledger=str(led), checkpoint=str(ck), checkpoint_every=2, resume=True,
              backend="local", **kw)
    assert err.value.party == 1 and "cannot resume from round 2" in err.value.reason
    (tmp_path / "kept").rename(save)
    assert [r.round for r in read_ledger(str(led)).records] == [0, 1, 2, 3]
    sol = solve(data, ledger=str(led), checkpoint=str(ck), checkpoint_every=2, resume=True,
                backend="local", **kw)
    assert np.array_equal(sol.x, ref.x)
    assert (sol.uplink, sol.downlink) == (ref.uplink, ref.downlink)
    assert len(sol.objective) == 5
    assert sol.extra["selections"] == ref.extra["selections"]
    assert sol.intercept == pytest.approx(ref.intercept, abs=1e-4)
    assert sol.objective == pytest.approx(ref.objective, abs=1e-5)
    assert [r.round for r in read_ledger(str(led)).records] == list(range(5))
    for k in range(data.K):
        assert [r.round for r in read_ledger(f"{led}.party{k}").records] == list(range(5))
    assert sol.privacy["epsilon_spent"] == ref.privacy["epsilon_spent"]


def test_the_factors_kept_between_messages_live_on_the_partys_disk(monkeypatch):
    """L and H keep 2 J n words of factors from step 2 to step 3.  A deployed SuperNode lost a
    role state of that size at n = 1e6 (docs/network.md): the role's state names a file in its
    masked-block folder instead, and the run over a link still equals the in-process one."""
    import pickle

    from vflpriv.runtime import roles
    from vflpriv.vertical.secure.glm import roles as glm_remote

    seen, sizes = [], []
    get = glm_remote.GlmPartyRole.get_state

    def spy(self):
        st = get(self)
        seen.append(st["_pending"])
        return st

    real = roles.answer

    def measuring(build, cfg, store, kind, frame, round):
        out = real(build, cfg, store, kind, frame, round)
        if "state" in store:
            sizes.append(len(store["state"]))
        return out

    monkeypatch.setattr(glm_remote.GlmPartyRole, "get_state", spy)
    monkeypatch.setattr(roles, "answer", measuring)
    data = _binary(n=4000)
    ref = solve(data, **PLAIN)
    sol = solve(data, backend="local", **PLAIN)
    _same(ref, sol, exact=True)
    files = [p for p in seen if p is not None]
    assert files and all(p[0] == "file" and p[1].endswith("pending.npz") for p in files)
    J = 8
    assert max(sizes) < 2 * J * data.n * 8            # below one copy of the factors
