"""Byte format of the horizontal messages (FedP3 and the runtime's strategies), so communication is
metered on what is really sent.  Numpy only: the numpy sparse engine may share it.

A message is ``MAGIC | version u8 | direction u8 | count u16`` followed by ``count`` entries, one per
tensor (a layer's weight or bias)::

    layer u16 | tensor u8 (0 weight, 1 bias) | encoding u8 | numel u32 | payload

with four encodings (little-endian, values float32):

- ``DENSE``  payload = numel values;
- ``BITMAP`` payload = kept u32 | ceil(numel / 8) bytes of the keep mask (``np.packbits``) | kept
  values in flat-index order (magnitude pruning: the positions depend on the weights, so they travel);
- ``SEEDED`` payload = seed u64 | kept u32 | kept values (random pruning: the positions are a
  uniformly random ``kept``-subset drawn from the seed with :func:`random_keep_mask`, which the
  receiver regenerates, so the positions cost 8 bytes);
- ``COO``    payload = kept u32 | kept flat indices u32 (increasing) | kept values.

:func:`smallest` picks, for one vector, the cheapest of DENSE / COO / BITMAP for its nonzeros
(4 d, 4 + 8 k, 4 + ceil(d / 8) + 4 k bytes for k nonzeros of d), and :func:`encode_vectors`
serializes a list of flat vectors that way (one entry each, ``layer`` = position in the list).

Layer indices are the receiver's only way to know which layers arrived, so they are part of every
uplink and are metered with it (paper 002, Alg. 1 line 7: only the layers in L_i leave the device).
"""
from __future__ import annotations

import struct

import numpy as np

MAGIC = b"FP3"
VERSION = 1
DOWN, UP = 0, 1
DENSE, BITMAP, SEEDED, COO = 0, 1, 2, 3
_HEAD = struct.Struct("<3sBBH")
_ENTRY = struct.Struct("<HBBI")


def random_keep_mask(numel: int, kept: int, seed: int) -> np.ndarray:
    """A uniformly random subset of ``kept`` of ``numel`` positions, as a boolean mask (seeded)."""
    mask = np.zeros(numel, dtype=bool)
    mask[np.random.default_rng(seed).permutation(numel)[:kept]] = True
    return mask


def payload_sizes(numel: int, kept: int) -> dict:
    """Payload bytes of a vector of ``numel`` values with ``kept`` nonzeros, per encoding."""
    return {DENSE: 4 * numel, COO: 4 + 8 * kept, BITMAP: 4 + (numel + 7) // 8 + 4 * kept}


def smallest(values):
    """``(encoding, extra)`` of the cheapest of DENSE / BITMAP / COO for ``values``' nonzeros
    (ties go to DENSE, then BITMAP)."""
    v = np.asarray(values).ravel()
    mask = v != 0
    sizes = payload_sizes(v.size, int(mask.sum()))
    enc = min((DENSE, BITMAP, COO), key=lambda e: sizes[e])
    return enc, (None if enc == DENSE else mask)


def encode_vectors(vectors, direction: int) -> bytes:
    """Serialize flat vectors, each with its :func:`smallest` encoding (entry ``layer`` = index)."""
    entries = []
    for j, v in enumerate(vectors):
        v = np.asarray(v, dtype=np.float32).ravel()
        enc, extra = smallest(v)
        entries.append((j, 0, v, enc, extra))
    return encode(entries, direction)


def decode_vectors(data: bytes) -> list:
    """Inverse of :func:`encode_vectors`: the list of flat float32 vectors."""
    return [vals for _, _, vals, _ in decode(data)[1]]


def encode(entries, direction: int) -> bytes:
    """Serialize ``entries``: tuples ``(layer, tensor, values, encoding, extra)``.

    ``values`` is the full flat float32 tensor; for BITMAP ``extra`` is the boolean keep mask, for
    SEEDED it is ``(seed, kept)``, for DENSE it is ignored.  Only the kept values are written.
    """
    out = [_HEAD.pack(MAGIC, VERSION, direction, len(entries))]
    for layer, tensor, values, encoding, extra in entries:
        v = np.ascontiguousarray(values, dtype="<f4").ravel()
        out.append(_ENTRY.pack(layer, tensor, encoding, v.size))
        if encoding == DENSE:
            out.append(v.tobytes())
        elif encoding == BITMAP:
            mask = np.asarray(extra, dtype=bool).ravel()
            out.append(struct.pack("<I", int(mask.sum())))
            out.append(np.packbits(mask).tobytes())
            out.append(v[mask].tobytes())
        elif encoding == COO:
            mask = np.asarray(extra, dtype=bool).ravel()
            idx = np.flatnonzero(mask)
            out.append(struct.pack("<I", idx.size))
            out.append(idx.astype("<u4").tobytes())
            out.append(v[idx].tobytes())
        elif encoding == SEEDED:
            seed, kept = extra
            mask = random_keep_mask(v.size, kept, seed)
            out.append(struct.pack("<QI", seed, kept))
            out.append(v[mask].tobytes())
        else:
            raise ValueError(f"unknown encoding {encoding!r}")
    return b"".join(out)


def decode(data: bytes):
    """Inverse of :func:`encode`: ``(direction, [(layer, tensor, values, mask_or_None), ...])``.

    ``values`` is the full flat tensor with zeros at pruned positions; ``mask`` is the keep mask
    (None for DENSE).
    """
    magic, version, direction, count = _HEAD.unpack_from(data, 0)
    if magic != MAGIC or version != VERSION:
        raise ValueError("not a FedP3 message")
    pos, out = _HEAD.size, []
    for _ in range(count):
        layer, tensor, encoding, numel = _ENTRY.unpack_from(data, pos)
        pos += _ENTRY.size
        mask = None
        if encoding == DENSE:
            vals = np.frombuffer(data, dtype="<f4", count=numel, offset=pos).copy()
            pos += 4 * numel
        else:
            if encoding == BITMAP:
                (kept,) = struct.unpack_from("<I", data, pos)
                pos += 4
                nb = (numel + 7) // 8
                mask = np.unpackbits(np.frombuffer(data, dtype=np.uint8, count=nb, offset=pos),
                                     count=numel).astype(bool)
                pos += nb
            elif encoding == COO:
                (kept,) = struct.unpack_from("<I", data, pos)
                pos += 4
                idx = np.frombuffer(data, dtype="<u4", count=kept, offset=pos)
                pos += 4 * kept
                if kept and (idx.max() >= numel or np.any(np.diff(idx.astype(np.int64)) <= 0)):
                    raise ValueError("COO indices out of range or not increasing")
                mask = np.zeros(numel, dtype=bool)
                mask[idx] = True
            elif encoding == SEEDED:
                seed, kept = struct.unpack_from("<QI", data, pos)
                pos += 12
                mask = random_keep_mask(numel, kept, seed)
            else:
                raise ValueError(f"unknown encoding {encoding!r} in message")
            vals = np.zeros(numel, dtype=np.float32)
            vals[mask] = np.frombuffer(data, dtype="<f4", count=kept, offset=pos)
            pos += 4 * kept
        out.append((layer, tensor, vals, mask))
    if pos != len(data):
        raise ValueError(f"message has {len(data) - pos} trailing bytes")
    return direction, out
