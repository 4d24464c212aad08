"""``--fingerprints`` and ``--unpinned`` of ``vflpriv flower spec run|predict``: each party's own
identity key, pinned in its peers' node configs (issue 49).

Each party makes its identity key on its own machine and sends only the fingerprint::

    vflpriv flower identity --out party1.key      # party 1, in its own folder; prints HEX

(or ``vflpriv flower schema ... --identity-key party1.key``, which puts the fingerprint and the
key's path in the schema it sends).  Whoever writes the description passes the fingerprints
(``--fingerprints 0=HEX,1=HEX,2=HEX``, or the schemas given with ``--party-schema``); each node
config then names where its party keeps its key (``identity-key``: the path in its schema, else
``party<k>.key`` beside the node config) and pins every peer's fingerprint
(``peer-fingerprints``).  No private key is written by the description.  A party without a
fingerprint is refused, unless ``--unpinned``: then every node config says ``unpinned = true``
and every node warns in its log.  :class:`vflpriv.runtime.keys.Pinning`; docs/flower.md,
"Identity keys".
"""
from __future__ import annotations

from ..errors import InputError


def add_arguments(p):
    p.add_argument("--fingerprints", action="append", default=None, metavar="K=HEX,...",
                   help="each party's identity fingerprint (party K prints it with vflpriv "
                   "flower identity --out party<K>.key on its own machine), e.g. "
                   "0=HEX,1=HEX,2=HEX; may be repeated; a schema made with vflpriv flower "
                   "schema --identity-key carries its party's. Required for every party whose "
                   "keys are exchanged, unless --unpinned")
    p.add_argument("--unpinned", action="store_true",
                   help="write the description without pinned keys: the server could then "
                   "substitute key offers and read the party-to-party messages; every node "
                   "says so in its log")


def pinning(args, K, schemas=None):
    """The :class:`~vflpriv.runtime.keys.Pinning` of ``args`` for parties 0..K-1: the
    ``--fingerprints`` and the fingerprints (and key paths) the schemas carry; a party named
    outside 0..K-1, or given two different fingerprints, is refused.  Whether every party that
    needs one has one is :func:`check`'s."""
    from ..runtime.keys import KeyRefused, Pinning, parse_pins

    given = getattr(args, "fingerprints", None)
    try:
        fps = parse_pins(",".join(given or []), what="--fingerprints")
    except KeyRefused as exc:
        raise InputError(str(exc)) from None
    if getattr(args, "unpinned", False) and fps:
        raise InputError("--unpinned and --fingerprints contradict each other: give one")
    for k in fps:
        if K is not None and not 0 <= k < K:
            raise InputError(f"--fingerprints names party {k}; the run has parties 0..{K - 1}")
    keys = {}
    for k, s in sorted((schemas or {}).items()):
        fp = s.get("fingerprint")
        if fp and not getattr(args, "unpinned", False):
            if fps.get(k, fp) != fp:
                raise InputError(f"--fingerprints {k}=...: party {k}'s schema carries another "
                                 "fingerprint; give one")
            fps[k] = fp
        if s.get("identity-key"):
            keys[k] = s["identity-key"]
    return Pinning(fps, keys, unpinned=getattr(args, "unpinned", False))


def check(pin, parties) -> None:
    """Refused (exit 2, one line naming the party) unless every one of ``parties`` has a
    fingerprint or the description is unpinned."""
    from ..runtime.keys import missing_fingerprint

    missing = pin.missing(parties)
    if missing:
        raise InputError(missing_fingerprint(missing[0]))


def refuse_without_keys(args, what) -> None:
    """``--fingerprints`` / ``--unpinned`` where no key is exchanged (``what``: why)."""
    for opt, v in (("--fingerprints", getattr(args, "fingerprints", None)),
                   ("--unpinned", getattr(args, "unpinned", False))):
        if v:
            raise InputError(f"{opt}: {what} exchanges no keys (only dp-bcfw-secure and "
                             "scoring runs pin them)")
