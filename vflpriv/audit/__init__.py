"""Empirical privacy audits of the mechanisms vflpriv ships.

Each mechanism is audited on worst-case neighbouring inputs D0, D1: it is run ``samples`` times
on each, the outputs are reduced to one real score per run, and
:func:`accounting.audit.audit_samples` turns the two samples into a lower bound on epsilon that
holds with the stated confidence.  The claim it is compared with is computed by the accountant
at run time from the privacy event the release records (never typed in): for ``delta > 0``
``get_accountant(accountant).epsilon(event, delta)``; for ``delta == 0`` the pure epsilon the
basic-composition accountant certifies (it must also certify delta(event, eps) == 0).  A lower
bound above the claim means the implementation leaks more than it says: the audit fails.

The registry
------------
``REGISTRY`` maps a name to a *factory*: a function of no arguments returning an
:class:`AuditMechanism`.  Factories run only when an audit runs, so registering is free
(calibration, sketch matrices and imports happen later).  The built-in entries live in
:mod:`vflpriv.audit.mechanisms`; :data:`AUDIT_MODULES` lists the modules imported to fill the
registry.

Adding a mechanism (e.g. one DP-BCFW-AS iteration of one party, or the LDP-FedP3 local step)
takes a few lines in the module that implements it (or a small module next to it)::

    from vflpriv.audit import AuditMechanism, register

    @register("dp_bcfw_as_iteration")
    def _audit_iteration():
        event = ...                     # the DpEvent the engine records for one party-iteration
        def sample(n, rng):             # n runs on D0 and n on D1 (worst-case neighbours)
            return run_many(D0, n, rng), run_many(D1, n, rng)
        return AuditMechanism(
            name="dp_bcfw_as_iteration", event=event, delta=1e-5, sample=sample,
            score=lambda out: ...,      # outputs -> one real per run (e.g. index == j, or a
                                        # projection of the released feature on J e_i)
            description="one party's index (RNM) + sketched feature release")

and add that module's name to :data:`AUDIT_MODULES` (one line).  Rules for a new entry: the pair
D0, D1 must be neighbours under the event's ``neighboring`` relation and should be the worst case
(the audit is only as strong as the pair and the score: a weak pair audits low, never high); the
event must be the exact event the mechanism records in the ledger; the sampler must draw its
noise from ``rng`` (the suite seeds it).

Multiple mechanisms: :func:`run_suite` gives each of the M audited mechanisms confidence
1 - (1 - confidence) / M, so an honest suite fails with probability at most 1 - confidence
(a union bound).
"""
from __future__ import annotations

import importlib
import math
import time
import zlib
from dataclasses import dataclass, field
from typing import Callable

__all__ = ["AuditMechanism", "REGISTRY", "UNAVAILABLE", "AUDIT_MODULES", "register",
           "register_mechanism", "register_unavailable", "registered", "unavailable",
           "claimed_epsilon", "claimed_mu", "audit_mechanism", "run_suite"]

#: modules whose import registers audit mechanisms (each calls :func:`register`)
AUDIT_MODULES = ["vflpriv.audit.mechanisms", "vflpriv.audit.vertical", "vflpriv.audit.horizontal",
                 "vflpriv.audit.secure", "vflpriv.audit.secure_ssp", "vflpriv.audit.sparse"]

#: name -> factory() -> AuditMechanism
REGISTRY: dict = {}

#: name -> why it cannot run here (a mechanism whose optional dependency is not installed, e.g.
#: the LDP-FedP3 step without torch): listed and reported as skipped, never silently dropped
UNAVAILABLE: dict = {}


@dataclass
class AuditMechanism:
    """One mechanism to audit.

    ``sample(n, rng)`` returns ``(outputs on D0, outputs on D1)``, n independent runs each (first
    axis = runs); ``score`` maps such an array to one real per run (None for scalar outputs);
    ``event`` is the privacy event the release records and ``delta`` the delta of the claim.
    ``audit_kwargs`` go to :func:`accounting.audit.audit_samples` (e.g. ``thresholds``).
    """

    name: str
    event: object
    delta: float
    sample: Callable
    score: Callable | None = None
    description: str = ""
    accountant: str = "best"
    audit_kwargs: dict = field(default_factory=dict)


