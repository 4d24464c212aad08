"""A hostile-input harness of our own (issue 53): each command's numeric and path options at
their edges (negative, zero, NaN, inf, 1e308, an empty string, a huge count, a non-integer
count, an existing directory as an output, an input used as an output), run in this process
through ``vflpriv.cli.main.main``.  Each must be refused before any work: exit 2, one line on
stderr naming the option or the value, no traceback, and no file created or changed.

Arguments may name ``{tmp}`` (the test's directory, which holds ``in.csv``, ``plan.toml``,
``L.ledger`` and an empty directory ``dir``)."""

import pytest

from vflpriv.cli.main import main
from _files import snapshot as _snapshot  # noqa: E402

SYN = "synthetic:n=60,d=6,seed=1"
RUN = ["run", "--data", SYN, "--algorithm", "bcfw", "--iterations", "2"]
PRIV = ["run", "--data", SYN, "--algorithm", "dp-bcfw", "--iterations", "2", "--epsilon", "1",
        "--delta", "1e-5", "--feature-bound", "1", "--label-bound", "1"]
SECURE = ["run", "--data", SYN, "--algorithm", "dp-bcfw-secure", "--iterations", "2",
          "--epsilon", "1", "--delta", "1e-5", "--feature-bound", "1", "--label-bound", "1"]
SPARSE = ["sparse", "--data", "synthetic", "--rounds", "1"]
HORIZ = ["horizontal", "--data", "synthetic", "--rounds", "1"]
FEDP3 = ["fedp3", "--data", "synthetic", "--rounds", "1"]
CERTIFY = ["certify", "{tmp}/plan.toml"]
AUDIT = ["audit", "--mechanism", "laplace"]
UTILITY = ["bench", "utility", "--n", "60", "--d", "6", "--epsilons", "1"]

NUMBERS = ["-1", "0", "nan", "inf", "1e308", ""]
COUNTS = ["-1", "0", "1.5", "1e3", "", "99999999999999999999", "nan"]


def _edges(base, option, values, needle=None):
    return [(base + [option, v], needle or option) for v in values]


