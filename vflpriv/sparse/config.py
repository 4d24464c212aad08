"""A sparse run's options as one frozen, validated object: :class:`SparseConfig`.

Every option of :func:`vflpriv.sparse.api.fit` is a field, checked once, on construction, before
any data are loaded, with one :class:`~vflpriv.errors.InputError` naming the option as the command
line spells it (``--rounds must be an integer >= 1, got 0``).  What needs the data (``tau`` at most
the dimension, the participation against the number of clients the data have, the labels a loss
needs) is checked by ``fit`` once the data are read.

Groups, checked in this order: the method (``algorithm``, ``rounds``, ``local_steps``, ``tau``,
``lr``, ``batch_size``, ``batch_growth``, ``weights``, ``loss``, ``l2``, ``dictionary``,
``radius``, ``tol``, ``server_lr``); the federation (``clients``, ``participation``, ``backend``,
``flower``); the privacy plan (``epsilon``, ``delta``, ``privacy``, ``clip``, ``accountant``,
``ledger``, ``seed``); run control (``label``, ``layout``, ``callback``, ``metering``).
The private-run rules (paper 000 / 003 with DP, :mod:`vflpriv.sparse.privacy`): a record-level run
needs a fixed step (``--lr``: the default is estimated from the data) and a constant batch size (the
sampling rate is fixed by the plan); a client-level run needs uniform weights (the sensitivity of
the weighted mean would depend on the clients' sizes); FedGradMP's subproblem reads the whole local
data, so it is private at client level only.
:class:`RemoteConfig` is what :func:`vflpriv.sparse.remote.run` takes for a run hosted on a Flower
backend: a ``SparseConfig``'s options resolved against the data (:meth:`RemoteConfig.of`).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

from ..errors import MAX_CLIENTS, MAX_ROUNDS, InputError, check_count
from .algorithms import ALGORITHMS

WEIGHTS = ("uniform", "examples")
LOSSES = ("squared", "logistic", "softmax")
LEVELS = ("record", "client")


def _positive_int(name, v, lo=1):
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise InputError(f"{name} must be an integer >= {lo}, got {v!r}")
    return v


def _positive_finite(name, v):
    if not (isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0
            and math.isfinite(v)):
        raise InputError(f"{name} must be a positive finite number, got {v!r}")


@dataclasses.dataclass(frozen=True)
class SparseConfig:
    """Every option of a horizontal sparse run (:func:`vflpriv.sparse.api.fit` says what each
    does), validated on construction; the module docstring lists the rules."""

    algorithm: str
    clients: int | None = None
    rounds: int = 50
    local_steps: int = 1
    tau: int | None = None
    lr: float | None = None
    batch_size: int | None = None
    batch_growth: float = 1.0
    participation: Any = "full"
    weights: str = "uniform"
    loss: str = "squared"
    l2: float = 0.0
    epsilon: float = math.inf
    delta: float | None = None
    privacy: str = "record"
    clip: float = 1.0
    accountant: str = "rdp"
    ledger: Any = None
    seed: int | None = None
    label: str | None = None
    dictionary: str = "identity"
    radius: float | None = None
    tol: float | None = None
    server_lr: float = 1.0
    layout: str = "auto"
    callback: Callable | None = None
    metering: bool = True
    backend: str = "inprocess"
    flower: Any = None

    def __post_init__(self):
        self._check_method()
        self._check_federation()
        self._check_privacy()

    def _check_method(self):
        """The algorithm and its step, sparsity, batch and loss options."""
        algorithm = self.algorithm
        if algorithm not in ALGORITHMS:
            raise InputError(f"--algorithm must be one of {', '.join(ALGORITHMS)}, got "
                             f"{algorithm!r}")
        l2 = self.l2
        if isinstance(l2, bool) or not isinstance(l2, (int, float)) or l2 < 0 \
                or not math.isfinite(l2):
            raise InputError(f"--l2 must be a finite number >= 0, got {l2!r}")
        for name in ("radius", "tol"):
            if getattr(self, name) is not None:
                _positive_finite(f"--{name}", getattr(self, name))
        _positive_finite("--server-lr", self.server_lr)
        _positive_int("--rounds", self.rounds)
        check_count("--rounds", self.rounds, MAX_ROUNDS)
        _positive_int("--local-steps", self.local_steps)
        if algorithm == "diht" and self.local_steps != 1:
            raise InputError(f"--algorithm diht takes one local step per round; --local-steps "
                             f"must be 1, got {self.local_steps}")
        if self.tau is not None:
            _positive_int("--tau", self.tau)
        lr = self.lr
        if lr is not None and not (isinstance(lr, (int, float)) and lr > 0 and math.isfinite(lr)):
            raise InputError(f"--lr must be a positive finite number, got {lr!r}")
        if self.batch_size is not None:
            _positive_int("--batch-size", self.batch_size)
        growth = self.batch_growth
        if not (isinstance(growth, (int, float)) and growth >= 1 and math.isfinite(growth)):
            raise InputError(f"--batch-growth must be a finite number >= 1, got {growth!r}")
        if self.weights not in WEIGHTS:
            raise InputError(f"--weights must be uniform or examples, got {self.weights!r}")
        if self.loss not in LOSSES:
            raise InputError(f"--loss must be squared, logistic or softmax, got {self.loss!r}")
        if self.loss == "softmax" and algorithm in ("fedgradmp", "fedgradmp-inexact"):
            raise InputError(f"--algorithm {algorithm} supports --loss squared or logistic, not "
                             "softmax")
        if self.loss == "softmax" and self.dictionary not in (None, "identity"):
            raise InputError("--dictionary needs --loss squared or logistic")

    def _check_federation(self):
        """How many clients, who takes part in a round, and where the clients run."""
        if self.clients is not None:
            if isinstance(self.clients, bool) or not isinstance(self.clients, int) \
                    or self.clients < 1:
                raise InputError(f"--clients must be >= 1, got {self.clients}")
            check_count("--clients", self.clients, MAX_CLIENTS)
            from .runtime import Participation

            try:
                Participation.parse(self.participation, self.clients)   # names a bad value
            except ValueError as exc:
                raise InputError(str(exc)) from None
        from ..runtime.backends import check_backend, require_flwr

        check_backend(self.backend)
        if self.backend != "inprocess":
            require_flwr(self.backend)           # before any data is read or budget spent

    def _check_privacy(self):
        """A finite epsilon: delta, the protection level, the clip and the rules above."""
        eps, delta, level, algorithm = self.epsilon, self.delta, self.privacy, self.algorithm
        if not (isinstance(eps, (int, float)) and eps > 0 and not math.isnan(eps)):
            raise InputError(f"--epsilon must be a positive number or inf, got {eps!r}")
        if not self.private:
            return
        if delta is None or not (isinstance(delta, (int, float)) and 0 < delta < 1):
            raise InputError(f"--delta must be in (0, 1) with a finite --epsilon, got {delta!r}")
        if level not in LEVELS:
            raise InputError(f"--privacy must be record or client, got {level!r}")
        clip = self.clip
        if not (isinstance(clip, (int, float)) and clip > 0 and math.isfinite(clip)):
            raise InputError(f"--clip must be a positive finite number, got {clip!r}")
        if self.lr is None and algorithm not in ("fedgradmp", "fedgradmp-inexact"):
            raise InputError("a private run needs --lr: the default step is estimated from the "
                             "data, which a private run may not read")
        if level == "record" and algorithm in ("fedgradmp", "fedgradmp-inexact"):
            raise InputError(f"--algorithm {algorithm} cannot run with --privacy record (its "
                             "subproblem reads the full local data); use --privacy client")
        if level == "client" and self.weights != "uniform":
            raise InputError("--privacy client needs --weights uniform (examples weights would "
                             "make the sensitivity depend on the clients' sizes)")
        if self.batch_growth != 1:
            raise InputError(f"--batch-growth must be 1 in a private run (the record sampling "
                             f"rate is fixed by the plan), got {self.batch_growth!r}")

    @property
    def private(self) -> bool:
        """A finite epsilon: every release is clipped, noised and charged."""
        return math.isfinite(self.epsilon)

    def options(self) -> dict:
        """The fields as keyword arguments (``fit(data, **cfg.options())`` runs the same)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


