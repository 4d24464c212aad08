"""docs/vertical.md's ssp section is its JSON files: docs/peers.json, docs/peers_ssp.json and
docs/peers_untuned.json (the commands are quoted on the page), docs/secure_traffic_flights_eps1.json
(the ten-seed comparison); the two markdown pages are what the peers command renders."""
import json
import os
import re
import statistics

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TABLES = ("flights", "caravan", "default", "oj", "fair", "anes96")
COLUMNS = ("opacus", "opacus-replace", "dp-bcfw-secure", "dp-bcfw-secure-ssp", "diffprivlib")


def _read(name):
    with open(os.path.join(ROOT, "docs", name)) as fh:
        return fh.read()


def _summary():
    S = {}
    for name in ("peers.json", "peers_ssp.json", "peers_untuned.json"):
        for s in json.loads(_read(name))["summary"]:
            S[(s["table"], s["system"], s["epsilon"])] = s["test_auc"]
    return S


def test_the_table_and_counts_are_the_json():
    S, page = _summary(), _read("vertical.md")
    flat = re.sub(r"\s+", " ", page)
    ahead = behind = 0
    for t in TABLES:
        for e in (0.5, 1.0, 4.0):
            row = f"| {t} | {e:g} | " + " | ".join(f"{S[(t, c, e)]:.3f}" for c in COLUMNS) + " |"
            assert row in page, row
            a, g = round(S[(t, "dp-bcfw-secure-ssp", e)], 3), round(S[(t, "dp-bcfw-secure", e)], 3)
            ahead, behind = ahead + (a > g), behind + (a < g)
    assert f"ssp is ahead in {ahead} of 18 cells" in flat and f"behind in {behind} " in flat
    above = sum(S[(t, "dp-bcfw-secure-ssp", e)] >= S[(t, "opacus-replace", e)]
                for t in TABLES for e in (0.5, 1.0))
    assert f"ssp is at or above it in {above} of 12 cells" in flat
    for name in ("peers_ssp", "peers_untuned"):
        assert json.loads(_read(f"{name}.json"))["command"] in flat


@pytest.mark.parametrize("name", ["peers_ssp", "peers_untuned"])
def test_the_pages_are_rendered_from_their_json(name):
    from vflpriv.bench.peers_report import render

    assert _read(f"{name}.md") == render(json.loads(_read(f"{name}.json"))) + "\n"


def test_the_ten_seed_ssp_comparison_is_its_json():
    doc = json.loads(_read("secure_traffic_flights_eps1.json"))
    S = {s["path"]: s for s in doc["summary"]}
    g = {r["seed"]: r["test_auc"] for r in doc["runs"] if r["path"] == "glm"}
    s = {r["seed"]: r["test_auc"] for r in doc["runs"] if r["path"] == "ssp"}
    d = [s[k] - g[k] for k in g]
    flat = re.sub(r"\s+", " ", _read("vertical.md"))
    assert (f"glm {S['glm']['test_auc']:.3f} ± {S['glm']['test_auc_sd']:.3f}, ssp "
            f"{S['ssp']['test_auc']:.3f} ± {S['ssp']['test_auc_sd']:.3f}, a paired difference of "
            f"{statistics.mean(d):+.3f} (sd {statistics.stdev(d):.3f}, from {min(d):+.3f} to "
            f"{max(d):+.3f})") in flat
    ratio = S["glm"]["framed_bytes"] / S["ssp"]["framed_bytes"]
    assert f"({ratio:.1f}x fewer)" in flat


def test_classification_md_quotes_the_same_figures():
    S = _summary()
    ahead = sum(round(S[(t, "dp-bcfw-secure-ssp", e)], 3) > round(S[(t, "dp-bcfw-secure", e)], 3)
                for t in TABLES for e in (0.5, 1.0, 4.0))
    ten = {s["path"]: s for s in json.loads(_read("secure_traffic_flights_eps1.json"))["summary"]}
    with open(os.path.join(ROOT, "docs", "classification.md")) as fh:
        readme = re.sub(r"\s+", " ", fh.read())
    assert f"ssp is ahead in {ahead} of 18 cells" in re.sub(r"\s+", " ", _read("vertical.md"))
    assert (f"{ten['ssp']['test_auc']:.3f} ± {ten['ssp']['test_auc_sd']:.3f} against "
            f"{ten['glm']['test_auc']:.3f} ± {ten['glm']['test_auc_sd']:.3f} at eps 1") in readme
