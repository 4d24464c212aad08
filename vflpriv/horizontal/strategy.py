"""The server strategy of a horizontal method (torch-free): what is sent, how replies are
aggregated, what state each side keeps (the shape of Flower's ``Strategy``).

The runtime (:mod:`vflpriv.horizontal.runtime`) owns the round loop: it samples the clients, asks
:meth:`Strategy.configure_train` what to send each of them, serializes and meters the messages, runs
the client's local training with the terms :meth:`Strategy.local_objective` adds to the loss, asks
:meth:`Strategy.client_reply` what the client sends back (and how its state moves), meters that, and
hands the decoded replies to :meth:`Strategy.aggregate_train`.  A strategy sees only what crossed the
wire.  Vectors are flat parameter vectors (the runtime flattens the model in ``named_parameters``
order); they may be torch tensors or numpy arrays, the strategy only uses arithmetic on them.

Local objective of client k in round t (paper 001's shape, notes A.2-A.5)::

    L_k(theta) + <correction_k, theta> + (lambda2_k / 2) ||theta - theta^{t-1}||^2
               + lambda1 ||theta - theta^{t-1}||_1

``correction`` is SCAFFOLD's c - c_k, FedDyn's -g_k, None otherwise.
"""
from __future__ import annotations

from abc import ABC, abstractmethod


def threshold(delta, eps: float):
    """Paper 001's transmission sparsification: zero every entry with |delta_i| <= eps."""
    if eps <= 0:
        return delta
    return delta * (abs(delta) > eps) + 0.0        # + 0.0 turns -0.0 into 0.0


class Strategy(ABC):
    """Base strategy: FedAvg's exchange (theta down, the local update up, weighted mean)."""

    name = "base"
    lambda1 = 0.0
    lambda2 = 0.0
    threshold = 0.0

    # -- server side --------------------------------------------------------------------------
    def initialize(self, theta, sizes) -> None:
        """Server state for a run with client training-set sizes ``sizes`` (public counts)."""
        self.sizes = [int(s) for s in sizes]
        self.m = len(self.sizes)
        self.lost = set()

    def drop_client(self, k: int) -> None:
        """Client k is gone for good (lost on Flower, ``--on-client-loss continue``): it is never
        sampled again.  Weights over "all clients" then mean the remaining ones (FedAvg's
        ``weights="all"``); state the server keeps per client (SCAFFOLD's c, FedDyn's h) keeps
        the lost client's last contribution, as for a client that is not sampled."""
        self.lost.add(int(k))

    def remaining_size(self) -> int:
        """sum of n_k over the clients not lost."""
        return sum(n for k, n in enumerate(self.sizes) if k not in getattr(self, "lost", ()))

    def configure_train(self, theta, k: int) -> list:
        """The vectors sent to client k this round."""
        return [theta]

    @abstractmethod
    def aggregate_train(self, theta, replies: list):
        """The new global model from ``replies`` = [(k, received vectors), ...]."""
        ...

    # -- client side --------------------------------------------------------------------------
    def init_client(self, k: int, zeros) -> dict:
        """Client k's persistent state (``zeros`` is a zero vector of the model's size)."""
        return {}

    def local_objective(self, k: int, state: dict, received: list):
        """``(correction or None, lambda1, lambda2_k)`` for client k's local training."""
        return None, self.lambda1, self.lambda2

    def client_reply(self, k: int, state: dict, received: list, theta_k, steps: int,
                     lr: float) -> list:
        """What client k sends after ``steps`` local steps ended at ``theta_k``; updates ``state``."""
        return [threshold(theta_k - received[0], self.threshold)]

    def settings(self) -> dict:
        return {"lambda1": self.lambda1, "lambda2": self.lambda2, "threshold": self.threshold}
