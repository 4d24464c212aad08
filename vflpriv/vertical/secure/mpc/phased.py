"""The server's link of a secure run timed and counted by phase (setup, rounds, close): what
``vflpriv bench network`` and the command's ``flower.phases`` report (:class:`PhasedLink`)."""
from __future__ import annotations

from ...transport import DOWN, UP


class PhasedLink:
    """``link`` with each exchange timed and its Flower bytes counted by phase: ``setup`` (key
    exchange, masked blocks, the label products: everything before the first round's
    selection, or the logistic path's first round), ``rounds`` and ``close`` (the parties delete
    their blocks).  Per phase:
    exchanges (request/reply rounds, one after the other), seconds spent in them, wall-clock
    start and end (``time.time()``), Flower message bytes each way, and the sum over exchanges
    of the largest party's bytes each way (what one party's link carries on the critical path:
    ``vflpriv bench network`` turns it into a time on the wire)."""

    def __init__(self, link):
        self.link = link
        self.meter = link.meter
        self.phases = {}
        self._rounds = False

    def __getattr__(self, name):
        return getattr(self.link, name)

    #: the request that opens a round: least squares' selection, the logistic path's round
    ROUND_KINDS = frozenset({"select", "glm_round"})

    def _phase(self, requests):
        kinds = {kind for _, _, kind in requests}
        if kinds & self.ROUND_KINDS:
            self._rounds = True
        if "close" in kinds:
            return "close"
        return "rounds" if self._rounds else "setup"

    def exchange(self, requests, round, **kw):
        import time

        phase = self._phase(requests)
        before = dict(self.meter.flower)
        t0, w0 = time.perf_counter(), time.time()
        try:
            return self.link.exchange(requests, round, **kw)
        finally:
            p = self.phases.setdefault(phase, {
                "exchanges": 0, "seconds": 0.0, "start": w0, "end": w0, "uplink_bytes": 0,
                "downlink_bytes": 0, "max_party_uplink_bytes": 0,
                "max_party_downlink_bytes": 0})
            p["exchanges"] += 1
            p["seconds"] += time.perf_counter() - t0
            p["end"] = time.time()
            for dr, key in ((UP, "uplink"), (DOWN, "downlink")):
                deltas = [v - before.get(pk, 0) for pk, v in self.meter.flower.items()
                          if pk[1] == dr]
                p[key + "_bytes"] += sum(deltas)
                p[f"max_party_{key}_bytes"] += max(deltas, default=0)
