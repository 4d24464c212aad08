"""``--backend`` for every federated command (``vflpriv run``, ``sparse``, ``horizontal``,
``fedp3``; the options are declared in :func:`vflpriv.cli.options.add_backend`): the Flower
settings they make, the horizontal JSON ``flower`` section,
and how a lost or refusing party ends the command (one line on stderr; exit 1 for a refusal, 3
for a lost party)."""
from __future__ import annotations

import math
import sys

from ..errors import InputError


def options(args, family="horizontal"):
    """``(backend, FlowerOptions or None)``; checks flwr is installed and ``--on-client-loss``
    fits the family (vertical: stop only) before any work."""
    from ..flower import FlowerOptions, on_client_loss, require_flwr

    backend = args.backend
    loss = getattr(args, "on_client_loss", None)
    on_client_loss(FlowerOptions(on_client_loss=loss), family)    # names a bad value
    # checked on every backend: a bad value is bad input even where it is not used
    if not (args.connect_timeout > 0 and math.isfinite(args.connect_timeout)):
        raise InputError(f"--connect-timeout must be a positive number of seconds, got "
                         f"{args.connect_timeout!r}")
    if backend == "inprocess":
        return backend, None
    require_flwr(backend)
    return backend, FlowerOptions(connect_timeout=args.connect_timeout, quiet=True,
                                  on_client_loss=loss)


def section(info, uplink_bytes, downlink_bytes) -> dict:
    """Flower message bytes beside the project's frame bytes and the in-process count of the
    same wire messages, per client and in total; each client's ledger and who was stopped."""
    t = info["totals"]
    return {"backend": info["backend"], "uplink_flower_bytes": t["uplink"],
            "downlink_flower_bytes": t["downlink"], "uplink_frame_bytes": t["uplink_frames"],
            "downlink_frame_bytes": t["downlink_frames"],
            "inprocess_uplink_bytes": uplink_bytes, "inprocess_downlink_bytes": downlink_bytes,
            "per_client": info["bytes"], "client_ledgers": info.get("client_ledgers"),
            "stopped_clients": info.get("stopped")}


def lost_line(command, lost, out=None):
    """One line on stderr per run that went on without lost clients (``--on-client-loss
    continue``): who and when; the JSON's ``lost_clients`` has the reasons."""
    if lost:
        who = ", ".join(f"{x['client']} (round {x['round']})" for x in lost)
        (out or sys.stderr).write(f"vflpriv {command}: continued without lost client(s) {who}; "
                                  "see lost_clients in the JSON\n")


def print_line(f):
    sys.stdout.write(f"  {f['backend']}: uplink {f['uplink_flower_bytes']:,} B in Flower messages "
                     f"({f['uplink_frame_bytes']:,} B of frames, {f['inprocess_uplink_bytes']:,}"
                     f" B in process); downlink {f['downlink_flower_bytes']:,} B "
                     f"({f['downlink_frame_bytes']:,} B, {f['inprocess_downlink_bytes']:,} B)\n")


def client_failure(command, exc, close=None):
    """Exit code for a party that refused (1) or was lost (3), after one line on stderr (and
    ``close()``, e.g. the progress bar's); None if ``exc`` is neither."""
    from ..flower.link import PartyLost, PartyRefused

    if not isinstance(exc, (PartyLost, PartyRefused)):
        return None
    if close is not None:
        close()
    what = "" if isinstance(exc, PartyRefused) else "the run stopped; "
    sys.stderr.write(f"\nvflpriv {command}: {exc}; {what}the ledgers hold every release made "
                     "before it\n")
    return 1 if isinstance(exc, PartyRefused) else 3
