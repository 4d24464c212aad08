"""Typed protocol messages and their binary wire format (struct-based, little-endian).

Every message that crosses a party boundary is encoded to bytes by :func:`encode`, metered, and
decoded by :func:`decode` on the other side, so byte counts are those of a real serialization.

Frame = 12-byte header + payload::

    offset size type    field
    0      1    uint8   format version (1)
    1      1    uint8   message type (table below)
    2      2    uint16  party id (sender of an uplink / addressee of a downlink message)
    4      4    uint32  round t
    8      4    uint32  payload length in bytes

Payloads (m = sketch dimension; m = n for the identity sketch):

    type name             dir   payload                                           bytes
    1    Setup            down  sketch seed u64, sampling seed u64, n u32, m u32,
                                sketch kind u8, party count u16                   27
    2    Round            down  q_hat: m float64 (the server's aggregate J A x)    8 m
    3    Index            up    signed local index int32: sign * (i + 1)          4
    4    FeatureRequest   down  release flag u8: 1 = "release the feature you just
                                selected", 0 = "your vertex was taken, cached" 1
    5    Feature          up    a_hat = J a_i + xi: m float64                     8 m
    6    IndexGap         up    signed local index int32, local FW gap float64    12

With an intercept b (held by party 0, docs/sensitivity.md 3.1) the round message carries b and
says what to release, and party 0's reply carries the (noisy) derivative g_b = df/db:

    7    RoundB           down  q_hat: m float64, b float64, flags u8 (bit 0: select
                                a vertex, bit 1: release g_b)                    8 m + 9
    8    IndexB           up    signed local index int32, g_b float64             12
    9    IndexGapB        up    signed local index int32, gap float64, g_b f64    20
    10   InterceptGrad    up    g_b float64 (party 0 not sampled this round)      8

So the uplink of one party in one round of DP-BCFW-AS is 4 bytes of payload (its signed index)
plus 8 m bytes when the selected feature was not released before (paper 004, Section IV-B2:
"1 bit for the sign and one unsigned integer for the index" + the m-vector), and one or two frame
headers.  float64 keeps the non-private runs exact; the format version would change with float32.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from ..errors import InputError

VERSION = 1
HEADER = struct.Struct("<BBHII")
HEADER_BYTES = HEADER.size  # 12
SKETCH_KINDS = ("identity", "gaussian", "countsketch")


@dataclass
class Setup:
    sketch_seed: int
    sampling_seed: int
    n: int
    m: int
    sketch: str
    parties: int
    TYPE = 1
    _S = struct.Struct("<QQIIBH")

    def payload(self):
        return self._S.pack(self.sketch_seed, self.sampling_seed, self.n, self.m,
                            SKETCH_KINDS.index(self.sketch), self.parties)

    @classmethod
    def parse(cls, b):
        s1, s2, n, m, kind, K = cls._S.unpack(b)
        return cls(s1, s2, n, m, SKETCH_KINDS[kind], K)


@dataclass
class Round:
    q_hat: np.ndarray
    TYPE = 2

    def payload(self):
        return np.ascontiguousarray(self.q_hat, dtype="<f8").tobytes()

    @classmethod
    def parse(cls, b):
        return cls(np.frombuffer(b, dtype="<f8").copy())


@dataclass
class Index:
    signed_index: int     # sign * (local index + 1); sign = +1/-1 is the vertex sign
    TYPE = 3
    _S = struct.Struct("<i")

    def payload(self):
        return self._S.pack(self.signed_index)

    @classmethod
    def parse(cls, b):
        return cls(cls._S.unpack(b)[0])


@dataclass
class FeatureRequest:
    release: int = 1
    TYPE = 4
    _S = struct.Struct("<B")

    def payload(self):
        return self._S.pack(self.release)

    @classmethod
    def parse(cls, b):
        return cls(cls._S.unpack(b)[0])


@dataclass
class Feature:
    a_hat: np.ndarray
    TYPE = 5

    def payload(self):
        return np.ascontiguousarray(self.a_hat, dtype="<f8").tobytes()

    @classmethod
    def parse(cls, b):
        return cls(np.frombuffer(b, dtype="<f8").copy())


@dataclass
class IndexGap:
    signed_index: int
    gap: float
    TYPE = 6
    _S = struct.Struct("<id")

    def payload(self):
        return self._S.pack(self.signed_index, self.gap)

    @classmethod
    def parse(cls, b):
        i, g = cls._S.unpack(b)
        return cls(i, g)


#: RoundB flags
SELECT, RELEASE_INTERCEPT = 1, 2


@dataclass
class RoundB:
    q_hat: np.ndarray
    b: float              # the intercept the scores add to the predictors
    flags: int            # SELECT | RELEASE_INTERCEPT
    TYPE = 7
    _S = struct.Struct("<dB")

    def payload(self):
        return np.ascontiguousarray(self.q_hat, dtype="<f8").tobytes() + \
            self._S.pack(self.b, self.flags)

    @classmethod
    def parse(cls, b):
        if len(b) < cls._S.size or (len(b) - cls._S.size) % 8:
            raise InputError(f"RoundB payload of {len(b)} bytes is not 8 m + {cls._S.size}")
        cut = len(b) - cls._S.size
        icpt, flags = cls._S.unpack(b[cut:])
        return cls(np.frombuffer(b[:cut], dtype="<f8").copy(), icpt, flags)

    @property
    def select(self):
        return bool(self.flags & SELECT)

    @property
    def release_intercept(self):
        return bool(self.flags & RELEASE_INTERCEPT)


@dataclass
class IndexB:
    signed_index: int
    g_b: float
    TYPE = 8
    _S = struct.Struct("<id")

    def payload(self):
        return self._S.pack(self.signed_index, self.g_b)

    @classmethod
    def parse(cls, b):
        return cls(*cls._S.unpack(b))


@dataclass
class IndexGapB:
    signed_index: int
    gap: float
    g_b: float
    TYPE = 9
    _S = struct.Struct("<idd")

    def payload(self):
        return self._S.pack(self.signed_index, self.gap, self.g_b)

    @classmethod
    def parse(cls, b):
        return cls(*cls._S.unpack(b))


@dataclass
class InterceptGrad:
    g_b: float
    TYPE = 10
    _S = struct.Struct("<d")

    def payload(self):
        return self._S.pack(self.g_b)

    @classmethod
    def parse(cls, b):
        return cls(cls._S.unpack(b)[0])


MESSAGE_TYPES = {c.TYPE: c for c in (Setup, Round, Index, FeatureRequest, Feature, IndexGap,
                                     RoundB, IndexB, IndexGapB, InterceptGrad)}


def encode(msg, party: int, round: int) -> bytes:
    """Frame ``msg`` (header + payload)."""
    body = msg.payload()
    return HEADER.pack(VERSION, msg.TYPE, party, round, len(body)) + body


def decode(frame: bytes):
    """``(message, party, round)`` from a frame; raises InputError on a malformed frame."""
    return decode_frame(frame, MESSAGE_TYPES, "message")


def decode_frame(frame: bytes, types: dict, what: str):
    """Check the header and parse the payload with ``types[message type]`` (shared by the
    protocols framed this way; the payload is a view, so large frames are not copied)."""
    if len(frame) < HEADER_BYTES:
        raise InputError(f"truncated frame: {len(frame)} bytes, the header alone is {HEADER_BYTES}")
    version, mtype, party, rnd, length = HEADER.unpack_from(frame)
    if version != VERSION:
        raise InputError(f"unsupported wire format version {version}")
    if mtype not in types:
        raise InputError(f"unknown {what} type {mtype}")
    if len(frame) != HEADER_BYTES + length:
        raise InputError(f"frame length {len(frame)} does not match header ({HEADER_BYTES} + {length})")
    return types[mtype].parse(memoryview(frame)[HEADER_BYTES:]), party, rnd


def counted(values, dtype) -> bytes:
    """A payload of ``count u32`` then ``count`` values of little-endian ``dtype``."""
    a = np.ascontiguousarray(values, dtype=dtype)
    return struct.pack("<I", a.size) + a.tobytes()


def parse_counted(b, dtype, what: str) -> np.ndarray:
    """:func:`counted`'s values (a view of ``b``); InputError when the count does not match."""
    (count,) = struct.unpack_from("<I", b)
    a = np.frombuffer(b, dtype=dtype, offset=4)
    if a.size != count:
        raise InputError(f"{what}: {a.size} values for a count of {count}")
    return a


def signed_index(local_index: int, sign: int) -> int:
    return int(sign) * (int(local_index) + 1)


def unsign_index(s: int) -> tuple[int, int]:
    """signed index -> (local index, sign)."""
    if s == 0:
        raise InputError("signed index 0 is invalid (indices are sign * (i + 1))")
    return abs(s) - 1, (1 if s > 0 else -1)
