"""The built-in audit entries: worst-case neighbouring inputs for each mechanism vflpriv ships.

Every claim is computed by the accountant from the event (see :mod:`vflpriv.audit`); the noise
scales below are chosen so that the claims are near epsilon = 1, where an audit with 1e5 samples
per side has power (a claim of 10 could not be tested, a claim of 0.01 would test noise only).

* ``laplace``: f(D0) = 0, f(D1) = 1 (L1 sensitivity 1), Lap(1): the tight case, the bound should
  approach the claim.
* ``gaussian``: f(D0) = 0, f(D1) = 1, sigma calibrated by the accountant to (1, 1e-5); the audit
  uses the (epsilon, delta) form ln((TPR_lo - delta) / FPR_hi).  The Gaussian's privacy loss at
  delta = 1e-5 is reached only in far tails, so 1e5 samples audit well below the claim.
* ``discrete_gaussian``: the exact discrete Gaussian of the secure path's ring noise
  (:mod:`vflpriv.noise.discrete`), f(D0) = 0, f(D1) = 1 on the integers (sensitivity 1),
  sigma calibrated by the accountant to (1, 1e-5) (its Renyi bound: the only one it has); the
  same (epsilon, delta) test.  Its claim is not Gaussian DP, so no trade-off refutation applies.
* ``distributed_discrete_gaussian``: the same with the noise a party outside {L, H} gets in the
  logistic path, the sum of two holders' N_Z(0, s^2 / 2) (claim: ``DistributedDiscreteGaussian``).
* ``rnm_laplace`` / ``rnm_gumbel`` / ``rnm_exponential``: report-noisy-max over k candidates with
  scale 2 (claim 2 * 1 / 2 = 1), scores (0, ..., 0) on D0 and (1, -1, ..., -1) on D1 (every score
  moves by the sensitivity 1, the target up and the rest down); score = [output == 0] (the tests
  cover both that event and its complement).  For Laplace and Gumbel noise k = 2 audits at about
  0.6 (the notes' warning): the gap closes as k grows while the target's probability shrinks like
  1/k, so a middle k is strongest.  Exponential noise (permute-and-flip) is tight already at
  k = 2: the losing candidate is chosen with probability exactly e^-1 / 2 on D1 against 1/2 on
  D0.  ``search_rnm_pairs`` measures k = 2 ... 256; k is fixed per noise from that search
  (docs/audit.md has the table), not chosen on the audited samples, so the bound stays valid.
* ``sketch_gaussian``: the sketched-feature release a_hat = J a + xi of DP-BCFW-AS (paper 004):
  a seeded Gaussian JL sketch J (m x n, entries N(0, 1/m)), a column a with |a_j| <= B and its
  neighbour a + 2B e_i at the row i with the largest column norm of J (the worst case: the L2
  sensitivity is 2B max_j ||J e_j||, docs/sensitivity.md section 2); xi ~ N(0, sigma^2 I_m) with sigma calibrated by
  the accountant to (1, 1e-5).  Score: the projection of the output on J e_i / ||J e_i||, which
  is a sufficient statistic for this pair (the two output laws differ only along J e_i).
* ``laplace_snapping``: the floating-point-safe Laplace of :mod:`accounting.snapping` on
  f(D0) = 0, f(D1) = 1, its claim from Mironov's theorem.
* ``private_selection``: hyperparameter tuning with random stopping (Papernot & Steinke 2022;
  ``accounting.PrivateSelection``): K ~ Geometric(gamma = 0.2) runs (E[K] = 5), each a candidate
  drawn uniformly from 3 with its validation score plus N(0, sigma^2) (sensitivity 1); the best
  (candidate, score) is released and audited through its score.  Every candidate scores 0 on D0
  and 1 on D1.  sigma is calibrated by the accountant so that the selection's claim (its Renyi
  bound, PS22 Theorem 2) is 1 at delta 1e-5.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from . import AuditMechanism, register

DELTA_GAUSS = 1e-5
TARGET_EPSILON = 1.0

#: candidates per report-noisy-max audit, fixed from search_rnm_pairs (docs/audit.md)
RNM_CANDIDATES = {"laplace": 32, "gumbel": 32, "exponential": 2}
RNM_SCALE = 2.0


def _kernels():
    """vflpriv.kernels (the engine's fused noisy argmax and seeded sketches) when it is
    importable: auditing the engine's own kernels is the point; numpy otherwise."""
    try:
        from vflpriv import kernels
    except ImportError:
        return None
    if not all(hasattr(kernels, f) for f in ("noisy_argmax", "sketch_columns",
                                             "sketch_column_norms")):
        return None
    return kernels


@register("laplace")
def laplace_mechanism() -> AuditMechanism:
    from accounting import Laplace

    event = Laplace(scale=1.0, sensitivity=1.0)

    def sample(n, rng):
        return (0.0 + rng.laplace(0.0, event.scale, n), 1.0 + rng.laplace(0.0, event.scale, n))

    return AuditMechanism("laplace", event, 0.0, sample,
                          description="Laplace, f(D0)=0 vs f(D1)=1, scale 1")


@register("gaussian")
def gaussian_mechanism() -> AuditMechanism:
    from accounting import Gaussian, calibrate

    sigma = calibrate(lambda s: Gaussian(sigma=s, sensitivity=1.0), TARGET_EPSILON, DELTA_GAUSS,
                      decreasing=True).value
    event = Gaussian(sigma=sigma, sensitivity=1.0)

    def sample(n, rng):
        return 0.0 + rng.normal(0.0, sigma, n), 1.0 + rng.normal(0.0, sigma, n)

    return AuditMechanism("gaussian", event, DELTA_GAUSS, sample,
                          description=f"Gaussian, f(D0)=0 vs f(D1)=1, sigma {sigma:.6g}")


@register("discrete_gaussian")
def discrete_gaussian_mechanism() -> AuditMechanism:
    from accounting import DiscreteGaussian, calibrate

    from ..noise.discrete import discrete_gaussian

    sigma = calibrate(lambda s: DiscreteGaussian(sigma=s, sensitivity=1.0), TARGET_EPSILON,
                      DELTA_GAUSS, decreasing=True).value
    event = DiscreteGaussian(sigma=sigma, sensitivity=1.0)
    s2 = Fraction(sigma) ** 2

    def sample(n, rng):
        draw = lambda: discrete_gaussian(rng, s2, n).astype(np.float64)
        return 0.0 + draw(), 1.0 + draw()

    return AuditMechanism("discrete_gaussian", event, DELTA_GAUSS, sample,
                          description=f"discrete Gaussian (exact sampler), f(D0)=0 vs f(D1)=1 on "
                                      f"Z, sigma {sigma:.6g}")


@register("distributed_discrete_gaussian")
def distributed_discrete_gaussian_mechanism() -> AuditMechanism:
    """The noise a party outside {L, H} gets on its scores in the logistic path: the sum of two
    holders' exact N_Z(0, s^2 / 2), f(D0) = 0, f(D1) = 1 on Z; claim
    ``DistributedDiscreteGaussian(s, 1, summands=2)`` (Kairouz, Liu, Steinke 2021 Prop 14;
    docs/sensitivity.md 5.7), s calibrated by the accountant to (1, 1e-5)."""
    from accounting import DistributedDiscreteGaussian, calibrate

    from ..noise.discrete import discrete_gaussian

    def make(s):
        return DistributedDiscreteGaussian(sigma=s, sensitivity=1.0, summands=2)

    sigma = calibrate(make, TARGET_EPSILON, DELTA_GAUSS, decreasing=True).value
    event = make(sigma)
    half = Fraction(sigma) ** 2 / 2

    def sample(n, rng):
        draw = lambda: (discrete_gaussian(rng, half, n) +                   # noqa: E731
                        discrete_gaussian(rng, half, n)).astype(np.float64)
        return 0.0 + draw(), 1.0 + draw()

    return AuditMechanism("distributed_discrete_gaussian", event, DELTA_GAUSS, sample,
                          description=f"sum of two holders' discrete Gaussians (exact "
                                      f"sampler), f(D0)=0 vs f(D1)=1 on Z, sigma {sigma:.6g}")


def rnm_scores(k: int):
    """The worst-case score pair for a k-candidate report-noisy-max with sensitivity 1."""
    import numpy as np

    s0 = np.zeros(k)
    s1 = -np.ones(k)
    s1[0] = 1.0
    return s0, s1


def rnm_sample(noise: str, scale: float, scores, n: int, rng, chunk: int = 1 << 20,
               use_kernels: bool = True):
    """n draws of argmax_i(scores_i + Z_i), Z_i iid from ``noise`` with ``scale``: through the
    engine's ``vflpriv.kernels.noisy_argmax`` when available, else numpy."""
    import numpy as np

    scores = np.asarray(scores, dtype=float)
    k = scores.size
    kern = _kernels() if use_kernels else None
    if kern is not None:
        return np.fromiter((kern.noisy_argmax(scores, noise, scale, rng) for _ in range(n)),
                           dtype=np.int64, count=n)
    out = np.empty(n, dtype=np.int64)
    step = max(1, chunk // k)  # bound the (rows x k) noise block held in memory
    for lo in range(0, n, step):
        m = min(step, n - lo)
        if noise == "laplace":
            z = rng.laplace(0.0, scale, (m, k))
        elif noise == "gumbel":
            z = rng.gumbel(0.0, scale, (m, k))
        elif noise == "exponential":
            z = rng.exponential(scale, (m, k))
        else:
            raise ValueError(f"noise must be laplace, gumbel or exponential, got {noise!r}")
        out[lo:lo + m] = np.argmax(scores + z, axis=1)
    return out


def _target_hit(out):
    import numpy as np

    return (np.asarray(out) == 0).astype(float)


def make_rnm(noise: str, k: int | None = None, scale: float = RNM_SCALE) -> AuditMechanism:
    from accounting import ReportNoisyMax

    k = RNM_CANDIDATES[noise] if k is None else int(k)
    event = ReportNoisyMax(noise=noise, scale=scale, sensitivity=1.0)
    s0, s1 = rnm_scores(k)

    def sample(n, rng):
        return rnm_sample(noise, scale, s0, n, rng), rnm_sample(noise, scale, s1, n, rng)

    return AuditMechanism(f"rnm_{noise}", event, 0.0, sample, score=_target_hit,
                          description=f"report-noisy-max ({noise} noise, scale {scale:g}), "
                          f"k={k}: scores 0 vs (1, -1, ..., -1), score [out == 0]")


for _noise in ("laplace", "gumbel", "exponential"):
    register(f"rnm_{_noise}")(lambda _noise=_noise: make_rnm(_noise))


def search_rnm_pairs(noise: str, ks=(2, 4, 8, 16, 32, 64), samples: int = 100_000,
                     seed: int = 0, confidence: float = 0.95) -> list:
    """Audit report-noisy-max for each k of ``ks``: the table behind ``RNM_CANDIDATES``.

    Returns ``[(k, lower_bound), ...]``.  Taking the best k from this table and then reporting
    its bound on the same samples would be a multiple-testing error; the registry fixes k and the
    suite draws fresh samples.
    """
    from . import audit_mechanism

    return [(k, audit_mechanism(make_rnm(noise, k), samples, seed + k, confidence)["lower_bound"])
            for k in ks]


def sketch_matrix(m: int, n: int, seed: int):
    """The m x n Gaussian JL sketch (entries N(0, 1/m)) regenerated from ``seed``: the engine's
    seeded sketch from ``vflpriv.kernels`` when available, else a numpy Generator's."""
    import numpy as np

    kern = _kernels()
    if kern is not None:
        import scipy.sparse as sp

        return kern.sketch_columns(sp.identity(n, format="csc"), np.arange(n), m, seed,
                                   "gaussian")
    return np.random.default_rng(seed).standard_normal((m, n)) / np.sqrt(m)


@register("sketch_gaussian")
def sketch_gaussian_mechanism(m: int = 32, n: int = 256, feature_bound: float = 1.0,
                              sketch_seed: int = 2024) -> AuditMechanism:
    import numpy as np

    from accounting import Gaussian, calibrate

    J = sketch_matrix(m, n, sketch_seed)
    norms = np.linalg.norm(J, axis=0)
    kern = _kernels()
    if kern is not None:
        # the engine's sensitivity source: column norms computed from the seed
        norms = np.asarray(kern.sketch_column_norms(n, m, sketch_seed, "gaussian"))
    i = int(np.argmax(norms))
    sensitivity = 2.0 * feature_bound * float(norms[i])
    sigma = calibrate(lambda s: Gaussian(sigma=s, sensitivity=sensitivity), TARGET_EPSILON,
                      DELTA_GAUSS, decreasing=True).value
    event = Gaussian(sigma=sigma, sensitivity=sensitivity)
    # A column inside the declared bound, and its neighbour: row i moves from -B to +B.
    a0 = np.random.default_rng(sketch_seed + 1).uniform(-feature_bound, feature_bound, n)
    a0[i] = -feature_bound
    a1 = a0.copy()
    a1[i] = feature_bound
    c0, c1 = J @ a0, J @ a1
    u = J[:, i] / np.linalg.norm(J[:, i])

    def sample(k, rng):
        return (c0 + rng.normal(0.0, sigma, (k, m)), c1 + rng.normal(0.0, sigma, (k, m)))

    return AuditMechanism("sketch_gaussian", event, DELTA_GAUSS, sample, score=lambda out: out @ u,
                          description=f"sketched feature J a + N(0, sigma^2 I), J {m}x{n} "
                          f"Gaussian, B={feature_bound:g}, row {i} flipped, sigma {sigma:.6g}")


@register("laplace_snapping")
def laplace_snapping_mechanism(bound: float = 64.0) -> AuditMechanism:
    from accounting.snapping import snapping_event, snapping_laplace

    scale = 1.0
    event = snapping_event(scale, bound, 1.0)

    def sample(n, rng):
        return (snapping_laplace(0.0, scale, bound, size=n, rng=rng),
                snapping_laplace(1.0, scale, bound, size=n, rng=rng))

    return AuditMechanism("laplace_snapping", event, 0.0, sample,
                          description=f"snapping Laplace (Mironov 2012), f(D0)=0 vs f(D1)=1, "
                          f"lambda {scale:g}, B {bound:g}")


#: the audited tuning: geometric stopping with E[K] = 1 / SELECTION_GAMMA over 3 candidates
SELECTION_GAMMA = 0.2
SELECTION_CANDIDATES = 3


@register("private_selection")
def private_selection_mechanism() -> AuditMechanism:
    """Private selection with random stopping over a noisy validation score (module docstring).
    The best of K independent N(s, sigma^2) scores is drawn exactly by inversion, s + sigma
    Phi^-1(U^(1/K)), with 1 - U^(1/K) = -expm1(log(U) / K) kept accurate near 1; the candidate
    index does not depend on the data (every candidate has the same score) and is not part of
    the audit score."""
    from scipy.special import ndtri

    from accounting import Gaussian, PrivateSelection, calibrate

    def make(s):
        return PrivateSelection(Gaussian(sigma=s, sensitivity=1.0),
                                "truncated_negative_binomial", eta=1.0, gamma=SELECTION_GAMMA)

    sigma = calibrate(make, TARGET_EPSILON, DELTA_GAUSS, decreasing=True).value
    event = make(sigma)

    def best_score(score, n, rng):
        k = rng.geometric(SELECTION_GAMMA, n)                 # P[K = k] = g (1 - g)^(k - 1)
        u = rng.random(n)
        tail = -np.expm1(np.log(u) / k)                       # 1 - U^(1/K)
        best = score - sigma * ndtri(tail)                    # Phi^-1(1 - t) = -Phi^-1(t)
        cand = rng.integers(0, SELECTION_CANDIDATES, n)
        return np.column_stack([best, cand])

    def sample(n, rng):
        return best_score(0.0, n, rng), best_score(1.0, n, rng)

    return AuditMechanism("private_selection", event, DELTA_GAUSS, sample,
                          score=lambda out: out[:, 0],
                          description=f"best of K ~ Geometric({SELECTION_GAMMA:g}) noisy scores "
                                      f"over {SELECTION_CANDIDATES} candidates, scores 0 vs 1, "
                                      f"sigma {sigma:.6g}")
