"""A vertical run's options as one frozen, validated object: :class:`VerticalConfig`.

Every option of :func:`vflpriv.vertical.api.solve` is a field here, validated once, on
construction, with the messages ``solve`` has always raised (:class:`~vflpriv.errors.InputError`,
one line naming the bad value).  Construction also normalizes what the options imply:

* ``epsilon``: ``None`` and numeric strings become a float; ``inf`` is a non-private run;
* ``algorithm``: ``dpfw`` with ``epsilon=inf`` is ``fw`` (DP-FW without noise has FW's iterates);
* ``rnm``, ``split``: for every algorithm but ``dp-bcfw-secure`` their defaults are paper 004's
  (``laplace``, ``0.5``); dp-bcfw-secure keeps ``None``, its rules choose from public quantities
  (``vflpriv.vertical.secure.defaults``) and report the choice;
* ``flower``: a Flower backend gets the default :class:`~vflpriv.runtime.backends.FlowerOptions`.

``logistic_path`` stays as given (None: the default); the path a dp-bcfw-secure logistic run
takes is :attr:`VerticalConfig.resolved_logistic_path` ("ssp" by default,
:func:`choose_logistic_path`).

Normalizing twice gives the same object (``dataclasses.replace(cfg) == cfg``), so a config can be
copied with a changed run-control field (``callback``, ``checkpoint_extra``) safely; changing the
``algorithm`` of a built config keeps the first algorithm's ``rnm``/``split`` defaults, so build a
new one from the options instead.

What needs the data (the label party's index against K, the sampling against the blocks, the
sketch against n) is checked by :meth:`VerticalConfig.check_data` and in ``solve``.

The options fall in four groups, checked in this order: the algorithm and its backend
(``algorithm``, ``backend``, ``flower``, ``label_party``); the problem (``loss``, ``eta``,
``iterations``, ``sampling``, ``sketch``, ``sketch_dim``, ``allow_biased_sketch``); the privacy
plan (``epsilon``, ``delta``, ``rnm``, ``calibration``, ``split``, ``feature_bound``,
``label_bound``, ``derivative_clip``, ``row_clip``, ``max_features``, ``accountant``,
``report_accountants``, ``seed``); run control (``ledger``, ``checkpoint``, ``checkpoint_every``,
``resume``, ``checkpoint_extra``, ``release_cache``, ``reference``, ``callback``).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

import numpy as np

from ..errors import InputError
from ..optim import get_loss
from . import privacy as P
from .solution import REPORT_ACCOUNTANTS

ALGORITHMS = ("dp-bcfw", "bcfw", "dfw", "fw", "dpfw", "dp-bcfw-secure")
#: what ``vflpriv run`` and the estimators run when no algorithm is named: the private algorithm
#: that learns (its path chosen by the loss: secure least squares, or the logistic ssp path);
#: the paper's DP-BCFW-AS is ``dp-bcfw``, one option away.  (``solve`` and VerticalConfig keep
#: ``dp-bcfw`` as their keyword default: the engine's calls name what they exercise.)
DEFAULT_ALGORITHM = "dp-bcfw-secure"
#: the algorithms whose parties exchange messages (the others are centralized baselines)
FEDERATED = ("dp-bcfw", "bcfw", "dfw", "dp-bcfw-secure")
#: largest finite epsilon a run calibrates for (e^epsilon overflows float64 near 709; far
#: below that, the noise is already negligible)
MAX_EPSILON = 1e6


def check_seed(seed, name="seed"):
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))
                             or seed < 0):
        raise InputError(f"{name} must be a non-negative integer (or None: OS entropy), "
                         f"got {seed!r}")
    return seed


def check_label_party(label_party, algorithm, K):
    """``None`` (every party holds y) or the label party's index; ``label_party=None`` asks for
    the algorithm's default (dp-bcfw-secure: party 0; the others: all)."""
    if algorithm in ("fw", "dpfw"):
        if label_party is not None:
            raise InputError(f"label_party is for the federated algorithms; {algorithm!r} is "
                             f"centralized (one curator holds everything), got "
                             f"label_party={label_party!r}")
        return None
    if label_party is None:
        return 0 if algorithm == "dp-bcfw-secure" else None
    if isinstance(label_party, str):
        if label_party == "all":
            return None
        try:
            label_party = int(label_party)
        except ValueError:
            raise InputError(f"label_party must be 'all' or a party index 0..{K - 1}, got "
                             f"{label_party!r}") from None
    if isinstance(label_party, bool) or not isinstance(label_party, (int, np.integer)) \
            or not 0 <= label_party < K:
        raise InputError(f"label_party must be 'all' or a party index 0..{K - 1}, got "
                         f"{label_party!r}")
    if algorithm != "dp-bcfw-secure":
        raise InputError(f"{algorithm!r} needs the labels at every party (paper 004's setting: "
                         f"each party computes its residuals from y); label_party={label_party} "
                         "is for dp-bcfw-secure")
    return int(label_party)