CASES = (
    # vflpriv run: its own numbers and counts
    _edges(RUN, "--iterations", COUNTS)
    + _edges(RUN, "--seed", ["-1", "1.5", "", "1e3", "99999999999999999999999"])
    + _edges(RUN, "--test-fraction", NUMBERS + ["1"])
    + _edges(RUN, "--chunk-rows", COUNTS)
    + _edges(RUN, "--parties", COUNTS)
    + _edges(RUN, "--sketch-dim", COUNTS)
    + _edges(RUN, "--checkpoint-every", COUNTS)
    + _edges(RUN, "--connect-timeout", ["-1", "0", "nan", "inf", ""])
    + _edges(RUN, "--eta", ["-1", "0", "nan", "inf", "1e309", ""])
    + _edges(RUN, "--feature-bound", NUMBERS)
    + _edges(RUN, "--label-bound", NUMBERS)
    + _edges(RUN, "--derivative-clip", ["-1", "0", "nan", "inf", ""])
    + _edges(RUN, "--split", NUMBERS + ["1"])
    + _edges(RUN, "--delta", ["-1", "0", "nan", "1", ""])
    + _edges(RUN, "--epsilon", ["-1", "0", "nan", "1e309", ""])
    + _edges(SECURE, "--row-clip", NUMBERS)
    + _edges(SECURE, "--max-features", COUNTS)
    + _edges(SECURE, "--helper-party", ["-1", "1.5", "", "99999999999999999999"])
    + _edges(PRIV, "--epsilon", ["-1", "0", "nan", "1e309"])
    + _edges(PRIV, "--delta", ["-1", "0", "nan", "1", "inf"])
    # an option the chosen algorithm ignores is refused, never silently accepted
    + [(RUN + ["--row-clip", "2"], "--row-clip"),
       (RUN + ["--max-features", "3"], "--max-features"),
       (RUN + ["--row-clip", "2", "--max-features", "3"], "--row-clip"),
       (PRIV + ["--max-features", "3"], "--max-features"),
       (RUN + ["--checkpoint-every", "3"], "--checkpoint-every")]
    # vflpriv run: paths
    + [(RUN + ["--json", ""], "--json"), (RUN + ["--plot", ""], "--plot"),
       (RUN + ["--ledger", ""], "--ledger"), (RUN + ["--json", "{tmp}/dir"], "--json"),
       (RUN + ["--plot", "{tmp}/dir"], "--plot"), (RUN + ["--model-out", "{tmp}/in.csv"],
                                                   "--model-out"),
       (RUN + ["--json", "{tmp}/nodir/x.json"], "--json"),
       (RUN + ["--json", "{tmp}/o.png", "--plot", "{tmp}/o.png"], "same file"),
       (["run", "--data", "{tmp}/in.csv", "--label", "y", "--algorithm", "bcfw", "--json",
         "{tmp}/in.csv"], "--json"),
       (["run", "--data", "{tmp}/missing.csv", "--label", "y", "--algorithm", "bcfw"],
        "missing.csv"),
       (["run", "--data", "{tmp}/dir", "--label", "y", "--algorithm", "bcfw"], "dir"),
       (RUN + ["--checkpoint", "{tmp}/dir"], "--checkpoint")]
    # vflpriv sparse, horizontal, fedp3
    + _edges(SPARSE, "--clip", ["-1", "0", "nan", "inf", ""])
    + [(SPARSE + ["--json", ""], "--json"), (SPARSE + ["--json", "{tmp}/dir"], "--json")]
    + _edges(HORIZ, "--clients", COUNTS)
    + _edges(HORIZ, "--rounds", COUNTS)
    + _edges(HORIZ, "--batch-size", COUNTS)
    + _edges(HORIZ, "--seed", ["-1", "1.5", ""])
    + _edges(HORIZ, "--participation", NUMBERS + ["2"])
    + _edges(HORIZ, "--local-epochs", ["-1", "0", "nan", "inf", "1e308", ""])
    + _edges(HORIZ, "--lr", ["-1", "0", "nan", "inf", ""])
    + _edges(HORIZ, "--weight-decay", ["-1", "nan", "inf", ""])
    + _edges(HORIZ, "--alpha", ["-1", "0", "nan", ""])
    + _edges(HORIZ, "--clip", ["-1", "0", "nan", "inf", ""])
    + _edges(HORIZ, "--delta", ["-1", "0", "nan", "1", ""])
    + [(HORIZ + ["--json", ""], "--json"), (HORIZ + ["--json", "{tmp}/dir"], "--json")]
    + _edges(FEDP3, "--local-epochs", ["-1", "nan", ""])
    + _edges(FEDP3, "--clip", ["-1", "0", "nan", ""])
    + _edges(FEDP3, "--clients", COUNTS)
    + [(FEDP3 + ["--json", "{tmp}/dir"], "--json")]
    # certify, audit, ledger, bench
    + [(CERTIFY + ["--calibrate", ""], "--calibrate"),
       (["certify", "{tmp}/missing.toml"], "missing.toml"),
       (["certify", "{tmp}/dir"], "dir"),
       (["certify", ""], "plan")]
    + _edges(AUDIT, "--samples", COUNTS, needle="--samples")
    + _edges(AUDIT, "--seed", ["-1", "1.5", ""])
    + _edges(AUDIT, "--confidence", NUMBERS + ["1"])
    + [(AUDIT + ["--json", ""], "--json"), (AUDIT + ["--json", "{tmp}/dir"], "--json")]
    + [(["ledger", "verify", "{tmp}/missing.ledger"], "missing.ledger"),
       (["ledger", "verify", "{tmp}/dir"], "dir")]
    + [(["bench", "accounting", "--json", ""], "--json"),
       (["bench", "accounting", "--json", "{tmp}/dir"], "--json")]
    + _edges(UTILITY, "--eta", ["-1", "0", "nan", "inf", "1e309", ""])
    + _edges(UTILITY, "--d", COUNTS)
    + _edges(UTILITY, "--parties", COUNTS)
    + _edges(UTILITY, "--iterations", COUNTS)
    + _edges(UTILITY, "--delta", ["-1", "0", "nan", "1", ""])
    + _edges(UTILITY, "--bound", NUMBERS)
    + _edges(UTILITY, "--density", ["-1", "0", "nan", "2", ""])
    + _edges(UTILITY, "--sparsity", ["-1", "0", "nan", "2", ""])
    + _edges(UTILITY, "--row-clip", ["-1", "0", "nan", "inf", ""])
    + _edges(UTILITY, "--max-features", COUNTS)
    + _edges(UTILITY, "--derivative-clip", ["-1", "nan", "inf", ""])     # 0 = no clip
    + _edges(UTILITY, "--seed", ["-1", "1.5", ""])
    + [(UTILITY + ["--plot", "{tmp}/dir"], "--plot")]
    # flower: descriptions written to a directory
    + [(["flower", "spec", "run", "--out", "{tmp}/in.csv", "--data", SYN, "--algorithm",
         "bcfw", "--iterations", "2"], "--out"),
       (["flower", "spec", "run", "--out", "", "--data", SYN, "--algorithm", "bcfw",
         "--iterations", "2"], "--out"),
       (["flower", "spec", "run", "--out", "{tmp}/o", "--data", SYN, "--algorithm", "bcfw",
         "--iterations", "0"], "--iterations"),
       (["flower", "schema", "--party-data", "{tmp}/in.csv", "--id", "id", "--json",
         "{tmp}/in.csv"], "--json"),
       (["flower", "schema", "--party-data", "{tmp}/in.csv", "--id", "id", "--json",
         "{tmp}/dir"], "--json"),
       (["flower", "schema", "--party-data", "{tmp}/in.csv", "--id", "id", "--json", ""],
        "--json")]
)


