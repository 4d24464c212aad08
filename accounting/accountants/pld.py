"""Privacy-loss-distribution accountant: pessimistic PLDs composed on bounded grids, read with a
proven bound on their floating-point error.

Each event becomes a PLD (Koskela et al. 2020; Meiser & Mohammadi 2018), PLDs compose by
convolution (``analysis.pld_grid``), and the result is an upper bound on the exact privacy profile.

* Gaussian events are first merged exactly (sqrt(sum mu_i^2)-GDP), so their PLD is that of a single
  Gaussian, built here (``analysis.pld_leaves.gaussian``): no discretisation error accumulates over repeats.
* Laplace, (eps, delta)-DP releases (Laplace/exponential-noise report-noisy-max, PureDP, ApproxDP:
  the randomized-response pair, valid for adaptive composition) and eps-bounded-range selections
  (Gumbel report-noisy-max, exponential mechanism: the pair that dominates every eps-BR
  selection): built here too, each mass to a few ulps (``analysis.pld_leaves``).
* Poisson-subsampled Gaussian: dp-accounting's connect-the-dots PLD (under add/remove with a
  vectorized hockey-stick curve, ``analysis.fast_pld``).  Under add/remove each side is checked against an
  upper bound on the mechanism's delta at every grid point and padded by any shortfall
  (``analysis.subsampled_check``); under replace-one a relative margin (CONSTRUCTION_SAFETY) covers its
  float error as measured, not proved.
* zCDP has no PLD: unsupported.

Every delta is read with the proven bound on the composition's float error added (FFT round-off,
``analysis.pld_error``), and epsilon is the smallest value whose bound meets delta; where that error bound
is not small against delta (tiny deltas, peaked PMFs) the accountant answers inf with the reason.
"""
from __future__ import annotations

import math
from functools import lru_cache

from ..events import (REPLACE_ONE, ApproxDP, Exponential, Gaussian, Laplace,
                      PoissonSubsampledGaussian, PureDP, ReportNoisyMax)
from ..lattice import (delta_with_tv, epsilon_with_tv, gaussian_like, gaussian_mu, on_lattice,
                       total_tv)
from .analysis import pld_error as err_mod
from .analysis import pld_grid as grid
from .analysis import pld_leaves as leaves_mod
from .analysis import subsampled_check as check
from .analysis.fast_pld import subsampled_gaussian_pld
from .base import Accountant
from .analysis.dp_params import dp_params


#: largest per-release epsilon of a pure/approx-DP leaf the PLD grid is built for
MAX_PURE_EPSILON = 50.0
#: the PLD answers only where its proven numerical error (``analysis.pld_error``) is at most this share
#: of the delta asked for; elsewhere it declines (inf, with the reason), and other rows answer
MAX_ERROR_SHARE = 0.5
#: most distinct non-Gaussian releases one PLD composes: each costs its own construction and a
#: convolution (about 0.1 s for a subsampled Gaussian), so 2000 distinct releases would take
#: minutes; past this the accountant declines (with this reason) and RDP answers in milliseconds.
MAX_DISTINCT_LEAVES = 48
#: coarsest grid interval a single release's PLD is built on (dp-accounting's connect-the-dots
#: construction evaluates expm1(interval), which overflows past ~700); past it the accountant
#: declines, saying why
MAX_INTERVAL = 64.0
#: most excess mass (n x the pessimistic excess of one release's PMF) a composition may carry:
#: its total mass is then at most e^MAX_EXCESS, so every delta is overstated at most that many
#: times (still an upper bound, but looser); past it the accountant declines, saying why
MAX_EXCESS = 1.0
#: share of delta (above the mass at +inf) the FFT grid's proven error may take before the
#: direct-sum grid is tried as well (it is coarser and slower: DP-SGD's 4e-8 at delta 1e-5 does
#: not warrant it; a 1e-12 delta does)
FALLBACK_SHARE = 0.05
#: relative margin for the one construction whose float error is not proven here (dp-accounting's
#: connect-the-dots subsampled Gaussian under replace-one; under add/remove it is checked and
#: padded, ``analysis.subsampled_check``): epsilon is read at delta (1 - 1e-6 of its part above the mass
#: at +inf) and a delta answer is inflated by the same factor
CONSTRUCTION_SAFETY = 1e-6


