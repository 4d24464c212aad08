"""Fed-HT, FedIter-HT and Distributed-IHT (paper 000, Algorithms 1, 2 and A1).

Every client starts from the broadcast tau-sparse x_t and takes K local minibatch SGD steps
``x <- x - gamma grad f_{I}(x)`` (Fed-HT: plain, so the reply is dense) or
``x <- H_tau(x - gamma grad f_{I}(x))`` (FedIter-HT: the reply is tau-sparse).  The server keeps
``x_{t+1} = H_tau(sum_i p_i x_i)``.  Distributed-IHT is Fed-HT with K = 1 (one dense SGD step per
round), which is also centralized minibatch SGD-HT.

Decisions: K steps from x_{t,0} = x_t (P000-1, the prose and proofs, not the listings' K - 1);
constant step gamma (P000-5); the algorithm as listed, with the full gradient g in the local step
(P000-10, not the proof's projected gradient).
"""
from __future__ import annotations

from .base import Strategy


class FedHT(Strategy):
    name = "fedht"
    iterative = False

    def local(self, ctx, X):
        for _ in range(self.local_steps):
            X = X - self.lr * ctx.grad(X)
            if self.iterative:
                X = self.ht(X)
        return X

    def aggregate(self, state, mean):
        return self.ht(mean)


class FedIterHT(FedHT):
    name = "fediterht"
    iterative = True


class DistributedIHT(FedHT):
    name = "diht"

    def __init__(self, tau, local_steps=1):
        if local_steps != 1:
            raise ValueError(f"Distributed-IHT takes one local step per round; --local-steps "
                             f"must be 1, got {local_steps!r}")
        super().__init__(tau, 1)
