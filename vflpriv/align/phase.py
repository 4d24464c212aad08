"""The private set intersection as the first phase of a deployed run: the protocol of
:mod:`.psi`, each party on its own machine reading its own file, every message relayed by the
server over the run's link and counted by the same :class:`~vflpriv.vertical.transport.Meter`
(the same frames, hence the same bytes, as :func:`vflpriv.align.align` in process).

Four exchanges (the server relays; L is the label party, j every other party):

1. ``setup`` to every party: each reads its own file and checks it against its schema (a bad
   file is its refusal, naming the file and the column, before anything is sent); L draws the
   run nonce and answers ``PsiSetup`` and its points in its file order.
2. ``psi_points`` to every j: L's setup and points; j answers its own points, shuffled, and
   the tags of L's points raised to its key.
3. ``psi_match`` to L: every j's points and tags; L matches, keeps its rows of the common IDs
   and answers each j's ``PsiRows``.
4. ``psi_rows`` to every j: its positions; j keeps its rows of the common IDs.

Each party then holds its own columns of the common rows in L's order, in a file on its own
disk (:func:`aligned_path`); the server learns the set sizes and n = |C| (the count of the
``PsiRows``), and what it relays is the points, tags and positions of the in-process protocol.
A party's reply also carries the seconds it spent (``party_seconds``).
"""
from __future__ import annotations

import os
import re
import struct
import tempfile
import time

import numpy as np

from ..errors import InputError
from ..runtime.roles import Refused
from ..vertical.transport import DOWN, UP, Meter
from . import messages as M

#: bundle entry carrying the seconds a party spent on a message (not a party index)
SECONDS = 0xFFFF


def _bundle():
    from ..vertical.secure.mpc.channel import pack_bundle, unpack_bundle

    return pack_bundle, unpack_bundle


def aligned_path(cfg, run_id, k) -> str:
    """Where party k keeps its columns of the common rows of run ``run_id``: under its node
    config's ``spill-dir`` (default: the system's temporary folder), named by the run."""
    run = re.sub(r"[^A-Za-z0-9_-]", "", str(run_id or ""))[:32] or "run"
    base = cfg.get("spill-dir") or tempfile.gettempdir()
    return os.path.join(base, f"vflpriv-aligned-{run}-p{int(k)}.npz")


def map_labels(y, loss):
    """The labels as the loss takes them (the rule of ``vflpriv run``): as they are for least
    squares; two values mapped to -1 and +1 (the larger one) for a classification loss."""
    if loss == "squared":
        return y
    vals = np.unique(y)
    if vals.shape[0] != 2:
        raise Refused(f"the {loss} loss needs two label values, found {vals.shape[0]} among "
                      "the common rows")
    if set(vals.tolist()) == {-1.0, 1.0}:
        return y
    return np.where(y == vals[1], 1.0, -1.0)


