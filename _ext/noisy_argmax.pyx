# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Fused report-noisy-max (module ``vflpriv.kernels._noisy_argmax``).

One pass over the scores: for each candidate draw one 64-bit word from the numpy Generator's bit
generator (``bitgen_t.next_uint64``, the C-API of numpy.random, taken from
``rng.bit_generator.capsule``), turn it into noise by an inverse CDF, add it to the score and keep
the running maximum.  No noise vector is materialized and the scores are read once.

Distribution transforms (the numpy twin in ``vflpriv/kernels/reference.py`` applies the same ones
to the same words, so both paths return the same index from the same seed):

* uniform  U = ((w >> 12) + 0.5) * 2^-52, the midpoints of the 2^52-point grid, computed exactly
  (k + 0.5 < 2^52 needs 53 bits; with 53 bits of w the top grid point would round to 1.0): U lies
  in [2^-53, 1 - 2^-53], never 0, 1 or 1/2, so no logarithm below can see 0;
* laplace      Z = scale * log(2U)            if U < 1/2
               Z = -scale * log(2(1 - U))     otherwise          (inverse CDF of Lap(scale));
* gumbel       Z = -scale * log(-log U)                          (inverse CDF of Gumbel(0, scale));
* exponential  Z = -scale * log(U)                               (inverse CDF of Exp(scale), 1 - U ~ U).

Logarithms cost more than drawing the words (numpy's vectorized log beats a scalar libm call), so
the kernel skips them for candidates that cannot win, exactly (the returned index is the one the
full computation gives): the noise is at most -scale log y for y = 1 - U (gumbel),
2 min(U, 1 - U) (laplace) or U (exponential), and -log y <= k log 2 where 2^-k <= y is read from
the exponent bits of y, so a candidate with v + scale k log 2 (plus a rounding margin) <= M, the
running maximum, is rejected without a log.  Once M settles only a few candidates pass the filter
(those whose noisy value comes within scale log 2 of the maximum).
Ties keep the first maximum, like ``numpy.argmax``.
"""
from cpython.pycapsule cimport PyCapsule_IsValid, PyCapsule_GetPointer
from libc.math cimport log, isfinite, fmin
from libc.stdint cimport uint64_t
from libc.string cimport memcpy
from numpy.random cimport bitgen_t

ctypedef fused real:
    float
    double

cdef enum:
    LAPLACE = 0
    GUMBEL = 1
    EXPONENTIAL = 2

cdef double TWO_M52 = 2.220446049250313e-16  # 2^-52


cdef inline double _uniform(uint64_t w) noexcept nogil:
    return ((<double> (w >> 12)) + 0.5) * TWO_M52


cdef double LN2 = 0.6931471805599453


cdef inline int _exponent(double y) noexcept nogil:
    """floor(log2 y) for a normal positive double: y >= 2^e (exact, read from the bits)."""
    cdef uint64_t bits
    memcpy(&bits, &y, 8)
    return <int> ((bits >> 52) & 0x7FF) - 1023


cdef void _fill_bounds(int kind, double scale, double *table) noexcept nogil:
    """table[k] >= the noise of any draw whose filter argument y has floor(log2 y) = -k.

    The filter argument is y = 1 - U (gumbel), 2 min(U, 1 - U) (laplace) or U (exponential), all
    in [2^-53, 1], and the noise is at most -scale log y: for exponential and laplace with U >= 1/2
    it is equal, laplace with U < 1/2 has negative noise, and for gumbel -log(-log U) <= -log(1 - U) because -log U >= 1 - U.  With y >= 2^-k,
    -log y <= k log 2; the margin (relative 1e-9 plus 1e-9) absorbs libm's rounding, so the filter
    only ever rejects candidates that cannot win.
    """
    cdef int k
    for k in range(56):
        table[k] = scale * (k * LN2 * (1.0 + 1e-9) + 1e-9)


cdef inline bint _offer(double v, double scale, int kind, const double *table, bitgen_t *bg,
                        double *best) noexcept nogil:
    """Draw the noise of candidate value v; return True (and update *best) if v + noise wins.

    The log is only evaluated when the exponent bound says v + noise could exceed *best; the
    comparison is then the exact one of the reference (numpy) implementation.
    """
    cdef double u = _uniform(bg.next_uint64(bg.state))
    cdef double x, y
    # Filter (branch-free up to the rarely taken comparison): y bounds the noise as documented.
    if kind == LAPLACE:
        y = 2.0 * fmin(u, 1.0 - u)  # exact: 2u if u < 1/2, else 2(1 - u) (Sterbenz)
    elif kind == GUMBEL:
        y = 1.0 - u
    else:
        y = u
    if v + table[-_exponent(y)] <= best[0]:
        return False
    if kind == LAPLACE:
        if u < 0.5:
            x = v + scale * log(2.0 * u)
        else:
            x = v + (-scale) * log(2.0 * (1.0 - u))
    elif kind == GUMBEL:
        x = v + (-scale) * log(-log(u))
    else:
        x = v + (-scale) * log(u)
    if x > best[0]:
        best[0] = x
        return True
    return False


cdef bitgen_t *_bitgen(object rng) except NULL:
    capsule = rng.bit_generator.capsule
    if not PyCapsule_IsValid(capsule, "BitGenerator"):
        raise ValueError(f"rng must be a numpy Generator, got {rng!r}")
    return <bitgen_t *> PyCapsule_GetPointer(capsule, "BitGenerator")


cdef Py_ssize_t _run(const real[:] s, double scale, int kind, bint signed, bitgen_t *bg,
                     Py_ssize_t *bad) noexcept nogil:
    cdef Py_ssize_t i, n = s.shape[0], arg = 0
    cdef double v, best = -1.0 / 0.0
    cdef double table[56]
    _fill_bounds(kind, scale, table)
    bad[0] = -1
    for i in range(n):
        v = s[i]
        if not isfinite(v):
            bad[0] = i
            return -1
        if signed:
            if _offer(v, scale, kind, table, bg, &best):
                arg = 2 * i
            if _offer(-v, scale, kind, table, bg, &best):
                arg = 2 * i + 1
        else:
            if _offer(v, scale, kind, table, bg, &best):
                arg = i
    return arg


def noisy_argmax(const real[:] scores, double scale, int kind, object rng, bint signed=False):
    """argmax_k (c_k + Z_k) over candidates c = scores (or, if ``signed``, the interleaved list
    +scores[0], -scores[0], +scores[1], ... whose candidate k is (k // 2, +1 if k even else -1)).

    ``kind``: 0 laplace, 1 gumbel, 2 exponential.  Draws exactly one 64-bit word per candidate
    (until a non-finite score is met).  Returns the candidate index, or -(i + 1) if scores[i] is NaN
    or infinite; the caller turns that into a ValueError.  Arguments are validated by the caller.
    """
    cdef bitgen_t *bg = _bitgen(rng)
    cdef Py_ssize_t arg, bad
    with rng.bit_generator.lock, nogil:
        arg = _run(scores, scale, kind, signed, bg, &bad)
    if bad >= 0:
        return -(bad + 1)
    return arg
