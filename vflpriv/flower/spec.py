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
  SuperNode (:func:`read_node_config`, :func:`vflpriv.flower.deploy.node_command`).
- ``client<i>.npz``: client i's rows, to be copied to client i's machine only.

Relative paths in these files are relative to the file's own folder, so the folder can be
copied anywhere (each machine gets ``run.json`` or its own ``node<i>.toml`` and ``client<i>.npz``).

Every family's run description is data: JSON, with numpy arrays (a horizontal run's initial model
and public test set) in ``run.npz`` beside it, tuples tagged as tuples, and the few typed values
a description holds (a vertical run's noise plan and its privacy event, its sampling) written
field by field (:func:`encode`, :func:`decode`; only the types in :data:`TYPES` are read back,
so a description never makes the ServerApp import or run anything else).  The loopback
deployment hands its ServerApp the same files.
"""
from __future__ import annotations

import json
import os

from ..errors import InputError

#: node config keys whose values are paths
NODE_PATHS = ("data", "ledger", "identity-key", "spill-dir", "model-file",
              "scores-file")
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


# -- the run description as JSON (+ arrays) ------------------------------------------------------
def _noise_plan():
    from ..vertical.privacy import NoisePlan

    return NoisePlan


def _sampling():
    from ..vertical.sampling import Sampling

    return Sampling


#: the typed values a run description may hold: name -> (type getter, to fields, from fields)
TYPES = {
    "NoisePlan": (_noise_plan, lambda o: {f: getattr(o, f) for f in (
        "mode", "noise", "index_scale", "feature_sigma", "epsilon", "delta", "accountant",
        "event", "details")}, lambda d: _noise_plan()(**d)),
    "Sampling": (_sampling, lambda o: {"kind": o.kind, "blocks": list(o.blocks),
                                       "tau": getattr(o, "tau", None),
                                       "probs": getattr(o, "probs", None)},
                 lambda d: _sampling()(d["kind"], d["blocks"], tau=d["tau"], probs=d["probs"])),
}


def encode(obj, arrays: dict):
    """``obj`` as JSON-able data; numpy arrays go to ``arrays`` (name -> array)."""
    import numpy as np

    from accounting import DpEvent

    if isinstance(obj, dict):
        if not all(isinstance(k, str) for k in obj):
            raise TypeError(f"a run description's keys must be strings: {list(obj)[:5]}")
        return {k: encode(v, arrays) for k, v in obj.items()}
    if isinstance(obj, list):
        return [encode(v, arrays) for v in obj]
    if isinstance(obj, tuple):
        return {"__tuple__": [encode(v, arrays) for v in obj]}
    if isinstance(obj, np.ndarray):
        name = f"a{len(arrays)}"
        arrays[name] = obj
        return {"__array__": name}
    if isinstance(obj, (np.integer, np.floating, np.bool_)):
        return obj.item()
    if isinstance(obj, DpEvent):
        return {"__event__": obj.to_dict()}
    for name, (cls, to_fields, _) in TYPES.items():
        if type(obj) is cls():
            return {"__type__": name, "fields": encode(to_fields(obj), arrays)}
    if obj is None or isinstance(obj, (str, bool, int, float)):
        return obj
    raise TypeError(f"a run description cannot hold a {type(obj).__name__}")


def decode(obj, arrays):
    """:func:`encode`'s output read back (``arrays``: name -> array)."""
    if isinstance(obj, list):
        return [decode(v, arrays) for v in obj]
    if not isinstance(obj, dict):
        return obj
    if "__tuple__" in obj:
        return tuple(decode(v, arrays) for v in obj["__tuple__"])
    if "__array__" in obj:
        return arrays[obj["__array__"]]
    if "__event__" in obj:
        from accounting.events import event_from_dict

        return event_from_dict(obj["__event__"])
    if "__type__" in obj:
        if obj["__type__"] not in TYPES:
            raise InputError(f"run description: unknown type {obj['__type__']!r}")
        return TYPES[obj["__type__"]][2](decode(obj["fields"], arrays))
    return {k: decode(v, arrays) for k, v in obj.items()}


def _relative_paths(obj, base):
    if isinstance(obj, dict):
        return {k: (_rel(v, base) if k in SPEC_PATHS else _relative_paths(v, base))
                for k, v in obj.items()}
    if isinstance(obj, list):
        return [_relative_paths(v, base) for v in obj]
    return obj


def dump_run(spec, path) -> str:
    """Write the run description ``spec`` to ``path`` (``run.json``; arrays in ``run.npz``
    beside it); paths inside it relative to its folder."""
    import numpy as np

    base = os.path.dirname(os.path.abspath(path))
    arrays = {}
    doc = _relative_paths(encode({k: v for k, v in spec.items() if k != "progress_fn"},
                                 arrays), base)
    if arrays:
        npz = os.path.splitext(path)[0] + ".npz"
        np.savez(npz, **arrays)
        doc["__arrays__"] = os.path.basename(npz)
    with open(path, "w") as fh:
        json.dump(doc, fh, indent=1, sort_keys=True)
        fh.write("\n")
    return path


#: node-config keys that carry a seeded run's noise entropy: never written for deployment
SECRET_NODE_KEYS = ("noise-entropy", "noise-spawn-key")


def write_description(directory, spec, cfgs) -> dict:
    """Write ``run.json`` and one ``node<i>.toml`` per entry of ``cfgs`` into ``directory``
    (the clients' data files are already there); returns what was written.  A seeded private
    run's noise entropy is never written (issue 32): anyone holding it could regenerate a
    party's noise and remove it from the released values, so in the description of a private
    run (a party with a ledger) each party draws its noise from its own OS entropy and
    ``--seed`` fixes only the public choices (partition, sketch, sampling).  A non-private run
    keeps it (it seeds nothing secret there: minibatch order, no noise)."""
    spec = dict(spec)
    cfgs = [{k: v for k, v in cfg.items() if "ledger" not in cfg or k not in SECRET_NODE_KEYS}
            for cfg in cfgs]
    for cfg in cfgs:                   # a deployed node says what it does (runtime.partylog)
        cfg.setdefault("party-log", True)
    spec["out"] = os.path.join(directory, "result.pkl")
    spec.pop("progress", None)
    path = dump_run(spec, os.path.join(directory, "run.json"))
    nodes = []
    for cfg in cfgs:
        k = int(cfg["party"])
        node = os.path.join(directory, f"node{k}.toml")
        with open(node, "w") as fh:
            fh.write(f"# node config of party {k} (vflpriv flower node {os.path.basename(node)}"
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
    from ..data.files import regular_file

    if os.path.exists(path):
        regular_file(path, "run description")
    try:
        with open(path) as fh:
            spec = json.load(fh)
    except (OSError, ValueError) as exc:
        raise InputError(f"run description {str(path)!r} cannot be read: {exc}") from None
    if not isinstance(spec, dict) or "family" not in spec:
        raise InputError(f"run description {str(path)!r} has no 'family': not a vflpriv run")
    base = os.path.dirname(os.path.abspath(path))
    arrays = {}
    if "__arrays__" in spec:
        import numpy as np

        npz = os.path.join(base, spec.pop("__arrays__"))
        try:
            with np.load(npz, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
        except (OSError, ValueError) as exc:
            raise InputError(f"run description {str(path)!r}: its arrays {npz!r} cannot be "
                             f"read: {exc}") from None
    return _resolve(decode(spec, arrays), base, SPEC_PATHS)


def read_node_config(path) -> dict:
    """A ``node<i>.toml``, paths made absolute (relative to the file's folder)."""
    import tomllib

    from ..data.files import regular_file

    if os.path.exists(path):
        regular_file(path, "node config")
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
                         "exist on this machine" if not os.path.exists(cfg["data"]) else
                         f"node config {str(path)!r}: its data file {cfg['data']!r} is not a "
                         "regular file")
    return cfg
