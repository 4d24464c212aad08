"""Reference optimum on the l1 ball or the product of per-block l1 balls, certified by its FW gap.

Problem:  f* = min { f(x) = (1/n) sum_i loss(a_i^T x, y_i) : ||x_{P_k}||_1 <= eta_k, k = 1..K }.

Certificate: for convex f and feasible x, the Frank-Wolfe duality gap (Jaggi 2013, Section 2)
    gap(x) = max_{s in M} <x - s, grad f(x)> = <x, grad f(x)> + sum_k eta_k ||grad_{P_k} f(x)||_inf
satisfies f(x) - f* <= gap(x).  We report ``relative_gap = gap / max(|f(x)|, f(0) - f(x))`` and
call the result certified when it is <= ``tol``.  When the optimal loss is not small against the
achievable decrease this bounds (f(x) - f*) / f(x); when f* is near 0 (interpolation) it measures
the gap against f(0) - f(x), the scale of every optimization curve started at x = 0 (x = 0 is
always feasible, so f(0) >= f(x) for any reasonable x).  It is 0 when the gap is 0.
An uncertified result is never returned as certified: by default it raises
:class:`ReferenceNotCertified`; with ``on_failure="flag"`` it is returned with ``certified=False``
and a warning.

Solvers:

* ``"lasso"`` (one block, squared loss): the constrained problem min f s.t. ||x||_1 <= eta and the
  Lasso min f + alpha ||x||_1 (scikit-learn's objective (1/2n)||y - Ax||^2 + alpha ||x||_1 is
  exactly our f plus the penalty) share solutions when alpha is the KKT multiplier of the
  constraint; ||x(alpha)||_1 is non-increasing in alpha, so we bracket eta on scikit-learn's
  ``lasso_path`` and solve ||x(alpha)||_1 = eta by Brent's method on log(alpha) with warm-started
  ``Lasso`` fits, then polish (below) and certify.
* ``"fista"`` (any case): accelerated projected gradient (Beck & Teboulle 2009, FISTA) with
  backtracking and the gradient-based adaptive restart of O'Donoghue & Candes (2015), using the
  exact blockwise l1-ball projection.
* ``"lstsq"`` (``solver="auto"``, squared loss, n >= d <= 2000): when the least-squares solution is feasible the
  constraint is inactive and that solution is the optimum (still certified by the gap).
* polish (squared loss): once the support S and signs sigma are identified, the optimum solves the
  KKT system  (1/n) A_S^T A_S x_S + C lambda = (1/n) A_S^T y,  C^T x_S = eta_active,  where
  C[j, k] = sigma_j for j in S and P_k (active blocks); the solution is accepted only if it is
  feasible and its gap certificate is better.
"""
from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..errors import InputError
from ._checks import check_data, check_positive, check_positive_int
from .l1ball import _project, check_blocks, check_radii, fw_gap
from .losses import SquaredLoss, get_loss


class ReferenceNotCertified(RuntimeError):
    """The solver stopped before the FW-gap certificate reached the requested tolerance."""


@dataclass
class ReferenceResult:
    x: np.ndarray
    objective: float
    gap: float
    relative_gap: float
    certified: bool
    solver: str
    iterations: int
    seconds: float
    lasso_alpha: float | None = None
    #: ||grad_{P_k} f(x)||_inf per block: at the optimum, the KKT multiplier of ball k (the
    #: Lasso penalty that gives the same solution for one ball; ~0 for a ball that does not bind)
    multipliers: np.ndarray | None = None
    #: the intercept b of the optimum (``intercept_bound`` given), else None
    intercept: float | None = None


