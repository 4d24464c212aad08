"""dp-bcfw-secure's sufficient-statistics path for the logistic loss (``logistic_path="ssp"``):
the math (scale rule, sensitivity, noise layout, the fit from the released statistics).

With labels y in {-1, +1} the logistic loss's second-order expansion at the margin 0 is
(m - 2y)^2 / 8 + const (docs/sensitivity.md 4.8), so its minimizer over (x, b) is a function of the
second moments of the augmented rows z_r = (a_r, 1, y_r) only: M = sum_r z_r z_r^T.  Instead of
releasing cross-products feature by feature with a private selection every round (the
retired taylor path: least squares on 2y), this path releases M once, with Gaussian noise, and fits the model from it by
post-processing: sufficient-statistics perturbation (Vu and Slavkovic 2009; Wang 2018,
"Revisiting differentially private linear regression", AdaSSP; Huggins, Adams and Broderick
2017, PASS-GLM, for GLMs by a polynomial expansion of the loss).

Privacy (docs/sensitivity.md 4.10).  Every party clips its entries to [-B_a, B_a] and its rows
to l2 norm C_k (the row clips of ``defaults``), and the rows are scaled by the public factor

    s = sqrt((1 + B_y^2) / sum_k C_k^2),

so that the features' part of z_r has squared norm at most 1 + B_y^2, that of the two other
coordinates together: ||z_r||^2 <= R^2 = 2 (1 + B_y^2) (the rule that balances the three parts
of the row; 4.10).  Replacing row r by r' moves M by D = z z^T - z' z'^T, and

    ||D||_F^2 = ||z||^4 + ||z'||^4 - 2 (z . z')^2 <= 2 R^4.

The released coordinates are the upper triangle of M (without the public n and the unused
y^T y) in the isometric layout svec: a diagonal entry with noise N(0, sigma^2), an off-diagonal
one with N(0, sigma^2 / 2) (= noise sigma on sqrt(2) M_ij).  So the release is one Gaussian of
l2 sensitivity Delta = sqrt(2) R^2 in svec coordinates; the cross-blocks' entries carry exact
discrete Gaussian noise in the ring (4.9), so the event is a ``DiscreteGaussian`` (its Renyi bound
is the continuous Gaussian's, which also covers the float-noised coordinates).  The event states
the ring's lattice (4.9.1: :func:`ring_resolution`, :func:`ring_coordinates`), so that pld,
optimal and best may charge it as the continuous Gaussian plus the total variation of the ring's
coordinates; the float-noised ones are continuous Gaussians already and add no TV term.

The fit (post-processing of the release; ``fit``): G = the noisy (a, 1) block, h = its column
with y.  The intercept is unpenalized (issue 30: outside the l1 balls and the ridge), so it is
profiled out exactly: with g = the noisy column sums sum_r a_r and n = 1^T 1 (public),

    C = G_aa - g g^T / n,   c = h_a - g h_b / n          (the centered Gram and label column),

and C's eigenvalues are raised to at least lambda = sigma sqrt(d + 2) (the noise's spectral norm
is about sigma sqrt(2 (d + 2)); an eigenvalue floor of that order keeps the noisy quadratic
strongly convex, as AdaSSP's ridge does, Wang 2018, while the directions the data dominate keep
their own curvature).  The quadratic over w = (x, b) is H = [[C_f + g g^T / n, g], [g^T, n]]
(C_f the floored C), whose minimizer over b for a fixed x is b = (h_b - g^T x) / n; then

    minimize  (1/n) [ w^T H w / 8 - h^T w / 2 ]   over w = (x, b),
    ||x_k||_1 <= eta / s per party (x in the scaled units), |b| <= B_b,

in closed form when unconstrained, else by accelerated projected gradient to convergence; x is
returned in the data's units (s x).  Without an intercept (B_b = 0) C = G_aa and c = h_a.

Why the intercept stays out of the ridge: shrinking b by even a small fraction of n leaves a
residual of the label mean that the features then explain through their own means; with rare
positives (|h_b| near n) that residual is of the order of the features' covariance with the
label and can turn the ranking around (docs/vertical_results.md, "The ssp fit leaves the intercept
unpenalized").
"""
from __future__ import annotations

import math

import numpy as np

from ....optim.l1ball import project_l1_ball

#: solver iterations of the post-processing fit (FISTA); it stops earlier at ``_TOL``
MAX_ITER = 5000
_TOL = 1e-10


