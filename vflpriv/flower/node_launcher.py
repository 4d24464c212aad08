"""``python -m vflpriv.flower.node_launcher POLL [flower-supernode options]``: flwr's own
``flower-supernode`` with its idle poll at ``POLL`` seconds.

flwr 1.41's SuperNode asks the SuperLink for a message, and when there is none sleeps 3 s before
asking again (``time.sleep(3)`` in ``flwr.supernode.start_client_internal``, no setting changes
it); while a ClientApp works on a message it checks for the reply every 0.5 s.  On one machine
(tests, drills) most of a deployed run is these sleeps.  This launcher gives that module a
``time`` whose ``sleep`` waits at most ``POLL`` seconds, then runs the unchanged
``flower-supernode`` entry point with the remaining arguments: the same SuperNode, the same
messages, only asking more often.  The SuperExec the SuperNode starts (``flower-superexec``,
which asks it for ClientApp tasks every 1 s) gets the same interval through its own setting,
``FLWR_SUPEREXEC_TASK_POLL_INTERVAL`` in its environment.
"""
from __future__ import annotations

import sys
import time
import types


def fast_clock(poll: float):
    """A stand-in for the ``time`` module whose ``sleep(s)`` sleeps ``min(s, poll)``."""
    clock = types.ModuleType("time")
    clock.__dict__.update(time.__dict__)
    real = time.sleep

    def sleep(seconds):
        real(min(seconds, poll))

    clock.sleep = sleep
    return clock


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    poll = float(argv.pop(0))
    if not poll > 0:
        raise SystemExit(f"node_launcher: the poll must be positive seconds, got {poll!r}")
    import os

    os.environ["FLWR_SUPEREXEC_TASK_POLL_INTERVAL"] = repr(poll)     # for the SuperExec child
    from flwr.supernode import start_client_internal as sci

    sci.time = fast_clock(poll)
    from flwr.supernode.cli import flower_supernode

    sys.argv = ["flower-supernode"] + argv
    return flower_supernode()


if __name__ == "__main__":
    sys.exit(main())
