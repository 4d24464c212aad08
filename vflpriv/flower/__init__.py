"""Flower as one backend of the federated runtime (flwr 1.41, Message API; docs/flower.md).

What is here: the transport over a Flower Grid (:mod:`.link`), the one ServerApp and one
ClientApp that host any family's roles (:mod:`.apps`, :mod:`.clientapp`; the roles themselves
live with their families, :mod:`vflpriv.runtime.families`), and deployment: a SuperLink and
SuperNodes on this machine (:mod:`.deploy`), run descriptions for separate machines
(:mod:`.spec`).

What stays where: a party's data, its noise generator and its ledger live in its ClientApp
(its SuperNode's process); the ServerApp sees only the project's typed messages, and each party
refuses a release its own budget cannot pay for before drawing noise.

``flwr`` is an optional extra (``pip install -e ".[flower]"``); nothing here imports it at module
level, so ``import vflpriv`` works without it and the backends say what to install.  The backend
names and options are :mod:`vflpriv.runtime.backends`' (re-exported here).
"""
from __future__ import annotations

from ..runtime.backends import (BACKENDS, DEFAULT_ON_CLIENT_LOSS, FLWR_PIN,  # noqa: F401
                                INSTALL_HINT, ON_CLIENT_LOSS, FlowerOptions, check_backend,
                                on_client_loss, require_flwr)
