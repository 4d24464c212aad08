"""The runtime's link (:mod:`vflpriv.runtime.link`) over a Flower Grid: the ServerApp's side.

A :class:`Link` knows parties by index (0..K-1), not by Flower node id: at :meth:`Link.connect`
it waits (bounded) for K SuperNodes and asks each which party it is (its node config says so;
on the simulation runtime, its ``partition-id``).  :meth:`Link.exchange` sends one frame to each
of several parties and returns their reply frames in the order asked.  It pulls replies itself
(every few milliseconds, backing off) instead of ``Grid.send_and_receive``, which sleeps 3 s
between pulls, and it watches the SuperLink's node list so that a SuperNode that dies is reported
(which party, which round) as soon as the SuperLink drops it, not after the reply timeout.

Every message is metered twice: the project's own frame (the same bytes the in-process transport
counts) and the whole Flower ``Message`` as protobuf (``message_to_proto(...).ByteSize()``: the
record dict, metadata and ids that the Fleet API carries; HTTP/TLS framing not included).
"""
from __future__ import annotations

import os
import time

from ..runtime.link import (DOWN, UP, LinkMeter, PartyLost, PartyRefused,  # noqa: F401
                            error_record, raise_recorded)

RECORD = "vflpriv"


def message_bytes(message) -> int:
    """Size of a Flower Message as the protobuf Flower serializes it."""
    from flwr.common.serde import message_to_proto

    return int(message_to_proto(message).ByteSize())


#: the Flower meter: frames and the whole Flower messages carrying them
FlowerMeter = LinkMeter


def pack(frame: bytes, kind: str, round: int):
    from flwr.app import ConfigRecord, RecordDict

    return RecordDict({RECORD: ConfigRecord({"frame": frame, "kind": kind, "round": int(round)})})


def unpack(message):
    """``(frame, kind, round)`` or raises PartyRefused-like info via ``("error", reason)``."""
    rec = message.content[RECORD]
    return rec["frame"], rec["kind"], int(rec["round"])


def _short_error(error) -> str:
    """A Flower error in one line: its code and the last line of its reason (the exception)."""
    from flwr.common.constant import ErrorCode

    names = {v: k for k, v in vars(ErrorCode).items() if k.isupper() and isinstance(v, int)}
    lines = [ln.strip() for ln in str(error.reason or "").splitlines() if ln.strip()]
    last = next((ln for ln in reversed(lines) if "Message:" in ln), lines[-1] if lines else "")
    last = last.split("Message:", 1)[-1].strip().rstrip("'>")
    return f"Flower error {names.get(error.code, error.code)}: {last}"[:500]


