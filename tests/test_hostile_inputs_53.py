"""Hostile input, second round (issue 53): each case the issue lists, with the property that
was broken.  Commands run in this process through ``vflpriv.cli.main.main``; a refusal must be
one line naming the bad value, exit 2, no traceback, and leave every file as it was."""
import json
import math
import re

import numpy as np
import pytest

from vflpriv.cli.main import main
from _files import snapshot as _snapshot, message_lines as _lines  # noqa: E402

SECURE_LOGISTIC = ["run", "--data", "synthetic:n=300,d=40,seed=1", "--parties", "2",
                   "--feature-bound", "1", "--label-bound", "1", "--iterations", "3", "--seed",
                   "3", "--algorithm", "dp-bcfw-secure", "--loss", "logistic", "--epsilon", "1",
                   "--delta", "1e-5", "--quiet"]


def refused(argv, capsys, tmp_path, *words, code=2):
    """Run ``argv``; assert the refusal: exit ``code``, one line with ``words``, no file
    touched under ``tmp_path``.  Returns the message."""
    capsys.readouterr()
    before = _snapshot(tmp_path)
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    assert rc == code, err
    assert len(_lines(err)) == 1, err
    for w in words:
        assert w in err, (w, err)
    assert _snapshot(tmp_path) == before, "a file was created, changed or removed"
    return err


# -- 1. --eta below the rounding of the l1 projection ---------------------------------------

@pytest.mark.parametrize("r", [1e-20, 1e-300, 5e-324, 1e-17])
def test_l1_projection_tiny_radius_lands_in_the_ball(r):
    """ssp's projection raised IndexError for a radius under the rounding of |v|_1 (after the
    release); it must return a point of the ball, and the exact one at ordinary radii."""
    from vflpriv.optim.l1ball import project_l1_ball   # the one projection (ssp's fit uses it)

    rng = np.random.default_rng(0)
    for _ in range(5):
        v = rng.normal(size=40)
        w = project_l1_ball(v, r)
        assert np.all(np.isfinite(w)) and np.abs(w).sum() <= r
    v = rng.normal(size=40)
    assert abs(np.abs(project_l1_ball(v, 0.5)).sum() - 0.5) < 1e-12


def test_secure_logistic_tiny_eta_ends_with_a_model(tmp_path, capsys):
    """Issue 53 case 1: the run spent its budget and then crashed in the projection; now it
    ends with exit 0, the spend recorded and a model inside the radius."""
    led, js, mo = tmp_path / "e.ledger", tmp_path / "e.json", tmp_path / "m"
    rc = main(SECURE_LOGISTIC + ["--eta", "1e-20", "--ledger", str(led), "--json", str(js),
                                 "--model-out", str(mo)])
    err = capsys.readouterr().err
    assert rc == 0 and "Traceback" not in err, err
    out = json.loads(js.read_text())
    assert out["eta"] == 1e-20 and out["support_size"] == 0
    for k in (0, 1):
        body = json.loads((mo / f"party{k}.json").read_text())
        assert sum(abs(c) for c in body["coef"]) <= 1e-20


# -- 2. counts a plan or a ledger record can set: capped, the cap named ---------------------

HUGE_SUMMANDS = 10 ** 12


def test_distributed_discrete_gaussian_summands_capped():
    import accounting as acc
    from accounting.events import MAX_SUMMANDS

    with pytest.raises(ValueError, match=f"summands must be at most {MAX_SUMMANDS:,}"):
        acc.DistributedDiscreteGaussian(sigma=100.0, summands=HUGE_SUMMANDS)
    with pytest.raises(ValueError, match="dimension must be at most"):
        acc.DistributedDiscreteGaussian(sigma=100.0, dimension=2 ** 60)
    # the largest accepted count is still accounted (and quickly: tau is one term per summand)
    e = acc.DistributedDiscreteGaussian(sigma=1000.0, summands=MAX_SUMMANDS)
    assert 0 < acc.get_accountant("rdp").epsilon(e, 1e-5) < math.inf


