"""The sigmoid as a short odd Fourier series, evaluated on additive shares of the margin.

Why a Fourier series (Boura, Chillotti, Gama, Jetchev, Peceny, Petric, "High-precision
privacy-preserving real-valued function evaluation", FC 2018): a periodic function of a shared
value needs no comparison and no truncation.  With the margin m held as two ring shares
s_0 + s_1 = round(m 2^f_m) (mod 2^64) and a half-period P = 2^p,

    exp(i j w m) = exp(i j w s_0 / 2^f_m) * exp(i j w s_1 / 2^f_m),      w = pi / P,

exactly, because j w 2^64 / 2^f_m is a multiple of 2 pi (so the wrap-around of the ring is
invisible).  Each factor is computed by its holder in the clear; only the product needs the
secure multiplication, and

    g(m) = sum_{j=1..J} b_j sin(j w m) = sum_j b_j Im(c_0j c_1j)

is bounded for EVERY pair of shares, rounding included, by a bound computed from the rounded
coefficients alone.  g is periodic (period 2P), so sup over all reals of |g| is its maximum on one
period, found on a grid plus the Lipschitz slack between grid points (``sup_abs``); whatever the
shares, the two factors' angles add up to j w m~ for the margin m~ their sum decodes to (any value
at all), so the exact product is sin(j w m~); each computed factor is within sqrt(2) u of its
unit value (u = 2^-f_c for the truncation plus a float slack for the angle and cos/sin), so
|Im(c_0j c_1j) - sin(j w m~)| <= 2 sqrt(2) u + 2 u^2.  Hence |g~| <= sup |g| + sum_j |b_j|
(2 sqrt(2) u + 2 u^2), and with f_c >= ``MIN_FACTOR_BITS`` (every ring plan) the derivative
d = 1/2 + g~ - y01 obeys |d| <= D = ``derivative_bound`` = 1.0315 for the default series.  That
bound, not the quality of the approximation, is what the privacy of the scores rests on
(docs/sensitivity.md, section 5.1).  (It needs each holder to compute its factors from one value,
as the protocol says: factors chosen freely with modulus <= 1 could reach 1/2 + sum_j |b_j| =
1.2266, ``share_bound``, which sizes the ring.)

The coefficients: least squares on a fine grid of [-P, P] against (sigma(m) - 1/2) tapered to
0 at +-P (a cos^2 taper from R to P, so that the periodic extension has no jump and g keeps
the sign of m on (-P, P)), then rounded to multiples of 2^-h (the rounded values ARE the
approximation: its error bound and D are computed from them).  The error bound on [-R, R] is
the largest error on a grid of spacing s plus s/2 times the Lipschitz constant of g - sigma
(|g'| <= sum_j j w |b_j|, |sigma'| <= 1/4), so it holds between grid points too.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ....errors import InputError

#: the fewest fractional bits of the unit factors (``glm.ring_plan`` refuses fewer), so the
#: factors' rounding bound below holds for every ring plan
MIN_FACTOR_BITS = 6
#: slack for the float angle j w r / 2^f_m (|angle| < 2 pi J, relative error a few ulps) and the
#: float cos/sin (1 ulp): far above 1e-13, far below anything that matters
FLOAT_SLACK = 1e-12


@dataclass(frozen=True)
class SigmoidSeries:
    """g(m) ~ sigma(m) - 1/2 on [-accurate, accurate]; half-period ``2**period_bits``."""

    accurate: float = 6.0          # R
    period_bits: int = 4           # P = 2^4 = 16
    terms: int = 8                 # J
    coef_bits: int = 10            # h: coefficients are integers / 2^h

    def __post_init__(self):
        if not (0 < self.accurate < self.half_period):
            raise InputError(f"the accurate range R must lie in (0, P = {self.half_period:g}), "
                             f"got {self.accurate!r}")
        if not (1 <= self.terms <= 64):
            raise InputError(f"the series takes 1..64 terms, got {self.terms!r}")

    @property
    def half_period(self) -> float:
        return float(2 ** self.period_bits)

    @property
    def omega(self) -> float:
        return math.pi / self.half_period

    def _grid(self, step):
        P = self.half_period
        return np.arange(-P, P + step / 2, step)

    @property
    def coefficients(self) -> np.ndarray:
        """Integers b_j 2^h (int64), j = 1..J."""
        return _fit(self)

    @property
    def real_coefficients(self) -> np.ndarray:
        return self.coefficients / float(2 ** self.coef_bits)

    def __call__(self, m):
        """g(m) in floating point (for analysis and tests)."""
        m = np.asarray(m, dtype=np.float64)
        j = np.arange(1, self.terms + 1)
        return np.sin(np.multiply.outer(m, j * self.omega)) @ self.real_coefficients

    @property
    def share_bound(self) -> float:
        """1/2 + sum_j |b_j|: |d| for ANY factors of modulus <= 1 (sizes the ring)."""
        return 0.5 + float(np.abs(self.real_coefficients).sum())

    @property
    def lipschitz(self) -> float:
        """|g'| <= sum_j j w |b_j|."""
        return float(np.sum(np.arange(1, self.terms + 1) * self.omega
                            * np.abs(self.real_coefficients)))

    def sup_abs(self, step=1e-4) -> float:
        """A rigorous upper bound on sup over all reals of |g(m)|: g has period 2P, so its
        maximum on a grid of spacing ``step`` over [-P, P] plus lipschitz * step / 2."""
        key = ("sup", self.accurate, self.period_bits, self.terms, self.coef_bits, step)
        if key not in _CACHE:
            P = self.half_period
            m = np.arange(-P, P + step / 2, step)
            _CACHE[key] = float(np.abs(self(m)).max()) + self.lipschitz * step / 2
        return _CACHE[key]

    @staticmethod
    def factor_error(frac_unit=MIN_FACTOR_BITS) -> float:
        """A bound on |Im(c_0 c_1) - sin(theta_0 + theta_1)| for factors computed as
        ``unit_factors`` does at ``frac_unit`` bits (module docstring)."""
        u = 2.0 ** -int(frac_unit) + FLOAT_SLACK
        return 2.0 * math.sqrt(2.0) * u + 2.0 * u * u

    @property
    def derivative_bound(self) -> float:
        """D = 1/2 + sup |g| + sum_j |b_j| factor_error(MIN_FACTOR_BITS): |1/2 + g~ - y| <= D
        for y in {0, 1}, any pair of shares and every ring plan (module docstring)."""
        return (0.5 + self.sup_abs()
                + float(np.abs(self.real_coefficients).sum()) * self.factor_error())

    def error_bound(self, step=1e-3) -> float:
        """max_{|m| <= R} |g(m) + 1/2 - sigma(m)|, rigorous (grid maximum + Lipschitz slack)."""
        m = np.arange(-self.accurate, self.accurate + step / 2, step)
        err = np.abs(self(m) + 0.5 - _sigmoid(m)).max()
        lip = self.lipschitz + 0.25
        return float(err + lip * step / 2)

    def describe(self) -> dict:
        return {"kind": "odd Fourier series", "terms": self.terms,
                "half_period": self.half_period, "accurate_range": self.accurate,
                "coefficient_bits": self.coef_bits,
                "coefficients": [float(b) for b in self.real_coefficients],
                "max_error_on_accurate_range": self.error_bound(),
                "derivative_bound": self.derivative_bound, "share_bound": self.share_bound}


