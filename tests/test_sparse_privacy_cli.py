"""Private sparse runs (charges before noise, calibrated by the accountant, budget refusals),
the k-means partition, the audit entries and the ``vflpriv sparse`` command."""
import json
import math

import numpy as np
import pytest

from accounting import BudgetExceeded, SelfComposed, get_accountant, read_ledger
from vflpriv.cli.main import main
from vflpriv.sparse import BatchSchedule, Participation, make_strategy, run
from vflpriv.sparse.data import kmeans_partition, synthetic_003
from vflpriv.sparse.losses import SquaredLoss
from vflpriv.sparse.privacy import PrivacyPlan
from vflpriv.sparse.shards import DenseShards

SPEC = "synthetic-003:alpha=0.5,e=1.1,sparsity=5,seed=0,d=100,samples=50"


def _shards(N=6):
    fd = synthetic_003(clients=N, sparsity=5, seed=0, d=60, samples=40)
    return DenseShards(fd.parts, SquaredLoss()), fd


def test_record_level_charges_before_noise_and_spends_at_most_the_target(tmp_path,
                                                                          monkeypatch):
    shards, fd = _shards()
    ledger = tmp_path / "l.jsonl"
    plan = PrivacyPlan("record", 3.0, 1e-5, 1.0, rounds=4, local_steps=2,
                       participation=Participation("full"), counts=shards.counts,
                       batch_size=10, ledger=str(ledger))
    seen = []
    orig = DenseShards.private_grad

    def spy(self, X, clients, *a, **k):
        # every participant's round was durably recorded before its first noise draw
        recs = read_ledger(ledger).records
        seen.append({r.party for r in recs if r.round == ctx_round[0]})
        return orig(self, X, clients, *a, **k)

    ctx_round = [0]
    monkeypatch.setattr(DenseShards, "private_grad", spy)
    res = run(make_strategy("fediterht", 5, 2), shards, rounds=4, lr=0.05,
              batch=BatchSchedule(10), seed=0, privacy=plan,
              callback=lambda t, f: ctx_round.__setitem__(0, t + 1))
    assert all(s == {f"client-{i}" for i in range(6)} for s in seen)
    assert len(read_ledger(ledger).records) == 4 * 6
    spent = res.privacy["epsilon_spent"]
    assert spent["best"] <= 3.0 + 1e-9 and spent["rdp"] <= 3.0 + 1e-9
    # recomputed from the ledger by the accountant
    ev = read_ledger(ledger).event(party="client-0")
    assert math.isclose(get_accountant("rdp").epsilon(ev, 1e-5), spent["rdp"])


def test_a_round_past_the_plan_is_refused_before_its_noise():
    shards, _ = _shards()
    plan = PrivacyPlan("client", 2.0, 1e-5, 0.5, rounds=3, local_steps=1,
                       participation=Participation("full"), counts=shards.counts)
    draws = []
    orig = plan.noisy_mean
    plan.noisy_mean = lambda *a: (draws.append(1), orig(*a))[1]
    with pytest.raises(BudgetExceeded):
        run(make_strategy("fedgradmp", 5, 1), shards, rounds=4, seed=0, privacy=plan)
    assert len(draws) == 3 and len(plan.ledger.records) == 3


def test_client_level_noise_has_the_calibrated_scale():
    shards, _ = _shards(N=8)
    plan = PrivacyPlan("client", 1.0, 1e-5, 2.0, rounds=5, local_steps=1,
                       participation=Participation("fixed", 4), counts=shards.counts)
    ev = SelfComposed(plan.round_event(), 5)
    assert get_accountant("rdp").epsilon(ev, 1e-5) <= 1.0 + 1e-9
    ref = np.zeros(200)
    V = np.zeros((4, 200))
    V[0, 0] = 100.0                                   # clipped to norm C = 2
    Vc = plan.clip_updates(V, ref)
    assert np.isclose(np.linalg.norm(Vc[0]), 2.0) and (Vc[1:] == 0).all()

    class Ctx:
        secret_rng = np.random.default_rng(0)

        class shards:
            N = 8

    out = np.array([plan.noisy_mean(Vc, ref, Ctx) for _ in range(200)])
    noise = out[:, 1:].ravel() * 4                   # divided by the public count L = 4
    sd = plan.z * 2.0
    # 39800 draws: the sample sd is within 2% of sigma with overwhelming probability (>10 sd)
    assert abs(noise.std() / sd - 1) < 0.02
    assert abs(out[:, 0].mean() * 4 - 2.0) < 5 * sd / np.sqrt(200)


