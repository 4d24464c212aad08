"""scikit-learn estimators over the vertical engine (dp-bcfw-secure by default; paper 004's
DP-BCFW-AS with ``algorithm="dp-bcfw"``).

>>> import numpy as np
>>> from vflpriv.estimators import VerticalDPLasso
>>> rng = np.random.default_rng(0)
>>> X = rng.standard_normal((200, 8)); y = X[:, 0] - 0.5 * X[:, 5]
>>> est = VerticalDPLasso(parties=2, eta=1.0, max_iter=300).fit(X, y)
>>> int(np.argmax(np.abs(est.coef_)))
0

Model: f(x) = (1/n) sum_j loss(X_j x + b, y_j) over the product of per-party l1 balls of radius
``eta``.  ``algorithm`` defaults to ``"dp-bcfw-secure"`` (both estimators): the private
algorithm that learns at moderate n, cross-party products under secret sharing, the label at
``label_party`` (default 0; for least squares the secure least-squares path, with ``row_clip``
and ``max_features``; for the logistic loss the ssp path; docs/vertical.md);
``algorithm="dp-bcfw"`` is DP-BCFW-AS, the paper's algorithm (labels at every party), which
learns little at usual budgets.  ``epsilon=inf`` (the default) is a non-private fit (``fit``
says so once per process); a finite epsilon needs ``delta``, ``feature_bound`` and
``label_bound`` (declared ranges the data are clipped to; sensitivities come from them,
docs/sensitivity.md).  ``rnm``,
``split``, ``max_features`` and ``row_clip`` left at None take each algorithm's defaults (for
dp-bcfw-secure the stated rules of ``vflpriv.vertical.secure.defaults``, from public quantities
only; ``solution_.extra["defaults"]`` lists them with their reasons).

Partitions: ``partition="balanced"`` / ``"random"`` with ``parties``, explicit column-index groups,
or, for a DataFrame, a dict ``{party: [column names]}``: every column of X must be in exactly one
party (duplicates and missing columns are refused), and ``coef_`` is in X's column order whatever
the order of the dict.  Predict checks the column names against ``feature_names_in_``.

``fit_intercept=True`` (the default, as in scikit-learn): where the algorithm fits an intercept
jointly (``dp-bcfw``, ``bcfw``, ``dfw``: an unpenalized b held by party 0, moved every round
with the coefficients from its derivative, released with Gaussian noise in each private round,
docs/sensitivity.md 3.1; ``fw``, ``dpfw``; and ``dp-bcfw-secure``: with the logistic loss b
held by the label party, accounted in each round's release, 5.5; with least squares
b = (sum y - sum_k s_k^T x_k) / n at every round from the noisy label and column sums released
once, 4.7), ``intercept_`` is that b: every algorithm fits it with both estimators' losses
(``vflpriv.vertical.config.INTERCEPT_ALGORITHMS``).

``eta="auto"`` (the default): the public rule of ``vflpriv.vertical.scale`` (eta_k = 8 / (K B_a)
for classification, 4 B_y / (K B_a) for least squares).

``random_state=None`` draws noise, sketch and sampling from OS entropy; an integer makes the fit
reproducible and marks it not for deployment (``solution_.deployment`` is False).

``backend="flower-sim"`` or ``"flower"`` runs the parties as Flower ClientApps (docs/flower.md);
a seeded fit gives the same ``coef_`` and spend as ``"inprocess"`` (the default).

Fitted attributes: ``coef_``, ``intercept_``, ``n_features_in_``, ``feature_names_in_`` (DataFrame
input), ``history_`` (objective after each iteration, computed on the training data: a diagnostic,
not a DP release; so is the divergence warning), ``bytes_``, ``privacy_`` (the accountant's report;
None when non-private: ``privacy_["epsilon_spent"]`` is the whole ledger's spend, every fit
recorded on ``ledger`` included, by each accountant; ``privacy_["fit_epsilon_spent"]`` is this
fit's own, its ``fit_releases`` records), ``n_iter_``, ``blocks_``, ``solution_``.  Fitted
estimators pickle and
clone; the pickle drops the ledger handle (the ledger file, if any, and ``privacy_`` remain).
"""
from __future__ import annotations

