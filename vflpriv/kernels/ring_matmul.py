"""Exact products over the ring Z/2^64 (uint64 words), the secure paths' arithmetic.

numpy's integer ``matmul`` is a naive triple loop (no BLAS): a Gram block (n x p)^T (n x q) at
n = 2e4, p = q = 200 takes seconds.  :func:`ring_matmul` computes the same words from float64
BLAS products of limbs:

* every word x is split into limbs x = sum_i x_i 2^{o_i} (``LIMB_OFFSETS``: 3 limbs of 22, 21
  and 21 bits at offsets 0, 22 and 43);
* a ⋅ b = sum over limb pairs (i, j) of (a_i ⋅ b_j) 2^{o_i + o_j} (mod 2^64), and a pair with
  o_i + o_j >= 64 contributes 0 mod 2^64: only 6 of the 9 pairs are computed (with four 16-bit
  limbs it would be 10 of 16 products of the same size);
* each limb-pair product is a float64 matrix product of non-negative integers; it is exact when
  every partial sum is an integer <= 2^53, which holds when the summation length is at most
  2^53 / max_(i,j) (2^{w_i} - 1)(2^{w_j} - 1) (512 terms here, :func:`max_chunk`): the summation
  dimension is cut into chunks of that length (the order BLAS adds in, FMA or not, does not
  matter: every partial sum of non-negative integers is bounded by the total);
* each chunk's exact float64 result is converted to uint64, shifted by o_i + o_j (bits above 63
  fall off: that is the reduction mod 2^64) and added in uint64 (wrapping: ring addition).

Vector products (v^T M, M v, u . v) read each matrix word once and do one multiply-add per word:
they are bound by memory, and numpy's ``einsum`` over uint64 already runs at the speed of one
pass over M (measured: docs/kernels.md, "Ring products"); splitting M into float limbs would
write three float64 copies of it first.  So :func:`ring_vecmat` and the 1-D cases use ``einsum``
(whose integer sums wrap mod 2^64 in any order).  Likewise a sparse matrix times a dense operand
(:func:`ring_spmatmul`) is scipy's own O(nnz) loop over uint64 (C++ unsigned arithmetic, which
wraps mod 2^64); the wrapper's job there is that both operands are uint64, so that scipy never
promotes the product to float64 (numpy's promotion of uint64 with int64 is float64, which would
lose the low bits silently), and that the result is a uint64 ndarray.

Size rule (public, no timing at run time): with torch installed (the ``torch`` extra), a 2-D x
2-D product of at least ``TORCH_MIN`` result rows and columns (and ``TORCH_MIN_WORK``
multiply-adds) goes through torch's int64 matrix product, which wraps mod 2^64 and runs several
times faster than the limb products; otherwise a product whose result has fewer than
``BLAS_MIN`` rows or columns goes through ``einsum`` (numpy's uint64 einsum is itself vectorized
and the limb conversions would not pay off on a thin result), every other one through the limb
products.  An explicit ``chunk`` always takes the limb products (the tests reach their chunking
that way).  All three give the same words.  Signed inputs (int64) are read as
their two's complement words, as ``ring.encode`` stores them.
"""
from __future__ import annotations

import numpy as np

__all__ = ["BLAS_MIN", "LIMB_OFFSETS", "max_chunk", "ring_matmul", "ring_spmatmul", "ring_vecmat"]

#: limb offsets (bits) of a word; limb i holds bits [o_i, o_{i+1}) (the last one up to bit 63)
LIMB_OFFSETS = (0, 22, 43)

#: a 2-D product whose result has fewer rows or columns than this is done by ``einsum``.  numpy's
#: uint64 einsum over a shared summation axis is vectorized (about 0.4 ns per multiply-add on one
#: core here), the limb products cost 6 float64 multiply-adds per word product plus the limb
#: conversions of both operands, which a thin result does not amortize.  Measured in CPU time on
#: one core at n = 2e4 (``vflpriv bench ring``, docs/ring_bench.json and
#: docs/ring_bench_threshold.json): einsum / limbs = 0.70 at 16 x 128, 0.89 at 32 x 128, 0.92 at
#: 50 x 800, and 1.10 at 64 x 64, 1.12 at 64 x 128, 1.07 at 200 x 200, 1.50 at 800 x 800.  So
#: the limbs from 64 rows and columns on (32 x 32, 1.14, stays on einsum: the rule is kept simple
#: and errs toward einsum; more BLAS threads would only move the break-even lower).
BLAS_MIN = 64

