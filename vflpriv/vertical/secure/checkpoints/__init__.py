"""Checkpoints of dp-bcfw-secure: what a run holds between rounds (``state``), the checks and
ledger replay of a resume (``resume``), and each party's own saves over a link (``saves``)."""
