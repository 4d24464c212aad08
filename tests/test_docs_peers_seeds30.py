"""docs/vertical.md's thirty-split table ("Thirty paired splits") is docs/peers_seeds30.json's
paired comparisons, and those are recomputed from the file's rows."""
import json
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _text(*parts):
    with open(os.path.join(ROOT, *parts)) as fh:
        return fh.read()


def test_paired_comparisons_are_the_rows():
    from vflpriv.bench.peers_paired import paired

    doc = json.loads(_text("docs", "peers_seeds30.json"))
    assert doc["settings"]["seeds"] == list(range(30))
    again = paired(doc["rows"])
    assert len(again) == len(doc["paired"]) == 14
    for a, b in zip(again, doc["paired"]):
        assert a["seeds"] == 30 and a["verdict"] == b["verdict"]
        assert a["mean_difference"] == pytest.approx(b["mean_difference"], abs=1e-12)
        assert a["ci95"] == pytest.approx(b["ci95"], abs=1e-12)


def test_vertical_md_table_and_counts():
    doc = json.loads(_text("docs", "peers_seeds30.json"))
    P = {(p["table"], p["epsilon"]): p for p in doc["paired"]}
    page = _text("docs", "vertical_results.md")
    sec = page[page.index("**Thirty paired splits.**"):]
    sec = sec[:sec.index("\n## ")]

    def cell(p):
        return (f"{p['mean_difference']:+.3f} ({p['ci95'][0]:+.3f} .. {p['ci95'][1]:+.3f}) "
                f"{p['verdict']}")

    for t in doc["settings"]["tables"]:
        assert f"| {t} | {cell(P[(t, 0.5)])} | {cell(P[(t, 1.0)])} |" in sec, t
    flat = re.sub(r"\s+", " ", sec)
    n = {v: sum(p["verdict"] == v for p in P.values()) for v in ("level", "below", "above")}
    assert f"{n['level']} are level" in flat and f"{n['below']} are below" in flat
    assert n["above"] == 0
    below = {t for (t, e), p in P.items() if p["verdict"] == "below"}
    assert below == {"oj", "boston", "bikeshare", "fair"}
    level_both = {t for t in doc["settings"]["tables"]
                  if P[(t, 0.5)]["verdict"] == P[(t, 1.0)]["verdict"] == "level"}
    assert level_both == {"default", "college", "carseats"}