class Link:
    """Request/reply with K parties over a Flower ``Grid`` (see module docstring)."""

    def __init__(self, grid, parties: int, *, connect_timeout=60.0, reply_timeout=600.0,
                 liveness_every=1.0, meter=None):
        self.grid, self.K = grid, int(parties)
        self.connect_timeout, self.reply_timeout = float(connect_timeout), float(reply_timeout)
        self.liveness_every = float(liveness_every)
        self.meter = meter or FlowerMeter()
        self.node_of = {}         # party -> node id
        self.party_of = {}
        self.lost = []            # (party, round, reason) of parties lost under ``tolerate``
        #: a file touched after every exchange (the local deployment's watchdog reads its
        #: mtime: a long offline phase shows activity before any round ends); None: none
        self.heartbeat = None

    def _beat(self):
        if self.heartbeat:
            try:
                with open(self.heartbeat, "a"):
                    os.utime(self.heartbeat)
            except OSError:          # a watchdog's aid only: never fail the run for it
                pass

    # -- start --------------------------------------------------------------------------------
    def connect(self, identify):
        """Wait for K SuperNodes (at most ``connect_timeout`` s), then ask each its party index.

        ``identify`` is the frame of the hello message (the run's public setup); each node
        replies with its party index.  Raises :class:`PartyLost` naming the missing parties.
        """
        deadline = time.monotonic() + self.connect_timeout
        nodes = []
        while True:
            nodes = sorted(self.grid.get_node_ids())
            if len(nodes) >= self.K or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        if len(nodes) < self.K:
            raise PartyLost(f"{len(nodes)} of {self.K} connected", None,
                            f"only {len(nodes)} of {self.K} SuperNodes connected to the SuperLink "
                            f"within {self.connect_timeout:g} s; start the missing parties' "
                            "SuperNodes (or check their --superlink address)")
        replies = self._send_receive([(n, identify, "hello", 0) for n in nodes],
                                     names={n: f"node {n}" for n in nodes}, round=None)
        for n, (frame, kind, _) in replies.items():
            k = int(frame.decode())
            if not 0 <= k < self.K or k in self.node_of:
                raise PartyLost(k, None, f"node {n} says it is party {k}; parties must be "
                                f"0..{self.K - 1}, each once")
            self.node_of[k], self.party_of[n] = n, k
        missing = [k for k in range(self.K) if k not in self.node_of]
        if missing:
            raise PartyLost(missing[0], None, f"no SuperNode is party {missing}")

    # -- rounds -------------------------------------------------------------------------------
    def exchange(self, requests, round: int, kinds=False, tolerate=False) -> list:
        """``requests``: ``[(party, frame, kind), ...]``; returns the reply frames in order,
        or with ``kinds=True`` ``(frame, reply kind)`` pairs (a client may answer a request
        with another kind, e.g. that its own budget stopped it).

        ``tolerate``: a party that fails (its SuperNode gone, an error reply, a refusal, no
        reply within the timeout) does not stop the exchange: its entry is None and
        :attr:`lost` gets ``(party, round, reason)``; the others' replies come back as usual
        (``--on-client-loss continue``).  Otherwise the first failure raises
        :class:`PartyLost` / :class:`PartyRefused`."""
        out = self._send_receive([(self.node_of[k], f, kind, round) for k, f, kind in requests],
                                 names={self.node_of[k]: k for k, _, _ in requests}, round=round,
                                 tolerate=tolerate)
        self._beat()
        res = []
        for k, _, _ in requests:
            r = out.get(self.node_of[k])
            res.append(None if r is None else r[:2] if kinds else r[0])
        return res

    def _fail(self, exc, node, tolerate, failed):
        """Raise ``exc``, or (``tolerate``) note the party as lost and go on."""
        if not tolerate:
            raise exc
        failed[node] = exc
        self.lost.append((exc.party, exc.round, exc.reason))

    def _send_receive(self, items, names, round, tolerate=False):
        from flwr.app import Message

        msgs = {}
        for node, frame, kind, t in items:
            m = Message(pack(frame, kind, t), dst_node_id=node, message_type="query")
            msgs[node] = m
            self.meter.record(self.party_of.get(node, -1), DOWN, t, len(frame), message_bytes(m))
        ids = list(self.grid.push_messages(list(msgs.values())))
        waiting = dict(zip(ids, msgs))            # message id -> node
        replies, failed = {}, {}
        start = last_check = time.monotonic()
        pause = 0.002
        while waiting:
            for r in self.grid.pull_messages(list(waiting)):
                node = waiting.pop(r.metadata.reply_to_message_id, None)
                if node is None:
                    continue
                who = names[node]
                if r.has_error():
                    self._fail(PartyLost(who, round, _short_error(r.error)), node, tolerate,
                               failed)
                    continue
                rec = r.content[RECORD]
                if "refused" in rec:
                    self._fail(PartyRefused(who, round, rec["refused"]), node, tolerate,
                               failed)
                    continue
                frame = rec["frame"]
                self.meter.record(self.party_of.get(node, -1), UP,
                                  round if round is not None else 0, len(frame), message_bytes(r))
                replies[node] = (frame, rec["kind"], int(rec["round"]))
            if not waiting:
                break
            now = time.monotonic()
            if now - start > self.reply_timeout:
                for mid, node in list(waiting.items()):
                    waiting.pop(mid)
                    self._fail(PartyLost(names[node], round,
                                         f"no reply within {self.reply_timeout:g} s"),
                               node, tolerate, failed)
                break
            if now - last_check > self.liveness_every:
                last_check = now
                alive = set(self.grid.get_node_ids())
                for mid, node in list(waiting.items()):
                    if node not in alive:
                        waiting.pop(mid)
                        self._fail(PartyLost(names[node], round,
                                             "its SuperNode left the federation (the SuperLink "
                                             "no longer lists it)"), node, tolerate, failed)
                if not waiting:
                    break
            time.sleep(pause)
            pause = min(pause * 1.5, 0.2)
        return replies
