"""docs/vertical.md's projected-gradient table is docs/peers_pgd.json, written by
`vflpriv bench peers --tables flights,caravan,default,oj --systems dp-bcfw-secure,
dp-bcfw-secure-pgd --json docs/peers_pgd.json --markdown docs/peers_pgd.md`, and peers_pgd.md
is what that command renders from it."""
import json
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _read(name):
    with open(os.path.join(ROOT, "docs", name)) as fh:
        return fh.read()


def test_the_table_and_the_count_are_the_json():
    doc = json.loads(_read("peers_pgd.json"))
    page = re.sub(r"\s+", " ", _read("vertical.md"))
    S = {(s["table"], s["system"], s["epsilon"]): s for s in doc["summary"]}
    better = total = 0
    for t in doc["settings"]["tables"]:
        for e in sorted({s["epsilon"] for s in doc["summary"]}):
            a, b = S[(t, "dp-bcfw-secure", e)], S[(t, "dp-bcfw-secure-pgd", e)]
            d = b["test_auc"] - a["test_auc"]
            total, better = total + 1, better + (d > 0)
            row = (f"| {t} | {e:g} | {a['test_auc']:.3f} ± {a['test_auc_sd']:.3f} | "
                   f"{b['test_auc']:.3f} ± {b['test_auc_sd']:.3f} | {d:+.3f} |")
            assert row in page, row
    assert f"ahead in {better} of {total} cells" in page
    assert doc["command"] in page


def test_peers_pgd_md_is_rendered_from_its_json():
    from vflpriv.bench.peers_report import render

    assert _read("peers_pgd.md") == render(json.loads(_read("peers_pgd.json"))) + "\n"


def test_classification_md_quotes_the_same_count():
    doc = json.loads(_read("peers_pgd.json"))
    S = {(s["table"], s["system"], s["epsilon"]): s["test_auc"] for s in doc["summary"]}
    cells = [(t, e) for (t, sys_, e) in S if sys_ == "dp-bcfw-secure"]
    better = sum(S[(t, "dp-bcfw-secure-pgd", e)] > S[(t, "dp-bcfw-secure", e)] for t, e in cells)
    with open(os.path.join(ROOT, "docs", "classification.md")) as fh:
        readme = re.sub(r"\s+", " ", fh.read())
    assert f"ahead on {better} of {len(cells)} held-out table and epsilon cells" in readme
