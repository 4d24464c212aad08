"""Where each family's roles live: ``family -> (module, server role, party role)``.

A family's module defines

- ``serve(connect, spec, progress) -> dict``: the server role.  ``connect(K)`` returns the run's
  transport to K parties (a :class:`~vflpriv.runtime.link.LocalLink` or a Flower ``Link``:
  ``connect(hello)``, ``exchange(...)``, ``meter``, ``lost``); ``spec`` is the run description
  (public); the returned dict is the run's result (``"error"`` holds what stopped it, as data);
- a :class:`~vflpriv.runtime.roles.PartyRole` subclass, built from a party's own config and the
  public setup the server sent first.

The names are strings resolved on use, so looking a family up imports only that family.
"""
from __future__ import annotations

import importlib

FAMILIES = {
    "vertical": ("vflpriv.vertical.remote", "serve", "VerticalParty"),
    "secure": ("vflpriv.vertical.secure.squares.roles", "serve", "SecurePartyRole"),
    "glm": ("vflpriv.vertical.secure.glm.roles", "serve", "GlmPartyRole"),
    "ssp": ("vflpriv.vertical.secure.ssp.roles", "serve", "SspPartyRole"),
    "sparse": ("vflpriv.sparse.remote", "serve", "SparseParty"),
    "horizontal": ("vflpriv.horizontal.remote", "serve", "StrategyParty"),
    "fedp3": ("vflpriv.horizontal.fedp3_remote", "serve", "FedP3Party"),
    "align": ("vflpriv.align.deployed", "serve", "AlignedParty"),
    "predict": ("vflpriv.model.deployed", "serve", "ScoringParty"),
}

#: a node config naming an ID column holds the party's own table, to be aligned by private set
#: intersection first: every message of its run goes to the ``align`` family's party role, which
#: runs the intersection and then hosts the training family's role on the aligned rows
ALIGNED_NODE_KEY = "id-column"
#: a node config naming a model file (its party's ``party<k>.json``) is a scoring party: every
#: message goes to the ``predict`` family's party role, which takes part in no other run
SCORING_NODE_KEY = "model-file"


def register(family: str, module: str, serve: str = "serve", party: str = "Party") -> None:
    """Add (or replace) a family: a third-party method hosted by the same apps."""
    FAMILIES[family] = (module, serve, party)


def roles(family: str):
    """``(serve, party role class)`` of ``family``."""
    try:
        module, serve, party = FAMILIES[family]
    except KeyError:
        raise KeyError(f"no family {family!r}; known: {', '.join(sorted(FAMILIES))}") from None
    m = importlib.import_module(module)
    return getattr(m, serve), getattr(m, party)


def build_party(cfg: dict, setup: dict):
    """The party role of ``setup["family"]`` for the party whose own config is ``cfg`` (the
    ``predict`` family's for a config that names a model file, :data:`SCORING_NODE_KEY`; the
    ``align`` family's for one that names an ID column, :data:`ALIGNED_NODE_KEY`)."""
    family = ("predict" if cfg.get(SCORING_NODE_KEY) else
              "align" if cfg.get(ALIGNED_NODE_KEY) else setup.get("family", "vertical"))
    return roles(family)[1](cfg, setup)
