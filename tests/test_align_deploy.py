"""A deployment from each party's own file (issue 31): ``vflpriv flower schema`` reads only a
file's header, ``vflpriv flower spec run --party-schema`` writes the run description and node
configs from the schemas alone (each node config naming its party's own file and ID column),
and the run they describe -- the PSI as its first phase, the noise calibrated from n = |C|, then
the training -- ends where ``vflpriv run --party-data`` ends in process: the same x bit for bit
(least squares and logistic; the logistic intercept to the sigmoid factors' rounding), the same
intersection and the same PSI frame bytes.  Here the described run's roles are hosted over the
in-process link (the ClientApp's code path); tests/test_flower_align_deploy.py runs the same
files on a real SuperLink and SuperNodes."""
import json
import os

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("flwr")

from vflpriv.cli.main import main  # noqa: E402
from vflpriv.flower.spec import load_description, read_node_config  # noqa: E402
from vflpriv.runtime.backends import run_local  # noqa: E402

BOUNDS = ["--feature-bound", "1", "--label-bound", "1"]


def party_files(tmp_path, n=240, seed=0, classes=False):
    """Three party files, 3 columns each, ~88% of n IDs each in its own row order; party 0
    also holds the label ``y`` (a 0/1 class with ``classes``)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, 9))
    y = np.clip(X[:, [0, 4, 7]] @ [0.8, -0.6, 0.5] + 0.1 * rng.standard_normal(n), -1, 1)
    ids = np.array([f"c{i:04d}" for i in range(n)])
    paths, keep = [], []
    for k in range(3):
        kept = rng.permutation(np.flatnonzero(rng.random(n) < 0.88))
        df = pd.DataFrame(X[kept][:, 3 * k:3 * k + 3], columns=[f"f{3 * k + j}" for j in range(3)])
        df.insert(0, "cid", ids[kept])
        if k == 0:
            df["y"] = (y[kept] > 0).astype(int) if classes else y[kept]
        p = tmp_path / f"party{k}.csv"
        df.to_csv(p, index=False)
        paths.append(str(p))
        keep.append(set(kept))
    return paths, len(keep[0] & keep[1] & keep[2])


def write_run(tmp_path, paths, opts, out="desc"):
    """Each party's schema, then the description from the schemas; returns (run.json path,
    node configs as read back)."""
    schemas = []
    for k, p in enumerate(paths):
        s = tmp_path / f"schema{k}.json"
        # each party makes its own identity key beside its file; the schema carries the
        # fingerprint and the key's path (issue 49)
        key = os.path.join(os.path.dirname(p), f"party{k}_identity.key")
        assert main(["flower", "schema", "--party-data", p, "--id", "cid",
                     *(["--label", "y"] if k == 0 else []), "--json", str(s),
                     "--identity-key", key]) == 0
        schemas += ["--party-schema", f"{k}={s}"]
    d = tmp_path / out
    assert main(["flower", "spec", "run", "--out", str(d), *schemas, "--label", "y",
                 "--label-party", "0", "--algorithm", "dp-bcfw-secure", *BOUNDS, *opts]) == 0
    return str(d / "run.json"), [read_node_config(str(d / f"node{k}.toml")) for k in range(3)]


def seeded(cfgs, seed):
    """A seeded test run's noise entropy in each node config (never written for deployment,
    issue 32), so that the run can be compared with the in-process run of the same seed."""
    from vflpriv.runtime.partydata import noise_entropy_of
    from vflpriv.vertical.engine import _seeds

    ent, key = noise_entropy_of(_seeds(seed)[2])
    return [dict(c, **{"noise-entropy": str(ent), "noise-spawn-key": ",".join(map(str, key))})
            for c in cfgs]


def in_process(tmp_path, paths, opts, name="ref"):
    """``vflpriv run --party-data`` in process: (its JSON, x and intercept from --model-out)."""
    js, model = tmp_path / f"{name}.json", tmp_path / f"{name}_model"
    assert main(["run", *[f for k, p in enumerate(paths) for f in ("--party-data", f"{k}={p}")],
                 "--id", "cid", "--label", "y", "--label-party", "0", "--algorithm",
                 "dp-bcfw-secure", *BOUNDS, *opts, "--json", str(js), "--model-out", str(model),
                 "-q"]) == 0
    parts = [json.loads((model / f"party{k}.json").read_text()) for k in range(3)]
    return json.loads(js.read_text()), np.concatenate([p["coef"] for p in parts]), \
        parts[0].get("intercept")


@pytest.mark.parametrize("loss,path", [("squared", None), ("logistic", None),
                                       ("logistic", "glm")])
def test_a_run_from_schemas_equals_the_run_on_the_joined_intersection(tmp_path, loss, path):
    """Least squares, the logistic loss's default (ssp) path and its glm path."""
    paths, c = party_files(tmp_path, classes=loss == "logistic")
    assert 0.85 ** 3 * 240 * 0.8 < c < 240
    opts = ["--loss", loss, "--epsilon", "4", "--delta", "1e-5", "--iterations", "5",
            "--seed", "3"] + (["--logistic-path", path] if path else [])
    run, cfgs = write_run(tmp_path, paths, opts)
    spec = load_description(run)
    assert spec["family"] == "align" and "n" not in spec
    assert [c_["data"] for c_ in cfgs] == paths and all(c_["id-column"] == "cid" for c_ in cfgs)
    assert cfgs[0]["label"] == "y" and "label" not in cfgs[1] and "label" not in cfgs[2]
    assert not any("noise-entropy" in c_ for c_ in cfgs)
    res = run_local(spec, seeded(cfgs, 3))
    assert res["error"] is None, res["error"]
    ref, x, b = in_process(tmp_path, paths, opts)
    assert np.array_equal(res["x"], x)
    assert res["family"] == {"squared": "secure", "logistic": path or "ssp"}[loss]
    if loss == "logistic":
        # the shares' truncation differs in the last unit between runs (OS-entropy masks) and
        # the intercept's step carries it on: 1.2e-5 was seen; 1e-4 as in test_flower_glm
        assert res["intercept"] == pytest.approx(b, abs=1e-4)
    al, ra = res["alignment"], ref["alignment"]
    assert al["intersection_size"] == ra["intersection_size"] == res["n"] == ref["n"] == c
    assert al["party_rows"] == ra["party_rows"]
    assert al["bytes"] == ra["bytes"] and al["messages_by_type"] == ra["messages_by_type"]
    # the Flower count of the phase carries the same frames (here: the frames themselves)
    assert al["flower_bytes"]["uplink"] >= sum(al["bytes"]["uplink"])
    assert res["calibration"]
    # every party deleted its aligned file when the server closed the run
    assert not [f for f in os.listdir(os.environ.get("TMPDIR", "/tmp"))
                if f.startswith(f"vflpriv-aligned-{spec['run_id']}")]