class _Problem:
    def __init__(self, A, y, loss, blocks, radii):
        self.A, self.y, self.loss, self.blocks, self.radii = A, y, loss, blocks, radii
        self.n = A.shape[0]
        self.f0 = self.f_from_z(np.zeros(self.n))      # f at x = 0 (always feasible)

    def matvec(self, x):
        return np.asarray(self.A @ x, dtype=float).ravel()

    def grad_from_z(self, z):
        return np.asarray(self.A.T @ self.loss.derivative(z, self.y), dtype=float).ravel() / self.n

    def f_from_z(self, z):
        return float(np.mean(self.loss.value(z, self.y)))

    def project(self, v):
        out = np.empty_like(v)
        for idx, r in zip(self.blocks, self.radii):
            out[idx] = _project(v[idx], r)
        return out

    def multipliers(self, x):
        g = self.grad_from_z(self.matvec(x))
        return np.array([np.max(np.abs(g[idx])) for idx in self.blocks])

    def certificate(self, x):
        z = self.matvec(x)
        f = self.f_from_z(z)
        gap = max(fw_gap(x, self.grad_from_z(z), self.blocks, self.radii), 0.0)
        scale = max(abs(f), self.f0 - f)
        rel = 0.0 if gap == 0.0 else (gap / scale if scale > 0 else math.inf)
        return f, gap, rel


def _power_lipschitz(prob, iters=30, seed=0):
    """Estimate of smoothness * ||A||_2^2 / n (backtracking corrects an underestimate)."""
    v = np.random.default_rng(seed).standard_normal(prob.A.shape[1])
    s2 = 0.0
    for _ in range(iters):
        v /= np.linalg.norm(v) or 1.0
        w = np.asarray(prob.A.T @ prob.matvec(v)).ravel()
        s2 = float(np.linalg.norm(w))
        v = w
    lab = float(np.max(np.abs(prob.y))) if prob.y.size else 1.0
    return max(prob.loss.smoothness(max(lab, 1e-12)) * s2 / prob.n, 1e-12)


def _fista(prob, x0, tol, max_iter, check_every=10, polish=None):
    """FISTA with backtracking and adaptive restart; returns (x, iterations, certificate)."""
    x = prob.project(np.asarray(x0, dtype=float))
    zx = prob.matvec(x)
    yk, zy = x.copy(), zx.copy()
    L = _power_lipschitz(prob)
    t = 1.0
    best = (x.copy(),) + prob.certificate(x)
    next_polish = 1e-4
    for it in range(1, max_iter + 1):
        fy = prob.f_from_z(zy)
        gy = prob.grad_from_z(zy)
        while True:
            x_new = prob.project(yk - gy / L)
            z_new = prob.matvec(x_new)
            dx = x_new - yk
            # Sufficient decrease (Beck & Teboulle 2009, eq. (3.2) with backtracking).
            if prob.f_from_z(z_new) <= fy + gy @ dx + 0.5 * L * (dx @ dx) + 1e-15 * abs(fy):
                break
            L *= 2.0
        if (yk - x_new) @ (x_new - x) > 0:          # restart (O'Donoghue & Candes 2015)
            t = 1.0
            yk, zy = x_new.copy(), z_new.copy()
        else:
            t_new = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * t * t))
            beta = (t - 1.0) / t_new
            yk = x_new + beta * (x_new - x)
            zy = z_new + beta * (z_new - zx)
            t = t_new
        x, zx = x_new, z_new
        if it % check_every == 0 or it == max_iter:
            cert = prob.certificate(x)
            if cert[1] <= best[2]:                   # keep the smallest absolute gap
                best = (x.copy(),) + cert
            if best[3] <= tol:
                return best, it
            if polish is not None and cert[2] <= next_polish:
                next_polish = cert[2] * 1e-2         # try again only after real progress
                xp = polish(x)
                if xp is not None:
                    cp = prob.certificate(xp)
                    if cp[1] < best[2]:
                        best = (xp,) + cp
                        if best[3] <= tol:
                            return best, it
                        x, zx = xp.copy(), prob.matvec(xp)
                        yk, zy, t = x.copy(), zx.copy(), 1.0
            zy = prob.matvec(yk)                     # refresh the recurrences' rounding error
            zx = prob.matvec(x)
    return best, max_iter


