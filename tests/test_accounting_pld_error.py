"""The PLD's float-error bounds (``analysis.pld_error``) hold: checked against exact arithmetic.

Inputs are random dyadic rationals (integers / 2^20), so the exact convolution is an integer
convolution and the exact delta a rational sum (mpmath at 50 digits): both references are
independent of the code under test.  Hypothesis runs derandomized.
"""
import math

import mpmath as mp
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from accounting.accountants.analysis import pld_error as err_mod
from accounting.accountants.analysis import pld_grid as grid

SETTINGS = settings(max_examples=25, deadline=None, derandomize=True)
SCALE = 2.0 ** 20


def _dyadic(seed, size, sparse):
    rng = np.random.default_rng(seed)
    ints = rng.integers(0, 2 ** 20, size)
    if sparse:
        ints[rng.random(size) < 0.9] = 0
    ints[0] = max(ints[0], 1)
    return ints


@SETTINGS
@given(seed=st.integers(0, 2 ** 31), la=st.integers(1, 400), lb=st.integers(1, 400),
       mode=st.sampled_from(["fft", "direct", "sparse"]))
def test_convolution_error_bound_holds(seed, la, lb, mode):
    ia, ib = _dyadic(seed, la, mode == "sparse"), _dyadic(seed + 1, lb, mode == "sparse")
    a, b = ia / SCALE, ib / SCALE
    exact = np.convolve(ia.astype(object), ib.astype(object))      # Python integers: exact
    old = err_mod.DIRECT_WORK, err_mod.DIRECT_MAX
    try:
        if mode == "fft":
            err_mod.DIRECT_WORK, err_mod.DIRECT_MAX = 0, 0
        out, rel, abs_err = err_mod.convolve(a, b)
    finally:
        err_mod.DIRECT_WORK, err_mod.DIRECT_MAX = old
    # computed = truth (1 + t_i) + e_i with |t_i| <= rel and sum |e_i| <= abs_err
    excess = mp.mpf(0)
    for computed, truth in zip(out, exact):
        t = mp.mpf(int(truth)) / mp.mpf(2) ** 40
        excess += max(mp.mpf(0), abs(mp.mpf(float(computed)) - t) - rel * t)
    assert excess <= abs_err
    if mode == "fft":
        assert rel == 0.0 and abs_err > 0          # the FFT path was taken


@SETTINGS
@given(seed=st.integers(0, 2 ** 31), size=st.integers(2, 300), eps=st.floats(-2.0, 5.0),
       inf_ints=st.integers(0, 1000))
def test_delta_upper_is_above_the_exact_delta(seed, size, eps, inf_ints):
    """delta_upper of a PMF with no error of its own is at least its exact delta."""
    ints = _dyadic(seed, size, False)
    total = int(ints.sum()) + inf_ints
    probs = ints / float(total)                    # within 1 ulp of ints / total: rel 2^-52
    p = grid.GridPmf(1e-2, 0, -size // 3, probs, inf_ints / float(total), 0.0, 2.0 ** -52)
    with mp.workdps(50):
        h = mp.mpf(p.interval)
        exact = mp.mpf(inf_ints) / total
        for i, n in enumerate(ints):
            loss = (p.lower + i) * h
            if loss > eps:
                exact += mp.mpf(int(n)) / total * (1 - mp.exp(mp.mpf(eps) - loss))
        assert err_mod.delta_upper(p, None, eps) >= exact
        e = err_mod.epsilon_upper(p, None, 0.05)
        if math.isfinite(e):
            value = mp.mpf(inf_ints) / total + sum(
                mp.mpf(int(n)) / total * (1 - mp.exp(mp.mpf(e) - (p.lower + i) * h))
                for i, n in enumerate(ints) if (p.lower + i) * h > e)
            assert value <= 0.05


def test_block_measure_dominates_the_adaptive_curve():
    """The loss measure standing for a block of bounded-range selections (``analysis.br_blocks``) has a
    delta at least the adaptive curve's (an upper bound of the optimum) at every grid point."""
    from accounting.accountants.analysis.br_blocks import block_pmf
    from accounting.accountants.bounded_range import adaptive_curve

    eps, size, cells = 0.3, 40, 8
    p = block_pmf(eps, size, cells)
    s, w = adaptive_curve(eps, size, cells)
    for s_i, w_i in zip(s[s >= 0][::7], w[s >= 0][::7]):
        assert err_mod.delta_upper(p, None, float(s_i)) >= w_i


def _subsampled_delta_exact(eps, sigma, q, remove):
    """The Poisson-subsampled Gaussian's delta (sensitivity 1, dp-accounting's conventions) at
    50 digits: sup_x U(x) - e^eps L(x), attained where the likelihood ratio is e^eps."""
    with mp.workdps(50):
        e, s, qq = mp.mpf(eps), mp.mpf(sigma), mp.mpf(q)
        if remove:
            if mp.exp(e) <= 1 - qq:
                return -mp.expm1(e)
            x = -mp.mpf(1) / 2 - s ** 2 * mp.log(1 + mp.expm1(e) / qq)
            return ((1 - qq) * mp.ncdf(x / s) + qq * mp.ncdf((x + 1) / s)
                    - mp.exp(e) * mp.ncdf(x / s))
        if mp.exp(-e) <= 1 - qq:
            return mp.mpf(0)
        x = mp.mpf(1) / 2 + s ** 2 * mp.log(1 + mp.expm1(-e) / qq)
        return mp.ncdf(x / s) - mp.exp(e) * ((1 - qq) * mp.ncdf(x / s) + qq * mp.ncdf((x - 1) / s))


def test_subsampled_gaussian_measure_is_checked_and_padded():
    """The padded measure the accountant uses for the DP-SGD step (sigma 1.1, q 256/60000) has a
    delta at or above the mechanism's exact one (mpmath) at sampled grid points and at the point
    where the check found the smallest margin; the padding stays small."""
    from dp_accounting import NeighboringRelation

    from accounting import PoissonSubsampledGaussian
    from accounting.accountants.analysis import subsampled_check as check
    from accounting.accountants import pld as pld_module

    sigma, q = 1.1, 256 / 60000
    leaf = PoissonSubsampledGaussian(sigma, q)
    rel = NeighboringRelation.ADD_OR_REMOVE_ONE
    raw, k = pld_module._subsampled_pld(leaf, rel, 1e-4)
    raw_sides = grid.sides(raw, 1e-4, k)
    padded = pld_module._single_sides(leaf, rel, 1e-4)
    for side, remove, raw_side in ((padded[0], True, raw_sides[0]),
                                   (padded[1], False, raw_sides[1])):
        have = check.measure_delta_lower(side) + side.inf
        have_raw = check.measure_delta_lower(raw_side) + raw_side.inf
        for i in list(range(0, side.probs.size, 997)) + [int(np.argmax(
                check.mechanism_delta_upper((side.lower + np.arange(side.probs.size))
                                            * side.interval, sigma, q, remove) - have_raw))]:
            eps = (side.lower + i) * side.interval
            exact = _subsampled_delta_exact(eps, sigma, q, remove)
            assert have[i] >= exact, (remove, eps)
        assert side.inf - raw_side.inf < 1e-12
