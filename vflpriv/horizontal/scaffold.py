"""SCAFFOLD and FedElasticNet for SCAFFOLD (paper 001, Algorithm 2; notes A.4).

Server state c (zero at start), client state c_k (zero at start).  Round t: the server sends
theta^{t-1} and c^{t-1}; client k runs B local steps with direction
grad l_k + (c^{t-1} - c_k) + lambda2 (theta - theta^{t-1}) + lambda1 sign(theta - theta^{t-1}), then
(option II) c_k^+ = c_k - c + (theta^{t-1} - theta_k) / (B eta_l) and sends
Delta_hat = threshold_eps(theta_k - theta^{t-1}) and Delta c_k = c_k^+ - c_k (the threshold is on
Delta only; Delta c travels as it is, notes A.11 item 5).  Server:
theta^t = theta^{t-1} + (eta_g / |P_t|) sum Delta_hat_k,  c^t = c^{t-1} + (1/m) sum Delta c_k,
which keeps c = (1/m) sum_k c_k.  SCAFFOLD is lambda1 = lambda2 = 0, no threshold; eta_g = 1.
"""
from __future__ import annotations

from .strategy import Strategy, threshold


class Scaffold(Strategy):
    name = "scaffold"

    def __init__(self, lambda1: float = 0.0, lambda2: float = 0.0, threshold: float = 0.0,
                 global_lr: float = 1.0):
        self.lambda1, self.lambda2, self.threshold, self.global_lr = \
            lambda1, lambda2, threshold, global_lr

    def initialize(self, theta, sizes):
        super().initialize(theta, sizes)
        self.c = theta * 0

    def configure_train(self, theta, k):
        return [theta, self.c]

    def init_client(self, k, zeros):
        return {"c": zeros.clone() if hasattr(zeros, "clone") else zeros.copy()}

    def local_objective(self, k, state, received):
        return received[1] - state["c"], self.lambda1, self.lambda2

    def client_reply(self, k, state, received, theta_k, steps, lr):
        theta0, c = received
        c_new = state["c"] - c + (theta0 - theta_k) / (steps * lr)
        dc = c_new - state["c"]
        state["c"] = c_new
        return [threshold(theta_k - theta0, self.threshold), dc]

    def aggregate_train(self, theta, replies):
        if not replies:
            return theta
        self.c = self.c + sum(r[1] for _, r in replies) / self.m
        return theta + (self.global_lr / len(replies)) * sum(r[0] for _, r in replies)

    def settings(self):
        return {**super().settings(), "global_lr": self.global_lr}