def test_poisson_participation_claims_amplification_only_there():
    shards, _ = _shards()
    full = PrivacyPlan("client", 1.0, 1e-5, 1.0, rounds=10, local_steps=1,
                       participation=Participation("full"), counts=shards.counts)
    pois = PrivacyPlan("client", 1.0, 1e-5, 1.0, rounds=10, local_steps=1,
                       participation=Participation("poisson", 0.2), counts=shards.counts)
    fixed = PrivacyPlan("client", 1.0, 1e-5, 1.0, rounds=10, local_steps=1,
                        participation=Participation("fixed", 2), counts=shards.counts)
    assert type(full.round_event()).__name__ == "Gaussian" == type(fixed.round_event()).__name__
    assert fixed.z == full.z
    assert pois.round_event().sample_rate == 0.2 and pois.z < full.z


def test_kmeans_partition_deals_two_clusters_per_client():
    from sklearn.datasets import load_digits
    from sklearn.cluster import KMeans

    Z = load_digits().data
    idx = kmeans_partition(Z, 10, 20, 2, seed=0)
    assert len(idx) == 100
    allrows = np.concatenate(idx)
    assert len(allrows) == Z.shape[0] == len(set(allrows.tolist()))
    labels = KMeans(n_clusters=10, n_init=3, random_state=0).fit_predict(Z)
    assert all(len(set(labels[i].tolist())) == 2 for i in idx)


def test_sparse_audits_hold_and_catch_a_miscalibration():
    from vflpriv.audit import audit_mechanism, registered
    from vflpriv.audit.sparse import client_round

    reg = registered()
    assert {"sparse_client_round", "sparse_record_step"} <= set(reg)
    for name in ("sparse_client_round", "sparse_record_step"):
        assert audit_mechanism(reg[name](), samples=10_000, seed=0)["ok"]
    bad = audit_mechanism(client_round(noise_factor=0.3), samples=10_000, seed=1)
    assert not bad["ok"]


def test_cli_json_fields(tmp_path):
    out = tmp_path / "r.json"
    code = main(["sparse", "--algorithm", "fedgradmp", "--data", SPEC, "--clients", "8",
                 "--rounds", "5", "--tau", "5", "--seed", "0", "--json", str(out)])
    assert code == 0
    d = json.loads(out.read_text())
    for k in ("objective", "relative_error", "support_precision", "support_recall",
              "uplink_bytes", "downlink_bytes", "epsilon_spent", "algorithm", "rounds", "tau",
              "local_steps", "clients", "seed"):
        assert k in d
    assert len(d["objective"]) == 6 and len(d["relative_error"]) == 6
    assert len(d["uplink_bytes"]) == 5 and d["epsilon_spent"] is None
    assert d["relative_error"][-1] < 1e-8


def test_cli_private_run_and_ledger(tmp_path, capsys):
    out, led = tmp_path / "r.json", tmp_path / "l.jsonl"
    code = main(["sparse", "--algorithm", "fediterht", "--data", SPEC, "--clients", "4",
                 "--rounds", "3", "--lr", "0.01", "--batch-size", "10", "--epsilon", "2",
                 "--delta", "1e-5", "--ledger", str(led), "--seed", "1", "--json", str(out)])
    assert code == 0
    d = json.loads(out.read_text())
    assert set(d["epsilon_spent"]) >= {"rdp", "pld", "best"}
    assert d["epsilon_spent"]["best"] <= 2.0 + 1e-9
    assert len(read_ledger(led).records) == 12
    assert "not for deployment" in capsys.readouterr().out
    assert read_ledger(led).header["budget"]["per_party"] is True
    assert main(["ledger", "verify", str(led)]) == 0          # per-client budgets hold


