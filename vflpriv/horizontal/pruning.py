"""FedP3's layer sets and pruning masks (paper 002, Alg. 1-2; notes B.3-B.5): which layers a client
trains (L_i), how many weights of the other layers the server keeps (global pruning P_i), and the
local pruning masks Q_i (torch, for the masks of model tensors)."""
from __future__ import annotations

import math

import numpy as np
import torch

from .models import LayeredModel


# ---------------------------------------------------------------------------------------------
# Layer sets L_i (notes B.5).  Non-final layers are indexed 0..H-1; client i of n starts at
# d1 = floor(i H / n) (= floor(i / 25) for the paper's 100 clients and 4 layers) and takes k
# consecutive layers cyclically, so every layer gets the same number of clients.

def scheme_layer_count(scheme: str, rng) -> int | None:
    """Number of non-final layers a client trains; None = redrawn every round (OPR2)."""
    fixed = {"lowerb": 1, "opu2": 2, "opu3": 3}
    if scheme in fixed:
        return fixed[scheme]
    if scheme == "opu1-2-3":
        return int(rng.integers(1, 4))
    if scheme == "opu2-3":
        return int(rng.integers(2, 4))
    return None


def cyclic_layers(client: int, n_clients: int, n_hidden: int, k: int) -> tuple:
    d1 = (client * n_hidden) // n_clients
    return tuple(sorted({(d1 + j) % n_hidden for j in range(k)}))


# ---------------------------------------------------------------------------------------------
# Pruning masks.

def kept_count(numel: int, keep_ratio: float) -> int:
    """ceil(r |W|) weights survive global pruning (notes B.12)."""
    return min(numel, max(1, int(math.ceil(keep_ratio * numel - 1e-9))))


def magnitude_mask(w: torch.Tensor, keep_ratio: float) -> np.ndarray:
    """Keep the ceil(r |W|) largest |w| (the released code's global pruning)."""
    flat = w.detach().reshape(-1).abs()
    keep = torch.topk(flat, kept_count(flat.numel(), keep_ratio)).indices
    mask = np.zeros(flat.numel(), dtype=bool)
    mask[keep.numpy()] = True
    return mask


def ordered_dropout_masks(model: LayeredModel, name: str, q: float, first: bool):
    """FjORD ordered dropout at width q for layer ``name``: keep the first ceil(q d_out) output units
    (channels) and the first ceil(q d_in) input units; the network input is never pruned.  Returns
    (weight mask, bias mask) as float tensors of the parameter shapes."""
    w = model.layer(name).weight
    out_units, in_units = w.shape[0], w.shape[1]
    wm = torch.zeros_like(w)
    ko = int(math.ceil(q * out_units))
    if first:
        ki = in_units
    elif name in model.flatten_channels:
        ch = model.flatten_channels[name]
        ki = int(math.ceil(q * ch)) * (in_units // ch)      # whole flattened channels
    else:
        ki = int(math.ceil(q * in_units))
    wm[:ko, :ki] = 1.0
    bias = model.layer(name).bias
    bm = None
    if bias is not None:
        bm = torch.zeros_like(bias)
        bm[:ko] = 1.0
    return wm, bm
