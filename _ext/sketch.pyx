# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Seeded sketches applied to sparse columns without materializing J (``vflpriv.kernels._sketch``).

J is m x n (n = rows of A).  Column i of J is regenerated from (key, i) whenever a nonzero of A
in row i is met, so sketching a column a costs O(m * nnz(a)) time (gaussian) or O(nnz(a))
(countsketch) and no memory beyond the m-vector of the result.

Counter-based stream (the numpy twin in ``vflpriv/kernels/reference.py`` computes the same words):
mix(z) is the SplitMix64 finalizer (Steele, Lea, Flood 2014; constants of Stafford's variant 13),
G = 0x9E3779B97F4A7C15, key = mix(mix(seed) ^ tag) with tag = 1 (gaussian) or 2 (countsketch),
c_i = mix(key ^ mix(i + G)) is the counter base of column i, and word k of column i is
w_{i,k} = mix(c_i + (k + 1) G), i.e. the SplitMix64 sequence started at c_i.

* gaussian: J[r, i] = Phi^{-1}(u) / sqrt(m) with u = ((w_{i,r} >> 12) + 0.5) 2^-52, the midpoints
  of the 2^52-point grid, exact in float64 and in [2^-53, 1 - 2^-53] (never 0 or 1, so the tails'
  log is finite; |J| sqrt(m) <= 8.2),
  and Phi^{-1} by Wichura's AS 241 (relative error ~1e-16).  Entries are iid N(0, 1/m), each a
  function of (seed, r, i) alone.  (Box-Muller would need a log, a sqrt and a sine/cosine per
  pair; the inverse CDF needs one rational function for 85% of the entries, and is what makes the
  compiled kernel faster than numpy's vectorized transcendental functions.)
* countsketch: with w = c_i, bucket h(i) = ((w >> 32) * m) >> 32 (Lemire's multiply-shift; bias
  below m / 2^32) and sign s(i) = +1 if the lowest bit of w is 0, else -1; J[:, i] = s(i) e_{h(i)}.
"""
from libc.math cimport log, sqrt, fabs
from libc.stdint cimport uint64_t, int32_t, int64_t

ctypedef fused real:
    float
    double

ctypedef fused index:
    int32_t
    int64_t

cdef uint64_t GOLD = 0x9E3779B97F4A7C15ULL
cdef double TWO_M52 = 2.220446049250313e-16  # 2^-52


cdef inline uint64_t _mix(uint64_t z) noexcept nogil:
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL
    return z ^ (z >> 31)


cdef inline uint64_t _column_base(uint64_t key, uint64_t i) noexcept nogil:
    return _mix(key ^ _mix(i + GOLD))


cdef inline double _ndtri(double p) noexcept nogil:
    """Phi^{-1}(p) for p in (0, 1): Wichura's algorithm AS 241 (PPND16, Applied Statistics 37,
    1988), relative accuracy about 1e-16 (coefficients from the paper).  The central branch (|p - 1/2| <= 0.425, 85% of draws)
    is a rational function with no libm call; the tails take one log and one sqrt."""
    cdef double q = p - 0.5
    cdef double r, val
    if fabs(q) <= 0.425:
        r = 0.180625 - q * q
        return q * (((((((2.5090809287301226727e+3 * r + 3.3430575583588128105e+4) * r + 6.7265770927008700853e+4) * r + 4.5921953931549871457e+4) * r + 1.3731693765509461125e+4) * r + 1.9715909503065514427e+3) * r + 1.3314166789178437745e+2) * r + 3.3871328727963666080e0) / \
            (((((((5.2264952788528545610e+3 * r + 2.8729085735721942674e+4) * r + 3.9307895800092710610e+4) * r + 2.1213794301586595867e+4) * r + 5.3941960214247511077e+3) * r + 6.8718700749205790830e+2) * r + 4.2313330701600911252e+1) * r + 1.0)
    r = p if q < 0.0 else 1.0 - p
    r = sqrt(-log(r))
    if r <= 5.0:
        r = r - 1.6
        val = (((((((7.74545014278341407640e-4 * r + 2.27238449892691845833e-2) * r + 2.41780725177450611770e-1) * r + 1.27045825245236838258e0) * r + 3.64784832476320460504e0) * r + 5.76949722146069140550e0) * r + 4.63033784615654529590e0) * r + 1.42343711074968357734e0) / \
            (((((((1.05075007164441684324e-9 * r + 5.47593808499534494600e-4) * r + 1.51986665636164571966e-2) * r + 1.48103976427480074590e-1) * r + 6.89767334985100004550e-1) * r + 1.67638483018380384940e0) * r + 2.05319162663775882187e0) * r + 1.0)
    else:
        r = r - 5.0
        val = (((((((2.01033439929228813265e-7 * r + 2.71155556874348757815e-5) * r + 1.24266094738807843860e-3) * r + 2.65321895265761230930e-2) * r + 2.96560571828504891230e-1) * r + 1.78482653991729133580e0) * r + 5.46378491116411436990e0) * r + 6.65790464350110377720e0) / \
            (((((((2.04426310338993978564e-15 * r + 1.42151175831644588870e-7) * r + 1.84631831751005468180e-5) * r + 7.86869131145613259100e-4) * r + 1.48753612908506148525e-2) * r + 1.36929880922735805310e-1) * r + 5.99832206555887937690e-1) * r + 1.0)
    return -val if q < 0.0 else val


cdef inline double _gaussian_entry(uint64_t c, Py_ssize_t r, double inv_sqrt_m) noexcept nogil:
    """J[r, i] = Phi^{-1}(u) / sqrt(m), u = ((w >> 12) + 1/2) 2^-52, w = mix(c_i + (r + 1) G)."""
    cdef uint64_t w = _mix(c + (<uint64_t> (r + 1)) * GOLD)
    return _ndtri(((<double> (w >> 12)) + 0.5) * TWO_M52) * inv_sqrt_m


cdef inline void _gaussian_column(uint64_t key, uint64_t i, Py_ssize_t m, double *out) noexcept nogil:
    """out[0:m] = J[:, i]."""
    cdef uint64_t c = _column_base(key, i)
    cdef double inv_sqrt_m = 1.0 / sqrt(<double> m)
    cdef Py_ssize_t r
    for r in range(m):
        out[r] = _gaussian_entry(c, r, inv_sqrt_m)


cdef inline void _gaussian_axpy(uint64_t key, uint64_t i, Py_ssize_t m, double a,
                                double *out) noexcept nogil:
    """out[0:m] += a * J[:, i], generating J[:, i] on the fly."""
    cdef uint64_t c = _column_base(key, i)
    cdef double inv_sqrt_m = 1.0 / sqrt(<double> m)
    cdef Py_ssize_t r
    for r in range(m):
        out[r] += a * _gaussian_entry(c, r, inv_sqrt_m)


cdef inline void _countsketch_cell(uint64_t key, uint64_t i, uint64_t m, Py_ssize_t *bucket,
                                   double *sign) noexcept nogil:
    cdef uint64_t w = _column_base(key, i)
    bucket[0] = <Py_ssize_t> (((w >> 32) * m) >> 32)
    sign[0] = -1.0 if (w & 1ULL) else 1.0


def sketch_columns(const real[:] data, const index[:] indices, const index[:] indptr,
                   Py_ssize_t n, const int64_t[:] columns, Py_ssize_t m, uint64_t key,
                   int kind, double[::1, :] out):
    """out[:, c] = J @ A[:, columns[c]] for a CSC matrix (data, indices, indptr) with n rows.

    ``kind`` 0 gaussian, 1 countsketch; ``out`` is a zeroed Fortran-ordered (m, len(columns))
    array.  Duplicate entries in a column add up (as in A's dense form).  Returns -1, or the
    offending row index (n for a negative one) if one lies outside [0, n).
    """
    cdef Py_ssize_t c, k, col, bucket
    cdef Py_ssize_t bad = -1
    cdef index row
    cdef double sign
    cdef double *dst
    with nogil:
        for c in range(columns.shape[0]):
            if bad >= 0:
                break
            col = columns[c]
            dst = &out[0, c]
            for k in range(indptr[col], indptr[col + 1]):
                row = indices[k]
                if row < 0 or row >= n:
                    bad = <Py_ssize_t> row if row >= 0 else n
                    break
                if kind == 0:
                    _gaussian_axpy(key, <uint64_t> row, m, <double> data[k], dst)
                else:
                    _countsketch_cell(key, <uint64_t> row, <uint64_t> m, &bucket, &sign)
                    dst[bucket] += sign * (<double> data[k])
    return bad


def sketch_rows(const real[:] data, const index[:] indices, const index[:] indptr,
                Py_ssize_t ncols, Py_ssize_t m, uint64_t key, int kind, double[:, ::1] out):
    """out[j, :] = (J @ A)[:, j] for a CSR matrix (data, indices, indptr): each column of J is
    generated once per nonempty row of A (the whole-matrix sketch).  ``out`` is a zeroed
    C-ordered (ncols, m) array.  Returns -1, or the offending column index (ncols for a negative
    one) if one lies outside [0, ncols)."""
    cdef Py_ssize_t i, k, r, bucket = 0, nrows = indptr.shape[0] - 1
    cdef Py_ssize_t bad = -1
    cdef index col
    cdef double a, sign
    cdef double[::1] buf = (cython_empty(m) if kind == 0 else cython_empty(1))
    cdef double *jc = &buf[0]
    cdef double *dst
    with nogil:
        for i in range(nrows):
            if bad >= 0:
                break
            if indptr[i] == indptr[i + 1]:
                continue
            if kind == 0:
                _gaussian_column(key, <uint64_t> i, m, jc)
            else:
                _countsketch_cell(key, <uint64_t> i, <uint64_t> m, &bucket, &sign)
            for k in range(indptr[i], indptr[i + 1]):
                col = indices[k]
                if col < 0 or col >= ncols:
                    bad = <Py_ssize_t> col if col >= 0 else ncols
                    break
                a = <double> data[k]
                dst = &out[col, 0]
                if kind == 0:
                    for r in range(m):
                        dst[r] += a * jc[r]
                else:
                    dst[bucket] += sign * a
    return bad


def column_norms(const int64_t[:] rows, Py_ssize_t m, uint64_t key, double[::1] out):
    """out[t] = ||J[:, rows[t]]||_2 for the gaussian sketch, summing the squares of the very
    entries the sketch uses."""
    cdef Py_ssize_t t, r
    cdef double s
    cdef double[::1] buf = cython_empty(m)
    cdef double *jc = &buf[0]
    with nogil:
        for t in range(rows.shape[0]):
            _gaussian_column(key, <uint64_t> rows[t], m, jc)
            s = 0.0
            for r in range(m):
                s += jc[r] * jc[r]
            out[t] = sqrt(s)


def gaussian_block(const int64_t[:] rows, Py_ssize_t m, uint64_t key, double[::1, :] out):
    """out[:, t] = J[:, rows[t]] (used by tests and to rebuild J explicitly)."""
    cdef Py_ssize_t t
    with nogil:
        for t in range(rows.shape[0]):
            _gaussian_column(key, <uint64_t> rows[t], m, &out[0, t])


def countsketch_cells(const int64_t[:] rows, Py_ssize_t m, uint64_t key, int64_t[::1] bucket,
                      double[::1] sign):
    """bucket[t], sign[t] = h(rows[t]), s(rows[t])."""
    cdef Py_ssize_t t, b
    cdef double s
    with nogil:
        for t in range(rows.shape[0]):
            _countsketch_cell(key, <uint64_t> rows[t], <uint64_t> m, &b, &s)
            bucket[t] = b
            sign[t] = s


cdef object cython_empty(Py_ssize_t k):
    import numpy as np
    return np.empty(k, dtype=np.float64)


def countsketch_csc(const real[:] data, const index[:] indices, const index[:] indptr,
                    Py_ssize_t n, Py_ssize_t m, uint64_t key, double[::1] out_data,
                    int64_t[::1] out_indices, int64_t[::1] out_indptr, int64_t[::1] slot,
                    const int64_t[::1] btab, const double[::1] stab):
    """Countsketch J @ A of a CSC matrix as a CSC result (one entry per occupied bucket): O(nnz).

    ``out_*`` have room for nnz(A) entries and ncols + 1 pointers; ``slot`` (length m) is filled
    with -1 by the caller and remembers where each bucket's entry of the current column is.
    ``btab``/``stab``: h(i), s(i) for all n rows (precomputed when nnz > n, so each row is hashed
    once), or empty to hash per nonzero.
    Row indices within a result column come in order of first occurrence (unsorted).  Returns
    (entries written, offending row index or -1)."""
    cdef Py_ssize_t j, k, t, start, pos = 0, bucket, bad = -1
    cdef Py_ssize_t ncols = indptr.shape[0] - 1
    cdef bint use_tab = btab.shape[0] == n and n > 0
    cdef index row
    cdef double sign
    with nogil:
        out_indptr[0] = 0
        for j in range(ncols):
            start = pos
            for k in range(indptr[j], indptr[j + 1]):
                row = indices[k]
                if row < 0 or row >= n:
                    bad = <Py_ssize_t> row if row >= 0 else n
                    break
                if use_tab:
                    bucket = btab[row]
                    sign = stab[row]
                else:
                    _countsketch_cell(key, <uint64_t> row, <uint64_t> m, &bucket, &sign)
                t = slot[bucket]
                if t < start:
                    slot[bucket] = pos
                    out_indices[pos] = bucket
                    out_data[pos] = sign * (<double> data[k])
                    pos += 1
                else:
                    out_data[t] += sign * (<double> data[k])
            if bad >= 0:
                break
            out_indptr[j + 1] = pos
    return pos, bad
