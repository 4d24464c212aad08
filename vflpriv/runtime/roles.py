"""A party's role: what one party of a run does with each message it receives.

A host (the in-process :class:`~vflpriv.runtime.link.LocalLink`, or Flower's ClientApp on a
SuperNode) may build a new role object for every message -- a deployed SuperNode starts a fresh
ClientApp process per message -- so nothing may live in Python objects between messages.  Each
message therefore rebuilds the role from

- the party's **own config** (its data file, ledger, budget, noise entropy: the SuperNode's
  ``--node-config`` in deployment);
- the **public setup** the server sent in its first message;
- the **state** its previous message left (:meth:`PartyRole.get_state`), which the host keeps on
  the party's side: it never crosses the network.

:func:`answer` is that cycle, written once for every host.  A role raises :class:`Refused` (or
``accounting.BudgetExceeded``) to refuse a request; the reply then says why and the server stops
the run naming the party.
"""
from __future__ import annotations

import json
import os
import pickle
import warnings
from abc import ABC, abstractmethod

from ..errors import ClippingWarning


class Refused(Exception):
    """A party's refusal: its budget, or input it cannot accept."""


class PartyRole(ABC):
    """One party's side of one method (see module docstring)."""

    @abstractmethod
    def handle(self, kind: str, frame: bytes, round: int) -> tuple[str, bytes]:
        """Answer one message: ``(reply kind, reply frame)``."""

    @abstractmethod
    def get_state(self) -> dict:
        """What must survive to the next message (picklable; stays on the party's side)."""

    @abstractmethod
    def set_state(self, state: dict) -> None:
        """Restore :meth:`get_state`'s output."""


def answer(build, cfg: dict, store: dict, kind: str, frame: bytes, round: int) -> dict:
    """One message to one party: ``{"kind", "frame", "round"}`` or ``{"refused": why}``.

    ``build(cfg, setup)`` makes the party's role; ``store`` is the party's own state between
    messages (``{"setup": bytes, "state": bytes}``; updated in place before the reply, so a
    retried message finds the state after this one).  ``hello`` answers the party's index.
    """
    out = {"kind": "", "frame": b"", "round": int(round)}
    setup = {}
    from . import partylog, views

    if cfg.get("view-log"):      # tests only (views.py): this process logs what it decodes
        import os

        os.environ[views.ENV] = str(cfg["view-log"])
    try:
        if kind == "hello":
            out.update(kind="hello", frame=str(int(cfg["party"])).encode())
            return out
        if kind == "setup":
            setup = json.loads(frame.decode())
            with views.receiving(int(cfg["party"])):
                role = build(cfg, setup)
        else:
            if "setup" not in store:
                raise Refused("no setup received for this run")
            setup = json.loads(bytes(store["setup"]).decode())
            with warnings.catch_warnings():
                # the role is rebuilt for every message (a deployed SuperNode starts a process
                # per message): the party's warnings on its own data were given at setup
                warnings.simplefilter("ignore", ClippingWarning)
                with views.receiving(int(cfg["party"])):
                    role = build(cfg, setup)
            role.set_state(pickle.loads(bytes(store["state"])))
        before = partylog.ledger_size(cfg)
        with views.receiving(int(cfg["party"])):     # what it decodes is its view (tests)
            reply_kind, reply = role.handle(kind, frame, round)
        store["setup"] = json.dumps(setup).encode()
        store["state"] = pickle.dumps(role.get_state())
        out.update(kind=reply_kind, frame=reply)
        if partylog.on(cfg):
            if kind == "setup":
                partylog.say(cfg, f"run {str(setup.get('run_id'))[:12]} "
                                  f"({setup.get('family')}) accepted at setup")
            partylog.charges(cfg, setup, before)
    except Exception as exc:   # refusals go back as data; anything else is a failure
        from accounting import BudgetExceeded

        from ..errors import InputError

        if not isinstance(exc, (Refused, BudgetExceeded, InputError)):
            raise
        out = {"refused": f"{type(exc).__name__}: {exc}"}
        if kind != "close":            # a clean-up after a run that never reached it
            partylog.say(cfg, f"refused {kind!r} of run {str(setup.get('run_id'))[:12]}: "
                              f"{type(exc).__name__}: {exc}")
    return out


def own_budget(cfg, setup, *, per_party=False, who="party", create=True):
    """The party's own :class:`accounting.BudgetFilter`, from its own config (``ledger``,
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
    if not create and not os.path.exists(cfg["ledger"]):
        # a check only (before the alignment): a ledger not yet written would hold this budget
        # and nothing spent; no file is made for a run that may still be refused
        from accounting import MemoryLedger

        return BudgetFilter(MemoryLedger(budget=header, run_id=setup.get("run_id")), eps, delta,
                            accountant=acc, per_party=per_party)
    led = Ledger(cfg["ledger"], budget=header, run_id=setup.get("run_id"))
    b_eps, b_delta = led.governing_budget(eps, delta, per_party=per_party)
    return BudgetFilter(led, b_eps, b_delta, accountant=acc, per_party=per_party)
