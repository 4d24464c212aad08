"""FedGradMP (paper 003, Algorithms 1 and 2): exact and inexact, partial participation, l2 ball.

Each participant starts from the broadcast tau-sparse x_t with Lambda_i = supp(x_t) and repeats K
times (standard basis; a dictionary is a change of variables, see :mod:`vflpriv.sparse.data`):

    r      = minibatch gradient at x                     (line 8, the only stochastic step)
    Gamma  = top-2tau of |r|                             (approx_2tau, exact: eta_1 = 1)
    G^     = Gamma u Lambda_i                            (|G^| <= 3 tau)
    b      = argmin of the FULL local f_i over vectors supported on G^   (line 11, P003-5)
    Lambda = top-tau of |b|;  x = b restricted to Lambda (P_Lambda truncates, no re-fit: P003-6)
    [x     = Pi_R(x)]                                    (optional l2 ball, Alg. 2 line 13a)

The server keeps ``x_{t+1} = [Pi_R] H_tau(sum_{i in S_t} p_i x_i / sum_{i in S_t} p_i)``.

Decisions:

* P003-1: Lambda_i is reset to supp(x_t) at the start of every client's local loop (the
  pseudocode's single global Lambda would hand one client another's support).
* P003-4: the exact subproblem is solved by batched QR; a client with fewer rows than merged
  columns (3 tau > n_i) or collinear columns gets the minimum-norm least-squares solution
  (pseudo-inverse), which is well defined there.
  Least squares only; ``fedgradmp`` with the logistic loss solves its subproblems by gradient
  descent to ``tol=1e-10`` (there is no closed form).
* Inexact (Algorithm 2): gradient descent on the subproblem from the warm start x restricted to
  G^ (P003-4), step 1 / lambda_max of the restricted Hessian bound, each participant until its
  restricted gradient norm is <= ``tol`` (then ||b - b_opt|| <= tol / rho^- by restricted strong
  convexity: 003's delta) or ``max_iter`` iterations.
"""
from __future__ import annotations

import math

import numpy as np

from ..ops import project_l2_ball, topk_mask
from .base import Strategy


def merged_support(r, X, tau):
    """(columns (L, k), valid (L, k)): Gamma = top-2tau(|r|) united with supp(X), padded to
    k = min(3 tau, d) columns (valid marks the real ones, in index order)."""
    L, d = r.shape
    merged = topk_mask(r, min(2 * tau, d)) | (X != 0)
    k = min(3 * tau, d)
    rows, cols = np.nonzero(merged)                  # row-major: each row's columns ascending
    starts = np.concatenate([[0], np.cumsum(merged.sum(axis=1))[:-1]])
    pos = np.arange(rows.shape[0]) - starts[rows]
    if pos.size and pos.max() >= k:
        raise RuntimeError("a merged support exceeds 3 tau: the iterate was not tau-sparse")
    order = np.zeros((L, k), dtype=np.int64)         # padding points at column 0, masked
    valid = np.zeros((L, k), dtype=bool)
    order[rows, pos] = cols
    valid[rows, pos] = True
    return order, valid


def solve_exact_lsq(A, y, valid=None):
    """Least squares per client on the valid columns: A (L, n, k), y (L, n) -> (L, k), zero on
    the padding columns.

    Batched QR of A with one unit row appended per padding column (which pins that coefficient to
    0 without touching the others); clients whose R is numerically singular (fewer rows than
    merged columns, or collinear columns) get the minimum-norm solution from the pseudo-inverse.
    QR keeps the conditioning of A (normal equations would square it) at a fifth of the SVD's cost.
    """
    L, n, k = A.shape
    if valid is None:
        valid = np.ones((L, k), dtype=bool)
    pad = np.eye(k)[None, :, :] * (~valid)[:, None, :]
    A2 = np.concatenate([A * valid[:, None, :], pad], axis=1)
    y2 = np.concatenate([y, np.zeros((L, k))], axis=1)
    Q, R = np.linalg.qr(A2)
    diag = np.abs(np.diagonal(R, axis1=1, axis2=2))
    ok = diag.min(axis=1) > 1e-10 * np.maximum(diag.max(axis=1), 1e-300)
    c = np.zeros((L, k))
    if ok.any():
        rhs = np.matmul(Q[ok].transpose(0, 2, 1), y2[ok][:, :, None])
        c[ok] = np.linalg.solve(R[ok], rhs)[:, :, 0]
    if (~ok).any():
        c[~ok] = np.matmul(np.linalg.pinv(A[~ok] * valid[~ok][:, None, :]),
                           y[~ok][:, :, None])[:, :, 0]
    return c * valid


