"""Centralized references: IHT and StoGradMP on pooled data, written plainly (loops,
``np.linalg.lstsq``) so that tests can compare the federated engine with an independent solver.

* ``iht``: x <- H_tau(x - gamma grad f(x)), f = sum_i p_i f_i (full gradients).  Full
  participation, full batches and K = 1 make Fed-HT / Distributed-IHT exactly this.
* ``stogradmp``: Nguyen, Needell, Woolf (2017), as 003 Sec. III describes it; with N = 1, K = 1 and
  full batches FedGradMP is this algorithm.
"""
from __future__ import annotations

import numpy as np

from ..ops import hard_threshold


def _grad(parts, weights, loss, x):
    g = np.zeros_like(x)
    for (Z, y), p in zip(parts, weights):
        g += p * (Z.T @ loss.derivative(Z @ x, y)) / Z.shape[0]
    return g + loss.l2 * x


def objective(parts, weights, loss, x):
    return float(sum(p * loss.value(Z @ x, y).mean() for (Z, y), p in zip(parts, weights))
                 + 0.5 * loss.l2 * float(x @ x))


def iht(parts, weights, loss, tau, lr, iterations, x0=None):
    d = parts[0][0].shape[1]
    x = np.zeros(d) if x0 is None else x0.copy()
    history = [x.copy()]
    for _ in range(iterations):
        x = hard_threshold(x - lr * _grad(parts, weights, loss, x), tau)
        history.append(x.copy())
    return x, history


def stogradmp(Z, y, tau, iterations, batch=None, rng=None):
    """Least squares f(x) = ||Z x - y||^2 / (2n); full-batch gradients when ``batch`` is None."""
    n, d = Z.shape
    x = np.zeros(d)
    for _ in range(iterations):
        rows = np.arange(n) if batch is None else rng.choice(n, size=batch, replace=False)
        r = Z[rows].T @ (Z[rows] @ x - y[rows]) / rows.shape[0]
        order = sorted(range(d), key=lambda j: (-abs(r[j]), j))[:2 * tau]
        G = sorted(set(order) | set(np.flatnonzero(x).tolist()))
        coef, *_ = np.linalg.lstsq(Z[:, G], y, rcond=None)
        b = np.zeros(d)
        b[G] = coef
        x = hard_threshold(b, tau)
    return x
