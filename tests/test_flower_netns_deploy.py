"""A deployment across network namespaces over shaped links (vflpriv/flower/netns.py): the
SuperLink in one namespace, each party's SuperNode in its own, every party's link shaped (tbf:
rate, the delay relay: 20 ms RTT).  dp-bcfw-secure least squares through it ends at the
in-process model bit for bit; the link's delay is really there (a round costs at least one
round trip; a bare request/reply through the relay takes 20 ms or more); nothing is left
behind.  Needs root and iproute2 (skipped otherwise, with the reason).

The link test takes a few seconds; the deployment about a minute and a half on the 2-core
machine (slow): a deployed exchange costs seconds whatever the link (each message starts a
ClientApp process), and a 2-round dp-bcfw-secure run has about 20.  Its SuperNodes and their
SuperExecs ask for work every 0.2 s instead of Flower's 3 s and 1 s (``VFLPRIV_IDLE_POLL``,
vflpriv/flower/node_launcher.py): the same processes and messages over the same links, with less
idle waiting.  The deployed run starts at the session's start (conftest.py) and runs on a thread,
in a child Python (the idle poll is set in its environment only); the in-process reference runs
in the main thread then, and the test makes every assertion on the result."""
import os
import pickle
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

pytest.importorskip("flwr")

from vflpriv.data import VerticalData, make_synthetic  # noqa: E402
from vflpriv.flower import netns  # noqa: E402
from vflpriv.vertical.api import solve  # noqa: E402

OK, WHY = netns.available()
pytestmark = pytest.mark.skipif(not OK, reason=f"network namespaces unavailable: {WHY}")

RTT_MS = 20.0
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _echo_server(ns, port, ready):
    """An echo server on 127.0.0.1:port of namespace ns (each connection in a thread; the
    relay's own readiness probe is one of them)."""
    netns._setns(ns)
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen()
    ready.set()

    def echo(c):
        while True:
            b = c.recv(1 << 16)
            if not b:
                break
            c.sendall(b)
        c.close()

    while True:
        c, _ = s.accept()
        threading.Thread(target=echo, args=(c,), daemon=True).start()


def test_shaped_link_delays_and_rates(tmp_path):
    """The harness's own link: request/reply >= RTT (and not absurdly more), 2 MB at 100 Mbit/s
    no faster than the rate allows; every namespace gone afterwards."""
    with netns.ShapedNetwork(1, rate="100mbit", rtt_ms=RTT_MS, run_dir=str(tmp_path)) as net:
        assert set(netns.leftovers(net.id)) == {net.link_ns, net.party_ns[0]}
        ready = threading.Event()
        threading.Thread(target=_echo_server, args=(net.link_ns, 7000, ready),
                         daemon=True).start()
        ready.wait(10)
        host, port = net.superlink_address(0, 7000).split(":")

        def client():
            c = socket.create_connection((host, int(port)))
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            rtts = []
            for _ in range(5):
                t0 = time.perf_counter()
                c.sendall(b"x")
                c.recv(1)
                rtts.append(time.perf_counter() - t0)
            big = 2_000_000
            t0 = time.perf_counter()
            c.sendall(bytes(big))
            got = 0
            while got < big:
                got += len(c.recv(1 << 20))
            bulk = time.perf_counter() - t0
            c.close()
            return rtts, bulk

        rtts, bulk = netns.in_namespace(net.party_ns[0], client)
        run_id = net.id
    assert min(rtts) >= RTT_MS / 1000 * 0.99, rtts
    assert np.median(rtts) < RTT_MS / 1000 + 0.05, rtts          # the relay adds ~RTT, not more
    # 2 MB up and echoed back (the two directions overlap): at least 16 Mbit / 100 Mbit/s plus
    # one RTT (0.18 s; 0.02 s unshaped)
    assert bulk >= 2_000_000 * 8 / 100e6 + RTT_MS / 1000, bulk
    assert netns.leftovers(run_id) == []


T = 2
KW = dict(algorithm="dp-bcfw-secure", epsilon=4.0, delta=1e-5, feature_bound=1.0,
          label_bound=3.0, iterations=T, seed=4, max_features=2)


def _data():
    A, y, _ = make_synthetic(n=300, d=16, density=0.3, seed=0)
    return VerticalData.from_arrays(A, y, "balanced", parties=2)


def deployed_solve(tmp):
    """The run through the shaped links (in the child Python): what the test checks goes to a
    pickle."""
    stamps = []
    with netns.ShapedNetwork(2, rate="100mbit", rtt_ms=RTT_MS,
                             run_dir=os.path.join(tmp, "net")) as net:
        run_id = net.id
        t0 = time.perf_counter()
        sol = solve(_data(), ledger=os.path.join(tmp, "b.ledger"), backend="flower",
                    callback=lambda t, f: stamps.append(time.perf_counter()), **KW)
        wall = time.perf_counter() - t0
        stats = net.relay_stats()
    with open(os.path.join(tmp, "b.pkl"), "wb") as fh:
        pickle.dump({"x": sol.x, "objective": sol.objective, "uplink": sol.uplink_framed,
                     "downlink": sol.downlink_framed,
                     "epsilon_spent": sol.privacy["epsilon_spent"],
                     "phases": sol.extra["flower"]["phases"], "stats": stats, "wall": wall,
                     "stamps": len(stamps), "run_id": run_id}, fh)


def _deployment(tmp_path):
    """At the session's start (conftest.py): the in-process reference here; the deployed run on
    a thread, in a child Python whose SuperNodes poll every 0.2 s (``VFLPRIV_IDLE_POLL`` in its
    environment only)."""
    if not OK:
        return lambda: None
    ref = solve(_data(), ledger=str(tmp_path / "a.ledger"), **KW)

    def run():
        env = dict(os.environ, VFLPRIV_IDLE_POLL="0.2", PYTHONPATH=os.pathsep.join(
            [ROOT, os.path.dirname(os.path.abspath(__file__))]
            + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
        code = "import sys, test_flower_netns_deploy as t; t.deployed_solve(sys.argv[1])"
        r = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
        with open(tmp_path / "b.pkl", "rb") as fh:
            return ref, pickle.load(fh)

    return run


@pytest.mark.slow
@pytest.mark.deployment(prepare=_deployment)
def test_secure_least_squares_through_shaped_links_equals_inprocess(deployment):
    _, (ref, sol) = deployment
    assert np.array_equal(ref.x, sol["x"])
    assert ref.objective == sol["objective"]
    assert ref.uplink_framed == sol["uplink"] and ref.downlink_framed == sol["downlink"]
    assert ref.privacy["epsilon_spent"] == sol["epsilon_spent"]
    # every party's traffic went through its shaped link: the relay counted it on 10.213.k.1,
    # which only party k's namespace reaches
    stats = sol["stats"]
    assert all(stats["parties"][str(k)]["uplink_bytes"] > 0 for k in range(2)), stats
    phases = sol["phases"]
    assert phases["rounds"]["exchanges"] >= T
    # each exchange crosses the link both ways: at least one RTT each, measured on the server
    for name in ("setup", "rounds"):
        assert phases[name]["seconds"] >= phases[name]["exchanges"] * RTT_MS / 1000
    assert sol["wall"] >= T * RTT_MS / 1000
    assert sol["stamps"] == T
    run_id = sol["run_id"]
    assert netns.leftovers(run_id) == []
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert run_id not in listed
