"""Client data of a horizontal federation: N clients, each holding rows of (Z, y).

Two layouts answer the same questions (minibatch gradients, full local gradients, columns of a
support, objective), so the algorithms never know which one runs:

* :class:`DenseShards` stacks the clients in one (N, n_max, d) array (shorter clients padded with
  zero rows that carry zero weight) and computes a round's clients in batched matrix products:
  no Python loop over clients.
* :class:`SparseShards` keeps one CSR matrix per client and loops over the clients of a round
  (sparse high-dimensional data such as RCV1, where padding to a dense block is impossible).

Minibatches (notes P000-4, P003-7): b records drawn uniformly *without* replacement, fresh every
local step; a client with n_i <= b uses all its rows (gradient descent).  A minibatch is returned as
(row indices, row weights): weight 1/b_i on each drawn row.

Randomness is per client: every method that draws takes ``rngs``, one generator per row of the
round's clients (or one generator, then drawn row after row), and a client's draws depend only on
its own n_i and generator.  Shapes depend only on the public padded length ``n_max`` (default the
largest client; a client alone, e.g. in a Flower ClientApp, is padded to the federation's), so a
client computed alone gives the same bits as the same client in a batch of many.  Hence also the
rule "full data when b >= n_max" (public) instead of a rule on the round's participants.
"""
from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np
import scipy.sparse as sp


def per_row(rngs, L):
    """One generator per row: ``rngs`` itself (a sequence of L), or one generator for all."""
    if isinstance(rngs, np.random.Generator):
        return [rngs] * L
    if len(rngs) != L:
        raise ValueError(f"{len(rngs)} generators for {L} clients")
    return rngs


class Shards(ABC):
    """Interface shared by the two layouts (see the module docstring)."""

    N: int
    d: int
    counts: np.ndarray

    @abstractmethod
    def client_y(self, i):
        ...


