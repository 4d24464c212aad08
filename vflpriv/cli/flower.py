"""``vflpriv flower``: a run across machines without writing Python.

``vflpriv flower spec sparse --out DIR [the options of vflpriv sparse]`` writes the run
description (``DIR/run.json``), each client's node config (``DIR/node<i>.toml``) and rows
(``DIR/client<i>.npz``) and the Flower App (``DIR/app``), then prints the commands to run on
each machine.  ``vflpriv flower node DIR/node<i>.toml --superlink HOST:PORT
--root-certificates ca.crt`` reads a node config back and starts that client's SuperNode
(``--print``: only print the command).  ``vflpriv flower identity --out party0.key`` makes a
party's identity key for pinned peer keys (dp-bcfw-secure; :mod:`vflpriv.runtime.keys`) and prints
its fingerprint: each party runs it on its own machine and sends only the fingerprint, which
``flower spec run|predict --fingerprints`` pins (:mod:`.flower_pins`; no description ever holds a
private key).  docs/flower.md, "Across machines" and "Identity keys".
"""
from __future__ import annotations

import dataclasses
import os
import sys
import time

from ..errors import InputError


def register(sub):
    p = sub.add_parser("flower", help="runs across machines: write a run description, start a "
                       "client's SuperNode from its node config",
                       description="Write a run's description for a deployment across machines "
                       "(vflpriv flower spec sparse ...) and start a client's SuperNode from its "
                       "node config (vflpriv flower node NODE.toml ...); docs/flower.md.")
    fsub = p.add_subparsers(dest="flower_command", metavar="COMMAND",
                            parser_class=type(p))
    sp = fsub.add_parser("spec", help="write a run description (run.json, node<i>.toml, data)")
    ssub = sp.add_subparsers(dest="family", metavar="FAMILY", parser_class=type(p))
    s = ssub.add_parser("sparse", help="a vflpriv sparse run (same options)",
                        description="Write the description of a vflpriv sparse run on Flower "
                        "for separate machines instead of running it.")
    s.add_argument("--out", required=True, metavar="DIR",
                   help="a new (or empty) folder for run.json, node<i>.toml, client<i>.npz, app/")
    from .sparse import add_run_arguments

    add_run_arguments(s)
    from .options import add_backend

    add_backend(s, family="sparse", deployment=True)
    s.set_defaults(func=spec_sparse)
    h = ssub.add_parser("horizontal", help="a vflpriv horizontal run (same options)",
                        description="Write the description of a vflpriv horizontal run "
                        "(FedAvg / FedProx / SCAFFOLD / FedDyn, FedP3) on Flower for separate "
                        "machines instead of running it.")
    h.add_argument("--out", required=True, metavar="DIR",
                   help="a new (or empty) folder for run.json, run.npz, node<i>.toml, "
                   "client<i>.npz, app/")
    from .horizontal import add_run_arguments as add_horizontal

    add_horizontal(h)
    add_backend(h, family="horizontal", deployment=True)
    h.set_defaults(func=spec_horizontal, ledger=None)
    r = ssub.add_parser("run", help="a vflpriv run (vertical; same data, algorithm and "
                        "privacy options)",
                        description="Write the description of a vertical run (dp-bcfw, bcfw, dfw, "
                        "dp-bcfw-secure) on Flower for separate machines instead of running it: "
                        "each party's columns (and the labels only at the parties that hold "
                        "them), its node config with its own ledger, the run description with "
                        "the server's ledger.")
    r.add_argument("--out", required=True, metavar="DIR",
                   help="a new (or empty) folder for run.json, node<i>.toml, party<i>.npz, "
                   "server.ledger, app/")
    from .flower_align import add_spec_arguments, register_schema
    from .run import add_problem_arguments

    add_problem_arguments(r)
    add_spec_arguments(r)
    from .flower_pins import add_arguments as add_pins

    add_pins(r)
    r.add_argument("--model-out", metavar="DIR", default=None,
                   help="with --party-schema: the ServerApp writes the trained split model "
                        "there at the end (party<k>.json, each party's own coefficients, the "
                        "label party's also the intercept, and manifest.json; "
                        "docs/alignment.md): a new or empty folder on the server's machine")
    add_backend(r, who="party", family="vertical", deployment=True)
    r.set_defaults(func=spec_run, ledger=None, test_fraction=None, log_releases=False,
                   checkpoint=None, checkpoint_every=None, resume=None, reference=False,
                   compare_calibration=False, json=None, plot=None, split_seed=None)

    from .flower_predict import register_spec as register_predict

    register_predict(ssub, spec_predict)
    register_schema(fsub)
    n = fsub.add_parser("node", help="start a client's SuperNode from its node<i>.toml",
                        description="Read a node config written by vflpriv flower spec and start "
                        "the client's SuperNode (flower-supernode) with it.")
    n.add_argument("config", metavar="NODE.toml")
    n.add_argument("--superlink", required=True, metavar="HOST:PORT",
                   help="the SuperLink's Fleet API address")
    n.add_argument("--root-certificates", metavar="CA.crt",
                   help="the CA certificate of the SuperLink (TLS; required across machines)")
    n.add_argument("--insecure", action="store_true",
                   help="no TLS (127.0.0.1 only)")
    n.add_argument("--print", action="store_true", dest="print_only",
                   help="print the flower-supernode command instead of running it")
    from ..values import count

    n.add_argument("--port", metavar="PORT", type=count(65535, minimum=1), default=None,
                   help="the port of this SuperNode's own runtime API on 127.0.0.1 (default: a "
                   "free one, so that several nodes start on one host; flower-supernode's own "
                   "default, 9094, would collide)")
    from ..flower.deploy import NODE_IDLE_POLL
    from ..values import real as _poll

    n.add_argument("--idle-poll", metavar="S", type=_poll(0.01, 60), default=NODE_IDLE_POLL,
                   help=f"seconds between the idle node's requests for work (default "
                   f"{NODE_IDLE_POLL:g}; Flower's own is 3, which makes every exchange of a run "
                   "wait)")
    n.set_defaults(func=node)

    la = fsub.add_parser("launch", help="submit a described run to a SuperLink and wait for "
                         "its result (no hand-written Flower connection file)",
                         description="On the SuperLink's machine: write Flower's connection "
                         "configuration for DIR (a description from vflpriv flower spec), run "
                         "flwr run with it, show progress, print the result's line (what "
                         "happened, epsilon spent) and exit 0 if the run finished, 1 if it "
                         "stopped (the reason printed).")
    la.add_argument("directory", metavar="DIR", help="the description (run.json, app/)")
    la.add_argument("--superlink", required=True, metavar="HOST:PORT",
                    help="the SuperLink's address (the address of flwr run's connection)")
    la.add_argument("--root-certificates", metavar="CA.crt",
                    help="the SuperLink's CA certificate (TLS; required across machines)")
    la.add_argument("--insecure", action="store_true", help="no TLS (127.0.0.1 only)")
    from ..values import real as _real

    la.add_argument("--timeout", type=_real(0, lo_open=True), default=None, metavar="S",
                    help="seconds without a sign of the run before giving up (default: the "
                    "description's connect and reply timeouts + 120 s)")
    la.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    la.set_defaults(func=_launch)
    i = fsub.add_parser("identity", help="make (or show) a party's identity key for pinned "
                        "peer keys in dp-bcfw-secure and scoring",
                        description="Write a new Ed25519 identity key (PKCS#8 PEM, mode 0600) "
                        "and print its fingerprint; for an existing file, print its fingerprint. "
                        "Each party runs it on its own machine and sends only the fingerprint "
                        "to whoever writes the description (vflpriv flower spec ... "
                        "--fingerprints K=HEX,...). A party's node config names its key "
                        "(identity-key=FILE) and its peers' fingerprints "
                        "(peer-fingerprints=\"1=HEX,2=HEX\"); docs/flower.md.")
    i.add_argument("--out", required=True, metavar="FILE")
    i.set_defaults(func=identity)