def test_certify_refuses_huge_summands(tmp_path, capsys):
    plan = tmp_path / "plan.toml"
    plan.write_text('delta = 1e-5\n[[release]]\nmechanism = "distributed_discrete_gaussian"\n'
                    f'sigma = 100.0\nsummands = {HUGE_SUMMANDS}\n')
    refused(["certify", str(plan)], capsys, tmp_path, "summands", "at most 100,000",
            "1,000,000,000,000")


def _ddg_ledger(tmp_path, *, reserve):
    """A ledger with a distributed-discrete-Gaussian record (a reservation ended, or a release)
    whose summands an editor set to 1e12, its checksum recomputed (a CRC is no signature)."""
    import accounting as acc
    from accounting.ledger import _crc

    p = tmp_path / "l.jsonl"
    led = acc.Ledger(p, budget={"epsilon": 10.0, "delta": 1e-5, "accountant": "rdp"})
    e = acc.DistributedDiscreteGaussian(sigma=50.0, summands=2)
    if reserve:
        led.reserve(e)
        led.end_reservation()
    else:
        led.append(e)
    lines = p.read_text().splitlines()
    for i, ln in enumerate(lines[1:], 1):
        rec = json.loads(ln)
        if "event" in rec:
            rec.pop("crc")
            rec["event"]["summands"] = HUGE_SUMMANDS
            rec["crc"] = _crc(rec)
            lines[i] = json.dumps(rec)
    p.write_text("\n".join(lines) + "\n")
    return str(p)


@pytest.mark.parametrize("reserve", [False, True], ids=["release", "ended-reservation"])
def test_ledger_with_huge_summands_refused_not_hung(reserve, tmp_path, capsys):
    """Issue 53 case 2: `ledger verify` hung on the release record; the ended reservation
    passed verify and then hung every later private run on that ledger."""
    led = _ddg_ledger(tmp_path, reserve=reserve)
    refused(["ledger", "verify", led], capsys, tmp_path, "summands", "at most 100,000")
    refused(SECURE_LOGISTIC + ["--ledger", led], capsys, tmp_path, "summands",
            "at most 100,000")


# -- 3, 4. one output rule, before any work ------------------------------------------------

def _spent_nothing_ledger(tmp_path):
    import accounting as acc

    p = tmp_path / "L.ledger"
    acc.Ledger(p, budget={"epsilon": 1.0, "delta": 1e-5, "accountant": "rdp"})
    return str(p)


def test_json_and_model_out_the_same_path_refused_before_the_release(tmp_path, capsys):
    """Issue 53 case 3: the run trained and spent the whole budget, wrote the JSON, then
    exited 2 because `out` existed: no model, no budget left."""
    led = _spent_nothing_ledger(tmp_path)
    out = str(tmp_path / "out")
    refused(SECURE_LOGISTIC + ["--ledger", led, "--json", out, "--model-out", out], capsys,
            tmp_path, "--json", "--model-out", "same file")
    # a file output inside the model directory (written whole) is refused the same way
    (tmp_path / "m").mkdir()
    refused(SECURE_LOGISTIC + ["--ledger", led, "--json", str(tmp_path / "m" / "r.json"),
                               "--model-out", str(tmp_path / "m")], capsys, tmp_path,
            "inside --model-out")
    refused(SECURE_LOGISTIC + ["--ledger", out, "--model-out", out], capsys, tmp_path,
            "same file")


