"""Privacy loss distributions of any count in bounded memory: self-composition by repeated
squaring on a grid that is coarsened, pessimistically, whenever it would outgrow ``MAX_POINTS``.

dp-accounting's ``self_compose(n)`` raises the Fourier transform of the PMF to the n-th power on a
grid whose length grows like n (24 GiB for 1e6 Laplace releases at interval 1e-4).  Here the PMF of
n releases is built from the binary expansion of n, P^(2m) = P^m * P^m (Koskela, Jalko, Honkela
2020 use the same doubling), and after every convolution the grid is kept at most ``MAX_POINTS``
long by doubling the interval.  The interval is therefore *chosen from the count*: 1e-4 for small
plans (the answer equals dp-accounting's own up to its tail truncation), coarser for huge ones.

Every step only moves the answer up (never optimistic):

* **Coarsening** (interval h -> H = f h): the mass p at a loss l between two coarse grid points
  g < l <= g + H is split between them so that E_P[e^-L] is unchanged:
  p_hi = p expm1(-(l - g)) / expm1(-H), p_lo = p - p_hi ("connect the dots", Doroshenko, Ghazi,
  Kamath, Kumar, Manurangsi 2022, Sec. 3).  delta(eps) = E_P[(1 - e^eps e^-L)_+] is convex in
  X = e^-L, so a mean-preserving spread of X can only raise it (Jensen), for every eps; for a
  composition the same holds conditionally on the other factors, so the coarsened PMF dominates.
* **Truncation** after each convolution (dp-accounting's pessimistic rule): at most ``TAIL`` / 2
  of mass is cut from each end; the lower tail goes to the first kept point (losses move up),
  the upper tail to the infinite loss.
* **Floating point**: every PMF carries ``err``, a proven bound on the L1 distance between its
  computed masses and the masses the same steps give in exact arithmetic (``analysis.pld_error``): the
  FFT's round-off is bounded by the theorem of Brent & Zimmermann (Modern Computer Arithmetic,
  Thm 3.3.2, after Percival 2003), and every other step by its own rounding.  A delta read from
  the PMF is then off by at most ``err`` (its weights lie in [0, 1]), and the accountant adds it.
  Negative round-off is clipped to 0 (this only moves a value towards the truth, which is >= 0).

The grid interval is always ``base * 2**k`` so PMFs of different releases align exactly.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import pld_error as err_mod

#: longest grid (points per side) a composed PMF keeps; an FFT of this size takes a few ms
MAX_POINTS = 1 << 16
#: grid length of the fallback where every convolution is a direct sum (RELATIVE_POINTS^2 <=
#: ``analysis.pld_error.DIRECT_WORK``): relative round-off only, so huge counts stay resolvable
RELATIVE_POINTS = 1 << 12
#: longest grid a single release's PMF is built on (decided from its parameters before building)
MAX_BASE_POINTS = 1 << 18
#: mass cut from the tails of the whole composition (moved up or to infinity: pessimistic); each
#: convolution of the doubling gets a share scaled by how many times its result is reused
TAIL = 1e-15
#: a self-composition whose dp-accounting grid (its Chernoff truncation bounds) has at most this
#: many points is done by dp-accounting's own ``self_convolve`` (one FFT power, its exact numbers);
#: longer ones by repeated squaring here
DIRECT_POINTS = 1 << 21
#: a Gaussian-type loss is built out to about z standard deviations (dp-accounting truncates its
#: continuous PLDs at mass e^-50, i.e. |z| <= 10)
Z_WIDTH = 10.0


@dataclass(frozen=True)
class GridPmf:
    """A pessimistic PLD on the grid (lower + i) * base * 2**k, plus mass at +infinity."""

    base: float
    k: int
    lower: int
    probs: np.ndarray
    inf: float
    #: proven bounds: probs_i = exact_i (1 + t_i) + e_i, |t_i| <= rel, sum |e_i| + |e_inf| <= err
    #: (``analysis.pld_error``)
    err: float = 0.0
    rel: float = 0.0

    @property
    def interval(self) -> float:
        return math.ldexp(self.base, self.k)


#: fewest grid points across one release's loss range: a release whose losses span less than
#: MIN_BASE_POINTS base intervals (epsilon = 1e-9 at base 1e-4) gets a finer interval base 2^k,
#: k < 0, else rounding every loss up by a whole interval would swamp it
MIN_BASE_POINTS = 256


def interval_exponent(width: float, base: float, points: int = MAX_BASE_POINTS) -> int:
    """The k of the grid interval base 2^k for a loss range of this width: at most ``points``
    points, and at least MIN_BASE_POINTS where the base would give fewer (k < 0).  Decided
    before anything is built."""
    if not math.isfinite(width) or width <= 0:
        return 0
    coarse = math.ceil(math.log2(width / (base * points)))
    fine = math.floor(math.log2(width / (base * MIN_BASE_POINTS)))
    return max(coarse, min(0, fine))


def from_dp_pmf(pmf, base: float, k: int, err: float = 0.0) -> GridPmf:
    """A dp-accounting dense PMF (interval base * 2**k) as a GridPmf, with the caller's bound
    ``err`` on its construction's float error."""
    dense = pmf.to_dense_pmf()
    h = math.ldexp(base, k)
    if not math.isclose(dense._discretization, h, rel_tol=1e-12):
        raise ValueError(f"PMF interval {dense._discretization} is not {h}")
    return GridPmf(base, k, int(dense._lower_loss), np.asarray(dense._probs, dtype=np.float64),
                   float(dense._infinity_mass), float(err), 0.0)