def test_a_run_the_server_ledger_cannot_hold_is_refused_before_the_alignment(tmp_path):
    """The same description run twice: the second run's plan (settled before the alignment:
    its privacy does not depend on n) is refused by the server's ledger before the private set
    intersection starts (issue 51: nobody learns which IDs the others hold); no ledger gains a
    record."""
    from accounting import read_ledger

    paths, _ = party_files(tmp_path)
    run, cfgs = write_run(tmp_path, paths, ["--epsilon", "2", "--delta", "1e-5",
                                            "--iterations", "4"])
    spec = load_description(run)
    assert run_local(spec, cfgs)["error"] is None
    ledgers = [spec["ledger"]] + [c["ledger"] for c in cfgs]
    counts = [len(read_ledger(p).records) for p in ledgers]
    res = run_local(spec, cfgs)
    assert res["error"]["kind"] == "BudgetExceeded" and res["error"]["phase"] == "budget"
    assert "nothing was released" in res["error"]["reason"]
    assert "alignment" not in res and "n" not in res
    assert [len(read_ledger(p).records) for p in ledgers] == counts


def test_a_party_whose_own_budget_cannot_hold_the_run_refuses_before_the_intersection(
        tmp_path):
    """Party 2's own budget is below the run's target: it refuses at the PSI's setup, before
    the label party's points reach anyone, naming itself; no ledger file is made anywhere."""
    paths, _ = party_files(tmp_path)
    run, cfgs = write_run(tmp_path, paths, ["--epsilon", "2", "--delta", "1e-5",
                                            "--iterations", "4"])
    spec = load_description(run)
    cfgs[2] = dict(cfgs[2], **{"budget-epsilon": "0.5"})
    res = run_local(spec, cfgs)
    err = res["error"]
    assert err["kind"] == "PartyRefused" and err["party"] == 2 and err["phase"] == "alignment"
    assert "refuses the run before the alignment" in err["reason"], err
    assert "alignment" not in res and "n" not in res
    assert not os.path.exists(spec["ledger"])
    assert not any(os.path.exists(c["ledger"]) for c in cfgs)
    # with its budget back the same description runs
    cfgs[2] = dict(cfgs[2], **{"budget-epsilon": "2"})
    assert run_local(spec, cfgs)["error"] is None


