"""Scoring deployed (issue 31, item 4 on Flower): ``vflpriv flower spec predict`` writes a run
description from the model's manifest and the parties' schemas, each node config naming its
party's own file of new rows, ID column and model file; the run -- the private set intersection,
then the secure sum of the partial margins, each step on its party's node, every frame relayed
and metered by the server -- gives the scores of ``vflpriv predict`` in process, bit for bit,
with the same frame bytes.  Here the described run's roles are hosted over the in-process link
(the ClientApp's code path); tests/test_flower_predict_deploy.py runs the same files on a real
SuperLink and SuperNodes."""
import json
import os

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("flwr")

from vflpriv.cli.main import main  # noqa: E402
from vflpriv.flower.spec import load_description, read_node_config  # noqa: E402
from vflpriv.runtime.backends import run_local  # noqa: E402


def party_files(tmp_path, K=3, n=200, seed=0):
    """K party files of new rows, 3 columns each (party 0 also an unused column ``note``),
    ~88% of n IDs each in its own row order; and a logistic model of those columns written as
    ``vflpriv run --model-out`` writes it (label party 0)."""
    from vflpriv.model import write_split_model

    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, 3 * K))
    ids = np.array([f"c{i:04d}" for i in range(n)])
    paths, keep = [], []
    for k in range(K):
        kept = rng.permutation(np.flatnonzero(rng.random(n) < 0.88))
        df = pd.DataFrame(X[kept][:, 3 * k:3 * k + 3], columns=[f"f{3 * k + j}" for j in range(3)])
        df.insert(0, "cid", ids[kept])
        if k == 0:
            df["note"] = 1.0
        p = tmp_path / f"new{k}.csv"
        df.to_csv(p, index=False)
        paths.append(str(p))
        keep.append(set(kept))
    model = tmp_path / "model"
    write_split_model(str(model), coef=rng.normal(size=3 * K),
                      blocks=[range(3 * k, 3 * k + 3) for k in range(K)],
                      names=[f"f{j}" for j in range(3 * K)], intercept=0.25, label_party=0,
                      loss="logistic")
    return paths, str(model), len(set.intersection(*keep))


def write_scoring(tmp_path, paths, model, *extra, out="scoring"):
    """Each party's schema, then the description; returns (run.json, node configs read back)."""
    schemas = []
    for k, p in enumerate(paths):
        s = tmp_path / f"schema{k}.json"
        # each party's own identity key, made on its machine; its schema carries the
        # fingerprint and the key's path (issue 49: the scoring keys are pinned)
        key = os.path.join(os.path.dirname(p), f"new{k}_identity.key")
        assert main(["flower", "schema", "--party-data", p, "--id", "cid", "--json", str(s),
                     "--identity-key", key]) == 0
        schemas += ["--party-schema", f"{k}={s}"]
    d = tmp_path / out
    assert main(["flower", "spec", "predict", "--out", str(d), "--model", model, *schemas,
                 *extra]) == 0
    return str(d / "run.json"), [read_node_config(str(d / f"node{k}.toml"))
                                 for k in range(len(paths))]


def in_process(tmp_path, paths, model):
    js = tmp_path / "ref.json"
    assert main(["predict", "--model", model, *[f for k, p in enumerate(paths)
                                                for f in ("--party-data", f"{k}={p}")],
                 "--id", "cid", "--json", str(js)]) == 0
    return json.loads(js.read_text())


def _signed(rs, al, what="bytes"):
    """The in-process scoring report's frame bytes with each pinned scoring key a signed key
    offer (issue 49: each party j != L signs its ScoreKey with its own identity key; 99 bytes
    more than the bare 32-byte key, up from j and down to each other j')."""
    import copy

    from vflpriv.runtime.keys import OFFER_BYTES

    K, L = len(al["party_rows"]), al["leader"]
    signers = [j for j in range(K) if j != L] if K - 1 >= 2 else []
    extra = OFFER_BYTES - 32
    if what == "types":
        out = copy.deepcopy(rs["messages_by_type"])
        if signers:
            out["ScoreKey"][1] += extra * out["ScoreKey"][0]
        return out
    out = copy.deepcopy(rs["bytes"])
    for j in signers:
        out["uplink"][j] += extra
        for b in signers:
            if b != j:
                out["downlink"][b] += extra
    out["total"] = sum(out["uplink"]) + sum(out["downlink"])
    return out


