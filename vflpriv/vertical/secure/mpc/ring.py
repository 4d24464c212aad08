"""Fixed-point arithmetic over the ring Z_{2^64}, additive secret sharing, and the PRG.

Values are encoded as ``trunc(x * 2^f)`` (rounding toward zero, so |encoded| <= |x| 2^f and a
clipped value stays within its bound) and held as ``uint64``; numpy's unsigned integer arithmetic
wraps modulo 2^64, which is exactly ring arithmetic (+, -, * and matrix products over Z_{2^64}).
A product of two encoded values carries the scale 2^{2f}; it is decoded by reading the ring element
as a signed 64-bit integer (two's complement) and dividing by 2^{2f}, which is exact as long as
the true value times 2^{2f} lies in [-2^63, 2^63) (``frac_bits`` chooses f so that it does).

Additive sharing: x = s_0 + s_1 (mod 2^64) with s_0 uniform; either share alone is uniform and
independent of x.  Nothing else is needed by the protocol (the Beaver products are in
``mpc/beaver.py``).

Randomness: masks and shares come from AES-128 in counter mode (the keystream of a stream cipher
used as a PRG, NIST SP 800-38A CTR; via the ``cryptography`` package, OpenSSL underneath), keyed
by 16 bytes of fresh OS entropy (``secrets``); the protocol never seeds them (issue 32: a seed
reused on neighbouring data would be a two-time pad).  :class:`KeySource` can still derive keys
from a seed by HKDF-SHA256 (RFC 5869) for benchmarks of the PRG alone.  A key is used for one
stream only.
"""
from __future__ import annotations

import hashlib
import math
import secrets

import numpy as np

from ....errors import InputError

RING_BITS = 64
KEY_BYTES = 16


#: noise beyond this many standard deviations is treated as impossible when sizing the ring
#: (probability < 1e-300 per entry); a larger value would only wrap, a post-processing
NOISE_RANGE = 40.0


def noisy_range(bound, sigma) -> float:
    """What a released value of magnitude at most ``bound`` can reach once noised with
    standard deviation ``sigma``: the range every path sizes its ring for (plus 1 for the
    rounding)."""
    return bound + NOISE_RANGE * sigma + 1.0


def frac_bits(magnitude: float) -> int:
    """Fractional bits f for products bounded by ``magnitude`` (in real units): the largest f
    <= 24 with magnitude * 2^{2f} < 2^62 (one bit of headroom below the sign bit)."""
    if not (magnitude > 0 and math.isfinite(magnitude)):
        raise InputError(f"fixed-point range must be a positive finite number, got {magnitude!r}")
    f = int(math.floor((62 - math.log2(magnitude)) / 2))
    f = min(f, 24)
    if f < 8:
        raise InputError(f"the products can reach {magnitude:.3g}, too large for 64-bit fixed point "
                         "with 8 fractional bits; lower feature_bound or n")
    return f


def encode(x, f: int) -> np.ndarray:
    """trunc(x 2^f) as uint64 (two's complement)."""
    x = np.asarray(x, dtype=np.float64)
    return np.trunc(x * float(2 ** f)).astype(np.int64).view(np.uint64)


def encode_round(x, scale_bits: int) -> np.ndarray:
    """round(x 2^scale_bits) as uint64 (used for noise, which is added at the product's scale)."""
    x = np.asarray(x, dtype=np.float64)
    return np.rint(x * float(2 ** scale_bits)).astype(np.int64).view(np.uint64)


def decode(r, scale_bits: int) -> np.ndarray:
    """Ring elements -> reals: signed reading divided by 2^scale_bits."""
    return np.asarray(r, dtype=np.uint64).view(np.int64).astype(np.float64) / float(2 ** scale_bits)


def share(x, prg) -> tuple:
    """Additive shares (s0, s1) of the uint64 array ``x``: s0 from ``prg``, s1 = x - s0."""
    x = np.asarray(x, dtype=np.uint64)
    s0 = prg.uint64(x.size).reshape(x.shape)
    return s0, x - s0


def reconstruct(*shares) -> np.ndarray:
    out = np.zeros_like(np.asarray(shares[0], dtype=np.uint64))
    for s in shares:
        out += np.asarray(s, dtype=np.uint64)
    return out


#: zero input for the keystream, at most this many bytes per AES call
_ZERO_CHUNK = 1 << 25
_ZERO_BUF = [b""]


def _zeros(nbytes):
    """A read-only view of ``nbytes`` zero bytes (one cached buffer, grown on demand)."""
    if len(_ZERO_BUF[0]) < nbytes:
        _ZERO_BUF[0] = bytes(nbytes)
    return memoryview(_ZERO_BUF[0])[:nbytes]


class Prg:
    """AES-128-CTR keystream read as little-endian uint64 words (a fresh key per stream).

    ``word``: start at that word of the stream instead of its beginning.  CTR mode encrypts the
    counter blocks 0, 1, 2, ... (the 16-byte initial block is the counter, incremented as one
    big-endian integer), so word w lies in block 8w // 16: the cipher starts at that counter and
    drops the 8 (w mod 2) bytes before it (SP 800-38A, section 6.5: any block of the keystream
    can be computed on its own).  A party sending its masked block in pieces over a link starts
    each piece where it lies in the stream."""

    def __init__(self, key: bytes, word: int = 0):
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

        if not isinstance(key, (bytes, bytearray)) or len(key) != KEY_BYTES:
            raise InputError(f"PRG key must be {KEY_BYTES} bytes")
        word = int(word)
        if word < 0:
            raise InputError(f"PRG start word must be >= 0, got {word}")
        self.key = bytes(key)
        block, skip = divmod(8 * word, 16)
        self._enc = Cipher(algorithms.AES(self.key),
                           modes.CTR(block.to_bytes(16, "big"))).encryptor()
        if skip:
            self._enc.update(bytes(skip))

    def uint64(self, count: int) -> np.ndarray:
        """The next ``count`` words of the stream."""
        count = int(count)
        if count == 0:
            return np.zeros(0, dtype=np.uint64)
        nbytes = 8 * count
        # the keystream is AES-CTR of zero bytes, written straight into the result (update_into:
        # no zero-filled input and no copy per call; the same words as update(bytes(nbytes)))
        out = np.empty(nbytes + 16, dtype=np.uint8)
        zeros = _zeros(min(nbytes, _ZERO_CHUNK))
        pos = 0
        while pos < nbytes:
            step = min(_ZERO_CHUNK, nbytes - pos)
            self._enc.update_into(zeros[:step], out[pos:pos + step + 15])
            pos += step
        return out[:nbytes].view("<u8").astype(np.uint64, copy=False)


class KeySource:
    """Where 16-byte PRG keys come from: OS entropy (``seed=None``), or HKDF-SHA256 of a seed
    with a distinct label per key (reproducible, not for deployment)."""

    def __init__(self, seed=None):
        self.seed = seed
        self._master = None if seed is None else hashlib.sha256(
            b"vflpriv-secure-v1:" + str(int(seed)).encode()).digest()
        self._counter = 0

    def key(self, label: str) -> bytes:
        if self._master is None:
            return secrets.token_bytes(KEY_BYTES)
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.kdf.hkdf import HKDF

        self._counter += 1
        info = f"{label}#{self._counter}".encode()
        return HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=None, info=info).derive(
            self._master)
