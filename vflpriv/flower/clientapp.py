"""The party's side: one Flower ClientApp that serves any of the project's methods.

A deployed SuperNode starts a fresh ClientApp process for every message, and the simulation
runtime hands messages to whichever actor is free, so nothing may live in Python objects between
messages.  Each message therefore rebuilds the party's side from

- its **party config**: the SuperNode's ``--node-config`` in deployment (``party``, ``data``,
  ``ledger``, ``budget-epsilon``, ...: the party's own files and policy); on the simulation runtime
  the entry for its ``partition-id`` of the config the command built;
- the **public setup** the server sent in its first message (kept in the node's ``context.state``);
- the **state** its previous message left in ``context.state`` (noise generator, iterate, ...),
  which the SuperNode keeps in its own process: it never crosses the network.

Loaded data are cached per process (keyed by the file and its modification time), so an
actor that serves many messages reads each file once.

A handler raises :class:`Refused` (or ``accounting.BudgetExceeded``) to refuse a request; the
reply then says why and the server stops the run naming the party.
"""
from __future__ import annotations

import json
import pickle
from abc import ABC, abstractmethod

from .link import RECORD

STATE = "vflpriv-state"


class Refused(Exception):
    """A party's refusal: its budget, or input it cannot accept."""


class ClientSide(ABC):
    """One party's side of one method (see module docstring)."""

    @abstractmethod
    def handle(self, kind: str, frame: bytes, round: int) -> tuple[str, bytes]:
        """Answer one message: ``(reply kind, reply frame)``."""

    @abstractmethod
    def get_state(self) -> dict:
        """What must survive to the next message (picklable; stays in the party's SuperNode)."""

    @abstractmethod
    def set_state(self, state: dict) -> None:
        """Restore :meth:`get_state`'s output."""


def own_budget(cfg, setup, *, per_party=False, who="party"):
    """The party's own :class:`accounting.BudgetFilter`, from its node config (``ledger``,
    ``budget-epsilon``, ``budget-delta``, ``accountant``): the ledger's header budget governs.
    ``per_party``: the budget covers this party's records alone (local DP)."""
    from accounting import BudgetFilter, Ledger

    k = int(cfg["party"])
    if not cfg.get("ledger"):
        raise Refused(f"{who} {k} has no ledger: a private run needs one in its node config "
                      "(ledger=PATH)")
    try:
        eps, delta = float(cfg["budget-epsilon"]), float(cfg["budget-delta"])
    except (KeyError, ValueError):
        raise Refused(f"{who} {k} has no budget: its node config needs budget-epsilon and "
                      "budget-delta") from None
    acc = str(cfg.get("accountant", setup.get("accountant", "rdp")))
    header = {"epsilon": eps, "delta": delta, "accountant": acc}
    if per_party:
        header["per_party"] = True
    led = Ledger(cfg["ledger"], budget=header, run_id=setup.get("run_id"))
    b_eps, b_delta = led.governing_budget(eps, delta, per_party=per_party)
    return BudgetFilter(led, b_eps, b_delta, accountant=acc, per_party=per_party)


def node_party_config(context, sim_configs=None) -> dict:
    """The party's own config: the simulation entry for its partition, or its node config."""
    nc = dict(context.node_config)
    if sim_configs is not None:
        return dict(sim_configs[int(nc["partition-id"])])
    return nc


def make_client_app(build, sim_configs=None):
    """A ClientApp whose handler is ``build(party_config, setup)`` (``setup``: the public JSON
    the server sent first, or None for the hello).  ``sim_configs``: per partition-id configs on
    the simulation runtime (deployment reads the node config)."""
    from flwr.app import ConfigRecord, Message, RecordDict
    from flwr.clientapp import ClientApp

    app = ClientApp()

    @app.query()
    def _query(msg, context):
        rec = msg.content[RECORD]
        kind, frame, t = rec["kind"], rec["frame"], int(rec["round"])
        cfg = node_party_config(context, sim_configs)
        out = {"kind": "", "frame": b"", "round": t}
        try:
            if kind == "hello":
                out.update(kind="hello", frame=str(int(cfg["party"])).encode())
            else:
                st = context.state
                if kind == "setup":
                    setup = json.loads(frame.decode())
                    side = build(cfg, setup)
                    reply_kind, reply = side.handle(kind, frame, t)
                else:
                    if STATE not in st:
                        raise Refused("no setup received for this run")
                    setup = json.loads(st[STATE]["setup"].decode())
                    side = build(cfg, setup)
                    side.set_state(pickle.loads(st[STATE]["state"]))
                    reply_kind, reply = side.handle(kind, frame, t)
                # saved before replying: a retried message finds the state after this one
                st[STATE] = ConfigRecord({"setup": json.dumps(setup).encode(),
                                          "state": pickle.dumps(side.get_state())})
                out.update(kind=reply_kind, frame=reply)
        except Exception as exc:   # refusals go back as data; anything else is a failure
            from accounting import BudgetExceeded

            from ..errors import InputError

            if not isinstance(exc, (Refused, BudgetExceeded, InputError)):
                raise
            out = {"refused": f"{type(exc).__name__}: {exc}"}
        return Message(RecordDict({RECORD: ConfigRecord(out)}), reply_to=msg)

    return app
