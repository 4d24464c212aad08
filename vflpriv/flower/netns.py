"""A deployment across Linux network namespaces on this machine, over shaped links.

:class:`ShapedNetwork` makes one namespace for the SuperLink (``vfl-<id>-link``) and one per
party (``vfl-<id>-p<k>``), joins each party to the SuperLink's namespace by its own veth pair
(10.213.k.2 on the party's side, 10.213.k.1 on the SuperLink's), and shapes every link:

- **rate**: a ``tbf`` qdisc on both ends of each veth (the party's end shapes its uplink, the
  SuperLink's end its downlink), ``rate`` each way;
- **delay**: a userspace relay (:mod:`vflpriv.flower.relay`) in the SuperLink's namespace,
  listening on 10.213.k.1 and forwarding to the SuperLink on 127.0.0.1, which holds every chunk
  ``rtt / 2`` in each direction (``netem`` would do it in the kernel, but this machine's kernel
  has no netem; see the relay's docstring for what the relay does not model).

Used as a context manager around a run on the ``flower`` backend
(:class:`~vflpriv.flower.deploy.LocalDeployment` picks it up through :func:`active`, or takes it
as ``network=``): the SuperLink, the ServerApp it starts and ``flwr run`` run in the link's
namespace, each SuperNode and its ClientApps in its party's, all under ``ip netns exec``.  On
exit, on an error and on Ctrl-C (KeyboardInterrupt, and SIGTERM while the harness is up) every
process left in the namespaces is killed and the namespaces are deleted.

Needs root, ``ip`` and ``tc`` (iproute2) and the kernel's veth and tbf; :func:`available` says
why not where they are missing (``vflpriv bench network`` then exits 2, the tests skip).
"""
from __future__ import annotations

import contextlib
import contextvars
import ctypes
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid

SUBNET = "10.213"          # party k's link: 10.213.k.0/24 (.1 the SuperLink's side, .2 the party's)
PREFIX = "vfl-"

_ACTIVE: contextvars.ContextVar = contextvars.ContextVar("vflpriv_network", default=None)


class NetnsUnavailable(RuntimeError):
    """Network namespaces (or the shaping) cannot be set up here; the message says why."""


def active():
    """The :class:`ShapedNetwork` a deployment started now should run in (None: loopback)."""
    return _ACTIVE.get()


def _run(*cmd, check=True):
    r = subprocess.run(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if check and r.returncode != 0:
        raise NetnsUnavailable(f"`{' '.join(cmd)}` failed: {(r.stderr or r.stdout).strip()}")
    return r


def available() -> tuple:
    """``(True, "")`` if namespaces, veth pairs and tbf can be set up here, else ``(False,
    reason)``; tries them (a throwaway namespace, deleted again)."""
    if os.name != "posix" or not sys.platform.startswith("linux"):
        return False, "network namespaces need Linux"
    if os.geteuid() != 0:
        return False, "network namespaces need root (ip netns add)"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return False, f"`{tool}` (iproute2) is not installed"
    probe = f"{PREFIX}probe-{uuid.uuid4().hex[:6]}"
    try:
        _run("ip", "netns", "add", probe)
    except NetnsUnavailable as exc:
        return False, f"cannot create a network namespace: {exc}"
    try:
        _run("ip", "-n", probe, "link", "add", "pa", "type", "veth", "peer", "name", "pb")
        _run("tc", "-n", probe, "qdisc", "add", "dev", "pa", "root", "tbf", "rate", "100mbit",
             "burst", "128kb", "latency", "50ms")
    except NetnsUnavailable as exc:
        return False, f"cannot shape a veth link: {exc}"
    finally:
        _run("ip", "netns", "delete", probe, check=False)
    return True, ""


def parse_rate(text) -> int:
    """Bits per second of a tc-style rate (``1gbit``, ``100mbit``, ``500kbit``, ``1e9``)."""
    m = re.fullmatch(r"\s*([0-9.eE+]+)\s*([kmg]?)(bit|bps)?\s*", str(text).lower())
    if not m:
        from ..errors import InputError

        raise InputError(f"a rate must look like 1gbit, 100mbit or 500kbit, got {text!r}")
    value = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]
    if m.group(3) == "bps":
        value *= 8
    if not value > 0:
        from ..errors import InputError

        raise InputError(f"a rate must be positive, got {text!r}")
    return int(value)


