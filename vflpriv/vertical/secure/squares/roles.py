"""dp-bcfw-secure's least-squares path as roles: the same protocol loop (:func:`.loop.
run_secure`) as the server role, each party a party role (hosted by Flower's ClientApp, or in
process over a :class:`~vflpriv.runtime.link.LocalLink`); what every path's roles share (the
relayed, sealed party-to-party messages, the offline phase, the products) is
``base/roles.py``.

Each party enforces its own budget on its own ledger (node config ``ledger``, ``budget-epsilon``,
``budget-delta``): every release of the round touches its people, so it charges each round's
selections and cross-product releases before drawing its noise, as in process.
"""
from __future__ import annotations

import struct

import numpy as np

from ....errors import InputError
from ....runtime.partydata import party_noise_seed
from ....runtime.roles import Refused
from ...transport import UP
from ..base.roles import LinkParties, ProductPartyRole, _Shape, pin_identities, serve_run
from ..block_cache import cached_block
from ..checkpoints.saves import SecureSaves
from ..mpc import messages as SM

# -- party side ---------------------------------------------------------------------------------
#: prepared blocks kept by this process (a host that serves many messages for a party, e.g. a
#: simulation actor or the in-process link): (data file, its mtime and size, the options) -> block
_PREPARED = {}


def _prepared(cfg, setup, k):
    """Party k's :class:`~.protocol.PreparedBlock` for this run (:func:`cached_block`)."""
    from ..base.blocks import prepare_block

    clips = setup["clips"]
    labels = setup.get("label_party") in (None, k)

    def make(A_k, y):
        if not labels or np.size(y) == 0:
            y = None              # only the label party keeps y; the others get A_k^T y + noise
        return prepare_block(A_k, y, frac=setup["frac"], private=bool(setup["private"]),
                             feature_bound=setup["feature_bound"],
                             label_bound=setup["label_bound"],
                             row_clip=None if clips is None else clips[k], k=k)

    block = cached_block(_PREPARED, cfg, setup, k,
                         (int(setup["frac"]), bool(setup["private"]), setup["feature_bound"],
                          setup["label_bound"], None if clips is None else float(clips[k]),
                          labels), make)
    if block.n != setup["n"]:
        raise Refused(f"party {k}'s data has {block.n} rows, the run expects {setup['n']}")
    return block


class SecurePartyRole(SecureSaves, ProductPartyRole):
    """Party k of a least-squares run: its :class:`~.party.SecureParty`, its own ledger and
    channel keys (the role every path shares: :class:`~..base.roles.ProductPartyRole`), its
    rounds (select, the intercept's sums) and its own saves for a resume
    (:class:`~..checkpoints.saves.SecureSaves`)."""

    #: the messages whose answer is checked against, or charged to, the party's own ledger; only
    #: these open it (reading a ledger costs milliseconds, and the offline phase and the secure
    #: products are many messages that release nothing by themselves)
    CHARGED = ("setup", "select", "new_features")

    STATE = ProductPartyRole.STATE + (
        "x", "u", "c", "selected", "intercept", "_pick", "_pick_new", "_owed", "_owed_label",
        "_owed_sums", "_help_owed", "_helped")

    def __init__(self, cfg, setup):
        from .party import SecureParty

        self.k = k = int(cfg["party"])
        self.setup, self.cfg = setup, cfg
        private = bool(setup["private"])
        seed = party_noise_seed(cfg, k)
        plan = setup["plan"]
        clips = setup["clips"]
        self.party = p = SecureParty(
            k, None, None, setup["eta"], frac=setup["frac"], private=private,
            noise=plan[0] if private else None, index_scale=plan[1] if private else 0.0,
            sigma=plan[3] if private else 0.0, noise_seed=seed,
            prepared=_prepared(cfg, setup, k))
        p.setup(SM.decode(bytes.fromhex(setup["setup_frame"]))[0])
        p.gated = private           # its holder gate answers to its own ledger, open or not
        if private:
            p.plan = (plan[0], plan[1], plan[2], plan[3], float(setup["feature_bound"]), clips,
                      float(setup["label_bound"]))
            p.ring = (int(setup["frac"]), [int(v) for v in setup["sizes"]])
        self._link_state()

    def step(self, kind, frame, t):
        p = self.party
        if kind == "select":
            msg = SM.decode(frame)[0]
            p.apply(msg, 2.0 / (t + 1.0) if t > 0 else None)
            p.charge_selections(t)
            self._replayed(p.budget)
            return "index", SM.encode(p.select(), self.k, t)
        if kind == "sums":            # the intercept's release (its charge came before)
            releaser = struct.unpack("<H", frame)[0]
            return "sums", SM.encode(p.noisy_sums(self.k == releaser), self.k, t)
        return super().step(kind, frame, t)