# -- party side --------------------------------------------------------------------------------
class PsiPhase:
    """Party k's side of the four exchanges; its secret key, nonce and shuffle are its state
    between messages (they stay on its machine), its table is read again from its own file."""

    def __init__(self, cfg, setup):
        from .psi import default_workers

        self.cfg, self.setup = cfg, setup
        self.k = int(cfg["party"])
        self.leader = int(setup["leader"])
        self.workers = default_workers()
        self.state = {"key": None, "nonce": None, "order": None}

    def table(self):
        """This party's table from its own file, checked against its schema's columns."""
        from .tables import read_party_table

        k, cfg = self.k, self.cfg
        path, idc = cfg["data"], cfg.get("id-column")
        label = cfg.get("label") if k == self.leader else None
        if k == self.leader and not label:
            raise Refused(f"party {k} is the label party but its node config names no label "
                          "column (label=...)")
        t = read_party_table(k, path, idc, label)
        want = list(self.setup["columns"][k])
        if t.columns != want:
            extra = [c for c in t.columns if c not in want]
            missing = [c for c in want if c not in t.columns]
            what = (f"has no column {missing[0]!r} of its schema" if missing else
                    f"has the column {extra[0]!r}, not in its schema" if extra else
                    "has its schema's columns in another order")
            raise InputError(f"party {k}'s file {path!r} {what} (the run's columns of party "
                             f"{k}: {', '.join(want[:8])})")
        return t

    def _check_budget(self):
        """An aligned training run's whole worst-case plan (``setup["plan"]``, as the server
        settled it before the alignment) against this party's own ledger, without reserving it
        (its training role reserves the plan for the counted rows): a party whose budget cannot
        hold the run refuses before the intersection, so nobody learns which IDs it holds."""
        plan = self.setup.get("plan")
        if plan is None:                 # scoring: nothing is released
            return
        from accounting import BudgetExceeded, event_from_dict

        from ..runtime.roles import own_budget

        bf = own_budget(self.cfg, self.setup, create=False)
        try:
            bf.check_plan(event_from_dict(plan), party=self.k, reserve=False)
        except BudgetExceeded as exc:
            raise Refused(f"party {self.k} refuses the run before the alignment: {exc}") from None

    def _psi(self, ids):
        from .psi import PsiParty

        p = PsiParty(self.k, ids, self.workers)
        if self.state["key"] is not None:
            p._key = self.state["key"]
        else:
            self.state["key"] = p._key
        p.nonce, p._order = self.state["nonce"], self.state["order"]
        return p

    def handle(self, kind, frame):
        t0 = time.perf_counter()
        reply = getattr(self, "_" + kind)(frame)
        pack, _ = _bundle()
        return "bundle", pack(reply + [(SECONDS, struct.pack("<d", time.perf_counter() - t0))])

    def _setup(self, frame):
        from .psi import TAG_BYTES, new_nonce

        self._check_budget()             # before any point of its IDs leaves (issue 51)
        t = self.table()                 # every party checks its file before anything is sent
        if self.k != self.leader:
            return []
        p = self._psi(t.ids)
        nonce = self.state["nonce"] = new_nonce()
        K = len(self.setup["columns"])
        return [(self.k, M.encode(M.PsiSetup(nonce, TAG_BYTES, K, self.leader), self.k, 0)),
                (self.k, M.encode(M.PsiPoints(p.own_points(nonce, False)), self.k, 0))]

    def _psi_points(self, frame):
        _, unpack = _bundle()
        (_, sf), (_, pf) = unpack(frame)
        setup, pts = M.decode(sf)[0], M.decode(pf)[0].points
        p = self._psi(self.table().ids)
        own = p.own_points(setup.nonce, True)
        self.state.update(nonce=setup.nonce, order=p._order)
        tg = p.leader_tags(pts, setup.tag_bytes)
        return [(self.k, M.encode(M.PsiPoints(own), self.k, 0)),
                (self.k, M.encode(M.PsiTags(tg, setup.tag_bytes), self.k, 0))]

    def _psi_match(self, frame):
        _, unpack = _bundle()
        entries = unpack(frame)
        t = self.table()
        p = self._psi(t.ids)
        found = {}
        for (j, pf), (_, tf) in zip(entries[0::2], entries[1::2]):
            tg = M.decode(tf)[0]
            found[j] = p.match(M.decode(pf)[0].points, tg.tags, tg.tag_bytes)
            if not (found[j] >= 0).any():
                raise InputError(f"party {j}'s file shares no ID with the label party's file "
                                 f"{t.path!r}")
        common = np.ones(t.n, dtype=bool)
        for pos in found.values():
            common &= pos >= 0
        if not common.any():
            raise InputError(f"no ID of the label party's file {t.path!r} is in every party's "
                             "file")
        rows = np.flatnonzero(common)
        from ..runtime import partylog

        partylog.say(self.cfg, f"run {str(self.setup.get('run_id'))[:12]}: {rows.size} of its "
                               f"{t.n} rows are in every party's file (the intersection)")
        self._keep(t, rows)
        return [(j, M.encode(M.PsiRows(pos[rows]), self.k, 0)) for j, pos in found.items()]

    def _psi_rows(self, frame):
        msg = M.decode(frame)[0]
        t = self.table()
        rows = self._psi(t.ids).own_rows(msg.rows)
        from ..runtime import partylog

        partylog.say(self.cfg, f"run {str(self.setup.get('run_id'))[:12]}: {len(rows)} of its "
                               f"{t.n} rows are in every party's file (the intersection)")
        self._keep(t, rows)
        return []

    def _keep(self, t, rows):
        """This party's columns of the common rows (and, at L, the labels as the loss takes
        them) written to its own disk, atomically; a local warning if the bounds clip much."""
        from ..runtime.partydata import save_party_data
        from ..vertical.clipshare import warn_if_clipped

        X = t.X[rows]
        y = None if t.y is None else map_labels(t.y[rows], self.setup["loss"])
        ranges = self.setup.get("ranges")
        if ranges:                 # the description's public ranges of this party's columns
            from ..data.ranges import apply_ranges
            from ..runtime import partylog

            low, high = np.asarray(ranges[self.k], dtype=np.float64).T
            X, _, clipped = apply_ranges(X, low, high)
            if clipped.sum():
                worst = sorted(zip(clipped.tolist(), t.columns), reverse=True)[:5]
                partylog.say(self.cfg, f"run {str(self.setup.get('run_id'))[:12]}: "
                                       f"{int(clipped.sum())} of its values outside their "
                                       f"declared ranges clipped ("
                                       + ", ".join(f"{c} {n}" for n, c in worst if n) + ")")
        fb, lb = self.setup.get("bounds") or (None, None)
        if fb is not None:
            warn_if_clipped(self.k, X, y, fb, lb)
        path = aligned_path(self.cfg, self.setup.get("run_id"), self.k)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = path[:-4] + ".tmp.npz"
        save_party_data(tmp, X, np.zeros(0) if y is None else y)
        os.replace(tmp, path)


