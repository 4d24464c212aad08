"""Centralized Frank-Wolfe and centralized differentially private Frank-Wolfe (baselines).

Problem: minimize f(x) = (1/n) sum_i loss(a_i^T x, y_i) over M, where M is one l1 ball
{||x||_1 <= eta} or a product of per-block l1 balls (``blocks``; see :mod:`vflpriv.optim.l1ball`).

``frank_wolfe`` -- Jaggi (2013), "Revisiting Frank-Wolfe", Algorithm 1 with the step
gamma_t = 2 / (t + 2), t = 0, 1, ...:  s_t = argmin_{s in M} <s, grad f(x_t)>,
x_{t+1} = (1 - gamma_t) x_t + gamma_t s_t, started at x_0 = 0.  Theorem 1 there:
f(x_t) - f* <= 2 C_f / (t + 2) for t >= 1, with C_f the curvature constant of f on M.  The
history records f(x_t) and the duality gap g(x_t) = <x_t - s_t, grad f(x_t)> >= f(x_t) - f*.
``step="line"`` takes gamma_t by exact line search instead (Jaggi 2013, section 2; the same
bound holds) and moves the intercept to its exact minimizer given x
(:mod:`vflpriv.optim.line_search`): the non-private learner's default in ``solve``.  On the fair
table (seed 0's split, the public rule's radius) 200 line-search rounds end 0.0008 above the
certified optimum's objective, 200 rounds of 2 / (t + 2) 0.014 above it (docs/vertical.md,
"The non-private learner").

``dp_frank_wolfe`` -- Talwar, Thakurta & Zhang (2015), "Nearly optimal private LASSO",
Algorithm 2: the same iteration, with the exact LMO replaced by report-noisy-max with Laplace
noise over the 2|P| vertices {+-eta e_j : j in P} of each ball.  Privacy is accounted by
:mod:`accounting` (one ``ReportNoisyMax("laplace", scale, sensitivity)`` per ball per iteration),
never asserted.

Score sensitivity (from declared bounds only; never from the data).  The engine first clips the
data to the declared ranges: a_ij <- clip(a_ij, -B_a, B_a) with B_a = ``feature_bound`` and
y_i <- clip(y_i, -B_y, B_y) with B_y = ``label_bound``.  The score of vertex sign * eta_k * e_j
is u_(j, sign) = -sign * g_j with g = grad f(x) = (1/n) sum_i a_i loss'(a_i^T x, y_i); the argmax
of u is the exact LMO of the ball (the factor eta_k is common to one ball's scores and drops out).
Every iterate lies in M, so |a_i^T x| <= ||a_i||_inf ||x||_1 <= B_a * sum_k eta_k =: Z and
|loss'(a_i^T x, y_i)| <= L := loss.derivative_bound(Z, B_y) (or ``derivative_clip`` c when the
per-sample derivatives are clipped to [-c, c], L = min(c, that bound)).  x_t depends only on
earlier releases, so it is fixed across neighbouring datasets (adaptive composition), and:

* replace one row i:  |g_j - g'_j| = (1/n) |a_ij l'_i - a'_ij l'_i'| <= 2 B_a L / n;
* add/remove one row (n vs n - 1 rows, D' = D minus row i):  n g_j = (n - 1) g'_j + a_ij l'_i, so
  |g_j - g'_j| = |a_ij l'_i - g'_j| / n <= 2 B_a L / n (|g'_j| <= B_a L as an average).

Hence every score moves by at most Delta = 2 B_a L / n under either relation, and each selection
is the event ``ReportNoisyMax("laplace", b, Delta)``, which the accountant prices at
(2 Delta / b)-DP (scores may move in opposite directions; Dwork & Roth 2014, Claim 3.9).  T
iterations over K balls compose as ``SelfComposed(that, T * K)``; for a target (epsilon, delta)
the scale b is solved by ``accounting.calibrate`` under the chosen accountant (conservative).

The returned iterate x_T is a post-processing of the selections (the step sizes are public).  The
recorded objective and gap histories use the private data and are diagnostics for evaluation,
not private outputs.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ..errors import InputError
from ..noise import generator as noise_generator
from ._checks import add_column, check_data, check_positive, check_positive_int, round_down
from .l1ball import _lmo_blocks, check_blocks, check_radii, fw_gap
from .losses import ClippedLoss, get_loss


@dataclass
class FWResult:
    """Output of :func:`frank_wolfe` / :func:`dp_frank_wolfe`.

    ``objective[t]`` = f(x_t) for t = 0..T (x_0 = 0); ``gap[t]`` = <x_t - s_t, grad f(x_t)> for
    t = 0..T-1 with the exact LMO vertex s_t (for DP-FW it is computed for the record only);
    ``coords[t, k]``, ``signs[t, k]`` give the vertex chosen in block k at iteration t.
    """

    x: np.ndarray
    objective: np.ndarray
    gap: np.ndarray
    coords: np.ndarray
    signs: np.ndarray
    step_sizes: np.ndarray
    iterations: int
    privacy: dict | None = field(default=None)
    intercept: float = 0.0
    #: b_{t+1} after each round t (zeros without an intercept): replays need the whole path
    intercepts: np.ndarray | None = None

    @property
    def support(self):
        return np.flatnonzero(self.x)


def _prepare(A, y, loss, eta, blocks, iterations):
    A, y = check_data(A, y)
    loss = get_loss(loss)
    blocks = check_blocks(blocks, A.shape[1])
    radii = check_radii(eta, len(blocks))
    T = check_positive_int("iterations", iterations)
    return A, y, loss, blocks, radii, T


def _run(A, y, loss, blocks, radii, T, select, intercept=None, line=False, callback=None):
    """The Frank-Wolfe loop shared by FW and DP-FW; ``select(t, g)`` returns (coords, signs).

    ``intercept`` (None: no intercept) is ``(release, bound)``: ``release(t, g_b)`` returns the
    value of df/db the step uses (g_b itself, or a noisy release of it), and the intercept moves
    with :func:`vflpriv.optim.intercept.update` in the same round as x.  ``line`` (non-private
    FW only: it reads the data): gamma_t by exact line search and b to its exact minimizer
    (:mod:`vflpriv.optim.line_search`)."""
    from . import intercept as IC
    from . import line_search as LS

    n, d = A.shape
    x = np.zeros(d)
    b = 0.0
    z = np.zeros(n)                      # z = A x + b, updated with one column per block
    K = len(blocks)
    objective = np.empty(T + 1)
    gap = np.empty(T)
    coords = np.empty((T, K), dtype=np.int64)
    signs = np.empty((T, K))
    steps = 2.0 / (np.arange(T) + 2.0)
    intercepts = np.zeros(T)
    objective[0] = loss.objective(A, x, y, Ax=z)
    for t in range(T):
        dz = loss.derivative(z, y)
        g = np.asarray(A.T @ dz, dtype=float).ravel() / n
        gap[t] = fw_gap(x, g, blocks, radii)
        c, s = select(t, g)
        coords[t], signs[t] = c, s
        if line:
            d_z = np.zeros(n)                       # A s - A x: the direction's margins
            for j, sg, r in zip(c, s, radii):
                add_column(d_z, A, j, sg * r)
            d_z -= z - b
            steps[t] = LS.fw_step(loss, z, d_z, y)
        gamma = steps[t]
        x *= 1.0 - gamma
        z -= b
        z *= 1.0 - gamma
        for j, sg, r in zip(c, s, radii):
            x[j] += gamma * sg * r
            add_column(z, A, j, gamma * sg * r)
        if intercept is not None:
            release, bound_b = intercept
            if line:
                b = LS.best_intercept(loss, z, y, bound_b, start=b)
            else:
                b = IC.update(loss, b, release(t, float(np.mean(dz))), t, bound_b)
        intercepts[t] = b
        z += b
        objective[t + 1] = loss.objective(A, x, y, Ax=z)
        if callback is not None:          # a progress display: round t done, its objective
            callback(t, float(objective[t + 1]))
    return FWResult(x=x, objective=objective, gap=gap, coords=coords, signs=signs,
                    step_sizes=steps, iterations=T, intercept=b, intercepts=intercepts)


#: Frank-Wolfe's step rules: Jaggi's 2 / (t + 2) ("fw", paper 004's FW and DP-FW's iterates
#: without noise) and the exact line search ("line", :mod:`vflpriv.optim.line_search`)
FW_STEPS = ("fw", "line")


def frank_wolfe(A, y, loss="squared", eta=1.0, *, blocks=None, iterations=100,
                fit_intercept=False, step="fw", callback=None):
    """Frank-Wolfe (Jaggi 2013) on one l1 ball or a product of l1 balls.

    Parameters: A (n x d, dense or scipy.sparse), y (n,), ``loss`` (object or name), ``eta`` (the
    radius, or one radius per block), ``blocks`` (None = one ball; else a partition of the
    columns), ``iterations`` T, ``fit_intercept`` (an unpenalized intercept moved every round,
    :mod:`vflpriv.optim.intercept`), ``step``: "fw" (gamma_t = 2 / (t + 2); the intercept by the
    damped Newton step of :mod:`vflpriv.optim.intercept`) or "line" (gamma_t by exact line
    search on [0, 1], then the intercept to its exact minimizer given x;
    :mod:`vflpriv.optim.line_search`).  ``callback(t, f)`` (optional) after each round t with
    the objective it reached (a progress display).  Returns :class:`FWResult` (``step_sizes``
    the gammas used).
    """
    from .intercept import bound

    if step not in FW_STEPS:
        raise InputError(f"step must be one of {FW_STEPS}, got {step!r}")
    A, y, loss, blocks, radii, T = _prepare(A, y, loss, eta, blocks, iterations)
    icpt = ((lambda t, g_b: g_b), bound(loss)) if fit_intercept else None
    return _run(A, y, loss, blocks, radii, T, lambda t, g: _lmo_blocks(g, blocks), icpt,
                line=step == "line", callback=callback)


def derivative_bound(loss, feature_bound, label_bound, radii, derivative_clip=None,
                     intercept_bound=0.0):
    """L: |loss'(z, y)| over |z| <= B_a * sum(radii) + B_b (B_b the intercept's public range,
    0 without one), |y| <= B_y; ``derivative_clip`` c lowers it to min(c, that)."""
    loss = get_loss(loss)
    B_a = check_positive("feature_bound", feature_bound)
    B_y = check_positive("label_bound", label_bound)
    L = loss.derivative_bound(B_a * float(np.sum(radii)) + float(intercept_bound), B_y)
    if derivative_clip is not None:
        L = min(L, check_positive("derivative_clip", derivative_clip))
    return L


def score_sensitivity(loss, n, feature_bound, label_bound, radii, derivative_clip=None,
                      intercept_bound=0.0):
    """Delta = 2 B_a L / n, L = :func:`derivative_bound` (module docstring)."""
    L = derivative_bound(loss, feature_bound, label_bound, radii, derivative_clip,
                         intercept_bound)
    return 2.0 * float(feature_bound) * L / int(n)


def noisy_lmo(g, scale, rng):
    """Report-noisy-max with Laplace(scale) noise over the 2 |g| vertices of one l1 ball.

    Scores are interleaved: entry 2j is the vertex -eta e_j (score g_j), entry 2j+1 the vertex
    +eta e_j (score -g_j), so with ``scale = 0`` the argmax is the exact LMO with the same
    tie-breaking as :func:`vflpriv.optim.l1ball.lmo_l1_ball`.  Returns (j, sign)."""
    scores = np.empty(2 * g.size)
    scores[0::2] = g
    scores[1::2] = -g
    if scale > 0:
        scores += rng.laplace(0.0, scale, size=scores.size)
    w = int(np.argmax(scores))
    return w // 2, (-1.0 if w % 2 == 0 else 1.0)


def _clip_data(A, y, B_a, B_y):
    if sp.issparse(A):
        A = A.copy()
        np.clip(A.data, -B_a, B_a, out=A.data)
    else:
        A = np.clip(A, -B_a, B_a)
    return A, np.clip(y, -B_y, B_y)


def dp_frank_wolfe(A, y, loss="squared", eta=1.0, *, iterations=100, feature_bound,
                   label_bound, epsilon=None, delta=None, noise_scale=None, blocks=None,
                   derivative_clip=None, accountant="best", budget_filter=None,
                   neighboring="add_remove", party="server", rng=None, fit_intercept=False):
    """Differentially private Frank-Wolfe (Talwar, Thakurta & Zhang 2015), see module docstring.

    ``fit_intercept``: an unpenalized intercept b in |b| <= B_b (``vflpriv.optim.intercept``),
    moved every round from a Laplace release of its derivative g_b = (1/n) sum_i l'_i, whose
    sensitivity is Delta_b = 2 L / n under either relation (|l'_i| <= L, as for the scores with
    B_a = 1).  Its Laplace scale is b Delta_b / Delta, so each round's intercept release costs
    Delta / b, half of one selection's 2 Delta / b; the margins' bound |z| <= B_a sum eta + B_b
    enters L.  The plan is ``Composed(SelfComposed(RNM, T K), SelfComposed(Laplace, T))``.

    Give either ``epsilon`` and ``delta`` (the Laplace scale is calibrated by
    ``accounting.calibrate`` so that T*K selections cost at most (epsilon, delta) under
    ``accountant``) or ``noise_scale`` (the spend is then computed by the accountant).
    ``epsilon=inf`` runs without noise and spends nothing (exactly the Frank-Wolfe iterates).
    ``budget_filter`` (an ``accounting.BudgetFilter``) is charged for each selection before its
    noise is drawn; it raises ``BudgetExceeded`` and the run stops with nothing released.
    ``rng``: a seed (the noise generator is then ChaCha20, :func:`vflpriv.noise.generator`) or a
    ``numpy.random.Generator`` (used as given).

    Returns :class:`FWResult` whose ``privacy`` dict holds ``noise_scale``, ``sensitivity``,
    ``selections``, ``event`` (the composed event, as a dict), ``epsilon`` (the accountant's
    value at ``delta``), ``accountant``, ``delta``, ``calibration``.
    """
    import accounting

    from .intercept import bound as intercept_range

    A, y, loss, blocks, radii, T = _prepare(A, y, loss, eta, blocks, iterations)
    n = A.shape[0]
    K = len(blocks)
    B_b = intercept_range(loss, label_bound) if fit_intercept else 0.0
    delta_sens = score_sensitivity(loss, n, feature_bound, label_bound, radii, derivative_clip,
                                   B_b)
    delta_b = 2.0 * derivative_bound(loss, feature_bound, label_bound, radii, derivative_clip,
                                     B_b) / n
    B_a, B_y = float(feature_bound), float(label_bound)
    c = None if derivative_clip is None else float(derivative_clip)
    if neighboring not in (accounting.ADD_REMOVE, accounting.REPLACE_ONE):
        raise InputError(f"neighboring must be 'add_remove' or 'replace_one', got {neighboring!r}")
    if (epsilon is None) == (noise_scale is None):
        raise InputError("give exactly one of epsilon (with delta) or noise_scale")
    rng = rng if isinstance(rng, np.random.Generator) else noise_generator(rng)

    def make_event(b):
        sel = accounting.SelfComposed(
            accounting.ReportNoisyMax("laplace", b, delta_sens, neighboring=neighboring), T * K)
        if not fit_intercept:
            return sel
        return accounting.Composed((sel, accounting.SelfComposed(intercept_event(b), T)))

    def intercept_event(b):
        return accounting.Laplace(b * delta_b / delta_sens, delta_b, neighboring=neighboring)

    calibration = None
    if epsilon is not None:
        eps = check_positive("epsilon", epsilon, allow_inf=True)
        if math.isinf(eps):
            scale = 0.0
            if budget_filter is not None and math.isfinite(budget_filter.epsilon):
                raise InputError("epsilon=inf (no noise) cannot run under a finite budget filter")
        else:
            if delta is None:
                raise InputError("delta is required with a finite epsilon")
            # Pure-DP composition gives scale = 2 * Delta * T * K / epsilon; start there.
            guess = 2.0 * delta_sens * T * K / eps
            try:
                calibration = accounting.calibrate(make_event, eps, delta, guess=guess,
                                                   accountant=accountant, decreasing=True)
            except ValueError as exc:
                from ..errors import uncalibrated

                raise uncalibrated(exc, eps, delta, accountant) from None
            scale = float(calibration.value)
    else:
        scale = check_positive("noise_scale", noise_scale)
    if scale > 0 and delta is None:
        raise InputError("delta is required to report the spend of a noisy run")

    A_c, y_c = _clip_data(A, y, B_a, B_y) if scale > 0 else (A, y)
    event = (accounting.ReportNoisyMax("laplace", scale, delta_sens, neighboring=neighboring)
             if scale > 0 else None)

    used_loss = ClippedLoss(loss, c) if (c is not None and scale > 0) else loss
    if budget_filter is not None and event is not None:
        # the whole run up front: refused before the first selection if it cannot fit
        def advice():
            # the smallest fitting noise, and the epsilon that calibrates to it (calibration is
            # conservative and the plan is one event type, so any epsilon <= it fits)
            plan = make_event              # all T * K selections at noise scale b
            if not budget_filter.fits(plan(scale * 1e12), party):
                return "the budget is used up: no noise fits"
            lo, hi = scale, 2 * scale
            while not budget_filter.fits(plan(hi), party):
                lo, hi = hi, 2 * hi
            while hi / lo > 1.0001:
                mid = math.sqrt(lo * hi)
                lo, hi = (lo, mid) if budget_filter.fits(plan(mid), party) else (mid, hi)
            e = accounting.get_accountant(accountant).epsilon(plan(hi), delta)
            return (f"{T} iterations need noise scale >= {hi:.4g}; epsilon <= "
                    f"{round_down(e):.4g} fits")
        budget_filter.check_plan(make_event(scale), party=party,
                                 advice=advice)

    def select(t, g):
        coords = np.empty(K, dtype=np.int64)
        signs = np.empty(K)
        for k, idx in enumerate(blocks):
            if budget_filter is not None and event is not None:
                # Charged before the noise is drawn: an overspend raises and nothing is released.
                budget_filter.charge(event, party=party, round=t,
                                     note=f"dp-fw selection, block {k}")
            coords[k], signs[k] = noisy_lmo(g[idx], scale, rng)
            coords[k] = idx[coords[k]]
        return coords, signs

    def release(t, g_b):
        if scale <= 0:
            return g_b
        ev = intercept_event(scale)
        if budget_filter is not None:
            budget_filter.charge(ev, party=party, round=t, note="dp-fw intercept derivative")
        return g_b + rng.laplace(0.0, ev.scale)

    result = _run(A_c, y_c, used_loss, blocks, radii, T, select,
                  (release, B_b) if fit_intercept else None)
    privacy = {"noise": "laplace", "noise_scale": scale, "sensitivity": delta_sens,
               "selections": T * K, "neighboring": neighboring, "delta": delta,
               "intercept": ({"sensitivity": delta_b, "scale": scale * delta_b / delta_sens,
                              "bound": B_b} if fit_intercept else None),
               "feature_bound": B_a, "label_bound": B_y, "derivative_clip": c}
    if scale > 0:
        total = make_event(scale)
        rep = accounting.report(total, delta=delta)
        privacy.update(event=total.to_dict(), epsilon=dict(rep.values, best=rep.best_value),
                       accountant=rep.best_accountant)
    else:
        privacy.update(event=None, epsilon={"best": math.inf}, accountant=None)
    if calibration is not None:
        privacy["calibration"] = {"value": calibration.value, "epsilon": calibration.epsilon,
                                  "accountant": calibration.accountant,
                                  "per_accountant": calibration.per_accountant}
    result.privacy = privacy
    return result
