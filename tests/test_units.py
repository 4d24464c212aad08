"""One byte-unit convention (SI: kB, MB, GB; vflpriv/units.py) in every output and page."""
import glob
import os
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vflpriv.units import format_bytes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("b,text", [(0, "0 B"), (999, "999 B"), (1000, "1.0 kB"),
                                    (312_500, "312.5 kB"), (2_300_000, "2.3 MB"),
                                    (4_440_000_000, "4.44 GB"), (2 ** 31, "2.15 GB"),
                                    (3 * 10 ** 12, "3.00 TB")])
def test_known_values(b, text):
    assert format_bytes(b) == text


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10 ** 15))
def test_the_printed_value_times_its_unit_is_the_count(b):
    """Reading the text back gives b to within the printed precision (half a unit in the last
    place), and the value printed is in [1, 1000) of its unit (below 1 kB: bytes)."""
    num, unit = format_bytes(b).split()
    size = {"B": 1, "kB": 10 ** 3, "MB": 10 ** 6, "GB": 10 ** 9, "TB": 10 ** 12}[unit]
    decimals = len(num.split(".")[1]) if "." in num else 0
    assert abs(float(num) * size - b) <= 0.5 * 10 ** -decimals * size + 1e-9 * b
    if unit != "B":
        assert 1 <= b / size < 1000 or unit == "TB"


def _pages():
    return [os.path.join(ROOT, "README.md"), os.path.join(ROOT, "datasets", "README.md")] + \
        sorted(glob.glob(os.path.join(ROOT, "docs", "*.md"))) + \
        sorted(glob.glob(os.path.join(ROOT, "docs", "tutorials", "*.md")))


#: a number followed by a binary or upper-case-K unit; numpy's own error text is quoted as is
_OTHER = re.compile(r"\d\s?(KiB|MiB|GiB|TiB|KB)\b")


def test_pages_use_si_units_only():
    bad = []
    for path in _pages():
        with open(path) as fh:
            for i, line in enumerate(fh, 1):
                for m in _OTHER.finditer(line):
                    if "Unable to allocate" not in line:
                        bad.append(f"{os.path.relpath(path, ROOT)}:{i}: {m.group(0)}")
    assert not bad, bad


def test_code_prints_bytes_through_format_bytes():
    """No f-string in vflpriv prints a byte count divided by 2**10 / 2**20 / 2**30 or labelled
    with a binary unit: byte counts go through format_bytes."""
    bad = []
    for path in glob.glob(os.path.join(ROOT, "vflpriv", "**", "*.py"), recursive=True):
        with open(path) as fh:
            for i, line in enumerate(fh, 1):
                if line.lstrip().startswith("#"):
                    continue
                if re.search(r"f[\"'].*(KiB|MiB|GiB| KB\b)", line) or \
                        re.search(r"f[\"'].*/ ?2 ?\*\* ?(10|20|30)", line):
                    bad.append(f"{os.path.relpath(path, ROOT)}:{i}")
    assert not bad, bad