def features_sq(label_bound, share=None) -> float:
    """a: the squared norm bound of a scaled row's features part.  None: the balanced rule
    a = 1 + B_y^2 (the logistic loss's; the features weigh as much as the row's (1, y)); a
    number: that a (the squared loss's, :func:`squared_share`)."""
    return 1.0 + float(label_bound) ** 2 if share is None else float(share)


def scale(label_bound, clips, share=None) -> float:
    """s = sqrt(a / sum_k C_k^2): the public factor on every party's rows (a:
    :func:`features_sq`; the balanced rule gives sqrt((1 + B_y^2) / sum_k C_k^2))."""
    return math.sqrt(features_sq(label_bound, share) / sum(float(c) ** 2 for c in clips))


def row_bound_sq(label_bound, share=None) -> float:
    """R^2 = a + 1 + B_y^2: the squared norm bound of an augmented scaled row (s a, 1, y)
    (2 (1 + B_y^2) under the balanced rule)."""
    return features_sq(label_bound, share) + 1.0 + float(label_bound) ** 2


def sensitivity(label_bound, share=None) -> float:
    """Delta = sqrt(2) R^2: the l2 sensitivity of svec(M) under replace-one."""
    return math.sqrt(2.0) * row_bound_sq(label_bound, share)


def squared_share(label_bound, clips, radius) -> float:
    """a for the squared loss fitted over per-party l1 balls of ``radius`` (data units; inf:
    the ridge fit, which keeps the balanced rule).

    The release's error in the fitted objective has two parts (docs/sensitivity.md 4.10.1):
    x^T E x / (2 s^2) from the features' block and x^T e / s from the label column, with E and
    e of scale sigma, proportional to R^2 = a + 1 + B_y^2.  Over balls of total l1 radius W they
    are at most of order W^2 sigma sum C_k^2 / (2 a) and W sigma sqrt(sum C_k^2 / a), so with
    q = W sqrt(sum C_k^2) the bound is proportional to

        (a + 1 + B_y^2) (q^2 / (2 a) + q / sqrt(a)),

    and a is its minimizer (at least the balanced 1 + B_y^2; public: the radius, the row clips
    and the label bound only).  The logistic expansion keeps the balanced rule."""
    c = 1.0 + float(label_bound) ** 2
    if not math.isfinite(radius):
        return c
    q = float(radius) * len(clips) * math.sqrt(sum(float(v) ** 2 for v in clips))

    def bound(a):
        return (a + c) * (q * q / (2.0 * a) + q / math.sqrt(a))

    from scipy.optimize import minimize_scalar

    hi = max(4.0 * c, c * q * q)
    res = minimize_scalar(bound, bounds=(c, hi), method="bounded",
                          options={"xatol": 1e-6 * c})
    return float(res.x) if bound(res.x) < bound(c) else c


def ring_coordinates(sizes, label_party) -> int:
    """The release's coordinates made as secure products, hence carrying the ring's discrete
    Gaussian: every cross-block A_k^T A_l (k < l, each once) and A_k^T y for every party k other
    than the label party.  Each party's own triangle and column sums and the label party's own
    products are noised locally by a continuous Gaussian: not lattice noise, no TV term."""
    sizes = [int(p) for p in sizes]
    L = int(label_party)
    cross = sum(sizes[k] * sizes[l] for k in range(len(sizes)) for l in range(k + 1, len(sizes)))
    return cross + sum(p for k, p in enumerate(sizes) if k != L)


def ring_resolution(frac) -> float:
    """The lattice step of the ring's coordinates in svec units: a cross entry M_ij is an exact
    integer at the product's scale 2^{2f} (rows encoded with ``frac`` = f fractional bits,
    truncated toward zero), and svec holds sqrt(2) M_ij, so the step is sqrt(2) 2^{-2f} (the
    noise on M_ij is N_Z(0, (sigma / sqrt 2)^2) at scale 2^{2f}, i.e. s = sigma / step lattice
    units, as docs/sensitivity.md 4.9.1 needs).  ``math.sqrt(2)`` is above sqrt(2) (the double
    nearest it rounds up), so the step is a hair coarser than the true one: valid (4.9.1)."""
    return math.sqrt(2.0) * 2.0 ** (-2 * int(frac))


