"""A secure run's party role over a link and the server's side of it, as every path of
dp-bcfw-secure has them (least squares adds its rounds, ``squares/roles.py``; the ssp path its
statistics, the glm path its rounds).

A link carries messages only between the server and each party, so the party-to-party
messages of the secure product (each masked block to its helper, masked vectors, result shares
from the helpers) are relayed by the server, sealed end to end between the two parties
(``mpc/channel.py``: X25519, HKDF-SHA256, ChaCha20-Poly1305 from ``cryptography``).  Each party
enforces its own budget on its own ledger: it charges what the server announces before it draws
any noise, and serves only what it charged.
"""
from __future__ import annotations

import json
import os
import struct

from ....errors import InputError
from ....runtime.link import error_record
from ....runtime.roles import PartyRole, Refused, own_budget
from ...transport import DOWN, UP, Meter
from ..checkpoints.saves import PartySaves
from ..mpc import messages as SM
from ..mpc.beaver import block_helper
from ..mpc.channel import OVERHEAD, Channel, new_key_pair, pack_bundle, unpack_bundle
from ..mpc.phased import PhasedLink
from ..mpc.store import SpilledBlocks

_RANGE = struct.Struct("<QQ")
#: the offline phase sends a party's masked block in pieces of at most about this many bytes
#: per message (each party's reply, and each relayed delivery), well below gRPC's message limit.
#: Not larger: on Flower's simulation, 33.6 MB (2^25-byte) messages cost the server process kernel time
#: (n = 1e5, d = 2000, K = 4: setup 91 s with 33.6 MB pieces, 60 s with 8.4 MB; docs/flower.md)
OFFLINE_FRAME_BYTES = 8 * 2 ** 20


