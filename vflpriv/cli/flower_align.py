"""``vflpriv flower schema`` and ``vflpriv flower spec run --party-schema``: a deployment from
each party's own file, aligned by private set intersection on the parties' machines.

Each party, on its own machine::

    vflpriv flower schema --party-data bank.csv --id customer_id --label default --json s0.json

writes its public schema (its file's path there, the ID column, the label column at the label
party, the feature columns' names: the header only, no row).  From the schemas::

    vflpriv flower spec run --out run1 --party-schema 0=s0.json --party-schema 1=s1.json \\
        --label default --label-party 0 --algorithm dp-bcfw-secure --epsilon 1 --delta 1e-6 \\
        --feature-bound 1 --label-bound 1 --iterations 100

writes the run description (``run.json``: family ``align``), each party's ``node<i>.toml``
naming its own file and ID column, its ledger, where it keeps its own identity key and its
peers' fingerprints (``vflpriv flower schema --identity-key FILE`` puts the party's in its
schema; or ``--fingerprints``, :mod:`.flower_pins`), and the Flower App; n is not in it: the run
aligns first and calibrates its noise from n = |C| (:mod:`vflpriv.align.deployed`).
docs/alignment.md, "Across machines".
"""
from __future__ import annotations

import math
import os
import sys

from ..errors import InputError


def register_schema(fsub):
    s = fsub.add_parser("schema", help="write a party's public schema (column names, from the "
                        "file's header only) for vflpriv flower spec run --party-schema",
                        description="Read only the header of a party's own table and write its "
                        "schema: the file's path on this machine, the ID column, the label "
                        "column (the label party only) and the feature columns' names.")
    s.add_argument("--party-data", required=True, metavar="FILE",
                   help="this party's CSV, TSV or parquet table")
    s.add_argument("--id", dest="id_column", required=True, metavar="COLUMN",
                   help="its ID column")
    s.add_argument("--label", default=None, metavar="COLUMN",
                   help="its label column (the label party only)")
    s.add_argument("--json", required=True, metavar="FILE", help="where to write the schema")
    s.add_argument("--identity-key", default=None, metavar="FILE",
                   help="this party's identity key (made here, mode 0600, if it does not exist: "
                   "vflpriv flower identity): the schema carries its fingerprint and this path, "
                   "so the description pins it; the key itself never leaves this machine")
    s.add_argument("--ranges", default=None, metavar="FILE",
                   help="every feature column's public range (vflpriv run --ranges' file): the "
                   "schema carries them, the run's description names them, and this party's "
                   "node clips and scales its columns by them (feature bound 1); the model is "
                   "written in raw units")
    s.add_argument("--ledger", default=None, metavar="FILE",
                   help="this party's own ledger on its machine (vflpriv ledger init sets its "
                   "budget across runs): every description written from this schema names it, "
                   "instead of a new ledger in each run's folder")
    s.set_defaults(func=schema)


def add_spec_arguments(r):
    r.add_argument("--party-schema", action="append", default=None, metavar="I=SCHEMA",
                   help="party I's schema (vflpriv flower schema), once per party, instead of "
                   "--data: the run aligns the parties' own files by private set intersection "
                   "on their machines first (dp-bcfw-secure; docs/alignment.md)")


def schema(args) -> int:
    from ..align.schema import file_schema, write_schema
    from ..outputs import check_outputs

    check_outputs({"--json": args.json}, {"--party-data": args.party_data,
                                          "--ranges": args.ranges})
    s = file_schema(args.party_data, args.id_column, args.label)
    if args.ranges:
        from ..align.schema import schema_ranges
        from ..data.ranges import read_ranges

        s["ranges"] = schema_ranges(read_ranges(args.ranges), s["columns"], "--ranges")
    made = None
    if args.identity_key:
        made = _own_identity(args.identity_key)
        s["fingerprint"], s["identity-key"] = made[0], os.path.abspath(args.identity_key)
    if args.ledger:
        if not os.path.isdir(os.path.dirname(os.path.abspath(args.ledger))):
            raise InputError(f"--ledger {args.ledger!r}: its folder does not exist")
        if os.path.isdir(args.ledger):
            raise InputError(f"--ledger {args.ledger!r} is a directory; give a file name")
        s["ledger"] = os.path.abspath(args.ledger)
    write_schema(s, args.json)
    sys.stdout.write(f"wrote the schema of {s['file']} ({len(s['columns'])} feature columns, ID "
                     f"{s['id']!r}{', label ' + repr(s['label']) if s['label'] else ''}) to "
                     f"{args.json}\n")
    if made:
        sys.stdout.write(f"{made[0]}  {args.identity_key}{' (existing key)' if made[1] else ''}"
                         "\n")
    return 0


