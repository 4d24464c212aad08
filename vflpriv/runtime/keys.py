"""Pinned peer keys for dp-bcfw-secure on Flower: the key exchange need not trust the server.

Without pinning, each party makes a fresh X25519 key pair per run and the server hands the
public keys around (:mod:`.secure`): sound against a semi-honest server only, since a server
that swapped keys could read the relayed party-to-party messages (a man in the middle).

With pinning, each party also holds a long-term **Ed25519 identity key** (node config
``identity-key = "party0.key"``, a PKCS#8 PEM file the party makes itself, on its own machine,
with ``vflpriv flower identity``) and its node config lists the peers' identity fingerprints
(``peer-fingerprints = "1=<hex>,2=<hex>"``, the SHA-256 of each peer's raw 32-byte Ed25519
public key, exchanged out of band, e.g. read out over the phone).  A description for separate
machines carries only the fingerprints (:class:`Pinning`; ``vflpriv flower spec ...
--fingerprints``, or the parties' schemas), never a private key (issue 49): whoever writes it
can pin the parties' keys, not sign as one of them.  A party's key offer is then

    b"VK1" | X25519 ephemeral public key (32) | Ed25519 identity public key (32) |
    Ed25519 signature (64) over  b"vflpriv <purpose> key offer|<run id>|<party>|" + ephemeral

with ``<purpose>`` ``dp-bcfw-secure`` (the channel keys of a training run) or ``scoring`` (the
mask keys of a scoring run's secure sum, :mod:`vflpriv.model.deployed`).

and a party accepts a peer's offer only if the identity key's fingerprint is the pinned one and
the signature verifies: the server can relay the offers, not change them (nor replay one from
another run, another party or another purpose: the run id, the party index and the purpose are
signed).  Anything else is
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


#: what a key offer is for, signed with it: a dp-bcfw-secure channel key, or a scoring run's
#: mask key (:mod:`vflpriv.model.deployed`); an offer for one is refused as the other
PURPOSES = ("dp-bcfw-secure", "scoring")


def _context(run_id, party, ephemeral, purpose="dp-bcfw-secure") -> bytes:
    if purpose not in PURPOSES:
        raise ValueError(f"unknown key offer purpose {purpose!r}")
    return f"vflpriv {purpose} key offer|{run_id}|{int(party)}|".encode() + bytes(ephemeral)


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


def is_fingerprint(text) -> bool:
    """64 lower-case hex digits (a SHA-256 in hex, as :func:`fingerprint` prints it)."""
    return isinstance(text, str) and len(text) == 64 and all(c in "0123456789abcdef" for c in text)


def parse_pins(text, what="peer-fingerprints") -> dict:
    """``"1=<hex>,2=<hex>"`` -> ``{1: hex, 2: hex}`` (64 hex digits each); a party named twice
    with two fingerprints is refused (``what``: the option or key named in the message)."""
    pins = {}
    for item in filter(None, (s.strip() for s in str(text or "").split(","))):
        party, sep, fp = item.partition("=")
        fp = fp.strip().lower()
        if not sep or not party.strip().isdigit() or not is_fingerprint(fp):
            raise KeyRefused(f"{what} entry {item!r} must be PARTY=<64 hex digits>")
        if pins.get(int(party), fp) != fp:
            raise KeyRefused(f"{what} names party {int(party)} twice, with two fingerprints")
        pins[int(party)] = fp
    return pins


def pins_text(fingerprints: dict, me) -> str:
    """The ``peer-fingerprints`` value of party ``me``: every other party's, in party order."""
    return ",".join(f"{q}={fp}" for q, fp in sorted(fingerprints.items()) if int(q) != int(me))


def unpinned_warning(party, what="its key offers") -> str:
    """The line a node prints in its own log when it runs without pinned peers."""
    return (f"vflpriv party {party}: WARNING: running unpinned (no identity-key / "
            f"peer-fingerprints in its node config): a server that swaps {what} can read the "
            "party-to-party messages; a description pins them unless written with --unpinned "
            "(docs/flower.md, \"Identity keys\")\n")


def make_offer(ephemeral_public: bytes, identity, run_id, party,
               purpose="dp-bcfw-secure") -> bytes:
    """The key offer (module docstring); ``identity`` None: the bare ephemeral key (unpinned).
    ``purpose`` (:data:`PURPOSES`) is signed with it."""
    if identity is None:
        return bytes(ephemeral_public)
    sig = identity.sign(_context(run_id, party, ephemeral_public, purpose))
    return MAGIC + bytes(ephemeral_public) + identity_public(identity) + sig