def _model_and_tables(tmp_path, K=2, n=60, *, intercept=0.25, label_party=0):
    import pandas as pd

    from vflpriv.model import write_split_model

    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(n, 2 * K))
    paths = []
    for k in range(K):
        df = pd.DataFrame(X[:, 2 * k:2 * k + 2], columns=[f"f{2 * k + j}" for j in range(2)])
        df.insert(0, "cid", [f"c{i}" for i in range(n)])
        p = tmp_path / f"new{k}.csv"
        df.to_csv(p, index=False)
        paths.append(str(p))
    model = tmp_path / "model"
    write_split_model(str(model), coef=rng.normal(size=2 * K),
                      blocks=[range(2 * k, 2 * k + 2) for k in range(K)],
                      names=[f"f{j}" for j in range(2 * K)], intercept=intercept,
                      label_party=label_party, loss="logistic")
    argv = ["predict", "--model", str(model), "--id", "cid"]
    for k, p in enumerate(paths):
        argv += ["--party-data", f"{k}={p}"]
    return argv, model, X


def test_predict_json_into_the_models_own_manifest_refused(tmp_path, capsys):
    """Issue 53 case 4: predict exited 0 after overwriting the model's own manifest."""
    argv, model, _ = _model_and_tables(tmp_path)
    refused(argv + ["--json", str(model / "manifest.json")], capsys, tmp_path,
            "--json", "inside --model")
    refused(argv + ["--json", str(model / "scores.json")], capsys, tmp_path, "inside --model")
    assert main(argv + ["--json", str(tmp_path / "scores.json")]) == 0


# -- 5, 7. party tables: repeated headers refused, IDs read as text ---------------------------

def _write(tp, name, text):
    p = tp / name
    p.write_text(text)
    return str(p)


def _two_party_files(tp, label_header="id,a0,a1,a2,y", label_extra="", ids=None, n=40):
    rng = np.random.default_rng(1)
    ids = ids or [f"p{i}" for i in range(n)]
    rows0 = [label_header]
    rows1 = ["id,b0,b1"]
    for i, pid in enumerate(ids):
        y = int(rng.random() < 0.5)
        rows0.append(f"{pid},{rng.normal():.3f},{rng.normal():.3f},{rng.normal():.3f},{y}"
                     + (f",{1 - y}" if label_extra else ""))
        rows1.append(f"{pid},{rng.normal():.3f},{rng.normal():.3f}")
    return (_write(tp, "p0.csv", "\n".join(rows0) + "\n"),
            _write(tp, "p1.csv", "\n".join(rows1) + "\n"))


PARTY_RUN = ["run", "--id", "id", "--label", "y", "--algorithm", "fw", "--loss", "logistic",
             "--iterations", "3", "--quiet"]


def test_repeated_header_in_a_party_table_refused(tmp_path, capsys):
    """Issue 53 case 5: header `id,a0,a1,a2,y,y` trained on the second label column as a
    feature `y.1` (pandas renames repeated headers, so no duplicate check fired)."""
    p0, p1 = _two_party_files(tmp_path, "id,a0,a1,a2,y,y", label_extra="y")
    refused(PARTY_RUN + ["--party-data", f"0={p0}", "--party-data", f"1={p1}"], capsys,
            tmp_path, "p0.csv", "'y' twice")
    from vflpriv.align import read_party_table
    from vflpriv.errors import InputError

    with pytest.raises(InputError, match="'y' twice"):
        read_party_table(0, p0, "id", "y")


def test_flower_schema_lists_the_header_as_written(tmp_path, capsys):
    """`flower schema` listed a column `a0.1` the file does not have; now the repeated name is
    refused, and a file without one is listed as spelled."""
    pytest.importorskip("flwr")
    bad = _write(tmp_path, "bad.csv", "id,a0,a0,y\nx,1,2,1\n")
    refused(["flower", "schema", "--party-data", bad, "--id", "id", "--json",
             str(tmp_path / "s.json")], capsys, tmp_path, "'a0' twice")
    good = _write(tmp_path, "good.csv", "id,a0,a0.1,y\nx,1,2,1\n")
    assert main(["flower", "schema", "--party-data", good, "--id", "id", "--label", "y",
                 "--json", str(tmp_path / "s.json")]) == 0
    assert json.loads((tmp_path / "s.json").read_text())["columns"] == ["a0", "a0.1"]