def _usable(sides, delta: float) -> bool:
    return (err_mod.error(*sides) <= MAX_ERROR_SHARE * delta
            and err_mod.relative(*sides) <= 0.5)


def _inf_mass(sides) -> float:
    return max(p.inf for p in sides if p is not None)


def safe_epsilon(build, delta: float, safety: float = 0.0) -> float:
    """epsilon of the composed sides ``build(points)`` at delta: the smallest epsilon whose
    proven upper bound on delta (the grid's value + its float error bounds) is at most delta.

    First on the default grid (FFT convolutions, finest).  Where its proven absolute error is
    more than FALLBACK_SHARE of the part of delta the grid must resolve (delta minus the mass at
    +inf), also on the grid of RELATIVE_POINTS where every convolution is a direct sum
    (relative errors only, small at any count), keeping the smaller answer: both are proven.
    inf where neither grid's error is small against delta.  ``safety`` (CONSTRUCTION_SAFETY for
    plans with a dp-accounting construction) shrinks the part of delta above the mass at +inf."""
    answers = []

    def solve(sides):
        target = delta - safety * max(0.0, delta - _inf_mass(sides))
        return err_mod.epsilon_upper(*sides, target)

    sides = build(None)
    if _usable(sides, delta):
        answers.append(solve(sides))
    if err_mod.error(*sides) > FALLBACK_SHARE * max(0.0, delta - _inf_mass(sides)):
        other = build(grid.RELATIVE_POINTS)
        if _usable(other, delta):
            answers.append(solve(other))
    return min(answers) if answers else math.inf


def safe_delta(build, epsilon: float, safety: float = 0.0) -> float:
    """An upper bound on delta at epsilon of the composed sides (the smaller of the two grids')."""
    values = [err_mod.delta_upper(*build(points), epsilon)
              for points in (None, grid.RELATIVE_POINTS)]
    return min(1.0, min(values) * (1 + safety))


def _safety(leaves) -> float:
    """CONSTRUCTION_SAFETY where a leaf's PMF is dp-accounting's and not checked here (the
    subsampled Gaussian under replace-one)."""
    return (CONSTRUCTION_SAFETY if any(isinstance(l, PoissonSubsampledGaussian)
                                       and l.neighboring == REPLACE_ONE for l, _ in leaves)
            else 0.0)


def error_reason(sides, delta: float) -> str | None:
    """Why ``safe_epsilon`` declines at this delta (given the sides it falls back to), or None."""
    err, rel = err_mod.error(*sides), err_mod.relative(*sides)
    if rel > 0.5:
        return (f"the PLD's proven bound on its own floating-point error (a relative {rel:.2g}, "
                "compounded over the releases) is too large; the optimal or rdp accountant answers")
    if err > MAX_ERROR_SHARE * delta:
        return (f"the PLD's proven bound on its own floating-point error ({err:.2g} in delta, "
                f"mostly FFT round-off) is not small against delta = {delta:g}; the optimal "
                "or rdp accountant answers")
    return None