def _parse(offer: bytes):
    offer = bytes(offer)
    if len(offer) == _EPH:
        return offer, None, None
    if len(offer) == OFFER_BYTES and offer.startswith(MAGIC):
        o = len(MAGIC)
        return offer[o:o + _EPH], offer[o + _EPH:o + _EPH + _ID], offer[o + _EPH + _ID:]
    raise KeyRefused(f"a key offer of {len(offer)} bytes is neither a bare key nor a signed one")


def accept_offer(offer, me, q, run_id, pins, purpose="dp-bcfw-secure") -> bytes:
    """Peer ``q``'s ephemeral public key from its ``offer``, checked against ``pins`` (``{party:
    fingerprint}``; empty: no pinning) as :func:`accept_offers` checks each peer."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    q = int(q)
    eph, ident, sig = _parse(offer)
    if not pins:
        return eph
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
        Ed25519PublicKey.from_public_bytes(ident).verify(sig, _context(run_id, q, eph, purpose))
    except InvalidSignature:
        raise KeyRefused(f"party {me}: party {q}'s key offer is not signed by its pinned "
                         "identity for this run") from None
    return eph


def accept_offers(offers, me, own_ephemeral, run_id, pins) -> dict:
    """``{party: ephemeral X25519 public key}`` from the server's bundle ``offers`` (``[(party,
    offer), ...]``), checking each peer against ``pins`` (``{party: fingerprint}``; empty: no
    pinning, the server is trusted to relay faithfully).  Raises :class:`KeyRefused` naming the
    peer when an offer is not the pinned identity's, or is not signed for this run and party."""
    peers = {}
    for q, offer in offers:
        q = int(q)
        if q == int(me):
            if _parse(offer)[0] != bytes(own_ephemeral):
                raise KeyRefused(f"party {me}: the key list does not hold its own key")
            peers[q] = _parse(offer)[0]
        else:
            peers[q] = accept_offer(offer, me, q, run_id, pins)
    if pins:
        missing = sorted(set(pins) - set(peers) - {int(me)})
        if missing:
            raise KeyRefused(f"party {me}: no key offer from pinned part{'ies' if len(missing) > 1 else 'y'} "
                             f"{missing}")
    return peers


class Pinning:
    """How a description for separate machines pins the parties' key offers (``vflpriv flower
    spec``): each party's identity ``fingerprints`` (``{party: hex}``, made by the party itself
    with ``vflpriv flower identity`` and sent out of band, or carried in its schema), where each
    party keeps its identity key (``keys``: ``{party: path}``; default ``party<k>.key`` beside
    its node config), or ``unpinned`` (no pinning: every node says so in its log).  Holds no
    private key: a preparer can pin the parties' keys, never sign as one of them."""

    def __init__(self, fingerprints=None, keys=None, unpinned=False):
        self.fingerprints = {int(k): str(v).lower() for k, v in dict(fingerprints or {}).items()}
        self.keys = {int(k): str(v) for k, v in dict(keys or {}).items()}
        self.unpinned = bool(unpinned)
        for k, fp in self.fingerprints.items():
            if not is_fingerprint(fp):
                raise ValueError(f"party {k}'s fingerprint must be 64 hex digits, got {fp!r}")

    def missing(self, parties) -> list:
        """The parties among ``parties`` with no fingerprint (none when unpinned)."""
        return [] if self.unpinned else [k for k in parties if int(k) not in self.fingerprints]

    def __repr__(self):
        return (f"Pinning(unpinned=True)" if self.unpinned else
                f"Pinning(parties={sorted(self.fingerprints)})")


def load_identity_of(cfg, party, refused):
    """The identity key a node config names (``identity-key``), or None when it names none;
    a named key that cannot be read is refused with ``refused`` (the role's exception),
    saying how the party makes it."""
    path = cfg.get("identity-key")
    if not path:
        return None
    if not os.path.exists(path):
        raise refused(f"party {party}: its identity key {str(path)!r} does not exist: the party "
                      f"makes it on its own machine (vflpriv flower identity --out {path}) and "
                      "sends the fingerprint to whoever writes the description")
    try:
        return load_identity(path)
    except KeyRefused as exc:
        raise refused(f"party {party}: {exc}") from None


def missing_fingerprint(party) -> str:
    """The one-line refusal of a description with no fingerprint for ``party``."""
    k = int(party)
    return (f"party {k} has no identity fingerprint: party {k} makes its key on its own machine "
            f"(vflpriv flower identity --out party{k}.key) and sends the fingerprint it prints; "
            f"give --fingerprints {k}=HEX (or its schema from vflpriv flower schema "
            "--identity-key FILE), or --unpinned")
