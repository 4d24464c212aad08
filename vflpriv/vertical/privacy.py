"""Sensitivities, noise calibration and budget bookkeeping for DP-BCFW-AS (paper 004, Algorithm 2).

The derivation is in ``docs/sensitivity.md``; in short, with declared bounds |a_ij| <= B_a,
|y_j| <= B_y (the engine clips the data to them), per-party radius eta, K blocks and n rows
(n public; neighbours replace one person's row, ``replace_one``):

* per-sample predictor bound  R = B_a * K * eta        (|a_j^T x| <= B_a ||x||_1)
* derivative bound            L = loss.derivative_bound(R, B_y), or min(c, that) with a
                              declared ``derivative_clip`` c (per-sample derivatives clipped)
* score sensitivity           Delta_idx = 2 B_a L / n  (score_i = a_i^T r / n, r_j = l'(u_j, y_j))
* feature sensitivity         Delta_feat = 2 B_a max_j ||J e_j||  (per party and round)
* with an intercept b (|b| <= B_b, ``vflpriv.optim.intercept.bound``; docs/sensitivity.md 3.1):
  L is taken at |u + b| <= R + B_b, and party 0's derivative g_b = (1/n) sum_j r_j has
  Delta_b = 2 L / n; it is released with Gaussian noise sigma_b = sqrt(2) b Delta_b / Delta_idx
  (``intercept_sigma``: the standard deviation of a Laplace(b) score noise, in units of its
  sensitivity), once per round

One round with K_t sampled parties releases K_t report-noisy-max selections (one event each,
composed as ``SelfComposed(ReportNoisyMax, K_t)``) and, for the K' parties whose selected
feature was not released before, one Gaussian with sensitivity sqrt(K') Delta_feat (a person's
row moves all K' released vectors at once; they compose as one Gaussian).

Calibration ``accountant`` (default): with split s, the index noise b0 alone would meet
(s eps, delta/2) and the feature noise sigma0 alone ((1 - s) eps, delta/2); both are then scaled
by one factor c so that the whole worst-case plan meets (eps, delta) exactly under the chosen
accountant (the split fixes the ratio b/sigma, the accountant composes the two parts jointly).
Calibration ``paper``: the closed forms of paper 004 (Section IV-C, eq. 17), then the accountant
says what they really give; a plan over the target is refused before any release.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from accounting import (REPLACE_ONE, Composed, Gaussian, ReportNoisyMax, SelfComposed,
                        calibrate, get_accountant)
from accounting.ledger import MemoryLedger  # noqa: F401  (lives in accounting; kept importable here)

from ..errors import InputError
from ..optim._checks import round_down

RNM_NOISES = ("laplace", "gumbel", "exponential")
CALIBRATIONS = ("accountant", "paper")


def check_bound(name, v):
    if v is None:
        raise InputError(f"a private run needs a declared {name} (sensitivities come from declared "
                         "bounds, never from the data)")
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or \
            not (v > 0 and math.isfinite(v)):
        raise InputError(f"{name} must be a positive finite number, got {v!r}")
    lo, hi = BOUND_RANGE
    if not lo <= v <= hi:
        # sensitivities square the bounds: outside this range a square underflows to 0 (a
        # division by zero at row_clip = 1e-320) or overflows
        raise InputError(f"{name} must be between {lo:g} and {hi:g} (sensitivities square it), "
                         f"got {v!r}")
    return float(v)


#: declared bounds a private run accepts (their squares stay normal floats)
BOUND_RANGE = (1e-100, 1e100)


@dataclass
class Sensitivity:
    z_bound: float          # R (the predictors' clip; the margins are within R + B_b)
    derivative_bound: float  # L
    index: float            # Delta_idx (each score, replace-one)
    feature: float          # Delta_feat (one party's released vector, L2, replace-one)
    intercept: float | None = None   # Delta_b = 2 L / n (the intercept's derivative); None: none
    intercept_bound: float = 0.0     # B_b (0 without an intercept)


def sensitivities(loss, feature_bound, label_bound, radius_sum, n, max_column_norm,
                  derivative_clip=None, intercept_bound=None) -> Sensitivity:
    """Declared-bound sensitivities (docs/sensitivity.md).  ``derivative_clip`` c clips the
    per-sample derivatives to [-c, c] (a robustified objective where |l'| > c), so L = min(c, L).
    ``intercept_bound`` B_b (None: no intercept): L is taken at |z| <= R + B_b and the intercept's
    derivative has Delta_b = 2 L / n (docs/sensitivity.md 3.1)."""
    Ba = check_bound("feature_bound", feature_bound)
    By = check_bound("label_bound", label_bound)
    R = Ba * radius_sum
    Bb = 0.0 if intercept_bound is None else float(intercept_bound)
    L = float(loss.derivative_bound(R + Bb, By))
    if derivative_clip is not None:
        L = min(L, check_bound("derivative_clip", derivative_clip))
    return Sensitivity(R, L, 2.0 * Ba * L / n, 2.0 * Ba * float(max_column_norm),
                       None if intercept_bound is None else 2.0 * L / n, Bb)


def index_event(noise, scale, sens, count=1):
    e = ReportNoisyMax(noise, scale, sens, neighboring=REPLACE_ONE)
    return e if count == 1 else SelfComposed(e, int(count))


def lattice_fields(lattice, sigma) -> dict:
    """The keyword arguments that state a discrete Gaussian's lattice (``accounting.events.
    DiscreteGaussian``'s ``resolution`` and ``coordinates``; docs/sensitivity.md 4.9.1), from
    ``lattice``: None (nothing stated: the Renyi charge only), a pair (resolution, coordinates),
    or a function of sigma returning that pair (the ring's fraction bits f, hence its step
    2^-f, depend on the noise the plan is calibrated for).  resolution is the lattice step in
    the values' units (2.0 ** -(2 * f) for a product of two values held with f fractional bits);
    a coarser step than the true one is valid (the charge only grows), a finer one is not.
    coordinates: the release's noisy coordinates (all of them, for a plan unit that stands for
    several releases)."""
    if lattice is None:
        return {}
    resolution, coordinates = lattice(sigma) if callable(lattice) else lattice
    return {"resolution": resolution, "coordinates": coordinates}


def feature_event(sigma, sens, count=1, discrete=False, lattice=None):
    """One round's feature releases by ``count`` parties: one Gaussian, sqrt(count) x sensitivity
    (``discrete``: a ``DiscreteGaussian``, the secure path's exact ring noise; ``lattice``: its
    lattice, see :func:`lattice_fields`, for discrete releases only)."""
    from accounting import DiscreteGaussian

    if not discrete:
        if lattice is not None:
            raise InputError("a lattice is stated for discrete Gaussian releases only")
        return Gaussian(sigma, math.sqrt(count) * sens, neighboring=REPLACE_ONE)
    return DiscreteGaussian(sigma, math.sqrt(count) * sens, neighboring=REPLACE_ONE,
                            **lattice_fields(lattice, sigma))


def intercept_sigma(b, sens: Sensitivity) -> float:
    """sigma_b = sqrt(2) b Delta_b / Delta_idx: the intercept derivative's Gaussian noise, tied
    to the index noise scale b (so one calibration factor scales both; a Laplace(b) score noise
    has standard deviation sqrt(2) b).  In RDP it costs an eighth of one Laplace selection."""
    return math.sqrt(2.0) * float(b) * sens.intercept / sens.index


def intercept_event(sigma_b, sens_b):
    """Party 0's release of the intercept's derivative in one round: one Gaussian."""
    return Gaussian(sigma_b, sens_b, neighboring=REPLACE_ONE)


def plan_event(noise, b, sigma, sens: Sensitivity, rounds, parties, feature_rounds=None,
               features=True, discrete=False, lattice=None):
    """The worst-case plan: every round ``parties`` selections and ``parties`` new features,
    and with an intercept (``sens.intercept``) one release of its derivative (``discrete``: the
    features' releases are ``DiscreteGaussian``, the secure path's exact ring noise, on
    ``lattice`` when given: :func:`lattice_fields`, coordinates per round of new features)."""
    parts = [SelfComposed(index_event(noise, b, sens.index, parties), rounds)]
    if sens.intercept is not None:
        parts.append(SelfComposed(intercept_event(intercept_sigma(b, sens), sens.intercept),
                                  rounds))
    if features:
        fr = rounds if feature_rounds is None else feature_rounds
        if fr > 0:
            parts.append(SelfComposed(feature_event(sigma, sens.feature, parties, discrete,
                                                    lattice), fr))
    return parts[0] if len(parts) == 1 else Composed(tuple(parts))


@dataclass
class NoisePlan:
    mode: str
    noise: str
    index_scale: float
    feature_sigma: float | None
    epsilon: float          # of the worst-case plan, by ``accountant``
    delta: float
    accountant: str
    event: object
    details: dict = field(default_factory=dict)

    def to_dict(self):
        return {"mode": self.mode, "rnm": self.noise, "index_scale": self.index_scale,
                "feature_sigma": self.feature_sigma, "epsilon": self.epsilon, "delta": self.delta,
                "accountant": self.accountant, **self.details}


def calibrate_accountant(noise, sens, epsilon, delta, rounds, parties, split=0.5, accountant="rdp",
                         features=True, feature_rounds=None, discrete=False,
                         lattice=None) -> NoisePlan:
    """Calibration by the accountant (module docstring); a target no noise meets (a delta far
    below what the accountant resolves) is one InputError naming --epsilon and --delta.
    ``discrete``: the feature releases are discrete Gaussians (the secure path's ring noise);
    ``lattice``: their lattice (:func:`lattice_fields`; None: the Renyi charge only)."""
    from ..errors import uncalibrated

    try:
        return _calibrate_accountant(noise, sens, epsilon, delta, rounds, parties, split,
                                     accountant, features, feature_rounds, discrete, lattice)
    except InputError:
        raise
    except ValueError as exc:
        err = uncalibrated(exc, epsilon, delta, accountant)
        if features:           # the index releases get split * epsilon, the features the rest
            err = InputError(f"{err} (--split {split!r} gives the index releases epsilon "
                             f"{epsilon * split:.4g}, the feature releases "
                             f"{epsilon * (1 - split):.4g})")
        raise err from None


def _calibrate_accountant(noise, sens, epsilon, delta, rounds, parties, split, accountant,
                          features, feature_rounds, discrete=False, lattice=None) -> NoisePlan:
    if not (0 < split < 1) and features:
        raise InputError(f"split must be in (0, 1) (share of epsilon for the index releases), got {split!r}")
    n_idx = rounds * parties
    fr = rounds if feature_rounds is None else feature_rounds
    eps_i = epsilon * split if features else epsilon

    def index_share(b):          # the releases at scale b: the selections (and the intercept's)
        if sens.intercept is None:
            return index_event(noise, b, sens.index, n_idx)
        return plan_event(noise, b, None, sens, rounds, parties, features=False)

    b0 = calibrate(index_share, eps_i, delta / 2 if features else delta,
                   guess=2 * sens.index * n_idx / eps_i, accountant=accountant,
                   decreasing=True).value
    if not features:
        ev = plan_event(noise, b0, None, sens, rounds, parties, features=False)
        eps = get_accountant(accountant).epsilon(ev, delta)
        return NoisePlan("accountant", noise, b0, None, eps, delta, accountant, ev,
                         {"split": None, "scale_factor": 1.0})
    s0 = calibrate(lambda s: SelfComposed(feature_event(s, sens.feature, parties, discrete,
                                                        lattice), fr),
                   epsilon * (1 - split), delta / 2, guess=sens.feature * math.sqrt(parties * fr) / epsilon,
                   accountant=accountant, decreasing=True).value
    joint = calibrate(lambda c: plan_event(noise, c * b0, c * s0, sens, rounds, parties, fr,
                                           discrete=discrete, lattice=lattice),
                      epsilon, delta, guess=1.0, accountant=accountant, decreasing=True)
    c = joint.value
    ev = plan_event(noise, c * b0, c * s0, sens, rounds, parties, fr, discrete=discrete,
                    lattice=lattice)
    return NoisePlan("accountant", noise, c * b0, c * s0, joint.epsilon, delta, joint.accountant,
                     ev, {"split": split, "scale_factor": c, "index_scale_alone": b0,
                          "feature_sigma_alone": s0})


def calibrate_paper(noise, sens, epsilon, delta, rounds, parties, eta, n, feature_bound,
                    spectral_norm, accountant="rdp", features=True, feature_rounds=None) -> NoisePlan:
    """Paper 004's closed forms (Section IV-C), in this engine's units, then accounted.

    * index: pert ~ Lap((2 G eta / (K n)) sqrt(2 T log(2/delta)) / ((eps / 2K) / 2))
      = Lap(8 G eta sqrt(2 T log(2/delta)) / (n eps)), with G the declared bound B_a L on
      |grad_i f| (the paper's G is the data's gradient norm; we never read it from the data);
    * feature, eq. (17): pi = sigma(J) sqrt(KT) sqrt(2 (ln(1/delta) + eps/2)) / (n eps / 2) for
      J a / n; our vector is J a with |a_ij| <= B_a, hence sigma = n B_a pi.
    """
    G = feature_bound * sens.derivative_bound
    b = 8.0 * G * eta * math.sqrt(2.0 * rounds * math.log(2.0 / delta)) / (n * epsilon)
    sigma = None
    if features:
        sigma = feature_bound * spectral_norm * math.sqrt(parties * rounds) * \
            math.sqrt(2.0 * (math.log(1.0 / delta) + epsilon / 2.0)) / (epsilon / 2.0)
    ev = plan_event(noise, b, sigma, sens, rounds, parties, feature_rounds, features=features)
    eps = get_accountant(accountant).epsilon(ev, delta)
    return NoisePlan("paper", noise, b, sigma, eps, delta, accountant, ev,
                     {"G": G, "spectral_norm": spectral_norm})


def check_planned_spend(budget, plan, sens, T, t0, parties, exclude, epsilon, recalibrate):
    """Refuse up front a run whose worst-case remaining releases (rounds t0..T) do not fit in
    what the ledger's budget has left; the message says what would fit: the smallest noise for
    the same iterations and (a fresh run) the largest epsilon, checked by recalibrating."""
    def planned(rounds, c=1.0, p=plan):
        return plan_event(p.noise, c * p.index_scale,
                            None if p.feature_sigma is None else c * p.feature_sigma, sens,
                            rounds, parties)

    def advice():
        parts = []
        if budget.epsilon < epsilon:
            parts.append(f"the ledger's budget epsilon={budget.epsilon:g} governs, not this run's "
                         f"epsilon={epsilon:g}")
        c = smallest_noise_factor(budget, planned, T - t0, exclude)
        if c is None:
            parts.append("no noise lets even one more iteration fit: the budget is used up")
            return "; ".join(parts)
        noise = f"index scale >= {c * plan.index_scale:.4g}" + (
            "" if plan.feature_sigma is None else
            f" and feature sigma >= {c * plan.feature_sigma:.4g}")
        parts.append(f"{T} iterations need {noise} (x{c:.3g} this run's noise)")
        if recalibrate is not None:
            e = largest_epsilon(budget, planned, T - t0, exclude, c, recalibrate)
            if e is not None:
                parts.append(f"epsilon <= {e:.4g} fits")
        return "; ".join(parts)

    if T > t0:
        budget.check_plan(planned(T - t0), exclude=exclude, advice=advice)


def largest_epsilon(budget, planned, rounds, exclude, c, recalibrate):
    """A target epsilon whose calibrated plan fits (checked), starting from what the smallest
    fitting noise spends alone; rounded down to 4 significant digits."""
    e = budget.accountant.epsilon(planned(rounds, c), budget.delta)
    for _ in range(20):
        e = round_down(e)                  # 4 significant digits, rounded down
        if e <= 0:
            return None
        try:
            fitted = recalibrate(e)
        except ValueError:         # e below what the accountant can calibrate (a spent ledger)
            return None
        if budget.fits(planned(rounds, 1.0, fitted), exclude=exclude):
            return e
        e *= 0.97
    return None


def smallest_noise_factor(budget, planned, rounds, exclude):
    """Smallest factor c >= 1 on both noise scales that makes ``rounds`` rounds fit (None when
    the budget is already used up, or nothing reasonable fits)."""
    if not budget.fits(planned(1, 1e6), exclude=exclude):
        return None
    lo, hi = 1.0, 2.0
    while not budget.fits(planned(rounds, hi), exclude=exclude):
        lo, hi = hi, hi * 2
        if hi > 1e12:
            return None
    while hi / lo > 1.001:
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if budget.fits(planned(rounds, mid), exclude=exclude) else (mid, hi)
    return hi


class HopelessNoiseWarning(UserWarning):
    """The planned noise of a DP-BCFW-AS run leaves little to learn from (public quantities)."""


#: predictor noise / residual bound above which DP-BCFW-AS is expected to learn little: in the
#: measurements of docs/vertical_results.md ("Where DP-BCFW-AS learns") runs above 10 removed at
#: most 25% of the gap f(0) - f(opt), runs below 5 at least half
HOPELESS_RATIO = 10.0


def learning_outlook(plan: NoisePlan, sens: Sensitivity, parties: int, eta: float,
                     max_column_norm: float, feature_bound: float, label_bound: float) -> dict:
    """Whether DP-BCFW-AS can learn at this noise, from public quantities only (no data).

    * predictor noise: after one round every per-sample predictor u_j = (J^T q_hat)_j carries the
      released features' noise, of standard deviation sigma c_J eta sqrt(K) (c_J the largest
      column norm of J, K features of weight eta); when that exceeds ``HOPELESS_RATIO`` times the
      largest residual the bounds allow, R + B_y, the residuals and hence the scores are
      dominated by noise (the threshold is empirical: docs/vertical.md);
    * selection noise: a report-noisy-max scale b at least the largest possible score B_a L
      (|g_i| <= B_a L) selects nearly uniformly.

    Returns the quantities and ``hopeless`` (either condition), with the reasons in words.
    """
    Ba = float(feature_bound)
    resid = sens.z_bound + float(label_bound)
    pred_noise = (plan.feature_sigma or 0.0) * max_column_norm * float(eta) * math.sqrt(parties)
    score_bound = Ba * sens.derivative_bound
    reasons = []
    ratio = pred_noise / resid
    if ratio > HOPELESS_RATIO:
        reasons.append(f"the feature noise puts a standard deviation of {pred_noise:.3g} on every "
                       f"per-sample predictor, {ratio:.3g}x the largest residual the bounds allow "
                       f"({resid:.3g}); measured runs above {HOPELESS_RATIO:g}x removed at most 25% "
                       "of the gap f(0) - f(opt), runs below 5x at least half")
    if plan.index_scale >= score_bound:
        reasons.append(f"the selection noise scale {plan.index_scale:.3g} is at least the largest "
                       f"possible score ({score_bound:.3g})")
    return {"predictor_noise": pred_noise, "residual_bound": resid, "ratio": ratio,
            "index_scale": plan.index_scale, "score_bound": score_bound,
            "hopeless": bool(reasons), "reasons": reasons}
