"""Wire format of the secure protocol (dp-bcfw-secure), framed like ``vertical.messages``.

Frame = the same 12-byte header (version u8, type u8, party u16, round u32, payload length u32)
+ payload; ``party`` is the sender of a party's message and the addressee of a server's message.
Type codes start at 32 so that a frame of one protocol is never parsed as the other.

    type name           from -> to        payload                                         bytes
    32   SecureSetup    server -> party   frac bits u8, feature cap u16, parties u16,
                                          n u32, AES key of the party's matrix mask 16 B   25
    33   Selections     server -> party   the previous round's signed indices: K int32     4 K
    34   Index          party -> server   signed local index int32                          4
    35   MaskedBlock    party k -> h(k)   row offset u32, rows u32, cols u32, then
                                          rows*cols uint64 of E_k = A_k - U_k (mod 2^64)    12 + 8 r c
                                          (ssp path: party k -> server, Z_k = B_k + V_k)
    36   TripleToHolder server -> l       recipient k u16, local index u32, AES key of the
                                          vector mask v 16 B, then p_k uint64 (the helper's
                                          share W_k - w_k of W_k = U_k^T v), for the block
                                          k whose helper h(k) is l itself                  22 + 8 p_k
    37   TripleToPeer   server -> k       holder l u16, AES key of k's share of U_k^T v 16 B 18
    38   MaskedVector   party l -> k      holder l u16, local index u32, n uint64: a_j + v   6 + 8 n
    39   ResultShare    h(k) -> k         holder l u16, local index u32, p_k uint64:
                                          h(k)'s share + fixed-point Gaussian noise         6 + 8 p_k
    40   NewFeatures    server -> party   the holders of this round's new features: u16 each 2 K'
                                          (each party charges the round's Gaussian to its own
                                          ledger before any of its noise is drawn); a
                                          holder LABEL_RELEASE + L announces the release of
                                          A_k^T y by the label party L; the holder
                                          INTERCEPT_RELEASE announces the intercept's sums
    47   SelectionsB    server -> party   the intercept b f64, then K int32 as Selections     8 + 4 K
    48   NoisySums      party -> server   the label sum (NaN at a party that releases none)
                                          and the party's p_k column sums, + Gaussian noise
                                          (float64 each; released once at setup)            8 + 8 p_k

    49   Coefficients   party -> server   the party's iterate x_k after its projected-gradient
                                          step (``step="pgd"``, logistic path), f64 each      8 p_k
    50   TripleToHelper server -> h(k)    holder l u16, recipient k u16, local index u32,
                                          AES key of v 16 B, then p_k uint64 (W_k - w_k):
                                          TripleToHolder for a helper h(k) != l             24 + 8 p_k
    52   VectorKey      server -> l       recipient k u16, local index u32, AES key of the
                                          vector mask v_k 16 B, for a block k whose helper
                                          h(k) is another party (l masks its column for k
                                          with v_k: one mask per peer, never shared)        22
    53   GramKey        party -> party    block (k u16, l u16), AES key 16 B: the sender's block
                                          mask key (k = l = 0xFFFF), or the pair key of its
                                          and the receiver's parts of cross-block (k, l)      20
    54   GramShare      party -> server   block (k u16, l u16), rows u32, cols u32, then
                                          q_k q_l uint64: a contributor's part of B_k^T B_l 12 + 8 q_k q_l

h(k) = (k + 1) mod K is block k's helper (``beaver.block_helper``): the one party that receives
E_k and computes h(k)'s share, with k's noise, of every product with k's block (least squares
and the ssp path).  Each peer k of a product gets its own masked column a_j + v_k: the key of
v_k goes to the holder and to h(k) only, so a helper that is also a peer of the product holds
the key of another peer's mask, never of its own (``mpc/beaver.py``; docs/sensitivity.md 4.5).

The intercept (``fit_intercept``): b = (sum y - sum_k s_k^T x_k) / n from the noisy sums of
type 48 (public once released), clipped to [-B_b, B_b]; sent with the selections each round.

The label release (``label_party`` set) is a secure product like a cross-product, with the local
index ``LABEL_INDEX`` (0xFFFFFFFF) standing for the label column y of party L.

Every share, mask and key that crosses a boundary is in these frames and so in the meter.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from ....errors import InputError
from ...messages import HEADER_BYTES, decode_frame, encode  # noqa: F401  (same framing)


#: local index that stands for the label column y in TripleToHolder / MaskedVector / ResultShare
LABEL_INDEX = 0xFFFFFFFF
#: NewFeatures holder code for "the label party L releases A_k^T y": LABEL_RELEASE + L
LABEL_RELEASE = 0x8000
#: NewFeatures holder code for "every party releases its noisy column sums, the label party also
#: its noisy label sum" (the intercept of least squares, once at setup)
INTERCEPT_RELEASE = 0xFFFF
#: NewFeatures holder code for "every party releases its part of the sufficient statistics"
#: (the logistic loss's ssp path, once at setup: ``ssp/release.py``)
GRAM_RELEASE = 0xFFFE


def _u64(b):
    return np.frombuffer(b, dtype="<u8")


def _u64_bytes(a):
    return np.ascontiguousarray(a, dtype="<u8").tobytes()


@dataclass
class SecureSetup:
    frac_bits: int
    feature_cap: int
    parties: int
    n: int
    mask_key: bytes
    TYPE = 32
    _S = struct.Struct("<BHHI16s")

    def payload(self):
        return self._S.pack(self.frac_bits, self.feature_cap, self.parties, self.n, self.mask_key)

    @classmethod
    def parse(cls, b):
        return cls(*cls._S.unpack(b))


@dataclass
class Selections:
    signed: list
    TYPE = 33

    def payload(self):
        return np.asarray(self.signed, dtype="<i4").tobytes()

    @classmethod
    def parse(cls, b):
        return cls([int(v) for v in np.frombuffer(b, dtype="<i4")])


@dataclass
class SelectionsB:
    """Selections with the round's intercept b (a public function of the released sums)."""
    signed: list
    intercept: float
    TYPE = 47

    def payload(self):
        return struct.pack("<d", float(self.intercept)) + \
            np.asarray(self.signed, dtype="<i4").tobytes()

    @classmethod
    def parse(cls, b):
        if len(b) < 8 or (len(b) - 8) % 4:
            raise InputError(f"a SelectionsB payload of {len(b)} bytes is malformed")
        return cls([int(v) for v in np.frombuffer(b, dtype="<i4", offset=8)],
                   struct.unpack_from("<d", b)[0])


