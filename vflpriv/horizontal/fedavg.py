"""FedAvg, FedProx and FedElasticNet for FedAvg / FedProx (paper 001, Algorithm 1; notes A.3).

Client k starts at theta^{t-1}, minimizes L_k(theta) + (lambda2/2)||theta - theta^{t-1}||^2
+ lambda1 ||theta - theta^{t-1}||_1 by local SGD, sends Delta_hat = threshold_eps(theta_k - theta^{t-1});
the server steps theta^t = theta^{t-1} + sum_{k in P_t} w_k Delta_hat_k.

Weights: ``weights="selected"`` (default) w_k = n_k / sum_{j in P_t} n_j (FedDyn's code, a weighted
mean); ``weights="all"`` w_k = n_k / n over all clients (Alg. 1 line 6 read literally: the step
shrinks by about |P_t| / m); n counts the clients not lost (``--on-client-loss continue``).  FedAvg is lambda1 = lambda2 = 0, FedProx lambda2 = mu, no threshold.
"""
from __future__ import annotations

from .strategy import Strategy


class FedAvg(Strategy):
    name = "fedavg"

    def __init__(self, lambda1: float = 0.0, lambda2: float = 0.0, threshold: float = 0.0,
                 weights: str = "selected"):
        if weights not in ("selected", "all"):
            raise ValueError(f"weights must be 'selected' or 'all', got {weights!r}")
        self.lambda1, self.lambda2, self.threshold, self.weights = lambda1, lambda2, threshold, weights

    def aggregate_train(self, theta, replies):
        if not replies:
            return theta
        total = self.remaining_size() if self.weights == "all" else \
            sum(self.sizes[k] for k, _ in replies)
        return theta + sum((self.sizes[k] / total) * r[0] for k, r in replies)

    def settings(self):
        return {**super().settings(), "weights": self.weights}


class FedProx(FedAvg):
    """FedProx: FedAvg with the proximal term (mu/2)||theta - theta^{t-1}||^2, mu = lambda2."""
    name = "fedprox"
