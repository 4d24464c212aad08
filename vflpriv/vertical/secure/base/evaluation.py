"""The objective of a run from its public picks, for evaluation only (the server of a deployment
never holds A): least squares' and the glm path's Frank-Wolfe iterates."""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp


class Evaluation:
    """f(x^t) on the data as given, from the rounds' picks (evaluation only: the server of a
    deployment never holds A; :func:`replay_objective` recomputes it): ||A x - y||^2 / 2n, or
    the mean of ``loss.value`` when a loss is given (the logistic path)."""

    def __init__(self, data, loss=None):
        self.data, self.loss, self.A = data, loss, sp.csc_matrix(data.A)
        self.u = np.zeros(data.n)

    def advance(self, sel, gamma, intercept=0.0):
        """f at the iterate after the moves ``sel`` and with the intercept ``intercept``."""
        self.u *= 1.0 - gamma
        A = self.A
        for _, g, step in sel:
            lo, hi = A.indptr[g], A.indptr[g + 1]
            self.u[A.indices[lo:hi]] += step * A.data[lo:hi]
        if self.loss is not None:
            return float(np.mean(self.loss.value(self.u + intercept, self.data.y)))
        r = self.u + intercept - self.data.y
        return float(0.5 * np.mean(r * r))


def fw_step(x, blocks, picks, gamma, eta):
    """The Frank-Wolfe move of every party: x <- (1 - gamma) x + gamma eta sign e_i for each
    party's pick (i local to its block).  Returns (selections, moves) in global indices."""
    x *= 1.0 - gamma
    sel, moves = [], []
    for l, (i, sign) in enumerate(picks):
        g = int(blocks[l][i])
        step = gamma * eta * sign
        x[g] += step
        sel.append((l, g, sign))
        moves.append((l, g, step))
    return sel, moves


def replay_objective(data, eta, selections, intercepts=None):
    """The objective history of a run known by its selections (gamma_t = 2 / (t + 2)) and,
    with an intercept, b after every round."""
    ev = Evaluation(data)
    return [ev.advance([(l, g, 2.0 / (t + 2.0) * eta * sign) for l, g, sign in sel],
                       2.0 / (t + 2.0), 0.0 if intercepts is None else float(intercepts[t]))
            for t, sel in enumerate(selections)]