@dataclass
class NoisySums:
    """A party's noisy column sums (and, at the label party, its noisy label sum; NaN elsewhere),
    released once for the intercept."""
    label_sum: float
    sums: object
    TYPE = 48

    def payload(self):
        return np.concatenate([[float(self.label_sum)],
                               np.asarray(self.sums, dtype=np.float64)]).astype("<f8").tobytes()

    @classmethod
    def parse(cls, b):
        if len(b) < 8 or len(b) % 8:
            raise InputError(f"a NoisySums payload of {len(b)} bytes is malformed")
        a = np.frombuffer(b, dtype="<f8")
        return cls(float(a[0]), a[1:].copy())


@dataclass
class Coefficients:
    """A party's own iterate x_k after its projected-gradient step (logistic path, step pgd):
    a post-processing of its noisy scores, like the Frank-Wolfe vertex it replaces."""
    x: object
    TYPE = 49

    def payload(self):
        return np.asarray(self.x, dtype="<f8").tobytes()

    @classmethod
    def parse(cls, b):
        if len(b) % 8:
            raise InputError(f"a Coefficients payload of {len(b)} bytes is malformed")
        return cls(np.frombuffer(b, dtype="<f8").copy())


@dataclass
class SecureIndex:
    signed_index: int
    TYPE = 34
    _S = struct.Struct("<i")

    def payload(self):
        return self._S.pack(self.signed_index)

    @classmethod
    def parse(cls, b):
        return cls(cls._S.unpack(b)[0])


@dataclass
class MaskedBlock:
    row: int
    block: np.ndarray          # rows x cols uint64
    TYPE = 35
    _S = struct.Struct("<III")

    def payload(self):
        r, c = self.block.shape
        return self._S.pack(self.row, r, c) + _u64_bytes(self.block)

    @classmethod
    def parse(cls, b):
        row, r, c = cls._S.unpack_from(b)
        if len(b) != 12 + 8 * r * c:
            raise InputError(f"MaskedBlock payload of {len(b)} bytes does not hold {r}x{c} words")
        return cls(row, _u64(memoryview(b)[12:]).reshape(r, c))


@dataclass
class TripleToHolder:
    peer: int
    index: int
    v_key: bytes
    share: np.ndarray
    TYPE = 36
    _S = struct.Struct("<HI16s")

    def payload(self):
        return self._S.pack(self.peer, self.index, self.v_key) + _u64_bytes(self.share)

    @classmethod
    def parse(cls, b):
        k, i, key = cls._S.unpack_from(b)
        return cls(k, i, key, _u64(memoryview(b)[cls._S.size:]).copy())