def test_cli_second_run_that_does_not_fit_is_refused_before_its_first_round(tmp_path, capsys):
    """Record level: each client's whole plan (every round) is checked against what its own
    budget has left, and reserved, before the first round; a second run of the same plan on the
    same ledger (budget 2, the first spent about 2) is refused with exit 1, appends no release,
    and leaves no live reservation; the first run's reservation ended with it."""
    import json as _json

    led = tmp_path / "l.jsonl"
    argv = ["sparse", "--algorithm", "fediterht", "--data", SPEC, "--clients", "4", "--rounds",
            "3", "--lr", "0.01", "--batch-size", "10", "--epsilon", "2", "--delta", "1e-5",
            "--ledger", str(led), "--seed", "1"]
    assert main(argv) == 0
    lines = [_json.loads(x) for x in led.read_text().splitlines()]
    assert sum(x.get("type") == "reserve" for x in lines) == 4          # one per client
    assert sum(x.get("type") == "end" for x in lines) >= 1
    n_rel = len(read_ledger(led).records)
    capsys.readouterr()
    assert main(argv) == 1
    assert "before its first release" in capsys.readouterr().err
    assert len(read_ledger(led).records) == n_rel
    lines = [_json.loads(x) for x in led.read_text().splitlines()]
    assert sum(x.get("type") == "reserve" for x in lines) == 4          # nothing reserved


@pytest.mark.parametrize("argv,needle", [
    (["--tau", "0"], "--tau"),
    (["--rounds", "0"], "--rounds"),
    (["--participation", "500"], "--participation"),
    (["--data", "synthetic-003:alpha=-1"], "alpha"),
    (["--data", "synthetic-003:bogus=1"], "bogus"),
    (["--data", "/nonexistent/file.svm"], "does not exist"),
    (["--epsilon", "1"], "--delta"),
    (["--epsilon", "1", "--delta", "1e-5"], "--lr"),
    (["--epsilon", "1", "--delta", "1e-5", "--algorithm", "fedgradmp"], "record"),
    (["--algorithm", "diht", "--local-steps", "3"], "--local-steps"),
    (["--lr", "-1"], "--lr"),
    (["--tau", "5000"], "--tau"),
    (["--epsilon", "1", "--delta", "1e-5", "--lr", "0.1", "--ledger", "/nonexistent/d/l.jsonl"],
     "--ledger"),
    (["--batch-growth", "0.5"], "--batch-growth"),
    (["--data", "sklearn:nope"], "sklearn"),
])
def test_cli_bad_input_exits_2_with_one_line(argv, needle, tmp_path, capsys):
    led = tmp_path / "never.jsonl"
    code = main(["sparse", "--rounds", "2", "--ledger", str(led), *argv])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and needle in err, err
    assert not led.exists()


def test_geometric_batch_schedule_reaches_the_sampler(monkeypatch):
    shards, _ = _shards()
    seen = []
    orig = DenseShards.sample_batch
    monkeypatch.setattr(DenseShards, "sample_batch",
                        lambda self, c, b, rng: (seen.append(b), orig(self, c, b, rng))[1])
    run(make_strategy("fediterht", 5, 1), shards, rounds=4, lr=0.01,
        batch=BatchSchedule(3, 2.0), seed=0)
    assert seen == [3, 6, 12, 24]


def test_gaussian_dictionary_run_reports_no_support_scores():
    from vflpriv.sparse.api import fit

    res = fit(SPEC, "fedgradmp", clients=4, rounds=2, tau=5, dictionary="gaussian", seed=0)
    assert res.support_precision is None and len(res.relative_error) == 3


def test_record_level_noise_has_the_calibrated_scale():
    # zero features: the release is pure noise, N(0, (z C)^2) / (q n_i) per coordinate
    sh = DenseShards([(np.zeros((50, 100)), np.zeros(50))] * 2, SquaredLoss())
    rng = np.random.default_rng(0)
    q = np.array([0.2, 0.2])
    G = np.vstack([sh.private_grad(np.zeros((2, 100)), np.arange(2), q, 1.5,
                                   np.full((2, 1), 0.8 * 1.5), rng) for _ in range(100)])
    sd = 0.8 * 1.5 / (0.2 * 50)
    # 20000 draws: the sample sd is within 3% of sigma with overwhelming probability (> 6 sd)
    assert abs(G.std() / sd - 1) < 0.03 and abs(G.mean()) < 5 * sd / np.sqrt(G.size)
