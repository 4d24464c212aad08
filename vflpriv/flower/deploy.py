"""A real Flower deployment on this machine's loopback, started and stopped by the command.

:class:`LocalDeployment` starts one SuperLink (``flower-superlink --insecure`` on a free port of
127.0.0.1) and one SuperNode per party (``flower-supernode --superlink 127.0.0.1:PORT --port
PORT_k --node-config 'party=k data=... ledger=...'``), writes a Flower App directory
(:func:`write_app`) and submits the run with ``flwr run APP DIR-CONNECTION --stream``.  The
SuperLink starts the ServerApp (``flwr-serverapp``) and each SuperNode a ClientApp process
(``flwr-clientapp``) per message, exactly as across machines; docs/flower.md gives the same
commands by hand, with TLS.

``network=`` (or an active :class:`~.netns.ShapedNetwork`, :func:`.netns.active`) runs the same
processes across network namespaces over shaped links instead: the SuperLink, its ServerApp and
``flwr run`` in the link's namespace, each SuperNode in its party's, reaching the SuperLink
through the network's delay relay (``vflpriv bench network``, docs/network.md).

Insecure mode is used only here, on 127.0.0.1 (or on the veth links of this machine's own
namespaces).  Every process gets a private ``FLWR_HOME`` under
the run directory and a marker in its environment, so :meth:`LocalDeployment.close` stops the
whole tree (the SuperLink and SuperNodes start their app processes detached).

An idle SuperNode polls the SuperLink every few seconds, so a deployed round costs seconds: use
this backend for end-to-end runs of few rounds, and ``flower-sim`` for many clients or rounds.
``idle_poll=`` (or ``VFLPRIV_IDLE_POLL`` in the environment; default: Flower's own 3 s and 1 s)
starts each SuperNode through :mod:`.node_launcher` so that it, and the SuperExec it starts,
ask for work every ``idle_poll`` seconds instead (for tests: the same processes and messages,
less waiting, at some CPU for the extra requests: 0.2 s costs about a tenth of a core).
"""
from __future__ import annotations

import math
import os
import pickle
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid

from ..errors import InputError
from .procs import alive as _alive

#: environment variable: a :class:`LocalDeployment`'s default ``idle_poll`` (seconds)
IDLE_POLL_ENV = "VFLPRIV_IDLE_POLL"

APP_PYPROJECT = """\
[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "vflpriv-app"
version = "1.0.0"
description = "vflpriv's federated methods as one Flower App (the code is the installed vflpriv)"
license = "MIT"
dependencies = []

[tool.hatch.build.targets.wheel]
packages = ["."]

[tool.flwr.app]
publisher = "vflpriv"

[tool.flwr.app.components]
serverapp = "vflpriv_app:server_app"
clientapp = "vflpriv_app:client_app"

[tool.flwr.app.config]
spec = ""
"""

APP_MODULE = '''"""Entry points Flower loads: the ServerApp and ClientApp of vflpriv (installed package)."""
from vflpriv.flower import apps as _apps

server_app = _apps.server_app
client_app = _apps.client_app
'''


def write_app(directory) -> str:
    """Write the Flower App directory (``pyproject.toml`` and ``vflpriv_app.py``) that a
    SuperLink runs; the code is the vflpriv installed on every machine."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "pyproject.toml"), "w") as fh:
        fh.write(APP_PYPROJECT)
    with open(os.path.join(directory, "vflpriv_app.py"), "w") as fh:
        fh.write(APP_MODULE)
    return directory


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _connect_loopback(port):
    with socket.create_connection(("127.0.0.1", port), timeout=0.5):
        return True


def _wait_port(port, proc, log, timeout, connect=_connect_loopback):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{os.path.basename(log)} exited with code {proc.returncode}: "
                               + _tail(log))
        try:
            if connect(port):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout:g} s: " + _tail(log))


def _tail(path, lines=5):
    try:
        with open(path, errors="replace") as fh:
            return " | ".join(ln.strip() for ln in fh.read().splitlines()[-lines:] if ln.strip())
    except OSError:
        return "(no log)"


def _bin(name):
    """A Flower console script of this interpreter's environment."""
    cand = os.path.join(os.path.dirname(sys.executable), name)
    return cand if os.path.exists(cand) else (shutil.which(name) or name)


def _node_config(cfg: dict) -> str:
    parts = []
    for k, v in cfg.items():
        if isinstance(v, bool):
            parts.append(f"{k}={'true' if v else 'false'}")
        elif isinstance(v, (int, float)):
            parts.append(f"{k}={v!r}")
        else:
            parts.append(f'{k}="{v}"')
    return " ".join(parts)


