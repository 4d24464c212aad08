"""Wire format of split-model scoring, framed like ``vertical.messages`` (types from 72).

    type name          from -> to              payload                                  bytes
    72  ScoreKey       party j -> parties b    X25519 public key of j for this scoring   32
                                               (pinned: the signed key offer of         131
                                               vflpriv.runtime.keys, purpose scoring)
    73  MaskedMargin   party j -> label party  count u32, then count uint64: j's margin
                                               in fixed point plus its pairwise masks    4 + 8 n
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from ..vertical.messages import counted, decode_frame, encode, parse_counted  # noqa: F401


@dataclass
class ScoreKey:
    public: bytes
    TYPE = 72

    def payload(self):
        return bytes(self.public)

    @classmethod
    def parse(cls, b):
        from ..runtime.keys import OFFER_BYTES

        if len(b) not in (32, OFFER_BYTES):
            raise InputError(f"ScoreKey: {len(b)} bytes, an X25519 public key has 32 (a signed "
                             f"key offer {OFFER_BYTES})")
        return cls(bytes(b))


@dataclass
class MaskedMargin:
    words: np.ndarray
    TYPE = 73

    def payload(self):
        return counted(self.words, "<u8")

    @classmethod
    def parse(cls, b):
        return cls(parse_counted(b, "<u8", "MaskedMargin").astype(np.uint64))


MESSAGE_TYPES = {c.TYPE: c for c in (ScoreKey, MaskedMargin)}


def decode(frame: bytes):
    out = decode_frame(frame, MESSAGE_TYPES, "scoring message")
    from ..runtime import views

    if views.enabled():          # tests only: the receiver's view (vflpriv/runtime/views.py)
        views.received(out[0])
    return out