#: with torch installed, a 2-D x 2-D product whose result has at least ``TORCH_MIN`` rows and
#: columns and ``TORCH_MIN_WORK`` multiply-adds goes through torch's int64 matrix product
#: (:func:`_torch_matmul`): measured here on one thread (CPU seconds, ``vflpriv bench ring``,
#: docs/ring_bench_torch.json): 1.8 to 2.8 times less than the limb products on Gram blocks of
#: 200 and 800 columns over 2e4 and 1e5 rows, and 2.8x less than einsum at 16 x 128 over 2e4
#: rows (a one-off run); einsum stays ahead below about 8 (1 x 128: 0.26x).
#: Without torch (it is an extra) the rule above holds; every path gives the same words.
TORCH_MIN = 8
TORCH_MIN_WORK = 1 << 22

_U64 = np.uint64


def _widths(offsets):
    return [b - a for a, b in zip(offsets, list(offsets[1:]) + [64])]


def _pairs(offsets):
    """(i, j, shift) of every limb pair whose shift o_i + o_j is < 64 (the others vanish mod
    2^64)."""
    return [(i, j, oi + oj) for i, oi in enumerate(offsets) for j, oj in enumerate(offsets)
            if oi + oj < 64]


def max_chunk(offsets=LIMB_OFFSETS) -> int:
    """The longest summation for which every limb-pair product is exact in float64: each term
    is at most (2^{w_i} - 1)(2^{w_j} - 1), and a sum of at most 2^53 / that many of them is an
    integer <= 2^53 in every partial sum."""
    w = _widths(offsets)
    worst = max((2 ** w[i] - 1) * (2 ** w[j] - 1) for i, j, _ in _pairs(offsets))
    return (2 ** 53) // worst


def _words(x, name):
    """``x`` as a uint64 ndarray (int64 read as two's complement words; other dtypes refused,
    since a float or a narrower integer is no ring element here)."""
    x = np.asarray(x)
    if x.dtype == np.uint64:
        return x
    if x.dtype == np.int64:
        return x.view(np.uint64)
    raise TypeError(f"{name}: ring products take uint64 (or int64) words, got {x.dtype}")


def _limbs(x, offsets):
    """The limbs of the words ``x`` as float64 arrays (exact: each is < 2^22)."""
    out = []
    for i, o in enumerate(offsets):
        limb = x >> _U64(o) if o else x
        if i + 1 < len(offsets):
            limb = limb & _U64((1 << (offsets[i + 1] - o)) - 1)
        out.append(limb.astype(np.float64))
    return out


def _limb_matmul(a, b, chunk, offsets):
    """a @ b mod 2^64 (a: m x n, b: n x q, uint64) by the limb products, n cut into chunks."""
    m, n = a.shape
    q = b.shape[1]
    acc = np.zeros((m, q), dtype=np.uint64)
    pairs = _pairs(offsets)
    for s in range(0, n, chunk):
        e = min(n, s + chunk)
        la = _limbs(a[:, s:e], offsets)
        lb = _limbs(b[s:e], offsets)
        # pairs of one shift are summed in uint64 first, then shifted once
        by_shift = {}
        for i, j, sh in pairs:
            part = (la[i] @ lb[j]).astype(np.uint64)
            by_shift[sh] = part if sh not in by_shift else by_shift[sh] + part
        for sh, part in by_shift.items():
            acc += (part << _U64(sh)) if sh else part
    return acc


def ring_vecmat(v, M):
    """v^T M mod 2^64 (v: n words, M: n x p words) as a uint64 vector of length p."""
    v, M = _words(v, "v"), _words(M, "M")
    if v.ndim != 1 or M.ndim != 2 or v.shape[0] != M.shape[0]:
        raise ValueError(f"ring_vecmat: shapes {v.shape} and {M.shape} do not match (n and n x p)")
    if M.shape[0] == 0:
        return np.zeros(M.shape[1], dtype=np.uint64)
    # einsum's uint64 sum of products wraps mod 2^64 (module docstring: memory bound, so no BLAS)
    return np.einsum("i,ij->j", v, M)