class ProductPartyRole(PartySaves, PartyRole):
    """Party k of a secure run over a link, as every path has it: its channel keys and its
    peers' (pinned when its node config says so), the offline phase in pieces (the masked
    blocks it receives kept on its own disk), its three parts in a product (holder, helper,
    peer), each gated by its own ledger, and its state between messages.  A path's role sets
    ``self.party`` (a :class:`~.party.ProductParty`) and adds its own steps (:meth:`step`)."""

    #: the messages whose answer is checked against, or charged to, the party's own ledger; only
    #: these open it (reading a ledger costs milliseconds, and the offline phase and the secure
    #: products are many messages that release nothing by themselves)
    CHARGED = ("setup", "new_features")
    #: the party's attributes kept between messages (a deployed role is rebuilt per message)
    STATE = ("cross", "masked", "ty")

    def _link_state(self):
        """No keys yet, no peers, no folder of received blocks, no saves, nothing to replay."""
        self.private_key = self.public_key = None
        self.peers = {}
        self.block_dir = None
        self.saved = []              # the rounds of this party's own saves on its disk
        self.replay = None           # [next, end] of its ledger's records to replay on resume

    def _channel(self):
        return Channel(self.k, self.private_key, self.peers, self.setup.get("run_id") or "")

    def handle(self, kind, frame, t):
        p = self.party
        t0 = self._resume_at_setup() if kind == "setup" else None
        if kind in self.CHARGED and p.private:
            # on a resumed run its records of the redone rounds are replayed (checkpoints/saves.py)
            p.budget = self._replaying(own_budget(self.cfg, self.setup))
        if kind == "setup":
            if p.budget is not None:
                self.check_own_plan(t0)
            self.private_key, self.public_key = new_key_pair()
            return "key", self._offer()
        if kind == "save":
            self._save(int(frame.decode()))
            return "ok", b""
        if kind == "keys":           # pinned peers' offers are checked (vflpriv.runtime.keys)
            from ....runtime.keys import KeyRefused, accept_offers, parse_pins

            try:
                self.peers = accept_offers(unpack_bundle(frame), self.k, self.public_key,
                                           self.setup.get("run_id") or "",
                                           parse_pins(self.cfg.get("peer-fingerprints")))
            except KeyRefused as exc:
                raise Refused(str(exc)) from None
            return "ok", b""
        ch = self._channel()
        if kind == "offline":
            return "bundle", self._offline(ch, frame)
        if kind == "close":
            self._remove_blocks()
            return "ok", b""
        if kind == "new_features":
            p.charge_features(SM.decode(frame)[0], t)
            self._replayed(p.budget)
            return "ok", b""
        if kind == "holder":
            # each peer's own masked column (its own mask: mpc/beaver.py), then the share for the
            # block it helps
            entries = unpack_bundle(frame)
            i = struct.unpack("<I", entries[0][1])[0]
            triples = {q: SM.decode(b)[0] for q, b in entries[1:]}
            if set(triples) != set(self._z_receivers(i)):
                raise Refused(f"party {self.k}: asked to mask feature {i} for parties "
                              f"{sorted(triples)}; it sends it to {self._z_receivers(i)} only")
            zs, shares = p.holder_messages(i, triples)
            out = [(q, ch.seal(q, "MaskedVector", t, SM.encode(zs[q], self.k, t)))
                   for q in sorted(zs)]
            out += [(q, ch.seal(q, "ResultShare", t, SM.encode(shares[q], self.k, t)))
                    for q in sorted(shares)]
            return "bundle", pack_bundle(out)
        if kind == "helper":          # h(k) != l: the share with k's noise, for k
            res = p.helper_share(SM.decode(frame)[0])
            q = p.helpee
            return "bundle", pack_bundle([(q, ch.seal(q, "ResultShare", t,
                                                      SM.encode(res, self.k, t)))])
        if kind == "peer":            # z from the holder l, the share from the helper h(k)
            (_, tp), (src, zb), (hsrc, rb) = unpack_bundle(frame)
            z = SM.decode(ch.open(src, "MaskedVector", t, zb))[0]
            res = SM.decode(ch.open(hsrc, "ResultShare", t, rb))[0]
            p.peer_output(z, SM.decode(tp)[0], res)
            return "ok", b""
        return self.step(kind, frame, t)

    def step(self, kind, frame, t):
        """A path's own steps beside the products (least squares: ``select``, ``sums``)."""
        raise Refused(f"party {self.k}: unknown request {kind!r}")

    def _offline(self, ch, frame):
        """One piece of the offline phase: keep the peers' chunks the server relays (each in a
        file on this party's disk, :class:`.store.SpilledBlocks`; the state names the files, so
        it stays small), then send rows [start, stop) of this party's masked block, sealed for
        each peer."""
        start, stop = _RANGE.unpack_from(frame)
        for src, blob in unpack_bundle(frame[_RANGE.size:]):
            msg = SM.decode(ch.open(src, "MaskedBlock", 0, blob))[0]
            store = self.party.masked.get(src)
            try:
                if store is None:
                    store = self.party.masked[src] = SpilledBlocks(self._block_dir(), src)
                store.append(msg.row, msg.block)
            except OSError as exc:       # e.g. a full disk: 8 n p_l bytes per peer l
                raise Refused(f"party {self.k} cannot keep the masked blocks in "
                              f"{self._block_dir()!r}: {exc}") from None
        out = []
        if stop > start:
            for row, block in self.party.masked_blocks(start, stop):
                f = SM.encode(SM.MaskedBlock(row, block), self.k, 0)
                out += [(q, ch.seal(q, "MaskedBlock", 0, f)) for q in self._receivers()]
        return pack_bundle(out)

    def _z_receivers(self, i):
        """Who gets this party's masked column of feature i (or label), each under its own
        mask: every other party (the ssp path's role: the parties of its product only,
        ``ssp/roles.py``); a request naming other peers is refused."""
        return [q for q in range(int(self.setup["K"])) if q != self.k]

    def _receivers(self):
        """Who gets this party's masked block: its block's helper h(k) only (the logistic
        path's role sends it to the two holders of d's shares, ``glm/roles.py``)."""
        return [block_helper(self.k, int(self.setup["K"]))]

    def _block_dir(self):
        """This party's folder for the masked blocks it receives: under its node config's
        ``spill-dir`` (default: the system's temporary folder), named by the run."""
        if self.block_dir is None:
            import re
            import tempfile

            run = re.sub(r"[^A-Za-z0-9_-]", "", str(self.setup.get("run_id") or ""))[:16]
            parent = self.cfg.get("spill-dir") or None
            try:
                if parent is not None:
                    os.makedirs(parent, exist_ok=True)
                self.block_dir = tempfile.mkdtemp(prefix=f"vflpriv-masked-{run}-p{self.k}-",
                                                  dir=parent)
            except OSError as exc:
                raise Refused(f"party {self.k} cannot keep the masked blocks in spill-dir "
                              f"{parent or tempfile.gettempdir()!r}: {exc}") from None
        return self.block_dir

    def _remove_blocks(self):
        """The run is over: the received masked blocks are deleted from this party's disk."""
        for store in self.party.masked.values():
            store.close()
        self.party.masked = {}
        if self.block_dir is not None:
            import shutil

            shutil.rmtree(self.block_dir, ignore_errors=True)
            self.block_dir = None

    def _offer(self):
        """This party's key offer: its ephemeral public key, signed by its identity key when
        its node config names one (``identity-key``; :mod:`.keys`)."""
        from ....runtime.keys import load_identity_of, make_offer, unpinned_warning

        ident = load_identity_of(self.cfg, self.k, Refused)
        if ident is None or not self.cfg.get("peer-fingerprints"):
            import sys

            # loud, in the party's own log: this deployment trusts the server with the keys
            sys.stderr.write(unpinned_warning(self.k, "key offers"))
        return make_offer(self.public_key, ident, self.setup.get("run_id") or "", self.k)

    def get_state(self):
        p = self.party
        st = {a: getattr(p, a) for a in self.STATE}
        from ....noise import state as noise_state

        st["rng"] = noise_state(p.rng)
        st["keys"] = (self.private_key, self.public_key, self.peers)
        st["block_dir"] = self.block_dir
        st["saved"], st["replay"] = self.saved, self.replay
        return st

    def set_state(self, st):
        p = self.party
        for a in self.STATE:
            if a in st:
                setattr(p, a, st[a])
        if st["rng"] is not None:
            from ....noise import restore as noise_restore

            noise_restore(p.rng, st["rng"])
        self.private_key, self.public_key, self.peers = st["keys"]
        self.block_dir = st.get("block_dir")
        self.saved, self.replay = st.get("saved", []), st.get("replay")


