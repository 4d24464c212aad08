"""The transport of a remote run: frames to and from parties known by index, metered.

A link is what a server role talks through (:mod:`.families`)::

    link = connect(K)                 # K parties, not yet reached
    link.connect(hello)               # every party reached, each knows its index
    replies = link.exchange([(party, frame, kind), ...], round, kinds=False, tolerate=False)
    link.meter.summary(K), link.meter.totals(), link.lost

``exchange`` sends one frame to each of several parties and returns their reply frames in the
order asked (with ``kinds=True``: ``(frame, reply kind)`` pairs; a party may answer a request with
another kind, e.g. that its own budget stopped it).  A party that fails raises
:class:`PartyLost` / :class:`PartyRefused` naming it and the round, or, with ``tolerate``
(``--on-client-loss continue``), gets ``None`` as its reply and an entry in ``lost``.

Two implementations: :class:`LocalLink` here (the party roles are objects in this process, each
message still a real frame through the same role-hosting code as on Flower) and
``vflpriv.flower.link.Link`` (a Flower Grid: simulation or deployment).  Both meter every frame
and the envelope carrying it (Flower: the whole ``Message`` as protobuf; in process: none, the
frame itself).
"""
from __future__ import annotations

from collections import defaultdict

UP, DOWN = "uplink", "downlink"


class PartyLost(RuntimeError):
    """A party stopped answering (its SuperNode died or was unreachable)."""

    def __init__(self, party, round, reason):
        self.party, self.round, self.reason = party, round, reason
        where = f"at round {round}" if round is not None else "at start"
        super().__init__(f"party {party} lost {where}: {reason}")


class PartyRefused(RuntimeError):
    """A party refused a request (its own budget, or bad input on its side)."""

    def __init__(self, party, round, reason):
        self.party, self.round, self.reason = party, round, reason
        super().__init__(f"party {party} refused round {round}: {reason}")


def error_record(exc, round) -> dict:
    """What stopped a server role's run, as data that survives the trip back to the command."""
    if isinstance(exc, (PartyLost, PartyRefused)):
        return {"kind": type(exc).__name__, "party": exc.party, "round": exc.round,
                "reason": exc.reason, "message": str(exc)}
    return {"kind": type(exc).__name__, "party": None, "round": round, "reason": str(exc),
            "message": f"{type(exc).__name__}: {exc}"}


def raise_recorded(err, info, backend):
    """Raise the :func:`error_record` ``err`` again in the command: PartyLost / PartyRefused
    (carrying ``info`` as ``.flower``), anything else as one InputError line."""
    from ..errors import InputError

    if err["kind"] not in ("PartyLost", "PartyRefused"):
        raise InputError(f"the {backend} run stopped at round {err['round']}: {err['message']}")
    exc = (PartyRefused if err["kind"] == "PartyRefused" else PartyLost)(
        err["party"], err["round"], err["reason"])
    exc.flower = info
    raise exc


class LinkMeter:
    """Bytes per party and direction: the project's frames and the envelopes carrying them
    (the JSON's ``frames`` and ``flower``)."""

    def __init__(self):
        self.frames = defaultdict(int)      # (party, direction) -> frame bytes
        self.flower = defaultdict(int)      # (party, direction) -> envelope bytes
        self.messages = defaultdict(int)
        self.rounds = defaultdict(lambda: defaultdict(int))   # round -> (party, dir) -> envelope

    def record(self, party, direction, round, frame_len, envelope_len):
        key = (int(party), direction)
        self.frames[key] += int(frame_len)
        self.flower[key] += int(envelope_len)
        self.messages[key] += 1
        self.rounds[int(round)][key] += int(envelope_len)

    def summary(self, parties: int) -> dict:
        out = {}
        for dr in (UP, DOWN):
            out[dr] = {str(k): {"frames": self.frames[(k, dr)], "flower": self.flower[(k, dr)],
                                "messages": self.messages[(k, dr)]} for k in range(parties)}
        return out

    def total(self, direction=UP, flower=True) -> int:
        src = self.flower if flower else self.frames
        return sum(v for (p, dr), v in src.items() if dr == direction)

    def totals(self) -> dict:
        """Envelope bytes and the frames they carried, per direction, over all parties."""
        return {"uplink": self.total(UP), "downlink": self.total(DOWN),
                "uplink_frames": self.total(UP, flower=False),
                "downlink_frames": self.total(DOWN, flower=False)}


class _OwnProcess:
    """What a party role would not share with the server in a process of its own: the global
    random generators (Python's, numpy's, torch's when loaded) and torch's thread count.
    Saved before a party handles a message and restored after, so that hosting the roles in
    this process changes nothing in the server's process (a role that builds a torch model
    draws from the global generator, as it would in its own ClientApp)."""

    def __enter__(self):
        import random
        import sys

        import numpy as np

        self._py, self._np = random.getstate(), np.random.get_state()
        self._torch = sys.modules.get("torch")
        if self._torch is not None:
            self._trng = self._torch.get_rng_state()
            self._threads = self._torch.get_num_threads()
        return self

    def __exit__(self, *exc):
        import random

        import numpy as np

        random.setstate(self._py)
        np.random.set_state(self._np)
        if self._torch is not None:
            self._torch.set_rng_state(self._trng)
            self._torch.set_num_threads(self._threads)
        return False


class LocalLink:
    """A link to party roles hosted in this process (see module docstring).

    ``configs[k]`` is party k's own config (as a SuperNode's node config); each party's state
    between messages is kept pickled, as a SuperNode keeps it, so a role behaves here exactly as
    in a ClientApp.  A role that raises anything but a refusal is reported as lost, as Flower
    reports a ClientApp that failed."""

    def __init__(self, configs, *, build=None):
        from .families import build_party

        self.configs = [dict(c) for c in configs]
        self.K = len(self.configs)
        self.build = build or build_party
        self.meter = LinkMeter()
        self.lost = []
        self._store = [{} for _ in self.configs]
        self.node_of = {}

    def connect(self, identify=b""):
        from .roles import answer

        for n, cfg in enumerate(self.configs):
            k = int(answer(self.build, cfg, {}, "hello", identify, 0)["frame"].decode())
            if not 0 <= k < self.K or k in self.node_of:
                raise PartyLost(k, None, f"node {n} says it is party {k}; parties must be "
                                f"0..{self.K - 1}, each once")
            self.node_of[k] = n

    def exchange(self, requests, round: int, kinds=False, tolerate=False) -> list:
        from .roles import answer

        out = []
        for k, frame, kind in requests:
            n = self.node_of.get(k, k)
            self.meter.record(k, DOWN, round, len(frame), len(frame))
            try:
                with _OwnProcess():
                    rec = answer(self.build, self.configs[n], self._store[n], kind, frame,
                                 round)
            except Exception as exc:                 # a failed role: lost, as on Flower
                err = PartyLost(k, round, f"{type(exc).__name__}: {exc}")
                if not tolerate:
                    raise err from exc
                self.lost.append((k, round, err.reason))
                out.append(None)
                continue
            if "refused" in rec:
                if not tolerate:
                    raise PartyRefused(k, round, rec["refused"])
                self.lost.append((k, round, rec["refused"]))
                out.append(None)
                continue
            self.meter.record(k, UP, round, len(rec["frame"]), len(rec["frame"]))
            out.append((rec["frame"], rec["kind"]) if kinds else rec["frame"])
        return out