class DenseShards(Shards):
    def __init__(self, parts, loss, n_max=None):
        """``parts``: list of (Z_i dense (n_i, d), y_i (n_i,)); ``loss``: a :class:`Loss`;
        ``n_max``: pad every client to this many rows (default: the largest client)."""
        self.loss = loss
        self.N = len(parts)
        self.features = int(parts[0][0].shape[1])
        self.c = int(getattr(loss, "classes", None) or 1)
        self.d = self.features * self.c            # length of the model vector
        self.counts = np.array([p[0].shape[0] for p in parts], dtype=np.int64)
        n_max = max(int(self.counts.max()), int(n_max or 0))
        self.n_max = n_max
        self.Z = np.zeros((self.N, n_max, self.features))
        self.y = np.zeros((self.N, n_max))
        self.mask = np.zeros((self.N, n_max))
        for i, (Z, y) in enumerate(parts):
            self.Z[i, :Z.shape[0]] = Z
            self.y[i, :Z.shape[0]] = y
            self.mask[i, :Z.shape[0]] = 1.0
        self.row_norms = np.sqrt(np.einsum("ijk,ijk->ij", self.Z, self.Z))

    # -- helpers -------------------------------------------------------------------------
    def _pred(self, Z, X):
        """Predictors of the rows of Z (L, b, f) under the models X (L, d): (L, b) or (L, b, c)."""
        if self.c == 1:
            return np.matmul(Z, X[:, :, None])[:, :, 0]
        L = X.shape[0]
        return np.matmul(Z, X.reshape(L, self.c, self.features).transpose(0, 2, 1))

    def _back(self, Z, R):
        """sum_j R_j z_j per client: (L, d)."""
        if self.c == 1:
            return np.matmul(R[:, None, :], Z)[:, 0, :]
        G = np.matmul(Z.transpose(0, 2, 1), R)                     # (L, f, c)
        return G.transpose(0, 2, 1).reshape(Z.shape[0], self.d)

    def _scale(self, R, w):
        return R * (w if self.c == 1 else w[:, :, None])

    def _rows(self, clients):
        if clients.shape[0] == self.N and (clients == np.arange(self.N)).all():
            return self.Z, self.y, self.mask, self.row_norms
        return self.Z[clients], self.y[clients], self.mask[clients], self.row_norms[clients]

    def sample_batch(self, clients, b, rngs):
        """Minibatch of size min(b, n_i) for each client of ``clients`` (or None: full data,
        when b >= n_max).  Client r draws n_i uniform keys from ``rngs[r]`` and takes the rows
        of the b smallest (a stable sort: the padding rows it may take are the same ones in
        any batch of clients)."""
        cnt = self.counts[clients]
        n_max = self.Z.shape[1]
        if b is None or b >= n_max:
            return None
        keys = np.full((clients.shape[0], n_max), np.inf)
        for r, g in enumerate(per_row(rngs, clients.shape[0])):
            keys[r, :cnt[r]] = g.random(int(cnt[r]))
        bm = int(b)
        idx = np.argsort(keys, axis=1, kind="stable")[:, :bm]
        valid = np.take_along_axis(self.mask[clients], idx, axis=1)
        w = valid / np.minimum(bm, cnt)[:, None]     # clients with n_i <= b: their full data
        return idx, w

    def grad(self, X, clients, batch=None):
        """Gradients of the local objectives (full, or on ``batch``) at the rows of X."""
        loss = self.loss
        if batch is None:
            Z, y, m, _ = self._rows(clients)
            w = m / self.counts[clients][:, None]
        else:
            idx, w = batch
            Z = self.Z[clients[:, None], idx]
            y = self.y[clients[:, None], idx]
        u = self._pred(Z, X)
        r = self._scale(loss.derivative(u, y), w)
        g = self._back(Z, r)
        if loss.l2:
            g += loss.l2 * X
        return g

    def private_grad(self, X, clients, q, clip, sigma, rngs):
        """Record-level DP gradient of each client (DP-SGD step): Poisson(q) minibatch,
        per-sample gradients clipped to L2 norm ``clip``, N(0, sigma^2 I) added to the clipped
        sum, divided by the expected batch size q n_i.  ``sigma`` is noise_multiplier * clip.
        Client r draws its n_i record coins, then its d noise values, from ``rngs[r]``."""
        Z, y, m, norms = self._rows(clients)
        dl = self.loss.derivative(self._pred(Z, X), y)
        dn = np.abs(dl) if self.c == 1 else np.linalg.norm(dl, axis=-1)
        gnorm = dn * norms                               # ||l'(u) z_j|| = ||l'(u)|| ||z_j||
        factor = np.minimum(1.0, clip / np.maximum(gnorm, 1e-300))
        cnt = self.counts[clients]
        take = np.zeros(m.shape)
        noise = np.empty((clients.shape[0], self.d))
        for r, gen in enumerate(per_row(rngs, clients.shape[0])):
            take[r, :cnt[r]] = gen.random(int(cnt[r])) < q[r]
            noise[r] = gen.standard_normal(self.d)
        g = self._back(Z, self._scale(dl, factor * take))
        g += sigma * noise
        g /= (q * self.counts[clients])[:, None]
        if self.loss.l2:
            g += self.loss.l2 * X
        return g

    def columns(self, clients, cols):
        """(Z restricted to columns ``cols`` (L, k) of each client: (L, n_max, k), y (L, n_max),
        counts (L,))."""
        if getattr(self, "_ZT", None) is None:     # (N, f, n_max) copy: gathers whole rows
            self._ZT = np.ascontiguousarray(self.Z.transpose(0, 2, 1))
        A = self._ZT[clients[:, None], cols].transpose(0, 2, 1)
        return A, self.y[clients], self.counts[clients]

    def local_objectives(self, x):
        """f_i(x) for every client (x one vector)."""
        u = self.Z @ x if self.c == 1 else self.Z @ x.reshape(self.c, self.features).T
        v = (self.loss.value(u, self.y) * self.mask).sum(axis=1) / self.counts
        if self.loss.l2:
            v += 0.5 * self.loss.l2 * float(x @ x)
        return v

    def smoothness(self, iters=50, seed=0):
        """Per-client smoothness estimate curvature * lambda_max(Z_i^T Z_i) / n_i (+ l2), by
        batched power iteration (an estimate from below; 50 iterations)."""
        rng = np.random.default_rng(seed)
        v = rng.standard_normal((self.N, self.features))
        lam = np.zeros(self.N)
        for _ in range(iters):
            v /= np.linalg.norm(v, axis=1, keepdims=True)
            w = np.matmul(np.matmul(self.Z, v[:, :, None])[:, :, 0][:, None, :], self.Z)[:, 0, :]
            lam = np.einsum("ij,ij->i", v, w)
            v = w
        return self.loss.curvature * lam / self.counts + self.loss.l2

    def client_y(self, i):
        return self.y[i, :self.counts[i]]


