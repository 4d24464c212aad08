"""The tutorials (docs/tutorials/NN_*.py) run in fast mode, and ``vflpriv reproduce`` lists its
entries, runs one in fast mode and refuses bad input with one line and exit 2."""
import json
import os
import re
import runpy

import pytest

from vflpriv.cli.main import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TUTORIALS = sorted(f for f in os.listdir(os.path.join(ROOT, "docs", "tutorials"))
                   if re.match(r"\d\d_.*\.py$", f))


def test_there_are_four_tutorials():
    assert [t[:2] for t in TUTORIALS] == ["01", "02", "03", "04"]


@pytest.mark.parametrize("name", TUTORIALS)
def test_tutorial_runs_in_fast_mode(name, tmp_path, monkeypatch):
    monkeypatch.setenv("VFLPRIV_TUTORIAL_FAST", "1")
    monkeypatch.setenv("VFLPRIV_TUTORIAL_OUT", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    runpy.run_path(os.path.join(ROOT, "docs", "tutorials", name), run_name="__main__")
    md = tmp_path / (name[:-3] + ".md")
    text = md.read_text()
    figures = re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", text)
    assert figures, "the page embeds its figures"
    for fig in figures:
        assert (tmp_path / fig).stat().st_size > 1000
    assert "$ vflpriv " in text and "fast mode" in text


def test_reproduce_list(capsys):
    assert main(["reproduce", "--list"]) == 0
    out = capsys.readouterr().out
    for name in ("004-fig1", "004-fig6", "000-fig3a", "003-fig9", "001-table2", "002-table2"):
        assert name in out
    # each entry sits under its paper, named by authors and title, not by the internal number
    lines = out.splitlines()
    from vflpriv.reproduce import ENTRIES

    for e in ENTRIES.values():
        i = next(k for k, line in enumerate(lines) if line.split()[:1] == [e.name])
        head = next(line for line in reversed(lines[:i]) if line and not line.startswith(" "))
        title = e.paper.split(" (")[0]
        assert title in head, (e.name, head)
    assert "Lou and Cheung: An Uplink Communication-Efficient Approach" in out


@pytest.fixture(autouse=True)
def _restore_environment(monkeypatch):
    """``reproduce`` pins numeric settings in os.environ (when torch is not loaded yet): give
    them back after each test."""
    from vflpriv.reproduce.environment import PINNED

    for k in PINNED:
        if k in os.environ:
            monkeypatch.setenv(k, os.environ[k])
        else:
            monkeypatch.delenv(k, raising=False)


def test_reproduce_one_entry_fast(tmp_path, capsys):
    assert main(["reproduce", "004-fig1", "--fast", "--seeds", "2", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| claim | paper | measured here | verdict |" in out
    res = json.loads((tmp_path / "004-fig1.json").read_text())
    assert res["fast"] and res["claims"] and res["seeds"] == [0, 1]
    for c in res["claims"]:
        assert c["verdict"] in ("holds", "does not hold", "inconclusive")
        assert {"claim", "paper", "measured", "seeds", "mean", "interval"} <= set(c)
        assert c["seeds"] == [0, 1] and len(c["interval"]) == 2 and len(c["values"]) == 2
        lo, hi = c["interval"]
        assert lo <= c["mean"] <= hi
    env = res["environment"]
    assert {"python", "numpy", "scipy", "pinned"} <= set(env)
    assert "Mode: --fast (small settings), seeds 0, 1" in (tmp_path / "004-fig1.md").read_text()
    assert (tmp_path / "004-fig1.png").stat().st_size > 1000
    assert "![004-fig1](004-fig1.png)" in (tmp_path / "004-fig1.md").read_text()


@pytest.mark.parametrize("argv", [["reproduce"], ["reproduce", "nope"],
                                  ["reproduce", "004-fig1", "--list"],
                                  ["reproduce", "004-fig1", "--all"],
                                  ["reproduce", "004-fig1", "--out", "FILE"],
                                  ["reproduce", "004-fig1", "--seeds", "0"],
                                  ["reproduce", "004-fig1", "--seeds", "two"]])
def test_reproduce_bad_input(argv, tmp_path, capsys):
    f = tmp_path / "a_file"
    f.write_text("x")
    argv = [str(f) if a == "FILE" else a for a in argv]
    try:
        rc = main(argv)
    except SystemExit as exc:                  # argparse's own type errors
        rc = exc.code
    assert rc == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("vflpriv reproduce: error:")


def test_reproduce_checks_its_files_before_the_work(tmp_path, capsys):
    (tmp_path / "004-fig1.png").mkdir()
    assert main(["reproduce", "004-fig1", "--out", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err
    assert not (tmp_path / "004-fig1.json").exists()


def test_assemble_writes_the_results_from_the_commands_files(tmp_path, capsys):
    from vflpriv.reproduce.assemble import MARKER, assemble

    out = tmp_path / "reproduce"
    assert main(["reproduce", "003-fig9", "--fast", "--seeds", "2", "--out", str(out)]) == 0
    page = tmp_path / "page.md"
    page.write_text("# hand-written head\n\n" + MARKER + "\nold results\n")
    assemble(str(out), str(page))
    first = page.read_text()
    assemble(str(out), str(page))                       # idempotent
    text = page.read_text()
    assert text == first and text.startswith("# hand-written head") and "old results" not in text
    res = json.loads((out / "003-fig9.json").read_text())
    assert f"**{res['claims'][0]['verdict']}**" in text and "--fast, seeds 0, 1" in text
    assert "![003-fig9](reproduce/003-fig9.png)" in text
