"""What a reservation holds, as pools: the Gaussian-like leaves of a plan pooled by their
mu^2 (and, for a discrete Gaussian on a lattice, its Gaussian mu^2 and TV), every other leaf
counted, so that a release is covered when each pool it draws on still holds enough.
"""
from __future__ import annotations

from fractions import Fraction

from ..events import (Composed, DiscreteGaussian, DistributedDiscreteGaussian, DpEvent, Gaussian,
                      SelfComposed, flatten)


def dominates(big, small) -> bool:
    """Whether the leaf release ``big`` is at least as private-costly as ``small`` for every
    accountant's analysis: same kind and neighbouring relation, and a privacy parameter at least
    as large (Gaussian mu, Laplace / selection epsilon, zCDP rho, (eps, delta)), or the same
    sampling rate with at most the noise; a private selection with the same stopping rule, a
    covered base and stopping parameters at least as costly.  A run may spend a reserved unit of
    ``big`` on ``small`` (e.g. a round that releases fewer features than its worst case)."""
    from ..events import (ApproxDP, Exponential, Gaussian, Laplace, PoissonSubsampledGaussian,
                         PrivateSelection, PureDP, ReportNoisyMax, ZCDP)

    if type(big) is not type(small) or big.neighboring != small.neighboring:
        return False
    if isinstance(big, (DiscreteGaussian, DistributedDiscreteGaussian)) and (
            small.resolution is not None or big.resolution is not None):
        # with a lattice stated the release is also charged as a Gaussian plus its TV: a plain
        # one covers it by its Renyi mu (its plan was checked by that bound alone); one with a
        # lattice covers only one with a lattice, in every amount
        if big.resolution is None:
            return small.mu <= big.mu
        return (small.resolution is not None and small.mu <= big.mu
                and small.gaussian_mu <= big.gaussian_mu and small.tv <= big.tv)
    if isinstance(big, (Gaussian, DiscreteGaussian, DistributedDiscreteGaussian)):
        return small.mu <= big.mu
    if isinstance(big, ReportNoisyMax):
        return small.noise == big.noise and small.epsilon <= big.epsilon
    if isinstance(big, (Laplace, Exponential, PureDP)):
        return small.epsilon <= big.epsilon
    if isinstance(big, ApproxDP):
        return small.epsilon <= big.epsilon and small.delta <= big.delta
    if isinstance(big, ZCDP):
        return small.rho <= big.rho
    if isinstance(big, PoissonSubsampledGaussian):
        return (small.sample_rate == big.sample_rate
                and small.noise_multiplier >= big.noise_multiplier)
    if isinstance(big, PrivateSelection):
        # the Renyi bound (its only analysis, rdp.rdp_private_selection) grows with the base's
        # curve, with mu (Poisson), and with eta and 1/gamma (E[K] and the (1 + eta) log(1/gamma)
        # term both do); a base is covered by an equal base or a dominating leaf
        if big.stopping != small.stopping or not (
                big.base == small.base or dominates(big.base, small.base)):
            return False
        if big.stopping == "poisson":
            return small.mu <= big.mu
        return small.eta <= big.eta and small.gamma >= big.gamma
    return False


#: leaves held as a pool of mu^2: Gaussians (exact composition, mu-GDP) and, apart from them,
#: discrete Gaussians (their Renyi curves alpha mu^2 / 2 add: the only analysis they have),
#: distributed ones in the discrete pool (the same curve, with their proven mu)
_POOLED = (Gaussian, DiscreteGaussian, DistributedDiscreteGaussian)


def _pooled(leaf) -> bool:
    return type(leaf) in _POOLED


#: the pools of the discrete Gaussians with their lattice stated (``accounting.lattice``):
#: charged by ``pld`` / ``optimal`` as Gaussians of mu = gaussian_mu plus their TV, and by
#: ``rdp`` with their Renyi mu, so a reservation holds all three amounts and a release must fit
#: in each (then every accountant's value of what is released stays within what was reserved)
_LATTICE = f"mu2:{DiscreteGaussian.kind}:lattice"


_LATTICE_GAUSSIAN = f"gmu2:{DiscreteGaussian.kind}:lattice"


_LATTICE_TV = f"tv:{DiscreteGaussian.kind}:lattice"


def _pool_key(leaf):
    if type(leaf) is Gaussian:
        return ("mu2", leaf.neighboring)
    if getattr(leaf, "resolution", None) is not None:
        return (_LATTICE, leaf.neighboring)
    return (f"mu2:{DiscreteGaussian.kind}", leaf.neighboring)


def _pool_needs(leaf, n) -> dict:
    """{pool key: amount} one pooled leaf released n times takes (exact fractions)."""
    key = _pool_key(leaf)
    needs = {key: n * Fraction(leaf.mu) ** 2}
    if key[0] == _LATTICE:
        rel = leaf.neighboring
        needs[(_LATTICE_GAUSSIAN, rel)] = n * Fraction(leaf.gaussian_mu) ** 2
        needs[(_LATTICE_TV, rel)] = n * Fraction(leaf.tv)
    return needs


def _gaussian_pools(leaves: dict) -> dict:
    """{pool key: sum of n mu^2} of the Gaussian leaves (one pool per kind and neighbouring
    relation; a discrete Gaussian never draws on a Gaussian's pool), exactly (fractions); the
    discrete Gaussians with their lattice stated in pools of their own (Renyi mu^2, Gaussian
    mu^2 and TV)."""
    pools: dict = {}
    for leaf, n in leaves.items():
        if _pooled(leaf):
            for key, amount in _pool_needs(leaf, n).items():
                pools[key] = pools.get(key, 0) + amount
    return pools


def _leaf_counts(event) -> dict:
    """{leaf: multiplicity} of an event (what reservations are held and used in)."""
    return dict(flatten(event))


def _compose_counts(counts: dict) -> DpEvent | None:
    """One event from {event: multiplicity} (identical releases become one SelfComposed)."""
    if not counts:
        return None
    parts = [e if n == 1 else SelfComposed(e, n) for e, n in counts.items()]
    return parts[0] if len(parts) == 1 else Composed(tuple(parts))