# -- server side -------------------------------------------------------------------------------
def split_seconds(parts, secs, k) -> list:
    """The frames of party k's bundled reply (``parts``: its ``(tag, bytes)`` pairs), its
    reported seconds (tag ``SECONDS``) added to ``secs[k]`` on the way."""
    out = []
    for p, b in parts:
        if p == SECONDS:
            secs[k] += struct.unpack("<d", b)[0]
        else:
            out.append(b)
    return out


def relay(meter, decode, src, dst, frame, expect, *, own=False):
    """The server's check of a frame party ``src`` hands it for ``dst``: a message of type
    ``expect`` (with ``own``: also sent in ``src``'s own name), metered up from src and down to
    each receiver; returns the decoded message."""
    msg, party, _ = decode(frame)
    if not isinstance(msg, expect) or (own and party != src):
        what = f" of party {party}, not its" if own else ", not a"
        raise RuntimeError(f"party {src} sent a {type(msg).__name__}{what} {expect.__name__}")
    meter.record(src, UP, 0, len(frame), type(msg).__name__)
    for d in dst:
        meter.record(d, DOWN, 0, len(frame), None)
    return msg


def serve_psi(link, setup: dict, meter: Meter | None = None) -> dict:
    """The four exchanges over ``link`` (connected), relayed and metered by the server; returns
    ``{"n", "sizes", "meter", "party_seconds", "tail"}`` (``setup``: the public setup of the
    phase; ``tail``: what each party j != L answered to its positions besides its seconds, by
    party: nothing in the PSI itself, a next phase's first frames if the party's role adds
    them, as a scoring party its key offer)."""
    import json

    pack, unpack = _bundle()
    meter = Meter() if meter is None else meter
    K, L = len(setup["columns"]), int(setup["leader"])
    others = [j for j in range(K) if j != L]
    secs = [0.0] * K

    def split(k, reply):
        return split_seconds(unpack(reply), secs, k)

    def relayed(src, dst, frame, expect):
        return relay(meter, M.decode, src, dst, frame, expect)

    blob = json.dumps(setup).encode()
    replies = link.exchange([(k, blob, "setup") for k in range(K)], 0)
    sf, pf = split(L, replies[L])
    for j in others:
        split(j, replies[j])
    relayed(L, others, sf, M.PsiSetup)
    sizes = [0] * K
    sizes[L] = len(relayed(L, others, pf, M.PsiPoints).points) // M.POINT_BYTES
    fwd = pack([(L, sf), (L, pf)])
    replies = link.exchange([(j, fwd, "psi_points") for j in others], 0)
    to_leader = []
    for j, r in zip(others, replies):
        jp, jt = split(j, r)
        sizes[j] = len(relayed(j, [L], jp, M.PsiPoints).points) // M.POINT_BYTES
        relayed(j, [L], jt, M.PsiTags)
        to_leader += [(j, jp), (j, jt)]
    (reply,) = link.exchange([(L, pack(to_leader), "psi_match")], 0)
    rows = dict(zip(others, split(L, reply)))
    n = None
    for j in others:
        msg = relayed(L, [j], rows[j], M.PsiRows)
        n = msg.rows.size if n is None else n
    tail = {}
    for j, r in zip(others, link.exchange([(j, rows[j], "psi_rows") for j in others], 0)):
        tail[j] = split(j, r)
    return {"n": int(n), "sizes": sizes, "meter": meter, "party_seconds": secs, "tail": tail}


def close_parties(link, exc=None):
    """After a failure: every party that still answers deletes its aligned rows (a lost party
    is not asked: its host may never answer)."""
    from ..runtime.link import PartyLost

    skip = {exc.party} if isinstance(exc, PartyLost) else set()
    try:
        link.exchange([(k, b"", "close") for k in range(link.K) if k not in skip], 0,
                      tolerate=True)
    except Exception:           # cleanup only: the run's own error is what is reported
        pass


def record_failure(out, exc, phase, link):
    """``out`` of a deployed server role that failed in ``phase`` (None: before any party was
    reached): the error record naming the phase, and the parties told to clean up."""
    from ..runtime.link import error_record

    out["error"] = error_record(exc, 0)
    out["error"]["phase"] = phase
    if phase is not None:
        close_parties(link, exc)
    return out