def ring_matmul(a, b, *, chunk=None):
    """a @ b over Z/2^64, bit for bit the words of numpy's uint64 ``a @ b``.

    ``a``, ``b``: uint64 (or int64, read as words) arrays of 1 or 2 dimensions, any strides, as
    ``@`` takes them (1-D x 2-D, 2-D x 1-D, 1-D x 1-D gives a 0-d uint64 array).  ``chunk``: the
    summation length per float64 product (default and maximum :func:`max_chunk`; a smaller one
    gives the same words, and lets a test reach the chunking on small inputs)."""
    a, b = _words(a, "a"), _words(b, "b")
    if a.ndim not in (1, 2) or b.ndim not in (1, 2):
        raise ValueError(f"ring_matmul takes 1-D or 2-D operands, got {a.ndim}-D and {b.ndim}-D")
    n = a.shape[-1]
    nb = b.shape[0]
    if n != nb:
        raise ValueError(f"ring_matmul: shapes {a.shape} and {b.shape} do not match")
    limit = max_chunk()
    explicit = chunk is not None           # a chunk asks for the limb products themselves
    chunk = limit if chunk is None else int(chunk)
    if not 1 <= chunk <= limit:
        raise ValueError(f"chunk must be in [1, {limit}] (float64 exactness), got {chunk}")
    if a.ndim == 1 and b.ndim == 1:
        return np.asarray(np.einsum("i,i->", a, b), dtype=np.uint64) if n else \
            np.zeros((), dtype=np.uint64)
    if a.ndim == 1:
        return ring_vecmat(a, b)
    if b.ndim == 1:
        return ring_vecmat(b, a.T)
    m, q = a.shape[0], b.shape[1]
    if n == 0 or m == 0 or q == 0:
        return np.zeros((m, q), dtype=np.uint64)
    if not explicit and min(m, q) >= TORCH_MIN and m * n * q >= TORCH_MIN_WORK and _has_torch():
        return _torch_matmul(a, b)
    if min(m, q) < BLAS_MIN:
        # a thin result (size rule, BLAS_MIN)
        return np.einsum("ij,jk->ik", a, b)
    return _limb_matmul(a, b, chunk, LIMB_OFFSETS)


def _has_torch() -> bool:
    """Whether torch can be imported here (the ``torch`` extra; looked up once)."""
    if _TORCH[0] is None:
        import importlib.util

        _TORCH[0] = importlib.util.find_spec("torch") is not None
    return _TORCH[0]


_TORCH = [None]


def _torch_matmul(a, b):
    """a @ b mod 2^64 by torch's int64 matrix product on the CPU: the words read as int64 (two's
    complement), multiplied and summed in int64, whose products and sums wrap mod 2^64 in torch's
    kernels (checked bit for bit against Python integers and the limb products:
    tests/test_ring_matmul.py), read back as words."""
    import torch

    def tensor(x):
        # a strided view as it is (a transposed block costs no copy); torch refuses negative
        # strides, which a copy then removes
        try:
            return torch.from_numpy(x.view(np.int64))
        except ValueError:
            return torch.from_numpy(np.ascontiguousarray(x).view(np.int64))

    return (tensor(a) @ tensor(b)).numpy().view(np.uint64)


def ring_spmatmul(S, x):
    """S @ x over Z/2^64 for a scipy sparse matrix (or array) S of uint64 (or int64) entries and
    a dense uint64 (or int64) vector or matrix x: a uint64 ndarray (1-D for a 1-D x).  scipy's
    sparse product loops over the nonzeros in C++ in the operands' common type; both are made
    uint64 first so that this type is uint64, whose arithmetic wraps mod 2^64."""
    import scipy.sparse as sp

    if not sp.issparse(S):
        raise TypeError(f"ring_spmatmul takes a scipy sparse matrix, got {type(S).__name__}")
    if S.dtype == np.int64:
        S = S.copy()
        S.data = S.data.view(np.uint64)
    elif S.dtype != np.uint64:
        raise TypeError(f"S: ring products take uint64 (or int64) words, got {S.dtype}")
    x = _words(x, "x")
    if x.ndim not in (1, 2) or x.shape[0] != S.shape[1]:
        raise ValueError(f"ring_spmatmul: shapes {S.shape} and {x.shape} do not match")
    out = np.asarray(S @ x)
    if out.dtype != np.uint64:     # scipy promised the operands' type; refuse anything else
        raise TypeError(f"scipy returned {out.dtype} for a uint64 product")
    return out.reshape(S.shape[0]) if x.ndim == 1 else out
