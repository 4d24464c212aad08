"""Centralized DP baselines from diffprivlib (IBM) for ``vflpriv bench utility``.

diffprivlib is the well-kept library for textbook centralized DP models, so the bench uses it
instead of re-implementing them: ``dpl-linreg`` is ``diffprivlib.models.LinearRegression``
(functional mechanism, Zhang et al. 2012: Laplace noise on the coefficients of the quadratic
objective, pure epsilon-DP, unconstrained least squares on data clipped to the declared
bounds), ``dpl-logreg`` is ``diffprivlib.models.LogisticRegression`` (objective perturbation with
the vector mechanism, Chaudhuri et al. 2011, pure epsilon-DP, L2-regularized, rows clipped to
L2 norm ``data_norm``; the bench passes dp-bcfw-secure's row clip C).  Both see the whole data
set in one place, which the vertical algorithms never do; their objective is evaluated with the
bench's loss on the same data, their models are NOT restricted to the l1 ball the vertical
algorithms and the reference optimum use.

Both need a dense design matrix (diffprivlib refuses sparse input); a run whose dense copy would
exceed ``MAX_DENSE_BYTES`` is reported as skipped, with the reason, not attempted.
diffprivlib is imported here only, when a baseline runs.
"""
from __future__ import annotations

from ..units import format_bytes

BASELINES = ("dpl-linreg", "dpl-logreg")
#: loss each baseline optimizes
LOSS = {"dpl-linreg": "squared", "dpl-logreg": "logistic"}
MAX_DENSE_BYTES = 10 ** 9


def fit_baseline(name: str, A, y, epsilon: float, bound: float, row_clip: float, seed: int):
    """Fit ``name`` on (A, y) with pure ``epsilon``-DP; returns ``(coef, None)`` or
    ``(None, reason)`` when the baseline cannot run here (too large dense, or diffprivlib
    unusable with the installed scikit-learn)."""
    import warnings

    import numpy as np

    n, d = A.shape
    if 8 * n * d > MAX_DENSE_BYTES:
        return None, (f"needs a dense {n} x {d} copy ({format_bytes(8 * n * d)} > "
                      f"{format_bytes(MAX_DENSE_BYTES)})")
    try:
        from diffprivlib.models import LinearRegression, LogisticRegression
    except ImportError as exc:          # pragma: no cover - diffprivlib is a declared dependency
        return None, f"diffprivlib is not importable: {exc}"
    X = A.toarray() if hasattr(A, "toarray") else np.asarray(A)
    with warnings.catch_warnings():
        # diffprivlib warns (PrivacyLeakWarning) only when bounds are missing; we always pass them
        warnings.simplefilter("ignore", category=DeprecationWarning)
        try:
            if name == "dpl-linreg":
                model = LinearRegression(epsilon=epsilon, bounds_X=(-bound, bound),
                                         bounds_y=(-bound, bound), fit_intercept=False,
                                         random_state=seed)
            elif name == "dpl-logreg":
                model = LogisticRegression(epsilon=epsilon, data_norm=row_clip,
                                           fit_intercept=False, random_state=seed)
            else:
                raise ValueError(f"unknown baseline {name!r}; known: {', '.join(BASELINES)}")
        except TypeError as exc:
            # diffprivlib 0.6.6's LogisticRegression passes multi_class=, which scikit-learn
            # 1.8 removed: the model cannot be constructed (reported, not hidden)
            return None, f"diffprivlib cannot build it with this scikit-learn: {exc}"
        model.fit(X, y)
    return np.asarray(model.coef_, dtype=float).ravel(), None