def _setns(ns):
    """Move the calling thread into namespace ``ns`` (network namespaces are per thread)."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/run/netns/{ns}", os.O_RDONLY)
    try:
        if libc.setns(fd, 0x40000000) != 0:            # CLONE_NEWNET
            raise OSError(ctypes.get_errno(), f"setns({ns})")
    finally:
        os.close(fd)


def in_namespace(ns, fn):
    """``fn()`` called in a thread that has entered ``ns``; its result (or its exception)."""
    box = {}

    def body():
        try:
            _setns(ns)
            box["value"] = fn()
        except BaseException as exc:           # handed back to the caller
            box["error"] = exc

    t = threading.Thread(target=body, daemon=True)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box.get("value")


class ShapedNetwork:
    """The namespaces, links, shaping and relay of one deployment (see the module docstring).

    ``parties``: K; ``rate``: each link's rate each way (tc syntax, ``"1gbit"``); ``rtt_ms``: the
    round-trip time the relay adds; ``run_dir``: where the relay's log and counts go.
    """

    def __init__(self, parties, *, rate="1gbit", rtt_ms=20.0, run_dir=None, run_id=None):
        self.K = int(parties)
        if not 1 <= self.K <= 250:
            raise ValueError(f"parties must be 1..250, got {parties}")
        self.rate_bits = parse_rate(rate)
        self.rate = str(rate)
        self.rtt_ms = float(rtt_ms)
        if self.rtt_ms < 0:
            raise ValueError(f"rtt_ms must be >= 0, got {rtt_ms}")
        self.id = run_id or uuid.uuid4().hex[:6]
        self.link_ns = f"{PREFIX}{self.id}-link"
        self.party_ns = [f"{PREFIX}{self.id}-p{k}" for k in range(self.K)]
        self.run_dir = run_dir
        self.relay = None
        self.relay_port = None
        self.stats_path = None
        self._made = []
        self._token = None
        self._old_term = None

    # -- what a deployment asks ---------------------------------------------------------------
    def namespace(self, role) -> str:
        """``"link"`` -> the SuperLink's namespace; party k -> party k's."""
        return self.link_ns if role == "link" else self.party_ns[int(role)]

    def wrap(self, role, argv) -> list:
        """``argv`` run in ``role``'s namespace (``ip netns exec NS argv``; the environment is
        passed through, PYTHONPATH included)."""
        return ["ip", "netns", "exec", self.namespace(role)] + list(argv)

    def superlink_address(self, k, port) -> str:
        """Where party k's SuperNode reaches the SuperLink listening on 127.0.0.1:``port`` of
        the link's namespace: the relay on party k's link."""
        self.start_relay(port)
        return f"{SUBNET}.{k}.1:{port}"

    def connect(self, role, host, port, timeout=0.5):
        """Open and close a TCP connection to ``host:port`` from ``role``'s namespace."""
        import socket

        def go():
            with socket.create_connection((host, port), timeout=timeout):
                return True

        return in_namespace(self.namespace(role), go)

    def describe(self) -> str:
        return (f"{self.K} parties, each on its own link to the SuperLink: rate {self.rate} each "
                f"way (tbf on both ends of the party's veth); delay {self.rtt_ms / 2:g} ms each "
                f"way, {self.rtt_ms:g} ms RTT (userspace relay in the SuperLink's namespace)")

    def as_dict(self) -> dict:
        return {"parties": self.K, "rate": self.rate, "rate_bits_per_second": self.rate_bits,
                "rtt_ms": self.rtt_ms, "one_way_delay_ms": self.rtt_ms / 2,
                "rate_shaping": "tbf qdisc on both ends of each party's veth pair",
                "delay": "userspace TCP relay (vflpriv/flower/relay.py) in the SuperLink's "
                         "namespace, rtt/2 each way; a new connection's first bytes one RTT "
                         "later (handshake)",
                "namespaces": [self.link_ns] + self.party_ns}

    def relay_stats(self) -> dict | None:
        import json

        if not self.stats_path:
            return None
        try:
            with open(self.stats_path) as fh:
                return json.load(fh)
        except (OSError, ValueError):
            return None

    # -- set up -------------------------------------------------------------------------------
    def __enter__(self):
        ok, why = available()
        if not ok:
            raise NetnsUnavailable(why)
        if threading.current_thread() is threading.main_thread():
            # SIGTERM tears down like Ctrl-C (KeyboardInterrupt unwinds the with-blocks)
            self._old_term = signal.signal(signal.SIGTERM, _raise_interrupt)
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        self._token = _ACTIVE.set(self)
        return self

    def _build(self):
        burst = max(128 * 1024, self.rate_bits // 8 // 250)     # >= 4 ms of traffic, >= 131072 B
        for ns in [self.link_ns] + self.party_ns:
            _run("ip", "netns", "add", ns)
            self._made.append(ns)
            _run("ip", "-n", ns, "link", "set", "lo", "up")
        for k, ns in enumerate(self.party_ns):
            a, b = f"v{self.id}l{k}", f"v{self.id}p{k}"       # <= 15 characters
            _run("ip", "link", "add", a, "netns", self.link_ns, "type", "veth",
                 "peer", "name", b, "netns", ns)
            _run("ip", "-n", self.link_ns, "addr", "add", f"{SUBNET}.{k}.1/24", "dev", a)
            _run("ip", "-n", ns, "addr", "add", f"{SUBNET}.{k}.2/24", "dev", b)
            for side, dev in ((self.link_ns, a), (ns, b)):
                _run("ip", "-n", side, "link", "set", dev, "up")
                _run("tc", "-n", side, "qdisc", "add", "dev", dev, "root", "tbf",
                     "rate", str(self.rate_bits), "burst", str(burst), "latency", "100ms")

    def start_relay(self, port):
        """Start the delay relay for a SuperLink on 127.0.0.1:``port`` (once per port)."""
        if self.relay is not None and self.relay.poll() is None:
            if self.relay_port == port:
                return
            self._stop_relay()
        here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "relay.py")
        base = self.run_dir or "/tmp"
        os.makedirs(base, exist_ok=True)
        self.stats_path = os.path.join(base, f"relay-{self.id}-{port}.json")
        log = open(os.path.join(base, f"relay-{self.id}-{port}.log"), "ab")
        routes = [f"{k}={SUBNET}.{k}.1:{port}=127.0.0.1:{port}" for k in range(self.K)]
        self.relay = subprocess.Popen(
            self.wrap("link", [sys.executable, here, "--delay-ms", repr(self.rtt_ms / 2),
                               "--stats", self.stats_path, *routes]),
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        self.relay_port = port
        deadline = time.monotonic() + 20
        while True:
            if self.relay.poll() is not None:
                raise RuntimeError(f"the delay relay exited with code {self.relay.returncode}")
            try:
                if self.connect("link", f"{SUBNET}.0.1", port):
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the delay relay did not start listening within 20 s")
            time.sleep(0.05)

    def stop_relay(self) -> dict | None:
        """Stop the relay (a deployment that ends with its SuperLink is done with it) and
        return its final counts: per party, TCP payload bytes each way and connections (the
        relay's own readiness probe is one of party 0's)."""
        self._stop_relay()
        return self.relay_stats()

    # -- tear down ----------------------------------------------------------------------------
    def _stop_relay(self):
        p, self.relay = self.relay, None
        if p is None:
            return
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait(5)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait(5)

    def close(self):
        """Stop the relay, kill whatever still runs in the namespaces, delete them."""
        try:
            self._stop_relay()
        finally:
            for ns in reversed(self._made):
                _kill_in(ns)
                _run("ip", "netns", "delete", ns, check=False)
            self._made = []
            if self._token is not None:
                _ACTIVE.reset(self._token)
                self._token = None
            if self._old_term is not None:
                signal.signal(signal.SIGTERM, self._old_term)
                self._old_term = None

    def __exit__(self, *exc):
        self.close()
        return False


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def _kill_in(ns):
    """SIGKILL every process in namespace ``ns`` (``ip netns pids``), then wait for them."""
    from .procs import alive as _alive

    r = _run("ip", "netns", "pids", ns, check=False)
    pids = [int(p) for p in r.stdout.split() if p.isdigit() and int(p) != os.getpid()]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while pids and time.monotonic() < deadline:
        pids = [p for p in pids if os.path.exists(f"/proc/{p}") and _alive(p)]
        time.sleep(0.05)


def leftovers(run_id=None) -> list:
    """Namespaces of this harness still present (all ``vfl-*`` ones, or those of ``run_id``)."""
    r = _run("ip", "netns", "list", check=False)
    names = [ln.split()[0] for ln in r.stdout.splitlines() if ln.strip()]
    want = f"{PREFIX}{run_id}-" if run_id else PREFIX
    return [n for n in names if n.startswith(want)]
