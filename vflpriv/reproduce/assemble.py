"""Assemble docs/reproduce.md's results from the files ``vflpriv reproduce`` wrote.

``python -m vflpriv.reproduce.assemble FOLDER PAGE`` replaces everything after the marker line
:data:`MARKER` in PAGE with (1) a summary table of every claim's verdict, read from FOLDER/NAME.json,
and (2) every FOLDER/NAME.md as the command wrote it (headings one level down, figure links made
relative to PAGE).  Nothing in the results part of the page is typed by hand.
"""
from __future__ import annotations

import json
import os
import sys

from . import ENTRIES

MARKER = "<!-- results: written by `python -m vflpriv.reproduce.assemble`; do not edit below -->"


def _mode(res):
    return (("--fast" if res["fast"] else "full") + ", seeds "
            + ", ".join(map(str, res["seeds"])) + f", {res['seconds']:.0f} s")


def results(folder, page_dir):
    rel = os.path.relpath(folder, page_dir)
    found = [n for n in ENTRIES if os.path.exists(os.path.join(folder, f"{n}.json"))]
    lines = ["## Summary: every claim's verdict", "",
             "| entry | mode | claim | verdict |", "|---|---|---|---|"]
    for n in found:
        with open(os.path.join(folder, f"{n}.json")) as f:
            res = json.load(f)
        for c in res["claims"]:
            lines.append(f"| [{n}]({rel}/{n}.md) | {_mode(res)} | {c['claim']} | "
                         f"**{c['verdict']}** |")
    lines += ["", "## Results per entry", ""]
    for n in found:
        with open(os.path.join(folder, f"{n}.md")) as f:
            text = f.read()
        text = text.replace(f"]({n}.png)", f"]({rel}/{n}.png)")
        lines += [("#" * 2 + ln) if ln.startswith("#") else ln for ln in text.splitlines()]
        lines.append("")
    return "\n".join(lines)


def assemble(folder, page):
    with open(page) as f:
        head = f.read()
    if MARKER not in head:
        raise SystemExit(f"{page} has no marker line {MARKER!r}")
    head = head[:head.index(MARKER) + len(MARKER)]
    body = results(folder, os.path.dirname(os.path.abspath(page)))
    with open(page, "w") as f:
        f.write(head + "\n\n" + body + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: python -m vflpriv.reproduce.assemble FOLDER PAGE")
    assemble(sys.argv[1], sys.argv[2])
