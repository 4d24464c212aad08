"""Block samplings for BCFW-AS (paper 004, Section II-A and Table III).

A sampling draws, every round, a random set T^t of coordinates of [d], independently across rounds.
With the feasible set a product of per-party l1 balls, party k updates its block when
T^t meets its columns P_k, using the linear oracle restricted to T^t cap P_k (an inexact block LO,
Algorithm 1 line 6) and the step gamma_t = 2 / (p_min t + 2), p_min = min_i P(i in T^t).

* ``elementary``:        T = [d] every round                           p_min = 1
* ``serial``:            one coordinate uniformly from [d]              p_min = 1/d
* ``nice:TAU``:          TAU coordinates uniformly from [d]             p_min = TAU/d
* ``distributed:TAU``:   each party TAU of its own coordinates (K,tau)  p_min = TAU/max_k |P_k|
* ``probs:p1,...``:      independent inclusion; K numbers = per party (the whole block),
                         d numbers = per coordinate                    p_min = min p

The draw is public randomness from a seed the server broadcasts (Setup message): every party
derives the same T^t, so the sampled sets cost no bytes.
"""
from __future__ import annotations

import numpy as np

from ..errors import InputError

ALL = "all"


class Sampling:
    def __init__(self, kind: str, blocks, tau: int | None = None, probs=None):
        self.kind, self.blocks = kind, [np.asarray(b) for b in blocks]
        self.K = len(self.blocks)
        self.d = int(sum(len(b) for b in self.blocks))
        sizes = [len(b) for b in self.blocks]
        # owner[j], local[j]: which party holds global column j, and its position there
        self.owner = np.empty(self.d, dtype=np.int64)
        self.local = np.empty(self.d, dtype=np.int64)
        for k, b in enumerate(self.blocks):
            self.owner[b] = k
            self.local[b] = np.arange(len(b))
        if kind == "elementary":
            self.p_min = 1.0
        elif kind == "serial":
            self.p_min = 1.0 / self.d
        elif kind in ("nice", "distributed"):
            lim = self.d if kind == "nice" else min(sizes)
            if isinstance(tau, bool) or not isinstance(tau, (int, np.integer)) or not 1 <= tau <= lim:
                what = "d" if kind == "nice" else "the smallest party's column count"
                raise InputError(f"{kind} sampling needs an integer tau in [1, {lim}] ({what}), got {tau!r}")
            self.tau = int(tau)
            self.p_min = tau / self.d if kind == "nice" else tau / max(sizes)
        elif kind == "probs":
            p = np.asarray(probs, dtype=float).ravel()
            if p.size not in (self.K, self.d):
                raise InputError(f"a sampling probability vector needs K={self.K} (per party) or "
                                 f"d={self.d} (per coordinate) entries, got {p.size}")
            bad = ~((p > 0) & (p <= 1))
            if bad.any():
                raise InputError(f"sampling probability {p[bad][0]!r} at position "
                                 f"{int(np.argmax(bad))} is not in (0, 1] (the sampling must be proper)")
            self.probs = p
            self.p_min = float(p.min())
        else:
            raise InputError(f"sampling must be elementary, serial, nice:TAU, distributed:TAU or "
                             f"probs:P1,P2,..., got {kind!r}")

    @property
    def max_parties(self) -> int:
        """Most parties that can be sampled in one round (for worst-case privacy plans)."""
        if self.kind == "serial":
            return 1
        if self.kind == "nice":
            return min(self.K, self.tau)
        return self.K

    def draw(self, rng) -> list:
        """Per party: ``None`` (not sampled), ``ALL`` or a sorted array of local coordinates."""
        if self.kind == "elementary":
            return [ALL] * self.K
        if self.kind == "distributed":
            return [np.sort(rng.choice(len(b), size=self.tau, replace=False)) for b in self.blocks]
        if self.kind == "probs" and self.probs.size == self.K:
            hit = rng.random(self.K) < self.probs
            return [ALL if h else None for h in hit]
        if self.kind == "probs":
            cols = np.flatnonzero(rng.random(self.d) < self.probs)
        elif self.kind == "serial":
            cols = np.array([rng.integers(self.d)])
        else:  # nice
            cols = rng.choice(self.d, size=self.tau, replace=False)
        out = [None] * self.K
        owners = self.owner[cols]
        for k in np.unique(owners):
            out[k] = np.sort(self.local[cols[owners == k]])
        return out

    def step(self, t: int) -> float:
        """gamma_t = 2 / (p_min t + 2) (paper 004, Theorem 1)."""
        return 2.0 / (self.p_min * t + 2.0)


def parse_sampling(spec, blocks) -> Sampling:
    """``elementary`` | ``serial`` | ``nice:TAU`` | ``distributed:TAU`` | ``probs:P,...``; or a
    Sampling; or a probability vector."""
    if isinstance(spec, Sampling):
        return spec
    if not isinstance(spec, str):
        return Sampling("probs", blocks, probs=spec)
    name, _, arg = spec.partition(":")
    if name in ("elementary", "serial"):
        if arg:
            raise InputError(f"sampling {name!r} takes no argument, got {spec!r}")
        return Sampling(name, blocks)
    if name in ("nice", "tau-nice", "distributed", "k-tau"):
        try:
            tau = int(arg)
        except ValueError:
            raise InputError(f"sampling {spec!r} needs an integer tau, e.g. {name}:4") from None
        return Sampling("nice" if "nice" in name else "distributed", blocks, tau=tau)
    if name == "probs":
        try:
            p = [float(v) for v in arg.split(",") if v.strip()]
        except ValueError:
            raise InputError(f"cannot read the probabilities in {spec!r}") from None
        return Sampling("probs", blocks, probs=p)
    return Sampling(spec, blocks)
