"""Transport and metering.

The server talks to parties only through ``transport.request(party, message, round)``, a
synchronous request/response: the message is framed (:mod:`.messages`), metered as downlink,
delivered, and the party's reply is framed, metered as uplink and decoded for the server.  The
algorithms never see bytes or party objects, so a multi-process or multi-machine transport (e.g.
on Flower, docs/architecture.md) only has to implement ``request`` and ``close``.
"""
from __future__ import annotations

from collections import defaultdict

from .messages import HEADER_BYTES, decode, encode

UP, DOWN = "uplink", "downlink"


def _row():
    return [0, 0, 0]


def _rounds():
    return defaultdict(_row)


def _pair():
    return [0, 0]


class Meter:
    """Bytes per party, per direction, per round; payload and framed (payload + headers).
    (Module-level default factories, not lambdas, so that a meter pickles.)"""

    def __init__(self):
        # (party, direction) -> {round: [payload, framed, messages]}
        self._rows = defaultdict(_rounds)
        self.by_type = defaultdict(_pair)   # message class name -> [count, framed bytes]

    def record(self, party: int, direction: str, round: int, frame_len: int, kind: str | None):
        """Count one frame for ``party`` in ``direction``; ``kind=None`` leaves the per-type
        tally alone (the receiving end of a party-to-party message already counted once)."""
        row = self._rows[(int(party), direction)][int(round)]
        row[0] += frame_len - HEADER_BYTES
        row[1] += frame_len
        row[2] += 1
        if kind is not None:
            self.by_type[kind][0] += 1
            self.by_type[kind][1] += frame_len

    def parties(self):
        return sorted({p for p, _ in self._rows})

    def total(self, party=None, direction=UP, framed=False) -> int:
        col = 1 if framed else 0
        return sum(r[col] for (p, dr), rounds in self._rows.items()
                   if dr == direction and (party is None or p == party) for r in rounds.values())

    def per_round(self, party: int, direction=UP, framed=False) -> dict:
        col = 1 if framed else 0
        return {t: r[col] for t, r in sorted(self._rows[(party, direction)].items())}

    def messages(self, party=None, direction=UP) -> int:
        return sum(r[2] for (p, dr), rounds in self._rows.items()
                   if dr == direction and (party is None or p == party) for r in rounds.values())

    def framed_bytes(self, parties: int) -> dict:
        """``{"uplink": [per party], "downlink": [per party], "total": int}``, framed bytes
        (the JSON ``bytes`` of the alignment and of scoring)."""
        up = [self.total(k, UP, framed=True) for k in range(parties)]
        down = [self.total(k, DOWN, framed=True) for k in range(parties)]
        return {"uplink": up, "downlink": down, "total": int(sum(up) + sum(down))}

    def summary(self, parties: int) -> dict:
        out = {}
        for dr in (UP, DOWN):
            out[dr] = {str(k): {"payload": self.total(k, dr), "framed": self.total(k, dr, True),
                                "messages": self.messages(k, dr)} for k in range(parties)}
        return out


def relay(meter: Meter, msg, src: int, dst, decode_frame, round: int = 0):
    """A party-to-party message through the server: framed, counted up once at ``src`` and
    down at each of ``dst`` (a party, or a list the server forwards one upload to), and
    decoded on arrival by ``decode_frame`` (the protocol's ``decode``)."""
    frame = encode(msg, src, round)
    meter.record(src, UP, round, len(frame), type(msg).__name__)
    for d in (dst if isinstance(dst, list) else [dst]):
        meter.record(d, DOWN, round, len(frame), None)
    return decode_frame(frame)[0]


class Transport:
    """Interface: ``request(party, message, round) -> reply``, ``request_many([(party, message),
    ...], round) -> [reply, ...]`` (the parties may work concurrently; replies come back in the
    order asked) and ``close()``."""

    meter: Meter

    def request(self, party: int, message, round: int):
        raise TypeError(f"{type(self).__name__} does not implement request")

    def request_many(self, requests, round: int) -> list:
        return [self.request(p, msg, round) for p, msg in requests]

    def close(self):
        pass


class InProcessTransport(Transport):
    """Parties are objects in this process; every message is still serialized and metered.

    ``workers > 1`` lets the parties of one ``request_many`` compute in threads (numpy/scipy
    release the GIL in the heavy kernels), as separate machines would; framing and metering stay
    in the calling thread and replies are processed in party order, so results do not depend on
    the number of workers.
    """

    def __init__(self, parties, meter: Meter | None = None, workers: int | None = None):
        import os

        self.parties = list(parties)
        self.meter = meter or Meter()
        self.workers = min(len(self.parties), os.cpu_count() or 1) if workers is None else int(workers)
        self._pool = None

    def _send(self, party, message, round):
        frame = encode(message, party, round)
        self.meter.record(party, DOWN, round, len(frame), type(message).__name__)
        return decode(frame)

    def _reply(self, party, reply, round):
        if reply is None:
            return None
        frame = encode(reply, party, round)
        self.meter.record(party, UP, round, len(frame), type(reply).__name__)
        return decode(frame)[0]

    def request(self, party: int, message, round: int):
        msg, p, t = self._send(party, message, round)
        return self._reply(party, self.parties[p].handle(msg, t), round)

    def request_many(self, requests, round: int) -> list:
        if self.workers <= 1 or len(requests) <= 1:
            return super().request_many(requests, round)
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="vflpriv-party")
        delivered = [self._send(party, message, round) for party, message in requests]
        futures = [self._pool.submit(self.parties[p].handle, msg, t) for msg, p, t in delivered]
        return [self._reply(party, f.result(), round) for (party, _), f in zip(requests, futures)]

    def close(self):
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