def coarsen(p: GridPmf, k: int) -> GridPmf:
    """The same PMF on the coarser grid base * 2**k (connect the dots; see module docstring)."""
    if k <= p.k:
        return p
    f = 1 << (k - p.k)     # an integer: both grids are base 2^k
    h, H = p.interval, p.interval * f
    idx = p.lower + np.arange(p.probs.size, dtype=np.int64)
    lo = np.floor_divide(idx, f)
    r = (idx - lo * f) * h                    # l - g in [0, H)
    w = np.expm1(-r) / math.expm1(-H)         # share that moves up to g + H
    hi_mass = p.probs * w
    lo_mass = p.probs - hi_mass
    start = int(lo[0])
    out = np.zeros(int(lo[-1]) - start + 2)
    np.add.at(out, lo - start, lo_mass)
    np.add.at(out, lo - start + 1, hi_mass)
    # a map with weights in [0, 1] keeps relative errors relative and does not grow an L1 one;
    # its own rounding: w and the split (a few ulps of each mass), sums of at most f + 1 terms
    r = err_mod.U * (f + 8)
    return _trim(GridPmf(p.base, k, start, out, p.inf, p.err * (1 + r),
                         (1 + p.rel) * (1 + r) - 1))


def _trim(p: GridPmf) -> GridPmf:
    nz = np.flatnonzero(p.probs > 0)
    if nz.size == 0:
        return GridPmf(p.base, p.k, p.lower, np.zeros(1), p.inf, p.err, p.rel)
    a, b = int(nz[0]), int(nz[-1]) + 1
    return GridPmf(p.base, p.k, p.lower + a, p.probs[a:b].copy(), p.inf, p.err, p.rel)


def shrink(p: GridPmf, points: int = MAX_POINTS) -> GridPmf:
    """Coarsen until the grid has at most ``points`` points."""
    while p.probs.size > points:
        grow = max(1, math.ceil(math.log2(p.probs.size / points)))
        p = coarsen(p, p.k + grow)
    return p


def _truncate(lower: int, probs: np.ndarray, inf: float, base, k, tail=TAIL,
              err: float = 0.0, rel: float = 0.0) -> GridPmf:
    """dp-accounting's pessimistic tail truncation (at most tail / 2 from each end), vectorized."""
    probs = np.maximum(probs, 0.0)
    c = np.cumsum(probs)
    left = int(np.searchsorted(c, tail / 2, side="right"))       # prefix with mass <= tail/2
    rc = np.cumsum(probs[::-1])
    right = probs.size - int(np.searchsorted(rc, tail / 2, side="right"))
    left = min(left, probs.size - 1)
    right = max(right, left + 1)
    left_mass = float(c[left - 1]) if left > 0 else 0.0
    right_mass = float(probs[right:].sum())
    kept = probs[left:right].copy()
    kept[0] += left_mass
    # the moved masses are computed sums of non-negative terms (at most size ulps each)
    r = err_mod.U * (probs.size + 4)
    return GridPmf(base, k, lower + left, kept, inf + right_mass, err * (1 + r),
                   (1 + rel) * (1 + r) - 1)


def convolve(a: GridPmf, b: GridPmf, points: int = MAX_POINTS, tail: float = TAIL) -> GridPmf:
    """The PMF of the sum of independent losses (composition), on a bounded grid."""
    k = max(a.k, b.k)
    a, b = coarsen(a, k), coarsen(b, k)
    probs, rel_off, abs_off = err_mod.convolve(a.probs, b.probs)
    inf = a.inf + b.inf * (1 - a.inf)
    ma, mb = mass(a), mass(b)
    # computed = x (1 + t) + e per side: the product's relative parts multiply, and the absolute
    # ones enter as ea * b~ + a~ * eb + ea * eb, in L1 at most the products of the norms
    rel = (1 + a.rel) * (1 + b.rel) * (1 + rel_off) - 1
    err = ((a.err * (mb + b.err) + b.err * (ma + a.err) + a.err * b.err) * (1 + rel_off)
           + abs_off + err_mod.U * 4 * inf)
    if tail == 0.0:
        return _trim(GridPmf(a.base, k, a.lower + b.lower, np.maximum(probs, 0.0), inf, err,
                             rel))
    return shrink(_truncate(a.lower + b.lower, probs, inf, a.base, k, tail, err, rel), points)