def _own_identity(path):
    """``(fingerprint, existed)`` of this party's identity key at ``path``, made if absent."""
    from ..runtime.keys import KeyRefused, fingerprint, identity_public, load_identity, new_identity

    if os.path.exists(path):
        try:
            return fingerprint(identity_public(load_identity(path))), True
        except KeyRefused as exc:
            raise InputError(f"--identity-key: {exc}") from None
    if not os.path.isdir(os.path.dirname(os.path.abspath(path))):
        raise InputError(f"--identity-key {path!r}: its folder does not exist")
    return new_identity(path), False


def _schemas(args):
    from ..align import parse_party_data
    from ..align.schema import read_schema

    paths = parse_party_data(args.party_schema, option="--party-schema")
    return {k: read_schema(p, option=f"--party-schema {k}") for k, p in paths.items()}


def _checked(args):
    """Every option refused before anything is written: ``(schemas, epsilon, label party)``."""
    from . import job
    from .options import number

    if args.data or args.party_data:
        raise InputError("give --party-schema (each party's schema) or --data / --party-data, "
                         "not both")
    if args.algorithm != "dp-bcfw-secure":
        raise InputError(f"--party-schema runs dp-bcfw-secure (the label at one party), not "
                         f"--algorithm {args.algorithm}")
    if getattr(args, "ranges", None):
        raise InputError("--ranges: a description from the parties' schemas takes each "
                         "party's ranges from its schema (vflpriv flower schema --ranges)")
    schemas = _schemas(args)
    K = len(schemas)
    for opt, v in (("--partition", args.partition), ("--parties", args.parties)):
        if v is not None and not (opt == "--parties" and v == K):
            raise InputError(f"{opt} {v!r} does not go with --party-schema: each schema is one "
                             f"party's columns ({K} parties)")
    if args.epsilon is None:
        raise InputError("--party-schema needs --epsilon: a run aligned on the parties' "
                         "machines is private (its fixed-point scale comes from the bounds)")
    import argparse

    try:
        epsilon = number(args.epsilon)
    except argparse.ArgumentTypeError as exc:
        raise InputError(f"--epsilon {exc}") from None
    if not math.isfinite(epsilon):
        raise InputError("--epsilon inf does not go with --party-schema: a run aligned on the "
                         "parties' machines is private")
    if args.seed is not None and args.seed < 0:
        raise InputError(f"--seed must be a non-negative integer, got {args.seed}")
    job.check_accountant(args, epsilon)
    if args.id_column is not None:
        for k, s in schemas.items():
            if s["id"] != args.id_column:
                raise InputError(f"--id {args.id_column!r}: party {k}'s schema names the ID "
                                 f"column {s['id']!r}")
    lp = 0 if args.label_party is None else args.label_party
    try:
        lp = int(lp)
    except ValueError:
        raise InputError(f"--label-party {args.label_party!r} is not a party index") from None
    label = args.label or schemas.get(lp, {}).get("label")
    if not label:
        raise InputError("--party-schema needs --label COLUMN (in the label party's schema)")
    from ..align.schema import check_schemas

    check_schemas(schemas, label, lp)
    ranged = [k for k, s in schemas.items() if s.get("ranges") is not None]
    if ranged and len(ranged) != len(schemas):
        bare = min(set(schemas) - set(ranged))
        raise InputError(f"--party-schema: party {ranged[0]}'s schema declares its columns' "
                         f"ranges and party {bare}'s does not: either every party declares them "
                         "(vflpriv flower schema --ranges) or none")
    if ranged:
        if args.feature_bound is not None:
            raise InputError("--party-schema: the parties' schemas declare every column's range "
                             "(scaled into [-1, 1], bound 1): leave --feature-bound out")
        args.feature_bound = 1.0
    args.label, args.label_party = label, str(lp)
    return schemas, epsilon, lp