#: (algorithm, loss) pairs that fit an intercept (vflpriv.optim.intercept)
INTERCEPT_ALGORITHMS = {(a, loss) for a in ("fw", "dpfw", "dp-bcfw", "bcfw", "dfw")
                        for loss in ("squared", "logistic", "smoothed-hinge")} | \
    {("dp-bcfw-secure", "logistic"), ("dp-bcfw-secure", "squared")}


def check_fit_intercept(fit_intercept, algorithm, loss):
    """``True``/``False``, or ``None``: the default, an intercept wherever the algorithm fits
    one for a classification loss (least squares keeps none unless asked: its labels are
    usually centred, and its benchmarks have none)."""
    if fit_intercept is None:
        return loss != "squared" and (algorithm, loss) in INTERCEPT_ALGORITHMS
    if not isinstance(fit_intercept, (bool, np.bool_)):
        raise InputError(f"fit_intercept must be True, False or None, got {fit_intercept!r}")
    if fit_intercept and (algorithm, loss) not in INTERCEPT_ALGORITHMS:
        which = ", ".join(f"{a} ({l})" for a, l in sorted(INTERCEPT_ALGORITHMS))
        raise InputError(f"an intercept is fitted by {which}; not by {algorithm} with the "
                         f"{loss} loss (use --no-intercept / fit_intercept=False)")
    return bool(fit_intercept)


#: dp-bcfw-secure's ways to fit the logistic loss (docs/vertical.md): "glm", the derivatives
#: under secret sharing every round (the sigmoid series, a helper party); "ssp", the loss's
#: second-order expansion at 0 (docs/sensitivity.md 4.8): its sufficient statistics released
#: once, the model fitted from them
LOGISTIC_PATHS = ("glm", "ssp")


def check_logistic_path(path, algorithm, loss):
    """None (the default, :func:`choose_logistic_path`), or one of :data:`LOGISTIC_PATHS` for
    dp-bcfw-secure with the logistic loss."""
    return _check_path("logistic", LOGISTIC_PATHS, path, algorithm, loss)


def _check_path(for_loss, choices, path, algorithm, loss):
    """``path`` (None: the default) if it is one of ``choices`` and the run is dp-bcfw-secure
    with the loss ``for_loss`` (the option is ``<for_loss>_path``)."""
    if path is None:
        return None
    name = f"{for_loss}_path"
    if path not in choices:
        raise InputError(f"{name} must be one of {choices}, got {path!r}")
    if (algorithm, loss) != ("dp-bcfw-secure", for_loss):
        raise InputError(f"{name} is for dp-bcfw-secure with the {for_loss} loss, got "
                         f"{path!r} with {algorithm} / {loss}")
    return path


#: dp-bcfw-secure's ways to fit the squared loss: "ssp", the moments released once and least
#: squares fitted from them (docs/sensitivity.md 4.10.1); "fw", the Frank-Wolfe rounds (the
#: cross-products of each selected feature released once); None: the public rule of
#: ``secure.defaults.choose_squared_path``, which needs the data's shape
SQUARED_PATHS = ("ssp", "fw")


def check_squared_path(path, algorithm, loss):
    """None (the rule, with the data), or one of :data:`SQUARED_PATHS` for dp-bcfw-secure
    with the squared loss."""
    return _check_path("squared", SQUARED_PATHS, path, algorithm, loss)


#: why dp-bcfw-secure's logistic runs take the ssp path when none is given
SSP_DEFAULT_RULE = ("the loss expansion's sufficient statistics released once and the model "
                    "fitted from them (docs/vertical.md, 'The ssp path'; --logistic-path glm for "
                    "the per-round derivative path)")


def choose_logistic_path(algorithm, loss):
    """``(path, rule)``: the path a dp-bcfw-secure logistic run takes when none is given, and
    the one-sentence reason (``(None, None)`` for every other run).

    The default is "ssp": one release of the loss expansion's sufficient statistics and a fit by
    post-processing.  Over ten splits of eight held-out tables at eps 0.5 and 1 it was clearly
    above the glm path in 10 of 16 cells and never clearly below, at a hundredth of the bytes
    (docs/vertical_results.md, "Ten splits").  What only the glm path has (a helper party,
    checkpoints, a step rule) is refused on it with a message naming ``logistic_path="glm"``: the path is
    never switched behind the user's back by another option."""
    if (algorithm, loss) != ("dp-bcfw-secure", "logistic"):
        return None, None
    return "ssp", SSP_DEFAULT_RULE