def same_scoring(res, scores, ref):
    """The deployed run's result and the label party's scores against ``vflpriv predict``."""
    assert res["error"] is None, res["error"]
    assert scores["ids"] == ref["ids"] and len(ref["ids"]) == res["n"]
    np.testing.assert_allclose(scores["scores"], ref["scores"], rtol=0, atol=1e-9)
    np.testing.assert_allclose(scores["probabilities"], ref["probabilities"], rtol=0, atol=1e-9)
    al, ra = res["alignment"], ref["alignment"]
    assert al["intersection_size"] == ra["intersection_size"] and al["party_rows"] == ra["party_rows"]
    assert al["bytes"] == ra["bytes"] and al["messages_by_type"] == ra["messages_by_type"]
    sc, rs = res["scoring"], ref["scoring"]
    assert sc["bytes"] == _signed(rs, al) and sc["messages_by_type"] == _signed(rs, al, "types")
    assert sc["masked"] == rs["masked"]
    # the Flower messages carried at least the frames (the key offers ride on the PSI's last
    # exchange, so they are in the alignment's Flower bytes)
    for d in ("uplink", "downlink"):
        assert al["flower_bytes"][d] + sc["flower_bytes"][d] >= \
            sum(al["bytes"][d]) + sum(sc["bytes"][d])


def test_a_scoring_run_from_the_spec_files_equals_predict_in_process(tmp_path):
    paths, model, c = party_files(tmp_path)
    run, cfgs = write_scoring(tmp_path, paths, model, "--id", "cid")
    spec = load_description(run)
    assert spec["family"] == "predict" and spec["leader"] == 0 and "coef" not in json.dumps(spec)
    assert [cf["data"] for cf in cfgs] == paths
    assert [cf["model-file"] for cf in cfgs] == [os.path.join(model, f"party{k}.json")
                                                 for k in range(3)]
    assert cfgs[0]["scores-file"] == str(tmp_path / "scoring" / "scores.json")
    assert cfgs[0]["release-scores"] is False and "scores-file" not in cfgs[1]
    res = run_local(spec, cfgs)
    ref = in_process(tmp_path, paths, model)
    scores = json.loads((tmp_path / "scoring" / "scores.json").read_text())
    same_scoring(res, scores, ref)
    assert scores["scores"] == ref["scores"]                # the same words: bit for bit
    assert res["n"] == c and not res["released"] and "scores" not in res and "ids" not in res
    # every party deleted its aligned rows when the server closed the run
    assert not [f for f in os.listdir(os.environ.get("TMPDIR", "/tmp"))
                if f.startswith(f"vflpriv-aligned-{spec['run_id']}")]


def test_released_scores_reach_the_server_and_two_parties_go_unmasked(tmp_path):
    """With release-scores the result holds L's ids and scores; with K = 2 there is no key
    exchange (nothing to mask with), as in process."""
    paths, model, _ = party_files(tmp_path, K=2, seed=3)
    run, cfgs = write_scoring(tmp_path, paths, model, "--release-scores")
    res = run_local(load_description(run), cfgs)
    ref = in_process(tmp_path, paths, model)
    same_scoring(res, res, ref)
    assert res["released"] and not res["scoring"]["masked"]
    assert "ScoreKey" not in res["scoring"]["messages_by_type"]


def test_a_party_sends_no_margin_without_every_peers_key(tmp_path):
    """A server that drops a peer's key would make a margin go out less masked: party 1
    refuses, and sends nothing."""
    from vflpriv.model import messages as M
    from vflpriv.model.deployed import ScoringParty
    from vflpriv.runtime.roles import Refused
    from vflpriv.vertical.secure.mpc.channel import pack_bundle

    paths, model, _ = party_files(tmp_path, K=4)
    run, cfgs = write_scoring(tmp_path, paths, model)
    spec = load_description(run)
    setup = {"family": "predict", "run_id": "r", "leader": 0, "columns": spec["columns"],
             "loss": "logistic"}
    from vflpriv.model.scoring import key_pair

    party = ScoringParty(cfgs[1], setup)
    party.set_state({"score_key": key_pair()[0]})          # its offer made with the PSI
    from vflpriv.runtime.keys import load_identity, make_offer

    # party 2's key, signed by its own identity key (pinned in party 1's node config)
    signed2 = make_offer(key_pair()[1], load_identity(cfgs[2]["identity-key"]), "r", 2,
                         purpose="scoring")
    only2 = M.encode(M.ScoreKey(signed2), 2, 0)
    with pytest.raises(Refused, match=r"parties \[2\], not of every party .* \(\[2, 3\]\)"):
        party.handle("score_margin", pack_bundle([(2, only2)]), 0)
    with pytest.raises(Refused, match="party 3 as party 2"):
        party.handle("score_margin", pack_bundle([(2, M.encode(M.ScoreKey(bytes(32)), 3, 0))]),
                     0)


