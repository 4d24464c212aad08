"""FedDyn and FedElasticNet for FedDyn (paper 001, Algorithm 3; notes A.5).

Client state g_k (zero at start; the paper's "grad L_k(theta_k)").  Client k minimizes
L_k(theta) - <g_k, theta> + (lambda2_k/2)||theta - theta^{t-1}||^2 + lambda1 ||theta - theta^{t-1}||_1,
sends Delta_hat_k = threshold_eps(theta_k - theta^{t-1}) and sets
g_k <- g_k - lambda2_k Delta_hat_k - lambda1 sign(Delta_hat_k).  The server recovers sign(Delta_hat_k)
from what it received (no extra uplink) and keeps h:
h <- h - (1/m) sum_{P_t} (lambda2_k Delta_hat_k + lambda1 sign(Delta_hat_k)),
theta^t = theta^{t-1} + mean_{P_t} Delta_hat_k - h / lambda2.

Client and server use the same thresholded Delta_hat and sign(0) = 0, so h = (1/m) sum_k g_k holds
exactly in exact arithmetic (Lemma B.2; notes A.11 items 5-7).  lambda2_k = lambda2 n_bar / n_k, FedDyn's
"adaptive alpha" for unbalanced clients (= lambda2 when balanced).  For unbalanced clients FedDyn's code
adds mean_k H_k (H_k = sum of client k's updates) on the server instead of -h / lambda2 =
mean_k (lambda2_k / lambda2) H_k; the two agree when clients are balanced (this module follows the
paper's h, which keeps the Lemma B.2 invariant).  FedDyn is lambda1 = 0, no threshold; it sends the
update Delta rather than theta_k (the same information for the server; paper 001 reports both).
"""
from __future__ import annotations

from .strategy import Strategy, threshold


def _sign(v):
    return v.sign() if hasattr(v, "sign") and callable(v.sign) else (v > 0) * 1.0 - (v < 0) * 1.0


class FedDyn(Strategy):
    name = "feddyn"

    def __init__(self, lambda2: float = 0.05, lambda1: float = 0.0, threshold: float = 0.0):
        if not lambda2 > 0:
            raise ValueError(f"FedDyn needs lambda2 > 0, got {lambda2!r}")
        self.lambda1, self.lambda2, self.threshold = lambda1, lambda2, threshold

    def initialize(self, theta, sizes):
        super().initialize(theta, sizes)
        self.h = theta * 0
        self.n_bar = sum(self.sizes) / self.m

    def lambda2_k(self, k: int) -> float:
        return self.lambda2 * self.n_bar / self.sizes[k]

    def init_client(self, k, zeros):
        return {"g": zeros.clone() if hasattr(zeros, "clone") else zeros.copy()}

    def local_objective(self, k, state, received):
        return -state["g"], self.lambda1, self.lambda2_k(k)

    def client_reply(self, k, state, received, theta_k, steps, lr):
        delta = threshold(theta_k - received[0], self.threshold)
        state["g"] = state["g"] - self.lambda2_k(k) * delta - self.lambda1 * _sign(delta)
        return [delta]

    def aggregate_train(self, theta, replies):
        if not replies:
            return theta
        self.h = self.h - sum(self.lambda2_k(k) * r[0] + self.lambda1 * _sign(r[0])
                              for k, r in replies) / self.m
        return theta + sum(r[0] for _, r in replies) / len(replies) - self.h / self.lambda2
