"""The README is a front door of about two screens: its test command is the one CI runs, the
defaults it states are the command's, and its run example learns with them as it says (the demo
table it shows is checked against the demo's own output in tests/test_cli_certify.py, which runs
the demo)."""
import json
import os
import re
import shlex

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _readme():
    with open(os.path.join(ROOT, "README.md")) as fh:
        return fh.read()


def test_readme_is_two_screens():
    assert len(_readme().splitlines()) <= 150


def test_readme_keeps_the_test_command_ci_runs():
    command = ('python -m pip install -c constraints.txt -e ".[test,torch,flower]" && '
               "python -m pytest -q")
    assert command in _readme()
    with open(os.path.join(ROOT, ".ci", "run")) as fh:
        assert command in fh.read()


def test_readme_states_the_run_defaults():
    from vflpriv.cli.main import build_parser

    args = build_parser().parse_args(["run", "--data", "diabetes"])
    flat = " ".join(_readme().split())
    assert args.algorithm == "dp-bcfw-secure"
    assert (f"Its defaults are `--algorithm {args.algorithm}` (the private algorithm that learns: "
            f"cross-party products under secret sharing, the label at party 0) with `--loss "
            f"{args.loss}` and `--iterations {args.iterations}`") in flat
    assert "`--algorithm dp-bcfw` is DP-BCFW-AS, the paper's algorithm" in flat


def test_readme_run_example_learns_with_the_default_algorithm(tmp_path):
    """The README's diabetes run names no --algorithm; over seeds 0-4 it removes the share of the
    gap f(0) - f(optimum) the README states, and at --epsilon 1 its objective does not fall."""
    from vflpriv.cli.main import main

    cmd = next(line for line in _readme().splitlines()
               if line.startswith("vflpriv run --data diabetes"))
    argv = shlex.split(cmd)[1:]
    assert "--algorithm" not in argv and "--reference" in argv

    def removed(extra, seed):
        out = tmp_path / f"r{seed}.json"
        assert main(argv + extra + ["--seed", str(seed), "--quiet", "--json", str(out)]) == 0
        d = json.loads(out.read_text())
        assert d["algorithm"] == "dp-bcfw-secure"
        f0, fT, ref = d["initial_objective"], d["final_objective"], d["reference_objective"]
        return (f0 - fT) / (f0 - ref)

    shares = [removed([], s) for s in range(5)]
    lo, hi = re.search(r"\((\d+)-(\d+)% over seeds 0-4\)", " ".join(_readme().split())).groups()
    assert (round(100 * min(shares)), round(100 * max(shares))) == (int(lo), int(hi))
    assert min(shares) > 0.5                          # most of the gap, every seed
    assert removed(["--epsilon", "1"], 0) <= 0         # "at --epsilon 1 the objective does not fall"

