"""The README is a front door of about two screens: its test command is the one CI runs, the
defaults it states are the command's (the demo table it shows is checked against the demo's
own output in tests/test_cli_certify.py, which runs the demo)."""
import os

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
    assert (f"Its defaults are `--algorithm {args.algorithm}` (DP-BCFW-AS, the paper's algorithm) "
            f"with `--loss {args.loss}` and `--iterations {args.iterations}`") in flat

