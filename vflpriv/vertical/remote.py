"""DP-BCFW-AS, BCFW-AS and dFW (paper 004) as roles: the label holder's server as the server
role, each party a party role holding only its own columns (hosted by Flower's apps, or in
process over a :class:`~vflpriv.runtime.link.LocalLink`).

The server runs the same :class:`vflpriv.vertical.engine.Server` as in process, with a
:class:`LinkTransport` in place of the in-process one: the same typed frames
(:mod:`vflpriv.vertical.messages`) travel inside the link's messages, so a seeded run selects the same
indices, releases the same noisy features and ends at the same x, bit for bit.

Each party (:class:`VerticalParty`) keeps its own ledger and budget (its node config:
``ledger``, ``budget-epsilon``, ``budget-delta``, ``accountant``): at setup it refuses a plan
whose releases (one selection per round, at most one new feature per round) do not fit in what
its ledger has left, and it charges each of its own releases before drawing the noise.  The
server's ledger keeps the joint view (every party's releases about the same people compose), as
in process.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..runtime.link import error_record
from ..runtime.partydata import (load_party_data, noise_entropy_of,  # noqa: F401
                                 party_noise_seed, save_party_data)
from ..runtime.roles import PartyRole, Refused, own_budget
from . import messages as M
from .transport import DOWN, UP, Meter, Transport


@dataclass
class PublicShape:
    """What the server knows of the data: sizes and which party holds which global column."""
    n: int
    blocks: list

    @property
    def K(self):
        return len(self.blocks)

    @property
    def d(self):
        return int(sum(len(b) for b in self.blocks))


# -- party side ------------------------------------------------------------------------------
class VerticalParty(PartyRole):
    """Party k of a vertical run: its :class:`~vflpriv.vertical.engine.Party` and its budget."""

    def __init__(self, cfg, setup):
        from ..optim import get_loss
        from .engine import Party
        from .sampling import Sampling

        self.k = k = int(cfg["party"])
        self.setup = setup
        A_k, y = load_party_data(cfg["data"])
        if A_k.shape[0] != setup["n"] or A_k.shape[1] != len(setup["sampling"]["blocks"][k]):
            raise Refused(f"party {k}'s data has shape {A_k.shape}, the run expects "
                          f"({setup['n']}, {len(setup['sampling']['blocks'][k])})")
        private = bool(setup["private"])
        seed = party_noise_seed(cfg, k)
        self.party = Party(k, A_k, y, get_loss(setup["loss"]), setup["eta"],
                           noise=setup["noise"], index_scale=setup["index_scale"],
                           feature_sigma=setup["feature_sigma"],
                           clip=tuple(setup["clip"]) if private else None, noise_seed=seed,
                           dfw=setup["algorithm"] == "dfw",
                           intercept_sigma=setup.get("intercept_sigma", 0.0) if k == 0 else 0.0)
        s = setup["sampling"]
        blocks = [np.asarray(b, dtype=np.int64) for b in s["blocks"]]
        self.party.sampling = Sampling(s["kind"], blocks, tau=s["tau"], probs=s["probs"])
        self.party._K = setup["K"]
        self.party.setup(M.Setup(setup["sketch_seed"], setup["sampling_seed"], setup["n"],
                                 setup["m"], setup["sketch"], setup["K"]), blocks)
        self.budget = own_budget(cfg, setup) if private else None

    def _events(self):
        from .privacy import feature_event, index_event, intercept_event

        s = self.setup
        icpt = intercept_event(s["intercept_sigma"], s["sens_intercept"]) \
            if s.get("intercept") and self.k == 0 else None
        return (index_event(s["noise"], s["index_scale"], s["sens_index"], 1),
                feature_event(s["feature_sigma"], s["sens_feature"], 1), icpt)

    def handle(self, kind, frame, round):
        from accounting import Composed, SelfComposed

        if kind == "setup":
            if self.budget is not None:
                T = int(self.setup["iterations"])
                idx, feat, icpt = self._events()
                # at most one selection and one new feature of its own per round (party 0 with
                # an intercept: and one release of its derivative)
                parts = (idx, feat) if icpt is None else (idx, feat, icpt)
                self.budget.check_plan(Composed(tuple(SelfComposed(e, T) for e in parts)),
                                       party=f"party {self.k}")
            return "ok", b""
        msg, _, t = M.decode(frame)
        if self.budget is not None:
            idx, feat, icpt = self._events()
            select = isinstance(msg, M.Round) or (isinstance(msg, M.RoundB) and msg.select)
            if select:                              # charged before the index noise is drawn
                self.budget.charge(idx, party=f"party {self.k}", round=t, note="signed index")
            if isinstance(msg, M.RoundB) and msg.release_intercept:
                if icpt is None:
                    raise Refused(f"party {self.k} does not hold the intercept (party 0 does); "
                                  "it releases no derivative of it")
                self.budget.charge(icpt, party=f"party {self.k}", round=t,
                                   note="intercept derivative")
            elif isinstance(msg, M.FeatureRequest) and msg.release:
                self.budget.charge(feat, party=f"party {self.k}", round=t, note="active feature")
        reply = self.party.handle(msg, t)
        return ("none", b"") if reply is None else ("reply", M.encode(reply, self.k, t))

    def get_state(self):
        return {"party": self.party.get_state()}

    def set_state(self, state):
        self.party.set_state(*state["party"])


# -- server side -----------------------------------------------------------------------------
class LinkTransport(Transport):
    """:class:`~vflpriv.vertical.transport.Transport` over a runtime link
    (:mod:`vflpriv.runtime.link`): the same frames metered as in process (``meter``), plus the
    envelopes carrying them (``link.meter``)."""

    def __init__(self, link, public_setup: dict):
        import json

        self.link, self.meter = link, Meter()
        self._setup = json.dumps(public_setup).encode()

    def _frame(self, party, message, round):
        frame = M.encode(message, party, round)
        self.meter.record(party, DOWN, round, len(frame), type(message).__name__)
        return frame

    def _reply(self, party, frame, round):
        if not frame:
            return None
        self.meter.record(party, UP, round, len(frame), M.decode(frame)[0].__class__.__name__)
        return M.decode(frame)[0]

    def request(self, party, message, round):
        return self.request_many([(party, message)], round)[0]

    def request_many(self, requests, round):
        if not requests:
            return []
        if isinstance(requests[0][1], M.Setup):
            for p, msg in requests:
                self._frame(p, msg, round)      # metered as in process; the JSON carries it
            self.link.exchange([(p, self._setup, "setup") for p, _ in requests], round)
            return [None] * len(requests)
        frames = [(p, self._frame(p, msg, round), type(msg).__name__) for p, msg in requests]
        replies = self.link.exchange(frames, round)
        return [self._reply(p, f, round) for (p, _), f in zip(requests, replies)]


def serve(connect, spec, progress=None) -> dict:
    """The server role of one vertical run described by ``spec`` (see :func:`make_spec`);
    ``connect(K)`` is the run's link to its K parties (:mod:`vflpriv.runtime.families`)."""
    from .engine import Server

    K = len(spec["blocks"])
    link = connect(K)
    out = {"t": 0, "error": None}
    budget = None
    try:
        link.connect(b"")
        if spec["private"]:
            from accounting import BudgetFilter, Ledger

            led = Ledger(spec["ledger"], run_id=spec["run_id"])
            budget = BudgetFilter(led, *spec["budget"], accountant=spec["accountant"])

        def remote(public):
            public.update(iterations=spec["iterations"], run_id=spec["run_id"],
                          accountant=spec["accountant"], family="vertical")
            return LinkTransport(link, public)

        server = Server(PublicShape(spec["n"], spec["blocks"]), _Loss(spec["loss"]), spec["eta"],
                        remote=remote, track_objective=False, budget_filter=budget,
                        **spec["server"])
        out["server"] = server
        for t in range(server.t, spec["iterations"]):
            server.step()
            out["t"] = server.t
            if progress is not None:
                progress(server.t)
    except Exception as exc:          # e.g. the server's own budget refusing a release
        out["error"] = error_record(exc, out["t"])
    srv = out.pop("server", None)
    if srv is not None:
        out.update(x=srv.x, selections=srv.selections, gammas=srv.gammas,
                   intercept=srv.b if srv.fit_intercept else None, intercepts=srv.intercepts,
                   released=srv.released, naive=srv.naive, fullgrad=srv.fullgrad,
                   meter=srv.meter, m=srv.m, p_min=srv.sampling.p_min if
                   srv.algorithm == "bcfw" else 1.0 / srv.K)
    out["flower"] = link.meter.summary(K)
    out["flower_totals"] = link.meter.totals()
    return out