#: the option names :func:`vflpriv.sparse.api.fit` takes as keywords
OPTIONS = tuple(f.name for f in dataclasses.fields(SparseConfig))


@dataclasses.dataclass(frozen=True)
class RemoteConfig:
    """How :func:`vflpriv.sparse.remote.run` hosts one sparse run on a Flower backend
    (``flower-sim``, ``flower``, or the API's ``local`` link): the options of a
    :class:`SparseConfig`, resolved against the data and in the shape the roles read.

    ``participation`` and ``batch`` are the resolved
    :class:`~vflpriv.sparse.runtime.Participation` and
    :class:`~vflpriv.sparse.runtime.BatchSchedule`; ``privacy`` is None (a non-private run) or
    ``{"level", "epsilon", "delta", "clip", "accountant", "ledger"}``; ``strategy_kw`` the
    method's own options (``tol``, ``radius``, ``server_lr``), told to every client at setup;
    ``evaluate``: keep every round's model for the metrics (False: the last one only);
    ``flower``: a :class:`~vflpriv.runtime.backends.FlowerOptions` (None: its defaults).
    :meth:`of` builds one from a :class:`SparseConfig`.

    The backend is checked on construction (a Flower backend that Flower can run), before any
    data are written; what needs the data (the default step size) is checked by ``run``.
    """

    backend: str
    rounds: int
    participation: Any
    batch: Any
    loss: str = "squared"
    l2: float = 0.0
    lr: float | None = None
    weights: str = "uniform"
    seed: int | None = None
    privacy: dict | None = None
    strategy_kw: dict | None = None
    evaluate: bool = True
    callback: Callable | None = None
    flower: Any = None

    def __post_init__(self):
        from ..runtime.backends import FlowerOptions, check_backend, require_flwr

        check_backend(self.backend)
        if self.backend == "inprocess":
            raise InputError("sparse.remote.run runs the Flower backends; inprocess is "
                             "vflpriv.sparse.runtime.run")
        require_flwr(self.backend)
        if self.flower is None:           # normalized, so replace() gives an equal config
            object.__setattr__(self, "flower", FlowerOptions())

    @classmethod
    def of(cls, cfg: SparseConfig, participation, batch) -> RemoteConfig:
        """The hosted run of ``cfg`` with its participation and batch schedule resolved (what
        :func:`vflpriv.sparse.api.fit` does once the data are read)."""
        return cls(cfg.backend, cfg.rounds, participation, batch, loss=cfg.loss, l2=cfg.l2,
                   lr=cfg.lr, weights=cfg.weights, seed=cfg.seed,
                   privacy=None if not cfg.private else {
                       "level": cfg.privacy, "epsilon": cfg.epsilon, "delta": cfg.delta,
                       "clip": cfg.clip, "accountant": cfg.accountant, "ledger": cfg.ledger},
                   strategy_kw={"tol": cfg.tol, "radius": cfg.radius, "server_lr": cfg.server_lr},
                   callback=cfg.callback, flower=cfg.flower)