@dataclass
class TripleToHelper:
    """server -> h(k), the helper of k's block when it is not the holder l of the column: the
    key of v and W_k - w_k (``beaver.Dealer.routed_triples``); ``holder`` names l, so that h(k)
    serves only a release its own ledger charged, and labels its ResultShare."""
    holder: int
    peer: int
    index: int
    v_key: bytes
    share: np.ndarray
    TYPE = 50
    _S = struct.Struct("<HHI16s")

    def payload(self):
        return self._S.pack(self.holder, self.peer, self.index, self.v_key) + \
            _u64_bytes(self.share)

    @classmethod
    def parse(cls, b):
        if len(b) < cls._S.size or (len(b) - cls._S.size) % 8:
            raise InputError(f"a TripleToHelper payload of {len(b)} bytes is malformed")
        l, k, i, key = cls._S.unpack_from(b)
        return cls(l, k, i, key, _u64(memoryview(b)[cls._S.size:]).copy())


@dataclass
class VectorKey:
    """server -> the holder l: the key of the vector mask v_k of peer k's masked column, for a
    block k whose helper is another party (that helper gets the same key in its
    ``TripleToHelper``; the block l helps comes with its ``TripleToHolder``)."""
    peer: int
    index: int
    v_key: bytes
    TYPE = 52
    _S = struct.Struct("<HI16s")

    def payload(self):
        return self._S.pack(self.peer, self.index, self.v_key)

    @classmethod
    def parse(cls, b):
        if len(b) != cls._S.size:
            raise InputError(f"a VectorKey payload of {len(b)} bytes is malformed")
        return cls(*cls._S.unpack(b))


@dataclass
class TripleToPeer:
    holder: int
    w_key: bytes
    TYPE = 37
    _S = struct.Struct("<H16s")

    def payload(self):
        return self._S.pack(self.holder, self.w_key)

    @classmethod
    def parse(cls, b):
        return cls(*cls._S.unpack(b))


@dataclass
class MaskedVector:
    holder: int
    index: int
    z: np.ndarray
    TYPE = 38
    _S = struct.Struct("<HI")

    def payload(self):
        return self._S.pack(self.holder, self.index) + _u64_bytes(self.z)

    @classmethod
    def parse(cls, b):
        l, i = cls._S.unpack_from(b)
        return cls(l, i, _u64(memoryview(b)[cls._S.size:]))


@dataclass
class ResultShare:
    holder: int
    index: int
    share: np.ndarray
    TYPE = 39
    _S = struct.Struct("<HI")

    def payload(self):
        return self._S.pack(self.holder, self.index) + _u64_bytes(self.share)

    @classmethod
    def parse(cls, b):
        l, i = cls._S.unpack_from(b)
        return cls(l, i, _u64(memoryview(b)[cls._S.size:]).copy())


@dataclass
class NewFeatures:
    holders: list
    TYPE = 40

    def payload(self):
        return np.asarray(self.holders, dtype="<u2").tobytes()

    @classmethod
    def parse(cls, b):
        return cls([int(v) for v in np.frombuffer(b, dtype="<u2")])


# -- the GLM path (logistic loss, ``glm/party.py``) --------------------------------------------------
@dataclass
class MarginShare:
    """party k -> label party L: round(A_k x_k 2^f_m) - r_k (mod 2^64), r_k from a key that k
    sends to the helper party H (``MarginKey``): L's part of a fresh sharing of k's margins."""
    vector: np.ndarray
    TYPE = 41

    def payload(self):
        return _u64_bytes(self.vector)

    @classmethod
    def parse(cls, b):
        return cls(_u64(b).copy())


@dataclass
class MarginKey:
    """party k -> helper H: the AES key of r_k (16 B)."""
    key: bytes
    TYPE = 42

    def payload(self):
        return bytes(self.key)

    @classmethod
    def parse(cls, b):
        if len(b) != 16:
            raise InputError(f"MarginKey payload must be 16 bytes, got {len(b)}")
        return cls(bytes(b))


@dataclass
class MaskedFactors:
    """L -> H or H -> L: the 2 J masked unit factors (cos, sin of j w s) of one party, J x n
    words each, masked by the dealer's vectors."""
    terms: int
    words: np.ndarray          # (2 J, n) uint64
    TYPE = 43
    _S = struct.Struct("<HI")

    def payload(self):
        r, n = self.words.shape
        return self._S.pack(self.terms, n) + _u64_bytes(self.words)

    @classmethod
    def parse(cls, b):
        J, n = cls._S.unpack_from(b)
        if len(b) != cls._S.size + 16 * J * n:
            raise InputError(f"MaskedFactors payload of {len(b)} bytes does not hold 2x{J}x{n} "
                             "words")
        return cls(J, _u64(memoryview(b)[cls._S.size:]).reshape(2 * J, n))


