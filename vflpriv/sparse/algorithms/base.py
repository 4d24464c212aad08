"""The strategy interface of the sparse methods (Flower's Strategy, reduced to what they need).

A strategy says what the server broadcasts, what a client computes from it and sends back, and how
the server turns the weighted mean of the replies into its new state; the round loop
(:func:`vflpriv.sparse.runtime.run`) does sampling, messages, metering, privacy and metrics.

* ``init_state(d)``        the server state at round 0 (x_0 = 0 for every method: both papers)
* ``broadcast(state)``     the vector sent to each participant (a tau-sparse model, or FedDualAvg's
                           dense dual state)
* ``local(ctx, start)``    start: (L, d), one row per participant; returns the (L, d) replies.
                           Gradients come from ``ctx.grad`` (minibatch, private when the run is)
* ``aggregate(state, m)``  m = the weighted mean of the replies; returns the new state
* ``model(state)``         the model the metrics are computed on
"""
from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from ..ops import hard_threshold


def check_tau(tau, d=None):
    if isinstance(tau, bool) or not isinstance(tau, (int, np.integer)) or tau < 1:
        raise ValueError(f"--tau must be an integer >= 1, got {tau!r}")
    if d is not None and tau > d:
        raise ValueError(f"--tau must be at most the dimension d={d}, got {tau}")
    return int(tau)


def check_steps(k):
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"--local-steps must be an integer >= 1, got {k!r}")
    return int(k)


class Strategy(ABC):
    name = "strategy"
    #: needs a step size (None -> the runtime's data-driven default)
    needs_lr = True
    #: the reported model is tau-sparse (else support metrics use H_tau of it)
    sparse_model = True
    #: may run record-level private (its clients touch the data only through ctx.grad)
    record_private = True
    lr = None
    #: number of blocks thresholded separately (softmax: one per class; set by the runtime)
    blocks = 1

    def __init__(self, tau, local_steps=1):
        self.tau = check_tau(tau)
        self.local_steps = check_steps(local_steps)

    def ht(self, X):
        """H_tau of every row of X, per block (per class for softmax: tau per class)."""
        if self.blocks == 1:
            return hard_threshold(X, self.tau)
        X = np.asarray(X, dtype=float)
        d = X.shape[-1] // self.blocks
        return hard_threshold(X.reshape(-1, d), self.tau).reshape(X.shape)

    def init_state(self, d):
        return np.zeros(d)

    def broadcast(self, state):
        return state

    @abstractmethod
    def local(self, ctx, start):
        ...

    @abstractmethod
    def aggregate(self, state, mean):
        ...

    def model(self, state):
        return state

    def settings(self) -> dict:
        return {"tau": self.tau, "local_steps": self.local_steps}