import copy
import math
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from .data import VerticalData
from .errors import InputError
from .vertical import solve
from .vertical.config import DEFAULT_ALGORITHM

_NON_PRIVATE_SAID = False
_NO_LEDGER_SAID = False


class NonPrivateFitWarning(UserWarning):
    """A fit with epsilon=inf shares exact scores and unnoised values (dp-bcfw: raw or
    noiseless sketched columns)."""


class UnaccountedFitsWarning(UserWarning):
    """A private fit without a ledger: every fit (each fold of a cross-validation, each point of
    a grid search) spends its own epsilon on the same people, and nothing adds them up."""


class _VerticalBase(BaseEstimator):
    _loss = "squared"

    def _solve_extra(self):
        """Options of ``solve`` that only a subclass has (none here)."""
        return {}

    def __init__(self, parties=2, partition="balanced", eta="auto", max_iter=100,
                 epsilon=math.inf, delta=None, algorithm=DEFAULT_ALGORITHM, sampling="elementary",
                 rnm=None, sketch="identity", sketch_dim=None, calibration="accountant",
                 split=None, feature_bound=None, label_bound=None, accountant="rdp", ledger=None,
                 derivative_clip=None, row_clip=None, max_features=None, fit_intercept=True,
                 random_state=None, backend="inprocess", label_party=None, bounds=None):
        self.bounds = bounds
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
        self.row_clip = row_clip
        self.max_features = max_features
        self.fit_intercept = fit_intercept
        self.random_state = random_state
        self.backend = backend
        self.label_party = label_party

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        # a private fit draws noise: reproducible only with an integer random_state
        tags.non_deterministic = self._private() and self.random_state is None
        return tags

    def _private(self):
        try:
            return math.isfinite(float(self.epsilon))
        except (TypeError, ValueError):
            return False

    # -- data ---------------------------------------------------------------------------------
    def _blocks(self, X, part, d):
        """Column-index groups of X (in X's column order) for the partition ``part``."""
        if isinstance(part, dict):
            names = getattr(self, "feature_names_in_", None)
            if names is None:
                raise InputError("a dict partition {party: [column names]} needs X as a pandas "
                                 "DataFrame with those column names")
            pos = {str(c): i for i, c in enumerate(names)}
            owner, blocks = {}, []
            for p, cols in part.items():
                if isinstance(cols, (str, bytes)) or not hasattr(cols, "__iter__"):
                    raise InputError(f"party {p!r}: expected a list of column names, got {cols!r}")
                idx = []
                for c in cols:
                    c = str(c)
                    if c not in pos:
                        raise InputError(f"party {p!r}: column {c!r} is not in X")
                    if c in owner:
                        raise InputError(f"column {c!r} is assigned twice (to party {owner[c]!r} "
                                         f"and party {p!r})")
                    owner[c] = p
                    idx.append(pos[c])
                if not idx:
                    raise InputError(f"party {p!r} holds no columns")
                blocks.append(np.sort(np.asarray(idx, dtype=np.int64)))
            missing = [str(c) for c in names if str(c) not in owner]
            if missing:
                raise InputError(f"column {missing[0]!r} of X is in no party of the partition "
                                 f"({len(missing)} unassigned)")
            return blocks, [str(p) for p in part]
        if isinstance(part, str):
            K = self.parties
            if isinstance(K, bool) or not isinstance(K, (int, np.integer)) or K < 1:
                raise InputError(f"parties must be a positive integer, got {K!r}")
            if K > d:
                raise InputError(f"X has {d} feature(s) but parties={K}: every party needs at "
                                 "least one column")
            return VerticalData.from_arrays(sp.csc_matrix((1, d)), [0.0], part, parties=K,
                                            seed=self.random_state).blocks, None
        return VerticalData.from_arrays(sp.csc_matrix((1, d)), [0.0], part).blocks, None

    def _validated(self, X, y):
        return _one_line(validate_data, self, X, y, accept_sparse=["csc", "csr", "coo"],
                         dtype=np.float64, y_numeric=self._loss == "squared", reset=True)

    def _bounded(self, X, d):
        """``(X, feature bound, factors)``: with ``bounds`` (diffprivlib's ``(lower, upper)``,
        scalars or one value per column; the columns' public ranges) every column clipped to its
        range and scaled into [-1, 1] (``vflpriv.data.ranges``: bound 1, the model then written
        back in raw units, ``bounds_clipped_`` the values clipped per column); without, X as
        given and ``feature_bound``."""
        if self.bounds is None:
            self.bounds_clipped_ = None
            return X, self.feature_bound, None
        from .data.ranges import apply_ranges

        if self.feature_bound is not None:
            raise InputError("bounds declares every column's range (the columns are then scaled "
                             "into [-1, 1], bound 1): leave feature_bound at None")
        try:
            lower, upper = self.bounds
            low = np.broadcast_to(np.asarray(lower, dtype=np.float64), (d,)).copy()
            high = np.broadcast_to(np.asarray(upper, dtype=np.float64), (d,)).copy()
        except (TypeError, ValueError):
            raise InputError(f"bounds must be (lower, upper), each a number or one per column "
                             f"({d}), got {self.bounds!r}") from None
        bad = ~(np.isfinite(low) & np.isfinite(high) & (low < high))
        if bad.any():
            j = int(np.argmax(bad))
            raise InputError(f"bounds: column {j} needs finite lower < upper, got "
                             f"[{low[j]:g}, {high[j]:g}]")
        X, factors, clipped = apply_ranges(X, low, high)
        self.bounds_clipped_ = clipped
        return X, 1.0, factors

    def _fit(self, X, y, partition, y_internal):
        global _NON_PRIVATE_SAID, _NO_LEDGER_SAID
        from .vertical.api import check_seed

        check_seed(self.random_state, "random_state")
        part = self.partition if partition is None else partition
        d = X.shape[1]
        blocks, party_names = self._blocks(X, part, d)
        private = self._private()
        if not private and not _NON_PRIVATE_SAID:
            _NON_PRIVATE_SAID = True
            warnings.warn(f"{type(self).__name__}: epsilon=inf is a non-private fit: the "
                          "parties share exact scores and unnoised products; set epsilon, delta, "
                          "feature_bound and label_bound for a differentially private fit "
                          "(said once per process)", NonPrivateFitWarning, stacklevel=3)
        if private and self.ledger is None and not _NO_LEDGER_SAID:
            _NO_LEDGER_SAID = True
            warnings.warn(f"{type(self).__name__}: a private fit without a ledger spends "
                          f"epsilon={self.epsilon:g} each time it is fitted; cross-validation or a "
                          "grid search fits it once per fold and setting, on the same people, and "
                          "nothing adds those up: pass ledger=FILE (one ledger with the budget "
                          "for all fits; docs/estimators.md) (said once per process)",
                          UnaccountedFitsWarning, stacklevel=3)
        # every algorithm fits the intercept with the coefficients, for both losses
        # (INTERCEPT_ALGORITHMS covers every pair an estimator can ask for)
        joint = bool(self.fit_intercept)
        X, feature_bound, factors = self._bounded(X, d)
        data = VerticalData(X, y_internal, blocks, party_names=party_names or [])
        with np.errstate(all="ignore"):
            sol = solve(data, loss=self._loss, eta=self.eta, iterations=self.max_iter,
                        algorithm=self.algorithm, sampling=self.sampling, epsilon=self.epsilon,
                        delta=self.delta, rnm=self.rnm, sketch=self.sketch,
                        sketch_dim=self.sketch_dim, calibration=self.calibration,
                        split=self.split, feature_bound=feature_bound,
                        label_bound=self.label_bound, accountant=self.accountant,
                        ledger=self.ledger, seed=self.random_state,
                        derivative_clip=self.derivative_clip, row_clip=self.row_clip,
                        max_features=self.max_features, backend=self.backend,
                        label_party=self.label_party, fit_intercept=joint,
                        **self._solve_extra())
        self.coef_ = np.asarray(sol.x, dtype=float)
        if factors is not None:                 # fitted on the scaled columns: raw units
            from .data.ranges import to_raw

            self.coef_ = to_raw(self.coef_, factors)
        self.intercept_ = float(sol.intercept) if joint else 0.0
        self.history_ = np.asarray(sol.objective, dtype=float)
        self.n_iter_ = sol.iterations
        self.blocks_ = [b.copy() for b in data.blocks]
        self.bytes_ = None if sol.uplink is None else {
            "uplink": list(sol.uplink), "uplink_framed": list(sol.uplink_framed),
            "downlink": list(sol.downlink), "downlink_framed": list(sol.downlink_framed),
            "uplink_naive": list(sol.uplink_naive),
            "uplink_full_gradient": None if sol.uplink_full_gradient is None else
            list(sol.uplink_full_gradient), "meter": sol.meter}
        self.privacy_ = _with_fit_spend(sol.privacy, getattr(sol, "ledger", None))
        self.solution_ = sol
        f0, fT = float(sol.initial_objective), float(sol.final_objective)
        if not np.all(np.isfinite(self.history_)) or not np.all(np.isfinite(self.coef_)):
            warnings.warn(f"{type(self).__name__}: the fit produced non-finite values (objective "
                          f"{f0:.6g} -> {fT!r}); check the scale of X and y", ConvergenceWarning,
                          stacklevel=3)
        elif fT > f0 * (1 + 1e-12) + 1e-15:
            warnings.warn(f"{type(self).__name__}: the fit diverged: the objective rose from "
                          f"{f0:.6g} (the zero model) to {fT:.6g}"
                          + ("; at this n and epsilon the noise dominates (docs/vertical.md)"
                             if private else ""), ConvergenceWarning, stacklevel=3)
        return self

    def __getstate__(self):
        state = super().__getstate__() if hasattr(super(), "__getstate__") else dict(self.__dict__)
        state = dict(state)
        sol = state.get("solution_")
        if sol is not None and getattr(sol, "ledger", None) is not None:
            sol = copy.copy(sol)
            sol.ledger = None          # a file handle / lock; the ledger file and privacy_ remain
            state["solution_"] = sol
        return state

    def _X(self, X):
        check_is_fitted(self, "coef_")
        return _one_line(validate_data, self, X, accept_sparse=["csc", "csr", "coo"],
                         dtype=np.float64, reset=False)

    def _linear(self, X):
        X = self._X(X)
        return np.asarray(X @ self.coef_).ravel() + self.intercept_


