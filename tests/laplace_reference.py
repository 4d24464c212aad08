"""The exact delta of k Laplace releases at any count up to ~1e4, in high-precision arithmetic.

Independent of the accountants (nothing from ``accounting`` is used), and of the O(k^3) sum in
test_accounting_proven.laplace_delta_exact, which it agrees with to 40+ digits at small counts.

One release with eps = sensitivity / scale has, under P, privacy loss +eps w.p. 1/2, -eps w.p.
e^-eps / 2 and eps - 2Y w.p. p_c = (1 - e^-eps) / 2, Y ~ Exp(1) truncated to [0, eps].  Given c
continuous outcomes (C ~ Bin(k, p_c)) and a of the k - c atoms at +eps (A ~ Bin(k - c, p_a),
p_a = 1 / (1 + e^-eps)), the loss is S = s0 - 2T with s0 = (2a + 2c - k) eps and T a sum of c
truncated exponentials, and

    delta(g) = sum_{c, a} P(c) P(a | c) (P(T < tau) - e^{g - s0} E[e^{2T}; T < tau]),
    tau = (s0 - g) / 2.

* tau >= c eps (T always below it): E[e^{2T}] = e^{c eps}, and the sum over those a is
  P(Bin(k - c, p_a) >= A) - e^g P(Bin(k - c, 1 - p_a) >= A) (the tilt e^{(d - a) eps} swaps
  p_a and 1 - p_a), with one threshold A for every c.
* 0 < tau < c eps: inclusion-exclusion on the truncations, (1 - e^-eps)^c f_T(t) =
  sum_j C(c, j) (-e^-eps)^j Gamma_c(t - j eps), gives P(T < tau) and E[e^{2T}; T < tau] from
  the Gamma(c, 1) CDF and int_0^u s^{c-1} e^s ds / (c-1)! at u = tau - j eps.  Every such u
  lies on one grid (N eps - g) / 2, N = k mod 2, so the sums over j are convolutions, done
  exactly on integers.  They alternate and lose up to log10(2e) c digits: the working precision
  is 45 + 3c/4 digits and the fixed-point error of each sum is kept below 2^-150.

The c outside the kept range (log P(c) above 1e-32 / (k + 1)) carry probability ``missing``,
and each term is in [0, 1], so the true delta lies in [total, total + missing].
"""
import functools

import mpmath as mp


