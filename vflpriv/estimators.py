"""scikit-learn-style estimators over the vertical engine (paper 004, DP-BCFW-AS).

>>> import numpy as np
>>> from vflpriv.estimators import VerticalDPLasso
>>> rng = np.random.default_rng(0)
>>> X = rng.standard_normal((200, 8)); y = X[:, 0] - 0.5 * X[:, 5]
>>> est = VerticalDPLasso(parties=2, eta=1.0, max_iter=300).fit(X, y)
>>> int(np.argmax(np.abs(est.coef_)))
0

Model: f(x) = (1/n) sum_j loss(X_j x, y_j) minimized over the product of per-party l1 balls of
radius ``eta`` (no intercept: centre y / X beforehand if needed).  ``epsilon=inf`` is the
non-private BCFW-AS; a finite epsilon needs ``delta``, ``feature_bound`` and ``label_bound``
(declared ranges the data are clipped to; sensitivities come from them, docs/sensitivity.md).
``random_state=None`` (the default) draws the noise, sketch and sampling from OS entropy; an
integer makes the fit reproducible and marks it not for deployment
(``solution_.deployment`` is False; docs/vertical.md, "Randomness for deployment").

Fitted attributes: ``coef_`` (d,), ``history_`` (objective after each iteration), ``bytes_``
(metered traffic per party), ``privacy_`` (the accountant's report of what the ledger spent;
None when non-private), ``n_iter_``, ``solution_`` (the full :class:`vflpriv.vertical.Solution`).
"""
from __future__ import annotations

import math

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin

from .data import VerticalData, as_matrix
from .errors import InputError
from .vertical import solve


class _VerticalBase(BaseEstimator):
    _loss = "squared"

    def __init__(self, parties=2, partition="balanced", eta=1.0, max_iter=100, epsilon=math.inf,
                 delta=None, algorithm="dp-bcfw", sampling="elementary", rnm="laplace",
                 sketch="identity", sketch_dim=None, calibration="accountant", split=0.5,
                 feature_bound=None, label_bound=None, accountant="rdp", ledger=None,
                 derivative_clip=None, random_state=None):
        self.parties = parties
        self.partition = partition
        self.eta = eta
        self.max_iter = max_iter
        self.epsilon = epsilon
        self.delta = delta
        self.algorithm = algorithm
        self.sampling = sampling
        self.rnm = rnm
        self.sketch = sketch
        self.sketch_dim = sketch_dim
        self.calibration = calibration
        self.split = split
        self.feature_bound = feature_bound
        self.label_bound = label_bound
        self.accountant = accountant
        self.ledger = ledger
        self.derivative_clip = derivative_clip
        self.random_state = random_state

    def _data(self, X, y, partition):
        from .vertical.api import check_seed

        check_seed(self.random_state, "random_state")
        part = self.partition if partition is None else partition
        try:
            import pandas as pd
            is_df = isinstance(X, pd.DataFrame)
        except ImportError:  # pragma: no cover - pandas is a dependency
            is_df = False
        if is_df and isinstance(part, dict):
            frames = {}
            for p, cols in part.items():
                missing = [c for c in cols if c not in X.columns]
                if missing:
                    raise InputError(f"party {p!r}: column {missing[0]!r} is not in X")
                frames[p] = X[list(cols)]
            covered = sum(len(c) for c in part.values())
            if covered != X.shape[1]:
                raise InputError(f"the partition covers {covered} of the {X.shape[1]} columns of X")
            return VerticalData.from_dataframes(frames, y)
        if is_df:
            self.feature_names_in_ = np.asarray([str(c) for c in X.columns], dtype=object)
            X = X.to_numpy()          # as_matrix converts (and refuses complex values)
        X = as_matrix(X, "X")          # named errors (non-finite, complex) say X, not A
        K = None if not isinstance(part, str) else self.parties
        return VerticalData.from_arrays(X, y, part, parties=K, seed=self.random_state)

    def _fit(self, X, y, partition):
        data = self._data(X, y, partition)
        sol = solve(data, loss=self._loss, eta=self.eta, iterations=self.max_iter,
                    algorithm=self.algorithm, sampling=self.sampling, epsilon=self.epsilon,
                    delta=self.delta, rnm=self.rnm, sketch=self.sketch,
                    sketch_dim=self.sketch_dim, calibration=self.calibration, split=self.split,
                    feature_bound=self.feature_bound, label_bound=self.label_bound,
                    accountant=self.accountant, ledger=self.ledger, seed=self.random_state,
                    derivative_clip=self.derivative_clip)
        # Columns of the data set are in the original order (partitions hold column indices).
        self.coef_ = np.asarray(sol.x, dtype=float)
        self.history_ = np.asarray(sol.objective, dtype=float)
        self.n_iter_ = sol.iterations
        self.n_features_in_ = data.d
        self.blocks_ = [b.copy() for b in data.blocks]
        self.bytes_ = None if sol.uplink is None else {
            "uplink": list(sol.uplink), "uplink_framed": list(sol.uplink_framed),
            "downlink": list(sol.downlink), "downlink_framed": list(sol.downlink_framed),
            "uplink_naive": list(sol.uplink_naive),
            "uplink_full_gradient": list(sol.uplink_full_gradient), "meter": sol.meter}
        self.privacy_ = sol.privacy
        self.solution_ = sol
        return self

    def _X(self, X):
        if not hasattr(self, "coef_"):
            raise InputError(f"{type(self).__name__} is not fitted yet; call fit first")
        if hasattr(X, "to_numpy"):
            X = X.to_numpy()          # as_matrix converts (and refuses complex values)
        X = as_matrix(X, "X")
        if X.shape[1] != self.coef_.shape[0]:
            raise InputError(f"X has {X.shape[1]} features but the model was fitted on "
                             f"{self.coef_.shape[0]}")
        return X

    def decision_function(self, X):
        return np.asarray(self._X(X) @ self.coef_).ravel()


class VerticalDPLasso(RegressorMixin, _VerticalBase):
    """Least squares on the product of per-party l1 balls (a constrained Lasso), DP-BCFW-AS."""

    _loss = "squared"

    def fit(self, X, y, partition=None):
        return self._fit(X, y, partition)

    def predict(self, X):
        return self.decision_function(X)


class VerticalDPLogistic(ClassifierMixin, _VerticalBase):
    """Logistic regression (labels mapped to -1/+1) on the product of l1 balls, DP-BCFW-AS.

    With a finite epsilon, ``label_bound`` is 1 after the mapping (set it to 1).
    """

    _loss = "logistic"

    def fit(self, X, y, partition=None):
        y = np.asarray(y)
        classes = np.unique(y)
        if classes.shape[0] != 2:
            raise InputError(f"VerticalDPLogistic needs exactly 2 classes in y, got {classes.shape[0]}")
        self.classes_ = classes
        return self._fit(X, np.where(y == classes[1], 1.0, -1.0), partition)

    def predict_proba(self, X):
        z = self.decision_function(X)
        p1 = 1.0 / (1.0 + np.exp(-z))
        return np.column_stack([1.0 - p1, p1])

    def predict(self, X):
        return self.classes_[(self.decision_function(X) > 0).astype(int)]
