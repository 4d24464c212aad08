"""Private entity alignment (vflpriv.align): the PSI against a brute-force intersection, its
bytes against the wire format's closed form, and a run from three party files (different row
orders, 85-90% overlap) against the run on the joined intersection; a split model's secure
scores against the model's own scores (issue 31)."""
import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vflpriv.align import align
from vflpriv.align.messages import POINT_BYTES
from vflpriv.cli.main import main
from vflpriv.vertical.messages import HEADER_BYTES


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 4).flatmap(lambda K: st.tuples(
    st.just(K), st.integers(0, K - 1),
    st.lists(st.lists(st.integers(0, 40), min_size=1, max_size=30, unique=True),
             min_size=K, max_size=K))))
def test_psi_equals_the_brute_force_intersection(case):
    K, leader, sets = case
    ids = [[f"id{v}" for v in s] for s in sets]
    common = set(ids[0]).intersection(*map(set, ids[1:]))
    if not common:
        with pytest.raises(Exception, match="no ID|shares no ID"):
            align(ids, leader, workers=1)
        return
    al = align(ids, leader, workers=1)
    # the leader's order, and each party's rows naming the same IDs in that order
    expect = [v for v in ids[leader] if v in common]
    for k in range(K):
        assert [ids[k][int(r)] for r in al.rows[k]] == expect
    assert al.intersection_size == len(common)


def test_bytes_follow_the_wire_format():
    rng = np.random.default_rng(3)
    sets = [[f"u{v}" for v in rng.choice(400, size=m, replace=False)] for m in (300, 250, 280)]
    al = align(sets, 1, workers=1)
    c, n = al.intersection_size, [len(s) for s in sets]
    h, t = HEADER_BYTES, al.tag_bytes
    setup, lead = h + 21, h + 4 + POINT_BYTES * n[1]
    rep = al.report()
    # the leader uploads setup and its points once (the server forwards them), then sends each
    # other party its rows; each other party uploads its points and the leader's tags
    assert rep["bytes"]["uplink"][1] == setup + lead + 2 * (h + 4 + 4 * c)
    for j in (0, 2):
        assert rep["bytes"]["uplink"][j] == (h + 4 + POINT_BYTES * n[j]) + (h + 5 + t * n[1])
        assert rep["bytes"]["downlink"][j] == setup + lead + (h + 4 + 4 * c)
    assert rep["bytes"]["downlink"][1] == sum(rep["bytes"]["uplink"][j] for j in (0, 2))


def test_the_rows_positions_reach_the_leader_shuffled():
    """The leader reads party j's rows only through j's secret shuffle: over 200 common IDs the
    positions it sends differ from j's file rows (all equal with probability 1/200!)."""
    from vflpriv.align import psi

    ids = [f"x{i}" for i in range(200)]
    p = psi.PsiParty(1, ids)
    p.own_points(psi.new_nonce(), shuffle=True)
    assert not np.array_equal(p._order, np.arange(200))
    assert sorted(p._order.tolist()) == list(range(200))


