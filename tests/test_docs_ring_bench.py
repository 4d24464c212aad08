"""docs/kernels.md, "Ring products over Z/2^64": every table row is docs/ring_bench.json or
docs/ring_bench_threshold.json (``vflpriv bench ring --json ...``), formatted as printed; the
constants the section quotes are the kernel's."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from vflpriv.kernels import ring_matmul as R

DOCS = Path(__file__).resolve().parent.parent / "docs"


def _section():
    page = (DOCS / "kernels.md").read_text()
    return page[page.index("## Ring products over Z/2^64"):]


def _rows(doc, only_gram=False):
    for r in [] if only_gram else doc["vecmat"]:
        c = r["cpu_seconds"]
        yield (f"| {r['n']} | {r['p']} | {c['numpy_einsum'] * 1e3:.2f} | "
               f"{c['numpy_matmul'] * 1e3:.2f} | {c['ring_vecmat'] * 1e3:.2f} | "
               f"{c['limbs'] * 1e3:.2f} | {c['one_pass_over_M'] * 1e3:.2f} |")
    for r in [] if only_gram else doc["sparse"]:
        c = r["cpu_seconds"]
        yield (f"| {r['n']} | {r['p']} | {r['nnz']} | {c['scipy'] * 1e3:.2f} | "
               f"{c['ring_spmatmul'] * 1e3:.2f} |")
    for r in doc["gram"]:
        c, timed = r["cpu_seconds"], r["numpy_rows_timed"]
        star = {k: "*" if timed[k] < r["n"] else "" for k in timed}
        yield (f"| {r['n']} | {r['p']} x {r['q']} | {c['ring_matmul']:.3f} | {c['limbs']:.3f} | "
               f"{c['numpy_einsum']:.3f}{star['numpy_einsum']} | "
               f"{c['numpy_matmul']:.2f}{star['numpy_matmul']} | "
               f"{c['numpy_einsum'] / c['limbs']:.2f} | "
               f"{c['numpy_matmul'] / c['ring_matmul']:.1f} |")


@pytest.mark.parametrize("name", ["ring_bench.json", "ring_bench_threshold.json"])
def test_every_row_is_the_json(name):
    # the threshold run's Gram table only (its vector and sparse cases are not quoted)
    doc = json.loads((DOCS / name).read_text())
    lines = set(_section().splitlines())
    missing = [row for row in _rows(doc, only_gram="threshold" in name) if row not in lines]
    assert not missing, f"rows of {name} not in docs/kernels.md: {missing}"


def test_the_quoted_constants_are_the_kernels():
    text = " ".join(_section().split())
    assert f"`max_chunk()` = {R.max_chunk()} rows" in text
    assert f"`BLAS_MIN` = {R.BLAS_MIN} rows" in text
    assert "offsets 0, 22, 43" in text and tuple(R.LIMB_OFFSETS) == (0, 22, 43)
    doc = json.loads((DOCS / "ring_bench.json").read_text())
    assert doc["chunk"] == R.max_chunk() and doc["blas_min"] == R.BLAS_MIN


def test_the_torch_table_is_its_json():
    doc = json.loads((DOCS / "ring_bench_torch.json").read_text())
    lines = set(_section().splitlines())
    for r in doc["gram"]:
        c, timed = r["cpu_seconds"], r["numpy_rows_timed"]
        star = "*" if timed["numpy_einsum"] < r["n"] else ""
        row = (f"| {r['n']} | {r['p']} x {r['q']} | {c['torch']:.3f} | {c['limbs']:.3f} | "
               f"{c['numpy_einsum']:.3f}{star} | {c['limbs'] / c['torch']:.2f} |")
        assert row in lines, row