#: most elements of one block of ``_log_mgf`` (480 kB of float64: a block that stays in cache)
_MGF_BLOCK = 60_000


def _log_mgf(lam, losses, weights):
    """psi(l) = log sum_i w_i e^{l x_i} for each l of ``lam``, rounded up: m + log S with m the
    largest exponent of the row and S = sum_i w_i e^{l x_i - m}, by blocks of rows (80 calls of
    scipy's logsumexp cost three times as much; a fifth of a DP-SGD PLD calibration went there).

    Rounding (U = 2^-53): each exponent l x_i is within 2 ulps of l times the true grid loss (the
    loss and the product each rounded once) and y_i = l x_i - m within one more of |y_i|; the
    error in m cancels in m + log S.  So each term w_i e^{y_i} is within (2 |x_i| + |y_i| + 6) U
    of itself relatively (exp within 4 ulps, the product with w_i one; a term that underflows
    within the smallest double, 2 N of which are added to S), at most (4 X + 6) U with
    X = max_i |l x_i|; the sum of N positive terms within (N - 1) U in any order; the log and
    the final addition within 2 U (|log S| + |psi| + 1) <= 2 U (2 |psi| + X + 1).  psi is raised
    by (5 X + N + 8 + 4 |psi|) U (1 + 1e-6), which covers all of it (a first-order bound; the
    second-order terms are below 1e-20 of it at N, X <= 1e6).  That is ~1e-11 at the DP-SGD
    step's 5e4 points, against its psi of order 1."""
    n = losses.size
    out = np.empty(lam.size)
    rows = max(1, _MGF_BLOCK // max(1, n))
    for i in range(0, lam.size, rows):
        x = np.outer(lam[i:i + rows], losses)
        m = x.max(axis=1)
        with np.errstate(under="ignore"):
            s = np.sum(weights[None, :] * np.exp(x - m[:, None]), axis=1)
        # a term that underflows (to 0 or a subnormal) is off by at most the smallest double
        out[i:i + rows] = m + np.log(s + 2 * n * 5e-324)
    big_x = np.abs(lam) * float(np.abs(losses).max())
    return out + (5 * big_x + n + 8 + 4 * np.abs(out)) * err_mod.U * (1 + 1e-6)


class _Chernoff:
    """Tail bounds of the exact r-fold composition of one PMF: for every lambda,
    P(L_1 + ... + L_r >= x) <= exp(r psi(lambda) - lambda x), psi the log moment generating
    function of one loss (over its finite part), and symmetrically below.  Used to cut the
    FFT's noise floor (which no mass threshold can tell from real mass) by a range that holds
    whatever the noise is."""

    ORDERS = np.concatenate([-np.logspace(-6, 3, 40), np.logspace(-6, 3, 40)])

    def __init__(self, p: GridPmf):
        keep = p.probs > 0
        losses = (p.lower + np.flatnonzero(keep)) * p.interval
        lam = self.ORDERS / max(1e-300, float(np.abs(losses).max()) or 1.0)
        self.lam = lam
        # the exact PMF differs from the computed one by at most p.err in L1 (on its grid range):
        # its moment generating function is at most the computed one + err max e^{lambda l}
        ends = np.array([p.lower, p.lower + p.probs.size - 1]) * p.interval
        psi = _log_mgf(lam, losses, p.probs[keep])
        if p.err > 0:
            psi = np.logaddexp(psi, math.log(p.err) + np.maximum(lam * ends[0], lam * ends[1]))
        # relative errors of the masses, and the log-additions' own rounding
        self.psi = psi - math.log1p(-p.rel) + 8 * err_mod.U * (np.abs(psi) + 1.0)

    def range(self, r: int, tail: float) -> tuple[float, float]:
        """(lo, hi) with P(sum < lo) <= tail and P(sum > hi) <= tail for r summands."""
        c = r * self.psi + math.log(1.0 / tail)
        pos, neg = self.lam > 0, self.lam < 0
        with np.errstate(over="ignore", invalid="ignore"):
            hi = float(np.min(c[pos] / self.lam[pos]))
            lo = float(np.max(c[neg] / self.lam[neg]))
        return lo, hi


def _cut(p: GridPmf, lo: float, hi: float, tail: float, shift: float) -> GridPmf:
    """Keep the grid points in [lo - shift, hi + shift]; the (at most ``tail``) true mass beyond
    each end goes to infinity, whatever the computed values there are."""
    h = p.interval
    a = max(0, math.floor((lo - shift) / h) - p.lower)
    b = min(p.probs.size, math.ceil((hi + shift) / h) - p.lower + 1)
    if a == 0 and b == p.probs.size:
        return p
    if b <= a:                                 # cannot happen for a valid bound; stay whole
        return p
    return GridPmf(p.base, p.k, p.lower + a, p.probs[a:b].copy(),
                   p.inf + (tail if a > 0 else 0.0) + (tail if b < p.probs.size else 0.0), p.err,
                   p.rel)


def self_compose(p: GridPmf, n: int, points: int | None = None) -> GridPmf:
    """n-fold composition by repeated squaring, about 2 log2(n) convolutions on grids of at most
    ``points`` points.  (dp-accounting's ``self_convolve`` raises one FFT to the n-th power; its
    round-off has no bound we can state, so it is not used.)

    After each convolution the grid is cut to a Chernoff range of the exact composition
    (``_Chernoff``), widened by how far coarsening can have moved any loss so far (``shift``,
    at most one coarse interval per coarsening on every copy); each cut sends ``t`` per end to
    infinity with t = TAIL / (4 copies log2(n)) for a PMF the result contains ``copies`` times,
    so the truncations add less than TAIL of infinite mass at any count."""
    points = MAX_POINTS if points is None else points
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"count must be an integer >= 1, got {n!r}")
    if n == 1:
        return p
    total = n
    levels = max(1, n.bit_length())
    before = p.interval
    p = shrink(p, points)
    bound = _Chernoff(p)
    p_shift = p.interval if p.interval > before else 0.0
    p_reps = 1
    result, r_shift, r_reps = None, 0.0, 0

    def step(a, a_shift, a_reps, b, b_shift, b_reps):
        reps = a_reps + b_reps
        tail = TAIL / (4.0 * (total // reps) * levels)
        k0 = max(a.k, b.k)
        out = convolve(a, b, points=1 << 62, tail=0.0)
        shift = a_shift + b_shift + (out.interval if out.k > k0 else 0.0)
        out = _cut(out, *bound.range(reps, tail), tail, shift)
        k1 = out.k
        out = shrink(out, points)
        if out.k > k1:
            shift += out.interval
        return out, shift, reps

    while True:
        if n & 1:
            if result is None:
                result, r_shift, r_reps = p, p_shift, p_reps
            else:
                result, r_shift, r_reps = step(result, r_shift, r_reps, p, p_shift, p_reps)
        n >>= 1
        if not n:
            return result
        p, p_shift, p_reps = step(p, p_shift, p_reps, p, p_shift, p_reps)


def settle(p: GridPmf) -> GridPmf:
    """A PMF whose total mass (finite + infinite) is at least 1: a deficit (rounding) goes to
    the infinite loss, which only raises delta."""
    total = math.fsum(p.probs) + p.inf
    return p if total >= 1.0 else GridPmf(p.base, p.k, p.lower, p.probs, p.inf + (1.0 - total),
                                          p.err, p.rel)


def mass(p: GridPmf) -> float:
    """Total computed finite mass (an upper bound on the exact sum of the computed values)."""
    return err_mod.sum_upper(np.abs(p.probs))


def excess(p: GridPmf) -> float:
    """Total mass above 1.  dp-accounting's pessimistic constructions add some (1e-15 for a
    Laplace at scale 100, 2e-8 for a subsampled Gaussian at interval 1e-4); it only raises every
    delta, but n-fold composition multiplies it to (1 + excess)^n."""
    return max(0.0, math.fsum(p.probs) + p.inf - 1.0)


def pure(p: GridPmf) -> GridPmf:
    """The PMF of a release whose loss is bounded: no mass at infinity.  The rounding that
    dp-accounting leaves there is moved to the largest finite loss (pessimistic among finite
    losses), so the total mass is kept."""
    probs = p.probs.copy()
    probs[-1] += p.inf
    return GridPmf(p.base, p.k, p.lower, probs, 0.0, p.err + err_mod.U * p.inf, p.rel)


def to_pld(remove: GridPmf, add: GridPmf | None = None):
    """A dp-accounting PrivacyLossDistribution of the two sides (for epsilon / delta queries)."""
    from dp_accounting.pld import pld_pmf
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    def dense(p):
        return pld_pmf.DensePLDPmf(p.interval, p.lower, p.probs, min(1.0, p.inf), True)

    return pld_lib.PrivacyLossDistribution(dense(remove), None if add is None else dense(add))


def sides(pld, base: float, k: int):
    """(remove, add) GridPmfs of a dp-accounting PLD; add is None when symmetric."""
    remove = from_dp_pmf(pld._pmf_remove, base, k)
    add = None if getattr(pld, "_symmetric", False) else from_dp_pmf(pld._pmf_add, base, k)
    return remove, add
