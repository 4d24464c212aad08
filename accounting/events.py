"""Privacy events: mechanisms described as data.

An event says *what was released* (which noise, which scale, which declared sensitivity, how many
times) and nothing about how to account for it; accountants (``accounting.accountants``) interpret
events and say which ones they support.  The algebra follows Google's dp-accounting ``DpEvent``.

Every leaf event states the neighbouring relation under which its sensitivity was declared:
``"add_remove"`` (one person added or removed) or ``"replace_one"`` (one person's record replaced).
A composition must not mix relations: the guarantee would not be about one relation.

All numbers are validated at construction: an event that cannot describe a real release (negative
scale, NaN, delta outside [0, 1), ...) raises ``ValueError`` naming the field.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, fields

ADD_REMOVE = "add_remove"
REPLACE_ONE = "replace_one"
NEIGHBORING_RELATIONS = (ADD_REMOVE, REPLACE_ONE)

RNM_NOISES = ("laplace", "gumbel", "exponential")

#: Largest ``summands`` of a :class:`DistributedDiscreteGaussian`: its tau is a sum of one term
#: per summand, so a plan or ledger record with summands = 1e12 hung certify, ledger verify and
#: every run on that ledger.  A summand is one noise holder (a party or a client): this is the
#: largest client count a run accepts (vflpriv.errors.MAX_CLIENTS), about 20 ms of tau.
MAX_SUMMANDS = 100_000
#: Largest ``dimension`` (exact as a float64, like a plan's count)
MAX_DIMENSION = 2 ** 53
#: Largest ``count`` of a :class:`SelfComposed` (exact as a float64; a plan's count has the same
#: cap): a ledger record edited to count = 1e30 was read and summed.
MAX_COUNT = 2 ** 53
#: Deepest nesting of compositions (:class:`Composed`, :class:`SelfComposed`, a
#: :class:`PrivateSelection`'s base) an event may have.  A run's events nest two or three deep;
#: a ledger record edited to nest 490 deep ended in a RecursionError line, deeper ones in a
#: generic "nested too deeply".
MAX_NESTING = 32
#: Largest expected number of base runs E[K] of a :class:`PrivateSelection` (a million training
#: runs; mu = 1e300 was accepted and charged as if it could happen).
MAX_SELECTIONS = 1_000_000


def nesting(event) -> int:
    """How deep ``event``'s compositions nest (a leaf: 0)."""
    return getattr(event, "_nesting", 0)


def _set_nesting(event, *children) -> None:
    """Record ``event``'s nesting depth (one more than its deepest child); refuse one past
    :data:`MAX_NESTING`, naming it."""
    depth = 1 + max(nesting(c) for c in children)
    if depth > MAX_NESTING:
        raise ValueError(f"events nest at most {MAX_NESTING} deep (accounting.events."
                         f"MAX_NESTING), got {depth}")
    object.__setattr__(event, "_nesting", depth)       # not a field: kept out of eq/hash


def check_nesting(data) -> None:
    """Refuse an event description (``to_dict`` output) nested deeper than
    :data:`MAX_NESTING`, without recursion (so a description 100,000 deep is refused as
    quickly as one 33 deep, before any event is built)."""
    stack = [(data, 0)]
    while stack:
        d, depth = stack.pop()
        if not isinstance(d, dict):
            continue
        children = []
        kind = d.get("kind")
        if kind == "composed" and isinstance(d.get("events"), (list, tuple)):
            children = list(d["events"])
        elif kind == "self_composed":
            children = [d.get("event")]
        elif kind == "private_selection":
            children = [d.get("base")]
        if children:
            if depth + 1 > MAX_NESTING:
                raise ValueError(f"events nest at most {MAX_NESTING} deep (accounting.events."
                                 f"MAX_NESTING), got more")
            stack.extend((c, depth + 1) for c in children)


