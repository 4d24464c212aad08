"""The in-process link of dp-bcfw-secure: :class:`Network` (frames and meters every message)
and :class:`LocalParties` (the parties as objects in this process).

How the messages travel.  :func:`~.loop.run_secure` is the server's loop, written once; it
talks to the parties only through five steps (setup, offline, select, new_features, product) of
an object handed to it:

* in process (:class:`LocalParties` over :class:`Network`, this module): every message is
  framed, metered by the same :class:`~vflpriv.vertical.transport.Meter` as the other vertical
  algorithms' transport, and decoded by its receiver.  A party-to-party message (masked block,
  masked vector, result share) goes **directly** from the sender's object to the receivers'
  (one immutable frame, shared memory); the server's code never holds it.
* over a runtime link (:class:`~.remote.LinkParties`: ``LocalLink`` for ``backend="local"``, a
  Flower grid for ``flower-sim``/``flower``): a link joins the server to each party only, so a
  party-to-party frame is **sealed end to end** by :class:`~.channel.Channel` (X25519, HKDF,
  ChaCha20-Poly1305; ``cryptography``) and **relayed by the server**, which sees ciphertexts and
  their lengths only.  Its meter counts the plaintext frame (ciphertext minus nonce and tag),
  so both paths count the same bytes (tests/test_runtime_roles.py).

Who sends what to whom (``mpc/beaver.py``): each party k's masked block E_k to one party, its block's
helper h(k) = (k + 1) mod K; per product of party l's feature, the dealer's triple of the block l
helps (l - 1) to l (``TripleToHolder``: it carries the key of v_{l-1}), the keys of the other
peers' masks to l (``VectorKey``) and their triples to their helpers (``TripleToHelper``), l's
masked column z_k = a_j + v_k to each peer k (its own mask: the helper of k's block, itself a
peer, never holds the key of the mask on what it receives), and each block's (noised) result
share from its helper to its owner.  Threat model: the dealer colludes with no party, and no
party k with its helper h(k) (h(k) draws k's noise and holds v_k); no single party learns more
than its releases (docs/sensitivity.md 4.5).

The in-process path stays separate from the roles-over-LocalLink path because the latter
rebuilds each party role and unpickles and pickles its state -- the masked blocks above all --
for every message, as a SuperNode keeps it.  Measured by ``vflpriv bench secure`` (n = 1e4,
d = 200, K = 4, T = 10, seed 0, three runs): 0.32-0.33 s per round over LocalLink against
0.018-0.020 s in process, the same iterate; 2.1-2.2 s of the 3.3-3.5 s spent in the roles is
pickling (11.3 MB per message on average).  docs/vertical.md, "Checkpoints of dp-bcfw-secure".
"""
from __future__ import annotations

from ..transport import DOWN, UP, Meter
from .mpc import messages as SM
from ...runtime import views
from .mpc.beaver import block_helper


class Network:
    """The in-process link: frames every message for real and meters it on the vertical
    transport's :class:`~vflpriv.vertical.transport.Meter`.  A party-to-party message counts as
    uplink of its sender and downlink of its receiver; in process it goes directly from sender
    to receiver (over a runtime link it is sealed end to end and relayed by the server: module
    docstring), never readable by the server.  A message sent to several parties is encoded once
    and each receiver decodes the same immutable frame (in process, they share its memory)."""

    def __init__(self):
        self.meter = Meter()
        self.peer_bytes = 0

    def down(self, k, msg, t):
        frame = SM.encode(msg, k, t)
        self.meter.record(k, DOWN, t, len(frame), type(msg).__name__)
        with views.receiving(k):
            return SM.decode(frame)[0]

    def up(self, k, msg, t):
        frame = SM.encode(msg, k, t)
        self.meter.record(k, UP, t, len(frame), type(msg).__name__)
        with views.receiving("server"):
            return SM.decode(frame)[0]

    def peer(self, src, dsts, msg, t):
        frame = SM.encode(msg, src, t)
        out = []
        for d in dsts:
            self.meter.record(src, UP, t, len(frame), type(msg).__name__)
            self.meter.record(d, DOWN, t, len(frame), None)
            self.peer_bytes += len(frame)
            with views.receiving(d):
                out.append(SM.decode(frame)[0])
        return out