@dataclass
class FactorTriple:
    """dealer -> L or H: the AES key of the party's masks for this round; to H also the
    correction sum_j b_j (r_j . v_j + r'_j . v'_j) - w (n words; empty for L, whose w is a
    stream of its key)."""
    key: bytes
    correction: np.ndarray
    TYPE = 44

    def payload(self):
        return bytes(self.key) + _u64_bytes(self.correction)

    @classmethod
    def parse(cls, b):
        return cls(bytes(b[:16]), _u64(memoryview(b)[16:]).copy())


# TYPE 45 was DerivativeShare (L handed its share of d to every party outside {L, H}); retired
# (issue 32: that party and H together rebuilt d, hence the labels); the number is not reused.


@dataclass
class InterceptShare:
    """H -> L: the sum of H's derivative shares over the rows plus H's Gaussian noise (one word,
    at the derivative's scale), so that L learns sum_r d_r + N, the intercept's noisy derivative
    times n, and nothing else (docs/sensitivity.md 5.5)."""
    word: int
    TYPE = 46
    _S = struct.Struct("<Q")

    def payload(self):
        return self._S.pack(int(self.word))

    @classmethod
    def parse(cls, b):
        return cls(cls._S.unpack(b)[0])


@dataclass
class GramPart:
    """A party's noisy part of the sufficient statistics M = sum_r z_r z_r^T (ssp path): its own
    block's upper triangle, its column sums, its cross-blocks with the higher parties, A_k^T y and
    (label party) the label sum, as float64 words laid out by ``ssp.pack_part``."""
    words: object
    TYPE = 51

    def payload(self):
        return np.asarray(self.words, dtype="<f8").tobytes()

    @classmethod
    def parse(cls, b):
        if len(b) % 8:
            raise InputError(f"a GramPart payload of {len(b)} bytes is malformed")
        return cls(np.frombuffer(b, dtype="<f8").copy())


@dataclass
class GramKey:
    """A key one party makes and sends to another, end to end (ssp path, ``ssp/gram.py``):
    with (k, l) = (BLOCK_MASK, BLOCK_MASK) the key of the sender's block mask V = PRG(key);
    else the pair key that blinds the sender's and the receiver's parts of cross-block (k, l)."""
    k: int
    l: int
    key: bytes
    TYPE = 53
    _S = struct.Struct("<HH16s")

    def payload(self):
        return self._S.pack(self.k, self.l, self.key)

    @classmethod
    def parse(cls, b):
        if len(b) != cls._S.size:
            raise InputError(f"a GramKey payload of {len(b)} bytes is malformed")
        return cls(*cls._S.unpack(b))


@dataclass
class GramShare:
    """One contributor's part of cross-block (k, l) to the server (ssp path, ``ssp/gram.py``):
    q_k x q_l uint64 words, blinded by the pair keys of the block's contributors."""
    k: int
    l: int
    share: np.ndarray          # rows x cols uint64
    TYPE = 54
    _S = struct.Struct("<HHII")

    def payload(self):
        r, c = self.share.shape
        return self._S.pack(self.k, self.l, r, c) + _u64_bytes(self.share)

    @classmethod
    def parse(cls, b):
        k, l, r, c = cls._S.unpack_from(b)
        if len(b) != cls._S.size + 8 * r * c:
            raise InputError(f"GramShare payload of {len(b)} bytes does not hold {r}x{c} words")
        return cls(k, l, _u64(memoryview(b)[cls._S.size:]).reshape(r, c).copy())


MESSAGE_TYPES = {c.TYPE: c for c in (SecureSetup, Selections, SecureIndex, MaskedBlock,
                                     TripleToHolder, TripleToPeer, MaskedVector, ResultShare,
                                     TripleToHelper, VectorKey,
                                     NewFeatures, MarginShare, MarginKey, MaskedFactors,
                                     FactorTriple, InterceptShare, SelectionsB,
                                     NoisySums, Coefficients, GramPart, GramKey,
                                     GramShare)}


def decode(frame: bytes):
    """``(message, party, round)``; InputError on a malformed frame.  With the view log on
    (``views.py``, tests only), the decoded message is logged as received by the current
    receiver."""
    out = decode_frame(frame, MESSAGE_TYPES, "secure-protocol message")
    from ....runtime import views

    if views.enabled():
        views.received(out[0])
    return out