def test_ids_are_text_na_is_an_id(tmp_path):
    """Issue 53 case 7: the ID `NA` (a country code) was refused as empty; `null`, `NaN`, `007`
    are IDs as written; an empty ID is still refused; a feature's NA is still missing."""
    from vflpriv.align import read_party_table
    from vflpriv.errors import InputError

    p = _write(tmp_path, "t.csv", "id,a,y\nNA,1,1\nnull,2,0\nNaN,3,1\n007,4,0\n7,5,1\n")
    t = read_party_table(0, p, "id", "y")
    assert t.ids == ["NA", "null", "NaN", "007", "7"]
    assert t.X[:, 0].tolist() == [1, 2, 3, 4, 5]
    with pytest.raises(InputError, match="empty at row 1"):
        read_party_table(0, _write(tmp_path, "e.csv", "id,a\nx,1\n,2\n"), "id")
    with pytest.raises(InputError, match="'a' has a non-finite or empty value at row 1"):
        read_party_table(0, _write(tmp_path, "f.csv", "id,a\nx,1\nNA,NA\n"), "id")


def test_country_code_ids_align(tmp_path, capsys):
    """End to end: parties keyed by country codes, Namibia's `NA` among them, align and train."""
    codes = ["NA", "DE", "FR", "IT", "ES", "PT", "NL", "BE", "AT", "CH"] * 4
    codes = [f"{c}{i // 10}" if i >= 10 else c for i, c in enumerate(codes)]
    p0, p1 = _two_party_files(tmp_path, ids=codes)
    js = tmp_path / "r.json"
    assert main(PARTY_RUN + ["--party-data", f"0={p0}", "--party-data", f"1={p1}", "--json",
                             str(js)]) == 0, capsys.readouterr().err
    assert json.loads(js.read_text())["alignment"]["intersection_size"] == 40


# -- 6. model files: one checked reader, in process and deployed -----------------------------

def _edit(path, fn):
    body = json.loads(path.read_text())
    body = fn(body)
    path.write_text(json.dumps(body) if not isinstance(body, str) else body)


def _set(key, value, at=None):
    def fn(b):
        (b if at is None else at(b))[key] = value
        return b
    return fn


MODEL_EDITS = [
    # (id, file, edit, words the one-line refusal names)
    ("non-label-intercept", "party1.json", _set("intercept", 100), ["party 1", "intercept",
                                                                      "not the label party"]),
    ("nan-intercept", "party0.json", _set("intercept", float("nan")), ["intercept", "nan"]),
    ("inf-intercept", "party0.json", _set("intercept", float("inf")), ["intercept", "inf"]),
    ("bool-intercept", "party0.json", _set("intercept", True), ["intercept", "True"]),
    ("null-intercept", "party0.json", _set("intercept", None), ["intercept", "None"]),
    ("text-coef", "party0.json", _set("coef", ["a", 1.0]), ["coefficient 0", "'a'"]),
    ("nested-coef", "party1.json", _set("coef", [[1.0], 1.0]), ["coefficient 0"]),
    ("manifest-a-list", "manifest.json", lambda b: [b], ["manifest format"]),
    ("party-not-a-dict", "party0.json", lambda b: [b], ["does not hold party 0"]),
    ("manifest-entry-without-file", "manifest.json",
     lambda b: {**b, "parties": [{k: v for k, v in e.items() if k != "file"}
                                 for e in b["parties"]]}, ["parties 0..K-1"]),
    ("manifest-file-outside", "manifest.json",
     lambda b: {**b, "parties": [dict(e, file="../" + e["file"]) for e in b["parties"]]},
     ["parties 0..K-1"]),
    ("manifest-label-party-text", "manifest.json", _set("label_party", "x"), ["label party"]),
    ("manifest-label-party-bool", "manifest.json", _set("label_party", True), ["label party"]),
    ("manifest-loss-unknown", "manifest.json", _set("loss", "hinge"), ["loss 'hinge'"]),
    ("manifest-holder-other", "manifest.json", _set("intercept_holder", 1),
     ["intercept holder"]),
    ("manifest-column-twice", "manifest.json",
     lambda b: {**b, "parties": [b["parties"][0], dict(b["parties"][1],
                                                       columns=b["parties"][0]["columns"])]},
     ["column 'f0'"]),
    ("party-columns-other", "party1.json", _set("columns", ["f0", "f1"]), ["columns"]),
    ("party-file-not-json", "party0.json", lambda b: "{not json", ["cannot be read"]),
]


