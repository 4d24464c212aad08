"""An option the chosen algorithm (or dp-bcfw-secure path) does not read is refused by ``vflpriv
run`` with exit 2 and one line naming it, before any file is written (issue 50: ``--algorithm bcfw
--row-clip 2 --max-features 3`` ran without a word while ``--helper-party`` was refused).  Each
refusal is checked against a run that takes the same option with an algorithm that reads it."""
import pytest

from vflpriv.cli.main import main

DATA = ["--data", "synthetic:n=120,d=8,seed=1", "--iterations", "2", "--seed", "1", "-q"]
PRIVATE = ["--epsilon", "1", "--delta", "1e-5", "--feature-bound", "1", "--label-bound", "1"]

REFUSED = [
    (["--algorithm", "fw", "--sketch", "gaussian"], "--sketch 'gaussian'"),
    (["--algorithm", "fw", "--sketch-dim", "40"], "--sketch-dim 40"),
    (["--algorithm", "dpfw", *PRIVATE, "--sampling", "nice:1"], "--sampling 'nice:1'"),
    (["--algorithm", "dpfw", *PRIVATE, "--split", "0.3"], "--split 0.3"),
    (["--algorithm", "dpfw", *PRIVATE, "--calibration", "paper"], "--calibration 'paper'"),
    (["--algorithm", "fw", "--derivative-clip", "1"], "--derivative-clip"),
    (["--algorithm", "bcfw", "--compare-calibration"], "--compare-calibration"),
    (["--algorithm", "bcfw", "--step", "fw"], "--step 'fw'"),
    (["--algorithm", "dp-bcfw-secure", *PRIVATE, "--step", "fw"], "step 'fw'"),
    (["--algorithm", "dp-bcfw-secure", *PRIVATE, "--loss", "logistic", "--rnm", "gumbel"],
     "--rnm"),
    (["--algorithm", "dp-bcfw-secure", *PRIVATE, "--loss", "logistic", "--max-features", "3"],
     "--max-features"),
    (["--algorithm", "dp-bcfw-secure", *PRIVATE, "--loss", "logistic", "--logistic-path",
      "glm", "--split", "0.3"], "--split"),
    (["--algorithm", "bcfw", "--row-clip", "2"], "--row-clip"),
]


@pytest.mark.parametrize("extra, named", REFUSED, ids=[" ".join(r[0][1:4]) + " " + r[1]
                                                       for r in REFUSED])
def test_an_option_the_run_does_not_read_is_refused_by_name(tmp_path, capsys, extra, named):
    out = tmp_path / "out.json"
    assert main(["run", *DATA, *extra, "--json", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and named in err[0] and "Traceback" not in err[0], err
    assert not out.exists()


@pytest.mark.parametrize("extra", [
    ["--algorithm", "bcfw", "--sketch", "gaussian", "--sketch-dim", "60"],
    ["--algorithm", "dp-bcfw", *PRIVATE, "--split", "0.3", "--calibration", "paper",
     "--compare-calibration"],
    ["--algorithm", "dpfw", *PRIVATE, "--derivative-clip", "1"],
    ["--algorithm", "fw", "--step", "fw"],
    ["--algorithm", "dp-bcfw-secure", *PRIVATE, "--rnm", "gumbel", "--split", "0.4",
     "--max-features", "3"],
    ["--algorithm", "dp-bcfw-secure", *PRIVATE, "--loss", "logistic", "--logistic-path", "glm",
     "--step", "pgd"],
])
def test_the_same_options_run_where_they_are_read(tmp_path, extra):
    assert main(["run", *DATA, *extra, "--json", str(tmp_path / "out.json")]) == 0
    assert (tmp_path / "out.json").exists()
