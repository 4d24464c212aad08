"""docs/gram_release.md: every table row is its JSON (docs/gram_bar.json, docs/gram_bench.json,
docs/gram_bench_spu.json, docs/gram_bench_spu_1e5.json), formatted as the page prints it; the bar's runs released the same
model; bytes per party grow linearly in d at fixed n."""
from __future__ import annotations

import json
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs"


def _json(name):
    return json.loads((DOCS / name).read_text())


def _lines():
    return set((DOCS / "gram_release.md").read_text().splitlines())


def bar_rows(doc):
    for r in doc["runs"]:
        yield (f"| {r['protocol']} | {r['kernel']} | "
               f"{r['user_seconds'] + r['system_seconds']:.1f} | {r['wall_seconds']:.0f} | "
               f"{r['sent_bytes'] / 1e9:.2f} | {r['peak_rss_bytes'] / 1e9:.2f} | "
               f"{r['training_auc']:.4f} |")


def grid_rows(doc):
    for r in doc["rows"]:
        if r["system"] != "vflpriv ssp":
            continue
        yield (f"| {r['n']} | {r['d']} | {max(r['uplink_bytes_per_party']) / 1e6:.1f} | "
               f"{r['sent_bytes'] / 1e6:.1f} | {r['cpu_seconds']:.1f} | "
               f"{r['peak_rss_bytes'] / 1e6:.0f} | {r['test_auc']:.4f} |")


def spu_rows(doc):
    ours = {(r["n"], r["d"]): r for r in doc["rows"] if r["system"] == "vflpriv ssp"}
    for r in doc["rows"]:
        if r["system"] == "vflpriv ssp":
            continue
        o = ours[(r["n"], r["d"])]
        if r.get("rc"):
            yield f"| {r['n']} | {r['d']} | did not run | | | {o['sent_bytes'] / 1e6:.1f} | " \
                  f"{o['cpu_seconds']:.1f} |"
            continue
        yield (f"| {r['n']} | {r['d']} | {r['sent_bytes'] / 1e6:.1f} | {r['cpu_seconds']:.1f} | "
               f"{r['peak_rss_bytes'] / 1e6:.0f} | {o['sent_bytes'] / 1e6:.1f} | "
               f"{o['cpu_seconds']:.1f} |")


def test_every_row_is_its_json():
    lines = _lines()
    for name, rows in (("gram_bar.json", bar_rows), ("gram_bench.json", grid_rows),
                       ("gram_bench_spu.json", spu_rows), ("gram_bench_spu_1e5.json", spu_rows)):
        missing = [row for row in rows(_json(name)) if row not in lines]
        assert not missing, f"rows of {name} not in docs/gram_release.md: {missing}"


def test_the_bar_runs_released_the_same_model():
    runs = _json("gram_bar.json")["runs"]
    assert len({(r["training_auc"], r["objective"]) for r in runs}) == 1


def test_bytes_per_party_grow_linearly_in_d():
    """At the bar's n = 1e5 the largest party's uplink per column is within 5% from d = 200 to
    2000; at every n it is its block once (8 bytes per entry of its 0.8 n rows and d / 4 + 1
    columns at most) plus its parts, at most 2 x 8 (d / 4 + 1) d bytes (the O(d^2) term: q_k q_l
    words per block it contributes to, its own columns' blocks and, as a helper, those of the
    party below it), and 1% of framing."""
    rows = [r for r in _json("gram_bench.json")["rows"] if r["system"] == "vflpriv ssp"]
    for r in rows:
        m, q = r["n"] - round(0.2 * r["n"]), -(-r["d"] // 4) + 1
        up = max(r["uplink_bytes_per_party"])
        assert 8 * m * q <= up <= 1.01 * (8 * m * q + 2 * 8 * q * r["d"]), r
    by_d = {r["d"]: max(r["uplink_bytes_per_party"]) for r in rows if r["n"] == 100000}
    per_col = [by_d[d] / d for d in (200, 800, 2000)]
    assert max(per_col) / min(per_col) < 1.05, per_col