def _sigmoid(m):
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(m, dtype=np.float64)))


_CACHE: dict = {}


def _fit(s: SigmoidSeries) -> np.ndarray:
    key = (s.accurate, s.period_bits, s.terms, s.coef_bits)
    if key not in _CACHE:
        P, R = s.half_period, s.accurate
        m = s._grid(P / 4000.0)
        a = np.abs(m)
        taper = np.where(a <= R, 1.0, np.cos(0.5 * np.pi * np.clip((a - R) / (P - R), 0, 1)) ** 2)
        target = (_sigmoid(m) - 0.5) * taper
        basis = np.sin(np.multiply.outer(m, np.arange(1, s.terms + 1) * s.omega))
        b, *_ = np.linalg.lstsq(basis, target, rcond=None)
        _CACHE[key] = np.rint(b * 2 ** s.coef_bits).astype(np.int64)
    return _CACHE[key].copy()


def unit_factors(share, frac_margin: int, series: SigmoidSeries, frac_unit: int):
    """For a ring share s (uint64, scale 2^frac_margin): the truncated encodings of
    cos(j w s / 2^f_m) and sin(j w s / 2^f_m), j = 1..J, as two (J, n) int64 arrays at scale
    2^frac_unit.  The share is reduced modulo 2^(f_m + p + 1) first (one full period of the base
    frequency), exactly, so the float angle is exact whatever the share's size."""
    bits = frac_margin + series.period_bits + 1
    if bits > 52:
        raise InputError(f"margin precision 2^-{frac_margin} with half-period 2^"
                         f"{series.period_bits} does not fit float64 angles")
    r = (np.asarray(share, dtype=np.uint64) & np.uint64((1 << bits) - 1)).astype(np.float64)
    base = r * (series.omega / float(2 ** frac_margin))
    j = np.arange(1, series.terms + 1, dtype=np.float64)[:, None]
    ang = j * base[None, :]
    scale = float(2 ** frac_unit)
    return np.trunc(np.cos(ang) * scale).astype(np.int64), \
        np.trunc(np.sin(ang) * scale).astype(np.int64)