class LocalParties:
    """The parties as objects in this process, every message framed by the :class:`Network`.
    :func:`run_secure` talks to parties only through these five steps, so a remote version
    (``vflpriv.vertical.secure.squares.roles``) runs the same protocol over a runtime link."""

    def __init__(self, parties, spill=None):
        """``spill``: None (masked blocks in memory) or a ``store.SpillDirectory``."""
        self.parties, self.net = parties, Network()
        self.meter = self.net.meter
        self.spill = spill

    @property
    def peer_bytes(self):
        return self.net.peer_bytes

    def setup(self, msgs):
        for p in self.parties:
            p.setup(self.net.down(p.k, msgs[p.k], 0))

    def offline(self):
        """Every party sends its masked block to its block's helper h(k) = (k + 1) mod K only
        (``mpc/beaver.py``): K blocks travel, not K (K - 1)."""
        parties, net = self.parties, self.net
        K = len(parties)
        for p in parties:
            store = None if self.spill is None else self.spill.store(p.k)
            for row, block in p.masked_blocks():
                others = [parties[block_helper(p.k, K)]] if K > 1 else []
                msgs = net.peer(p.k, [q.k for q in others], SM.MaskedBlock(row, block), 0)
                if store is not None and msgs:
                    store.append(msgs[0].row, msgs[0].block)     # the frame's words, once
                for q, m in zip(others, msgs):
                    q.receive_block(p.k, m, store)
                del msgs

    def close(self):
        if self.spill is not None:
            self.spill.close()
            self.spill = None

    def select(self, prev, t, intercept=None):
        """``intercept``: the round's b (sent with the selections), None when not fitted."""
        picks = []
        for p in self.parties:
            msg = self.net.down(p.k, SM.Selections(prev) if intercept is None else
                                SM.SelectionsB(prev, intercept), t)
            p.apply(msg, 2.0 / (t + 1.0) if t > 0 else None)
            p.charge_selections(t)
            s = self.net.up(p.k, p.select(), t).signed_index
            picks.append((abs(s) - 1, 1 if s > 0 else -1))
        return picks

    def new_features(self, holders, t):
        for p in self.parties:
            p.charge_features(self.net.down(p.k, SM.NewFeatures(holders), t), t)

    def sums(self, releaser, t):
        """The intercept's release: every party's :class:`~.messages.NoisySums` (the label sum
        from ``releaser``)."""
        return [self.net.up(p.k, p.noisy_sums(p.k == releaser), t) for p in self.parties]

    def product(self, l, i, to_holder, to_helper, to_peer, t):
        """Party l's feature i times every other party k's block, under the Beaver product
        (``Dealer.routed_triples``): l sends each k its own masked column z_k = a_j + v_k, and
        the share with k's noise comes from k's helper h(k): l itself for the block it helps
        (a ``TripleToHolder`` in ``to_holder``), the party h(k) for the others
        (``to_helper``; l then has v_k's key alone, a ``VectorKey``)."""
        net, K = self.net, len(self.parties)
        holder = self.parties[l]
        triples = {k: net.down(l, to_holder[k], t) for k in sorted(to_holder)}
        zs, shares = holder.holder_messages(i, triples)
        zk = {k: net.peer(l, [k], zs[k], t)[0] for k in sorted(zs)}
        res = {k: net.peer(l, [k], shares[k], t)[0] for k in sorted(shares)}
        for k in sorted(to_helper):
            h = block_helper(k, K)
            tr = net.down(h, to_helper[k], t)
            res[k] = net.peer(h, [k], self.parties[h].helper_share(tr), t)[0]
        for k in sorted(zk):
            tp = net.down(k, to_peer[k], t)
            self.parties[k].peer_output(zk[k], tp, res[k])

    def ledgers(self):
        return [None if p.budget is None else p.budget.ledger for p in self.parties]
