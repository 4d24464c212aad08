"""End-to-end sealed frames between two parties of dp-bcfw-secure, and the bundles that carry them.

A link carries messages only between the server and each party, so the party-to-party
messages of the secure product (each masked block to its helper, masked vectors, result shares
from the helpers) are relayed by the server -- which, as the dealer of the Beaver randomness,
could unmask them.  They are therefore
**end-to-end encrypted** between the two parties with vetted primitives from ``cryptography``
(never our own): each party makes an X25519 key pair at setup (the private key stays in its
SuperNode's state), the server distributes the public keys (a semi-honest server relays them
faithfully: the protocol's threat model, docs/sensitivity.md section 4; a node config may pin
its peers' identity keys instead, :mod:`vflpriv.runtime.keys`, so that a server substituting a key is refused),
and each pair derives a
ChaCha20-Poly1305 key with HKDF-SHA256 bound to the run and the ordered pair; every ciphertext
carries a fresh 96-bit nonce and authenticates (sender, receiver, kind, round).  The server sees
only ciphertexts, their lengths and the frames meant for it, as the in-process accounting of
what it learns assumes.

Used by the least-squares, glm and ssp roles (``remote.py``, ``glm/roles.py``,
``ssp/roles.py``), the alignment phase and the deployed model's scoring.
"""
from __future__ import annotations

import os
import struct

from ....runtime.roles import Refused

_NONCE = 12
_TAG = 16
#: bytes a sealed frame adds to its plaintext (nonce and tag)
OVERHEAD = _NONCE + _TAG
_ENTRY = struct.Struct("<HI")


# -- bundles: [(peer, bytes), ...] in one frame -----------------------------------------------
def pack_bundle(entries) -> bytes:
    parts = []
    for p, b in entries:          # one copy of each blob (the join), not two
        parts += (_ENTRY.pack(int(p), len(b)), b)
    return b"".join(parts)


def unpack_bundle(data: bytes) -> list:
    out, off = [], 0
    while off < len(data):
        p, n = _ENTRY.unpack_from(data, off)
        off += _ENTRY.size
        out.append((p, data[off:off + n]))
        off += n
    return out


# -- end-to-end channel between two parties ---------------------------------------------------
class Channel:
    """Authenticated encryption between party ``me`` and each peer (see module docstring)."""

    def __init__(self, me, private_key: bytes, peers: dict, run_id: str):
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric.x25519 import (X25519PrivateKey,
                                                                      X25519PublicKey)
        from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
        from cryptography.hazmat.primitives.kdf.hkdf import HKDF

        self.me = int(me)
        sk = X25519PrivateKey.from_private_bytes(private_key)
        self._aead = {}
        for k, pub in peers.items():
            if int(k) == self.me:
                continue
            shared = sk.exchange(X25519PublicKey.from_public_bytes(pub))
            lo, hi = sorted((self.me, int(k)))
            key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None,
                       info=f"vflpriv dp-bcfw-secure {run_id} {lo}-{hi}".encode()).derive(shared)
            self._aead[int(k)] = ChaCha20Poly1305(key)

    @staticmethod
    def _aad(src, dst, kind, t):
        return f"{src}>{dst}|{kind}|{t}".encode()

    def seal(self, dst, kind, t, frame: bytes) -> bytes:
        nonce = os.urandom(_NONCE)
        return nonce + self._aead[int(dst)].encrypt(nonce, frame, self._aad(self.me, dst, kind, t))

    def open(self, src, kind, t, blob: bytes) -> bytes:
        from cryptography.exceptions import InvalidTag

        try:
            return self._aead[int(src)].decrypt(blob[:_NONCE], blob[_NONCE:],
                                                self._aad(src, self.me, kind, t))
        except (InvalidTag, KeyError):
            raise Refused(f"party {self.me}: a message said to be from party {src} ({kind}, "
                          f"round {t}) does not authenticate") from None


def new_key_pair():
    from cryptography.hazmat.primitives import serialization as ser
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    sk = X25519PrivateKey.generate()
    return (sk.private_bytes(ser.Encoding.Raw, ser.PrivateFormat.Raw, ser.NoEncryption()),
            sk.public_key().public_bytes(ser.Encoding.Raw, ser.PublicFormat.Raw))
