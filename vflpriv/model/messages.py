"""Wire format of split-model scoring, framed like ``vertical.messages`` (types from 72).

    type name          from -> to              payload                                  bytes
    72  ScoreKey       party j -> parties b    X25519 public key of j for this scoring   32
    73  MaskedMargin   party j -> label party  count u32, then count uint64: j's margin
                                               in fixed point plus its pairwise masks    4 + 8 n
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from ..vertical.messages import decode_frame, encode  # noqa: F401  (same framing)


@dataclass
class ScoreKey:
    public: bytes
    TYPE = 72

    def payload(self):
        return bytes(self.public)

    @classmethod
    def parse(cls, b):
        if len(b) != 32:
            raise InputError(f"ScoreKey: {len(b)} bytes, an X25519 public key has 32")
        return cls(bytes(b))


@dataclass
class MaskedMargin:
    words: np.ndarray
    TYPE = 73

    def payload(self):
        w = np.ascontiguousarray(self.words, dtype="<u8")
        return struct.pack("<I", w.size) + w.tobytes()

    @classmethod
    def parse(cls, b):
        (count,) = struct.unpack_from("<I", b)
        w = np.frombuffer(b, dtype="<u8", offset=4)
        if w.size != count:
            raise InputError(f"MaskedMargin: {w.size} words for a count of {count}")
        return cls(w.astype(np.uint64))


MESSAGE_TYPES = {c.TYPE: c for c in (ScoreKey, MaskedMargin)}


def decode(frame: bytes):
    return decode_frame(frame, MESSAGE_TYPES, "scoring message")
