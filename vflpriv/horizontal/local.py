"""Client-side local training of the horizontal runtime (torch): minibatch SGD on a flat parameter
vector with the strategy's linear correction and the elastic-net terms (paper 001; notes A.2).

One step from theta (theta0 = the round's global model, u = theta - theta0, g = minibatch gradient
of the cross-entropy, corr = the strategy's correction, wd = weight decay):

- ``step="subgradient"`` (the paper's, eq. 7): v = g + corr + lambda2 u + lambda1 sign(u), clipped
  to norm ``grad_clip``; theta <- theta - lr (v + wd theta).  sign(0) = 0.
- ``step="prox"``: v = g + corr, clipped; w = theta - lr (v + wd theta);
  theta <- theta0 + S_{lr lambda1}(w - theta0) / (1 + lr lambda2) (soft-thresholding, the prox of
  lr (lambda2/2 ||u||^2 + lambda1 ||u||_1)); exact zeros without the threshold.

As in FedDyn's code, the clip covers the loss and the terms written into it, the weight decay is
added after the clip.  Batches: without DP every epoch is a fresh permutation cut into ceil(m/b)
batches (ceil(E ceil(m/b)) steps); with DP each of ceil(E m / b) steps draws a Poisson minibatch
(rate q = b/m) and the data-dependent gradient is the DP-SGD release of :mod:`vflpriv.horizontal.dp`
(per-sample clip C, N(0, z^2 C^2 I) on the clipped sum, divided by b).  Everything after that release
(corrections, elastic net, clip, decay) is post-processing.
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch.func import functional_call

from .config import STEPS, LocalConfig  # noqa: F401  (LocalConfig: validated, numpy only)
from .dp import clipped_gradient_sum, flat_vector, noisy_average, poisson_batch


class FlatModel:
    """A torch module seen as a function of one flat parameter vector."""

    def __init__(self, net):
        self.net = net
        self.names = [k for k, _ in net.named_parameters()]
        self.shapes = [tuple(v.shape) for _, v in net.named_parameters()]
        self.sizes = [int(np.prod(s)) for s in self.shapes]

    def flat(self) -> torch.Tensor:
        return torch.cat([v.detach().reshape(-1) for v in self.net.parameters()]).clone()

    def unflatten(self, theta) -> dict:
        return {n: p.reshape(s) for n, s, p in zip(self.names, self.shapes,
                                                   torch.split(theta, self.sizes))}

    def logits(self, theta, X):
        return functional_call(self.net, self.unflatten(theta), (X,))

    def gradient(self, theta, X, y, expected_batch: float):
        """grad of sum_j CE_j / b at theta (zeros for an empty batch)."""
        if X.shape[0] == 0:
            return torch.zeros_like(theta)
        t = theta.detach().requires_grad_(True)
        loss = F.cross_entropy(self.logits(t, X), y, reduction="sum") / expected_batch
        return torch.autograd.grad(loss, t)[0]

    def clipped_sum(self, theta, X, y, *, clip) -> dict:
        """sum_j clip_C(grad CE_j(theta)): the data-dependent part of a DP-SGD step."""
        return clipped_gradient_sum(self.net, self.unflatten(theta.detach()), {}, X, y, clip=clip)

    def accuracy(self, theta, X, y) -> float:
        with torch.no_grad():
            return float((self.logits(theta, X).argmax(1) == y).float().mean())


def private_step_gradient(model: FlatModel, theta, X, y, *, q, clip, noise_multiplier,
                          expected_batch, rng, generator, cache=None):
    """One DP-SGD release of the runtime's local DP: a Poisson(q) minibatch of (X, y), per-sample
    gradients clipped to C, N(0, z^2 C^2 I) on the sum, divided by b (a
    ``PoissonSubsampledGaussian(z, q)`` release).  ``cache`` (the audit's) memoizes the clipped sum
    per batch, which is deterministic given the batch and theta."""
    b = poisson_batch(rng, X.shape[0], q)
    key = b.tobytes()
    total = cache.get(key) if cache is not None else None
    if total is None:
        total = model.clipped_sum(theta, X[b], y[b], clip=clip)
        if cache is not None:
            cache[key] = total
    return flat_vector(noisy_average(total, clip=clip, noise_multiplier=noise_multiplier,
                                     expected_batch=expected_batch, generator=generator))


def local_train(model: FlatModel, theta0, X, y, cfg: LocalConfig, *, correction=None,
                lambda1=0.0, lambda2=0.0, rng, dp=None):
    """Run one client's local training from ``theta0``; returns (theta_k, number of steps).

    ``dp``: None, or ``(clip, noise_multiplier, generator)`` for the private path."""
    m = X.shape[0]
    theta = theta0.clone()
    steps = cfg.steps(m, dp is not None)
    if dp is None:
        nb = int(math.ceil(m / cfg.batch_size))
        batches = []
        while len(batches) < steps:        # epochs of a fresh permutation each, cut into batches
            order = rng.permutation(m)
            batches += [order[j * cfg.batch_size:(j + 1) * cfg.batch_size] for j in range(nb)]
    for s in range(steps):
        if dp is None:
            b = batches[s]
            g = model.gradient(theta, X[b], y[b], expected_batch=len(b))
        else:
            clip, z, gen = dp
            g = private_step_gradient(model, theta, X, y, q=cfg.batch_size / m, clip=clip,
                                      noise_multiplier=z, expected_batch=cfg.batch_size, rng=rng,
                                      generator=gen)
        with torch.no_grad():
            if correction is not None:
                g = g + correction
            u = theta - theta0
            if cfg.step == "subgradient":
                g = g + lambda2 * u + lambda1 * torch.sign(u)
            n = float(g.norm())
            if math.isfinite(cfg.grad_clip) and n > cfg.grad_clip:
                g = g * (cfg.grad_clip / n)
            theta = theta - cfg.lr * (g + cfg.weight_decay * theta)
            if cfg.step == "prox":
                u = theta - theta0
                u = torch.sign(u) * torch.clamp(u.abs() - cfg.lr * lambda1, min=0.0)
                theta = theta0 + u / (1 + cfg.lr * lambda2)
    return theta, steps