def _one_line(fn, *args, **kwargs):
    """scikit-learn's validation, its errors as one InputError line (the array dumps dropped)."""
    try:
        return fn(*args, **kwargs)
    except InputError:
        raise
    except ValueError as exc:
        text = str(exc)
        if text.startswith("Complex data not supported"):
            # scikit-learn appends the whole array; name the problem instead
            raise InputError("Complex data not supported: X (or y) holds complex values; only "
                             "real numbers are") \
                from None
        lines = [ln.strip() for ln in text.splitlines()
                 if ln.strip() and not ln.strip().startswith("array=")]
        message = " ".join(lines).replace(": -", ":")
        raise InputError(message if len(message) <= 300 else message[:297] + "...") from None


def _with_fit_spend(privacy, ledger):
    """``privacy`` (the run's report) with this fit's own spend beside the ledger's:
    ``fit_epsilon_spent`` composes only the releases this fit recorded (its run id's records), by
    the accountants of ``epsilon_spent``, which stays the whole ledger's spend (every fit recorded
    on it, this one included); ``fit_releases`` counts them.  On a fresh ledger both agree."""
    if privacy is None or ledger is None:
        return privacy
    from accounting.ledger import LedgerContents

    from .vertical.solution import privacy_report

    own = [r for r in ledger.records if r.run_id == ledger.run_id]
    event = LedgerContents(header={}, records=own).event()
    names = [k for k in privacy["epsilon_spent"] if k != "best"]
    if event is None:
        fit = {k: 0.0 for k in names + ["best"]}
    else:
        fit, _ = privacy_report(event, privacy["delta"], names)
    return {**privacy, "fit_epsilon_spent": fit, "fit_releases": len(own)}