def release_event(sigma, label_bound, lattice=None, share=None):
    """The one release: a discrete Gaussian (the cross-blocks' ring noise, 4.9) of sensitivity
    Delta in svec coordinates, replace-one.  ``lattice``: the ring's lattice (``(resolution,
    coordinates)``: :func:`ring_resolution`, :func:`ring_coordinates`; or a function of sigma
    returning it), so that pld, optimal and best may charge it as the continuous Gaussian plus
    its total variation (4.9.1); None: the Renyi charge only."""
    from accounting import REPLACE_ONE, DiscreteGaussian

    from ...privacy import lattice_fields

    return DiscreteGaussian(float(sigma), sensitivity(label_bound, share), neighboring=REPLACE_ONE,
                            **lattice_fields(lattice, float(sigma)))


def calibrate_sigma(epsilon, delta, label_bound, accountant="rdp", lattice=None,
                    share=None) -> float:
    """The smallest sigma (to the calibration's tolerance, on the safe side) whose release
    spends at most ``epsilon`` at ``delta`` (``lattice``: as :func:`release_event`, a function
    of sigma when the ring's fraction bits depend on it)."""
    from accounting import calibrate

    from ....errors import uncalibrated

    try:
        res = calibrate(lambda s: release_event(s, label_bound, lattice, share), float(epsilon),
                        float(delta), guess=4.0 * sensitivity(label_bound, share),
                        accountant=accountant)
    except ValueError as exc:
        raise uncalibrated(exc, epsilon, delta, accountant) from None
    return float(res.value)


def own_block(A_k, sigma, rng):
    """Party k's own part of svec(M), noised: the upper triangle of A_k^T A_k (row-major,
    diagonal included; noise sigma on the diagonal, sigma / sqrt 2 off it) and its column sums
    A_k^T 1 (noise sigma / sqrt 2, off-diagonal entries (a_i, 1))."""
    G = np.asarray((A_k.T @ A_k).todense() if hasattr(A_k, "todense") else A_k.T @ A_k,
                   dtype=np.float64)
    p = G.shape[0]
    iu = np.triu_indices(p)
    tri = G[iu]
    sums = np.asarray(A_k.sum(axis=0), dtype=np.float64).ravel()
    if sigma > 0:
        off = sigma / math.sqrt(2.0)
        sd = np.where(iu[0] == iu[1], sigma, off)
        tri = tri + rng.normal(0.0, 1.0, tri.shape[0]) * sd
        sums = sums + rng.normal(0.0, off, p)
    return tri, sums


def assemble(blocks, parts, n):
    """The noisy (d + 2) x (d + 2) symmetric M from every party's part (``GramPart`` values
    already split by :func:`split_part`): coordinates in the order of ``blocks``, then the
    intercept's 1 (its entry 1^T 1 = n is public, not released), then y (y^T y is not used).
    ``parts[k]``: dict with tri, sums, cross {l: p_k x p_l}, ty (p_k), ysum (float or None)."""
    d = sum(len(b) for b in blocks)
    M = np.zeros((d + 2, d + 2))
    one, yi = d, d + 1
    M[one, one] = float(n)
    for k, (b, part) in enumerate(zip(blocks, parts)):
        b = np.asarray(b, dtype=np.intp)
        p = len(b)
        iu = np.triu_indices(p)
        G = np.zeros((p, p))
        G[iu] = part["tri"]
        G = G + np.triu(G, 1).T
        M[np.ix_(b, b)] = G
        M[b, one] = M[one, b] = part["sums"]
        M[b, yi] = M[yi, b] = part["ty"]
        for l, C in part["cross"].items():
            bl = np.asarray(blocks[l], dtype=np.intp)
            M[np.ix_(b, bl)] = C
            M[np.ix_(bl, b)] = C.T
        if part.get("ysum") is not None:
            M[one, yi] = M[yi, one] = part["ysum"]
    return M


def part_length(k, sizes, label_party) -> int:
    """Words of party k's GramPart: its triangle and column sums, and at the label party A_L^T y
    and the label sum."""
    p = sizes[k]
    return p * (p + 1) // 2 + p + (p + 1 if k == int(label_party) else 0)


def pack_part(tri, sums, ty=None, ysum=None):
    """The flat float64 payload of a GramPart (``ty``, ``ysum``: the label party's only)."""
    extra = [] if ty is None else [ty, [float(ysum)]]
    return np.concatenate([tri, sums] + extra)


