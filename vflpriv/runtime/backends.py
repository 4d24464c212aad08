"""The backends by name, their options, and :func:`launch`, which hosts a run's roles on one.

- ``inprocess`` (default): every party is an object in this process; messages are still
  serialized and metered.  For tests, teaching and one-machine runs.
- ``flower-sim``: Flower's simulation runtime (Ray) runs the parties as ClientApps on virtual
  SuperNodes inside this machine -- many clients without one process each.
- ``flower``: a real deployment (``vflpriv.flower.deploy``): a SuperLink and one SuperNode per
  party; docs/flower.md gives the commands to do the same across machines with TLS.

A family's entry point (``vertical.solve``, ``sparse.fit``, ``horizontal.run``, ``FedP3.fit``)
describes its run once -- the server role's ``spec`` and each party's own config -- and calls
:func:`launch` with the backend its caller picked.  The Flower backends are found by module
name on use (:data:`HOSTS`), the way Flower loads apps by reference, so the families never
import :mod:`vflpriv.flower` and ``import vflpriv`` never needs ``flwr``.
"""
from __future__ import annotations

import importlib
import os
from dataclasses import dataclass

from ..errors import InputError

BACKENDS = ("inprocess", "flower-sim", "flower")
FLWR_PIN = "flwr[simulation]==1.41.0"
INSTALL_HINT = ('pip install -c constraints.txt -e ".[flower]"  (installs ' + FLWR_PIN + ")")


#: the API also takes ``"local"``: the Flower backends' code path (the family's roles, real
#: frames) over an in-process :class:`~.link.LocalLink`, without Flower -- for tests and
#: for checking a new family's roles; not a deployment, so not a command-line choice
API_BACKENDS = BACKENDS + ("local",)


def check_backend(backend) -> str:
    """The backend's name, or one clear error naming the bad value."""
    if backend not in API_BACKENDS:
        raise InputError(f"--backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    return backend


def require_flwr(backend="flower-sim"):
    """Import flwr or say what to install (raised before any budget is spent)."""
    if backend == "local":
        return None
    try:
        import flwr
    except ImportError:
        raise InputError(f"--backend {backend} needs Flower, which is not installed: "
                         f"{INSTALL_HINT}") from None
    major, minor = (int(v) for v in flwr.__version__.split(".")[:2])
    if (major, minor) < (1, 41):
        raise InputError(f"--backend {backend} needs flwr >= 1.41 (the Message API), found "
                         f"{flwr.__version__}: {INSTALL_HINT}")
    if backend == "flower-sim":
        try:
            import ray  # noqa: F401
        except ImportError:
            raise InputError(f"--backend flower-sim needs Flower's simulation runtime (Ray): "
                             f"{INSTALL_HINT}") from None
    return flwr




@dataclass(frozen=True)
class FlowerOptions:
    """How a Flower backend runs (defaults suit one machine).

    ``connect_timeout``: seconds to wait for every party's SuperNode at start (a party still
    missing then is named in the error); ``reply_timeout``: seconds one request may take;
    ``party_budget``: ``(epsilon, delta)`` each party enforces on its own releases (default: the
    run's budget); ``party_ledgers``: each party's ledger file (default: beside the run's ledger,
    ``LEDGER.party<k>``); ``run_dir``: where the command keeps the parties' files and the
    deployment's logs (default: a temporary directory, removed at the end); ``on_client_loss``:
    ``"stop"`` or ``"continue"`` when a party fails mid-run (None: the family's default,
    :func:`on_client_loss`).
    """
    connect_timeout: float = 60.0
    reply_timeout: float = 600.0
    party_budget: tuple | None = None
    party_ledgers: tuple | None = None
    run_dir: str | None = None
    quiet: bool = True
    on_client_loss: str | None = None
    #: write the run description for separate machines into this folder instead of running
    #: (``vflpriv flower spec``; :mod:`.spec`)
    spec_dir: str | None = None
    #: with ``spec_dir``: each party's identity fingerprint for a description with key
    #: exchanges (dp-bcfw-secure), or unpinned (:class:`vflpriv.runtime.keys.Pinning`)
    pinning: object = None


ON_CLIENT_LOSS = ("stop", "continue")

#: what a lost party does to a run when ``--on-client-loss`` is not given: the horizontal, sparse
#: and FedP3 methods already run with partial participation (a lost client is one never sampled
#: again; FedP3's accuracy average leaves it out: its test records left with it), so they
#: continue; a vertical party holds columns nobody else has, so its loss stops the run
DEFAULT_ON_CLIENT_LOSS = {"horizontal": "continue", "sparse": "continue", "fedp3": "continue",
                          "vertical": "stop"}


def on_client_loss(options, family) -> str:
    """The policy for ``family`` from ``options`` (a :class:`FlowerOptions` or None); one
    clear error for a bad value or for ``continue`` where the method cannot go on."""
    value = getattr(options, "on_client_loss", None)
    if value is None:
        return DEFAULT_ON_CLIENT_LOSS[family]
    if value not in ON_CLIENT_LOSS:
        raise InputError(f"--on-client-loss must be stop or continue, got {value!r}")
    if value == "continue" and family == "vertical":
        raise InputError("--on-client-loss continue: a vertical run cannot go on without a "
                         "party (its feature columns are gone with it); use stop")
    return value


#: backend -> module whose ``launch(backend, spec, party_configs, run_dir, progress=, quiet=)``
#: hosts the roles there.  ``local`` needs no host module: :func:`run_local` runs them over a
#: :class:`~.link.LocalLink` in this process (the roles' code path without Flower).
HOSTS = {"flower-sim": "vflpriv.flower.apps", "flower": "vflpriv.flower.apps"}


def launch(backend, spec, party_configs, run_dir, *, progress=None, quiet=True) -> dict:
    """Host ``spec``'s server role and one party role per entry of ``party_configs`` on
    ``backend``; ``progress(t)`` after each completed round.  Returns the server role's
    result (a dict; ``"error"`` says what stopped the run, if anything)."""
    if backend == "local":
        return run_local(spec, party_configs, progress=progress)
    if backend not in HOSTS:
        raise InputError(f"no host for backend {backend!r}; known: local, {', '.join(HOSTS)}")
    from . import views

    if views.enabled():      # tests only: parties in other processes log into the same folder
        party_configs = [dict(c, **{"view-log": os.environ[views.ENV]}) for c in party_configs]
    return importlib.import_module(HOSTS[backend]).launch(backend, spec, party_configs, run_dir,
                                                progress=progress, quiet=quiet)


def run_local(spec, party_configs, *, progress=None) -> dict:
    """The server role of ``spec["family"]`` with its parties over a :class:`~.link.LocalLink`."""
    from .families import roles
    from .link import LocalLink

    serve, _ = roles(spec["family"])
    return serve(lambda K: LocalLink(party_configs), spec, progress=progress)


def describe(run_dir, spec, party_configs) -> dict:
    """Write ``spec`` and the parties' configs into ``run_dir`` for separate machines instead of
    running (``vflpriv flower spec``; the Flower host's format, ``vflpriv.flower.spec``)."""
    return importlib.import_module("vflpriv.flower.spec").write_description(
        run_dir, spec, party_configs)