def _polish_squared(prob, x, rel_active=1e-6):
    """Solve the squared-loss KKT system on the support and signs of ``x`` (module docstring)."""
    S = np.flatnonzero(x)
    if S.size == 0 or S.size > 5000:
        return None
    sigma = np.sign(x[S])
    A_S = prob.A[:, S]
    A_S = A_S.toarray() if sp.issparse(A_S) else np.asarray(A_S)
    cols, rhs_eta = [], []
    for idx, r in zip(prob.blocks, prob.radii):
        in_block = np.isin(S, idx)
        if in_block.any() and np.abs(x[idx]).sum() >= r * (1.0 - rel_active):
            cols.append(np.where(in_block, sigma, 0.0))
            rhs_eta.append(r)
    C = np.array(cols).T if cols else np.zeros((S.size, 0))
    H = A_S.T @ A_S / prob.n
    m = C.shape[1]
    M = np.block([[H, C], [C.T, np.zeros((m, m))]])
    rhs = np.concatenate([A_S.T @ prob.y / prob.n, rhs_eta])
    sol = np.linalg.lstsq(M, rhs, rcond=None)[0]
    xs, lam = sol[:S.size], sol[S.size:]
    if np.any(lam < 0) or np.any(np.sign(xs) != sigma):
        return None
    out = np.zeros_like(x)
    out[S] = xs
    return prob.project(out)


def _lasso_route(prob, max_iter):
    """One block, squared loss: find alpha with ||x_lasso(alpha)||_1 = eta with scikit-learn.

    Walks down the regularization path alpha_max * 2^-k with warm-started ``Lasso`` fits until
    the l1 norm reaches eta (the path's norm is non-increasing in alpha), then Brent's method on
    log(alpha) inside the last bracket.  The fits only need to identify the support and signs: the
    KKT polish then solves the constrained problem on that support exactly, and the FW gap decides.
    Returns (x, alpha), or None when even alpha_max * 2^-40 stays inside the ball (the constraint
    may be inactive; FISTA handles that case).
    """
    from scipy.optimize import brentq
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import Lasso

    A, y, eta, n = prob.A, prob.y, float(prob.radii[0]), prob.n
    alpha_max = float(np.max(np.abs(np.asarray(A.T @ y).ravel()))) / n
    if alpha_max == 0.0:
        return np.zeros(A.shape[1]), 0.0
    model = Lasso(alpha=alpha_max, fit_intercept=False, tol=1e-8, max_iter=max_iter,
                  warm_start=True, selection="cyclic")

    def norm_minus_eta(log_alpha):
        model.set_params(alpha=math.exp(log_alpha))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(A, y)
        return float(np.abs(model.coef_).sum()) - eta

    if eta == 0.0:
        return np.zeros(A.shape[1]), alpha_max
    hi = math.log(alpha_max)                         # norm 0 < eta there
    for k in range(1, 41):
        lo = math.log(alpha_max) - k * math.log(2.0)
        if norm_minus_eta(lo) >= 0:
            break
        hi = lo
    else:
        return None
    log_alpha = brentq(norm_minus_eta, lo, hi, xtol=1e-10, rtol=1e-10, maxiter=60)
    norm_minus_eta(log_alpha)
    return np.asarray(model.coef_, dtype=float).copy(), math.exp(log_alpha)


def _with_intercept(A, y, loss, blocks, radii, bound_b, tol, max_iter, on_failure):
    """min f(x, b) over the balls and |b| <= B_b: b is one more column (all ones) in a block of
    its own whose "l1 ball" of radius B_b is the interval [-B_b, B_b], so FISTA's projection
    clips it and the FW gap certifies it (its term b g_b + B_b |g_b|)."""
    if not (bound_b > 0 and math.isfinite(bound_b)):
        raise InputError(f"intercept_bound must be a positive finite number, got {bound_b!r}")
    n, d = A.shape
    ones = np.ones((n, 1))
    Ab = sp.hstack([sp.csr_matrix(A), sp.csr_matrix(ones)], format="csr") if sp.issparse(A) \
        else np.hstack([np.asarray(A, dtype=float), ones])
    res = reference_optimum(Ab, y, loss, blocks=list(blocks) + [np.array([d])],
                            eta=list(radii) + [bound_b], tol=tol, max_iter=max_iter,
                            solver="fista", on_failure=on_failure)
    res.intercept = float(res.x[d])
    res.x = res.x[:d]
    res.multipliers = None if res.multipliers is None else res.multipliers[:-1]
    return res