# -- server side --------------------------------------------------------------------------------
class LinkSquaresParties(LinkParties):
    """The least-squares rounds over a runtime link beside the steps every path shares
    (:class:`~..base.roles.LinkParties`): select and the intercept's sums."""

    def select(self, prev, t, intercept=None):
        msg = SM.Selections(prev) if intercept is None else SM.SelectionsB(prev, intercept)
        reqs = [(k, self._down(k, msg, t), "select") for k in range(self.K)]
        picks = []
        for k, f in enumerate(self.link.exchange(reqs, t)):
            self.meter.record(k, UP, t, len(f), "SecureIndex")
            s = SM.decode(f)[0].signed_index
            picks.append((abs(s) - 1, 1 if s > 0 else -1))
        return picks

    def sums(self, releaser, t):
        out = []
        for k, f in enumerate(self.link.exchange([(k, struct.pack("<H", int(releaser)), "sums")
                                                  for k in range(self.K)], t)):
            self.meter.record(k, UP, t, len(f), "NoisySums")
            out.append(SM.decode(f)[0])
        return out


def serve(connect, spec, progress=None) -> dict:
    """The server role of one dp-bcfw-secure run (``spec`` from :func:`make_spec`);
    ``connect(K)`` is the run's link to its K parties."""
    from ...remote import PublicShape
    from .loop import run_secure
    from ..checkpoints.saves import check_replayed, server_checkpoints

    def loop(remote, on_round, budget):
        budget, ck_hook, ck_state = server_checkpoints(spec, budget)
        res = run_secure(_Shape(PublicShape(spec["n"], spec["blocks"])), remote=remote,
                         callback=on_round, budget_filter=budget, on_round=ck_hook,
                         state=ck_state, **spec["secure"])
        check_replayed(spec, budget)
        return dict(x=res.x, selections=res.selections, released=res.released,
                    products=res.products, meter=res.meter, peer_bytes=res.peer_bytes,
                    setup_seconds=res.setup_seconds, intercept=res.intercept,
                    intercepts=res.intercepts)

    return serve_run(connect, spec, progress, LinkSquaresParties, "secure", loop)


def make_spec(data, *, secure_kwargs, private, ledger=None, budget=None, accountant="rdp",
              run_id=None, connect_timeout=60.0, reply_timeout=600.0, checkpoint=None,
              resume=False) -> dict:
    """The server's run description.  ``checkpoint``: ``{"path", "every", "meta"}`` of the
    server's checkpoints (``saves.checkpoint_spec``; ``resume``: continue from it)."""
    return {"family": "secure", "n": int(data.n),
            "blocks": [[int(v) for v in b] for b in data.blocks],
            "iterations": int(secure_kwargs["iterations"]), "secure": dict(secure_kwargs),
            "private": bool(private), "ledger": ledger, "budget": budget,
            "accountant": accountant, "run_id": run_id,
            "connect_timeout": float(connect_timeout), "reply_timeout": float(reply_timeout),
            "checkpoint": checkpoint, "resume": bool(resume)}


def run(backend, data, *, secure_kwargs, private, run_dir, ledger=None, budget=None,
        accountant="rdp", run_id=None, party_ledgers=None, party_budget=None, noise_root=None,
        connect_timeout=60.0, reply_timeout=600.0, progress=None, quiet=True, spec_dir=None,
        checkpoint=None, resume=False, pinning=None):
    """Run dp-bcfw-secure on ``backend``; returns ``(out, flower info)`` (``out`` as the
    ServerApp's result, with the objective history replayed here from the selections).
    ``spec_dir``: the description for separate machines is written there instead, and
    ``(None, what was written)`` returned (its keys pinned by ``pinning``:
    :func:`pin_identities`).  ``checkpoint`` (``make_spec``): each party saves its own state
    beside it (``saves.party_checkpoints``) and resumes from it."""
    from ....runtime.partydata import noise_entropy_of
    from ...remote import party_configs, run_info
    from ..base.evaluation import replay_objective
    from ..checkpoints.saves import party_checkpoints

    if data.K < 2:
        raise InputError("dp-bcfw-secure needs at least 2 parties")
    spec = make_spec(data, secure_kwargs=secure_kwargs, private=private, ledger=ledger,
                     budget=budget, accountant=accountant, run_id=run_id,
                     connect_timeout=connect_timeout, reply_timeout=reply_timeout,
                     checkpoint=checkpoint, resume=resume)
    cfgs = party_configs(data, run_dir, private=private, budget=party_budget or budget,
                         accountant=accountant, ledgers=party_ledgers,
                         noise_entropy=None if noise_root is None else noise_entropy_of(noise_root),
                         label_party=secure_kwargs.get("label_party"),
                         bounds=(secure_kwargs.get("feature_bound"),
                                 secure_kwargs.get("label_bound")))
    party_checkpoints(cfgs, checkpoint, spec_dir)
    from ....runtime.backends import describe, launch

    if spec_dir:
        pin_identities(run_dir, cfgs, pinning)
        return None, describe(run_dir, spec, cfgs)
    out = launch(backend, spec, cfgs, run_dir, progress=progress, quiet=quiet)
    info = run_info(backend, out, cfgs, private)
    if "x" in out:
        out["objective"] = replay_objective(data, secure_kwargs["eta"], out["selections"],
                                            out.get("intercepts"))
        out["initial_objective"] = float(0.5 * np.mean(data.y ** 2))
    return out, info
