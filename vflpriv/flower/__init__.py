"""Running the federated methods on Flower (flwr 1.41, Message API).

Three backends, one result (docs/flower.md):

- ``inprocess`` (default): every party is an object in this process; messages are still
  serialized and metered.  For tests, teaching and one-machine runs.
- ``flower-sim``: Flower's simulation runtime (Ray) runs the parties as ClientApps on virtual
  SuperNodes inside this machine -- many clients without one process each.
- ``flower``: a real deployment.  The command starts a SuperLink and one SuperNode per party on
  127.0.0.1 (:mod:`.deploy`), submits the run with ``flwr run`` and stops everything at the end;
  docs/flower.md gives the commands to do the same across machines with TLS.

What stays where: a party's data, its noise generator and its ledger live in its ClientApp
(its SuperNode's process); the ServerApp sees only the project's typed messages, and each party
refuses a release its own budget cannot pay for before drawing noise (:mod:`.party_budget`).

``flwr`` is an optional extra (``pip install -e ".[flower]"``); nothing here imports it at module
level, so ``import vflpriv`` works without it and the backends say what to install.
"""
from __future__ import annotations

from ..errors import InputError

BACKENDS = ("inprocess", "flower-sim", "flower")
FLWR_PIN = "flwr[simulation]==1.41.0"
INSTALL_HINT = ('pip install -c constraints.txt -e ".[flower]"  (installs ' + FLWR_PIN + ")")


def check_backend(backend) -> str:
    """The backend's name, or one clear error naming the bad value."""
    if backend not in BACKENDS:
        raise InputError(f"--backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    return backend


def require_flwr(backend="flower-sim"):
    """Import flwr or say what to install (raised before any budget is spent)."""
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


from dataclasses import dataclass  # noqa: E402


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


ON_CLIENT_LOSS = ("stop", "continue")

#: what a lost party does to a run when ``--on-client-loss`` is not given: horizontal and sparse
#: methods already run with partial participation (a lost client is one never sampled again),
#: so they continue; a vertical party holds columns nobody else has, so its loss stops the run;
#: FedP3 asks every client at evaluation and has no continue path yet
DEFAULT_ON_CLIENT_LOSS = {"horizontal": "continue", "sparse": "continue", "fedp3": "stop",
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
    if value == "continue" and family == "fedp3":
        raise InputError("--on-client-loss continue is not available for FedP3 yet (its "
                         "evaluation asks every client); use stop")
    return value