# -- server side --------------------------------------------------------------------------------
class LinkParties:
    """The server's steps that every path shares (setup, offline, new_features, product, close,
    save), as :class:`~vflpriv.vertical.secure.local.LocalParties` takes them, over a runtime
    link.  ``meter`` counts the protocol's frames as in process (a relayed
    party-to-party frame as its sender's uplink and its receiver's downlink, its plaintext
    length: ciphertext minus the 28 bytes of nonce and tag); ``link.meter`` the Flower messages."""

    def __init__(self, link, public, extra, sizes, frame_bytes=None):
        self.link, self.meter, self.peer_bytes = link, Meter(), 0
        self.public = dict(public, **extra)
        self.K, self.n, self.sizes = int(public["K"]), int(public["n"]), [int(v) for v in sizes]
        self.frame_bytes = OFFLINE_FRAME_BYTES if frame_bytes is None else int(frame_bytes)
        self.pieces = 0

    def _down(self, k, msg, t):
        f = SM.encode(msg, k, t)
        self.meter.record(k, DOWN, t, len(f), type(msg).__name__)
        return f

    def _peer(self, src, dst, t, blob, kind):
        n = len(blob) - OVERHEAD
        self.meter.record(src, UP, t, n, kind)
        self.meter.record(dst, DOWN, t, n, None)
        self.peer_bytes += n

    def setup(self, msgs):
        reqs = []
        for k in range(self.K):
            f = self._down(k, msgs[k], 0)
            reqs.append((k, json.dumps(dict(self.public, setup_frame=f.hex())).encode(),
                         "setup"))
        keys = self.link.exchange(reqs, 0)
        bundle = pack_bundle([(k, keys[k]) for k in range(self.K)])
        self.link.exchange([(k, bundle, "keys") for k in range(self.K)], 0)

    def offline_fanout(self):
        """How many blocks' rows one offline message carries at most: a party's reply its own
        block for its one receiver, h(k), and a relayed delivery its helpee's block (the
        logistic path's roles: K - 1, ``glm/roles.py``)."""
        return 1

    def offline_rows(self):
        """Rows of every masked block per offline message: a party's reply carries them for its
        receivers, a relayed delivery its senders' rows (``offline_fanout`` blocks at most),
        both at most about ``frame_bytes``; a whole number of the parties' chunks when that fits
        (so the frames are those of the in-process run)."""
        from ..base.blocks import CHUNK_ROWS

        per_row = 8 * max(1, self.offline_fanout()) * max(self.sizes)
        rows = max(1, self.frame_bytes // per_row)
        if rows >= CHUNK_ROWS:
            rows -= rows % CHUNK_ROWS
        return min(rows, max(1, self.n))

    def offline(self):
        """The masked blocks E_k, each party to its receivers (least squares: to its block's
        helper h(k) only), in pieces of ``offline_rows()`` rows: message i asks each party for
        its rows of piece i and hands it its senders' sealed rows of piece i - 1 (one more
        message delivers the last piece).  No message
        grows with n, and each party writes what it receives to its own disk."""
        rows = self.offline_rows()
        starts = list(range(0, self.n, rows))
        inbox = {k: [] for k in range(self.K)}
        for i in range(len(starts) + 1):
            span = (starts[i], min(self.n, starts[i] + rows)) if i < len(starts) else (0, 0)
            reqs = [(k, _RANGE.pack(*span) + pack_bundle(inbox[k]), "offline")
                    for k in range(self.K)]
            inbox = {k: [] for k in range(self.K)}
            for src, b in enumerate(self.link.exchange(reqs, 0)):
                for dst, blob in unpack_bundle(b):
                    self._peer(src, dst, 0, blob, "MaskedBlock")
                    inbox[dst].append((src, blob))
        self.pieces = len(starts)

    def close(self, tolerate=False, skip=()):
        """The run is over: every party deletes the masked blocks it kept (``tolerate``: after
        a failure, each party that still answers; ``skip``: parties not to ask)."""
        self.link.exchange([(k, b"", "close") for k in range(self.K) if k not in skip], 0,
                           tolerate=tolerate)

    def new_features(self, holders, t):
        self.link.exchange([(k, self._down(k, SM.NewFeatures(holders), t), "new_features")
                            for k in range(self.K)], t)

    def product(self, l, i, to_holder, to_helper, to_peer, t):
        """As :meth:`.local.LocalParties.product`: one exchange asks the holder l (each peer's
        own masked column, the share for the block it helps) and, at once, the helper h(k) of
        every other block (its share for k); a second hands each k its triple, z_k and its
        helper's share."""
        others = sorted(to_holder)            # every peer: its mask's key goes to the holder
        own = [k for k in others if isinstance(to_holder[k], SM.TripleToHolder)]
        helper = {k: (l if k in own else block_helper(k, self.K)) for k in others}
        entries = [(l, struct.pack("<I", int(i)))] + \
            [(k, self._down(l, to_holder[k], t)) for k in others]
        reqs = [(l, pack_bundle(entries), "holder")] + \
            [(helper[k], self._down(helper[k], to_helper[k], t), "helper")
             for k in sorted(to_helper)]
        replies = self.link.exchange(reqs, t)
        got = unpack_bundle(replies[0])
        if len(got) != len(others) + len(own):
            raise InputError(f"party {l} answered {len(got)} messages for feature {i}, not "
                             f"{len(others) + len(own)}")
        z = dict(got[:len(others)])
        r = dict(got[len(others):])
        for k, reply in zip(sorted(to_helper), replies[1:]):
            r.update(unpack_bundle(reply))
        if set(z) != set(others) or set(r) != set(others):
            raise InputError(f"the answers for party {l}'s feature {i} do not address its "
                             "peers")
        for k in others:
            self._peer(l, k, t, z[k], "MaskedVector")
        for k in others:
            self._peer(helper[k], k, t, r[k], "ResultShare")
        self.link.exchange([(k, pack_bundle([(k, self._down(k, to_peer[k], t)), (l, z[k]),
                                             (helper[k], r[k])]), "peer") for k in others], t)

    def save(self, t):
        """Every party saves its own state after round t, on its own disk (before the
        server's checkpoint of round t is written; ``saves.saving``)."""
        self.link.exchange([(k, str(int(t)).encode(), "save") for k in range(self.K)], t)

    def ledgers(self):
        return None


def serve_run(connect, spec, progress, parties_cls, family, loop) -> dict:
    """What every secure server role does around its loop: the link (timed by phase), the
    server's budget filter over its ledger (private runs), the parties reached through
    ``parties_cls`` (family ``family``), the rounds reported, and on any error a record of it
    and the masked blocks removed at the parties that still answer.  ``loop(remote, on_round,
    budget)`` runs the rounds and returns the fields it adds to the result."""
    import time

    K = len(spec["blocks"])
    started = time.time()
    link = PhasedLink(connect(K))
    out = {"t": 0, "error": None}
    state = {}
    try:
        link.connect(b"")
        budget = None
        if spec["private"]:
            from accounting import BudgetFilter, Ledger

            budget = BudgetFilter(Ledger(spec["ledger"], run_id=spec["run_id"]),
                                  *spec["budget"], accountant=spec["accountant"])

        def remote(public):
            state["parties"] = parties_cls(link, public, {
                "family": family, "iterations": spec["iterations"], "run_id": spec["run_id"],
                "accountant": spec["accountant"]}, [len(b) for b in spec["blocks"]],
                spec.get("offline_frame_bytes"))
            return state["parties"]

        def on_round(t, _):
            out["t"] = t + 1
            if progress is not None:
                progress(t + 1)

        out.update(loop(remote, on_round, budget))
    except Exception as exc:
        out["error"] = error_record(exc, out["t"])
        _remove_blocks_after(state.get("parties"), exc)
    out["flower"] = link.meter.summary(K)
    out["flower_totals"] = link.meter.totals()
    out["phases"] = dict(link.phases, started=started)
    return out


def _remove_blocks_after(parties, exc):
    """After a failed run, the parties that still answer delete their masked blocks.  A lost
    party is not asked (its host may never answer, and the message would wait out the reply
    timeout): its blocks stay in its ``spill-dir``, in a folder named by the run id."""
    from ....runtime.link import PartyLost

    if parties is None:
        return
    try:
        parties.close(tolerate=True, skip={exc.party} if isinstance(exc, PartyLost) else ())
    except Exception:          # cleanup only: the run's own error is what is reported
        pass


class _Shape:
    """The server's view of the data for run_secure: sizes only (no A, no y)."""

    def __init__(self, shape):
        self.n, self.K, self.d, self.blocks = shape.n, shape.K, shape.d, shape.blocks


def pin_identities(run_dir, cfgs, pinning, parties=None):
    """Key pinning in a description for separate machines (issues 32, 49): each party makes
    its own Ed25519 identity key on its own machine (``vflpriv flower identity``) and sends only
    its fingerprint; ``pinning`` (:class:`~vflpriv.runtime.keys.Pinning`) carries them.  Each
    node config of ``parties`` (default: every one) names where its party keeps its key
    (``identity-key``: ``pinning.keys[k]``, else ``party<k>.key`` beside the node config) and
    pins every other such party's fingerprint (``peer-fingerprints``).  No private key is ever
    written here.  A party without a fingerprint is refused (:class:`InputError`, naming it)
    unless ``pinning.unpinned``: then every node config says ``unpinned = true`` and every node
    warns in its log."""
    from ....runtime.keys import missing_fingerprint, pins_text

    parties = sorted(int(c["party"]) for c in cfgs) if parties is None else sorted(parties)
    if pinning is None or not hasattr(pinning, "missing"):
        raise InputError("a dp-bcfw-secure description pins every party's identity key: give "
                         "each party's fingerprint (--fingerprints K=HEX,...; Pinning) or "
                         "--unpinned")
    missing = pinning.missing(parties)
    if missing:
        raise InputError(missing_fingerprint(missing[0]))
    if pinning.unpinned:
        for cfg in cfgs:
            cfg.pop("identity-key", None)
            cfg.pop("peer-fingerprints", None)
            cfg["unpinned"] = True
        return {}
    fps = {k: pinning.fingerprints[k] for k in parties}
    for cfg in cfgs:
        k = int(cfg["party"])
        if k not in fps:
            continue
        cfg["identity-key"] = pinning.keys.get(k) or os.path.join(run_dir, f"party{k}.key")
        peers = pins_text(fps, k)
        if peers:
            cfg["peer-fingerprints"] = peers
    return fps
