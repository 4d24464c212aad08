"""The logistic (GLM) path of dp-bcfw-secure as roles: the same loop
(:func:`~.glm_run.run_secure_glm`) as the server role, each party a party role (hosted by
Flower's ClientApp, or in process over a :class:`~vflpriv.runtime.link.LocalLink`).

As in the least-squares roles (:mod:`.remote`), a link joins the server to each party only, so
every party-to-party message (masked blocks, margin shares and keys, masked sigmoid factors, the
intercept word, masked vectors, result shares) is **sealed end to end** by
:class:`~.channel.Channel` (X25519 + HKDF-SHA256 + ChaCha20-Poly1305 from ``cryptography``; key
offers pinned when the node configs say so) and relayed by the server, which sees ciphertexts
and their lengths only -- the same as it learns in process.  The frames are those of the
in-process run, so the meter counts the same bytes per message kind.

One round is four exchanges (the in-process steps of ``glm.round_scores``, grouped by who must
wait for whom):

1. ``glm_round`` (every party): the selections; each party moves its part of the public
   iterate and charges the round to **its own ledger** (which arms its holder gate,
   ``GlmParty._gate``); a party outside {L, H} answers its margin share for L and its margin
   key for H, sealed.
2. ``glm_factors`` (L and H): the relayed margin shares / keys and the dealer's factor triple;
   each answers its masked sigmoid factors, sealed for the other.
3. ``glm_shares`` (L and H): the other's masked factors and the dealer's triples for its
   Beaver score products; each computes its share of d and answers its masked vector and its
   noised result shares, sealed for each peer (H first its noised intercept word, for L).  The
   gate runs here, at the party: noise is added only for what its own ledger charged.
4. ``glm_scores`` (every party): its products' parts (and, at L, H's intercept word); each
   computes its noisy scores and answers its vertex; L also moves its intercept.

At the end (``close``) the label party hands the server its intercept after every round: the
model's intercept (the in-process run returns it to its caller too) and what the command needs
to evaluate the objective history on the data; a post-processing of the noisy intercept
derivatives already charged (docs/sensitivity.md 5.5), nothing else.
"""
from __future__ import annotations

import os

import numpy as np

from ....noise import restore as noise_restore
from ....noise import state as noise_state
from ....runtime.roles import Refused
from ..mpc import messages as SM
from .party import (GlmParty, RingPlan, _factor_correction, noise_parts, offline_receivers,
                    round_event, round_lattice)
from .saves import GlmSaves
from ..block_cache import cached_block
from ..mpc.channel import new_key_pair, pack_bundle, unpack_bundle
from ..base.roles import LinkParties, ProductPartyRole

#: prepared blocks kept by this process (a host serving many messages for a party): key -> block
_PREPARED = {}


def _series(setup):
    from ..mpc.fourier import SigmoidSeries

    a, p, j, h = setup["series"]
    return SigmoidSeries(float(a), int(p), int(j), int(h))


def _prepared(cfg, setup, k, ring):
    """Party k's ``(prepared block, y)`` for this run (``block_cache.cached_block``)."""
    from .party import prepare_glm_block

    clips = setup["clips"]
    label = int(setup["label_party"]) == k

    def make(A_k, y):
        if label and np.size(y) != setup["n"]:
            raise Refused(f"party {k} is the label party but its data file holds no labels")
        blk = prepare_glm_block(A_k, ring=ring, private=bool(setup["private"]),
                                feature_bound=setup["feature_bound"],
                                row_clip=None if clips is None else clips[k], k=k)
        return blk, (y if label else None)     # only the label party keeps y

    return cached_block(_PREPARED, cfg, setup, k,
                        (tuple(setup["ring"]), bool(setup["private"]), setup["feature_bound"],
                         None if clips is None else float(clips[k]), label), make)


_STATE = ("x", "u", "b", "_g_b", "_allowed", "masked", "_pending")