def split_part(k, sizes, words, label_party):
    """The inverse of :func:`pack_part` for party k, checked against the public sizes."""
    from ....errors import InputError

    words = np.asarray(words, dtype=np.float64)
    want = part_length(k, sizes, label_party)
    if words.shape != (want,):
        raise InputError(f"party {k} sent {words.size} statistics; its block of {sizes[k]} "
                         f"columns needs {want}")
    if not np.all(np.isfinite(words)):
        raise InputError(f"party {k} sent statistics that are not finite numbers")
    p = sizes[k]
    tri, sums = words[:p * (p + 1) // 2], words[p * (p + 1) // 2:p * (p + 1) // 2 + p]
    label = k == int(label_party)
    return {"tri": tri, "sums": sums, "ty": words[-p - 1:-1] if label else None,
            "ysum": float(words[-1]) if label else None}


def with_cross(parts, cross, sizes, label_party):
    """The parties' parts completed by the server's cross-blocks (``cross``: {(k, l): q_k x q_l
    floats, ``gram.py``'s B_k^T B_l + N}): each part gets ``cross`` {l: A_k^T A_l} for l > k and,
    at every party but L, ``ty`` = A_k^T y (the last column of B_k^T B_L for k < L, the last
    row of B_L^T B_k for k > L)."""
    L = int(label_party)
    out = []
    for k, part in enumerate(parts):
        p = sizes[k]
        part = dict(part, cross={l: cross[(k, l)][:p, :sizes[l]]
                                 for l in range(k + 1, len(sizes))})
        if k < L:
            part["ty"] = cross[(k, L)][:p, sizes[L]]
        elif k > L:
            part["ty"] = cross[(L, k)][sizes[L], :p]
        out.append(part)
    return out


#: the squared loss's eigenvalue floor over l1 balls, in units of the largest noise entry
#: (:func:`squared_floor`); measured (docs/vertical.md, "The squared loss's one release")
SQUARED_FLOOR = 1.5


def noise_entry(sigma, d) -> float:
    """sigma sqrt(2 ln(d (d + 1) / 2)): the largest of the d (d + 1) / 2 noise entries of the
    features' block expected (the maximum of that many Gaussians of scale sigma, to first
    order); sigma for d = 1."""
    return float(sigma) * math.sqrt(2.0 * math.log(d * (d + 1) / 2.0)) if d > 1 else float(sigma)


def squared_floor(sigma, d) -> float:
    """The eigenvalue floor of the squared loss's fit over l1 balls: :data:`SQUARED_FLOOR`
    times :func:`noise_entry` (a floor of the noise's spectral scale, :func:`ridge`, swamps the
    rows' curvature there; none at all lets the fit follow the noise on small tables)."""
    return SQUARED_FLOOR * noise_entry(sigma, d)


def ridge(sigma, d) -> float:
    """lambda = sigma sqrt(d + 2): the eigenvalue floor of the noisy centered Gram (module
    docstring)."""
    return float(sigma) * math.sqrt(d + 2.0)


def fit(M, blocks, *, lam, radius=math.inf, b_bound=math.inf, labels_scale=2.0):
    """(x in scaled units, b, solver iterations): the minimizer over w = (x, b) of least squares
    on the labels ``labels_scale`` y written in the released moments,

        w^T H w / 2 - labels_scale h^T w,

    H the noisy (a, 1) block with its centered part's eigenvalues raised to at least ``lam``
    and the intercept unpenalized (module docstring), h its column with y (for labels_scale 2
    this is the expansion's problem: (m - 2y)^2 / 8 is a quarter of least squares on 2y), over
    the per-party l1 balls of ``radius`` (inf: none) and |b| <= ``b_bound`` (0: no intercept).
    The unconstrained minimizer is solved in closed form (a pseudo-inverse where lam = 0); only
    when it leaves the feasible set does accelerated projected gradient (FISTA) start from its
    projection."""
    d = M.shape[0] - 2
    G = M[:d + 1, :d + 1]
    G = (G + G.T) / 2.0
    h = labels_scale * M[:d + 1, d + 1]
    n = float(G[d, d])
    g = G[:d, d] if b_bound > 0 else np.zeros(d)
    C = G[:d, :d] - np.outer(g, g) / n
    c = h[:d] - g * (h[d] / n)
    ev, V = np.linalg.eigh(C)
    ev = np.maximum(ev, float(lam))         # the floor (lam 0: at 0, the noiseless case)
    keep = ev > max(ev.max(), 0.0) * 1e-12
    x = V[:, keep] @ ((V[:, keep].T @ c) / ev[keep])
    w = np.append(x, (h[d] - g @ x) / n if b_bound > 0 else 0.0)
    idx = [np.asarray(b, dtype=np.intp) for b in blocks]

    def feasible(w):
        return abs(w[d]) <= b_bound and all(np.abs(w[b]).sum() <= radius for b in idx)

    if feasible(w):
        return w[:d], float(w[d]), 0

    def project(w):
        for b in idx:
            if radius < math.inf:   # optim.l1ball's projection (Duchi et al.), as every path's
                w[b] = project_l1_ball(w[b], radius)
        w[d] = min(max(w[d], -b_bound), b_bound)
        return w

    Gp = np.empty((d + 1, d + 1))
    Gp[:d, :d] = (V * ev) @ V.T + np.outer(g, g) / n
    Gp[:d, d] = Gp[d, :d] = g
    Gp[d, d] = n
    L = float(np.linalg.eigvalsh(Gp).max())
    w = project(w)
    yv, t, it = w.copy(), 1.0, 0
    for it in range(1, MAX_ITER + 1):
        w_new = project(yv - (Gp @ yv - h) / L)
        t_new = (1.0 + math.sqrt(1.0 + 4.0 * t * t)) / 2.0
        yv = w_new + ((t - 1.0) / t_new) * (w_new - w)
        step = float(np.linalg.norm(w_new - w))
        w, t = w_new, t_new
        if step <= _TOL * (1.0 + float(np.linalg.norm(w))):
            break
    return w[:d], float(w[d]), it


def calibrate_margins(M, x, b, *, lam=0.0, blocks=None, radius=math.inf, intercept=True):
    """``(x', b', slope)``: the fitted model rescaled so that its probabilities can be read.

    The expansion at margin 0 fits the direction of the model, not its scale: where the margins
    sit far from 0, or the label is rare, sigma(a^T x + b) is far from the label's frequency
    (issue 52: the insurance table's log-loss above the constant prior's while its AUC rose).
    Post-processing of the same release fixes the scale: the margin m = a^T x + b of each class
    has its mean and the pooled within-class variance in M (the class sums are
    (sum a +- sum a y) / 2 and the class sizes (n +- sum y) / 2, since y is +-1), so under the
    shared-variance Gaussian model of m given y (linear discriminant analysis on the one
    projected direction) the log-odds are linear in m:

        log P(y=1 | m) / P(y=-1 | m) = alpha m + c,  alpha = (mu_1 - mu_0) / v,
        c = -alpha (mu_1 + mu_0) / 2 + log(n_1 / n_0),

    and the model returned is (alpha x, alpha b + c) (without an intercept, c = 0).  The
    within-class scatter is the released one with its eigenvalues raised to at least ``lam``
    (the fit's ridge floor: the noise can make the raw quadratic form negative), and alpha is
    at most 1: the model is made less confident where its scale overshoots and its intercept
    moved to the label's rate, never made sharper than the expansion's own fit (measured on
    four held-out tables, five splits, eps 0.5, 1, 4: sharpening past 1 lowered the log-loss
    on one table and raised it far on the rare-label one; docs/vertical.md).  alpha > 0 keeps the ranking (the AUC)
    unchanged; where the noise leaves alpha <= 0, the variance <= 0 or a class empty, the model is
    returned as fitted (slope None).  With per-party l1 balls of ``radius`` the slope is capped so
    the model stays inside them."""
    d = M.shape[0] - 2
    n = float(M[d, d])
    sa, say, sy = M[:d, d], M[:d, d + 1], float(M[d, d + 1])
    n1, n0 = (n + sy) / 2.0, (n - sy) / 2.0
    if not (n1 >= 1.0 and n0 >= 1.0 and n > 2.0):
        return x, b, None
    s1, s0 = (sa + say) / 2.0, (sa - say) / 2.0
    mu1, mu0 = float(x @ s1) / n1 + b, float(x @ s0) / n0 + b
    G = (M[:d, :d] + M[:d, :d].T) / 2.0
    # pooled within-class scatter sum a a^T - n1 m1 m1^T - n0 m0 m0^T, floored at lam
    ev, V = np.linalg.eigh(G - np.outer(s1, s1) / n1 - np.outer(s0, s0) / n0)
    xv = V.T @ x
    v = float(xv @ (np.maximum(ev, float(lam)) * xv)) / (n - 2.0)
    if not (v > 0.0 and mu1 > mu0):
        return x, b, None
    alpha = min((mu1 - mu0) / v, 1.0)
    if radius < math.inf and blocks is not None:
        widest = max(float(np.abs(x[np.asarray(bl, dtype=np.intp)]).sum()) for bl in blocks)
        if widest > 0:
            alpha = min(alpha, radius / widest)
    c = -alpha * (mu1 + mu0) / 2.0 + math.log(n1 / n0) if intercept else 0.0
    return alpha * x, alpha * b + c, float(alpha)