class _Loss:
    """The server needs the loss only by name (the objective is replayed where data are)."""

    def __init__(self, name):
        self.name = name


def make_spec(data, *, loss, eta, iterations, server_kwargs, private, ledger=None, budget=None,
              accountant="rdp", run_id=None, connect_timeout=60.0, reply_timeout=600.0):
    """The ServerApp's description of a run (public shape, algorithm settings, the server's
    ledger): picklable, written to a file for a deployed ServerApp."""
    return {"family": "vertical", "n": int(data.n),
            "blocks": [[int(v) for v in b] for b in data.blocks], "loss": loss.name,
            "eta": float(eta), "iterations": int(iterations), "server": dict(server_kwargs),
            "private": bool(private), "ledger": ledger, "budget": budget,
            "accountant": accountant, "run_id": run_id,
            "connect_timeout": float(connect_timeout), "reply_timeout": float(reply_timeout)}


def party_configs(data, run_dir, *, private, budget=None, accountant="rdp", ledgers=None,
                  noise_entropy=None, label_party=None, bounds=None) -> list:
    """Write each party's data file into ``run_dir`` and return the node configs (what each
    party's SuperNode is started with).  ``ledgers``: per-party ledger paths; ``bounds``:
    the declared ``(feature_bound, label_bound)`` of a private run."""
    import os

    from .clipshare import warn_if_clipped

    cfgs = []
    for k in range(data.K):
        path = os.path.join(run_dir, f"party{k}.npz")
        if private and bounds is not None:
            # this process holds every party's block (it writes their files), and the parties'
            # own processes print nowhere a user sees on the simulation runtime or the local
            # deployment (quiet); on separate machines each party's process warns at setup
            # (labels at every party: party 0 alone reports on them, as in the engine)
            warn_if_clipped(k, data.block(k), data.y if k == (label_party or 0) else None,
                            *bounds)
        # a party that does not hold the labels gets none in its file (it may be on its own
        # machine: vflpriv flower spec), only the DP releases the protocol derives from them
        save_party_data(path, data.block(k),
                        data.y if label_party in (None, k) else np.zeros(0))
        cfg = {"party": k, "data": path}
        if private:
            cfg.update({"ledger": ledgers[k], "budget-epsilon": float(budget[0]),
                        "budget-delta": float(budget[1]), "accountant": accountant})
        if noise_entropy is not None:          # seeded runs only (tests, reproduction)
            cfg["noise-entropy"] = str(int(noise_entropy[0]))
            cfg["noise-spawn-key"] = ",".join(str(int(v)) for v in noise_entropy[1])
        cfgs.append(cfg)
    return cfgs


