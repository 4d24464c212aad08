"""A horizontal run's options as frozen, validated objects (numpy only, no torch):
:class:`LocalConfig` (a client's local training) and :class:`HorizontalConfig` (everything
:func:`vflpriv.horizontal.runtime.run` takes besides the strategy, the data and the model).

Each is checked once, on construction, before any data are read or budget spent, with one
:class:`~vflpriv.errors.InputError` naming the option as ``vflpriv horizontal`` spells it
(``--participation must be in (0, 1], got 1.5``).  Local DP (record level, per client): a finite
``epsilon`` needs ``delta`` in (0, 1) and a clip C > 0; the accountant composes each client's
subsampled Gaussians (rdp, pld or best; basic, advanced and optimal compose (epsilon, delta)
releases only).
"""
from __future__ import annotations

import dataclasses
import math
import numbers
from typing import Any, Callable

from ..errors import MAX_ROUNDS, InputError, check_count

#: caps of a client's local training (the step count is epochs x records / batch size)
MAX_LOCAL_EPOCHS = 10_000
MAX_BATCH_SIZE = 2 ** 31 - 1

STEPS = ("subgradient", "prox")
SAMPLERS = ("feddyn", "fixed")
ACCOUNTANTS = ("rdp", "pld", "best")


def _number(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and not math.isnan(v)


def _integer(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


@dataclasses.dataclass(frozen=True)
class LocalConfig:
    """A client's local training: ``epochs`` over its data per round in minibatches of
    ``batch_size`` (with DP: the expected size of a Poisson batch, rate b/m), step ``lr``,
    ``weight_decay``, the gradient norm clip ``grad_clip`` (inf: off) and the elastic-net
    ``step`` (:mod:`vflpriv.horizontal.local` has the update rules)."""

    epochs: float = 5.0
    batch_size: int = 10
    lr: float = 0.1
    weight_decay: float = 1e-3
    grad_clip: float = 10.0
    step: str = "subgradient"

    def __post_init__(self):
        if not (_number(self.epochs) and math.isfinite(self.epochs) and self.epochs > 0):
            raise InputError(f"--local-epochs must be > 0, got {self.epochs!r}")
        if self.epochs > MAX_LOCAL_EPOCHS:      # 1e308 overflowed the step count
            raise InputError(f"--local-epochs must be at most {MAX_LOCAL_EPOCHS:,}, got "
                             f"{self.epochs:g}")
        if not _integer(self.batch_size) or self.batch_size < 1:
            raise InputError(f"--batch-size must be a positive integer, got {self.batch_size}")
        if self.batch_size > MAX_BATCH_SIZE:
            raise InputError(f"--batch-size must be at most {MAX_BATCH_SIZE:,}, got "
                             f"{self.batch_size:.4g}")
        if not (_number(self.lr) and math.isfinite(self.lr) and self.lr > 0):
            raise InputError(f"--lr must be > 0, got {self.lr!r}")
        if not (_number(self.weight_decay) and math.isfinite(self.weight_decay)
                and self.weight_decay >= 0):
            raise InputError(f"--weight-decay must be >= 0, got {self.weight_decay!r}")
        if not (_number(self.grad_clip) and self.grad_clip > 0):
            raise InputError(f"--grad-clip must be > 0 (inf = off), got {self.grad_clip!r}")
        if self.step not in STEPS:
            raise InputError(f"--step must be subgradient or prox, got {self.step!r}")

    def steps(self, m: int, private: bool) -> int:
        """Local steps on m records: ceil(E m / b) Poisson batches with DP, else E epochs of
        ceil(m / b) batches."""
        if private:
            return max(1, int(math.ceil(self.epochs * m / self.batch_size)))
        return max(1, int(math.ceil(self.epochs * math.ceil(m / self.batch_size) - 1e-9)))


@dataclasses.dataclass(frozen=True)
class HorizontalConfig:
    """The options of :func:`vflpriv.horizontal.runtime.run`, validated on construction;
    ``local=None`` is the default :class:`LocalConfig`."""

    rounds: int
    participation: float = 1.0
    local: LocalConfig | None = None
    sampler: str = "feddyn"
    epsilon: float = math.inf
    delta: float = 1e-5
    clip: float = 1.0
    accountant: str = "rdp"
    ledger: Any = None
    seed: int | None = None
    threads: int = 1
    progress: Callable | None = None
    backend: str = "inprocess"
    flower: Any = None

    def __post_init__(self):
        if not _integer(self.rounds) or self.rounds < 1:
            raise InputError(f"--rounds must be a positive integer, got {self.rounds}")
        check_count("--rounds", self.rounds, MAX_ROUNDS)
        if not (_number(self.participation) and 0 < self.participation <= 1):
            raise InputError(f"--participation must be in (0, 1], got {self.participation!r}")
        if self.sampler not in SAMPLERS:
            raise InputError(f"sampler must be one of {', '.join(SAMPLERS)}, got "
                             f"{self.sampler!r}")
        if self.local is None:
            object.__setattr__(self, "local", LocalConfig())
        elif not isinstance(self.local, LocalConfig):
            raise InputError(f"local must be a LocalConfig, got {type(self.local).__name__}")
        self._check_privacy()
        if not _integer(self.threads) or self.threads < 1:
            raise InputError(f"threads must be a positive integer, got {self.threads!r}")
        from ..runtime.backends import check_backend

        check_backend(self.backend)

    def _check_privacy(self):
        if not (_number(self.epsilon) and self.epsilon > 0):
            raise InputError(f"--epsilon must be > 0 (inf = non-private), got {self.epsilon!r}")
        if not (_number(self.delta) and 0 < self.delta < 1):
            raise InputError(f"--delta must be in (0, 1), got {self.delta!r}")
        if not (_number(self.clip) and math.isfinite(self.clip) and self.clip > 0):
            raise InputError(f"--clip must be > 0, got {self.clip!r}")
        if self.accountant not in ACCOUNTANTS:
            raise InputError(f"--accountant must be rdp, pld or best, got {self.accountant!r}")
        if self.seed is not None and (not _integer(self.seed) or self.seed < 0):
            raise InputError(f"--seed must be >= 0, got {self.seed}")

    @property
    def private(self) -> bool:
        """A finite epsilon: record-level local DP at every client."""
        return math.isfinite(self.epsilon)

    def options(self) -> dict:
        """The fields as keyword arguments."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


#: the option names :func:`vflpriv.horizontal.runtime.run` takes as keywords
OPTIONS = tuple(f.name for f in dataclasses.fields(HorizontalConfig))