def test_a_party_file_unlike_its_schema_is_refused_before_any_release(tmp_path):
    paths, _ = party_files(tmp_path)
    run, cfgs = write_run(tmp_path, paths, ["--epsilon", "2", "--delta", "1e-5",
                                            "--iterations", "2"])
    df = pd.read_csv(paths[2]).rename(columns={"f7": "g7"})
    df.to_csv(paths[2], index=False)
    spec = load_description(run)
    res = run_local(spec, cfgs)
    err = res["error"]
    assert err["kind"] == "PartyRefused" and err["party"] == 2 and err["phase"] == "alignment"
    assert "party2.csv" in err["reason"] and "'f7'" in err["reason"], err
    assert not os.path.exists(spec["ledger"])
    assert not any(os.path.exists(c["ledger"]) for c in cfgs)


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


def test_schema_and_spec_refuse_bad_input_with_one_line(tmp_path, capsys):
    paths, _ = party_files(tmp_path)
    s = [str(tmp_path / f"s{k}.json") for k in range(3)]
    # the schema reads the header only: a file whose rows are not even a table still has one
    garbage = tmp_path / "rows.csv"
    garbage.write_text("cid,a,b\n1,2\n\"unclosed\n")
    assert main(["flower", "schema", "--party-data", str(garbage), "--id", "cid", "--json",
                 str(tmp_path / "g.json")]) == 0
    assert json.loads((tmp_path / "g.json").read_text())["columns"] == ["a", "b"]
    _bad(capsys, ["flower", "schema", "--party-data", paths[1], "--id", "pid", "--json", s[1]],
         "party1.csv", "'pid'", out=s[1])
    _bad(capsys, ["flower", "schema", "--party-data", paths[1], "--id", "cid", "--label", "y",
                  "--json", s[1]], "party1.csv", "'y'", out=s[1])
    for k, p in enumerate(paths):
        main(["flower", "schema", "--party-data", p, "--id", "cid", "--json", s[k],
              *(["--label", "y"] if k == 0 else [])])
    capsys.readouterr()
    ps = [f for k in range(3) for f in ("--party-schema", f"{k}={s[k]}")]
    base = ["--algorithm", "dp-bcfw-secure", "--epsilon", "2", "--delta", "1e-5", *BOUNDS,
            "--label", "y"]
    out = str(tmp_path / "desc")
    for extra, needles in (
            (["--label-party", "1"], ("party0.csv", "only the label party 1")),
            (["--id", "pid"], ("--id 'pid'", "'cid'")),
            (["--party-data", f"0={paths[0]}"], ("not both",)),
            (["--epsilon", "inf"], ("--epsilon inf",)),
            (["--parties", "2"], ("--parties 2",))):
        _bad(capsys, ["flower", "spec", "run", "--out", out, *ps, *base, *extra], *needles,
             out=out)
    _bad(capsys, ["flower", "spec", "run", "--out", out, *ps[:4], "--party-schema",
                  f"2={s[1]}", *base], "column 'f3'", out=out)
    # without --label, the label party's schema names it (these schemas carry no
    # fingerprint: refused, naming the party, unless --unpinned)
    _bad(capsys, ["flower", "spec", "run", "--out", out, *ps, *base[:-2]],
         "party 0 has no identity fingerprint", out=out)
    assert main(["flower", "spec", "run", "--out", str(tmp_path / "ok"), *ps, *base[:-2],
                 "--unpinned"]) == 0
    _bad(capsys, ["flower", "spec", "run", "--out", out, *ps, *base, "--algorithm", "dp-bcfw"],
         "dp-bcfw", out=out)
    _bad(capsys, ["flower", "spec", "run", "--out", out, "--party-schema", f"0={paths[0]}",
                  "--party-schema", f"1={s[1]}", *base], "party0.csv", "cannot be read as JSON",
         out=out)