class GlmPartyRole(GlmSaves, ProductPartyRole):
    """Party k of a logistic dp-bcfw-secure run: its :class:`~.glm.GlmParty`, its own ledger
    and channel keys (the key exchange, the offline phase in pieces and the clean-up are the
    least-squares role's; its own saves for a resume: ``glm_saves.GlmSaves``)."""

    #: the messages charged to, or checked against, the party's own ledger (only these open it)
    CHARGED = ("setup", "glm_round")

    def __init__(self, cfg, setup):
        from ....runtime.partydata import party_noise_seed

        self.k = k = int(cfg["party"])
        self.setup, self.cfg = setup, cfg
        self.L, self.H = int(setup["label_party"]), int(setup["helper_party"])
        self.ring = RingPlan(*(int(v) for v in setup["ring"]))
        self.series = _series(setup)
        private = bool(setup["private"])
        blk, y = _prepared(cfg, setup, k, self.ring)
        self.party = p = GlmParty(k, None, y, setup["eta"], ring=self.ring, series=self.series,
                                  private=private, sigma=float(setup["sigma"]),
                                  noise_seed=party_noise_seed(cfg, k),
                                  fit_intercept=bool(setup["fit_intercept"]), prepared=blk,
                                  step=setup.get("step", "fw"), lr=setup.get("lr"))
        p.gated = private          # its holder gate answers to its own ledger, open or not
        p.setup(SM.decode(bytes.fromhex(setup["setup_frame"]))[0])
        self.event = None
        if private:
            D = self.series.derivative_bound
            self.event = round_event(float(setup["sigma"]), D, setup["clips"],
                                     bool(setup["fit_intercept"]), int(setup["summed"]),
                                     round_lattice(self.ring, int(setup["features"]),
                                                   bool(setup["fit_intercept"])))
        self._link_state()
        self.d_own = None            # this round's share of d (L and H), between steps 3 and 4
        self.intercepts = []         # L: b after every round

    def _receivers(self):
        return sorted(offline_receivers(self.k, self.L, self.H, int(self.setup["K"])))

    def handle(self, kind, frame, t):
        p, k, L, H = self.party, self.k, self.L, self.H
        if kind in ("keys", "offline"):
            return super().handle(kind, frame, t)
        if kind == "close":
            self._remove_blocks()
            return "intercepts", np.asarray(self.intercepts, dtype="<f8").tobytes()
        if kind == "setup":
            t0 = self._resume_at_setup()
            if p.private:
                from accounting import SelfComposed

                self._open_budget()
                # every round's release touches this party's people: T rounds of one Gaussian
                # (on resume the rounds still to run, its records to replay excluded)
                T = int(self.setup["iterations"]) - t0
                if T > 0:
                    p.budget.check_plan(SelfComposed(self.event, T), party=k,
                                        exclude=getattr(p.budget, "pending", ()))
            self.private_key, self.public_key = new_key_pair()
            return "key", self._offer()
        if kind == "save":
            self._save(int(frame.decode()))
            return "ok", b""
        ch = self._channel()

        def sealed(dst, msg):
            return dst, ch.seal(dst, type(msg).__name__, t, SM.encode(msg, k, t))

        def opened(src, kind_, blob):
            return SM.decode(ch.open(src, kind_, t, blob))[0]

        if kind == "glm_round":
            if t > 0:
                p.apply(SM.decode(frame)[0], 2.0 / (t + 1.0))
            self._charge(t)
            if k in (L, H):
                return "ok", b""
            to_l, to_h = p.margin_messages()
            return "bundle", pack_bundle([sealed(L, to_l), sealed(H, to_h)])
        if kind == "glm_factors":
            self._only(L, H, kind, t)
            entries = unpack_bundle(frame)
            triple = SM.decode(entries[0][1])[0]
            share = p.own_margin()
            if k == L:
                for src, blob in entries[1:]:
                    share = share + opened(src, "MarginShare", blob).vector
                return "bundle", pack_bundle([sealed(H, p.label_side(share, triple))])
            from ..mpc.ring import Prg

            for src, blob in entries[1:]:
                share = share + Prg(opened(src, "MarginKey", blob).key).uint64(p.n)
            return "bundle", pack_bundle([sealed(L, p.helper_side(share, triple))])
        if kind == "glm_shares":
            self._only(L, H, kind, t)
            entries = unpack_bundle(frame)
            theirs = opened(entries[0][0], "MaskedFactors", entries[0][1])
            triples = {q: SM.decode(f)[0] for q, f in entries[1:]}
            out = []
            if k == L:
                d = p.label_share(theirs)
            else:
                d = p.helper_share(theirs)
                if self.setup["fit_intercept"]:
                    # the intercept's derivative sum_r d_r + N reaches L only (H adds the noise)
                    out.append(sealed(L, p.intercept_share(d)))
            p._pending, self.d_own = None, d
            noisy = noise_parts(triples, L, H)
            z, shares = p.holder_messages(d, triples, noisy)
            for q in sorted(triples):
                out += [sealed(q, z), sealed(q, shares[q])]
            return "bundle", pack_bundle(out)
        if kind == "glm_scores":
            entries = unpack_bundle(frame)
            products, i = [], 0
            while i + 3 <= len(entries):
                (h, tp), (_, zb), (_, rb) = entries[i:i + 3]
                products.append((opened(h, "MaskedVector", zb), SM.decode(tp)[0],
                                 opened(h, "ResultShare", rb)))
                i += 3
            if i < len(entries):              # L: H's noised intercept word
                p.intercept_derivative(self.d_own, opened(H, "InterceptShare", entries[i][1]))
            g = p.scores(self.d_own if k in (L, H) else None, products)
            self.d_own = None
            if k == L and p.b is not None:
                from ....optim import get_loss

                p.step_intercept(get_loss(self.setup["loss"]), t)
                self.intercepts.append(p.b)
            return "index", SM.encode(p.select(g), k, t)
        raise Refused(f"party {k}: unknown request {kind!r}")

    def _only(self, L, H, kind, t):
        if self.k not in (L, H):
            raise Refused(f"party {self.k}: {kind} (round {t}) is for the label party {L} and "
                          f"the helper {H} only")

    def get_state(self):
        p = self.party
        st = {a: getattr(p, a, None) for a in _STATE}
        if st["_pending"] is not None:
            st["_pending"] = self._spill_pending(st["_pending"])
        st["rng"] = noise_state(p.rng)
        st["keys"] = (self.private_key, self.public_key, self.peers)
        st["block_dir"] = self.block_dir
        st["d_own"], st["intercepts"] = self.d_own, self.intercepts
        st["saved"], st["replay"] = self.saved, self.replay
        return st

    def set_state(self, st):
        p = self.party
        for a in _STATE:
            setattr(p, a, st[a])
        if st["rng"] is not None:
            noise_restore(p.rng, st["rng"])
        self.private_key, self.public_key, self.peers = st["keys"]
        self.block_dir = st.get("block_dir")
        self.d_own, self.intercepts = st["d_own"], st["intercepts"]
        self.saved, self.replay = st["saved"], st["replay"]
        p._pending = _read_pending(st["_pending"])

    def _spill_pending(self, pending):
        """The arrays L and H keep from step 2 to step 3 (2 J n words: 0.13 GB at n = 1e6,
        J = 8) go to a file in this party's folder for the masked blocks, and the state names
        the file.  A deployed SuperNode carries the role's state in its context between
        messages, and at n = 1e6 it lost one of that size: the helper found its factors gone
        in the next message (docs/network.md, "n = 1e6").  The folder is removed at close."""
        path = os.path.join(self._block_dir(), "pending.npz")
        np.savez(path, *pending)
        return ("file", path, len(pending))