def check_step(step, algorithm, loss, logistic_path, steps=()):
    """None (the default: "line" for fw; "fw" for dp-bcfw-secure's glm path, where it stays None
    in the config so that the path's choice does not read it as given), or a step rule:
    for the non-private ``fw``, "line" (exact line search; its ``eta="auto"`` is then
    cross-validated, ``vflpriv.optim.eta_cv``) or "fw" (Jaggi's 2 / (t + 2), paper 004's FW
    baseline); for dp-bcfw-secure's logistic glm path, "fw" or "pgd": how its parties move on
    their noisy scores (docs/vertical.md).  ``steps``: the rules the run's secure path takes
    (``paths.SecurePath.steps``)."""
    if algorithm == "fw":
        if step is None:
            return "line"
        if step not in ("line", "fw"):
            raise InputError(f"step for fw must be 'line' (exact line search, the default) or "
                             f"'fw' (2 / (t + 2)), got {step!r}")
        return step
    if step is None:
        return None     # the glm path's default, "fw", is its solver's (glm_solve)
    if step == "line":
        raise InputError(f"step 'line' (exact line search: it reads the data every round) is "
                         f"for the non-private fw, got algorithm {algorithm!r}")
    if step not in ("fw", "pgd"):
        raise InputError(f"step must be 'fw', 'pgd' or 'line', got {step!r}")
    if step not in steps:          # given where no step rule is read: refused, not ignored
        raise InputError(f"step {step!r} is for dp-bcfw-secure's logistic glm path (its parties "
                         f"see their whole noisy scores every round), got {algorithm} / {loss}"
                         + (f" / logistic_path {logistic_path!r}" if logistic_path else ""))
    return step if steps else None


def check_epsilon(epsilon, delta):
    """``epsilon`` as a float (``None``: inf, a non-private run); a finite one needs ``delta``."""
    if epsilon is None:
        epsilon = math.inf
    if isinstance(epsilon, str):
        try:
            epsilon = float(epsilon)
        except ValueError:
            raise InputError(f"epsilon must be a positive number or inf, got {epsilon!r}") from None
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float, np.integer, np.floating)) \
            or not epsilon > 0:
        raise InputError(f"epsilon must be a positive number or inf, got {epsilon!r}")
    if math.isfinite(epsilon) and epsilon > MAX_EPSILON:
        raise InputError(f"epsilon must be at most {MAX_EPSILON:g} (or inf for a non-private "
                         f"run; beyond, noise calibration leaves floating point), got {epsilon!r}")
    if math.isfinite(epsilon):
        if delta is None or isinstance(delta, bool) or not isinstance(
                delta, (int, float, np.integer, np.floating)) or not (0 < delta < 1):
            raise InputError(f"a finite epsilon needs delta in (0, 1), got {delta!r}")
    return float(epsilon)