def spec_sparse(args) -> int:
    from ..flower import FlowerOptions, on_client_loss
    from .described import description_folder
    from ..sparse.api import fit
    from . import sparse as S

    _checked_spec_options(args)
    on_client_loss(FlowerOptions(on_client_loss=args.on_client_loss), "sparse")
    opts = FlowerOptions(spec_dir=args.out, on_client_loss=args.on_client_loss,
                         connect_timeout=args.connect_timeout)
    cfg = S.config(args, backend="flower", flower=opts)     # checks every option, and flwr
    with description_folder(args.out):
        desc = fit(args.data, config=cfg)
    return _written(desc, args.out, "sparse")


def _checked_spec_options(args):
    """What every ``flower spec`` refuses before writing anything."""
    import math

    from ..errors import InputError
    from ..flower.spec import check_directory

    check_directory(args.out)
    if not (args.connect_timeout > 0 and math.isfinite(args.connect_timeout)):
        raise InputError(f"--connect-timeout must be a positive number of seconds, got "
                         f"{args.connect_timeout!r}")
    if getattr(args, "ledger", None):
        raise InputError("--ledger: the server's ledger of a deployment lives on the SuperLink's "
                         "machine; the clients' ledgers are in their node configs (leave it out)")


def _written(desc, out, what, who="client", files="client<i>.npz") -> int:
    """Write the Flower App beside the description and print the commands for each machine."""
    w = sys.stdout.write
    out = os.path.abspath(out)
    w(f"wrote the description of a {desc['clients']}-{who} {what} run to {out}/\n")
    w(f"  server (SuperLink machine): vflpriv flower launch {out} --superlink HOST:PORT "
      "--root-certificates ca.crt\n")
    w(f"  {who} i (its machine, with node<i>.toml and {files}): vflpriv flower node "
      "node<i>.toml --superlink HOST:PORT --root-certificates ca.crt\n")
    return 0


def spec_horizontal(args) -> int:
    from ..flower import FlowerOptions, on_client_loss, require_flwr
    from .described import description_folder
    from . import horizontal as H

    _checked_spec_options(args)
    s = H._settings(args)                      # every option checked before anything is written
    family = "fedp3" if s["algorithm"] == "fedp3" else "horizontal"
    opts = FlowerOptions(spec_dir=args.out, on_client_loss=args.on_client_loss,
                         connect_timeout=args.connect_timeout)
    on_client_loss(opts, family)
    require_flwr("flower")
    H.require_torch()
    with description_folder(args.out):
        desc = (H._run_fedp3 if family == "fedp3" else H._run_elastic)(s, args, None, "flower",
                                                                        opts)
    return _written(desc, args.out, s["algorithm"])


def spec_run(args) -> int:
    from ..flower import FlowerOptions, on_client_loss
    from .described import description_folder
    from ..vertical import solve
    from . import job

    if getattr(args, "party_schema", None):
        from .flower_align import spec_from_schemas

        return spec_from_schemas(args, _checked_spec_options, _written)
    _checked_spec_options(args)
    if getattr(args, "model_out", None):
        raise InputError("vflpriv flower spec run --model-out is for a run described from the "
                         "parties' schemas (--party-schema); here each party's coefficients "
                         "come back to the command that runs it (vflpriv run --model-out)")
    if getattr(args, "party_data", None):
        raise InputError("vflpriv flower spec run --party-data: a description never reads the "
                         "parties' files; give each party's schema instead (--party-schema "
                         "I=SCHEMA, written on its machine by vflpriv flower schema; "
                         "docs/alignment.md)")
    args, epsilon, chunk_rows = job.checked_args(args)
    from . import flower_pins

    secure = args.algorithm == "dp-bcfw-secure"
    if not secure:
        flower_pins.refuse_without_keys(args, f"--algorithm {args.algorithm}")
    pin = flower_pins.pinning(args, None) if secure else None
    opts = FlowerOptions(spec_dir=args.out, on_client_loss=args.on_client_loss,
                         connect_timeout=args.connect_timeout, pinning=pin)
    on_client_loss(opts, "vertical")
    cfg = job.config(args, epsilon, "flower", opts)      # every option checked, and flwr
    data, _ = job.load_data(args, chunk_rows)
    if secure:                 # every party's own key pinned (or --unpinned), before writing
        flower_pins.check(flower_pins.pinning(args, data.K), range(data.K))
    from .progress import Progress

    # no rounds run here; the bar only says the defaults the run's settle chooses
    cfg = dataclasses.replace(cfg, callback=Progress(0, quiet=True))
    with description_folder(args.out):
        desc = solve(data, config=cfg)
    return _written(desc, args.out, args.algorithm, who="party", files="party<i>.npz")


def spec_predict(args) -> int:
    from .flower_predict import spec_predict as describe

    return describe(args, _checked_spec_options, _written)


def _launch(args) -> int:
    """``vflpriv flower launch`` (``vflpriv.flower.launch``): the run's progress on a terminal,
    the result's line, exit 0 if the run finished, 1 if it stopped (the reason printed)."""
    from ..flower.launch import _described, launch
    from ..flower.result import log_line
    from .progress import Progress

    directory = os.path.abspath(args.directory)
    _, _, spec = _described(directory)
    total = int(spec.get("iterations") or spec.get("rounds") or 0) or None
    try:
        with Progress(total or 1, "launch", quiet=args.quiet, unit="round") as bar:
            doc = launch(directory, args.superlink, root_certificates=args.root_certificates,
                         insecure=args.insecure, timeout=args.timeout,
                         progress=(lambda t: bar(t - 1)) if total else None)
    except (RuntimeError, TimeoutError) as exc:   # no result came: the run did not finish
        sys.stderr.write(f"vflpriv flower launch: the run stopped: {exc}\n")
        return 1
    sys.stdout.write(log_line(doc) + "\n")
    sys.stdout.write(f"  result: {os.path.join(os.path.dirname(spec['out']), 'result.json')}\n")
    if doc.get("error"):
        err = doc["error"]
        who = "" if err.get("party") is None else f"party {err['party']}: "
        sys.stderr.write(f"vflpriv flower launch: the run stopped: {who}{err.get('reason')}\n")
        return 1
    return 0


def node(args) -> int:
    import shlex

    from ..flower.deploy import node_command
    from ..flower.spec import read_node_config

    cfg = read_node_config(args.config)
    key = cfg.get("identity-key")
    if key and not os.path.exists(key):       # the party's own key, made on this machine
        raise InputError(f"{args.config}: its identity key {key!r} does not exist: make it here "
                         f"first (vflpriv flower identity --out {key}) and send the fingerprint "
                         "it prints to whoever writes the description")
    argv = node_command(cfg, args.superlink, root_certificates=args.root_certificates,
                        insecure=args.insecure, port=args.port, idle_poll=args.idle_poll)
    if args.print_only:
        sys.stdout.write(" ".join(shlex.quote(a) for a in argv) + "\n")
        return 0
    return _serve(argv)


def _serve(argv) -> int:
    """Run flower-supernode in its own process group and, however it ends (its own exit, an
    error, Ctrl-C), end the whole group: the SuperNode starts a flower-superexec child that it
    leaves running when it fails (an unreachable SuperLink, a TLS error)."""
    import signal
    import subprocess

    def stop(signum, frame):             # SIGTERM / SIGHUP to vflpriv: end the group too
        raise SystemExit(128 + signum)

    old = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGHUP)}
    proc = subprocess.Popen(argv, start_new_session=True)
    try:
        return proc.wait()
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
        for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, None)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break                      # the group is gone: nothing left running
            if wait is not None:
                deadline = time.monotonic() + wait
                while time.monotonic() < deadline and _group_alive(proc.pid):
                    time.sleep(0.05)
                    proc.poll()
        proc.poll()


def _group_alive(pgid) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def identity(args) -> int:
    from ..errors import InputError
    from ..runtime.keys import (KeyRefused, fingerprint, identity_public, load_identity,
                               new_identity)

    if os.path.exists(args.out):
        try:
            fp = fingerprint(identity_public(load_identity(args.out)))
        except KeyRefused as exc:
            raise InputError(str(exc)) from None
        sys.stdout.write(f"{fp}  {args.out} (existing key)\n")
        return 0
    parent = os.path.dirname(os.path.abspath(args.out))
    if not os.path.isdir(parent):
        raise InputError(f"--out {args.out!r}: its folder {parent!r} does not exist")
    sys.stdout.write(f"{new_identity(args.out)}  {args.out}\n")
    return 0