@pytest.mark.parametrize("name, edit, words", [r[1:] for r in MODEL_EDITS],
                         ids=[r[0] for r in MODEL_EDITS])
def test_predict_refuses_a_bad_model_file(name, edit, words, tmp_path, capsys):
    """Issue 53 case 6: a non-label party's intercept 100 shifted every score by ~+101, a NaN
    or infinite intercept gave NaN scores with exit 0, and malformed manifests or party files
    ended in tracebacks."""
    argv, model, _ = _model_and_tables(tmp_path)
    _edit(model / name, edit)
    refused(argv + ["--json", str(tmp_path / "s.json")], capsys, tmp_path, *words)


def test_deployed_party_reader_refuses_an_intercept_off_the_label_party(tmp_path):
    """The deployed party reads its own file with the same reader: a non-label party's file
    holding an intercept is refused there too, not silently ignored."""
    from vflpriv.errors import InputError
    from vflpriv.model.files import read_party_model

    _, model, _ = _model_and_tables(tmp_path)
    _edit(model / "party1.json", _set("intercept", 100))
    with pytest.raises(InputError, match="not the label party"):
        read_party_model(model / "party1.json", 1, ["f2", "f3"], intercept=False)


def test_predict_scores_are_the_models_margins(tmp_path):
    """The checked reader keeps a good model's scores: x.w + b on every row."""
    argv, model, X = _model_and_tables(tmp_path)
    js = tmp_path / "s.json"
    assert main(argv + ["--json", str(js)]) == 0
    out = json.loads(js.read_text())
    w = np.concatenate([json.loads((model / f"party{k}.json").read_text())["coef"]
                        for k in (0, 1)])
    rows = [int(i[1:]) for i in out["ids"]]
    np.testing.assert_allclose(out["scores"], X[rows] @ w + 0.25, atol=1e-8)


# -- the validation layer: typed option values, the same check everywhere ----------------------

def test_typed_option_parsers():
    import argparse

    from vflpriv.cli.options import count, output_path, real, seed

    bad = [(count(8), "64", "at most 8, got 64"), (count(8), "1e9", "integer, got '1e9'"),
           (count(8), "0", ">= 1"), (count(8), "9" * 60, "at most 8"),
           (seed, "-1", ">= 0"), (real(0, lo_open=True), "-1", "> 0, got -1.0"),
           (real(0, lo_open=True), "0", "> 0, got 0.0"),
           (real(0, 1, lo_open=True, hi_open=True), "1", "in (0, 1), got 1.0"),
           (real(0, 1, lo_open=True), "nan", "must be a number"),
           (real(0), "inf", "finite"), (real(0), "1e309", "too large"),
           (output_path, "", "needs a file name"), (output_path, "  ", "needs a file name")]
    for parse, text, words in bad:
        with pytest.raises(argparse.ArgumentTypeError, match=re.escape(words)):
            parse(text)
    assert count(8)("8") == 8 and seed("0") == 0 and real(0, 1)("1") == 1.0
    assert real(0, infinite=True)("inf") == math.inf