@dataclasses.dataclass(frozen=True)
class VerticalConfig:
    """Every option of a vertical run (see :func:`vflpriv.vertical.api.solve` for each one's
    meaning), validated on construction; module docstring for what is normalized."""

    loss: Any = "squared"
    eta: Any = "auto"
    iterations: int = 100
    algorithm: str = "dp-bcfw"
    sampling: Any = "elementary"
    epsilon: float = math.inf
    delta: float | None = None
    rnm: str | None = None
    sketch: str = "identity"
    sketch_dim: int | None = None
    calibration: str = "accountant"
    split: float | None = None
    feature_bound: float | None = None
    label_bound: float | None = None
    accountant: str = "rdp"
    ledger: Any = None
    seed: int | None = None
    release_cache: bool = True
    reference: bool = False
    callback: Callable | None = None
    report_accountants: tuple = REPORT_ACCOUNTANTS
    allow_biased_sketch: bool = False
    derivative_clip: float | None = None
    checkpoint: Any = None
    checkpoint_every: int = 1
    resume: bool = False
    checkpoint_extra: Any = None
    row_clip: float | None = None
    max_features: int | None = None
    backend: str = "inprocess"
    flower: Any = None
    label_party: Any = None
    fit_intercept: Any = None
    helper_party: Any = None
    logistic_path: str | None = None
    step: str | None = None
    squared_path: str | None = None

    def __post_init__(self):
        self._check_algorithm()
        self._check_problem()
        self._check_path()
        self._check_privacy()
        self._check_run_control()

    def _set(self, name, value):
        object.__setattr__(self, name, value)

    # -- the four groups -------------------------------------------------------------------

    def _check_algorithm(self):
        """The algorithm, the backend it runs on, and (centralized ones) no label party."""
        algorithm, backend = self.algorithm, self.backend
        if algorithm not in ALGORITHMS:
            raise InputError(f"algorithm must be one of {ALGORITHMS}, got {algorithm!r}")
        from ..runtime.backends import FlowerOptions, check_backend, require_flwr

        check_backend(backend)
        if backend != "inprocess":
            if algorithm not in FEDERATED:
                raise InputError(f"--backend {backend} runs the federated vertical methods "
                                 f"(dp-bcfw, bcfw, dfw, dp-bcfw-secure); {algorithm!r} runs in "
                                 "process only")
            if (self.checkpoint is not None or self.resume) and algorithm != "dp-bcfw-secure":
                raise InputError(f"checkpoints are for the in-process backend, not {backend!r} "
                                 "(each party's ledger keeps what was spent; see docs/flower.md); "
                                 "dp-bcfw-secure has them on every backend")
            require_flwr(backend)
            self._set("flower", self.flower or FlowerOptions())
        if algorithm in ("fw", "dpfw"):
            check_label_party(self.label_party, algorithm, 1)   # K is not needed to refuse it
        if self.helper_party is not None and (algorithm != "dp-bcfw-secure"
                                              or get_loss(self.loss).name == "squared"):
            raise InputError(f"--helper-party is for dp-bcfw-secure with a classification loss "
                             f"(its helper holds the other share of the margins), got "
                             f"{self.helper_party!r} with {algorithm} / {get_loss(self.loss).name}")

    def _check_problem(self):
        """Loss, feasible set, iteration count; a sketch only where the loss allows it."""
        from .scale import check_eta

        loss = get_loss(self.loss)
        self._set("logistic_path", check_logistic_path(self.logistic_path, self.algorithm,
                                                       loss.name))
        self._set("squared_path", check_squared_path(self.squared_path, self.algorithm,
                                                     loss.name))
        iterations = self.iterations
        self._set("eta", check_eta(self.eta))
        if isinstance(iterations, bool) or not isinstance(iterations, (int, np.integer)) \
                or iterations < 1:
            raise InputError(f"iterations must be a positive integer, got {iterations!r}")
        self._set("fit_intercept", check_fit_intercept(self.fit_intercept, self.algorithm,
                                                       loss.name))
        from ..errors import MAX_ROUNDS

        if iterations > MAX_ROUNDS:
            raise InputError(f"iterations must be at most {MAX_ROUNDS:,}, got {iterations:,}")
        if self.sketch != "identity" and loss.name != "squared" and not self.allow_biased_sketch:
            raise InputError(f"the {loss.name} loss needs per-sample predictors, which a sketch "
                             "with m < n does not preserve; use sketch='identity' (or "
                             "allow_biased_sketch)")

    def _check_privacy(self):
        """Budget, noise choices and calibration; a finite epsilon only for a private algorithm."""
        self._set("epsilon", check_epsilon(self.epsilon, self.delta))
        check_seed(self.seed)
        for name in ("feature_bound", "label_bound"):
            if getattr(self, name) is not None:     # declared: in range, private run or not
                P.check_bound(name, getattr(self, name))   # (1e308 blamed eta, made from it)
        s = self.split
        if s is not None and (isinstance(s, bool) or not isinstance(
                s, (int, float, np.integer, np.floating)) or not 0 < s < 1):
            # given: in range whatever the path (a description written with --split 2 was
            # refused only by the run it described)
            raise InputError(f"split must be in (0, 1) (share of epsilon for the index "
                             f"releases), got {s!r}")
        if self.algorithm != "dp-bcfw-secure":
            self._set("rnm", "laplace" if self.rnm is None else self.rnm)
            self._set("split", 0.5 if self.split is None else self.split)
        if self.rnm is not None and self.rnm not in P.RNM_NOISES:
            raise InputError(f"rnm must be one of {P.RNM_NOISES}, got {self.rnm!r}")
        if self.calibration not in P.CALIBRATIONS:
            raise InputError(f"calibration must be one of {P.CALIBRATIONS}, got "
                             f"{self.calibration!r}")
        if self.private and self.algorithm in ("bcfw", "dfw", "fw"):
            raise InputError(f"algorithm {self.algorithm!r} is non-private; use dp-bcfw or dpfw "
                             f"for a finite epsilon (got epsilon={self.epsilon})")
        if not self.private and self.algorithm == "dpfw":
            self._set("algorithm", "fw")        # DP-FW without noise is FW (same iterates:
            self._set("step", "fw")             # the 2 / (t + 2) step, eta by the public rule)

    def _check_path(self):
        """dp-bcfw-secure's logistic path (given, or the default) and the step rule it takes; a
        helper party only where one is used; a reference only where the fit has l1 balls."""
        path = self.resolved_logistic_path
        how = f"logistic_path {path!r}" if self.logistic_path else \
            f"the default logistic_path {path!r}"
        if self.squared_path is not None:
            how = f"squared_path {self.squared_path!r}"
        secure = self.secure_path
        if secure is not None:
            secure.check_config(self, how)
        self._set("step", check_step(self.step, self.algorithm, self.loss_fn.name, path,
                                     () if secure is None else secure.steps))

    def _check_run_control(self):
        """Checkpoints: where they apply, how often, and what resuming needs."""
        checkpoint = self.checkpoint
        if self.resume and checkpoint is None:
            raise InputError("resume=True needs the checkpoint path")
        if checkpoint is None:
            return
        if self.algorithm in ("fw", "dpfw"):
            raise InputError(f"checkpoints are for the federated vertical algorithms (dp-bcfw, "
                             f"bcfw, dfw, dp-bcfw-secure), not {self.algorithm!r}")
        every = self.checkpoint_every
        if isinstance(every, bool) or not isinstance(every, (int, np.integer)) or every < 1:
            raise InputError(f"checkpoint_every must be a positive integer, got {every!r}")
        if self.private and self.algorithm == "dp-bcfw" and self.ledger is None \
                and not self.resume:
            raise InputError("a private run with a checkpoint needs a ledger file (ledger=PATH, "
                             "--ledger): resuming must not spend again what an in-memory ledger "
                             "forgot")

    # -- what the options imply ------------------------------------------------------------

    @property
    def private(self) -> bool:
        """A finite epsilon: every release is noised and charged."""
        return math.isfinite(self.epsilon)

    @property
    def secure_path(self):
        """The dp-bcfw-secure path of this run (``secure.paths``; None for every other
        algorithm, for a loss dp-bcfw-secure refuses, and for the squared loss without
        ``squared_path``: its rule reads the data's shape, ``secure.solve``)."""
        if self.algorithm != "dp-bcfw-secure" or self.loss_fn.name not in ("squared",
                                                                           "logistic"):
            return None
        if self.loss_fn.name == "squared" and self.squared_path is None:
            return None
        from .secure import paths

        return paths.of(self.loss_fn.name, self.resolved_logistic_path, self.squared_path)

    @property
    def resolved_logistic_path(self):
        """The path of a dp-bcfw-secure logistic run: ``logistic_path`` if given, else
        :func:`choose_logistic_path`'s choice (None for every other run)."""
        return self.logistic_path or self.logistic_path_choice()[0]

    def logistic_path_choice(self):
        """``(path, rule)`` of :func:`choose_logistic_path` when ``logistic_path`` was left to
        its default, ``(None, None)`` when it was given."""
        if self.logistic_path is not None:
            return None, None
        return choose_logistic_path(self.algorithm, self.loss_fn.name)

    @property
    def loss_fn(self):
        """The loss object (``loss`` may be a name or a loss object)."""
        return get_loss(self.loss)

    def check_data(self, data):
        """The checks that need the data; returns the label party (None: every party holds y)."""
        return check_label_party(self.label_party, self.algorithm, data.K)

    def options(self) -> dict:
        """The fields as keyword arguments (``solve(data, **cfg.options())`` runs the same)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def checkpoint_config(self) -> dict:
        """What a checkpoint records of the run and ``resume`` compares (JSON-able)."""
        return dict(loss=self.loss_fn.name, eta=self.eta if self.eta == "auto" else float(self.eta),
                    iterations=int(self.iterations),
                    algorithm=self.algorithm, sampling=str(self.sampling), epsilon=self.epsilon,
                    delta=self.delta, rnm=self.rnm, sketch=self.sketch,
                    sketch_dim=self.sketch_dim, calibration=self.calibration, split=self.split,
                    feature_bound=self.feature_bound, label_bound=self.label_bound,
                    accountant=self.accountant, release_cache=bool(self.release_cache),
                    derivative_clip=self.derivative_clip, fit_intercept=self.fit_intercept)


#: the option names :func:`vflpriv.vertical.api.solve` takes as keywords
OPTIONS = tuple(f.name for f in dataclasses.fields(VerticalConfig))
