"""A catalogue of bad inputs for every public entry point (issue 6, reliability).

CLI: each case must exit 2 with exactly one line on stderr that names the bad value, and no
traceback.  Python API: each case must raise one ValueError (``InputError`` is one) whose message
names the bad value.  The cases are a table: add a row when an entry point or option lands.
"""
import math

import numpy as np
import pytest

import accounting as acc
from vflpriv.cli.main import main

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
    ("run-eps-zero", RUN + ["--epsilon", "0", "--delta", "1e-5"] + PRIV, "got 0.0"),
    ("run-eps-negative", RUN + ["--epsilon", "-1", "--delta", "1e-5"] + PRIV, "got -1.0"),
    ("run-eps-nan", RUN + ["--epsilon", "nan", "--delta", "1e-5"] + PRIV, "got nan"),
    ("run-eps-word", RUN + ["--epsilon", "lots", "--delta", "1e-5"] + PRIV, "'lots'"),
    ("run-delta-above-1", RUN + ["--epsilon", "1", "--delta", "1.5"] + PRIV, "got 1.5"),
    ("run-delta-zero", RUN + ["--epsilon", "1", "--delta", "0"] + PRIV, "got 0.0"),
    ("run-delta-missing", RUN + ["--epsilon", "1"] + PRIV, "delta"),
    ("run-feature-bound-zero", RUN + ["--epsilon", "1", "--delta", "1e-5", "--feature-bound", "0",
                                      "--label-bound", "1"], "feature_bound"),
    ("run-label-bound-negative", RUN + ["--epsilon", "1", "--delta", "1e-5", "--feature-bound",
                                        "1", "--label-bound", "-2"], "label_bound"),
    ("run-bound-inf", RUN + ["--epsilon", "1", "--delta", "1e-5", "--feature-bound", "inf",
                             "--label-bound", "1"], "feature_bound"),
    ("run-clip-zero", RUN + ["--epsilon", "1", "--delta", "1e-5", "--derivative-clip", "0"] + PRIV,
     "derivative_clip"),
    # shapes, K > d, empty blocks, iterations, names
    ("run-K-greater-than-d", ["run", "--data", SYN, "--parties", "30", "--algorithm", "bcfw"],
     "K=30 exceeds"),
    ("run-K-zero", ["run", "--data", SYN, "--parties", "0", "--algorithm", "bcfw"], "got 0"),
    ("run-empty-block", ["run", "--data", SYN, "--parties", "2", "--algorithm", "bcfw",
                         "--partition", "0-19;"], "group 1 must be a non-empty"),
    ("run-iterations-zero", RUN + ["--algorithm", "bcfw", "--iterations", "0"], "got 0"),
    ("run-eta-negative", RUN + ["--algorithm", "bcfw", "--eta", "-1"],
     "eta (per-party l1 radius) must be a positive finite number, got -1.0"),
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
     "got 0"),
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
]


def _good_ledger(tp):
    p = tp / "good.jsonl"
    acc.Ledger(p, budget={"epsilon": 1.0, "delta": 1e-5}).append(acc.Laplace(4.0), party="0")
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
    try:
        rc = main(argv)
    except SystemExit as exc:          # argparse's own errors (choices, types)
        rc = exc.code
    err = capsys.readouterr().err
    assert rc == 2, err
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