def _read_pending(saved):
    """The inverse of ``GlmPartyRole._spill_pending`` (None stays None)."""
    if saved is None:
        return None
    tag, path, m = saved
    if tag != "file":
        raise Refused(f"unreadable saved factors {tag!r}")
    with np.load(path) as z:
        return tuple(z[f"arr_{i}"] for i in range(m))


# -- server side --------------------------------------------------------------------------------
class LinkGlmParties(LinkParties):
    """The steps of :class:`~.glm_run.LocalGlmParties` over a runtime link (setup, the offline
    phase in pieces and the clean-up are the least-squares ones); ``meter`` counts the
    protocol's frames as in process, ``link.meter`` the link's messages."""

    def __init__(self, link, public, extra, sizes, frame_bytes=None):
        super().__init__(link, public, extra, sizes, frame_bytes)
        self.L, self.H = int(public["label_party"]), int(public["helper_party"])
        self.fit_intercept = bool(public["fit_intercept"])
        self.series = _series(public)
        self.intercepts = []
        self.intercept = 0.0 if self.fit_intercept else None

    def offline_fanout(self):
        """L and H each receive the K - 1 other parties' blocks (a party sends its own to both)."""
        return max(1, self.K - 1)

    def round(self, prev, t, dealer, keys):
        K, L, H, n = self.K, self.L, self.H, self.n
        # 1. selections; margin shares (to L) and keys (to H) from every other party
        replies = self.link.exchange([(k, self._down(k, SM.Selections(prev), t), "glm_round")
                                      for k in range(K)], t)
        inbox = {L: [], H: []}
        for k in range(K):
            if k in (L, H):
                continue
            for dst, blob in unpack_bundle(replies[k]):
                if dst not in inbox:
                    raise Refused(f"party {k} addressed its margin to party {dst}")
                self._peer(k, dst, t, blob, "MarginShare" if dst == L else "MarginKey")
                inbox[dst].append((k, blob))
        # 2. masked sigmoid factors, with the dealer's factor triples
        kL, kH = keys.key(f"factor-L-{t}"), keys.key(f"factor-H-{t}")
        corr = _factor_correction(kL, kH, self.series, n)
        tL = self._down(L, SM.FactorTriple(kL, np.zeros(0, dtype=np.uint64)), t)
        tH = self._down(H, SM.FactorTriple(kH, corr), t)
        rL, rH = self.link.exchange([(L, pack_bundle([(L, tL)] + inbox[L]), "glm_factors"),
                                     (H, pack_bundle([(H, tH)] + inbox[H]), "glm_factors")], t)
        (_, mL), = unpack_bundle(rL)
        (_, mH), = unpack_bundle(rH)
        self._peer(L, H, t, mL, "MaskedFactors")
        self._peer(H, L, t, mH, "MaskedFactors")
        # 3. shares of d; each holder's masked vector and noised result shares (H's intercept)
        to_peer, reqs = {}, []
        for holder, theirs in ((H, (L, mL)), (L, (H, mH))):
            peers = [k for k in range(K) if k != holder]
            to_holder, to_peer[holder] = dealer.triples(holder, t, peers)
            reqs.append((holder, pack_bundle([theirs] + [(k, self._down(holder, to_holder[k], t))
                                                         for k in peers]), "glm_shares"))
        parts, word = {}, None
        for holder, reply in zip((H, L), self.link.exchange(reqs, t)):
            got = unpack_bundle(reply)
            if holder == H and self.fit_intercept:
                (_, word), got = got[0], got[1:]
                self._peer(H, L, t, word, "InterceptShare")
            z = {k: b for k, b in got[0::2]}
            r = {k: b for k, b in got[1::2]}
            for k in sorted(z):
                self._peer(holder, k, t, z[k], "MaskedVector")
            for k in sorted(r):
                self._peer(holder, k, t, r[k], "ResultShare")
            parts[holder] = (z, r)
        # 4. every party's products, its noisy scores and its vertex
        reqs = []
        for k in range(K):
            entries = []
            for holder in (H, L):
                if holder != k:
                    z, r = parts[holder]
                    entries += [(holder, self._down(k, to_peer[holder][k], t)),
                                (holder, z[k]), (holder, r[k])]
            if k == L and word is not None:
                entries.append((H, word))
            reqs.append((k, pack_bundle(entries), "glm_scores"))
        from .loop import pick_of

        picks = []
        for k, f in enumerate(self.link.exchange(reqs, t)):
            msg = SM.decode(f)[0]
            self.meter.record(k, "uplink", t, len(f), type(msg).__name__)
            picks.append(pick_of(msg))
        return picks

    def step_intercept(self, loss, t):
        """L moved its intercept in step 4; the server learns it at the end (``close``)."""
        return None

    def save(self, t):
        """Every party saves its own state after round t, on its own disk (before the
        server's checkpoint of round t is written)."""
        self.link.exchange([(k, str(int(t)).encode(), "save") for k in range(self.K)], t)

    def close(self, tolerate=False, skip=()):
        """Every party deletes its masked blocks; L hands over its intercept after every
        round (module docstring)."""
        asked = [k for k in range(self.K) if k not in skip]
        replies = self.link.exchange([(k, b"", "close") for k in asked], 0, tolerate=tolerate)
        for k, f in zip(asked, replies):
            if k == self.L and f is not None and self.fit_intercept:
                self.intercepts = [float(v) for v in np.frombuffer(f, dtype="<f8")]
                if self.intercepts:
                    self.intercept = self.intercepts[-1]


