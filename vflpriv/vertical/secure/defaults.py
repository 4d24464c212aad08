"""Defaults of dp-bcfw-secure chosen by stated rules from public quantities only.

Every rule reads only what is public before the run: the block sizes p_k, the declared bounds
B_a, B_y, the l1 radius eta, the loss and the noise type -- never the data.  Each choice comes back
as a :class:`Chosen` (value and the reason in one sentence), which ``vflpriv run`` prints and the
JSON keeps under ``defaults``; a value the user gave is used as given and not listed.

Row clip (both paths).  Party k's rows have l2 norm between B_a (one entry at the bound) and
B_a sqrt(p_k) (every entry at the bound); where they fall is a property of the data.  The noise of
every release that involves block k grows linearly in C_k, while clipping below a row's norm
shrinks that row's contribution by C_k / ||a_r||: above the data's typical norm a larger C_k only
adds noise, below it the signal-to-noise ratio of a score no longer improves (both shrink
together) but the fit is distorted.  With no data to locate the typical norm, the rule takes the
geometric midpoint of the possible range,

    C_k = B_a p_k^(1/4)   ( = sqrt(B_a * B_a sqrt(p_k)) ),

which is within a factor p_k^(1/4) of the best clip whatever the data's row norms are (the
minimax choice on a log scale).  At p_k = 500, B_a = 1 that is 4.73, where the measured
best on the synthetic benchmark was about 4 (docs/vertical.md).

Selection noise (least squares).  Gumbel noise (report-noisy-max as the exponential mechanism):
for the same accounted epsilon it needs half the Laplace scale (RDP and PLD of the exponential
mechanism against Laplace report-noisy-max, ``vflpriv.vertical.privacy``), so it is the default
of dp-bcfw-secure.  dp-bcfw keeps the paper's Laplace.

Split (least squares).  Half of epsilon for the T K selections, half for the feature releases
(the accountant then rescales both jointly to the target).

Feature cap (least squares).  F = min(10, max_k p_k): a sparse model; each distinct feature costs
one Gaussian release of K - 1 vectors, so F bounds the plan.

Iterations are never changed: T is the user's plan (the selections and, on the logistic path, the
per-round releases are calibrated to it).
"""
from __future__ import annotations

from dataclasses import dataclass

#: the feature cap when none is given (each distinct feature is one Gaussian release)
FEATURE_CAP = 10


@dataclass(frozen=True)
class Chosen:
    name: str
    value: object
    rule: str

    def to_dict(self):
        return {"name": self.name, "value": self.value, "rule": self.rule}


def default_row_clips(feature_bound, block_sizes):
    """C_k = B_a p_k^(1/4), the geometric midpoint of the possible row norms [B_a, B_a sqrt(p_k)]."""
    Ba = float(feature_bound)
    return [Ba * p ** 0.25 for p in block_sizes]


def choose(*, loss, private, feature_bound, block_sizes, rnm=None, split=None,
           max_features=None, row_clip=None, logistic_path=None):
    """Fill the options left at None; returns (values, chosen) where ``values`` has rnm, split,
    max_features and row_clips (a list, or None for "as given": use ``row_clip``) and ``chosen``
    lists the :class:`Chosen` ones with their reasons, the logistic loss's path first when it
    was left to its default (``vflpriv.vertical.config.choose_logistic_path``)."""
    from ..config import choose_logistic_path

    chosen = []
    if logistic_path is None:
        path, rule = choose_logistic_path("dp-bcfw-secure", loss)
        if path is not None:
            chosen.append(Chosen("logistic_path", path, rule))
    glm = loss != "squared"
    if rnm is None:
        rnm = "gumbel"
        if private and not glm:
            chosen.append(Chosen("rnm", rnm, "Gumbel report-noisy-max (the exponential "
                                 "mechanism) needs half the Laplace scale for the same epsilon"))
    if split is None:
        split = 0.5
        if private and not glm:
            chosen.append(Chosen("split", split, "half of epsilon for the selections, half for "
                                 "the feature releases"))
    if max_features is None:
        max_features = min(FEATURE_CAP, max(block_sizes))
        if not glm:
            chosen.append(Chosen("max_features", max_features,
                                 f"min({FEATURE_CAP}, largest block): each distinct feature is "
                                 "one Gaussian release"))
    clips = None
    if row_clip is None and private and feature_bound is not None:
        clips = default_row_clips(feature_bound, block_sizes)
        chosen.append(Chosen("row_clip", [round(c, 4) for c in clips],
                             "B_a p_k^(1/4) per party, the geometric midpoint of the possible "
                             f"row norms B_a..B_a sqrt(p_k) (public: B_a={float(feature_bound):g}, "
                             f"p_k={list(block_sizes)})"))
    return {"rnm": rnm, "split": split, "max_features": max_features, "row_clips": clips}, chosen


def describe(chosen) -> list[str]:
    """One line per choice, for the terminal."""
    return [f"default {c.name} = {_fmt(c.value)}: {c.rule}" for c in chosen]


def _fmt(v):
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, list):
        return "[" + ", ".join(_fmt(x) for x in v) + "]"
    return str(v)

