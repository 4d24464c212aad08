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

is bounded by sum_j |b_j| for EVERY m, shares and rounding included: each factor is encoded
with truncation toward zero, so its modulus stays <= 1 and so does the product's.  That bound,
not the quality of the approximation, is what the privacy of the scores rests on
(docs/sensitivity.md, section 5): sigma(m) - y is replaced by d = 1/2 + g(m) - y with
|d| <= D = 1/2 + sum_j |b_j| for any input.

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

from ...errors import InputError


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
    def derivative_bound(self) -> float:
        """D = 1/2 + sum_j |b_j|: |1/2 + g(m) - y| <= D for y in {0, 1} and any m, shares and
        truncation included (module docstring)."""
        return 0.5 + float(np.abs(self.real_coefficients).sum())

    def error_bound(self, step=1e-3) -> float:
        """max_{|m| <= R} |g(m) + 1/2 - sigma(m)|, rigorous (grid maximum + Lipschitz slack)."""
        m = np.arange(-self.accurate, self.accurate + step / 2, step)
        err = np.abs(self(m) + 0.5 - _sigmoid(m)).max()
        lip = float(np.sum(np.arange(1, self.terms + 1) * self.omega
                           * np.abs(self.real_coefficients))) + 0.25
        return float(err + lip * step / 2)

    def describe(self) -> dict:
        return {"kind": "odd Fourier series", "terms": self.terms,
                "half_period": self.half_period, "accurate_range": self.accurate,
                "coefficient_bits": self.coef_bits,
                "coefficients": [float(b) for b in self.real_coefficients],
                "max_error_on_accurate_range": self.error_bound(),
                "derivative_bound": self.derivative_bound}


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