def _party_files(tmp_path, n=260, seed=0):
    """Three party files of one table: each keeps 85-90% of the people, in its own order."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, size=(n, 9))
    w = rng.normal(size=9)
    y = (X @ w - np.median(X @ w) + 0.3 * rng.normal(size=n) > 0).astype(int)
    ids = np.array([f"c{i:04d}" for i in range(n)])
    paths, keep = [], []
    for k in range(3):
        kept = np.flatnonzero(rng.random(n) < 0.875)
        kept = rng.permutation(kept)
        df = pd.DataFrame(X[kept][:, 3 * k:3 * k + 3], columns=[f"f{3 * k + j}" for j in range(3)])
        df.insert(0, "pid", ids[kept])
        if k == 0:
            df["y"] = y[kept]
        p = tmp_path / f"party{k}.csv"
        df.to_csv(p, index=False)
        paths.append(str(p))
        keep.append(kept)
    # the joined intersection, in party 0's (the label party's) file order
    common = set(keep[0]) & set(keep[1]) & set(keep[2])
    order = [i for i in keep[0] if i in common]
    joined = pd.DataFrame(X[order], columns=[f"f{j}" for j in range(9)])
    joined["y"] = y[order]
    jp = tmp_path / "joined.csv"
    joined.to_csv(jp, index=False)
    return paths, str(jp), ids[order], X[order], len(common)


def _run(argv):
    assert main(argv) == 0


@pytest.mark.parametrize("algo,exact", [
    (["--algorithm", "dpfw", "--loss", "logistic", "--epsilon", "2", "--delta", "1e-5"], True),
    (["--algorithm", "dp-bcfw-secure", "--loss", "squared", "--epsilon", "2", "--delta", "1e-5",
      "--label-party", "0"], False),
    (["--algorithm", "dp-bcfw-secure", "--loss", "logistic", "--epsilon", "2", "--delta", "1e-5",
      "--label-party", "0"], False),
])
def test_run_from_party_files_equals_the_run_on_the_joined_intersection(tmp_path, algo, exact):
    """Bit for bit where the algorithm is deterministic given its seed (dpfw); the secure path
    truncates fixed-point products of shares masked from OS entropy (never seeded), so two runs
    on the same table differ by that rounding (~1e-6 here) and the comparison allows 1e-4."""
    paths, joined, _, _, c = _party_files(tmp_path)
    assert 0.85 ** 3 * 260 * 0.8 < c < 260
    common = ["--feature-bound", "1", "--label-bound", "1", "--iterations", "15", "--seed", "4",
              *algo]
    fa, fb = tmp_path / "files.json", tmp_path / "joined.json"
    _run(["run", *[f for k, p in enumerate(paths) for f in ("--party-data", f"{k}={p}")],
          "--id", "pid", "--label", "y", "--json", str(fa),
          "--model-out", str(tmp_path / "m_files"), "-q", *common])
    _run(["run", "--data", joined, "--label", "y", "--partition", "0,1,2;3,4,5;6,7,8",
          "--parties", "3", "--json", str(fb),
          "--model-out", str(tmp_path / "m_joined"), "-q", *common])
    a, b = json.loads(fa.read_text()), json.loads(fb.read_text())
    assert a["alignment"]["intersection_size"] == c == a["n"] == b["n"]
    assert a["epsilon_spent"] == b["epsilon_spent"]
    for k in range(3):
        ma = json.loads((tmp_path / "m_files" / f"party{k}.json").read_text())
        mb = json.loads((tmp_path / "m_joined" / f"party{k}.json").read_text())
        assert ma["columns"] == mb["columns"] == [f"f{3 * k + j}" for j in range(3)]
        if exact:
            assert ma == mb
        else:
            np.testing.assert_allclose(ma["coef"], mb["coef"], rtol=1e-4, atol=1e-4)
    if exact:
        assert a["objective"] == b["objective"] and a["intercept"] == b["intercept"]
    else:
        np.testing.assert_allclose(a["objective"], b["objective"], rtol=1e-4)
        assert a["intercept"] == pytest.approx(b["intercept"], abs=1e-4)


def test_predict_scores_equal_the_models_scores(tmp_path):
    paths, _, ids, X, c = _party_files(tmp_path, seed=5)
    model = tmp_path / "model"
    _run(["run", *[f for k, p in enumerate(paths) for f in ("--party-data", f"{k}={p}")],
          "--id", "pid", "--label", "y", "--algorithm", "dp-bcfw-secure", "--loss", "logistic",
          "--epsilon", "inf", "--feature-bound", "1", "--label-bound", "1", "--iterations", "20",
          "--seed", "1", "--model-out", str(model), "-q"])
    out = tmp_path / "pred.json"
    _run(["predict", "--model", str(model),
          *[f for k, p in enumerate(paths) for f in ("--party-data", f"{k}={p}")],
          "--id", "pid", "--json", str(out)])
    got = json.loads(out.read_text())
    coef = np.concatenate([json.loads((model / f"party{k}.json").read_text())["coef"]
                           for k in range(3)])
    b = json.loads((model / "party0.json").read_text())["intercept"]
    assert got["ids"] == list(ids) and len(got["scores"]) == c
    # fixed point at 32 fractional bits: at most 2 * 2^-33 from the float scores
    np.testing.assert_allclose(got["scores"], X @ coef + b, rtol=0, atol=1e-9)
    np.testing.assert_allclose(got["probabilities"], 1 / (1 + np.exp(-(X @ coef + b))), atol=1e-9)
    s = got["scoring"]
    assert s["masked"] and s["bytes"]["uplink"][0] == 0          # the label party sends nothing
    assert s["bytes"]["downlink"][0] == 2 * (12 + 4 + 8 * c)     # two masked margins


def test_the_label_party_sees_only_masked_margins():
    """A masked margin is one-time-padded: its words' top bits are fair coins although every
    partial margin is small and positive (all top bits 0 unmasked).  Over 4000 words a share of
    ones outside 0.5 +- 0.04 (5 standard deviations) happens with probability < 1e-6."""
    from vflpriv.model import SplitModel
    from vflpriv.model import messages as M
    from vflpriv.model.scoring import secure_scores
    from vflpriv.vertical.transport import Meter

    rng = np.random.default_rng(0)
    n = 4000
    blocks = [rng.uniform(0, 1, (n, 2)) for _ in range(3)]
    model = SplitModel("logistic", 0, [["a", "b"]] * 3, [np.ones(2)] * 3, 0.5, {})
    sent = []
    real = M.decode

    def spy(frame):                       # what reaches the label party, as it decodes it
        msg, party, t = real(frame)
        if isinstance(msg, M.MaskedMargin):
            sent.append(np.asarray(msg.words))
        return msg, party, t

    M.decode = spy
    try:
        scores, _ = secure_scores(blocks, model, meter=Meter())
    finally:
        M.decode = real
    np.testing.assert_allclose(scores, sum(b.sum(axis=1) for b in blocks) + 0.5, atol=1e-9)
    assert len(sent) == 2
    for w in sent:
        assert abs(np.mean(w >> np.uint64(63)) - 0.5) < 0.04


def _bad(tmp_path, capsys, argv, *needles):
    led = tmp_path / "ledger.jsonl"
    rc = main(["run", *argv, "--ledger", str(led), "--epsilon", "1", "--delta", "1e-5",
               "--feature-bound", "1", "--label-bound", "1", "--algorithm", "dp-bcfw-secure",
               "--loss", "logistic", "--iterations", "3"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1, err
    for s in needles:
        assert s in err, err
    assert not led.exists()            # refused before any ledger record


def test_bad_party_files_exit_2_naming_the_file(tmp_path, capsys):
    paths, *_ = _party_files(tmp_path)
    pd_args = [f for k, p in enumerate(paths) for f in ("--party-data", f"{k}={p}")]
    # duplicate IDs
    df = pd.read_csv(paths[1])
    df.loc[5, "pid"] = df.loc[2, "pid"]
    dup = tmp_path / "dup.csv"
    df.to_csv(dup, index=False)
    _bad(tmp_path, capsys, [*pd_args[:2], "--party-data", f"1={dup}", *pd_args[4:], "--id",
                            "pid", "--label", "y"], "dup.csv", "duplicate ID at rows 2 and 5")
    # a missing ID column
    _bad(tmp_path, capsys, [*pd_args, "--id", "customer", "--label", "y"], "party0.csv",
         "no ID column 'customer'")
    # an empty intersection
    other = pd.read_csv(paths[2])
    other["pid"] = "z" + other["pid"]
    none = tmp_path / "none.csv"
    other.to_csv(none, index=False)
    _bad(tmp_path, capsys, [*pd_args[:4], "--party-data", f"2={none}", "--id", "pid",
                            "--label", "y"], "none.csv", "shares no ID")
    # the label party's file without the label
    _bad(tmp_path, capsys, [*pd_args, "--id", "pid", "--label", "y", "--label-party", "1"],
         "party1.csv", "no label column 'y'")
    # --data and --party-data together; a party without a file
    _bad(tmp_path, capsys, [*pd_args, "--data", paths[0], "--id", "pid", "--label", "y"],
         "not both")
    _bad(tmp_path, capsys, [*pd_args[:2], *pd_args[4:], "--id", "pid", "--label", "y"],
         "party 1 has no file")


def test_model_out_refuses_a_non_empty_directory(tmp_path, capsys):
    paths, *_ = _party_files(tmp_path)
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("mine")
    _bad(tmp_path, capsys, [f for k, p in enumerate(paths) for f in ("--party-data", f"{k}={p}")]
         + ["--id", "pid", "--label", "y", "--model-out", str(full)], "--model-out", "not empty")
    assert (full / "keep.txt").read_text() == "mine"


@pytest.mark.slow
def test_a_run_from_party_files_resumes_spending_nothing_twice(tmp_path, capsys):
    """Killed (SIGKILL) right after its first checkpoint, a run from party files resumes: the
    alignment runs again (fresh keys, the same common rows in the same order) and the ledger
    ends with exactly the records of an uninterrupted run."""
    import os
    import signal
    import subprocess
    import sys

    from test_resume_reservation import KILLER, ROOT

    paths, *_ = _party_files(tmp_path)
    argv = ["run", *[f for k, p in enumerate(paths) for f in ("--party-data", f"{k}={p}")],
            "--id", "pid", "--label", "y", "--algorithm", "dp-bcfw-secure", "--loss", "logistic",
            "--logistic-path", "glm", "--epsilon", "2", "--delta", "1e-5", "--feature-bound", "1",
            "--label-bound", "1", "--iterations", "6", "--quiet"]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    led, ck = tmp_path / "killed.jsonl", tmp_path / "c.npz"
    r = subprocess.run([sys.executable, "-c", KILLER, "first", *argv, "--ledger", str(led),
                        "--checkpoint", str(ck)], capture_output=True, text=True, timeout=120,
                       cwd=ROOT, env=env)
    assert r.returncode == -signal.SIGKILL, r.stderr
    assert main(["run", "--resume", str(ck), "--quiet", "--json", str(tmp_path / "r.json")]) == 0
    full = tmp_path / "full.jsonl"
    assert main([*argv, "--ledger", str(full)]) == 0
    capsys.readouterr()
    counts = []
    for ledger in (led, full):
        assert main(["ledger", "verify", str(ledger), "--json"]) == 0
        v = json.loads(capsys.readouterr().out)
        assert v["valid"] is True and v["reservations"] == []
        counts.append(v["records"])
    assert counts[0] == counts[1] > 0
    assert json.loads((tmp_path / "r.json").read_text())["alignment"]["intersection_size"] > 150


@pytest.mark.slow
@pytest.mark.usefixtures("one_ray")                  # conftest: one Ray for all runs
def test_party_files_on_flower_sim_equal_the_joined_run_in_process(tmp_path):
    """The consortium from its files with the training on Flower's simulation runtime ends where
    the in-process run on the joined intersection ends: dp-bcfw-secure least squares, seeded
    noise, the same objective, coefficients and spend (the alignment itself runs in the
    driver's process, as in process)."""
    paths, joined, _, _, c = _party_files(tmp_path, seed=7)
    common = ["--algorithm", "dp-bcfw-secure", "--loss", "squared", "--epsilon", "2",
              "--delta", "1e-5", "--feature-bound", "1", "--label-bound", "1",
              "--iterations", "4", "--seed", "2", "-q"]
    fa, fb = tmp_path / "sim.json", tmp_path / "joined.json"
    _run(["run", *[f for k, p in enumerate(paths) for f in ("--party-data", f"{k}={p}")],
          "--id", "pid", "--label", "y", "--backend", "flower-sim", "--json", str(fa),
          "--model-out", str(tmp_path / "m_sim"), *common])
    _run(["run", "--data", joined, "--label", "y", "--partition", "0,1,2;3,4,5;6,7,8",
          "--parties", "3", "--json", str(fb), "--model-out", str(tmp_path / "m_joined"),
          *common])
    a, b = json.loads(fa.read_text()), json.loads(fb.read_text())
    assert a["alignment"]["intersection_size"] == c == a["n"] == b["n"]
    assert a["flower"]["backend"] == "flower-sim"
    assert a["objective"] == b["objective"] and a["epsilon_spent"] == b["epsilon_spent"]
    for k in range(3):
        assert json.loads((tmp_path / "m_sim" / f"party{k}.json").read_text()) == \
            json.loads((tmp_path / "m_joined" / f"party{k}.json").read_text())
