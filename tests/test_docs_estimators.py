"""docs/estimators.md runs as written: every Python block, in a fresh folder, with this
checkout's vflpriv; where the page says what a block prints ("prints `...`" right after it),
the output is exactly that."""
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = os.path.join(ROOT, "docs", "estimators.md")


def blocks():
    with open(PAGE) as fh:
        text = fh.read()
    out = []
    for m in re.finditer(r"^```python\n(.*?)^```\n", text, re.S | re.M):
        after = text[m.end():].lstrip("\n")
        said = re.match(r"prints `([^`]*)`", after)
        out.append((m.group(1), said.group(1) if said else None))
    return out


def test_the_page_has_its_examples():
    assert len(blocks()) == 2 and all(said for _, said in blocks())


@pytest.mark.slow
@pytest.mark.parametrize("i", range(2))
def test_block_runs_and_prints_what_the_page_says(i, tmp_path):
    code, said = blocks()[i]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == said
    if "cv.ledger" in code:          # the page's next command: the auditor's view of all folds
        v = subprocess.run([sys.executable, "-m", "vflpriv", "ledger", "verify", "cv.ledger"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert v.returncode == 0, v.stderr
        shown = re.search(r"\$ vflpriv ledger verify cv.ledger\n(.*?)```", open(PAGE).read(),
                          re.S).group(1)
        assert v.stdout == shown          # seeded: the page's output, line for line