def test_a_party_file_without_its_model_columns_is_refused_before_scoring(tmp_path):
    paths, model, _ = party_files(tmp_path)
    run, cfgs = write_scoring(tmp_path, paths, model)
    pd.read_csv(paths[2]).rename(columns={"f7": "g7"}).to_csv(paths[2], index=False)
    res = run_local(load_description(run), cfgs)
    err = res["error"]
    assert err["kind"] == "PartyRefused" and err["party"] == 2 and err["phase"] == "alignment"
    assert "new2.csv" in err["reason"] and "'f7'" in err["reason"], err
    assert "scoring" not in res and not os.path.exists(tmp_path / "scoring" / "scores.json")


def _bad(capsys, argv, *needles, out=None):
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    for s in needles:
        assert s in err, err
    assert out is None or not os.path.exists(out)


def test_spec_predict_and_predict_on_flower_refuse_bad_input_with_one_line(tmp_path, capsys):
    paths, model, _ = party_files(tmp_path)
    s = [str(tmp_path / f"s{k}.json") for k in range(3)]
    for k, p in enumerate(paths):
        assert main(["flower", "schema", "--party-data", p, "--id", "cid", "--json", s[k]]) == 0
    pd.read_csv(paths[1]).drop(columns=["f4"]).to_csv(tmp_path / "short.csv", index=False)
    assert main(["flower", "schema", "--party-data", str(tmp_path / "short.csv"), "--id", "cid",
                 "--json", str(tmp_path / "short.json")]) == 0
    capsys.readouterr()
    ps = [f for k in range(3) for f in ("--party-schema", f"{k}={s[k]}")]
    out = str(tmp_path / "desc")
    base = ["flower", "spec", "predict", "--out", out]
    _bad(capsys, [*base, "--model", model, *ps[:2], "--party-schema",
                  f"1={tmp_path / 'short.json'}", *ps[4:]], "short.csv", "'f4'", out=out)
    _bad(capsys, [*base, "--model", model, *ps[:4]], "2 parties", "has 3", out=out)
    _bad(capsys, [*base, "--model", model, *ps, "--id", "pid"], "--id 'pid'", "'cid'", out=out)
    _bad(capsys, [*base, "--model", str(tmp_path), *ps], "manifest", out=out)
    # vflpriv predict on a Flower backend reads every file before anything starts
    js = str(tmp_path / "p.json")
    _bad(capsys, ["predict", "--model", model, "--party-data", f"0={paths[0]}", "--party-data",
                  f"1={tmp_path / 'short.csv'}", "--party-data", f"2={paths[2]}", "--id", "cid",
                  "--json", js, "--backend", "flower-sim"], "short.csv", "'f4'", out=js)
    with open(os.path.join(model, "party1.json")) as fh:
        body = json.load(fh)
    body["columns"][0] = "zz"
    with open(os.path.join(model, "party1.json"), "w") as fh:
        json.dump(body, fh)
    _bad(capsys, [*base, "--model", model, *ps], "party1.json", "'zz'", out=out)


@pytest.mark.slow
@pytest.mark.usefixtures("one_ray")                  # conftest: one Ray for all runs
def test_predict_on_flower_sim_equals_predict_in_process(tmp_path):
    """``vflpriv predict --backend flower-sim``: each party a ClientApp with its own files, the
    label party writing the scores on its side; the JSON of the in-process command, bit for
    bit, with the Flower bytes added."""
    paths, model, _ = party_files(tmp_path, seed=4)
    ref = in_process(tmp_path, paths, model)
    js = tmp_path / "sim.json"
    assert main(["predict", "--model", model, *[f for k, p in enumerate(paths)
                                                for f in ("--party-data", f"{k}={p}")],
                 "--id", "cid", "--json", str(js), "--backend", "flower-sim"]) == 0
    got = json.loads(js.read_text())
    assert got["ids"] == ref["ids"] and got["scores"] == ref["scores"]
    assert got["probabilities"] == ref["probabilities"]
    assert got["alignment"]["bytes"] == ref["alignment"]["bytes"]
    assert got["scoring"]["bytes"] == ref["scoring"]["bytes"]
    f = got["flower"]
    assert f["backend"] == "flower-sim" and f["totals"]["uplink_frames"] >= \
        sum(ref["alignment"]["bytes"]["uplink"]) + sum(ref["scoring"]["bytes"]["uplink"])