class PLDAccountant(Accountant):
    name = "pld"

    def __init__(self, value_discretization_interval: float = 1e-4):
        if not value_discretization_interval > 0:
            raise ValueError("value_discretization_interval must be positive, got "
                             f"{value_discretization_interval!r}")
        self.interval = float(value_discretization_interval)

    def supports_leaf(self, leaf, neighboring):
        if on_lattice(leaf):
            # a discrete Gaussian with its lattice stated: the Gaussian of its mu, plus its TV
            return True
        if not isinstance(leaf, (Gaussian, Laplace, PoissonSubsampledGaussian, ReportNoisyMax,
                                 Exponential, PureDP, ApproxDP)):
            return False
        params = dp_params(leaf)
        # A privacy loss of +-eps spans 2 eps / interval grid points (2e6 at eps = 100): past
        # MAX_PURE_EPSILON the grid is too large (and e^eps overflows past ~709). Other
        # accountants answer such plans.
        return params is None or params[0] <= MAX_PURE_EPSILON

    def _supports_leaves(self, leaves, relation):
        if not super()._supports_leaves(leaves, relation):
            return False
        others = [n for l, n in leaves if not gaussian_like(l)]
        return (len(others) <= MAX_DISTINCT_LEAVES and self._coarsest(leaves)[0] <= MAX_INTERVAL
                and self._excess(leaves)[0] <= MAX_EXCESS)

    def _excess(self, leaves):
        """(n x excess mass of one release, which part): the factor (1 + excess)^n the
        composition's mass grows by (see ``analysis.pld_grid.excess``), decided from the single
        releases' PMFs (at most MAX_BASE_POINTS each) before any composition."""
        from dp_accounting import NeighboringRelation

        rel = NeighboringRelation.ADD_OR_REMOVE_ONE
        if leaves and leaves[0][0].neighboring == REPLACE_ONE:
            rel = NeighboringRelation.REPLACE_ONE
        worst = (0.0, None)
        for leaf, n in leaves:
            if not gaussian_like(leaf):
                e = max(grid.excess(s) for s in _single_sides(leaf, rel, self.interval)
                        if s is not None)
                worst = max(worst, (n * e, leaf.kind), key=lambda w: w[0])
        mu2 = _mu2(leaves)
        if mu2 > 0:
            mu0, m = gaussian_split(math.sqrt(mu2))
            e = max(grid.excess(s) for s in _gaussian_base(mu0, self.interval) if s is not None)
            worst = max(worst, (m * e, "gaussian"), key=lambda w: w[0])
        return worst

    def _coarsest(self, leaves):
        """(largest base interval any part of the plan needs, which part), from the declared
        parameters: decided before anything is built."""
        widths = [(loss_width(l), l.kind) for l, _ in leaves if not gaussian_like(l)]
        mu2 = _mu2(leaves)
        if mu2 > 0:
            widths.append((gaussian_width(gaussian_split(math.sqrt(mu2))[0]), "gaussian"))
        width, kind = max(widths, key=lambda w: w[0])
        return math.ldexp(self.interval, grid.interval_exponent(width, self.interval)), kind

    def _limit_reason(self, leaves):
        others = [n for l, n in leaves if not gaussian_like(l)]
        if len(others) > MAX_DISTINCT_LEAVES:
            return (f"the pld accountant composes at most {MAX_DISTINCT_LEAVES} distinct non-Gaussian "
                    f"releases (this plan has {len(others)}); rdp answers such plans")
        excess, kind = self._excess(leaves) if self._coarsest(leaves)[0] <= MAX_INTERVAL \
            else (0.0, None)
        if excess > MAX_EXCESS:
            return (f"the pld accountant's discretization of the {kind} releases adds "
                    f"{excess:.3g} of probability mass over this many repeats (> {MAX_EXCESS:g}: "
                    "the bound would be loose); rdp answers such plans")
        interval, kind = self._coarsest(leaves)
        if interval > MAX_INTERVAL:
            return (f"the pld accountant would need a grid interval of {interval:.3g} (> "
                    f"{MAX_INTERVAL:g}) for the {kind} releases' privacy loss in "
                    f"{grid.MAX_BASE_POINTS:,} points; the optimal or rdp accountant answers")
        return None

    def build(self, leaves, relation, points=None):
        """The composed PrivacyLossDistribution of the leaves, on a bounded grid (``analysis.pld_grid``):
        every interval is chosen from the plan's size before anything is allocated."""
        from dp_accounting import NeighboringRelation

        rel = (NeighboringRelation.REPLACE_ONE if relation == REPLACE_ONE
               else NeighboringRelation.ADD_OR_REMOVE_ONE)
        parts = []
        mu2 = _mu2(leaves)
        if mu2 > 0:
            parts.append(_gaussian_sides(math.sqrt(mu2), self.interval, points))
        for leaf, n in leaves:
            if not gaussian_like(leaf):
                parts.append(_leaf_sides(leaf, n, rel, self.interval, points))
        return _compose_sides(parts, points)

    def _why_infinite(self, leaves, relation, delta):
        reason = error_reason(self.build(leaves, relation, grid.RELATIVE_POINTS), delta)
        if reason and not error_reason(self.build(leaves, relation, None), delta):
            reason = None
        return reason or super()._why_infinite(leaves, relation, delta)

    def _epsilon(self, leaves, relation, delta):
        def at(d):
            return safe_epsilon(lambda points: self.build(leaves, relation, points), d,
                                _safety(leaves))

        # discrete Gaussians with their lattice stated: the Gaussian-replaced plan's epsilon at
        # delta minus (1 + e^eps) T (``lattice.epsilon_with_tv``; docs/sensitivity.md 4.9.1),
        # with the Renyi epsilon as the upper guess where it applies
        tv = total_tv(leaves)
        return epsilon_with_tv(at, delta, tv, _renyi_hint(leaves, relation, delta) if tv else None)

    def _delta(self, leaves, relation, epsilon):
        value = safe_delta(lambda points: self.build(leaves, relation, points), epsilon,
                           _safety(leaves))
        return delta_with_tv(value, epsilon, total_tv(leaves))