class VerticalDPLasso(RegressorMixin, _VerticalBase):
    """Least squares on the product of per-party l1 balls (a constrained Lasso).

    ``squared_path`` (None: a public rule of n, d and epsilon, docs/sensitivity.md 4.10.1) is
    dp-bcfw-secure's way: "ssp", the moments released once and the fit from them; "fw", the
    Frank-Wolfe rounds (``max_iter`` of them).
    """

    _loss = "squared"

    def __init__(self, parties=2, partition="balanced", eta="auto", max_iter=100,
                 epsilon=math.inf, delta=None, algorithm=DEFAULT_ALGORITHM, sampling="elementary",
                 rnm=None, sketch="identity", sketch_dim=None, calibration="accountant",
                 split=None, feature_bound=None, label_bound=None, accountant="rdp", ledger=None,
                 derivative_clip=None, row_clip=None, max_features=None, fit_intercept=True,
                 random_state=None, backend="inprocess", label_party=None, bounds=None,
                 squared_path=None):
        self.squared_path = squared_path
        super().__init__(parties=parties, partition=partition, eta=eta, max_iter=max_iter,
                         epsilon=epsilon, delta=delta, algorithm=algorithm, sampling=sampling,
                         rnm=rnm, sketch=sketch, sketch_dim=sketch_dim,
                         calibration=calibration, split=split, feature_bound=feature_bound,
                         label_bound=label_bound, accountant=accountant, ledger=ledger,
                         derivative_clip=derivative_clip, row_clip=row_clip,
                         max_features=max_features, fit_intercept=fit_intercept,
                         random_state=random_state, backend=backend, label_party=label_party,
                         bounds=bounds)

    def _solve_extra(self):
        """dp-bcfw-secure's squared path (None: its rule)."""
        return {} if self.squared_path is None else {"squared_path": self.squared_path}

    def fit(self, X, y, partition=None):
        X, y = self._validated(X, y)
        return self._fit(X, y, partition, np.asarray(y, dtype=np.float64))

    def predict(self, X):
        return self._linear(X)