def reference_optimum(A, y, loss="squared", blocks=None, eta=1.0, tol=1e-8, *,
                      max_iter=100_000, solver="auto", on_failure="raise", intercept_bound=None):
    """Certified minimizer of f over the product of per-block l1 balls (module docstring).

    ``intercept_bound`` B_b: also an unpenalized intercept b in [-B_b, B_b] (margins A x + b),
    the model ``fit_intercept`` fits (``vflpriv.optim.intercept``); ``ReferenceResult.intercept``.

    ``solver``: "auto" (scikit-learn Lasso route for one block with the squared loss, else FISTA),
    "lasso" or "fista".  Returns :class:`ReferenceResult` (``x``, ``objective``, ``gap``,
    ``relative_gap``, ``certified``, ``solver``, ...).
    """
    t0 = time.perf_counter()
    A, y = check_data(A, y)
    loss = get_loss(loss)
    blocks = check_blocks(blocks, A.shape[1])
    radii = check_radii(eta, len(blocks))
    if intercept_bound is not None:
        return _with_intercept(A, y, loss, blocks, radii, float(intercept_bound), tol, max_iter,
                               on_failure)
    tol = check_positive("tol", tol)
    max_iter = check_positive_int("max_iter", max_iter)
    if solver not in ("auto", "lasso", "fista"):
        raise InputError(f"solver must be 'auto', 'lasso' or 'fista', got {solver!r}")
    if on_failure not in ("raise", "flag"):
        raise InputError(f"on_failure must be 'raise' or 'flag', got {on_failure!r}")
    squared = isinstance(loss, SquaredLoss)
    if solver == "lasso" and not (squared and len(blocks) == 1):
        raise InputError("solver='lasso' needs the squared loss and a single block (one l1 ball)")
    prob = _Problem(A, y, loss, blocks, radii)
    polish = (lambda x: _polish_squared(prob, x)) if squared else None

    x0, used, alpha = np.zeros(A.shape[1]), "fista", None
    if solver == "auto" and squared and A.shape[0] >= A.shape[1] and A.shape[1] <= 2000:
        # Full-column-rank least squares has one minimizer; if it lies in M the constraint is
        # inactive and it is the optimum (the FW gap below still has to certify it).
        dense = A.toarray() if sp.issparse(A) else A
        x_ls = np.linalg.lstsq(dense, y, rcond=None)[0]
        if all(np.abs(x_ls[idx]).sum() <= r for idx, r in zip(blocks, radii)):
            f, gap, rel = prob.certificate(x_ls)
            if rel <= tol:
                return ReferenceResult(x_ls, f, gap, rel, True, "lstsq", 0,
                                       time.perf_counter() - t0, None, prob.multipliers(x_ls))
    if squared and len(blocks) == 1 and solver in ("auto", "lasso"):
        found = _lasso_route(prob, max_iter)
        if found is not None:
            x0, alpha = found
            x0 = prob.project(x0)
            used = "sklearn-lasso"
            xp = polish(x0)
            cands = [x0] + ([xp] if xp is not None else [])
            certs = [prob.certificate(c) for c in cands]
            k = int(np.argmin([c[2] for c in certs]))
            x0 = cands[k]
            if k == 1:
                used += "+kkt-polish"
            if certs[k][2] <= tol:
                f, gap, rel = certs[k]
                return ReferenceResult(x0, f, gap, rel, True, used, 0,
                                       time.perf_counter() - t0, alpha, prob.multipliers(x0))
            used += "+fista"
    (x, f, gap, rel), iters = _fista(prob, x0, tol, max_iter, polish=polish)
    certified = rel <= tol
    res = ReferenceResult(x, f, gap, rel, certified, used, iters, time.perf_counter() - t0, alpha,
                          prob.multipliers(x))
    if not certified:
        msg = (f"reference optimum not certified: relative FW gap {rel:.3g} > tol {tol:g} after "
               f"{iters} iterations of {used}")
        if on_failure == "raise":
            raise ReferenceNotCertified(msg)
        warnings.warn(msg, RuntimeWarning, stacklevel=2)
    return res