def serve(connect, spec, progress=None) -> dict:
    """The server role of one logistic dp-bcfw-secure run (``spec`` from :func:`make_spec`)."""
    from ....optim import get_loss
    from ...remote import PublicShape
    from .loop import run_secure_glm
    from ..base.roles import _Shape, serve_run
    from ..checkpoints.saves import check_replayed, server_checkpoints

    def loop(remote, on_round, budget):
        budget, ck_hook, ck_state = server_checkpoints(spec, budget)
        g = dict(spec["glm"])
        res = run_secure_glm(_Shape(PublicShape(spec["n"], spec["blocks"])),
                             get_loss(g.pop("loss")), remote=remote, callback=on_round,
                             budget_filter=budget, series=_series(g),
                             ring=RingPlan(*(int(v) for v in g.pop("ring"))),
                             on_round=ck_hook, state=ck_state,
                             **{a: v for a, v in g.items() if a != "series"})
        check_replayed(spec, budget)
        return dict(x=res.x, selections=res.selections, intercept=res.intercept,
                    intercepts=res.extra["intercepts"], meter=res.meter,
                    peer_bytes=res.peer_bytes, setup_seconds=res.setup_seconds,
                    helper_party=res.extra["helper_party"])

    return serve_run(connect, spec, progress, LinkGlmParties, "glm", loop)


