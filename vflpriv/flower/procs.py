"""Processes a deployment starts: whether one still runs (shared by ``deploy`` and ``netns``)."""
from __future__ import annotations


def alive(pid) -> bool:
    """A process that still runs (a zombie left for its parent to reap counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False
