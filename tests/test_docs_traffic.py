"""docs/vertical.md's Taylor-path table and sentences are docs/secure_traffic.json, written by
`vflpriv bench secure --traffic --epsilons 0.5,1,4 --json docs/secure_traffic.json`."""
import json
import os
import re

from vflpriv.units import format_bytes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load():
    with open(os.path.join(ROOT, "docs", "secure_traffic.json")) as fh:
        doc = json.load(fh)
    with open(os.path.join(ROOT, "docs", "vertical.md")) as fh:
        page = fh.read()
    return doc, page


def test_every_summary_row_is_on_the_page():
    doc, page = _load()
    assert doc["benchmark"] == "secure --traffic" and doc["iterations"] == 200
    for s in doc["summary"]:
        row = (f"| {s['table']} | {s['epsilon']:g} | {s['path']} | {s['test_auc']:.3f} ± "
               f"{s['test_auc_sd']:.3f} | {format_bytes(s['framed_bytes'])} | "
               f"{s['seconds']:.1f} |")
        assert row in page, row


def test_the_ratios_and_differences_quoted_are_the_json():
    doc, page = _load()
    by = {(s["table"], s["epsilon"], s["path"]): s for s in doc["summary"]}

    def ratio(t):
        return by[(t, 4.0, "glm")]["framed_bytes"] / by[(t, 4.0, "taylor")]["framed_bytes"]

    def diff(t, e):
        return by[(t, e, "taylor")]["test_auc"] - by[(t, e, "glm")]["test_auc"]

    m = re.search(r"moves (\d+)x fewer bytes on flights .*?\sand (\d+)x fewer on the synthetic",
                  page, re.S)
    assert m and int(m.group(1)) == round(ratio("flights"))
    assert int(m.group(2)) == round(ratio("synthetic"))
    m = re.search(r"\((-?\d\.\d+) and\s+(-?\d\.\d+)\)\.\s+At eps 1 and 0\.5 it is worse "
                  r"\(flights\s+(-?\d\.\d+)\s+and\s+(-?\d\.\d+);\s+synthetic\s+(-?\d\.\d+)\s+"
                  r"and\s+(-?\d\.\d+)\)", page)
    assert m
    want = [diff("flights", 4.0), diff("synthetic", 4.0), diff("flights", 1.0),
            diff("flights", 0.5), diff("synthetic", 1.0), diff("synthetic", 0.5)]
    assert [float(g) for g in m.groups()] == [round(w, 3) + 0.0 for w in want]


def test_the_ten_seed_comparison_is_its_json():
    """The ten-seed eps 1 comparison on flights: docs/secure_traffic_flights_eps1.json."""
    import statistics

    with open(os.path.join(ROOT, "docs", "secure_traffic_flights_eps1.json")) as fh:
        doc = json.load(fh)
    page = re.sub(r"\s+", " ", _load()[1])
    assert doc["seeds"] == list(range(10)) and doc["epsilons"] == [1.0]
    S = {s["path"]: s for s in doc["summary"]}
    g = {r["seed"]: r["test_auc"] for r in doc["runs"] if r["path"] == "glm"}
    t = {r["seed"]: r["test_auc"] for r in doc["runs"] if r["path"] == "taylor"}
    d = [t[s] - g[s] for s in g]
    assert (f"glm {S['glm']['test_auc']:.3f} ± {S['glm']['test_auc_sd']:.3f}, taylor "
            f"{S['taylor']['test_auc']:.3f} ± {S['taylor']['test_auc_sd']:.3f}, a paired "
            f"difference of {statistics.mean(d):.3f} (sd {statistics.stdev(d):.3f}, from "
            f"{min(d):.3f} to {max(d):+.3f})") in page
