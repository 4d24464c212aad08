"""A trained vertical model split among its parties, and scoring new rows with it.

    write_split_model(DIR, ...)        # vflpriv run --model-out DIR
    model = read_split_model(DIR)
    scores, report = predict_from_tables(model, tables)   # PSI, then the secure sum

Each party's file holds only its own coefficients (:mod:`.files`); scoring aligns the new rows
privately (:mod:`vflpriv.align`) and sums the partial margins securely at the label party
(:mod:`.scoring`).
"""
from __future__ import annotations

from .files import SplitModel, check_model_out, read_split_model, write_split_model


def predict_from_tables(model, tables, *, workers=None) -> dict:
    """Score the rows common to ``tables`` (one :class:`~vflpriv.align.PartyTable` per party,
    read with the model's columns): PSI led by the label party, then the secure sum.  Returns
    the JSON object of ``vflpriv predict``: ``ids`` and ``scores`` in the label party's order,
    ``probabilities`` (logistic loss), ``alignment`` and ``scoring`` (bytes, seconds)."""
    import numpy as np

    from ..align import align, aligned_ids
    from .scoring import secure_scores

    al = align(tables, leader=model.label_party, workers=workers)
    blocks = [t.X[al.rows[k]] for k, t in enumerate(tables)]
    scores, report = secure_scores(blocks, model)
    out = {"ids": aligned_ids(tables, al), "scores": [float(s) for s in scores]}
    if model.loss == "logistic":
        out["probabilities"] = [float(p) for p in 1.0 / (1.0 + np.exp(-scores))]
    out["alignment"], out["scoring"] = al.report(), report
    return out


__all__ = ["SplitModel", "check_model_out", "predict_from_tables", "read_split_model",
           "write_split_model"]