def _number(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number, got {value!r}")
    return float(value)


def _check_positive(name: str, value, *, allow_inf: bool = False) -> float:
    value = _number(name, value)
    if math.isnan(value) or value <= 0 or (math.isinf(value) and not allow_inf):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return value


def _check_nonnegative(name: str, value) -> float:
    value = _number(name, value)
    if math.isnan(value) or value < 0 or math.isinf(value):
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return value


def _check_relation(value) -> str:
    if value not in NEIGHBORING_RELATIONS:
        raise ValueError(f"neighboring must be one of {NEIGHBORING_RELATIONS}, got {value!r}")
    return value


#: the optional fields of the discrete Gaussians that say how fine their lattice is (for the
#: total-variation analysis, ``accounting.lattice``); left out of ``to_dict`` when not given,
#: so a description without them reads as before
LATTICE_FIELDS = ("resolution", "coordinates")


def _check_lattice_fields(event, least_coordinates: int = 1) -> None:
    """``resolution`` (the lattice step, in the values' units) and ``coordinates`` (how many
    noisy coordinates the release has) are given together or not at all; resolution positive
    and finite, coordinates an integer in [least_coordinates, MAX_DIMENSION]."""
    res, coords = event.resolution, event.coordinates
    if res is None and coords is None:
        return
    if res is None or coords is None:
        given, missing = (("resolution", "coordinates") if coords is None
                          else ("coordinates", "resolution"))
        raise ValueError(f"{given}={getattr(event, given)!r} needs {missing} too (the lattice "
                         f"step and the number of noisy coordinates are given together)")
    if isinstance(res, bool) or not isinstance(res, (int, float)) or not (
            math.isfinite(res) and res > 0):
        raise ValueError(f"resolution must be a positive finite number (the lattice step in "
                         f"the values' units, 2**-f for f fractional bits), got {res!r}")
    object.__setattr__(event, "resolution", float(res))
    if isinstance(coords, bool) or not isinstance(coords, int) or coords < least_coordinates:
        raise ValueError(f"coordinates must be an integer >= {least_coordinates} (the noisy "
                         f"coordinates of the release" + (", at least its dimension"
                                                          if least_coordinates > 1 else "")
                         + f"), got {coords!r}")
    if coords > MAX_DIMENSION:
        raise ValueError(f"coordinates must be at most {MAX_DIMENSION:,} (accounting.events."
                         f"MAX_DIMENSION), got {coords:,}")


def _check_gaussian_fields(event) -> None:
    """sigma and sensitivity positive and finite, the relation known, and their ratio not so
    small that mu^2 underflows to 0 in the accountants (the Gaussian family's shared checks)."""
    object.__setattr__(event, "sigma", _check_positive("sigma", event.sigma))
    object.__setattr__(event, "sensitivity", _check_positive("sensitivity", event.sensitivity))
    _check_relation(event.neighboring)
    if event.sensitivity / event.sigma < 1e-150:
        raise ValueError(f"sigma={event.sigma!r} is too large for sensitivity="
                         f"{event.sensitivity!r}: their ratio underflows in the accountants")


class DpEvent:
    """Base class of every privacy event."""

    kind: str = "event"

    def to_dict(self) -> dict:
        """A JSON-ready description, the inverse of :func:`event_from_dict`."""
        out = {"kind": self.kind}
        for f in fields(self):
            v = getattr(self, f.name)
            if v is None and f.name in LATTICE_FIELDS:
                continue            # not given: the description is the one written before them
            if isinstance(v, DpEvent):
                v = v.to_dict()
            elif isinstance(v, tuple):
                v = [e.to_dict() for e in v]
            out[f.name] = v
        return out


@dataclass(frozen=True)
class Laplace(DpEvent):
    """Laplace mechanism: f(D) + Lap(scale) with declared L1 sensitivity. (sensitivity/scale)-DP."""

    scale: float
    sensitivity: float = 1.0
    neighboring: str = ADD_REMOVE
    kind = "laplace"

    def __post_init__(self):
        object.__setattr__(self, "scale", _check_positive("scale", self.scale))
        object.__setattr__(self, "sensitivity", _check_positive("sensitivity", self.sensitivity))
        _check_relation(self.neighboring)

    @property
    def epsilon(self) -> float:
        return self.sensitivity / self.scale


@dataclass(frozen=True)
class Gaussian(DpEvent):
    """Gaussian mechanism: f(D) + N(0, sigma^2 I) with declared L2 sensitivity."""

    sigma: float
    sensitivity: float = 1.0
    neighboring: str = ADD_REMOVE
    kind = "gaussian"

    def __post_init__(self):
        _check_gaussian_fields(self)

    @property
    def mu(self) -> float:
        """The Gaussian-DP parameter sensitivity / sigma (exact: Dong, Roth, Su 2022)."""
        return self.sensitivity / self.sigma


@dataclass(frozen=True)
class DiscreteGaussian(DpEvent):
    """Discrete Gaussian mechanism: f(D) + Y with f integer-valued (in Z^d, any d) and
    Y_j ~ N_Z(0, sigma^2) independent (pmf proportional to exp(-y^2 / (2 sigma^2)) on Z), with
    declared L2 sensitivity ||f(D) - f(D')||_2 <= sensitivity.  Scaled to a lattice g Z^d (a
    value held in fixed point at scale 2^s: g = 2^-s) it is f(D) in g Z^d plus g N_Z(0,
    (sigma / g)^2) per coordinate, sigma and sensitivity then in the values' units: the guarantee
    below depends on sensitivity / sigma only, so both descriptions are the same event.

    Its Renyi divergence of order alpha is at most alpha sensitivity^2 / (2 sigma^2), the
    continuous Gaussian's, for every d (Canonne, Kamath, Steinke 2020, Proposition 5 for one
    coordinate with an integer shift; independent coordinates add: docs/sensitivity.md,
    "Discrete Gaussian noise in the ring").  That is all that is proven for a vector: its
    privacy loss distribution is NOT the continuous Gaussian's (at small sigma it is worse), so
    only the accountants that use the Renyi bound support it (``rdp``, hence ``best``); it is not
    a :class:`Gaussian` and never pooled with one.

    Unless its lattice is stated: ``resolution`` g (the lattice step in the values' units, 2^-f
    for a value held with f fractional bits; sigma / g is the noise's scale in lattice units)
    and ``coordinates`` (how many noisy coordinates the release has).  Then the release is
    within total variation ``tv`` of the continuous Gaussian release (``accounting.lattice``;
    docs/sensitivity.md 4.9.1), and the ``pld`` and ``optimal`` accountants (hence ``best``)
    charge it as a :class:`Gaussian` of the same mu plus (1 + e^eps) times the plan's summed
    TV in delta; ``best`` keeps the smaller of that and the Renyi bound.  Both None (the
    default): the Renyi bound only, as before."""

    sigma: float
    sensitivity: float = 1.0
    neighboring: str = ADD_REMOVE
    resolution: float | None = None
    coordinates: int | None = None
    kind = "discrete_gaussian"

    def __post_init__(self):
        _check_gaussian_fields(self)
        _check_lattice_fields(self)

    @property
    def mu(self) -> float:
        """sensitivity / sigma: the Renyi curve is alpha mu^2 / 2 (mu^2 / 2-zCDP)."""
        return self.sensitivity / self.sigma

    @property
    def gaussian_mu(self) -> float:
        """mu of the continuous Gaussian it is charged as when its lattice is stated."""
        return self.sensitivity / self.sigma

    @property
    def tv(self) -> float | None:
        """An upper bound on the total variation between this release (with a uniform
        dither, docs/sensitivity.md 4.9.1) and the continuous Gaussian one; None without a
        stated lattice."""
        if self.resolution is None:
            return None
        from .lattice import release_tv

        return release_tv(self.sigma, self.resolution, self.coordinates)


@functools.lru_cache(maxsize=256)
def _kls_tau(m: int, var: float) -> float:
    """:attr:`DistributedDiscreteGaussian.tau` for m summands of variance ``var`` each
    (one term per summand, each rounded up; cached: an accountant asks for it at every order)."""
    if var < 0.25:
        return math.inf
    total = 0.0
    for k in range(1, m):
        exponent = -2.0 * math.pi ** 2 * var * k / (k + 1)
        term = math.exp(exponent) if exponent > -700.0 else 5e-324
        total = math.nextafter(total + math.nextafter(term, math.inf), math.inf)
    return math.nextafter(10.0 * total, math.inf)


@dataclass(frozen=True)
class DistributedDiscreteGaussian(DpEvent):
    """The distributed discrete Gaussian: f(D) + Y with f integer-valued on the lattice
    ``granularity`` Z^d and each coordinate's noise either one N_Z(0, s^2) or the sum of
    ``summands`` independent N_Z(0, s^2 / summands) drawn by different holders (s = sigma /
    granularity in lattice units; ``dimension`` counts the summed coordinates).  Declared L2
    sensitivity ``sensitivity`` (values' units).  A sum of discrete Gaussians is not a discrete
    Gaussian; Kairouz, Liu and Steinke (2021, "The Distributed Discrete Gaussian Mechanism for
    Federated Learning with Secure Aggregation", Proposition 14) bound its Renyi divergence at
    every order alpha >= 1 by each of

        alpha mu^2 / 2 + tau d,   alpha / 2 (mu + tau sqrt(d))^2,   with mu = sensitivity / sigma,
        tau = 10 sum_{k=1}^{m-1} exp(-2 pi^2 (s^2 / m) k / (k + 1))   (m summands, s^2/m >= 1/4),

    and its arXiv version by alpha / 2 (mu^2 + tau d / 2).  ``mu`` below is the proven
    sqrt(mu^2 + 2 tau d + 2 mu tau sqrt(d) + tau^2 d), rounded up, whose curve alpha mu^2 / 2
    is above all three for alpha >= 1; the coordinates holding a single discrete Gaussian add
    alpha mu_i^2 / 2 (CKS Proposition 5), which the same curve covers (docs/sensitivity.md 5.7).
    Where a summand's s^2 / m is below 1/4 the bound is not proven and ``mu`` is infinite.  Like
    :class:`DiscreteGaussian`, only the Renyi accountant (hence ``best``) supports it; the
    ledger pools it with the discrete Gaussians (the same curve alpha mu^2 / 2).

    With its lattice stated (``resolution``, the step of the lattice the query and every
    summand live on, in the values' units, and ``coordinates``, all the release's noisy
    coordinates, the ``dimension`` summed ones among them), it is also within total variation
    ``tv`` of the continuous Gaussian release of mu = sensitivity / sigma (docs/sensitivity.md
    4.9.1 and 5.7), and the ``pld`` and ``optimal`` accountants charge it so, as a
    :class:`DiscreteGaussian` with its lattice stated."""

    sigma: float
    sensitivity: float = 1.0
    summands: int = 2
    dimension: int = 1
    granularity: float = 1.0
    neighboring: str = ADD_REMOVE
    resolution: float | None = None
    coordinates: int | None = None
    kind = "distributed_discrete_gaussian"

    def __post_init__(self):
        _check_gaussian_fields(self)
        object.__setattr__(self, "granularity", _check_positive("granularity", self.granularity))
        for name, cap in (("summands", MAX_SUMMANDS), ("dimension", MAX_DIMENSION)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
            if v > cap:
                raise ValueError(f"{name} must be at most {cap:,} (accounting.events.MAX_"
                                 f"{name.upper()}), got {v:,}")
        _check_lattice_fields(self, least_coordinates=self.dimension)

    @property
    def gaussian_mu(self) -> float:
        """mu of the continuous Gaussian it is charged as when its lattice is stated (the sum's
        variance is sigma^2, so the Gaussian's mu is sensitivity / sigma, not the Renyi mu)."""
        return self.sensitivity / self.sigma

    @property
    def tv(self) -> float | None:
        """An upper bound on the total variation between this release (with a uniform
        dither) and the continuous Gaussian one (``accounting.lattice.release_tv``: the
        ``dimension`` summed coordinates as sums of ``summands`` discrete Gaussians, the others
        single ones); None without a stated lattice."""
        if self.resolution is None:
            return None
        from .lattice import release_tv

        return release_tv(self.sigma, self.resolution, self.coordinates, self.dimension,
                          self.summands)

    @property
    def tau(self) -> float:
        """KLS's tau for ``summands`` draws of variance (sigma / granularity)^2 / summands,
        rounded up (a term below the smallest double is counted as that double); inf where a
        summand's variance is below 1/4 (outside the proposition)."""
        return _kls_tau(self.summands, (self.sigma / self.granularity) ** 2 / self.summands)

    @property
    def mu(self) -> float:
        """The Renyi curve is alpha mu^2 / 2 with this mu (class docstring; rounded up)."""
        base = self.sensitivity / self.sigma
        tau = self.tau
        if math.isinf(tau):
            return math.inf
        d = self.dimension
        extra = 2.0 * tau * d + 2.0 * base * tau * math.sqrt(d) + tau * tau * d
        return math.nextafter(math.sqrt(math.nextafter(base * base + extra, math.inf)), math.inf)


@dataclass(frozen=True)
class PoissonSubsampledGaussian(DpEvent):
    """One step of DP-SGD: each record joins the batch with probability ``sample_rate``, the
    clipped sum (L2 sensitivity 1 after clipping) gets N(0, noise_multiplier^2)."""

    noise_multiplier: float
    sample_rate: float
    neighboring: str = ADD_REMOVE
    kind = "poisson_subsampled_gaussian"

    def __post_init__(self):
        object.__setattr__(self, "noise_multiplier",
                           _check_positive("noise_multiplier", self.noise_multiplier))
        q = _check_positive("sample_rate", self.sample_rate)
        if q > 1:
            raise ValueError(f"sample_rate must be in (0, 1], got {self.sample_rate!r}")
        object.__setattr__(self, "sample_rate", q)
        _check_relation(self.neighboring)


@dataclass(frozen=True)
class ReportNoisyMax(DpEvent):
    """Report-noisy-max: argmax_i (score_i + Z_i), each score with declared sensitivity D.

    The privacy of the three noises (all (2D/scale)-DP under any neighbouring relation for which
    each score moves by at most D; the factor 2 covers scores that move in opposite directions):

    * ``laplace``: Z ~ Lap(scale).  (2D/scale)-DP (Dwork & Roth 2014, Claim 3.9).  No bounded-range
      guarantee is known, so it is accounted as a pure-DP event.
    * ``gumbel``: Z ~ Gumbel(scale).  Exactly the exponential mechanism with epsilon = 2D/scale
      (McSherry & Talwar 2007; the Gumbel-max trick), hence (2D/scale)-DP *and* (2D/scale)-bounded
      range (Durfee & Rogers 2019), which composes as (2D/scale)^2/8-zCDP (Cesar & Rogers 2021).
    * ``exponential``: Z ~ Exp(scale), one-sided.  Equals permute-and-flip (Ding et al. 2021,
      McKenna & Sheldon 2020): (2D/scale)-DP and NOT bounded-range (the error of opendp#2911).
    """

    noise: str
    scale: float
    sensitivity: float = 1.0
    neighboring: str = ADD_REMOVE
    kind = "report_noisy_max"

    def __post_init__(self):
        if self.noise not in RNM_NOISES:
            raise ValueError(f"noise must be one of {RNM_NOISES}, got {self.noise!r}")
        object.__setattr__(self, "scale", _check_positive("scale", self.scale))
        object.__setattr__(self, "sensitivity", _check_positive("sensitivity", self.sensitivity))
        _check_relation(self.neighboring)

    @property
    def epsilon(self) -> float:
        return 2.0 * self.sensitivity / self.scale

    @property
    def bounded_range(self) -> bool:
        return self.noise == "gumbel"


@dataclass(frozen=True)
class Exponential(DpEvent):
    """An epsilon-bounded-range selection (the exponential mechanism with privacy parameter
    epsilon): epsilon-DP and epsilon-BR (Durfee & Rogers 2019)."""

    epsilon: float
    neighboring: str = ADD_REMOVE
    kind = "exponential"

    def __post_init__(self):
        object.__setattr__(self, "epsilon", _check_positive("epsilon", self.epsilon))
        _check_relation(self.neighboring)

    @property
    def bounded_range(self) -> bool:
        return True


@dataclass(frozen=True)
class PureDP(DpEvent):
    """Any epsilon-DP release."""

    epsilon: float
    neighboring: str = ADD_REMOVE
    kind = "pure_dp"

    def __post_init__(self):
        object.__setattr__(self, "epsilon", _check_positive("epsilon", self.epsilon))
        _check_relation(self.neighboring)


@dataclass(frozen=True)
class ApproxDP(DpEvent):
    """Any (epsilon, delta)-DP release."""

    epsilon: float
    delta: float
    neighboring: str = ADD_REMOVE
    kind = "approx_dp"

    def __post_init__(self):
        object.__setattr__(self, "epsilon", _check_nonnegative("epsilon", self.epsilon))
        d = _check_nonnegative("delta", self.delta)
        if d >= 1:
            raise ValueError(f"delta must be in [0, 1), got {self.delta!r}")
        object.__setattr__(self, "delta", d)
        if self.epsilon == 0 and d == 0:
            raise ValueError("approx_dp with epsilon = 0 and delta = 0 releases nothing; drop it")
        _check_relation(self.neighboring)


@dataclass(frozen=True)
class ZCDP(DpEvent):
    """A rho-zCDP release (Bun & Steinke 2016): Renyi divergence <= rho * alpha for every alpha."""

    rho: float
    neighboring: str = ADD_REMOVE
    kind = "zcdp"

    def __post_init__(self):
        object.__setattr__(self, "rho", _check_positive("rho", self.rho))
        _check_relation(self.neighboring)


@dataclass(frozen=True)
class SelfComposed(DpEvent):
    """``event`` released ``count`` times, each release possibly chosen adaptively."""

    event: DpEvent
    count: int
    kind = "self_composed"

    def __post_init__(self):
        if not isinstance(self.event, DpEvent):
            raise ValueError(f"event must be a DpEvent, got {self.event!r}")
        if isinstance(self.count, bool) or not isinstance(self.count, int) or self.count < 1:
            raise ValueError(f"count must be an integer >= 1, got {self.count!r}")
        if self.count > MAX_COUNT:
            raise ValueError(f"count must be at most 2**53 = {MAX_COUNT:,} (accounting.events."
                             f"MAX_COUNT), got {self.count:.4g}")
        _set_nesting(self, self.event)


@dataclass(frozen=True)
class Composed(DpEvent):
    """Adaptive composition of a list of events."""

    events: tuple = field(default_factory=tuple)
    kind = "composed"

    def __post_init__(self):
        evs = tuple(self.events)
        if not evs:
            raise ValueError("events must be a non-empty list of DpEvent")
        for e in evs:
            if not isinstance(e, DpEvent):
                raise ValueError(f"events must hold DpEvent objects, got {e!r}")
        object.__setattr__(self, "events", evs)
        _set_nesting(self, *evs)


#: stopping distributions of :class:`PrivateSelection` (Papernot & Steinke 2022)
STOPPING_RULES = ("truncated_negative_binomial", "poisson")


def _check_finite(name: str, value) -> float:
    value = _number(name, value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return value


@dataclass(frozen=True)
class PrivateSelection(DpEvent):
    """Private selection with random stopping (hyperparameter tuning): draw K from a stopping
    distribution, run the base mechanism Q (one training run plus its DP score, any event,
    composed ones included) K times independently, release only the best (candidate, score)
    under a fixed total order.  Papernot & Steinke, "Hyperparameter Tuning with Renyi
    Differential Privacy", ICLR 2022 (arXiv:2110.03620v2; "PS22" below):

    * ``stopping="truncated_negative_binomial"`` with ``eta`` > -1 and ``gamma`` in (0, 1):
      PS22 Definition 1, P[K = k] = (1 - gamma)^k / (gamma^-eta - 1) prod_{l=0}^{k-1} (l + eta)
      / (l + 1) for k >= 1 (eta != 0), and the logarithmic distribution P[K = k] = (1 -
      gamma)^k / (k log(1 / gamma)) at eta = 0.  eta = 1 is the geometric distribution P[K = k]
      = gamma (1 - gamma)^(k - 1) (stop after each run with probability gamma; E[K] = 1 /
      gamma), the Liu-Talwar (2019) case.  E[K] = eta (1 - gamma) / (gamma (1 - gamma^eta)),
      and (1 / gamma - 1) / log(1 / gamma) at eta = 0 (PS22, after Definition 1; the same
      formula as dp-accounting's ``_truncated_negative_binomial_mean``).  K >= 1 always.
    * ``stopping="poisson"`` with ``mu`` >= 1: K ~ Poisson(mu) (PS22 Theorem 6); when K = 0 the
      release is a fixed output that does not depend on the data.  E[K] = mu.  Below mu = 1 the
      theorem's bound goes negative (log mu / (lambda - 1)) and the exact divergence is above
      it (tests/test_private_selection.py), so mu < 1 is refused, as dp-accounting refuses a
      mean below 1.

    The guarantee (Renyi DP only, so only the ``rdp`` accountant, hence ``best``, supports it;
    ``accounting.accountants.rdp.rdp_private_selection`` has the formulas) holds for any base
    the Renyi accountant supports; the neighbouring relation is the base's.  The ledger keeps a
    selection as one leaf (never pooled)."""

    base: DpEvent
    stopping: str
    eta: float | None = None
    gamma: float | None = None
    mu: float | None = None
    kind = "private_selection"

    def __post_init__(self):
        if not isinstance(self.base, DpEvent):
            raise ValueError(f"base must be a DpEvent, got {self.base!r}")
        _set_nesting(self, self.base)
        try:
            relation = neighboring_of(self.base)
        except ValueError as exc:
            raise ValueError(f"base: {exc}") from None
        object.__setattr__(self, "_relation", relation)     # not a field: kept out of eq/hash
        if self.stopping not in STOPPING_RULES:
            raise ValueError(f"stopping must be one of {STOPPING_RULES}, got {self.stopping!r}")
        if self.stopping == "poisson":
            for name in ("eta", "gamma"):
                if getattr(self, name) is not None:
                    raise ValueError(f"{name} is a truncated_negative_binomial parameter; "
                                     f"poisson stopping takes mu only, got {name}="
                                     f"{getattr(self, name)!r}")
            if self.mu is None:
                raise ValueError("poisson stopping needs mu (the mean number of runs)")
            mu = _check_positive("mu", self.mu)
            if mu < 1:
                # Theorem 6's log(mu) / (lambda - 1) term is negative below 1 and the bound
                # fails there (tests/test_private_selection.py: mu = 0.5 with a Gaussian base
                # gives a negative "bound" at lambda = 1.25 against an exact divergence of
                # 0.25); dp-accounting also requires a mean of at least 1
                raise ValueError(f"mu must be >= 1 (a mean of at least one run; PS22 Theorem 6's "
                                 f"bound does not hold below), got {self.mu!r}")
            object.__setattr__(self, "mu", mu)
        else:
            if self.mu is not None:
                raise ValueError(f"mu is the poisson parameter; truncated_negative_binomial "
                                 f"stopping takes eta and gamma, got mu={self.mu!r}")
            for name in ("eta", "gamma"):
                if getattr(self, name) is None:
                    raise ValueError(f"truncated_negative_binomial stopping needs {name}")
            eta = _check_finite("eta", self.eta)
            if eta <= -1:
                raise ValueError(f"eta must be a finite number > -1, got {self.eta!r}")
            gamma = _check_finite("gamma", self.gamma)
            if not 0 < gamma < 1:
                raise ValueError(f"gamma must be in (0, 1) (the stopping probability), "
                                 f"got {self.gamma!r}")
            object.__setattr__(self, "eta", eta)
            object.__setattr__(self, "gamma", gamma)
            if not math.isfinite(self.log_expected_count):
                raise ValueError(f"gamma={self.gamma!r} with eta={self.eta!r}: the expected "
                                 "number of runs overflows")
        if self.log_expected_count > math.log(MAX_SELECTIONS) + 1e-12:
            raise ValueError(f"the expected number of runs E[K] = {self.expected_count:.4g} "
                             f"({self.stopping}, {self.stopping_parameters}) must be at most "
                             f"{MAX_SELECTIONS:,} (accounting.events.MAX_SELECTIONS)")

    @property
    def neighboring(self) -> str:
        """The base's neighbouring relation (the selection adds no data access of its own)."""
        return self._relation

    @property
    def log_expected_count(self) -> float:
        """log E[K], computed without cancellation: for the truncated negative binomial
        log(1 - gamma) - log(gamma) + log(eta / (1 - gamma^eta)), the last factor written
        -eta / expm1(eta log gamma) (its eta -> 0 limit 1 / log(1 / gamma) is the logarithmic
        distribution's); log(mu) for Poisson."""
        if self.stopping == "poisson":
            return math.log(self.mu)
        lg = math.log(self.gamma)
        x = self.eta * lg
        factor = -1.0 / lg if x == 0 else -self.eta / math.expm1(x)
        return math.log1p(-self.gamma) - lg + math.log(factor)

    @property
    def expected_count(self) -> float:
        """E[K], the expected number of base runs (class docstring)."""
        return math.exp(self.log_expected_count)

    @property
    def stopping_parameters(self) -> dict:
        return ({"mu": self.mu} if self.stopping == "poisson"
                else {"eta": self.eta, "gamma": self.gamma})


LEAF_TYPES = {cls.kind: cls for cls in (Laplace, Gaussian, DiscreteGaussian,
                                         DistributedDiscreteGaussian, PoissonSubsampledGaussian,
                                         ReportNoisyMax, Exponential, PureDP, ApproxDP, ZCDP,
                                         PrivateSelection)}


def event_from_dict(data: dict) -> DpEvent:
    """Rebuild an event from :meth:`DpEvent.to_dict` output (validating every field)."""
    check_nesting(data)
    return _from_dict(data)


def _from_dict(data: dict) -> DpEvent:
    if not isinstance(data, dict) or "kind" not in data:
        raise ValueError(f"not an event description: {data!r}")
    data = dict(data)
    kind = data.pop("kind")
    if kind == "self_composed":
        return SelfComposed(_from_dict(data["event"]), data["count"])
    if kind == "composed":
        return Composed(tuple(_from_dict(e) for e in data["events"]))
    if kind == PrivateSelection.kind:
        known = {f.name for f in fields(PrivateSelection)}
        unknown = set(data) - known
        if unknown or "base" not in data:
            raise ValueError(f"unknown field(s) {sorted(unknown)} for event kind {kind!r}"
                             if unknown else f"event kind {kind!r} needs a base event")
        rest = {k: v for k, v in data.items() if k != "base"}
        return PrivateSelection(_from_dict(data["base"]), **rest)
    if kind not in LEAF_TYPES:
        raise ValueError(f"unknown event kind {kind!r}")
    cls = LEAF_TYPES[kind]
    known = {f.name for f in fields(cls)}
    unknown = set(data) - known
    if unknown:
        raise ValueError(f"unknown field(s) {sorted(unknown)} for event kind {kind!r}")
    return cls(**data)


def flatten(event: DpEvent) -> list[tuple[DpEvent, int]]:
    """The leaves of an event with their multiplicities, identical leaves merged (order kept)."""
    counts: dict[DpEvent, int] = {}

    def walk(e: DpEvent, mult: int) -> None:
        if isinstance(e, SelfComposed):
            walk(e.event, mult * e.count)
        elif isinstance(e, Composed):
            for sub in e.events:
                walk(sub, mult)
        elif isinstance(e, DpEvent) and type(e) in LEAF_TYPES.values():
            counts[e] = counts.get(e, 0) + mult
        else:
            raise ValueError(f"not a privacy event: {e!r}")

    walk(event, 1)
    return list(counts.items())


def neighboring_of(event: DpEvent) -> str:
    """The one neighbouring relation of all leaves; ValueError when they disagree."""
    relations = {leaf.neighboring for leaf, _ in flatten(event)}
    if len(relations) != 1:
        raise ValueError(f"the events mix neighbouring relations {sorted(relations)}; "
                         "state every release under the same relation")
    return relations.pop()
