"""Which clients take part in a round (numpy only; shared by every horizontal method).

- :func:`feddyn_sample` is FedDyn's sampler, which FedElasticNet (paper 001) uses (notes A.2 [C]):
  at round index t = 0, 1, ... every client joins independently with probability p, drawn as
  ``u = RandomState(t + seed + inc).uniform(size=m)``, ``P_t = {k : u_k <= p}``, redrawn with
  ``inc + 1`` while P_t is empty.  The count is Binomial; with m = 100, p = 0.1, seed 0 the first
  100 / 200 / 500 rounds hold 1019 / 2053 / 5070 client-rounds, which reproduces paper 001's
  Table 2 baseline columns (d x sum_t |P_t|, notes A.8).
- :func:`fixed_size_sample` draws exactly round(p m) clients uniformly without replacement (FedP3's
  participation).
"""
from __future__ import annotations

import numpy as np

from ..errors import InputError


def _check(m, p):
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
        raise InputError(f"the number of clients must be a positive integer, got {m!r}")
    if not (isinstance(p, (int, float)) and 0 < p <= 1):
        raise InputError(f"participation must be in (0, 1], got {p!r}")


def feddyn_sample(m: int, p: float, t: int, seed: int = 0) -> np.ndarray:
    """FedDyn's Bernoulli(p) participation at round index ``t`` (sorted client indices)."""
    _check(m, p)
    inc = 0
    while True:
        u = np.random.RandomState((int(t) + int(seed) + inc) % 2 ** 32).uniform(size=m)
        chosen = np.flatnonzero(u <= p)
        if chosen.size:
            return chosen
        inc += 1


def fixed_size_sample(m: int, p: float, rng) -> np.ndarray:
    """max(1, round(p m)) clients uniformly without replacement (all of them when p = 1)."""
    _check(m, p)
    k = m if p >= 1 else max(1, int(round(p * m)))
    return np.arange(m) if k == m else np.sort(rng.choice(m, size=k, replace=False))
