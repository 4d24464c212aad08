"""dp-bcfw-secure's Taylor path for the logistic loss (``logistic_path="taylor"``).

With labels y in {-1, +1}, the logistic loss's second-order expansion at the margin z = 0 is

    log(1 + exp(-y z)) ~= log 2 - y z / 2 + z^2 / 8 = (1/8) (z - 2 y)^2 + log 2 - 1/2,

so minimizing its mean over the l1 balls is least squares with the labels 2y (up to the factor
1/4, which moves no Frank-Wolfe vertex).  This path runs exactly the least-squares protocol
(``protocol.py``, ``loop.py``: cross-products released once per new feature, the label's
product A_k^T (2y) once, the intercept from the noisy sums once) on the labels 2y with the label
bound 2 B_y, so its privacy argument is that of least squares (docs/sensitivity.md, section 4),
with no helper party: no party beside the label party ever holds a share of anything derived
from y.  What it gives up is the sigmoid: the expansion is exact only at z = 0 (its error grows
as |z|^3 / 48 away from it), which is why the model is evaluated, and its objective history
reported, with the true logistic loss.  Traffic: the offline phase's masked blocks and one
product per new feature, instead of the sigmoid's masked factors every round
(``vflpriv bench secure --traffic``; docs/vertical.md).
"""
from __future__ import annotations

import copy
import dataclasses

import numpy as np

from ...errors import InputError


def solve_taylor(data, run, least_squares, settle):
    """The Solution of ``run`` (a logistic SecureRun) fitted by ``least_squares`` (solve.py's
    least-squares path) on the labels 2y, settled again by ``settle`` as least squares (its
    defaults and checkpoint are least squares'); its objective history is the logistic loss's."""
    from ...optim.losses import get_loss

    y = np.asarray(data.y, dtype=np.float64)
    if not np.all(np.abs(y) == 1.0):
        bad = y[np.abs(y) != 1.0][0]
        raise InputError(f"logistic_path 'taylor' expands the loss for labels in {{-1, +1}}; "
                         f"the label party's labels include {bad!r}")
    cfg = run.cfg
    ls_cfg = dataclasses.replace(
        cfg, loss="squared", logistic_path=None, reference=False,
        label_bound=None if cfg.label_bound is None else 2.0 * float(cfg.label_bound))
    ls_data = copy.copy(data)
    ls_data.y = 2.0 * y
    ls_run = settle(ls_data, ls_cfg, get_loss("squared"), run.label_party)
    sol = least_squares(ls_data, ls_run)
    if not hasattr(sol, "x"):                   # flower.spec_dir: the description was written
        return sol
    sol.objective, sol.initial_objective = _logistic_history(data, sol, float(cfg.eta))
    sol.extra.update(path="taylor", sigmoid={"kind": "taylor", "degree": 2, "at": 0.0,
                                            "labels": "2y", "label_bound": ls_cfg.label_bound})
    if cfg.reference:
        from ..solution import reference_for

        sol.reference = reference_for(data, cfg)
    return sol


def _logistic_history(data, sol, eta):
    """f(x_t, b_t) = mean log(1 + exp(-y (A x_t + b_t))) after every round, replayed from the
    selections (gamma_t = 2 / (t + 2)) and the intercepts."""
    from ...optim.losses import get_loss
    from .protocol import Evaluation

    ev = Evaluation(data, loss=get_loss("logistic"))
    bs = sol.extra.get("intercepts")
    out = []
    for t, sel in enumerate(sol.extra["selections"]):
        gamma = 2.0 / (t + 2.0)
        moves = [(l, g, gamma * eta * sign) for l, g, sign in sel]
        out.append(ev.advance(moves, gamma, 0.0 if bs is None else float(bs[t])))
    return out, float(np.log(2.0))