__all__ = ["LinkTransport", "VerticalParty", "serve", "make_spec", "party_configs",
           "save_party_data", "load_party_data", "PublicShape"]


def run_info(backend, out, cfgs, private) -> dict:
    """What the command reports of a ServerApp's result: Flower bytes, the error, the parties'
    ledgers (shared by the vertical and secure families)."""
    return {"backend": backend, "bytes": out["flower"], "totals": out["flower_totals"],
            "error": out["error"], "rounds_completed": out["t"], "phases": out.get("phases"),
            "party_ledgers": [c.get("ledger") for c in cfgs] if private else None}


def run(backend, data, loss, eta, iterations, *, server_kwargs, private, run_dir,
        ledger=None, budget=None, accountant="rdp", run_id=None, party_ledgers=None,
        party_budget=None, noise_root=None, connect_timeout=60.0, reply_timeout=600.0,
        progress=None, quiet=True, spec_dir=None, pinning=None):
    """Run a vertical method on ``backend`` ("flower-sim" or "flower"); returns
    ``(RunResult, flower)`` where ``flower`` holds the Flower byte counts, each party's own
    spend and the error that stopped the run, if any (:class:`~.link.PartyLost` /
    :class:`~.link.PartyRefused`: which party, which round).  ``spec_dir``: nothing runs; the
    description for separate machines is written there and ``(None, what was written)``
    returned (``vflpriv flower spec run``; ``pinning`` is unused: these methods exchange no
    keys)."""
    from .engine import RunResult, replay_objective

    spec = make_spec(data, loss=loss, eta=eta, iterations=iterations,
                     server_kwargs=server_kwargs, private=private, ledger=ledger, budget=budget,
                     accountant=accountant, run_id=run_id, connect_timeout=connect_timeout,
                     reply_timeout=reply_timeout)
    cfgs = party_configs(data, run_dir, private=private, budget=party_budget or budget,
                         accountant=accountant, ledgers=party_ledgers,
                         noise_entropy=None if noise_root is None else noise_entropy_of(noise_root),
                         bounds=tuple(server_kwargs["clip"][:2]) if private else None)
    from ..runtime.backends import describe, launch

    if spec_dir:
        return None, describe(run_dir, spec, cfgs)
    out = launch(backend, spec, cfgs, run_dir, progress=progress, quiet=quiet)
    flower = run_info(backend, out, cfgs, private)
    if "x" not in out:
        return None, flower
    first, history = replay_objective(data, loss, eta, out["selections"], out["gammas"],
                                      out.get("intercepts"))
    res = RunResult(algorithm="dfw" if server_kwargs.get("algorithm") == "dfw" else
                    ("dp-bcfw" if private else "bcfw"), x=out["x"], objective=history,
                    initial_objective=first, meter=out["meter"], K=data.K, n=data.n, m=out["m"],
                    blocks=data.blocks, seconds=0.0, released=out["released"],
                    selections=out["selections"], naive_uplink=out["naive"],
                    full_gradient_uplink=out["fullgrad"], ledger=None,
                    noise_plan=server_kwargs.get("noise_plan"), p_min=out["p_min"],
                    intercept=out.get("intercept"), intercepts=list(out.get("intercepts") or []))
    return res, flower
