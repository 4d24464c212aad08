"""The one ClientApp: hosts any family's party role (:mod:`vflpriv.runtime.roles`).

A deployed SuperNode starts a fresh ClientApp process for every message, and the simulation
runtime hands messages to whichever actor is free, so the role is rebuilt for each message by
:func:`vflpriv.runtime.roles.answer` from the party's own config (the SuperNode's
``--node-config``; on the simulation runtime the entry for its ``partition-id`` of the configs
the command built), the public setup and the state the previous message left in the node's
``context.state`` (which the SuperNode keeps in its own process: it never crosses the network).
"""
from __future__ import annotations

from .link import RECORD

STATE = "vflpriv-state"


def node_party_config(context, sim_configs=None) -> dict:
    """The party's own config: the simulation entry for its partition, or its node config."""
    nc = dict(context.node_config)
    if sim_configs is not None:
        return dict(sim_configs[int(nc["partition-id"])])
    return nc


def make_client_app(build, sim_configs=None):
    """A ClientApp whose party role is ``build(party_config, setup)``.  ``sim_configs``: per
    partition-id configs on the simulation runtime (deployment reads the node config)."""
    from flwr.app import ConfigRecord, Message, RecordDict
    from flwr.clientapp import ClientApp

    from ..runtime.roles import answer

    app = ClientApp()

    @app.query()
    def _query(msg, context):
        rec = msg.content[RECORD]
        cfg = node_party_config(context, sim_configs)
        st = context.state
        store = dict(st[STATE]) if STATE in st else {}
        out = answer(build, cfg, store, rec["kind"], rec["frame"], int(rec["round"]))
        if store:                 # saved before replying: a retry finds the state after this one
            st[STATE] = ConfigRecord({"setup": store["setup"], "state": store["state"]})
        return Message(RecordDict({RECORD: ConfigRecord(out)}), reply_to=msg)

    return app