class SparseShards(Shards):
    """One CSR matrix per client; every operation loops over the clients of the round."""

    def __init__(self, parts, loss, n_max=None):
        self.loss = loss
        self.N = len(parts)
        self.features = int(parts[0][0].shape[1])
        self.c = int(getattr(loss, "classes", None) or 1)
        self.d = self.features * self.c
        self.Zs = [sp.csr_matrix(Z, dtype=np.float64) for Z, _ in parts]
        self.Zc = [Z.tocsc() for Z in self.Zs]           # column slices (FedGradMP supports)
        self.ys = [np.asarray(y, dtype=float) for _, y in parts]
        self.counts = np.array([Z.shape[0] for Z in self.Zs], dtype=np.int64)
        self.n_max = max(int(self.counts.max()), int(n_max or 0))
        self.norms = [np.sqrt(np.asarray(Z.multiply(Z).sum(axis=1)).ravel()) for Z in self.Zs]

    def _pred(self, Z, x):
        return Z @ x if self.c == 1 else Z @ x.reshape(self.c, self.features).T

    def _back(self, Z, R):
        return Z.T @ R if self.c == 1 else (Z.T @ R).T.ravel()

    def sample_batch(self, clients, b, rngs):
        if b is None or b >= self.n_max:
            return None
        idx = [g.choice(int(self.counts[i]), size=min(int(b), int(self.counts[i])),
                        replace=False) for i, g in zip(clients, per_row(rngs, len(clients)))]
        return idx, None

    def grad(self, X, clients, batch=None):
        G = np.empty_like(X)
        for r, i in enumerate(clients):
            Z, y = self.Zs[i], self.ys[i]
            if batch is not None:
                Z, y = Z[batch[0][r]], y[batch[0][r]]
            G[r] = self._back(Z, self.loss.derivative(self._pred(Z, X[r]), y)) / Z.shape[0]
        if self.loss.l2:
            G += self.loss.l2 * X
        return G

    def private_grad(self, X, clients, q, clip, sigma, rngs):
        G = np.empty_like(X)
        gens = per_row(rngs, len(clients))
        for r, i in enumerate(clients):
            Z, y = self.Zs[i], self.ys[i]
            dl = self.loss.derivative(self._pred(Z, X[r]), y)
            dn = np.abs(dl) if self.c == 1 else np.linalg.norm(dl, axis=-1)
            factor = np.minimum(1.0, clip / np.maximum(dn * self.norms[i], 1e-300))
            take = gens[r].random(Z.shape[0]) < q[r]
            w = factor * take
            G[r] = self._back(Z, dl * (w if self.c == 1 else w[:, None]))
            G[r] += sigma[r] * gens[r].standard_normal(self.d)
        G /= (q * self.counts[clients])[:, None]
        if self.loss.l2:
            G += self.loss.l2 * X
        return G

    def columns(self, clients, cols):
        n_max = self.n_max            # public padding: the same shapes for any batch of clients
        A = np.zeros((clients.shape[0], n_max, cols.shape[1]))
        y = np.zeros((clients.shape[0], n_max))
        for r, i in enumerate(clients):
            n = self.counts[i]
            A[r, :n] = self.Zc[i][:, cols[r]].toarray()
            y[r, :n] = self.ys[i]
        return A, y, self.counts[clients]

    def local_objectives(self, x):
        v = np.array([self.loss.value(self._pred(Z, x), y).mean() for Z, y in zip(self.Zs, self.ys)])
        if self.loss.l2:
            v += 0.5 * self.loss.l2 * float(x @ x)
        return v

    def smoothness(self, iters=50, seed=0):
        from scipy.sparse.linalg import svds

        out = np.empty(self.N)
        for i, Z in enumerate(self.Zs):
            try:
                s = svds(Z, k=1, return_singular_vectors=False, random_state=seed)[0]
            except Exception:       # tiny or degenerate matrices: dense fallback
                s = np.linalg.norm(Z.toarray(), 2)
            out[i] = s * s
        return self.loss.curvature * out / self.counts + self.loss.l2

    def client_y(self, i):
        return self.ys[i]


def make_shards(parts, loss, layout="auto", dense_limit=5e7, n_max=None):
    """DenseShards when every part is dense (or small enough to densify: N * n_max * d below
    ``dense_limit`` entries), SparseShards otherwise; ``layout`` 'dense'/'sparse' forces one.
    ``n_max``: the padded length (a client alone padded as in its federation)."""
    if layout not in ("auto", "dense", "sparse"):
        raise ValueError(f"layout must be auto, dense or sparse, got {layout!r}")
    N = len(parts)
    n_max = max(p[0].shape[0] for p in parts)
    d = parts[0][0].shape[1]
    if layout == "auto":
        layout = "dense" if N * n_max * d <= dense_limit else "sparse"
    if layout == "dense":
        parts = [(Z.toarray() if sp.issparse(Z) else np.asarray(Z, dtype=float), y)
                 for Z, y in parts]
        return DenseShards(parts, loss, n_max=n_max)
    return SparseShards(parts, loss, n_max=n_max)
