"""A catalogue of bad inputs for every public entry point (issues 6 and 13, reliability).

CLI: each case must exit 2 with exactly one line on stderr that names the bad value, no
traceback, and no file in the test's directory created, changed or removed (a private run's
ledger there keeps its bytes: no budget spent).  Python API: each case must raise one
ValueError (``InputError`` is one) whose message names the bad value, again with no file
touched.  The cases are a table: add a row when an entry point or option lands.
"""
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import accounting as acc
from vflpriv.cli.main import main
from _files import snapshot as _snapshot  # noqa: E402

SYN = "synthetic:n=60,d=20,seed=0"
PRIV = ["--feature-bound", "1", "--label-bound", "1"]
RUN = ["run", "--data", SYN, "--parties", "2"]


def _plan(tmp_path, text, name="plan.toml"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


GOOD_RELEASE = '[[release]]\nmechanism = "laplace"\nscale = 2.0\nsensitivity = 1.0\n'

# (id, argv or a function tmp_path -> argv, text the one error line must contain)
CLI_CASES = [
    # vflpriv run: epsilon, delta, bounds
    ("run-eps-zero", RUN + ["--epsilon", "0", "--delta", "1e-5"] + PRIV, "--epsilon"),
    ("run-eps-negative", RUN + ["--epsilon", "-1", "--delta", "1e-5"] + PRIV, "got '-1'"),
    ("run-eps-nan", RUN + ["--epsilon", "nan", "--delta", "1e-5"] + PRIV, "got 'nan'"),
    ("run-eps-word", RUN + ["--epsilon", "lots", "--delta", "1e-5"] + PRIV, "'lots'"),
    ("run-delta-above-1", RUN + ["--epsilon", "1", "--delta", "1.5"] + PRIV, "got 1.5"),
    ("run-delta-zero", RUN + ["--epsilon", "1", "--delta", "0"] + PRIV, "got 0.0"),
    ("run-delta-missing", RUN + ["--epsilon", "1"] + PRIV, "delta"),
    ("run-feature-bound-zero", RUN + ["--epsilon", "1", "--delta", "1e-5", "--feature-bound", "0",
                                      "--label-bound", "1"], "--feature-bound"),
    ("run-label-bound-negative", RUN + ["--epsilon", "1", "--delta", "1e-5", "--feature-bound",
                                        "1", "--label-bound", "-2"], "--label-bound"),
    ("run-bound-inf", RUN + ["--epsilon", "1", "--delta", "1e-5", "--feature-bound", "inf",
                             "--label-bound", "1"], "--feature-bound"),
    ("run-clip-zero", RUN + ["--epsilon", "1", "--delta", "1e-5", "--derivative-clip", "0"] + PRIV,
     "--derivative-clip"),
    # shapes, K > d, empty blocks, iterations, names
    ("run-K-greater-than-d", ["run", "--data", SYN, "--parties", "30", "--algorithm", "bcfw"],
     "K=30 exceeds"),
    ("run-K-zero", ["run", "--data", SYN, "--parties", "0", "--algorithm", "bcfw"], "got '0'"),
    ("run-empty-block", ["run", "--data", SYN, "--parties", "2", "--algorithm", "bcfw",
                         "--partition", "0-19;"], "group 1 must be a non-empty"),
    # --on-client-loss (issue 23): a vertical party's columns are gone with it (FedP3 continues:
    # tests/test_runtime_roles.py)
    ("run-on-client-loss-continue", RUN + ["--algorithm", "bcfw", "--on-client-loss",
                                           "continue"], "cannot go on without a party"),
    ("sparse-on-client-loss-word", ["sparse", "--on-client-loss", "retry"], "--on-client-loss"),
    # vflpriv flower spec / node (issue 23): nothing written for a bad option or a used folder
    ("flower-spec-out-not-empty", lambda tmp: (tmp / "used").mkdir()
     or (tmp / "used" / "x").write_text("")
     or ["flower", "spec", "sparse", "--out", str(tmp / "used"), "--rounds", "2"],
     "not an empty folder"),
    ("flower-spec-rounds-zero", lambda tmp: ["flower", "spec", "sparse", "--out",
                                             str(tmp / "new"), "--rounds", "0"], "got 0"),
    ("flower-spec-ledger", lambda tmp: ["flower", "spec", "sparse", "--out", str(tmp / "new"),
                                        "--ledger", str(tmp / "l.jsonl")], "--ledger"),
    ("flower-node-missing", lambda tmp: ["flower", "node", str(tmp / "node0.toml"),
                                         "--superlink", "127.0.0.1:9092", "--insecure"],
     "cannot be read"),
    ("flower-node-insecure-remote", lambda tmp: (tmp / "c.npz").write_bytes(b"x") and
     (tmp / "n.toml").write_text('party = 0\ndata = "c.npz"\n') and
     ["flower", "node", str(tmp / "n.toml"), "--superlink", "example.org:9092", "--insecure",
      "--print"], "loopback only"),
    ("run-iterations-zero", RUN + ["--algorithm", "bcfw", "--iterations", "0"], "got '0'"),
    ("run-eta-negative", RUN + ["--algorithm", "bcfw", "--eta", "-1"],
     "argument --eta: must be auto or > 0, got -1.0"),
    ("run-sketch-no-dim", RUN + ["--algorithm", "bcfw", "--sketch", "gaussian"], "got None"),
    ("run-sampling-unknown", RUN + ["--algorithm", "bcfw", "--sampling", "lottery"], "lottery"),
    ("run-synthetic-n-zero", ["run", "--data", "synthetic:n=0,d=20", "--algorithm", "bcfw"],
     "'0'"),
    ("run-synthetic-unknown-key", ["run", "--data", "synthetic:foo=1", "--algorithm", "bcfw"],
     "'foo'"),
    ("run-algorithm-unknown", RUN + ["--algorithm", "sgd"], "'sgd'"),
    ("run-split-out-of-range", RUN + ["--epsilon", "1", "--delta", "1e-5", "--split", "1.5"] + PRIV,
     "1.5"),
    ("run-checkpoint-every-zero", lambda tp: RUN + ["--algorithm", "bcfw", "--checkpoint",
                                                    str(tp / "c.npz"), "--checkpoint-every", "0"],
     "--checkpoint-every: must be an integer >= 1, got '0'"),
    # issue 21: checkpoints of dp-bcfw-secure
    ("run-secure-checkpoint-every-zero",
     lambda tp: RUN + ["--algorithm", "dp-bcfw-secure", "--epsilon", "1", "--delta", "1e-5",
                       "--ledger", str(tp / "l.jsonl"), "--checkpoint", str(tp / "c.npz"),
                       "--checkpoint-every", "0"] + PRIV, "--checkpoint-every"),
    ("run-secure-checkpoint-no-ledger",
     lambda tp: RUN + ["--algorithm", "dp-bcfw-secure", "--epsilon", "1", "--delta", "1e-5",
                       "--checkpoint", str(tp / "c.npz")] + PRIV, "needs a ledger file"),
    # unreadable / wrong files
    ("run-data-missing", ["run", "--data", "no/such/file.csv", "--algorithm", "bcfw"],
     "no/such/file.csv"),
    ("run-data-directory", lambda tp: ["run", "--data", str(tp), "--algorithm", "bcfw"],
     "Is a directory"),
    ("run-data-nan", lambda tp: ["run", "--data", _plan(tp, "a,b,y\n1,nan,1\n2,3,0\n1,1,1\n",
                                                          "d.csv"),
                                 "--label", "y", "--algorithm", "bcfw"], "non-finite"),
    ("run-label-unknown", lambda tp: ["run", "--data", _plan(tp, "a,b,y\n1,2,1\n2,3,0\n", "d.csv"),
                                      "--label", "z", "--algorithm", "bcfw"], "'z'"),
    ("run-resume-missing", ["run", "--resume", "no/such/ckpt.npz"], "no/such/ckpt.npz"),
    ("run-resume-not-a-checkpoint", lambda tp: ["run", "--resume", _plan(tp, "x", "c.npz")],
     "not a vflpriv checkpoint"),
    # vflpriv fedp3
    ("fedp3-eps-zero", ["fedp3", "--epsilon", "0", "--rounds", "1"], "got '0'"),
    ("fedp3-delta-above-1", ["fedp3", "--epsilon", "1", "--delta", "2", "--rounds", "1"],
     "got 2.0"),
    ("fedp3-clip-negative", ["fedp3", "--epsilon", "1", "--delta", "1e-5", "--clip", "-1",
                             "--rounds", "1"], "-1.0"),
    ("fedp3-clients-zero", ["fedp3", "--clients", "0", "--rounds", "1"], "got 0"),
    ("fedp3-data-unknown", ["fedp3", "--data", "imagenet", "--rounds", "1"], "'imagenet'"),
    # vflpriv certify
    ("certify-missing-file", ["certify", "no/such/plan.toml"], "no/such/plan.toml"),
    ("certify-not-toml", lambda tp: ["certify", _plan(tp, "delta = = 1\n")], "not valid TOML"),
    ("certify-negative-scale", lambda tp: ["certify", _plan(
        tp, 'delta = 1e-5\n[[release]]\nmechanism = "laplace"\nscale = -2.0\n')], "-2.0"),
    ("certify-delta-above-1", lambda tp: ["certify", _plan(tp, "delta = 1.5\n" + GOOD_RELEASE)],
     "1.5"),
    ("certify-unknown-mechanism", lambda tp: ["certify", _plan(
        tp, 'delta = 1e-5\n[[release]]\nmechanism = "magic"\n')], "'magic'"),
    # vflpriv audit
    ("audit-samples-zero", ["audit", "--samples", "0"], "'0'"),
    ("audit-samples-word", ["audit", "--samples", "many"], "'many'"),
    # vflpriv ledger
    ("ledger-missing-file", ["ledger", "verify", "no/such/ledger.jsonl"], "no/such/ledger.jsonl"),
    ("ledger-show-missing-file", ["ledger", "show", "no/such/ledger.jsonl"],
     "no/such/ledger.jsonl"),
    ("ledger-not-a-ledger", lambda tp: ["ledger", "verify", _plan(tp, "hello\n", "l.jsonl")],
     "not a ledger header"),
    ("ledger-corrupt-record", lambda tp: ["ledger", "verify", _ledger_with_bad_record(tp)],
     "line 2"),
    ("ledger-delta-above-1", lambda tp: ["ledger", "verify", _good_ledger(tp), "--delta", "2"],
     "got 2.0"),
    ("ledger-accountant-unknown", lambda tp: ["ledger", "verify", _good_ledger(tp),
                                              "--accountant", "guess"], "'guess'"),
    # vflpriv bench
    ("bench-target-unknown", ["bench", "nosuch"], "'nosuch'"),
    ("bench-json-directory", lambda tp: ["bench", "kernels", "--json", str(tp)], "a directory"),
    ("bench-scale-n-zero", ["bench", "scale", "--n", "0"], "'0'"),
    ("bench-scale-chunk-zero", ["bench", "scale", "--n", "none", "--table-chunk-rows", "0"],
     "got 0"),
    ("bench-secure-n-one", ["bench", "secure", "--n", "1"], "--n must be at least 2, got 1"),
    ("bench-secure-parties-one", ["bench", "secure", "--parties", "1"],
     "--parties must be at least 2, got 1"),
    # issue 23 (n = 1e6): chunked reading of a table
    ("run-chunk-rows-zero", RUN + ["--algorithm", "bcfw", "--chunk-rows", "0"], "got '0'"),
    ("run-chunk-rows-negative", RUN + ["--algorithm", "bcfw", "--chunk-rows", "-3"], "got '-3'"),
    ("run-chunk-rows-word", RUN + ["--algorithm", "bcfw", "--chunk-rows", "many"], "'many'"),
    ("run-table-missing", ["run", "--data", "no/such/table.csv", "--label", "y", "--algorithm",
                           "bcfw"], "no/such/table.csv"),
    # issue 13: huge values
    ("run-svmlight-huge-index", lambda tp: ["run", "--data", _plan(
        tp, "1 1:1 99999999999:2\n0 2:1\n", "d.svm"), "--algorithm", "bcfw"],
     "feature index is too large"),
    ("run-partition-huge", ["run", "--data", SYN, "--algorithm", "bcfw", "--partition",
                            "0-99999999999999999999;"], "'0-99999999999999999999'"),
    ("run-partition-huge-second", ["run", "--data", SYN, "--algorithm", "bcfw", "--partition",
                                   "0-3;4-9999999999"], "'4-9999999999'"),
    ("run-sketch-dim-huge", RUN + ["--algorithm", "bcfw", "--sketch", "gaussian",
                                   "--sketch-dim", "1000000000000"], "--sketch-dim"),
    ("certify-count-1e20", lambda tp: ["certify", _plan(tp, "delta = 1e-5\n" + GOOD_RELEASE
                                                        + "count = 1e20\n")], "1e+20"),
    ("certify-count-2-63", lambda tp: ["certify", _plan(tp, "delta = 1e-5\n" + GOOD_RELEASE
                                                        + "count = 9223372036854775807\n")],
     "9223372036854775807"),
    ("certify-sensitivity-1e308", lambda tp: ["certify", _plan(
        tp, 'delta = 1e-5\n[[release]]\nmechanism = "gaussian"\nsigma = 1.0\n'
        'sensitivity = 1e308\n')], "sensitivity = 1e+308"),
    ("certify-sigma-1e308", lambda tp: ["certify", _plan(
        tp, 'delta = 1e-5\n[[release]]\nmechanism = "gaussian"\nsigma = 1e308\n')],
     "sigma = 1e+308"),
    ("certify-deep-toml", lambda tp: ["certify", _plan(tp, "x = " + "[" * 50000 + "]" * 50000
                                                       + "\n")], "nested too deeply"),
    ("run-resume-truncated", lambda tp: ["run", "--resume", _truncated_checkpoint(tp)],
     "truncated or damaged"),
    ("ledger-deep-json", lambda tp: ["ledger", "verify", _deep_ledger(tp)], "line 2"),
    ("run-ledger-deep-json", lambda tp: RUN + ["--epsilon", "1", "--delta", "1e-5", "--ledger",
                                               _deep_ledger(tp)] + PRIV, "nested too deeply"),
    ("audit-samples-huge", ["audit", "--samples", "1000000000000"], "at most 10,000,000"),
    # issue 13: messages that name the field
    ("run-seed-negative", RUN + ["--algorithm", "bcfw", "--seed", "-1"], "--seed"),
    ("run-eps-1e308", RUN + ["--epsilon", "1e308", "--delta", "1e-5"] + PRIV, "1e+308"),
    ("run-csv-ragged", lambda tp: ["run", "--data", _plan(tp, "a,b,y\n1,2,1\n2,0\n1,1,1\n",
                                                          "d.csv"),
                                   "--label", "y", "--algorithm", "bcfw"], "line 3: 2 fields"),
    ("run-resume-ledger-gone", lambda tp: ["run", "--resume", _checkpoint_without_ledger(tp)],
     "does not exist"),
    ("fedp3-seed-negative", ["fedp3", "--seed", "-1", "--rounds", "1"], "--seed"),
    ("fedp3-eps-1e308", ["fedp3", "--epsilon", "1e308", "--rounds", "1"], "1e+308"),
    # issue 13: the ledger's header, output paths
    ("run-ledger-header-edited", lambda tp: RUN + ["--epsilon", "1", "--delta", "1e-5",
                                                   "--ledger", _edited_ledger(tp)] + PRIV,
     "checksum"),
    ("run-ledger-nan-budget", lambda tp: RUN + ["--epsilon", "1", "--delta", "1e-5", "--ledger",
                                                _plan(tp, '{"format": "vflpriv-ledger", '
                                                      '"version": 1, "budget": {"epsilon": NaN, '
                                                      '"delta": 1e-5}}\n', "l.jsonl")] + PRIV,
     "nan"),
    ("run-json-is-the-ledger", lambda tp: RUN + ["--epsilon", "1", "--delta", "1e-5", "--ledger",
                                                 _good_ledger(tp), "--json", _good_ledger(tp)]
     + PRIV, "same file"),
    ("run-plot-directory", lambda tp: RUN + ["--epsilon", "1", "--delta", "1e-5", "--ledger",
                                             _good_ledger(tp), "--plot", str(tp)] + PRIV,
     "a directory"),
    ("run-checkpoint-fifo", lambda tp: RUN + ["--algorithm", "bcfw", "--checkpoint",
                                              _fifo(tp)], "a FIFO"),
    ("audit-json-missing-dir", lambda tp: ["audit", "--samples", "100", "--json",
                                           str(tp / "no" / "a.json")], "does not exist"),
]


def _fifo(tp):
    p = tp / "fifo"
    if not p.exists():
        os.mkfifo(p)
    return str(p)


def _truncated_checkpoint(tp):
    ck = tp / "c.npz"
    assert main(["run", "--data", SYN, "--algorithm", "bcfw", "--iterations", "2", "--seed", "0",
                 "--checkpoint", str(ck)]) == 0
    data = ck.read_bytes()
    ck.write_bytes(data[:len(data) // 2])
    return str(ck)


def _checkpoint_without_ledger(tp):
    ck, led = tp / "c.npz", tp / "l.jsonl"
    assert main(RUN + ["--epsilon", "1", "--delta", "1e-5", "--iterations", "2", "--seed", "0",
                       "--checkpoint", str(ck), "--ledger", str(led)] + PRIV) == 0
    led.unlink()
    return str(ck)


def _deep_ledger(tp):
    p = tp / "deep.jsonl"
    acc.Ledger(p)
    with open(p, "a") as fh:
        fh.write("[" * 100000 + "]" * 100000 + "\n")
    with open(p, "a") as fh:
        fh.write("{}\n")
    return str(p)


def _edited_ledger(tp):
    p = tp / "edited.jsonl"
    acc.Ledger(p, budget={"epsilon": 2.0, "delta": 1e-5})
    lines = p.read_text().splitlines()
    h = json.loads(lines[0])
    h["budget"]["epsilon"] = 200.0
    p.write_text(json.dumps(h) + "\n")
    return str(p)


def _good_ledger(tp):
    p = tp / "good.jsonl"
    if not p.exists():
        acc.Ledger(p, budget={"epsilon": 1.0, "delta": 1e-5}).append(
            acc.Laplace(4.0, neighboring="replace_one"), party="0")
    return str(p)


def _ledger_with_bad_record(tp):
    p = tp / "bad.jsonl"
    led = acc.Ledger(p)
    led.append(acc.Laplace(4.0), party="0")
    led.append(acc.Laplace(4.0), party="0")
    lines = p.read_text().splitlines()
    lines[1] = lines[1].replace('"scale":4.0', '"scale":8.0')     # altered: CRC no longer matches
    p.write_text("\n".join(lines) + "\n")
    return str(p)


@pytest.mark.parametrize("argv, needle", [c[1:] for c in CLI_CASES], ids=[c[0] for c in CLI_CASES])
def test_cli_bad_input_one_line_exit_2(argv, needle, tmp_path, capsys):
    if callable(argv):
        argv = argv(tmp_path)
    if argv[0] == "fedp3":
        pytest.importorskip("torch")
    capsys.readouterr()
    before = _snapshot(tmp_path)
    try:
        rc = main(argv)
    except SystemExit as exc:          # argparse's own errors (choices, types)
        rc = exc.code
    err = capsys.readouterr().err
    assert rc == 2, err
    assert _snapshot(tmp_path) == before, "a file was created, changed or removed"
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("usage:")
             and not ln.startswith(" ")]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert needle in lines[0], lines[0]


def _X():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((30, 6))
    return X, X[:, 0] - 0.5 * X[:, 3]


def _lasso(**kw):
    from vflpriv.estimators import VerticalDPLasso

    base = dict(epsilon=1.0, delta=1e-5, feature_bound=1.0, label_bound=1.0, random_state=0,
                max_iter=3)
    base.update(kw)
    return VerticalDPLasso(**base)


def _fit(X=None, y=None, **kw):
    X0, y0 = _X()
    return lambda: _lasso(**kw).fit(X0 if X is None else X, y0 if y is None else y)


def _with(a, idx, v):
    a = np.array(a, dtype=float)
    a[idx] = v
    return a


X0, Y0 = _X()

# (id, callable, text the message must contain)
API_CASES = [
    ("fit-nan-X", _fit(X=_with(X0, (0, 0), np.nan)), "Input X contains NaN"),
    ("fit-inf-y", _fit(y=_with(Y0, 3, np.inf)), "Input y contains infinity"),
    ("fit-y-wrong-length", _fit(y=Y0[:-1]), "29"),
    ("fit-X-1d", _fit(X=X0[:, 0]), "Expected 2D array, got 1D array"),
    ("fit-no-features", _fit(X=X0[:, :0]), "0 feature(s)"),
    ("fit-K-greater-than-d", _fit(parties=7), "parties=7"),
    ("fit-eps-zero", _fit(epsilon=0), "got 0"),
    ("fit-eps-negative", _fit(epsilon=-1.0), "-1.0"),
    ("fit-delta-above-1", _fit(delta=2.0), "got 2.0"),
    ("fit-delta-zero", _fit(delta=0.0), "got 0.0"),
    ("fit-bound-zero", _fit(feature_bound=0.0), "feature_bound"),
    ("fit-bound-negative", _fit(label_bound=-1.0), "label_bound"),
    ("fit-unknown-algorithm", _fit(algorithm="sgd"), "'sgd'"),
    ("fit-unknown-rnm", _fit(rnm="cauchy"), "'cauchy'"),
    ("event-laplace-negative", lambda: acc.Laplace(-1.0), "-1.0"),
    ("event-laplace-nan", lambda: acc.Laplace(math.nan), "nan"),
    ("event-gaussian-zero", lambda: acc.Gaussian(0.0), "0.0"),
    ("event-gaussian-sigma-1e308", lambda: acc.Gaussian(1e308), "sigma=1e+308"),
    ("event-rnm-unknown-noise", lambda: acc.ReportNoisyMax("cauchy", 1.0, 1.0), "'cauchy'"),
    ("event-subsampled-rate", lambda: acc.PoissonSubsampledGaussian(1.0, 1.5), "1.5"),
    ("event-approx-delta", lambda: acc.ApproxDP(1.0, 1.5), "1.5"),
    ("event-zcdp-negative", lambda: acc.ZCDP(-1.0), "-1.0"),
    ("event-selfcomposed-zero", lambda: acc.SelfComposed(acc.Laplace(1.0), 0), "got 0"),
    ("event-neighboring-unknown", lambda: acc.Laplace(1.0, neighboring="swap"), "'swap'"),
    ("event-from-dict-unknown", lambda: acc.event_from_dict({"kind": "magic"}), "'magic'"),
    ("accountant-unknown", lambda: acc.get_accountant("guess"), "'guess'"),
    ("accountant-delta-outside", lambda: acc.get_accountant("rdp").epsilon(acc.Laplace(1.0), 1.5),
     "1.5"),
    ("calibrate-eps-negative", lambda: acc.calibrate(lambda s: acc.Laplace(s), -1.0, 1e-5), "-1"),
    ("calibrate-delta-zero", lambda: acc.calibrate(lambda s: acc.Gaussian(s), 1.0, 0.0), "got 0"),
    ("calibrate-accountant-unknown", lambda: acc.calibrate(lambda s: acc.Gaussian(s), 1.0, 1e-5,
                                                           accountant="guess"), "'guess'"),
    ("budget-filter-eps-zero", lambda: acc.BudgetFilter(acc.Ledger.__new__(acc.Ledger), 0.0, 1e-5),
     "0.0"),
]


@pytest.mark.parametrize("fn, needle", [c[1:] for c in API_CASES], ids=[c[0] for c in API_CASES])
def test_api_bad_input_raises_one_clear_error(fn, needle):
    with pytest.raises(ValueError) as info:
        fn()
    assert needle in str(info.value), str(info.value)
    assert "\n" not in str(info.value).strip()


def _synthetic_data():
    from vflpriv.data import VerticalData, make_synthetic

    A, y, _ = make_synthetic(n=60, d=20, seed=0)
    return VerticalData.from_arrays(A, y, parties=2)


def _solve(**kw):
    from vflpriv.vertical import solve

    base = dict(epsilon=1.0, delta=1e-5, feature_bound=1.0, label_bound=1.0, iterations=3,
                seed=0)
    base.update(kw)
    return lambda: solve(_synthetic_data(), **base)


# issue 13 through the Python API: (id, tmp_path -> callable, text the message must contain);
# every file under tmp_path must be left as it was
API_FILE_CASES = [
    ("solve-seed-negative", lambda tp: _solve(seed=-1), "got -1"),
    ("solve-eps-1e308", lambda tp: _solve(epsilon=1e308), "1e+308"),
    ("solve-sketch-dim-huge", lambda tp: _solve(sketch="gaussian", sketch_dim=10 ** 12),
     "1000000000000"),
    ("solve-ledger-edited-header", lambda tp: _solve(ledger=_edited_ledger(tp)), "checksum"),
    ("solve-ledger-deep-json", lambda tp: _solve(ledger=_deep_ledger(tp)), "nested too deeply"),
    ("solve-checkpoint-is-the-ledger", lambda tp: _solve(ledger=_good_ledger(tp),
                                                         checkpoint=_good_ledger(tp)),
     "same file"),
    ("solve-checkpoint-fifo", lambda tp: _solve(ledger=str(tp / "l.jsonl"),
                                                checkpoint=_fifo(tp)), "a FIFO"),
    ("solve-resume-truncated", lambda tp: _solve(algorithm="bcfw", epsilon=math.inf,
                                                 checkpoint=_truncated_checkpoint(tp),
                                                 resume=True), "truncated or damaged"),
    ("partition-huge", lambda tp: lambda: _part("0-99999999999999999999;"), "outside"),
    ("partition-huge-second", lambda tp: lambda: _part("0-3;4-9999999999"), "outside"),
    ("load-svmlight-huge-index", lambda tp: _later(_load, _plan(tp, "1 1:1 99999999999:2\n",
                                                                "d.svm")), "too large"),
    ("load-csv-ragged", lambda tp: _later(_load, _plan(tp, "a,b,y\n1,2,1\n2,0\n", "d.csv"),
                                          "y"), "2 fields"),
    ("read-ledger-deep-json", lambda tp: _later(acc.read_ledger, _deep_ledger(tp)), "line 2"),
    ("plan-count-2-63", lambda tp: lambda: _parse_plan(count=2 ** 63 - 1), "9223372036854775807"),
    ("plan-sigma-1e308", lambda tp: lambda: _parse_plan(mechanism="gaussian", sigma=1e308),
     "sigma = 1e+308"),
    ("fit-complex-X", lambda tp: _fit(X=X0 * (1 + 1j)), "complex"),
    ("fit-random-state-negative", lambda tp: _fit(random_state=-1), "random_state"),
    ("fit-ledger-nan-budget", lambda tp: _fit(ledger=_plan(
        tp, '{"format": "vflpriv-ledger", "version": 1, "budget": {"epsilon": NaN, '
            '"delta": 1e-5}}\n', "l.jsonl")), "nan"),
]


def _later(fn, *args):
    return lambda: fn(*args)


def _part(spec):
    from vflpriv.data.partition import make_partition

    return make_partition(spec, 20, 2)


def _load(path, label=None):
    from vflpriv.data import load

    return load(path, label)


def _parse_plan(mechanism="laplace", count=1, **params):
    from accounting.plan import parse_plan

    rel = dict(mechanism=mechanism, count=count, **(params or {"scale": 1.0}))
    return parse_plan({"delta": 1e-5, "release": [rel]})


@pytest.mark.parametrize("setup, needle", [c[1:] for c in API_FILE_CASES],
                         ids=[c[0] for c in API_FILE_CASES])
def test_api_bad_input_touches_no_file(setup, needle, tmp_path):
    fn = setup(tmp_path)
    before = _snapshot(tmp_path)
    with pytest.raises(ValueError) as info:
        fn()
    assert needle in str(info.value), str(info.value)
    assert "\n" not in str(info.value).strip()
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize("argv", [
    ["run", "--data", SYN, "--epsilon", "1e308", "--delta", "1e-5"] + PRIV,
    ["certify", "PLAN"],
], ids=["eps-1e308", "certify-sigma-1e308"])
def test_no_warnings_or_traceback_in_a_real_process(argv, tmp_path):
    """Warnings print to the real stderr (pytest captures them otherwise): one line only."""
    argv = [a if a != "PLAN" else _plan(tmp_path, 'delta = 1e-5\n[[release]]\nmechanism = '
                                        '"gaussian"\nsigma = 1e308\n') for a in argv]
    r = subprocess.run([sys.executable, "-m", "vflpriv"] + argv, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