class LocalDeployment:
    """SuperLink + one SuperNode per party on 127.0.0.1 (see module docstring).

    ``absent``: parties whose SuperNode is not started (a party unreachable at start, for
    tests and drills).  ``network``: a :class:`~.netns.ShapedNetwork` to run in (default: the
    active one, :func:`.netns.active`, else loopback).  ``idle_poll``: seconds between an idle
    SuperNode's (and its SuperExec's) requests for work (default ``VFLPRIV_IDLE_POLL`` from the
    environment, else Flower's own; module docstring).  Use as a context manager; :meth:`run`
    submits one run and waits for it.
    """

    def __init__(self, party_configs, run_dir, *, quiet=True, absent=(), start_timeout=60.0,
                 network=None, idle_poll=None):
        from . import require_flwr
        from .netns import active

        require_flwr("flower")
        from .paths import absolute_paths

        # the SuperNodes and their ClientApps run elsewhere than this working directory
        self.cfgs = absolute_paths(list(party_configs))
        self.run_dir, self.quiet = os.path.abspath(os.fspath(run_dir)), quiet
        self.absent, self.start_timeout = set(absent), float(start_timeout)
        self.marker = uuid.uuid4().hex
        self.home = os.path.join(self.run_dir, "flwr-home")
        self.logs = os.path.join(self.run_dir, "logs")
        self.procs, self.nodes = [], {}
        self.port = None
        self.network = network if network is not None else active()
        if idle_poll is None and os.environ.get(IDLE_POLL_ENV):
            idle_poll = os.environ[IDLE_POLL_ENV]
        try:
            self.idle_poll = None if idle_poll is None else float(idle_poll)
        except (TypeError, ValueError):
            self.idle_poll = math.nan               # refused just below, naming the value
        if self.idle_poll is not None and not 0.01 <= self.idle_poll <= 60:
            raise InputError(f"idle_poll (or {IDLE_POLL_ENV}) must be from 0.01 to 60 seconds, "
                             f"got {idle_poll!r}")

    # -- processes ----------------------------------------------------------------------------
    def _env(self):
        import vflpriv

        env = dict(os.environ, FLWR_HOME=self.home, VFLPRIV_DEPLOYMENT=self.marker,
                   FLWR_DISABLE_UPDATE_CHECK="1", PYTHONUNBUFFERED="1")
        # the app processes import the same vflpriv as this one (a checkout or an install)
        root = os.path.dirname(os.path.dirname(os.path.abspath(vflpriv.__file__)))
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        return env

    def _spawn(self, args, log, where="link"):
        """Start ``args`` (logging to ``log``); on a network, in ``where``'s namespace
        ("link", or a party index)."""
        if self.network is not None:
            args = self.network.wrap(where, args)
        fh = open(log, "ab")
        p = subprocess.Popen(args, stdout=fh, stderr=subprocess.STDOUT, env=self._env(),
                             start_new_session=True, cwd=self.run_dir)
        fh.close()
        self.procs.append(p)
        return p

    def __enter__(self):
        os.makedirs(self.home, exist_ok=True)
        os.makedirs(self.logs, exist_ok=True)
        try:
            self.port = free_port()
            link = self._spawn([_bin("flower-superlink"), "--insecure", "--port", str(self.port),
                                "--disable-runtime-dependency-installation"],
                               os.path.join(self.logs, "superlink.log"))
            connect = _connect_loopback if self.network is None else (
                lambda port: self.network.connect("link", "127.0.0.1", port))
            _wait_port(self.port, link, os.path.join(self.logs, "superlink.log"),
                       self.start_timeout, connect)
            for cfg in self.cfgs:
                k = int(cfg["party"])
                if k not in self.absent:
                    self.start_node(k)
            with open(os.path.join(self.home, "config.toml"), "w") as fh:
                fh.write(f'[superlink]\ndefault = "loopback"\n\n[superlink.loopback]\n'
                         f'address = "127.0.0.1:{self.port}"\ninsecure = true\n')
            write_app(os.path.join(self.run_dir, "app"))
        except BaseException:
            self.close()
            raise
        return self

    def start_node(self, k):
        cfg = next(c for c in self.cfgs if int(c["party"]) == k)
        port = free_port()
        superlink = f"127.0.0.1:{self.port}" if self.network is None else \
            self.network.superlink_address(k, self.port)
        launcher = [_bin("flower-supernode")] if self.idle_poll is None else \
            [sys.executable, "-m", "vflpriv.flower.node_launcher", repr(self.idle_poll)]
        self.nodes[k] = self._spawn(
            launcher + ["--insecure", "--superlink", superlink,
             "--port", str(port), "--node-config", _node_config(cfg)],
            os.path.join(self.logs, f"supernode{k}.log"), where=k)
        return self.nodes[k]

    def kill_node(self, k):
        """Kill party k's SuperNode at once (SIGKILL), as a machine that dies."""
        p = self.nodes.get(k)
        if p is not None and p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(10)

    def close(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 10
        for p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait(5)
        self._kill_marked()

    def _kill_marked(self):
        """App processes started detached by the SuperLink/SuperNodes carry our marker."""
        needle = f"VFLPRIV_DEPLOYMENT={self.marker}".encode()
        killed = []
        for pid in os.listdir("/proc") if os.path.isdir("/proc") else []:
            if not pid.isdigit() or int(pid) == os.getpid():
                continue
            try:
                with open(f"/proc/{pid}/environ", "rb") as fh:
                    if needle in fh.read().split(b"\0"):
                        os.kill(int(pid), signal.SIGKILL)
                        killed.append(pid)
            except (OSError, ValueError):
                continue
        deadline = time.monotonic() + 5          # gone before we return, not just signalled
        while killed and time.monotonic() < deadline:
            killed = [p for p in killed if _alive(p)]
            time.sleep(0.05)

    def __exit__(self, *exc):
        self.close()
        return False

    # -- one run ------------------------------------------------------------------------------
    def run(self, spec, *, progress=None, on_round=None, timeout=None) -> dict:
        """Submit ``spec`` and wait for the ServerApp's result.  ``progress(t)`` is called as
        rounds complete; ``on_round(t)`` too (fault drills kill a SuperNode from it).  The
        ServerApp gets the run description as ``run.json`` (+ ``run.npz``), the files
        ``vflpriv flower spec`` writes for separate machines.  ``timeout``: seconds without
        any sign of life (a round ending, or any exchange: the ServerApp's link touches
        ``progress.alive`` after each) before the run is given up; default the spec's connect
        and reply timeouts plus 120 s, so a long offline phase (n = 1e6: many exchanges before
        the first round) is not cut short while it moves."""
        from .paths import absolute_paths

        spec = absolute_paths({k: v for k, v in spec.items() if k != "progress_fn"})
        spec["out"] = os.path.join(self.run_dir, "result.pkl")
        spec["progress"] = os.path.join(self.run_dir, "progress")
        # the same files as for separate machines (vflpriv flower spec): data, never a pickle
        from .spec import dump_run

        spec_path = dump_run(spec, os.path.join(self.run_dir, "run.json"))
        if timeout is None:
            timeout = spec.get("connect_timeout", 60) + spec.get("reply_timeout", 600) + 120
        log = os.path.join(self.logs, "flwr-run.log")
        proc = self._spawn([_bin("flwr"), "run", os.path.join(self.run_dir, "app"), "loopback",
                            "--run-config", f'spec="{spec_path}"', "--stream"], log)
        seen = wait_for_result(proc, lambda: os.path.exists(spec["out"]), spec["progress"],
                               timeout, log, progress=progress, on_round=on_round,
                               where=f"logs in {self.logs}")
        with open(spec["out"], "rb") as fh:
            out = pickle.load(fh)
        if progress is not None:
            for r in range(seen + 1, int(out.get("t", seen)) + 1):
                progress(r)
        if proc.poll() is None:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                pass
        return out


def wait_for_result(proc, done, progress_path, timeout, log, *, progress=None, on_round=None,
                    where=None) -> int:
    """Wait for a submitted run (``proc``: its ``flwr run --stream``) until ``done()``;
    returns the last round seen.  ``progress(r)`` and ``on_round(r)`` (in a thread: fault
    drills kill a SuperNode from it) for each round the ServerApp writes to ``progress_path``;
    ``timeout``: seconds without a sign of life (a round, or any exchange: the ServerApp's link
    touches ``progress_path + ".alive"``).  RuntimeError when ``flwr run`` ended without a
    result, TimeoutError when nothing moved for ``timeout`` s (``where``: where to look)."""
    seen, deadline = 0, time.monotonic() + timeout
    alive = progress_path + ".alive"
    last_beat = _mtime(alive)
    while not done():
        beat = _mtime(alive)
        if beat != last_beat:             # an exchange ended: the run is moving
            last_beat, deadline = beat, time.monotonic() + timeout
        t = _read_int(progress_path)
        if t is not None and t > seen:
            deadline = time.monotonic() + timeout
            for r in range(seen + 1, t + 1):
                if progress is not None:
                    progress(r)
                if on_round is not None:
                    threading.Thread(target=on_round, args=(r,), daemon=True).start()
            seen = t
        if proc.poll() is not None and not done():
            time.sleep(1.0)           # the result file may land just after the stream ends
            if not done():
                raise RuntimeError("the Flower run ended without a result: " + _tail(log, 8))
        if time.monotonic() > deadline:
            raise TimeoutError(f"the Flower run showed no progress for {timeout:g} s; "
                               f"{where or 'its log: ' + log}")
        time.sleep(0.1)
    return seen


def _mtime(path):
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


def _read_int(path):
    try:
        with open(path) as fh:
            return int(fh.read().strip() or 0)
    except (OSError, ValueError):
        return None


def check_loopback_only(address: str):
    """Insecure mode is for 127.0.0.1 only (docs/flower.md)."""
    host = address.rsplit(":", 1)[0].strip("[]")
    if host not in ("127.0.0.1", "localhost", "::1"):
        raise InputError(f"insecure Flower connections are for loopback only, got {address!r}; "
                         "use TLS across machines (docs/flower.md)")


def check_superlink(superlink: str) -> str:
    """``HOST:PORT`` with a host and a port from 1 to 65535 (``[::1]:9092`` for IPv6), checked
    before anything starts: flower-supernode itself fails only after it has started its
    SuperExec, which it then leaves running."""
    if not isinstance(superlink, str) or ":" not in superlink:
        raise InputError(f"--superlink must be HOST:PORT, got {superlink!r}")
    host, port = superlink.rsplit(":", 1)
    if not host.strip("[]"):
        raise InputError(f"--superlink must be HOST:PORT with a host, got {superlink!r}")
    if not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
        raise InputError(f"--superlink {superlink!r}: the port must be an integer from 1 to "
                         f"65535, got {port!r}")
    return superlink


def check_root_certificates(path: str) -> str:
    """``path`` if it is a regular file holding at least one PEM X.509 certificate."""
    from cryptography import x509

    from ..data.files import regular_file

    regular_file(path, "--root-certificates")
    with open(path, "rb") as fh:
        data = fh.read(1 << 20)
    try:
        x509.load_pem_x509_certificates(data)
    except ValueError:
        raise InputError(f"--root-certificates {path!r} is not a PEM certificate (no "
                         "-----BEGIN CERTIFICATE----- block that parses)") from None
    return path


#: seconds between an idle SuperNode's requests for work under ``vflpriv flower node`` (Flower's
#: own 3 s made each of a run's exchanges wait seconds: issue 51 measured 187 s of setup over 22
#: exchanges); ``--idle-poll 3`` gives Flower's own
NODE_IDLE_POLL = 0.5


def node_command(cfg, superlink, *, root_certificates=None, insecure=False, port=None,
                 idle_poll=NODE_IDLE_POLL) -> list:
    """The ``flower-supernode`` command line that serves ``cfg`` (TLS unless ``insecure``,
    which is for 127.0.0.1 only), its runtime API on ``port`` (None: a free port the OS gives,
    so that two nodes on one host do not both take flower-supernode's default 9094), asking
    for work every ``idle_poll`` seconds when idle (``node_launcher``: the same SuperNode;
    None: Flower's own 3 s)."""
    check_superlink(superlink)
    if insecure and root_certificates:
        # one of the two was not meant: a CA given and then ignored would look like TLS
        raise InputError(f"--insecure and --root-certificates {root_certificates!r} together: "
                         "give --root-certificates (TLS) or --insecure (127.0.0.1 only), not "
                         "both")
    if idle_poll is not None and not 0.01 <= float(idle_poll) <= 60:
        raise InputError(f"--idle-poll must be from 0.01 to 60 seconds, got {idle_poll!r}")
    argv = ([_bin("flower-supernode")] if idle_poll is None else
            [sys.executable, "-m", "vflpriv.flower.node_launcher", repr(float(idle_poll))]) + \
        ["--superlink", superlink]
    if insecure:
        check_loopback_only(superlink)
        argv.append("--insecure")
    elif root_certificates:
        if not os.path.exists(root_certificates):
            raise InputError(f"--root-certificates {root_certificates!r} does not exist")
        check_root_certificates(root_certificates)
        argv += ["--root-certificates", os.path.abspath(root_certificates)]
    else:
        raise InputError("a SuperNode across machines needs --root-certificates CA.crt (TLS); "
                         "--insecure is for 127.0.0.1 only")
    if port is None:
        port = free_port()
    return argv + ["--port", str(int(port)), "--node-config", _node_config(cfg)]
