"""A run's description as files, for a deployment across machines (``vflpriv flower spec``).

What the loopback deployment (:mod:`.deploy`) hands its processes in Python, written out:

- ``run.json``: the ServerApp's run description (the dict the family's ``serve`` reads: public
  setup, the clients' public record counts, participation, privacy plan, timeouts,
  ``on_client_loss``) and ``out``, where the ServerApp writes its result.  Submitted with
  ``flwr run APP CONNECTION --run-config 'spec="/path/run.json"'``; :func:`load_description`
  reads it (the ServerApp does, :mod:`.apps`).
- ``node<i>.toml``: client i's node config (``party``, ``data``, its ledger and budget in a
  record-level private run), the keys its SuperNode's ``--node-config`` carries;
  ``vflpriv flower node node<i>.toml --superlink HOST:PORT`` reads it back and starts the
  SuperNode (:func:`read_node_config`, :func:`node_command`).
- ``client<i>.npz``: client i's rows, to be copied to client i's machine only.

Relative paths in these files are relative to the file's own folder, so the folder can be
copied anywhere (each machine gets ``run.json`` or its own ``node<i>.toml`` and ``client<i>.npz``).
Only the sparse family writes one so far (its run description is plain JSON).
"""
from __future__ import annotations

import json
import os

from ..errors import InputError

#: node config keys whose values are paths
NODE_PATHS = ("data", "ledger", "identity-key")
#: run description keys whose values are paths (nested dicts too)
SPEC_PATHS = ("ledger", "out", "progress")


def _rel(path, base):
    if not isinstance(path, str) or not path:
        return path
    full = os.path.abspath(path)
    inside = os.path.commonpath([full, os.path.abspath(base)]) == os.path.abspath(base)
    return os.path.relpath(full, base) if inside else full


def _resolve(obj, base, keys):
    if isinstance(obj, dict):
        return {k: (os.path.normpath(os.path.join(base, v)) if k in keys and isinstance(v, str)
                    and v and not os.path.isabs(v) else _resolve(v, base, keys))
                for k, v in obj.items()}
    if isinstance(obj, list):
        return [_resolve(v, base, keys) for v in obj]
    return obj


def _toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    return json.dumps(str(v))          # a TOML basic string (JSON escapes are TOML's)


def check_directory(directory):
    """The folder a description goes to: new, or empty (nothing of another run is overwritten)."""
    if not directory:
        raise InputError("--out must name a folder for the run description")
    if os.path.exists(directory) and (not os.path.isdir(directory) or os.listdir(directory)):
        raise InputError(f"--out {directory!r} exists and is not an empty folder; name a new one")
    parent = os.path.dirname(os.path.abspath(directory))
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK):
        raise InputError(f"--out {directory!r}: its folder {parent!r} is not a writable folder")


def write_description(directory, spec, cfgs) -> dict:
    """Write ``run.json`` and one ``node<i>.toml`` per entry of ``cfgs`` into ``directory``
    (the clients' data files are already there); returns what was written."""
    spec = dict(spec)
    spec["out"] = "result.pkl"
    spec.pop("progress", None)
    spec.pop("progress_fn", None)
    if spec.get("privacy") and spec["privacy"].get("ledger"):
        spec["privacy"] = dict(spec["privacy"], ledger=_rel(spec["privacy"]["ledger"],
                                                            directory))
    path = os.path.join(directory, "run.json")
    with open(path, "w") as fh:
        json.dump(spec, fh, indent=1, sort_keys=True)
        fh.write("\n")
    nodes = []
    for cfg in cfgs:
        k = int(cfg["party"])
        node = os.path.join(directory, f"node{k}.toml")
        with open(node, "w") as fh:
            fh.write(f"# node config of client {k} (vflpriv flower node {os.path.basename(node)}"
                     " --superlink HOST:PORT)\n")
            for key, v in cfg.items():
                if v is None:
                    continue
                if key in NODE_PATHS:
                    v = _rel(v, directory)
                fh.write(f"{json.dumps(str(key))} = {_toml_value(v)}\n")
        nodes.append(node)
    return {"run": path, "nodes": nodes, "clients": len(cfgs), "family": spec.get("family")}


def load_description(path) -> dict:
    """A ``run.json`` written by :func:`write_description`, paths made absolute."""
    try:
        with open(path) as fh:
            spec = json.load(fh)
    except (OSError, ValueError) as exc:
        raise InputError(f"run description {str(path)!r} cannot be read: {exc}") from None
    if not isinstance(spec, dict) or "family" not in spec:
        raise InputError(f"run description {str(path)!r} has no 'family': not a vflpriv run")
    return _resolve(spec, os.path.dirname(os.path.abspath(path)), SPEC_PATHS)


def read_node_config(path) -> dict:
    """A ``node<i>.toml``, paths made absolute (relative to the file's folder)."""
    import tomllib

    try:
        with open(path, "rb") as fh:
            cfg = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise InputError(f"node config {str(path)!r} cannot be read: {exc}") from None
    if "party" not in cfg or "data" not in cfg:
        raise InputError(f"node config {str(path)!r} needs 'party' and 'data'")
    cfg = _resolve(cfg, os.path.dirname(os.path.abspath(path)), NODE_PATHS)
    if not os.path.isfile(cfg["data"]):
        raise InputError(f"node config {str(path)!r}: its data file {cfg['data']!r} does not "
                         "exist on this machine")
    return cfg


def node_command(cfg, superlink, *, root_certificates=None, insecure=False) -> list:
    """The ``flower-supernode`` command line that serves ``cfg`` (TLS unless ``insecure``,
    which is for 127.0.0.1 only)."""
    from .deploy import _bin, _node_config, check_loopback_only

    if not superlink or ":" not in superlink:
        raise InputError(f"--superlink must be HOST:PORT, got {superlink!r}")
    argv = [_bin("flower-supernode"), "--superlink", superlink]
    if insecure:
        check_loopback_only(superlink)
        argv.append("--insecure")
    elif root_certificates:
        if not os.path.isfile(root_certificates):
            raise InputError(f"--root-certificates {root_certificates!r} does not exist")
        argv += ["--root-certificates", os.path.abspath(root_certificates)]
    else:
        raise InputError("a SuperNode across machines needs --root-certificates CA.crt (TLS); "
                         "--insecure is for 127.0.0.1 only")
    return argv + ["--node-config", _node_config(cfg)]