LAYER_ROWS = [
    # (id, argv, words): each refused at parse time, before any work, naming the option
    ("bench-align-workers-64", ["bench", "align", "--workers", "64", "--no-peer"],
     ["--workers", "at most 8", "64"]),
    ("bench-align-sizes-huge", ["bench", "align", "--sizes", "100000000000", "--no-peer"],
     ["--sizes", "at most 10,000,000"]),
    ("fedp3-local-epochs-negative-ignored", ["fedp3", "--local-epochs", "-1", "--local-steps",
                                             "2", "--rounds", "1"], ["--local-epochs", "-1.0"]),
    ("fedp3-paper-c-negative", ["fedp3", "--paper-c", "-1", "--rounds", "1"],
     ["--paper-c", "-1.0"]),
    ("sparse-clip-negative-non-private", ["sparse", "--clip", "-1", "--rounds", "1"],
     ["--clip", "-1.0"]),
    ("audit-seed-negative", ["audit", "--seed", "-1"], ["--seed", "-1"]),
    ("audit-json-empty", ["audit", "--json", ""], ["--json", "''"]),
    ("bench-accounting-json-empty", ["bench", "accounting", "--json", ""], ["--json", "''"]),
    ("run-json-empty", ["run", "--data", "synthetic:n=60,d=20", "--algorithm", "bcfw",
                        "--json", ""], ["--json", "''"]),
]


@pytest.mark.parametrize("argv, words", [r[1:] for r in LAYER_ROWS],
                         ids=[r[0] for r in LAYER_ROWS])
def test_options_checked_by_the_layer(argv, words, tmp_path, capsys):
    refused(argv, capsys, tmp_path, *words)


def test_align_api_caps_workers():
    from vflpriv.align import align
    from vflpriv.errors import InputError

    with pytest.raises(InputError, match="--workers must be at most 8, got 64"):
        align([["a", "b"], ["a", "b"]], 0, workers=64)


def test_certify_calibrate_empty_and_the_real_cause(tmp_path, capsys):
    """`certify --calibrate ''` was ignored; a calibration no accountant can reach said 'no
    accountant supports the plan being calibrated', hiding the cause."""
    plan = tmp_path / "c.toml"
    plan.write_text('delta = 1e-5\ntarget_epsilon = 1e-9\n[[release]]\nmechanism = "gaussian"\n'
                    'sigma = 1.0\ncount = 10\n')
    refused(["certify", str(plan), "--calibrate", ""], capsys, tmp_path, "--calibrate ''",
            "calibratable")
    err = refused(["certify", str(plan), "--calibrate", "count"], capsys, tmp_path,
                  "even 1 release(s) exceed the target epsilon 1e-09")
    assert "no accountant supports" not in err


# -- 8. still open from the first round -------------------------------------------------------

SMALL_RUN = ["run", "--data", "synthetic:n=300,d=40,seed=1", "--parties", "2", "--iterations",
             "3", "--seed", "3", "--quiet"]


def test_eta_1e308_refused_not_nan(tmp_path, capsys):
    """`--eta 1e308` ended with objective nan and exit 0; refused before any release, naming
    --eta and the reach K eta B_a, and a large but representable radius still runs."""
    led = _spent_nothing_ledger(tmp_path)
    refused(SMALL_RUN + ["--algorithm", "fw", "--eta", "1e308"], capsys, tmp_path,
            "--eta 1e+308", "K eta B_a")
    refused(SMALL_RUN + ["--algorithm", "dp-bcfw", "--epsilon", "1", "--delta", "1e-5",
                         "--feature-bound", "1", "--label-bound", "1", "--eta", "1e308",
                         "--ledger", led], capsys, tmp_path, "--eta 1e+308")
    js = tmp_path / "r.json"
    assert main(SMALL_RUN + ["--algorithm", "fw", "--eta", "1e90", "--json", str(js)]) == 0
    assert math.isfinite(json.loads(js.read_text())["final_objective"])


