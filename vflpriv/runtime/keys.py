"""Pinned peer keys for dp-bcfw-secure on Flower: the key exchange need not trust the server.

Without pinning, each party makes a fresh X25519 key pair per run and the server hands the
public keys around (:mod:`.secure`): sound against a semi-honest server only, since a server
that swapped keys could read the relayed party-to-party messages (a man in the middle).

With pinning, each party also holds a long-term **Ed25519 identity key** (node config
``identity-key = "party0.key"``, a PKCS#8 PEM file made by ``vflpriv flower identity``) and
its node config lists the peers' identity fingerprints (``peer-fingerprints = "1=<hex>,2=<hex>"``,
the SHA-256 of each peer's raw 32-byte Ed25519 public key, exchanged out of band, e.g. read
out over the phone).  A party's key offer is then

    b"VK1" | X25519 ephemeral public key (32) | Ed25519 identity public key (32) |
    Ed25519 signature (64) over  b"vflpriv dp-bcfw-secure key offer|<run id>|<party>|" + ephemeral

and a party accepts a peer's offer only if the identity key's fingerprint is the pinned one and
the signature verifies: the server can relay the offers, not change them (nor replay one from
another run or another party: the run id and the party index are signed).  Anything else is
refused before the run's first release.  The channel keys stay ephemeral (forward secrecy); the
identity key only signs.  Primitives: ``cryptography``'s Ed25519 and X25519, SHA-256 (hashlib);
nothing home-made.  (Signal's signed pre-keys and TLS 1.3's CertificateVerify sign the
ephemeral key share the same way.)
"""
from __future__ import annotations

import hashlib
import os

MAGIC = b"VK1"
_EPH, _ID, _SIG = 32, 32, 64
OFFER_BYTES = len(MAGIC) + _EPH + _ID + _SIG


class KeyRefused(Exception):
    """A peer's key offer does not match what this party pinned."""


def fingerprint(identity_public: bytes) -> str:
    """SHA-256 (hex) of a raw 32-byte Ed25519 public key."""
    return hashlib.sha256(bytes(identity_public)).hexdigest()


def _context(run_id, party, ephemeral) -> bytes:
    return f"vflpriv dp-bcfw-secure key offer|{run_id}|{int(party)}|".encode() + bytes(ephemeral)


def load_identity(path):
    """The Ed25519 private key in ``path`` (PKCS#8 PEM, unencrypted)."""
    from cryptography.hazmat.primitives import serialization as ser
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from ..data.files import regular_file

    try:
        regular_file(path, "identity key")
        with open(path, "rb") as fh:
            key = ser.load_pem_private_key(fh.read(), password=None)
    except (OSError, ValueError, TypeError) as exc:
        raise KeyRefused(f"identity key {str(path)!r} cannot be read: {exc}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyRefused(f"identity key {str(path)!r} is not an Ed25519 key")
    return key


def identity_public(key) -> bytes:
    from cryptography.hazmat.primitives import serialization as ser

    return key.public_key().public_bytes(ser.Encoding.Raw, ser.PublicFormat.Raw)


def new_identity(path) -> str:
    """Write a new Ed25519 identity key to ``path`` (mode 0600, never overwriting); returns its
    fingerprint."""
    from cryptography.hazmat.primitives import serialization as ser
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(ser.Encoding.PEM, ser.PrivateFormat.PKCS8, ser.NoEncryption())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(pem)
    return fingerprint(identity_public(key))


def parse_pins(text) -> dict:
    """``"1=<hex>,2=<hex>"`` -> ``{1: hex, 2: hex}`` (64 hex digits each)."""
    pins = {}
    for item in filter(None, (s.strip() for s in str(text or "").split(","))):
        party, sep, fp = item.partition("=")
        fp = fp.strip().lower()
        if not sep or not party.strip().isdigit() or len(fp) != 64 or \
                any(c not in "0123456789abcdef" for c in fp):
            raise KeyRefused(f"peer-fingerprints entry {item!r} must be PARTY=<64 hex digits>")
        pins[int(party)] = fp
    return pins


def make_offer(ephemeral_public: bytes, identity, run_id, party) -> bytes:
    """The key offer (module docstring); ``identity`` None: the bare ephemeral key (unpinned)."""
    if identity is None:
        return bytes(ephemeral_public)
    sig = identity.sign(_context(run_id, party, ephemeral_public))
    return MAGIC + bytes(ephemeral_public) + identity_public(identity) + sig


def _parse(offer: bytes):
    offer = bytes(offer)
    if len(offer) == _EPH:
        return offer, None, None
    if len(offer) == OFFER_BYTES and offer.startswith(MAGIC):
        o = len(MAGIC)
        return offer[o:o + _EPH], offer[o + _EPH:o + _EPH + _ID], offer[o + _EPH + _ID:]
    raise KeyRefused(f"a key offer of {len(offer)} bytes is neither a bare key nor a signed one")


def accept_offers(offers, me, own_ephemeral, run_id, pins) -> dict:
    """``{party: ephemeral X25519 public key}`` from the server's bundle ``offers`` (``[(party,
    offer), ...]``), checking each peer against ``pins`` (``{party: fingerprint}``; empty: no
    pinning, the server is trusted to relay faithfully).  Raises :class:`KeyRefused` naming the
    peer when an offer is not the pinned identity's, or is not signed for this run and party."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    peers = {}
    for q, offer in offers:
        q = int(q)
        eph, ident, sig = _parse(offer)
        if q == int(me):
            if eph != bytes(own_ephemeral):
                raise KeyRefused(f"party {me}: the key list does not hold its own key")
        elif pins:
            if q not in pins:
                raise KeyRefused(f"party {me}: no pinned fingerprint for party {q} "
                                 "(peer-fingerprints must name every peer)")
            if ident is None:
                raise KeyRefused(f"party {me}: party {q}'s key is not signed by an identity key "
                                 "(it needs identity-key in its node config)")
            got = fingerprint(ident)
            if got != pins[q]:
                raise KeyRefused(f"party {me}: party {q}'s identity key has fingerprint "
                                 f"{got[:16]}..., pinned {pins[q][:16]}...: refused")
            try:
                Ed25519PublicKey.from_public_bytes(ident).verify(sig, _context(run_id, q, eph))
            except InvalidSignature:
                raise KeyRefused(f"party {me}: party {q}'s key offer is not signed by its pinned "
                                 "identity for this run") from None
        peers[q] = eph
    if pins:
        missing = sorted(set(pins) - set(peers) - {int(me)})
        if missing:
            raise KeyRefused(f"party {me}: no key offer from pinned part{'ies' if len(missing) > 1 else 'y'} "
                             f"{missing}")
    return peers
