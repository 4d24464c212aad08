"""Per-sample gradients, clipping and Gaussian noise: the DP-SGD step every horizontal method
shares (torch).  Used by FedP3's LDP option and by the local DP of the runtime
(:mod:`vflpriv.horizontal.runtime`), and audited through :mod:`vflpriv.audit.horizontal`.

One private step: a Poisson minibatch (each of the client's m records joins with probability q),
each record's gradient clipped to L2 norm C, N(0, z^2 C^2 I) added to the clipped sum, divided by
the expected batch size b; a ``PoissonSubsampledGaussian(z, q)`` release w.r.t. the client's own
records (add/remove neighbours).
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap


def _loss_one(model, trainable, fixed, x, y):
    out = functional_call(model, {**fixed, **trainable}, (x.unsqueeze(0),))
    return F.cross_entropy(out, y.unsqueeze(0))


def per_sample_gradients(model, trainable: dict, fixed: dict, X, y) -> dict:
    """name -> tensor of shape (batch, *param.shape): the gradient of each record's loss."""
    g = grad(lambda tr, x, t: _loss_one(model, tr, fixed, x, t))
    return vmap(g, in_dims=(None, 0, 0))(trainable, X, y)


def clip_per_sample(grads: dict, clip: float):
    """Scale each record's whole gradient (all trainable tensors together) to L2 norm <= clip:
    g_j <- g_j * min(1, C / ||g_j||).  Returns (clipped grads, per-sample norms before clipping)."""
    flat = torch.cat([g.reshape(g.shape[0], -1) for g in grads.values()], dim=1)
    norms = flat.norm(dim=1)
    if math.isinf(clip):
        return grads, norms
    factor = torch.clamp(clip / (norms + 1e-12), max=1.0)
    return {k: g * factor.view(-1, *([1] * (g.dim() - 1))) for k, g in grads.items()}, norms


def flat_vector(params: dict) -> torch.Tensor:
    """One parameter (or gradient) dict as a single flat vector, in the dict's order."""
    return torch.cat([v.reshape(-1) for v in params.values()])


def poisson_batch(rng, m: int, q: float) -> np.ndarray:
    """Indices of a Poisson minibatch: each of the m records joins independently with
    probability q (the sampling ``PoissonSubsampledGaussian(z, q)`` accounts for)."""
    return np.flatnonzero(rng.random(m) < q)


def clipped_gradient_sum(model, trainable, fixed, X, y, *, clip: float) -> dict:
    """sum_{j in batch} clip_C(grad f_j(w)): the part of a DP-SGD step that sees the data.
    Deterministic given the batch; an empty batch gives zeros."""
    if X.shape[0] == 0:
        return {k: torch.zeros_like(v) for k, v in trainable.items()}
    clipped, _ = clip_per_sample(per_sample_gradients(model, trainable, fixed, X, y), clip)
    return {k: g.sum(0) for k, g in clipped.items()}


def noisy_average(total: dict, *, clip: float, noise_multiplier: float, expected_batch: float,
                  generator) -> dict:
    """(total + N(0, z^2 C^2 I)) / b: the release of one DP-SGD step given its clipped sum.
    ``generator``: a ``numpy.random.Generator`` (the runs pass :func:`vflpriv.noise.generator`'s
    ChaCha20; torch's CPU generator is a Mersenne Twister, predictable from its outputs)."""
    if not isinstance(generator, np.random.Generator):
        raise TypeError(f"generator must be a numpy.random.Generator (vflpriv.noise.generator), "
                        f"got {type(generator).__name__}")
    if noise_multiplier > 0:
        std = noise_multiplier * clip
        total = {k: g + std * torch.from_numpy(generator.standard_normal(tuple(g.shape)))
                 .to(g.dtype) for k, g in total.items()}
    return {k: g / expected_batch for k, g in total.items()}


def private_gradient(model, trainable, fixed, X, y, *, clip: float, noise_multiplier: float,
                     expected_batch: float, generator) -> dict:
    """(sum of clipped per-sample gradients + N(0, z^2 C^2 I)) / b; the noise goes on the clipped
    minibatch gradient (notes B.8), so its scale is in gradient units, as eq. (18) assumes."""
    total = clipped_gradient_sum(model, trainable, fixed, X, y, clip=clip)
    return noisy_average(total, clip=clip, noise_multiplier=noise_multiplier,
                         expected_batch=expected_batch, generator=generator)


def nonprivate_gradient(model, trainable, fixed, X, y, *, expected_batch: float) -> dict:
    """Plain autograd gradient of sum_j loss_j / b (same normalization as the private path)."""
    if X.shape[0] == 0:
        return {k: torch.zeros_like(v) for k, v in trainable.items()}
    params = {k: v.detach().requires_grad_(True) for k, v in trainable.items()}
    out = functional_call(model, {**fixed, **params}, (X,))
    loss = F.cross_entropy(out, y, reduction="sum") / expected_batch
    gs = torch.autograd.grad(loss, list(params.values()))
    return dict(zip(params.keys(), gs))
