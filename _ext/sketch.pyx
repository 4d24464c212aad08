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

* gaussian: pair p of column i uses u1 = ((w_{i,2p} >> 11) + 0.5) 2^-53 in (0, 1) (never 0, so
  log(u1) is finite) and u2 = (w_{i,2p+1} >> 11) 2^-53 in [0, 1); Box-Muller with the 1/m variance
  folded into the radius: r = sqrt(-2 log(u1) / m), J[2p, i] = r cos(2 pi u2),
  J[2p+1, i] = r sin(2 pi u2) (the last sine is dropped when m is odd).  Entries are N(0, 1/m).
* countsketch: with w = c_i, bucket h(i) = ((w >> 32) * m) >> 32 (Lemire's multiply-shift; bias
  below m / 2^32) and sign s(i) = +1 if the lowest bit of w is 0, else -1; J[:, i] = s(i) e_{h(i)}.
"""
from libc.math cimport log, sqrt, sin, cos, M_PI
from libc.stdint cimport uint64_t, int32_t, int64_t

ctypedef fused real:
    float
    double

ctypedef fused index:
    int32_t
    int64_t

cdef uint64_t GOLD = 0x9E3779B97F4A7C15ULL
cdef double TWO_M53 = 1.1102230246251565e-16  # 2^-53


cdef inline uint64_t _mix(uint64_t z) noexcept nogil:
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL
    return z ^ (z >> 31)


cdef inline uint64_t _column_base(uint64_t key, uint64_t i) noexcept nogil:
    return _mix(key ^ _mix(i + GOLD))


cdef inline void _gaussian_column(uint64_t key, uint64_t i, Py_ssize_t m, double *out) noexcept nogil:
    """out[0:m] = J[:, i]."""
    cdef uint64_t c = _column_base(key, i)
    cdef Py_ssize_t p, r = 0
    cdef double u1, u2, rad, t
    cdef double dm = <double> m
    p = 0
    while r < m:
        u1 = ((<double> (_mix(c + (<uint64_t> (2 * p + 1)) * GOLD) >> 11)) + 0.5) * TWO_M53
        u2 = (<double> (_mix(c + (<uint64_t> (2 * p + 2)) * GOLD) >> 11)) * TWO_M53
        rad = sqrt(-2.0 * log(u1) / dm)
        t = 2.0 * M_PI * u2
        out[r] = rad * cos(t)
        if r + 1 < m:
            out[r + 1] = rad * sin(t)
        r += 2
        p += 1


cdef inline void _gaussian_axpy(uint64_t key, uint64_t i, Py_ssize_t m, double a,
                                double *out) noexcept nogil:
    """out[0:m] += a * J[:, i], generating J[:, i] on the fly."""
    cdef uint64_t c = _column_base(key, i)
    cdef Py_ssize_t p = 0, r = 0
    cdef double u1, u2, rad, t
    cdef double dm = <double> m
    while r < m:
        u1 = ((<double> (_mix(c + (<uint64_t> (2 * p + 1)) * GOLD) >> 11)) + 0.5) * TWO_M53
        u2 = (<double> (_mix(c + (<uint64_t> (2 * p + 2)) * GOLD) >> 11)) * TWO_M53
        rad = sqrt(-2.0 * log(u1) / dm)
        t = 2.0 * M_PI * u2
        out[r] += a * (rad * cos(t))
        if r + 1 < m:
            out[r + 1] += a * (rad * sin(t))
        r += 2
        p += 1


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