def _mu2(leaves) -> float:
    """sum n mu^2 of the leaves charged as one Gaussian: the Gaussians and the discrete
    Gaussians with their lattice stated (at their Gaussian mu; their TV is added apart)."""
    return sum(n * gaussian_mu(l) ** 2 for l, n in leaves if gaussian_like(l))


def _renyi_hint(leaves, relation, delta):
    """The Renyi epsilon of the plan (an upper guess for ``epsilon_with_tv``), or None."""
    from .rdp import RDPAccountant

    acc = RDPAccountant()
    if not acc._supports_leaves(leaves, relation):
        return None
    value = acc._epsilon(leaves, relation, delta)
    return value if math.isfinite(value) else None


def _compose_sides(parts, points=None):
    """Compose (remove, add-or-None) pairs; add None means symmetric (equal to remove)."""
    limit = grid.DIRECT_POINTS if points is None else points
    remove, add = parts[0]
    for r, a in parts[1:]:
        if add is None and a is None:
            remove = grid.convolve(remove, r, limit)
        else:
            add = grid.convolve(remove if add is None else add, r if a is None else a, limit)
            remove = grid.convolve(remove, r, limit)
    return remove, add


def rr_pld(leaves, base, points=None):
    """The composed PLD of the randomized-response pairs of (eps_i, delta_i)-DP leaves (each leaf
    replaced by the generic mechanism with its guarantee), on a bounded grid."""
    from dp_accounting import NeighboringRelation

    parts = []
    for leaf, n in leaves:
        eps, d0 = dp_params(leaf)
        generic = ApproxDP(eps, d0) if d0 > 0 else PureDP(eps)
        parts.append(_leaf_sides(generic, n, NeighboringRelation.ADD_OR_REMOVE_ONE, base, points))
    return _compose_sides(parts, points)


def loss_width(leaf) -> float:
    """An upper estimate of the width of one release's privacy-loss support, from its declared
    parameters (used to pick the grid before building it)."""
    params = dp_params(leaf)
    if params is not None:
        return 2.0 * params[0]
    if isinstance(leaf, PoissonSubsampledGaussian):
        mu = (2.0 if leaf.neighboring == REPLACE_ONE else 1.0) / leaf.noise_multiplier
    else:
        mu = leaf.mu
    return 2.0 * grid.Z_WIDTH * mu + mu * mu + 1.0


#: largest mu whose Gaussian PLD is built directly; a larger one is 4^j Gaussians of mu / 2^j
GAUSSIAN_SPLIT_MU = 64.0


def gaussian_split(mu: float) -> tuple[float, int]:
    """(mu0, m) with mu = mu0 sqrt(m), m = 4^j, mu0 <= GAUSSIAN_SPLIT_MU: m Gaussians of mu0
    compose to exactly the mu-Gaussian (Dong, Roth, Su 2022), so its PLD is built by repeated
    squaring on a bounded grid.  (dp-accounting builds one Gaussian's PLD over losses
    [-Z mu, mu^2 + Z mu]: at mu = 3e4 that is 1.2e9 points at any usable interval.)"""
    j = max(0, math.ceil(math.log2(mu / GAUSSIAN_SPLIT_MU))) if mu > GAUSSIAN_SPLIT_MU else 0
    return mu / (1 << j), 1 << (2 * j)