class _VerticalLogistic(ClassifierMixin, _VerticalBase):
    """Binary logistic regression (labels mapped to -1/+1) on the product of l1 balls: the
    classifier's methods, shared by :class:`VerticalDPLogisticRegression` (the public name).

    With a finite epsilon, ``label_bound`` is 1 after the mapping (set it to 1).
    """

    _loss = "logistic"

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags

    def fit(self, X, y, partition=None):
        X, y = self._validated(X, y)
        check_classification_targets(y)
        classes = np.unique(y)
        if classes.shape[0] > 2:
            raise InputError(f"Only binary classification is supported by "
                             f"{type(self).__name__}; y has {classes.shape[0]} classes")
        if classes.shape[0] < 2:
            raise InputError(f"{type(self).__name__} needs 2 classes in y, got 1 class")
        self.classes_ = classes
        return self._fit(X, y, partition, np.where(y == classes[1], 1.0, -1.0))

    def decision_function(self, X):
        return self._linear(X)

    def predict_proba(self, X):
        from scipy.special import expit

        p1 = expit(self._linear(X))
        return np.column_stack([1.0 - p1, p1])

    def predict(self, X):
        z = self._linear(X)
        return self.classes_[(z > 0).astype(int)]


class VerticalDPLogisticRegression(_VerticalLogistic):
    """Private vertical logistic regression with the label at one party: ``dp-bcfw-secure`` by
    default, on the logistic path described below (docs/classification.md)
    (``algorithm="dp-bcfw"``: the paper's DP-BCFW-AS, labels at every party).

    The one public name of the vertical classifier; ``VerticalDPLogistic`` is a deprecated alias
    of it (a ``DeprecationWarning`` when imported).

    ``label_party`` (default 0) holds y; the other parties never see it.  The default
    ``logistic_path`` (None) is "ssp": the sufficient statistics of the loss's expansion at 0
    released once and the model fitted from them (a ridge, dense coefficients; an explicit
    ``eta`` bounds each party's l1 norm; docs/sensitivity.md 4.10; trust: the dealer colludes
    with no party, no party with its block's helper).  ``logistic_path="glm"`` runs the loss's
    derivatives under secret sharing every round (sparse, Frank-Wolfe over l1 balls); trust: no
    party colludes with the server, and the helper party (the party after ``label_party``, which
    holds the other share of the margins and loss derivatives) does not collude with the label
    party (docs/sensitivity.md, section 5); ``helper_party`` chooses it (glm only).
    A private fit
    (finite ``epsilon``) needs ``delta`` and ``feature_bound``; labels are mapped to -1/+1, so
    ``label_bound`` is 1.  ``row_clip`` C bounds each party's row norm (on the glm path:
    sensitivity 2 C D per party and round, D the derivative bound of the sigmoid series).
    """

    def __init__(self, parties=2, partition="balanced", eta="auto", max_iter=100,
                 epsilon=math.inf, delta=None, algorithm=DEFAULT_ALGORITHM,
                 sampling="elementary", rnm=None, sketch="identity", sketch_dim=None,
                 calibration="accountant", split=None, feature_bound=None, label_bound=1.0,
                 accountant="rdp", ledger=None, derivative_clip=None, row_clip=None,
                 max_features=None, fit_intercept=True, random_state=None, backend="inprocess",
                 label_party=0, helper_party=None, logistic_path=None, bounds=None):
        self.helper_party, self.logistic_path = helper_party, logistic_path
        super().__init__(parties=parties, partition=partition, eta=eta, max_iter=max_iter,
                         epsilon=epsilon, delta=delta, algorithm=algorithm, sampling=sampling,
                         rnm=rnm, sketch=sketch, sketch_dim=sketch_dim,
                         calibration=calibration, split=split, feature_bound=feature_bound,
                         label_bound=label_bound, accountant=accountant, ledger=ledger,
                         derivative_clip=derivative_clip, row_clip=row_clip,
                         max_features=max_features, fit_intercept=fit_intercept,
                         random_state=random_state, backend=backend, label_party=label_party,
                         bounds=bounds)

    def _solve_extra(self):
        """The helper party and the logistic path (dp-bcfw-secure only; None: its defaults)."""
        out = {}
        if self.helper_party is not None:
            out["helper_party"] = self.helper_party
        if self.logistic_path is not None:
            out["logistic_path"] = self.logistic_path
        return out


def __getattr__(name):
    # the deprecated second name of the classifier (PEP 562): the same class, with a warning
    if name == "VerticalDPLogistic":
        warnings.warn("vflpriv.estimators.VerticalDPLogistic is deprecated: use "
                      "VerticalDPLogisticRegression (the same classifier; its defaults: "
                      "algorithm='dp-bcfw-secure', label_party=0)", DeprecationWarning,
                      stacklevel=2)
        return VerticalDPLogisticRegression
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