def spec_from_schemas(args, checked_spec_options, written) -> int:
    """``vflpriv flower spec run --party-schema``; ``checked_spec_options`` and ``written``:
    what every ``flower spec`` checks first and prints last (``cli/flower.py``)."""
    from ..align.deployed import make_spec
    from ..flower import FlowerOptions, on_client_loss
    from .described import description_folder
    from ..flower.spec import write_description
    from ..vertical.scale import auto_eta
    from ..vertical.secure import planned
    from ..vertical.secure.base.roles import pin_identities
    from . import job
    from .progress import Progress

    checked_spec_options(args)
    if getattr(args, "model_out", None):
        from ..model import check_model_out

        check_model_out(args.model_out)          # a new or empty folder, before anything
    schemas, epsilon, lp = _checked(args)
    from . import flower_pins

    pin = flower_pins.pinning(args, len(schemas), schemas)
    flower_pins.check(pin, range(len(schemas)))      # each party's own key, or --unpinned
    opts = FlowerOptions(spec_dir=args.out, on_client_loss=args.on_client_loss,
                         connect_timeout=args.connect_timeout)
    on_client_loss(opts, "vertical")
    cfg = job.config(args, epsilon, "flower", opts)      # every option checked, and flwr
    columns = [schemas[k]["columns"] for k in range(len(schemas))]
    shape = planned.Shape(1, make_spec(columns=columns, leader=lp, config={"iterations": 1},
                                       ledger=None, run_id=None)["blocks"])
    lp = cfg.check_data(shape)
    if cfg.eta == "auto":
        import dataclasses

        cfg = dataclasses.replace(cfg, eta=auto_eta(cfg.loss_fn.name, shape.K, cfg.feature_bound,
                                                     cfg.label_bound)[0])
    options = dict(planned.config_options(cfg), eta=float(cfg.eta), label_party=lp,
                   epsilon=float(epsilon))
    # the options n does not change; the defaults chosen from the column counts are said
    planned.check_public(options, shape.blocks, callback=Progress(0, quiet=True))
    out = args.out
    import uuid

    spec = make_spec(columns=columns, leader=lp, config=options,
                     ledger=os.path.join(out, "server.ledger"), run_id=uuid.uuid4().hex,
                     connect_timeout=args.connect_timeout)
    if getattr(args, "model_out", None):
        spec["model_out"] = os.path.abspath(args.model_out)
    if schemas[0].get("ranges") is not None:      # public: each party scales by its own
        spec["ranges"] = [schemas[k]["ranges"] for k in range(len(schemas))]
    ids = sorted({s["id"] for s in schemas.values()})
    # public names (the schemas'), for the model's manifest: the ID column, the label
    spec["id_column"] = ids[0] if len(ids) == 1 else [schemas[k]["id"] for k in sorted(schemas)]
    spec["label"] = args.label
    cfgs = []
    for k, s in sorted(schemas.items()):
        c = {"party": k, "data": s["file"], "id-column": s["id"]}
        if k == lp:
            c["label"] = s["label"]
        c.update({"ledger": s.get("ledger") or os.path.join(out, f"party{k}.ledger"),
                  "budget-epsilon": float(epsilon), "budget-delta": float(args.delta),
                  "accountant": args.accountant})
        cfgs.append(c)
    with description_folder(out):
        pin_identities(out, cfgs, pin)
        desc = write_description(out, spec, cfgs)
    return written(desc, out, "aligned dp-bcfw-secure", who="party",
                    files="its own data file")