def solve_gd(A, y, counts, loss, c0, tol, max_iter):
    """Gradient descent on c -> f_i(A c) from c0, each client until its own gradient norm is
    <= ``tol`` (then frozen: a client's answer does not depend on who else is in the batch, as
    when it computes alone) or ``max_iter``; returns (c, iterations of the slowest client, max
    final gradient norm)."""
    w = 1.0 / counts[:, None]
    H = np.matmul(A.transpose(0, 2, 1), A) * (loss.curvature / counts)[:, None, None]
    lam = np.linalg.eigvalsh(H)[:, -1] + loss.l2
    step = 1.0 / np.maximum(lam, 1e-300)
    c = c0.copy()
    active = np.ones(c.shape[0], dtype=bool)
    last = np.zeros(c.shape[0])
    for it in range(max_iter + 1):
        u = np.matmul(A, c[:, :, None])[:, :, 0]
        g = np.matmul((loss.derivative(u, y) * w)[:, None, :], A)[:, 0, :] + loss.l2 * c
        norms = np.linalg.norm(g, axis=1)
        last[active] = norms[active]
        active &= norms > tol
        if not active.any() or it == max_iter:
            return c, it, float(last.max()) if last.size else 0.0
        c[active] -= step[active, None] * g[active]
    return c, max_iter, float(last.max()) if last.size else 0.0


class FedGradMP(Strategy):
    name = "fedgradmp"
    needs_lr = False
    record_private = False    # the subproblem reads the full local data, not a clipped gradient

    def __init__(self, tau, local_steps=1, *, inexact=False, tol=None, max_iter=None,
                 radius=None):
        super().__init__(tau, local_steps)
        self.inexact = bool(inexact)
        if inexact:
            self.name = "fedgradmp-inexact"
        self.tol = (1e-6 if inexact else 1e-10) if tol is None else float(tol)
        self.max_iter = (100 if inexact else 10000) if max_iter is None else int(max_iter)
        if not (self.tol > 0 and math.isfinite(self.tol)):
            raise ValueError(f"subproblem tolerance must be a positive number, got {tol!r}")
        if self.max_iter < 1:
            raise ValueError(f"subproblem iterations must be >= 1, got {max_iter!r}")
        if radius is not None and not (radius > 0 and math.isfinite(radius)):
            raise ValueError(f"--radius must be a positive finite number, got {radius!r}")
        self.radius = radius
        self.subproblem_iterations = []

    def local(self, ctx, X):
        shards, loss = ctx.shards, ctx.shards.loss
        exact = not self.inexact and loss.name == "squared" and not loss.l2
        for _ in range(self.local_steps):
            r = ctx.grad(X)
            cols, valid = merged_support(r, X, self.tau)
            A, y, counts = shards.columns(ctx.clients, cols)
            A = A * valid[:, None, :]
            if exact:
                c = solve_exact_lsq(A, y, valid)
            else:
                c0 = np.take_along_axis(X, cols, axis=1) * valid
                c, its, _ = solve_gd(A, y, counts.astype(float), loss, c0, self.tol,
                                     self.max_iter)
                self.subproblem_iterations.append(its)
            b = np.zeros_like(X)
            rr, kk = np.nonzero(valid)                   # scatter the real columns only
            b[rr, cols[rr, kk]] = c[rr, kk]
            X = project_l2_ball(self.ht(b), self.radius)
        return X

    def aggregate(self, state, mean):
        return project_l2_ball(self.ht(mean), self.radius)

    def settings(self):
        out = {**super().settings(), "radius": self.radius}
        if self.inexact:
            out.update(subproblem_tol=self.tol, subproblem_max_iter=self.max_iter)
        return out
