"""Byte counts as text: one convention for every command, JSON field and page.

SI decimal units (the International System, as disk and network sizes are quoted):
1 kB = 1000 B, 1 MB = 10^6 B, 1 GB = 10^9 B, 1 TB = 10^12 B.  Binary multiples (KiB, MiB, GiB)
are not used anywhere in vflpriv's output or docs, so a number never appears in two units.  JSON
fields carry plain byte counts (``*_bytes``), never a scaled value.
"""
from __future__ import annotations

UNITS = (("TB", 10 ** 12), ("GB", 10 ** 9), ("MB", 10 ** 6), ("kB", 10 ** 3))


def format_bytes(b, digits: int | None = None) -> str:
    """``b`` bytes as ``"812 B"``, ``"312.5 kB"``, ``"2.3 MB"``, ``"4.44 GB"``: the largest unit
    whose value is at least 1, with one decimal (two from GB on) unless ``digits`` says."""
    b = float(b)
    for unit, size in UNITS:
        if abs(b) >= size:
            d = (2 if size >= 10 ** 9 else 1) if digits is None else digits
            return f"{b / size:.{d}f} {unit}"
    return f"{b:.0f} B"