@pytest.fixture
def tmp(tmp_path, monkeypatch):
    (tmp_path / "in.csv").write_text("id,a,b,y\n1,0.1,0.2,1\n2,0.3,-0.1,-1\n3,0.2,0.0,1\n")
    (tmp_path / "plan.toml").write_text('delta = 1e-5\n[[release]]\nmechanism = "gaussian"\n'
                                        'sigma = 2.0\n')
    (tmp_path / "dir").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _id(case):
    argv, _ = case
    return " ".join(a if a else "''" for a in argv[:2] + argv[-2:])


@pytest.mark.parametrize("argv,needle", CASES, ids=[_id(c) for c in CASES])
def test_refused_before_any_work(argv, needle, tmp, capsys):
    argv = [a.replace("{tmp}", str(tmp)) for a in argv] + ["--quiet"]
    before = _snapshot(tmp)
    capsys.readouterr()
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert "Traceback" not in err, err
    assert rc == 2, (rc, err)
    assert len(lines) == 1, err
    assert needle in lines[0], (needle, err)
    assert _snapshot(tmp) == before, "a file was created, changed or removed"


@pytest.mark.parametrize("extra,option", [
    (["--algorithm", "fw", "--delta", "1e-5"], "--delta"),
    (["--algorithm", "bcfw", "--rnm", "gumbel"], "--rnm"),
    (["--algorithm", "dp-bcfw", "--epsilon", "inf", "--split", "0.5"], "--split"),
    (["--algorithm", "dfw", "--ledger", "L.ledger"], "--ledger"),
])
def test_a_non_private_run_refuses_privacy_only_options(tmp_path, capsys, monkeypatch, extra,
                                                         option):
    """Issue 53: an option the run would ignore is refused, naming it (here: privacy-only
    options on a non-private run), before anything is read or written."""
    monkeypatch.chdir(tmp_path)
    from vflpriv.cli.main import main

    code = main(["run", "--data", "synthetic:n=60,d=6,seed=1", "--parties", "2",
                 "--iterations", "2", "-q", *extra])
    assert code == 2
    err = capsys.readouterr().err
    assert f"{option} is for a private run" in err and len(err.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []
