"""``vflpriv flower launch DIR``: submit a described run to a SuperLink and wait for its result,
without a hand-written Flower connection file.

The operator on the SuperLink's machine holds the description ``DIR`` (``vflpriv flower spec``:
``run.json``, the Flower App in ``DIR/app``).  This writes Flower's connection configuration
(``DIR/flwr-home/config.toml``: one connection, ``vflpriv``, with the SuperLink's address and
TLS certificate, or ``insecure = true`` on 127.0.0.1 only), runs ``flwr run DIR/app vflpriv
--stream`` with it (its output kept in ``DIR/flwr-run.log``), reports the rounds as they
complete, and waits for the ServerApp's ``result.json`` (:mod:`.result`), which it returns.
The command (``vflpriv.cli.flower``) draws the progress, prints the result's line (what
happened, the epsilon spent) and exits 0 when the run finished, 1 when it stopped (a party's
refusal, a lost party, a budget refusal: the reason is printed), 2 on bad input, before
anything is started.
"""
from __future__ import annotations

import json
import os
import subprocess
import time

from ..errors import InputError

CONNECTION = "vflpriv"


def connection_config(superlink, *, root_certificates=None, insecure=False) -> str:
    """Flower's ``config.toml`` with the one connection :data:`CONNECTION`."""
    from .deploy import check_loopback_only, check_root_certificates, check_superlink

    check_superlink(superlink)
    if insecure and root_certificates:
        raise InputError(f"--insecure and --root-certificates {root_certificates!r} together: "
                         "give one")
    lines = [f'[superlink]\ndefault = "{CONNECTION}"\n', f"[superlink.{CONNECTION}]",
             f'address = "{superlink}"']
    if insecure:
        check_loopback_only(superlink)
        lines.append("insecure = true")
    elif root_certificates:
        if not os.path.exists(root_certificates):
            raise InputError(f"--root-certificates {root_certificates!r} does not exist")
        check_root_certificates(root_certificates)
        lines.append(f'root-certificates = "{os.path.abspath(root_certificates)}"')
    else:
        raise InputError("a SuperLink across machines needs --root-certificates CA.crt (TLS); "
                         "--insecure is for 127.0.0.1 only")
    return "\n".join(lines) + "\n"


def _described(directory):
    from .spec import load_description

    run = os.path.join(directory, "run.json")
    app = os.path.join(directory, "app")
    if not os.path.isfile(run) or not os.path.isdir(app):
        raise InputError(f"{directory!r} holds no run description (run.json and app/, as "
                         "vflpriv flower spec writes them)")
    return run, app, load_description(run)


def launch(directory, superlink, *, root_certificates=None, insecure=False, timeout=None,
           progress=None) -> dict:
    """Submit the run described in ``directory`` and wait for its ``result.json``; returns it.
    ``progress(t)`` after each completed round; ``timeout``: seconds without a sign of life
    before the run is given up (default: the description's connect and reply timeouts plus
    120 s)."""
    from .deploy import _bin, wait_for_result

    directory = os.path.abspath(directory)
    run, app, spec = _described(directory)
    config = connection_config(superlink, root_certificates=root_certificates,
                               insecure=insecure)
    home = os.path.join(directory, "flwr-home")
    os.makedirs(home, exist_ok=True)
    with open(os.path.join(home, "config.toml"), "w") as fh:
        fh.write(config)
    out_dir = os.path.dirname(spec["out"])
    result = os.path.join(out_dir, "result.json")
    if timeout is None:
        timeout = float(spec.get("connect_timeout", 60)) + float(spec.get("reply_timeout",
                                                                          600)) + 120
    env = dict(os.environ, FLWR_HOME=home, FLWR_DISABLE_UPDATE_CHECK="1",
               PYTHONUNBUFFERED="1")
    started = time.time()
    log = os.path.join(directory, "flwr-run.log")
    with open(log, "ab") as fh:
        proc = subprocess.Popen([_bin("flwr"), "run", app, CONNECTION, "--run-config",
                                 f'spec="{run}"', "--stream"], stdout=fh,
                                stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        wait_for_result(proc, lambda: _fresh(result, started), os.path.join(out_dir, "progress"),
                        timeout, log, progress=progress)
        with open(result) as fh:
            return json.load(fh)
    finally:
        if proc.poll() is None:
            import signal

            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass


def _fresh(path, since):
    try:
        return os.path.getmtime(path) >= since
    except OSError:
        return False
