"""Private entity alignment: the rows common to every party, found without pooling the tables.

    tables = read_party_tables({0: "bank.csv", 1: "telco.csv"}, "customer_id", "y", 0)
    al = align(tables, leader=0)         # ECDH-PSI (:mod:`.psi`), every frame metered
    al.rows[k]                            # party k's rows of the common IDs, in the leader's order
    al.report()                           # the JSON ``alignment`` section

Each party reads only its own file (:mod:`.tables`); the protocol and what each party learns
are in :mod:`.psi` and docs/alignment.md.  In process the parties are objects in one process
(a simulation of the consortium), but every message is a real frame relayed through the server
and counted by the same :class:`~vflpriv.vertical.transport.Meter` as the training.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError
from .tables import PartyTable, parse_party_data, read_party_table, read_party_tables

PROTOCOL = "ECDH-PSI (X25519, BLAKE2b), led by the label party"


@dataclass
class Alignment:
    """Party k's rows ``rows[k]`` (indices into its own table) of the common IDs, all in the
    leader's file order; what it cost (framed bytes per party and direction, seconds)."""

    rows: list
    leader: int
    meter: object
    party_seconds: list
    seconds: float
    tag_bytes: int
    sizes: list = field(default_factory=list)

    @property
    def intersection_size(self) -> int:
        return int(self.rows[self.leader].size)

    def report(self) -> dict:
        return {"protocol": PROTOCOL, "leader": self.leader,
                "intersection_size": self.intersection_size, "party_rows": list(self.sizes),
                "bytes": self.meter.framed_bytes(len(self.rows)),
                "seconds": round(self.seconds, 4),
                "party_seconds": [round(s, 4) for s in self.party_seconds],
                "tag_bytes": self.tag_bytes,
                "messages_by_type": {k: list(v) for k, v in self.meter.by_type.items()}}


def align(tables, leader: int, *, meter=None, workers=None) -> Alignment:
    """Run the PSI of :mod:`.psi` among the parties of ``tables`` (one :class:`PartyTable` or
    list of IDs per party), led by ``leader``; every message is framed, relayed through the
    server and metered in ``meter`` (a new one by default).  An empty intersection is refused,
    naming the files, before anything else happens."""
    from ..vertical.transport import Meter
    from ..vertical.transport import relay as relayed
    from . import messages as M
    from ..errors import check_count
    from .psi import MAX_WORKERS, TAG_BYTES, PsiParty, default_workers, new_nonce

    meter = Meter() if meter is None else meter
    workers = default_workers() if workers is None else check_count("--workers", workers,
                                                                    MAX_WORKERS)
    ids = [t.ids if isinstance(t, PartyTable) else list(t) for t in tables]
    names = [f"party {k}'s file {t.path!r}" if isinstance(t, PartyTable) else f"party {k}"
             for k, t in enumerate(tables)]
    K = len(ids)
    if not 0 <= leader < K:
        raise InputError(f"the leader {leader} is not a party (0..{K - 1})")
    parties = [PsiParty(k, ids[k], workers) for k in range(K)]
    secs = [0.0] * K
    t_start = time.perf_counter()

    def timed(k, fn, *a):
        t0 = time.perf_counter()
        out = fn(*a)
        secs[k] += time.perf_counter() - t0
        return out

    def relay(src, dst, msg):
        return relayed(meter, msg, src, dst, M.decode)

    L = parties[leader]
    nonce = new_nonce()
    lead_pts = timed(leader, L.own_points, nonce, False)
    others = [j for j in range(K) if j != leader]
    setup = relay(leader, others, M.PsiSetup(nonce, TAG_BYTES, K, leader))
    got_pts = relay(leader, others, M.PsiPoints(lead_pts)).points
    found = {}
    for j in others:
        pj = parties[j]
        own = timed(j, pj.own_points, setup.nonce, True)
        my_pts = relay(j, leader, M.PsiPoints(own)).points
        tg = relay(j, leader, M.PsiTags(timed(j, pj.leader_tags, got_pts, setup.tag_bytes),
                                        setup.tag_bytes))
        found[j] = timed(leader, L.match, my_pts, tg.tags, tg.tag_bytes)
        if not (found[j] >= 0).any():
            raise InputError(f"{names[j]} shares no ID with the label party's ({names[leader]})")
    common = np.ones(len(ids[leader]), dtype=bool)
    for pos in found.values():
        common &= pos >= 0
    if not common.any():
        raise InputError("no ID is in every party's file (" + "; ".join(names) + ")")
    lead_rows = np.flatnonzero(common)
    rows = [None] * K
    rows[leader] = lead_rows
    for j, pos in found.items():
        msg = relay(leader, j, M.PsiRows(pos[lead_rows]))
        rows[j] = timed(j, parties[j].own_rows, msg.rows)
    return Alignment(rows=rows, leader=leader, meter=meter, party_seconds=secs,
                     seconds=time.perf_counter() - t_start, tag_bytes=TAG_BYTES,
                     sizes=[len(i) for i in ids])


__all__ = [
    "PROTOCOL",
    "Alignment",
    "PartyTable",
    "align",
    "aligned_data",
    "aligned_ids",
    "parse_party_data",
    "read_party_table",
    "read_party_tables",
]


def aligned_data(tables, alignment: Alignment):
    """The :class:`~vflpriv.data.VerticalData` of the common rows (the leader's order): party
    k's columns are block k, the label is the leader's.  In process this joins the parties'
    aligned columns in one object: the simulation of a consortium whose parties each keep
    theirs (on Flower each party's node reads only its own)."""
    from ..data import VerticalData

    L = alignment.leader
    mats = [t.X[alignment.rows[k]] for k, t in enumerate(tables)]
    blocks, start = [], 0
    for m in mats:
        blocks.append(np.arange(start, start + m.shape[1]))
        start += m.shape[1]
    names = [c for t in tables for c in t.columns]
    return VerticalData(np.hstack(mats), tables[L].y[alignment.rows[L]], blocks,
                        feature_names=names, party_names=[str(t.party) for t in tables])


def aligned_ids(tables, alignment: Alignment) -> list:
    """The common IDs in the leader's order (what the leader knows; the JSON ``ids``)."""
    L = alignment.leader
    ids = tables[L].ids
    return [ids[int(r)] for r in alignment.rows[L]]