def make_spec(data, *, glm_kwargs, private, ledger=None, budget=None, accountant="rdp",
              run_id=None, connect_timeout=60.0, reply_timeout=600.0, checkpoint=None,
              resume=False) -> dict:
    """The server's run description (data only: ``glm_kwargs`` holds numbers, lists and the
    loss's name; the ring plan and the sigmoid series as lists).  ``checkpoint``: ``{"path",
    "every", "meta"}`` of the server's checkpoints (``resume``: continue from it)."""
    return {"family": "glm", "n": int(data.n),
            "blocks": [[int(v) for v in b] for b in data.blocks],
            "iterations": int(glm_kwargs["iterations"]), "glm": dict(glm_kwargs),
            "private": bool(private), "ledger": ledger, "budget": budget,
            "accountant": accountant, "run_id": run_id,
            "connect_timeout": float(connect_timeout), "reply_timeout": float(reply_timeout),
            "checkpoint": checkpoint, "resume": bool(resume)}


def replay_objective(data, loss, eta, selections, intercepts):
    """``(f(0), history)`` of a run known by its selections and L's intercept after every
    round, evaluated on the data as the in-process loop does (``protocol.Evaluation``)."""
    from ..base.evaluation import Evaluation

    ev = Evaluation(data, loss)
    hist = []
    for t, sel in enumerate(selections):
        gamma = 2.0 / (t + 2.0)
        b = intercepts[t] if t < len(intercepts) else None
        hist.append(ev.advance([(l, g, gamma * eta * sign) for l, g, sign in sel], gamma,
                               b or 0.0))
    return float(np.mean(loss.value(np.zeros(data.n), data.y))), hist


def run(backend, data, loss, *, glm_kwargs, private, run_dir, ledger=None, budget=None,
        accountant="rdp", run_id=None, party_ledgers=None, party_budget=None, noise_root=None,
        connect_timeout=60.0, reply_timeout=600.0, progress=None, quiet=True, spec_dir=None,
        checkpoint=None, resume=False, pinning=None):
    """Run the logistic path on ``backend``; ``(out, info)`` as :func:`.remote.run` (a
    description's keys pinned by ``pinning``), with the
    objective history replayed here from the selections and L's intercepts.  ``checkpoint``
    (``make_spec``): each party saves its own state beside it (``<path>.party<k>``; in a
    description ``party<k>.ckpt`` beside its node config) and resumes from it."""
    from ....errors import InputError
    from ....runtime.backends import describe, launch
    from ....runtime.partydata import noise_entropy_of
    from ...remote import party_configs, run_info
    from ..base.roles import pin_identities
    from ..checkpoints.saves import party_checkpoints

    if data.K < 2:
        raise InputError("dp-bcfw-secure needs at least 2 parties")
    spec = make_spec(data, glm_kwargs=glm_kwargs, private=private, ledger=ledger, budget=budget,
                     accountant=accountant, run_id=run_id, connect_timeout=connect_timeout,
                     reply_timeout=reply_timeout, checkpoint=checkpoint, resume=resume)
    cfgs = party_configs(data, run_dir, private=private, budget=party_budget or budget,
                         accountant=accountant, ledgers=party_ledgers,
                         noise_entropy=None if noise_root is None else noise_entropy_of(noise_root),
                         label_party=glm_kwargs["label_party"],
                         bounds=(glm_kwargs.get("feature_bound"), None))
    party_checkpoints(cfgs, checkpoint, spec_dir)
    if spec_dir:
        pin_identities(run_dir, cfgs, pinning)
        return None, describe(run_dir, spec, cfgs)
    out = launch(backend, spec, cfgs, run_dir, progress=progress, quiet=quiet)
    info = run_info(backend, out, cfgs, private)
    if "x" in out:
        out["initial_objective"], out["objective"] = replay_objective(
            data, loss, float(glm_kwargs["eta"]), out["selections"], out["intercepts"])
    return out, info