def test_the_server_writes_the_split_model_that_predict_then_uses(tmp_path):
    """``spec run --model-out``: the ServerApp writes each party's own coefficients (and the
    label party's intercept) at the end; the files equal the in-process run's --model-out, and
    a wrong place is refused before anything is written."""
    paths, _ = party_files(tmp_path, classes=True)
    opts = ["--loss", "logistic", "--epsilon", "4", "--delta", "1e-5", "--iterations", "4",
            "--seed", "3"]
    model = tmp_path / "deployed_model"
    run, cfgs = write_run(tmp_path, paths, opts + ["--model-out", str(model)])
    spec = load_description(run)
    assert spec["model_out"] == str(model) and not model.exists()
    res = run_local(spec, seeded(cfgs, 3))
    assert res["error"] is None and res["model_out"] == str(model)
    _, x, b = in_process(tmp_path, paths, opts)
    parts = [json.loads((model / f"party{k}.json").read_text()) for k in range(3)]
    assert np.array_equal(np.concatenate([p["coef"] for p in parts]), x)
    assert parts[0]["intercept"] == pytest.approx(b, abs=1e-4)      # as above
    assert "intercept" not in parts[1] and "intercept" not in parts[2]
    assert [p["columns"] for p in parts] == [[f"f{3 * k + j}" for j in range(3)]
                                             for k in range(3)]
    # the privacy record is the in-process manifest's (issue 51): same fields, the spend of
    # this run computed from the server's ledger at run time, equal to the in-process spend
    dep = json.loads((model / "manifest.json").read_text())
    ref = json.loads((tmp_path / "ref_model" / "manifest.json").read_text())
    for key in ("algorithm", "id_column", "label", "delta"):
        assert dep[key] == ref[key], key
    assert dep["epsilon_spent"]["best"] == pytest.approx(ref["epsilon_spent"]["best"],
                                                         rel=1e-9)
    assert 0 < dep["epsilon_spent"]["best"] <= 4.0 and dep["deployment"] is True
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "x").write_text("")
    schemas = [f for k in range(3) for f in ("--party-schema", f"{k}={tmp_path}/schema{k}.json")]
    assert main(["flower", "spec", "run", "--out", str(tmp_path / "desc2"), *schemas, "--label",
                 "y", "--label-party", "0", "--algorithm", "dp-bcfw-secure", *BOUNDS, *opts,
                 "--model-out", str(busy)]) == 2
    assert not (tmp_path / "desc2").exists()


def test_a_description_from_before_the_ssp_default_keeps_glm(tmp_path):
    """A logistic description written while glm was the default has no ``logistic_path`` among
    its options: it still runs glm (family), where a new one runs the ssp default."""
    paths, _ = party_files(tmp_path, classes=True)
    opts = ["--loss", "logistic", "--epsilon", "4", "--delta", "1e-5", "--iterations", "3",
            "--seed", "3"]
    run, cfgs = write_run(tmp_path, paths, opts)
    spec = load_description(run)
    assert "logistic_path" in spec["config"] and spec["config"]["logistic_path"] is None
    del spec["config"]["logistic_path"]                 # as written before the switch
    res = run_local(spec, seeded(cfgs, 3))
    assert res["error"] is None and res["family"] == "glm"


@pytest.mark.parametrize("loss,path", [("squared", None), ("logistic", "ssp"),
                                       ("logistic", "glm")])
def test_the_plan_checked_before_the_alignment_spends_what_the_run_spends(tmp_path, loss, path):
    """The plan checked before the alignment (settled for the provisional row count, the ring's
    lattice dropped: docs/sensitivity.md 4.9.1) spends under rdp what the plan settled for the
    counted n spends, to 1e-9 relative, and under best at least as much at every n: a run that
    passes the check before the alignment is not refused for its budget after it."""
    from accounting import get_accountant

    from vflpriv.vertical.config import VerticalConfig
    from vflpriv.vertical.secure import planned

    cfg = VerticalConfig(algorithm="dp-bcfw-secure", loss=loss, epsilon=2.0, delta=1e-5,
                         feature_bound=1.0, label_bound=1.0, iterations=6, eta=1.0,
                         label_party=0, **({"logistic_path": path} if path else {}))
    options = planned.config_options(cfg)
    blocks = [[0, 1, 2], [3, 4], [5, 6, 7, 8]]
    checked = planned.preflight(options, blocks, ledger=str(tmp_path / "s.ledger"), run_id="r")
    rdp, best = get_accountant("rdp"), get_accountant("best")
    assert rdp.epsilon(checked, 1e-5) <= 2.0 * (1 + 1e-9)
    # the squared loss's rule picks its path by n (the rounds at 1000 and 240, the one release
    # at 123457 here): the check covers both, the one that spends more under rdp
    ruled = loss == "squared" and path is None
    for n in (planned.PROVISIONAL_ROWS, 240, 123_457):
        with pytest.MonkeyPatch.context() as m:           # the run's own event, its lattice kept
            m.setattr(planned, "without_lattice", lambda e: e)
            _, ev = planned.settle_for(options, n, blocks, ledger=str(tmp_path / "s.ledger"),
                                       run_id="r", _dry=True)
        assert planned.without_lattice(ev) == checked or n != planned.PROVISIONAL_ROWS or ruled
        if ruled:
            assert rdp.epsilon(ev, 1e-5) <= rdp.epsilon(checked, 1e-5) * (1 + 1e-9), n
        else:
            assert abs(rdp.epsilon(ev, 1e-5) - rdp.epsilon(checked, 1e-5)) <= \
                1e-9 * rdp.epsilon(checked, 1e-5), n
        assert best.epsilon(ev, 1e-5) <= best.epsilon(checked, 1e-5) * (1 + 1e-12), n
    assert not (tmp_path / "s.ledger").exists()


