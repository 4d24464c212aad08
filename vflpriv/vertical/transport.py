"""Transport and metering.

The server talks to parties only through ``transport.request(party, message, round)``, a
synchronous request/response: the message is framed (:mod:`.messages`), metered as downlink,
delivered, and the party's reply is framed, metered as uplink and decoded for the server.  The
algorithms never see bytes or party objects, so a multi-process or multi-machine transport (e.g.
on Flower, DESIGN.md) only has to implement ``request`` and ``close``.
"""
from __future__ import annotations

from collections import defaultdict

from .messages import HEADER_BYTES, decode, encode

UP, DOWN = "uplink", "downlink"


class Meter:
    """Bytes per party, per direction, per round; payload and framed (payload + headers)."""

    def __init__(self):
        # (party, direction) -> {round: [payload, framed, messages]}
        self._rows = defaultdict(lambda: defaultdict(lambda: [0, 0, 0]))
        self.by_type = defaultdict(lambda: [0, 0])   # message class name -> [count, framed bytes]

    def record(self, party: int, direction: str, round: int, frame_len: int, kind: str):
        row = self._rows[(int(party), direction)][int(round)]
        row[0] += frame_len - HEADER_BYTES
        row[1] += frame_len
        row[2] += 1
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

    def summary(self, parties: int) -> dict:
        out = {}
        for dr in (UP, DOWN):
            out[dr] = {str(k): {"payload": self.total(k, dr), "framed": self.total(k, dr, True),
                                "messages": self.messages(k, dr)} for k in range(parties)}
        return out


class Transport:
    """Interface: ``request(party, message, round) -> reply`` and ``close()``."""

    meter: Meter

    def request(self, party: int, message, round: int):
        raise TypeError(f"{type(self).__name__} does not implement request")

    def close(self):
        pass


class InProcessTransport(Transport):
    """Parties are objects in this process; every message is still serialized and metered."""

    def __init__(self, parties, meter: Meter | None = None):
        self.parties = list(parties)
        self.meter = meter or Meter()

    def request(self, party: int, message, round: int):
        frame = encode(message, party, round)
        self.meter.record(party, DOWN, round, len(frame), type(message).__name__)
        msg, p, t = decode(frame)
        reply = self.parties[p].handle(msg, t)
        if reply is None:
            return None
        frame = encode(reply, party, round)
        self.meter.record(party, UP, round, len(frame), type(reply).__name__)
        return decode(frame)[0]
