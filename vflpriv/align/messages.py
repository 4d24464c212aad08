"""Wire format of private set intersection, framed like ``vertical.messages``.

Frame = the same 12-byte header (version u8, type u8, party u16, round u32, payload length u32)
+ payload; ``party`` is the sender.  Type codes start at 64 so that a frame of one protocol is
never parsed as another's.

    type name       from -> to              payload                                    bytes
    64  PsiSetup    leader -> party j       run nonce 16 B, tag bytes u8, parties u16,
                                            leader u16                                 21
    65  PsiPoints   party -> party          count u32, then count X25519 u-coordinates
                                            (32 B each): the sender's IDs, hashed and
                                            raised to its key                          4 + 32 c
    66  PsiTags     party j -> leader       count u32, tag length u8, then count tags:
                                            the leader's points raised to j's key,
                                            hashed and truncated, in the leader's order 5 + t c
    67  PsiRows     leader -> party j       count u32, then count u32: for each common
                                            row in the leader's order, its position in
                                            j's shuffled points                         4 + 4 c
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from ..vertical.messages import counted, decode_frame, encode, parse_counted  # noqa: F401

POINT_BYTES = 32


@dataclass
class PsiSetup:
    nonce: bytes
    tag_bytes: int
    parties: int
    leader: int
    TYPE = 64
    _S = struct.Struct("<16sBHH")

    def payload(self):
        return self._S.pack(self.nonce, self.tag_bytes, self.parties, self.leader)

    @classmethod
    def parse(cls, b):
        return cls(*cls._S.unpack(bytes(b)))


@dataclass
class PsiPoints:
    points: bytes
    TYPE = 65

    def payload(self):
        return struct.pack("<I", len(self.points) // POINT_BYTES) + self.points

    @classmethod
    def parse(cls, b):
        (count,) = struct.unpack_from("<I", b)
        body = bytes(b[4:])
        if len(body) != POINT_BYTES * count:
            raise InputError(f"PsiPoints: {len(body)} bytes for {count} points")
        return cls(body)


@dataclass
class PsiTags:
    tags: bytes
    tag_bytes: int
    TYPE = 66

    def payload(self):
        return struct.pack("<IB", len(self.tags) // self.tag_bytes, self.tag_bytes) + self.tags

    @classmethod
    def parse(cls, b):
        count, t = struct.unpack_from("<IB", b)
        body = bytes(b[5:])
        if t == 0 or len(body) != t * count:
            raise InputError(f"PsiTags: {len(body)} bytes for {count} tags of {t} bytes")
        return cls(body, t)


@dataclass
class PsiRows:
    rows: np.ndarray
    TYPE = 67

    def payload(self):
        return counted(self.rows, "<u4")

    @classmethod
    def parse(cls, b):
        return cls(parse_counted(b, "<u4", "PsiRows").astype(np.int64))


MESSAGE_TYPES = {c.TYPE: c for c in (PsiSetup, PsiPoints, PsiTags, PsiRows)}


def decode(frame: bytes):
    """``(message, party, round)`` of a PSI frame."""
    return decode_frame(frame, MESSAGE_TYPES, "PSI message")