def register(name: str, *, replace: bool = False):
    """Decorator: register ``factory`` (no arguments -> :class:`AuditMechanism`) as ``name``."""
    def deco(factory):
        register_mechanism(name, factory, replace=replace)
        return factory
    return deco


def register_mechanism(name: str, factory: Callable, *, replace: bool = False) -> None:
    """Register a factory under ``name``; a second registration of a name is an error unless
    ``replace`` (so two modules cannot silently shadow each other)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"audit mechanism name must be a non-empty string, got {name!r}")
    if not callable(factory):
        raise ValueError(f"audit mechanism {name!r}: factory must be callable, got {factory!r}")
    if name in REGISTRY and not replace and REGISTRY[name] is not factory:
        raise ValueError(f"audit mechanism {name!r} is already registered")
    REGISTRY[name] = factory


def register_unavailable(name: str, reason: str) -> None:
    """Declare a mechanism that exists but cannot run in this installation, and why."""
    if name in REGISTRY:
        raise ValueError(f"audit mechanism {name!r} is already registered")
    UNAVAILABLE[name] = reason


def registered() -> dict:
    """The registry after importing every module of :data:`AUDIT_MODULES`."""
    for mod in AUDIT_MODULES:
        importlib.import_module(mod)
    return REGISTRY


def unavailable() -> dict:
    """name -> reason, for the mechanisms that cannot run in this installation."""
    registered()
    return UNAVAILABLE


def claimed_epsilon(event, delta: float, accountant: str = "best") -> float:
    """The epsilon the accountant certifies for ``event`` at ``delta`` (see module docstring)."""
    from accounting import get_accountant

    if delta > 0:
        return get_accountant(accountant).epsilon(event, delta)
    basic = get_accountant("basic")
    # Basic composition sums the per-release (eps, delta); with every delta 0 its epsilon does
    # not depend on the delta asked for, and delta(event, eps) == 0 confirms it is pure.
    eps = basic.epsilon(event, 0.5) if basic.supports(event) else math.inf
    if not math.isfinite(eps) or basic.delta(event, eps) != 0.0:
        raise ValueError(f"event {event!r} is not pure DP; audit it with delta > 0")
    return eps


def _rng_for(seed: int, name: str):
    import numpy as np

    return np.random.default_rng([int(seed), zlib.crc32(name.encode("utf-8"))])


def audit_mechanism(mech: AuditMechanism, samples: int = 100_000, seed: int = 0,
                    confidence: float = 0.95) -> dict:
    """Audit one mechanism; returns the JSON row ``{"name", "claimed_epsilon", "delta",
    "lower_bound", "samples", "ok", ...details}``."""
    from accounting.audit import audit_samples

    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 10:
        raise ValueError(f"samples must be an integer >= 10, got {samples!r}")
    t0 = time.perf_counter()
    claim = claimed_epsilon(mech.event, mech.delta, mech.accountant)
    out0, out1 = mech.sample(samples, _rng_for(seed, mech.name))
    # Two analyses of the same samples, each at half the allowed error (a union bound keeps the
    # mechanism's confidence): the threshold test (epsilon at delta, valid for any mechanism)
    # and the trade-off curve (the GDP parameter mu, valid for any mechanism; it refutes the
    # claim when the claim is Gaussian DP, docs/audit.md "The trade-off audit").
    half = 1.0 - (1.0 - confidence) / 2.0
    s0 = _score_array(out0, mech.score)
    s1 = _score_array(out1, mech.score)
    res = audit_samples(s0, s1, mech.delta, half, seed=seed, **mech.audit_kwargs)
    tro = audit_samples(s0, s1, mech.delta, half, method="tradeoff", seed=seed)
    mu_claim = claimed_mu(mech.event)
    gdp_ok = mu_claim is None or tro.mu <= mu_claim
    # Both epsilon bounds are valid for any mechanism, each with error (1 - confidence) / 2, so
    # their maximum is valid with the mechanism's confidence (the same union bound).  The split
    # test is tighter on pure-DP mechanisms, the trade-off grid's tail thresholds on Gaussian
    # ones.
    best = tro if tro.epsilon > res.epsilon else res
    share = best.epsilon / claim if claim > 0 else math.inf
    tradeoff = {"mu_lower": tro.mu, "mu_claimed": mu_claim,
                "gdp_epsilon": tro.gdp_epsilon if mech.delta > 0 else None,
                "gdp_share": (tro.gdp_epsilon / claim if mu_claim is not None and claim > 0
                              else None),
                "epsilon": tro.epsilon, "ok": bool(gdp_ok), "confidence": half,
                "thresholds": tro.tests // 4}
    return {"name": mech.name, "claimed_epsilon": claim, "delta": mech.delta,
            "lower_bound": best.epsilon, "samples": samples,
            "ok": bool(best.epsilon <= claim and gdp_ok),
            "method": best.method, "share": share,
            "confidence": confidence, "event": mech.event.to_dict(),
            "split_epsilon": res.epsilon,
            "test": {"method": best.method, "threshold": best.threshold,
                     "direction": best.direction, "order": list(best.order),
                     "p_lower": best.p_lower, "p_upper": best.p_upper,
                     "counts": list(best.counts), "confidence": half, "tests": best.tests},
            "tradeoff": tradeoff,
            "description": mech.description, "seconds": time.perf_counter() - t0}


def _score_array(out, score):
    """The 1-D scores of one side (scored once, shared by both analyses)."""
    return out if score is None else score(out)


def claimed_mu(event):
    """mu when the event's claim is exactly mu-GDP (a ``Gaussian`` event, or a composition /
    self-composition of them: sqrt of the sum of mu_i^2, Dong, Roth & Su 2022, Cor. 3.3), else
    None.  The accountant's privacy profile of such an event is G_mu's, so refuting mu-GDP
    refutes the claim."""
    from accounting import Composed, Gaussian, SelfComposed

    if isinstance(event, Gaussian):
        return event.sensitivity / event.sigma
    if isinstance(event, SelfComposed):
        m = claimed_mu(event.event)
        return None if m is None else m * math.sqrt(event.count)
    if isinstance(event, Composed):
        ms = [claimed_mu(e) for e in event.events]
        return None if any(m is None for m in ms) else math.sqrt(sum(m * m for m in ms))
    return None


def run_suite(names=None, samples: int = 100_000, seed: int = 0,
              confidence: float = 0.95, progress=None) -> dict:
    """Audit the registered mechanisms (all, or ``names``) with a family-wise ``confidence``.

    Returns ``{"ok": bool, "confidence": ..., "mechanisms": [row, ...], "skipped": [{"name",
    "reason"}, ...]}``; ``skipped`` lists the mechanisms that cannot run in this installation
    (only when auditing all; naming one of them is an error that says why).
    ``progress(i)`` is called after the i-th mechanism (0-based).
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    reg = registered()
    missing = unavailable()
    skipped = []
    if names is None:
        names = list(reg)
        skipped = [{"name": n, "reason": r} for n, r in missing.items()]
    else:
        names = list(names)
        for n in names:
            if n in missing:
                raise ValueError(f"audit mechanism {n!r} cannot run here: {missing[n]}")
        unknown = [n for n in names if n not in reg]
        if unknown:
            raise ValueError(f"unknown audit mechanism {unknown[0]!r}; known: "
                             f"{', '.join(sorted([*reg, *missing]))}")
    per = 1.0 - (1.0 - confidence) / max(1, len(names))
    rows = []
    for i, n in enumerate(names):
        rows.append(audit_mechanism(reg[n](), samples=samples, seed=seed, confidence=per))
        if progress is not None:
            progress(i)
    return {"ok": all(r["ok"] for r in rows), "confidence": confidence,
            "per_mechanism_confidence": per, "mechanisms": rows, "skipped": skipped}