def laplace_delta_bounds(k: int, eps: float, eps_g: float, tail=mp.mpf(10) ** -32):
    """(lower, upper) bounds on delta at eps_g of k Laplace releases at eps = sensitivity / scale;
    upper - lower <= ``tail`` plus rounding far below it."""
    logp, keep, missing = _counts(k, eps, tail)
    cmax = keep[-1]
    with mp.workdps(45 + (3 * cmax) // 4):
        e, g = mp.mpf(eps), mp.mpf(eps_g)
        # the grid u_r = u0 + r eps holding every tau - j eps
        n_grid = int(mp.floor(g / e)) - 2
        n_grid += (n_grid - k) % 2
        while (n_grid * e - g) / 2 > 0:
            n_grid -= 2
        while (n_grid * e - g) / 2 <= 0:
            n_grid += 2
        u0 = (n_grid * e - g) / 2
        size = cmax + 2
        positive = [c for c in keep if c > 0]
        cols = [_gamma_columns(positive, u0 + r * e) for r in range(size)] if positive else []
        damp = [mp.exp(-2 * (u0 + r * e)) for r in range(size)]
        q = -mp.exp(-e)
        pa = 1 / (1 + mp.exp(-e))
        a_full = int(mp.ceil((k + g / e) / 2))          # least a with (2a - k) eps >= g
        while a_full > 0 and (2 * (a_full - 1) - k) * e >= g:
            a_full -= 1
        while (2 * a_full - k) * e < g:
            a_full += 1
        up, down = _tails_by_count(k - cmax, k - keep[0], a_full, [pa, 1 - pa])
        total = mp.mpf(0)
        for c in keep:
            n = k - c
            inner = up[n] - mp.exp(g) * down[n]
            lo = max(0, int(mp.floor((k - 2 * c + g / e) / 2)) - 1)
            while ((2 * lo + 2 * c - k) * e - g) / 2 <= 0:
                lo += 1                                  # least a with tau > 0
            hi = min(a_full - 1, n)
            if c > 0 and lo <= hi:
                inner += _partial(c, n, lo, hi, k, e, g, u0, cols, damp, q, pa)
            total += mp.exp(logp[c]) * inner
        return total, total + missing


@functools.lru_cache(maxsize=8)
def _counts(k, eps, tail):
    """log P(C = c) for C ~ Bin(k, p_c), the c kept and the probability of the others; the same
    for every threshold, so worked out once per (k, eps)."""
    with mp.workdps(60):
        e = mp.mpf(eps)
        pc = -mp.expm1(-e) / 2
        logp = tuple(mp.loggamma(k + 1) - mp.loggamma(c + 1) - mp.loggamma(k - c + 1)
                     + c * mp.log(pc) + (k - c) * mp.log1p(-pc) for c in range(k + 1))
        cut = mp.log(tail) - mp.log(k + 1)
        keep = tuple(c for c in range(k + 1) if logp[c] > cut)
        missing = max(mp.mpf(0), 1 - mp.fsum(mp.exp(logp[c]) for c in keep))
    return logp, keep, missing


def _partial(c, n, lo, hi, k, e, g, u0, cols, damp, q, pa):
    """sum over a in [lo, hi] (0 < tau < c eps) of P(a | c) E[(1 - e^{g - S})_+ | a, c]."""
    norm = (-mp.expm1(-e)) ** c

    def index(a):                                        # tau(a) = u_index
        return int(mp.nint((((2 * a + 2 * c - k) * e - g) / 2 - u0) / e))

    i0 = index(lo)
    size = i0 + hi - lo + 1                              # index(hi) + 1: tau steps by eps
    # P(T < u) and e^{g - s0} E[e^{2T}; T < u] before the inclusion-exclusion (e^{-2 u_r} is
    # what e^{g - s0 + 2 j eps} becomes at u_r = tau - j eps)
    probs = [cols[r][0][c] / norm for r in range(size)]
    moments = [cols[r][1][c] * damp[r] / norm for r in range(size)]
    coefs, cj = [], mp.mpf(1)
    for j in range(min(c, size - 1) + 1):
        coefs.append(cj)
        cj = cj * q * (c - j) / (j + 1)
    spread = mp.log(mp.fsum(abs(x) for x in coefs) + (c + 1) * max(probs + moments) + 1, 2)
    bits = 150 + int(mp.ceil(spread))
    one = 1 << bits

    def fixed(xs):                                       # x * one, exactly (one = 2^bits)
        return [int(mp.nint(mp.ldexp(x, bits))) for x in xs]

    # conv(coefs, probs) - conv(coefs, moments) = conv(coefs, probs - moments): one product
    diff = _convolve(fixed(coefs), [p - m for p, m in zip(fixed(probs), fixed(moments))])
    w = mp.exp(mp.loggamma(n + 1) - mp.loggamma(lo + 1) - mp.loggamma(n - lo + 1)
               + lo * mp.log(pa) + (n - lo) * mp.log1p(-pa))
    ratio = pa / (1 - pa)
    out = mp.mpf(0)
    for a in range(lo, hi + 1):
        out += w * mp.mpf(diff[i0 + a - lo]) / one ** 2   # index(a) = index(lo) + a - lo
        w = w * (n - a) / (a + 1) * ratio
    return out


def _gamma_columns(cs, u):
    """P(c, u) (regularized lower incomplete gamma) and int_0^u s^{c-1} e^s ds / (c-1)! for the
    consecutive counts cs: one positive series at the largest c, then the stable downward
    recurrences P(c, u) = P(c+1, u) + e^-u u^c / c!  and  T(c, u) = u^c e^u / c! - T(c+1, u)."""
    top = cs[-1]
    term, s, m = u ** top / mp.factorial(top), mp.mpf(0), 0
    while True:                                          # P = e^-u u^c sum_m u^m / (c + m)!
        s += term
        m += 1
        term *= u / (top + m)
        if term < s * mp.eps:
            break
    P = {top: mp.exp(-u) * s}
    total, term, m = mp.mpf(0), mp.mpf(1), 0
    while True:                                          # T = u^c / (c-1)! sum u^n / (n! (c + n))
        add = term / (top + m)
        total += add
        if m > u and add < total * mp.eps:
            break
        m += 1
        term *= u / m
    T = {top: u ** top / mp.factorial(top - 1) * total}
    power = u ** top / mp.factorial(top)
    eu, emu = mp.exp(u), mp.exp(-u)
    for c in range(top - 1, cs[0] - 1, -1):
        power = power * (c + 1) / u                      # u^c / c!
        P[c] = P[c + 1] + emu * power
        T[c] = eu * power - T[c + 1]
    return P, T


def _convolve(coef, vals):
    """out[i] = sum_j coef[j] vals[i - j] for i < len(vals) (integers of either sign), exactly,
    by Kronecker substitution: one big-integer product of the two packed sequences (signed
    slots), each slot wide enough to hold its sum; every slot of the product is offset by half
    its range so that it reads back as a non-negative number."""
    nbytes = (max(abs(x).bit_length() for x in coef) + max(abs(v).bit_length() for v in vals)
              + len(coef).bit_length() + 9) // 8

    def pack(xs):
        def packed(ys):
            return int.from_bytes(b"".join(y.to_bytes(nbytes, "little") for y in ys), "little")

        return packed([max(x, 0) for x in xs]) - packed([max(-x, 0) for x in xs])

    slots = len(coef) + len(vals) - 1                    # |each slot's sum| < half
    half = 1 << (8 * nbytes - 1)
    prod = pack(coef) * pack(vals) + int.from_bytes(
        half.to_bytes(nbytes, "little") * slots, "little")
    raw = prod.to_bytes(nbytes * slots, "little")
    return [int.from_bytes(raw[i * nbytes:(i + 1) * nbytes], "little") - half
            for i in range(len(vals))]


def _tails_by_count(n_lo, n_hi, a, ps):
    """For each p, {n: P(Bin(n, p) >= a)} for n_lo <= n <= n_hi: one incomplete beta at n_lo,
    then the positive recurrence P(Bin(n+1, p) >= a) = P(Bin(n, p) >= a) + p P(Bin(n, p) = a-1)."""
    out = []
    for p in ps:
        col = {}
        if a <= 0:
            tail = mp.mpf(1)
        elif a > n_lo:
            tail = mp.mpf(0)
        else:
            tail = mp.betainc(a, n_lo - a + 1, 0, p, regularized=True)
        pmf = mp.mpf(0)
        if 0 <= a - 1 <= n_lo:
            pmf = mp.exp(mp.loggamma(n_lo + 1) - mp.loggamma(a) - mp.loggamma(n_lo - a + 2)
                         + (a - 1) * mp.log(p) + (n_lo - a + 1) * mp.log1p(-p))
        for n in range(n_lo, n_hi + 1):
            col[n] = tail
            tail = tail + p * pmf
            if a - 1 == n + 1:                           # P(Bin(n+1, p) = a-1)
                pmf = p ** (n + 1)
            elif a - 1 <= n:
                pmf = pmf * (n + 1) * (1 - p) / (n + 2 - a)
        out.append(col)
    return out
