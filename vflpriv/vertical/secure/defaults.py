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
           max_features=None, row_clip=None, logistic_path=None, selects=None):
    """Fill the options left at None; returns (values, chosen) where ``values`` has rnm, split,
    max_features and row_clips (a list, or None for "as given": use ``row_clip``) and ``chosen``
    lists the :class:`Chosen` ones with their reasons, the logistic loss's path first when it
    was left to its default (``vflpriv.vertical.config.choose_logistic_path``).  ``selects``:
    whether the run's path selects features (the Frank-Wolfe rounds of least squares), which
    alone reads rnm, split and the feature cap (None: the squared loss's rounds)."""
    from ..config import choose_logistic_path

    chosen = []
    if logistic_path is None:
        path, rule = choose_logistic_path("dp-bcfw-secure", loss)
        if path is not None:
            chosen.append(Chosen("logistic_path", path, rule))
    # rnm, split and the feature cap are listed only where a path selects features with them
    selects = (loss == "squared") if selects is None else bool(selects)
    if rnm is None:
        rnm = "gumbel"
        if private and selects:
            chosen.append(Chosen("rnm", rnm, "Gumbel report-noisy-max (the exponential "
                                 "mechanism) needs half the Laplace scale for the same epsilon"))
    if split is None:
        split = 0.5
        if private and selects:
            chosen.append(Chosen("split", split, "half of epsilon for the selections, half for "
                                 "the feature releases"))
    if max_features is None:
        max_features = min(FEATURE_CAP, max(block_sizes))
        if selects:
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



#: the most columns the squared loss's one-shot release is chosen for: its statistics are
#: d (d + 1) / 2 numbers, and until block products (issue 55) the release moves words of order
#: n d^2 (about 200 s of CPU and 6.5 GB at n = 1e5, d = 2000 on this machine)
SSP_MAX_COLUMNS = 2000

#: how far the rows' curvature per column must stand above the release's largest noise entry
#: (``choose_squared_path``): set from the runs that made it, diabetes at eps 1 (ratio 2.2,
#: the fit far worse than x = 0) and the synthetic n = 1e5, d = 2000 case at eps 4 (ratio 4.9,
#: 91% of the gap removed); not validated on tables it was not set on
SSP_MARGIN = 4.0


def squared_rule_numbers(cfg, shape, label_party=0, row_clips=None):
    """``(signal, noise, a, sigma)`` of :func:`choose_squared_path` from public quantities:
    n, d, the block sizes, the declared bounds, the row clips (``row_clips``, else
    ``cfg.row_clip`` or :func:`default_row_clips`), the l1 radius ``cfg.eta`` and the budget."""
    from .privacy import row_clips as given_clips
    from .ssp import release as S
    from .ssp.solve import _Plan

    sizes = [len(b) for b in shape.blocks]
    n, d = int(shape.n), sum(sizes)
    Ba = float(cfg.feature_bound)
    clips = row_clips or (given_clips(Ba, cfg.row_clip, sizes) if cfg.row_clip is not None
                          else default_row_clips(Ba, sizes))
    # the release's own plan, as the run would settle it (the same share, scale and sigma)
    plan = _Plan.public(n, sizes, cfg, clips, 0 if label_party is None else int(label_party),
                        least_squares=True)
    a, sigma = plan.share, plan.sigma
    return n * a / d, S.noise_entry(sigma, d), a, sigma


def choose_squared_path(cfg, shape, label_party=0, row_clips=None):
    """``(squared_path, rule)``: the path dp-bcfw-secure's squared loss takes when
    ``squared_path`` is not given ("ssp", or "fw": the Frank-Wolfe rounds), by a public rule.

    The one release fits least squares over the run's l1 balls from noisy moments; over a ball
    of l1 radius W the noise moves the fitted objective by at most W^2 max |E_ij| (module
    ``ssp/release.py``, docs/sensitivity.md 4.10.1).  It is taken when the scaled rows' largest
    curvature per column, n a / d (a the features' squared norm bound, ``release.
    squared_share``; rows at their norm bound), is at least :data:`SSP_MARGIN` times the largest
    noise entry expected, sigma sqrt(2 ln(d (d + 1) / 2)): d against n and epsilon.  Measured
    (docs/vertical.md, "The squared loss's one release"): the synthetic d = 2000, K = 4 case
    (eta 1), n = 1e5 at eps 4 (ratio 4.9) removed 91% of the gap against the rounds' 81-87%; at
    eps 1 (ratio 1.4) 61% against 22%, but n = 1e4 at eps 4 (ratio 0.49) and diabetes at eps 1
    (ratio 2.2; its rows far inside their bound) made the objective worse than x = 0.  Without noise, with the label
    at every party, with an option only the rounds read (a checkpoint, rnm, split, the feature
    cap), or above :data:`SSP_MAX_COLUMNS` columns, the rounds."""
    if not cfg.private:
        return "fw", ("without noise the rounds reveal only the selected features' "
                           "cross-products, where one release would reveal every moment "
                           "exactly")
    if label_party is None:
        return "fw", "every party holds the label: the one release keeps it at one party"
    rounds_only = [name for name, v in (("checkpoint", cfg.checkpoint), ("rnm", cfg.rnm),
                                        ("split", cfg.split), ("max_features", cfg.max_features))
                   if v is not None]
    if rounds_only:
        return "fw", (f"the run asks for {', '.join(rounds_only)}, which only the Frank-Wolfe "
                      f"rounds read")
    d = sum(len(b) for b in shape.blocks)
    if d > SSP_MAX_COLUMNS:
        return "fw", (f"d = {d} is above {SSP_MAX_COLUMNS}: the one release's cost grows "
                           f"with d^2 (--squared-path ssp to take it anyway)")
    from ...errors import InputError

    try:
        signal, noise, a, sigma = squared_rule_numbers(cfg, shape, label_party, row_clips)
    except InputError as exc:
        # a release whose noise cannot even be sized (the ring's range, a budget no sigma
        # meets): the rounds, whose own checks name the bad value
        return "fw", f"one release's noise cannot be sized here ({exc})"
    if signal >= SSP_MARGIN * noise:
        return "ssp", (f"the moments released once (n a / d = {signal:.3g} is at least "
                       f"{SSP_MARGIN:g} times the largest noise entry {noise:.3g}; a = {a:.3g}, "
                       f"sigma = {sigma:.3g}; --squared-path fw for the Frank-Wolfe rounds)")
    return "fw", (f"the Frank-Wolfe rounds (the rows' curvature per column n a / d = "
                  f"{signal:.3g} is below {SSP_MARGIN:g} times one release's largest noise "
                  f"entry {noise:.3g}; --squared-path ssp to take it anyway)")