def gaussian_width(mu: float) -> float:
    """Width of the loss support of one mu-Gaussian as dp-accounting builds it."""
    return mu * mu + 2.0 * grid.Z_WIDTH * mu + 1.0


@lru_cache(maxsize=16)
def _gaussian_base(mu0, base):
    """One mu0-Gaussian's PLD (symmetric: one side), on at most MAX_BASE_POINTS points."""
    return leaves_mod.gaussian(mu0, base), None


@lru_cache(maxsize=16)
def _gaussian_sides(mu, base, points=None):
    """The mu-Gaussian's PLD (exact merge of all Gaussian releases), on a bounded grid."""
    mu0, m = gaussian_split(mu)
    remove, add = _gaussian_base(mu0, base)
    if m == 1:
        return remove, add
    return (grid.self_compose(remove, m, points),
            None if add is None else grid.self_compose(add, m, points))


@lru_cache(maxsize=16)
def _leaf_sides(leaf, n, rel, base, points=None):
    """PLD sides of ``n`` adaptive repeats of one leaf (cached: ledgers and certificates repeat
    leaves), by repeated squaring on a bounded grid (``analysis.pld_grid``)."""
    r, a = _single_sides(leaf, rel, base)
    if n == 1:
        return r, a
    return grid.self_compose(r, n, points), None if a is None else grid.self_compose(a, n, points)


@lru_cache(maxsize=32)
def _subsampled_pld(leaf, rel, base):
    """dp-accounting's connect-the-dots PLD of one Poisson-subsampled Gaussian: (pld, k)."""
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    k = grid.interval_exponent(loss_width(leaf), base)
    interval = math.ldexp(base, k)
    if rel.name == "ADD_OR_REMOVE_ONE":
        pld = subsampled_gaussian_pld(leaf.noise_multiplier, leaf.sample_rate, interval)
    else:
        pld = pld_lib.from_gaussian_mechanism(
            leaf.noise_multiplier, sensitivity=1.0, sampling_prob=leaf.sample_rate,
            neighboring_relation=rel, value_discretization_interval=interval)
    return pld, k


def _padded(p: grid.GridPmf, eta: float) -> grid.GridPmf:
    return grid.GridPmf(p.base, p.k, p.lower, p.probs, p.inf + eta, p.err, p.rel)


@lru_cache(maxsize=32)
def _single_sides(leaf, rel, base):
    """One release's PLD sides (total mass >= 1), with their float error bounds."""
    if isinstance(leaf, PoissonSubsampledGaussian):
        pld, k = _subsampled_pld(leaf, rel, base)
        # dp-accounting's connect-the-dots masses are second differences of hockey-stick values
        # (Doroshenko et al. 2022, Alg. 1), whose float error is not bounded a priori.  Under
        # add/remove each side is checked against an upper bound on the mechanism's own delta
        # at every grid point and padded at +inf by any shortfall (``analysis.subsampled_check``).  Under replace-one the relative margin
        # CONSTRUCTION_SAFETY covers it, as measured, not as proved (docs/certify.md says so).
        remove, add = grid.sides(pld, base, k)
        if rel.name == "ADD_OR_REMOVE_ONE" and add is not None:
            sigma, q = leaf.noise_multiplier, leaf.sample_rate
            remove = _padded(remove, check.padding(remove, sigma, q, remove=True))
            add = _padded(add, check.padding(add, sigma, q, remove=False))
        return grid.settle(remove), None if add is None else grid.settle(add)
    if isinstance(leaf, Laplace):
        return leaves_mod.laplace(leaf.sensitivity / leaf.scale, base), None
    if getattr(leaf, "bounded_range", False):
        return leaves_mod.bounded_range(leaf.epsilon, base), None
    # built here with masses accurate to a few ulps (their ``rel``): no settling needed, and
    # none wanted (1e-16 of rounding sent to +inf is 1e-4 after 1e12 repeats)
    eps, d0 = dp_params(leaf)
    return leaves_mod.rr(eps, d0, base), None


def clear_caches() -> None:
    """Forget every cached PLD (benchmarks time the construction from cold)."""
    for fn in (_gaussian_base, _gaussian_sides, _leaf_sides, _single_sides, _subsampled_pld):
        fn.cache_clear()