def test_ranges_declared_in_the_schemas_scale_each_partys_columns_at_its_node(tmp_path, capsys):
    """Issue 52 item 3 in a deployment: each party's schema carries its columns' public
    ranges (vflpriv flower schema --ranges), the description names them, each party clips and
    scales its own columns at its node, and the server writes the model in raw units.  The
    reference is the in-process run on the same raw files with the same ranges (vflpriv run
    --party-data --ranges): the same model, file for file."""
    paths, _ = party_files(tmp_path, classes=True)
    factors = np.array([10.0, 200.0, 3.0, 1000.0, 0.5, 60.0, 7.0, 40.0, 2500.0])
    ranges = {}
    for k, p in enumerate(paths):                 # the same table in raw units
        df = pd.read_csv(p)
        for j in range(3):
            c = f"f{3 * k + j}"
            df[c] = df[c] * factors[3 * k + j]
            ranges[c] = [-0.9 * factors[3 * k + j], 0.9 * factors[3 * k + j]]   # clips a few
        df.to_csv(p, index=False)
    for k in range(3):
        (tmp_path / f"ranges{k}.json").write_text(json.dumps(
            {"format": "vflpriv-column-ranges/1",
             "ranges": {f"f{3 * k + j}": ranges[f"f{3 * k + j}"] for j in range(3)}}))
    (tmp_path / "ranges.json").write_text(json.dumps({"format": "vflpriv-column-ranges/1",
                                                      "ranges": ranges}))
    opts = ["--loss", "logistic", "--epsilon", "4", "--delta", "1e-5", "--seed", "3"]
    schemas = []
    for k, p in enumerate(paths):
        s = tmp_path / f"schema{k}.json"
        assert main(["flower", "schema", "--party-data", p, "--id", "cid",
                     *(["--label", "y"] if k == 0 else []), "--json", str(s),
                     "--ranges", str(tmp_path / f"ranges{k}.json")]) == 0
        schemas += ["--party-schema", f"{k}={s}"]
    model, d = tmp_path / "deployed_model", tmp_path / "desc"
    base = ["flower", "spec", "run", "--out", str(d), *schemas, "--label", "y", "--label-party",
            "0", "--algorithm", "dp-bcfw-secure", "--label-bound", "1", "--unpinned", *opts]
    assert main(base + ["--feature-bound", "1"]) == 2          # the ranges set the bound
    assert "--feature-bound" in capsys.readouterr().err and not d.exists()
    assert main(base + ["--model-out", str(model)]) == 0
    spec = load_description(str(d / "run.json"))
    assert spec["ranges"][1] == [ranges[f"f{3 + j}"] for j in range(3)]
    cfgs = [read_node_config(str(d / f"node{k}.toml")) for k in range(3)]
    res = run_local(spec, seeded(cfgs, 3))
    assert res["error"] is None, res["error"]
    js, ref_model = tmp_path / "ref.json", tmp_path / "ref_model"
    assert main(["run", *[f for k, p in enumerate(paths) for f in ("--party-data", f"{k}={p}")],
                 "--id", "cid", "--label", "y", "--label-party", "0", "--algorithm",
                 "dp-bcfw-secure", "--label-bound", "1", "--ranges", str(tmp_path / "ranges.json"),
                 *opts, "--json", str(js), "--model-out", str(ref_model), "-q"]) == 0
    assert "outside their declared ranges clipped" in capsys.readouterr().err
    for k in range(3):
        dep = json.loads((model / f"party{k}.json").read_text())
        ref = json.loads((ref_model / f"party{k}.json").read_text())
        np.testing.assert_allclose(dep["coef"], ref["coef"], rtol=1e-12)
    assert json.loads(js.read_text())["ranges"]["clipped"]
