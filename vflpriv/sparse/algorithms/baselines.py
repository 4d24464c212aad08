"""The baselines 003 compares FedGradMP with: FedMid and FedDualAvg with the l0 constraint
(Yuan, Zaheer, Reddi 2021, 003's ref. [5]) and FedAvg.

* FedMid: local proximal SGD, which under the indicator of the tau-sparse set is
  ``x <- H_tau(x - gamma g)``; the server takes ``x_{r+1} = H_tau(x_r + eta_s (mean_i x_i - x_r))``.
  With ``server_lr`` eta_s = 1 and the same weights it *is* FedIter-HT (notes P003-13; a test
  checks it); 003 does not say how its two runs differed.
* FedDualAvg: the server keeps a dense dual state z (sent dense both ways); a client's primal
  point is ``H_tau(z)`` (the prox of the l0 indicator, whose scale is irrelevant), its gradient is
  accumulated into z; the server takes ``z <- z + eta_s (mean_i z_i - z)``; the model is H_tau(z).
* FedAvg: local SGD from x_r, the server averages; the model is dense (003 is silent on whether
  its FedAvg thresholds).  Support metrics use H_tau of it.
"""
from __future__ import annotations

import math

from .base import Strategy


def _check_server_lr(v):
    if not (isinstance(v, (int, float)) and v > 0 and math.isfinite(v)):
        raise ValueError(f"server learning rate must be a positive finite number, got {v!r}")
    return float(v)


class FedMid(Strategy):
    name = "fedmid"

    def __init__(self, tau, local_steps=1, server_lr=1.0):
        super().__init__(tau, local_steps)
        self.server_lr = _check_server_lr(server_lr)

    def local(self, ctx, X):
        for _ in range(self.local_steps):
            X = self.ht(X - self.lr * ctx.grad(X))
        return X

    def aggregate(self, state, mean):
        return self.ht(state + self.server_lr * (mean - state))

    def settings(self):
        return {**super().settings(), "server_lr": self.server_lr}


class FedDualAvg(Strategy):
    name = "feddualavg"

    def __init__(self, tau, local_steps=1, server_lr=1.0):
        super().__init__(tau, local_steps)
        self.server_lr = _check_server_lr(server_lr)

    def local(self, ctx, Zd):
        for _ in range(self.local_steps):
            Zd = Zd - self.lr * ctx.grad(self.ht(Zd))
        return Zd

    def aggregate(self, state, mean):
        return state + self.server_lr * (mean - state)

    def model(self, state):
        return self.ht(state)

    def settings(self):
        return {**super().settings(), "server_lr": self.server_lr}


class FedAvg(Strategy):
    name = "fedavg"
    sparse_model = False

    def local(self, ctx, X):
        for _ in range(self.local_steps):
            X = X - self.lr * ctx.grad(X)
        return X

    def aggregate(self, state, mean):
        return mean
