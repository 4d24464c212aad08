"""The l1 radius of the non-private learner by cross-validation (``fw``'s ``eta="auto"``).

A non-private fit may read its data freely, so its radius is chosen as scikit-learn's
``LogisticRegressionCV`` / ``LassoCV`` choose theirs: by the held-out loss.  The candidates are
the public rule's radius eta_0 (``vflpriv.vertical.scale``) times 2^k, k = -2..4 (eta_0 / 4 to
16 eta_0: from a model whose margins reach 2 logits to one close to unconstrained on the tables
of docs/peers.md); each is fitted by Frank-Wolfe with the line-search step on FOLDS - 1 folds
and scored by the mean loss on the held-out fold, summed over the folds (stratified by class for
the classification losses); the radius with the smallest held-out loss wins (the smaller one
on a tie).  When the largest candidate wins, the grid was too short for the table: it is
extended by doubling (2^5, 2^6, ... eta_0, at most ``EXTEND`` times) while the new largest
candidate still scores best, as one widens a regularization path whose optimum sits at its end
(on the three tables added for issue 30, carseats, boston and bikeshare, 16 eta_0 won in all
nine fits before this).  The caller refits on all rows with the winner.  Nothing here is
private: a private run never comes here (its radius is the public rule's, or an explicit one).
"""
from __future__ import annotations

import numpy as np

from ..errors import InputError

#: the candidates, as multiples of the public rule's radius
GRID = tuple(2.0 ** k for k in range(-2, 5))
#: at most this many doublings past the grid's largest multiple while that end keeps winning
EXTEND = 6
#: folds of the cross-validation (scikit-learn's LogisticRegressionCV in docs/peers.md uses 3)
FOLDS = 3


def _folds(y, loss_name, folds, seed):
    from sklearn.model_selection import KFold, StratifiedKFold

    n = y.shape[0]
    if loss_name == "squared":
        if n < 2 * folds:
            return None, f"{n} rows: too few for {folds} folds"
        return list(KFold(folds, shuffle=True, random_state=seed).split(np.zeros(n))), None
    smallest = int(min(np.sum(y > 0), np.sum(y <= 0)))
    if smallest < folds:
        return None, f"the smaller class has {smallest} rows: too few for {folds} folds"
    return list(StratifiedKFold(folds, shuffle=True, random_state=seed).split(
        np.zeros(n), y > 0)), None


def cross_validate_eta(A, y, loss, eta0, *, blocks=None, iterations=100, fit_intercept=False,
                       grid=GRID, folds=FOLDS, seed=0, progress=None, extend=EXTEND):
    """``(eta, report)``: the candidate eta0 * m (m in ``grid``, extended by doubling while its
    largest wins, at most ``extend`` times) with the smallest held-out loss (module docstring).
    ``report`` is JSON-able: ``candidates``, ``multiples``, ``scores`` (mean held-out loss per
    candidate, None where not computed), ``chosen``, ``extended`` (doublings added), ``folds``,
    ``method``, ``seconds``; when there are too few rows for the folds, eta0 itself and
    ``skipped`` says why.  ``progress``: called as ``progress(i)`` after fold fit i of the grid
    (0-based, ``folds * len(grid)`` in all; the extension's fits are not counted), as the
    engines call their round callbacks, for a progress display."""
    import time

    from .frank_wolfe import _prepare, frank_wolfe

    t0 = time.perf_counter()
    A, y, loss, blocks, _, T = _prepare(A, y, loss, eta0, blocks, iterations)
    if isinstance(folds, bool) or not isinstance(folds, (int, np.integer)) or folds < 2:
        raise InputError(f"folds must be an integer of at least 2, got {folds!r}")
    try:
        grid = tuple(float(m) for m in grid)
    except (TypeError, ValueError):
        raise InputError(f"grid must be positive multiples of eta0, got {grid!r}") from None
    if not grid or not all(0 < m < np.inf for m in grid):
        raise InputError(f"grid must be positive finite multiples of eta0, got {grid!r}")
    if isinstance(extend, bool) or not isinstance(extend, (int, np.integer)) or extend < 0:
        raise InputError(f"extend must be a non-negative integer, got {extend!r}")
    candidates = [float(eta0) * float(m) for m in grid]
    report = {"method": f"{folds}-fold cross-validation of the held-out {loss.name} loss "
                        "(non-private)", "folds": int(folds), "candidates": candidates,
              "multiples": [float(m) for m in grid], "private": False}
    splits, why = _folds(y, loss.name, folds, seed)
    if splits is None:
        report.update(scores=None, chosen=float(eta0), skipped=why)
        return float(eta0), report
    fits = 0                                    # fold fits so far

    def score(eta, show=True):
        """Mean held-out loss of radius ``eta`` over the folds (the grid's fits are shown)."""
        nonlocal fits
        total = 0.0
        for train, test in splits:
            r = frank_wolfe(A[train], y[train], loss, eta, blocks=blocks, iterations=T,
                            fit_intercept=fit_intercept, step="line")
            z = np.asarray(A[test] @ r.x).ravel() + r.intercept
            total += float(np.sum(loss.value(z, y[test])))
            if show and progress is not None:
                progress(fits)
            fits += 1
        return total / y.shape[0]

    scores = [score(eta) for eta in candidates]
    multiples, extended = list(report["multiples"]), 0
    # the largest radius won: the path's optimum may lie beyond it, so widen it by doubling
    while extended < extend and multiples[int(np.argmin(scores))] == max(multiples):
        multiples.append(max(multiples) * 2.0)
        candidates.append(float(eta0) * multiples[-1])
        scores.append(score(candidates[-1], show=False))
        extended += 1
    best = int(np.argmin(scores))               # the first (smallest radius) on a tie
    report.update(candidates=candidates, multiples=multiples, extended=extended,
                  scores=[float(v) for v in scores], chosen=candidates[best],
                  seconds=time.perf_counter() - t0)
    return candidates[best], report
