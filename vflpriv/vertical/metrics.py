"""Classification metrics of a fitted linear model, and the held-out split of ``--test-fraction``.

The model predicts P(y = +1 | a) = sigmoid(a^T x + b) (b the intercept, 0 when none is fitted);
accuracy counts sign(a^T x + b) == y (a margin of exactly 0 predicts +1, as scikit-learn's
``LogisticRegression.predict`` does), and AUC is scikit-learn's ``roc_auc_score`` of the margins
(undefined, hence None, when one class is absent).  Metrics that do not flatter (issue 30):
``majority_accuracy`` is the accuracy of always predicting the more frequent class of the same
rows (an accuracy at or below it has learned nothing), and ``log_loss`` is scikit-learn's
``log_loss`` of the predicted probabilities (logistic loss only: the model's own probabilities;
None for the smoothed hinge, which predicts no probability).
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import InputError


def classification_metrics(A, y, x, intercept=None, loss="logistic") -> dict:
    from scipy.special import expit
    from sklearn.metrics import log_loss, roc_auc_score

    m = np.asarray(A @ np.asarray(x, dtype=np.float64)).ravel() + float(intercept or 0.0)
    y = np.asarray(y, dtype=np.float64).ravel()
    pred = np.where(m >= 0, 1.0, -1.0)
    auc = None if np.unique(y).size < 2 else float(roc_auc_score(y > 0, m))
    share = float(np.mean(y > 0))
    ll = float(log_loss(y > 0, expit(m), labels=[False, True])) if loss == "logistic" else None
    return {"accuracy": float(np.mean(pred == y)), "auc": auc, "rows": int(y.size),
            "majority_accuracy": max(share, 1.0 - share), "log_loss": ll}


def check_test_fraction(f):
    if f is None:
        return None
    if isinstance(f, bool) or not isinstance(f, (int, float, np.floating)) or \
            not (0 < f < 1) or not math.isfinite(f):
        raise InputError(f"--test-fraction must be in (0, 1), got {f!r}")
    return float(f)


def split_rows(n, fraction, seed):
    """(train rows, test rows): a uniformly random ``fraction`` of the n rows held out (at least
    one row on each side), from ``seed`` (public: it says which people are held out)."""
    fraction = check_test_fraction(fraction)
    n_test = int(round(fraction * n))
    if n_test < 1 or n_test > n - 1:
        raise InputError(f"--test-fraction {fraction:g} of {n} rows leaves {n_test} test and "
                         f"{n - n_test} training rows; each side needs at least one")
    perm = np.random.default_rng(seed).permutation(n)
    return np.sort(perm[n_test:]), np.sort(perm[:n_test])