def test_feature_bound_1e308_blames_the_bound_not_eta(tmp_path, capsys):
    err = refused(SMALL_RUN + ["--algorithm", "dp-bcfw", "--epsilon", "1", "--delta", "1e-5",
                               "--feature-bound", "1e308", "--label-bound", "1"], capsys,
                  tmp_path, "--feature-bound", "1e+308")
    assert "eta" not in err
    refused(SMALL_RUN + ["--algorithm", "fw", "--label-bound", "1e308"], capsys, tmp_path,
            "--label-bound", "1e+308")


def test_split_out_of_range_refused_on_every_path(tmp_path, capsys):
    """`flower spec run --party-schema ... --split 2` wrote a description (exit 0) that its
    run would refuse; the run config refuses a given split outside (0, 1) on every path."""
    from vflpriv.errors import InputError
    from vflpriv.vertical.config import VerticalConfig

    for algo in ("dp-bcfw-secure", "dpfw", "dp-bcfw"):
        with pytest.raises(InputError, match="split must be in"):
            VerticalConfig(algorithm=algo, epsilon=1.0, delta=1e-5, feature_bound=1.0,
                           label_bound=1.0, split=2.0)
    pytest.importorskip("flwr")
    s0 = _write(tmp_path, "s0.csv", "id,a,y\nx,1,1\n")
    s1 = _write(tmp_path, "s1.csv", "id,b\nx,1\n")
    for k, (p, label) in enumerate(((s0, ["--label", "y"]), (s1, []))):
        assert main(["flower", "schema", "--party-data", p, "--id", "id", "--json",
                     str(tmp_path / f"s{k}.json")] + label) == 0
    capsys.readouterr()
    base = ["flower", "spec", "run", "--out", str(tmp_path / "sp"), "--party-schema",
            f"0={tmp_path / 's0.json'}", "--party-schema", f"1={tmp_path / 's1.json'}",
            "--label", "y", "--algorithm", "dp-bcfw-secure", "--epsilon", "1",
            "--feature-bound", "1", "--label-bound", "1", "--unpinned"]
    refused(base + ["--delta", "1e-5", "--split", "2"], capsys, tmp_path, "split", "2.0")
    refused(base + ["--delta", "1"], capsys, tmp_path, "delta", "1.0")


def test_flower_node_insecure_with_root_certificates_refused(tmp_path, capsys):
    pytest.importorskip("flwr")
    node = _write(tmp_path, "node.toml", 'party = 0\ndata = "c.npz"\n')
    _write(tmp_path, "c.npz", "x")
    ca = _write(tmp_path, "ca.crt", "x")
    refused(["flower", "node", node, "--superlink", "127.0.0.1:9092", "--insecure",
             "--root-certificates", ca], capsys, tmp_path, "--insecure", "--root-certificates",
            "not both")


def test_bench_utility_label_party_refused_before_any_row(tmp_path, capsys):
    """`bench utility --label-party 9` was refused only when dp-bcfw-secure's turn came, after
    the other algorithms' rows were computed and printed."""
    capsys.readouterr()
    rc = main(["bench", "utility", "--n", "100", "--d", "20", "--parties", "2",
               "--iterations", "2", "--epsilons", "1", "--algorithms", "dpfw,dp-bcfw-secure",
               "--label-party", "9"])
    out, err = capsys.readouterr()
    assert rc == 2 and len(_lines(err)) == 1 and "Traceback" not in err, err
    assert "--label-party '9'" in err and "0..1" in err, err
    assert "dpfw" not in out, out                       # no row was computed


def test_empty_svmlight_file_named(tmp_path, capsys):
    empty = _write(tmp_path, "empty.svm", "")
    refused(["run", "--data", empty, "--algorithm", "bcfw"], capsys, tmp_path, "empty.svm",
            "no rows")
    refused(["sparse", "--data", empty, "--clients", "2", "--rounds", "1"], capsys, tmp_path,
            "empty.svm", "no rows")
