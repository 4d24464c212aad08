"""The paths of dp-bcfw-secure, each a small object in its own folder, and how a run finds its.

A path (``squares/path.py``: least squares; ``ssp/path.py`` and ``glm/path.py``: the logistic
loss) supplies what differs between them: the options it refuses, its solve, its description
for a deployment that aligns first, the calibration a deployment reports, who helps whose
block, and its report lines.  Code outside a path's folder asks the path object for these; it
never compares a path's name.
"""
from __future__ import annotations

import importlib
from abc import ABC, abstractmethod

from ...errors import InputError

#: each path's name -> the module of this package that defines its ``PATH``
_MODULES = {"squares": ".squares.path", "ssp": ".ssp.path", "glm": ".glm.path"}


def get(name: str) -> "SecurePath":
    """The path called ``name`` (imported when first asked for)."""
    if name not in _MODULES:
        raise KeyError(f"no dp-bcfw-secure path {name!r}; known: {', '.join(_MODULES)}")
    return importlib.import_module(_MODULES[name], __package__).PATH


def check_loss(loss_name: str) -> None:
    if loss_name not in ("squared", "logistic"):
        raise InputError(f"dp-bcfw-secure fits the squared loss (cross-products released once) "
                         f"and the logistic loss (its statistics released once, or its "
                         f"derivatives under secret sharing every round), got loss "
                         f"{loss_name!r}")


def of(loss_name: str, logistic_path: str | None, squared_path: str | None = "fw"
       ) -> "SecurePath":
    """The path a dp-bcfw-secure run takes: for the squared loss its ``squared_path`` ("fw":
    the Frank-Wolfe rounds, ``squares``; "ssp": the moments released once), else the
    logistic loss's resolved path (``VerticalConfig.resolved_logistic_path``)."""
    check_loss(loss_name)
    if loss_name == "squared":
        return get("ssp" if squared_path == "ssp" else "squares")
    return get(logistic_path)


def of_config(cfg) -> "SecurePath":
    """The run's path when the options alone decide it (the squared loss without
    ``squared_path`` is decided with the data's shape: ``solve.resolve``)."""
    path = cfg.secure_path
    if path is None and cfg.loss_fn.name == "squared" and cfg.squared_path is None:
        raise ValueError("the squared loss's default path is chosen with the data's shape "
                         "(secure.solve.resolve)")
    return path or of(cfg.loss_fn.name, cfg.resolved_logistic_path)


def of_solution(sol) -> "SecurePath":
    return get(sol.extra["path"])


def of_family(family: str) -> "SecurePath":
    """The path whose roles are the runtime family ``family`` (``secure``, ``ssp``, ``glm``)."""
    for name in _MODULES:
        if get(name).family == family:
            return get(name)
    raise KeyError(f"no dp-bcfw-secure path with family {family!r}")


class SecurePath(ABC):
    """What every path shares; each path's object overrides what it does otherwise, and must
    supply the four abstract methods (a path without them cannot be made)."""

    #: the path's name (``Solution.extra["path"]``, the JSON's ``secure.path``)
    name = ""
    #: the runtime family of its roles (``vflpriv.runtime.families``)
    family = ""
    #: the ``solve`` options that choose this path
    options: dict = {}
    #: whether it runs rounds (``iterations`` applies)
    rounds = True
    #: the options of ``vflpriv run`` / ``solve`` it reads beyond those every path reads
    reads: frozenset = frozenset()
    #: what it does, in a few words (for a refusal that names it)
    summary = ""
    #: the step rules its parties can take (``--step``), the first the default; () for none
    steps: tuple = ()
    #: whether it takes a helper party (``--helper-party``)
    takes_helper = False
    #: with eta 'auto', the sentence saying what regularizes instead of an l1 ball (None: the
    #: path fits over l1 balls and eta is chosen by the public rule)
    ridge_note = None
    #: what the per-party bar chart compares the bytes sent against
    naive_label = "raw columns"
    #: what a non-private run reveals (the report's ``privacy: none`` line)
    nonprivate_note = ""

    def check_config(self, cfg, how: str) -> None:
        """Refuse, when the config is built, options this path does not take (``how`` names
        the path as the user chose it)."""

    def ridge_for(self, cfg):
        """The sentence saying what regularizes a run of ``cfg`` with eta 'auto' instead of an
        l1 ball (None: the fit is over l1 balls, eta chosen by the public rule)."""
        return self.ridge_note

    def check_options(self, cfg) -> None:
        """Refuse, before the run is settled (no file read), options this path does not take."""

    def checkpoint_step(self, cfg):
        """The step rule a checkpoint records and a resume compares."""
        return cfg.step

    @abstractmethod
    def solve(self, data, run):
        """The Solution of the settled ``run`` (``solve.settle``) on ``data``."""

    def check_public(self, shape, cfg, run) -> None:
        """What can be refused from the column counts alone (``planned.check_public``)."""

    @abstractmethod
    def spec_for(self, shape, run, budget, noise_seed, noise_key, common) -> dict:
        """The server role's spec for ``shape.n`` aligned rows, its plan checked against
        ``budget`` (``planned.settle_for``)."""

    @abstractmethod
    def calibration(self, spec: dict) -> dict:
        """What a deployed run was calibrated to, from its server role's ``spec``."""

    def helpers(self, K, label_party=None, helper_party=None) -> list:
        """Entry k: the parties that receive party k's masked block and compute the other
        share of every product with it: h(k) = (k + 1) mod K (``mpc.beaver.block_helper``)."""
        from .mpc.beaver import block_helper

        return [[block_helper(k, int(K))] for k in range(int(K))]

    def trust(self, K, label_party=None, helper_party=None) -> str:
        """The run's trust line (without the leading ``trust: ``): the coalitions the threat
        model excludes, from the same routing as :meth:`helpers` (docs/sensitivity.md 4.5)."""
        K = int(K)
        pairs = ", ".join(f"{k}->{h[0]}" for k, h in enumerate(self.helpers(K)))
        if K == 2:
            who = ("the dealer (the server) colludes with no party; no coalition of parties is "
                   "excluded")
        elif K == 3:
            who = (f"the dealer (the server) colludes with no party, and no two parties collude "
                   f"(every pair is a block's owner and its helper: {pairs})")
        else:
            who = (f"the dealer (the server) colludes with no party, and no party colludes with "
                   f"its block's helper ({pairs})")
        return f"semi-honest parties and server; {who}; {ALONE} (docs/sensitivity.md 4.5)"

    def rounds_text(self, sol) -> str:
        """How the summary line names the run's length."""
        return f"{sol.iterations} iterations"

    @abstractmethod
    def bytes_line(self, sol, by_kind, fmt) -> str:
        """The report's line of where the bytes went: ``by_kind(*names)`` sums the framed bytes
        of those wire messages, ``fmt`` formats a byte count."""


#: what every path's trust line ends with
ALONE = ("no single party, and not the server alone, learns another party's columns or the "
         "label beyond the DP releases")

#: the dealer's correlated randomness, by wire message
TRIPLES = ("TripleToHolder", "TripleToHelper", "TripleToPeer", "VectorKey")
