"""What each party and the server receives, kept for the view tests (a debug mode; off unless the
environment variable ``VFLPRIV_VIEW_LOG`` names a folder).

Confidentiality of the secure paths is a property of *views*: every value a party (or the
server) receives must be blinded by at least one mask whose key it never receives, and no such
mask may blind two values it receives (their difference would unmask them), except the two
parts of one product that it is meant to reconstruct (``peer_output``: the masked vector z and
its helper's result share combine into A_k^T a_j + noise, the release to that party).

With the log on, every process appends JSON lines to a file of its own in that folder:

* ``{"e": "mask", "h": H, "masks": [...], "tag": T}``: a sender made the array with content
  hash H, blinded by the masks listed (a mask is ``KEYHEX`` or ``KEYHEX:PART`` for a part of a
  key's stream, e.g. the r and w of one factor key); ``tag`` names the product whose parts it
  is (None for a lone masked value);
* ``{"e": "recv", "who": P, "type": NAME, "arrays": {field: H}, "keys": [KEYHEX, ...],
  "data": {field: [words]}}``: P (a party index, or ``"server"``) decoded a message: the hashes
  of its arrays, the keys it carries (every field whose name ends in ``key``), and for the
  masked-vector types the words themselves (the attack test subtracts keys from them); a
  ``KeyMade`` entry of the same shape records keys P made itself (``made``).

The receiver is set where a message is decoded for someone: the in-process link
(``local.Network``), the party side of every runtime role (``runtime.roles.answer``), and the
server otherwise.  Nothing here is read by the protocol: the log only records.
"""
from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import os

import numpy as np

ENV = "VFLPRIV_VIEW_LOG"
_receiver = contextvars.ContextVar("vflpriv_view_receiver", default="server")

#: message types whose words the log keeps (the masked vectors and blocks an attacker would
#: try to unmask with the keys it holds)
_KEEP_WORDS = ("MaskedVector", "MaskedBlock", "MarginShare", "MaskedFactors", "MaskedMargin",
               "GramShare")


def enabled() -> bool:
    return bool(os.environ.get(ENV))


def digest(a) -> str:
    """Content hash of an array's words (uint64 view), the same at sender and receiver."""
    a = np.ascontiguousarray(a)
    if a.dtype.itemsize != 8:
        a = a.astype(np.uint64)
    return hashlib.sha256(a.view(np.uint64).tobytes()).hexdigest()[:32]


def _write(entry):
    folder = os.environ.get(ENV)
    if not folder:
        return
    path = os.path.join(folder, f"views-{os.getpid()}.jsonl")
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")


def mask_id(key: bytes, part: str | None = None) -> str:
    return bytes(key).hex() + ("" if part is None else f":{part}")


def masked(array, masks, tag=None):
    """Record that ``array`` (as it will travel) is blinded by ``masks`` (``mask_id``s);
    ``tag``: the product it is a part of (see the module docstring)."""
    if enabled():
        _write({"e": "mask", "h": digest(array), "masks": list(masks),
                "tag": None if tag is None else list(tag)})


def made(who, keys):
    """Record that ``who`` made ``keys`` itself (it holds them as if it had received them: the
    view checks count them among its keys, the attack subtracts them)."""
    if enabled() and keys:
        _write({"e": "recv", "who": who, "type": "KeyMade", "arrays": {}, "data": {},
                "shapes": {}, "ints": {}, "keys": [bytes(k).hex() for k in keys]})


@contextlib.contextmanager
def receiving(who):
    """Messages decoded inside are received by ``who`` (a party index or ``"server"``)."""
    token = _receiver.set(who)
    try:
        yield
    finally:
        _receiver.reset(token)


def received(msg):
    """Log that the current receiver decoded ``msg`` (a secure-protocol or scoring message)."""
    if not enabled():
        return
    from dataclasses import fields

    arrays, keys, data, ints, shapes = {}, [], {}, {}, {}
    name = type(msg).__name__
    for f in fields(msg):
        v = getattr(msg, f.name)
        if isinstance(v, (bytes, bytearray)) and f.name.endswith("key"):
            keys.append(bytes(v).hex())
        elif isinstance(v, np.ndarray) and v.dtype.itemsize == 8:
            if v.size == 0:
                continue                  # an empty part (L's FactorTriple has no correction)
            arrays[f.name] = digest(v)
            if name in _KEEP_WORDS:
                data[f.name] = [str(int(w)) for w in np.asarray(v).view(np.uint64).ravel()]
                shapes[f.name] = list(v.shape)
        elif isinstance(v, (int, np.integer)) and not isinstance(v, bool):
            ints[f.name] = int(v)
    who = _receiver.get()
    entry = {"e": "recv", "who": who, "type": name, "arrays": arrays, "keys": keys,
             "data": data, "shapes": shapes, "ints": ints}
    if name == "MaskedBlock":
        entry["row"] = int(msg.row)
    _write(entry)


def read(folder):
    """``(masks, receipts)``: {hash: [(masks, tag), ...]} and the list of receipt entries."""
    masks, recs = {}, []
    for name in sorted(os.listdir(folder)):
        if not name.startswith("views-"):
            continue
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            for line in f:
                e = json.loads(line)
                if e["e"] == "mask":
                    masks.setdefault(e["h"], []).append(
                        (tuple(e["masks"]), None if e["tag"] is None else tuple(e["tag"])))
                else:
                    recs.append(e)
    return masks, recs
