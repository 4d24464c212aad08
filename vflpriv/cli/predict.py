"""``vflpriv predict``: score new rows with a split model, each party from its own table.

Example::

    vflpriv predict --model model/ --party-data 0=bank_new.csv --party-data 1=telco_new.csv \\
        --id customer_id --json scores.json

The rows common to every party's file are found by private set intersection, led by the label
party (docs/alignment.md); each party's partial margin reaches the label party only inside a
secure sum.  JSON: ``ids`` and ``scores`` (margins x.a + b) in the label party's file order,
``probabilities`` for a logistic model, ``alignment`` and ``scoring`` (bytes per party, seconds).
With ``--backend flower-sim`` (Flower's simulation runtime) or ``flower`` (a SuperLink and one
SuperNode per party on 127.0.0.1) each party is a ClientApp reading its own file and its own
model file; the ServerApp relays and meters every frame (:mod:`vflpriv.model.deployed`); the
label party writes the ids and scores on its side, and the command reads them from there.  The
same run across machines: ``vflpriv flower spec predict`` (docs/alignment.md).
Exit codes: 0 done; 2 bad input (one line naming it, before any file is written); 3 a party
was lost (Flower backends).
"""
from __future__ import annotations

import sys


def register(sub):
    p = sub.add_parser("predict", help="score new rows with a split model (vflpriv run "
                       "--model-out), each party from its own table",
                       description="Align the parties' new rows by private set intersection "
                       "and score them with a split model: each party's partial margin reaches "
                       "the label party only inside a secure sum (docs/alignment.md).")
    p.add_argument("--model", required=True, metavar="DIR",
                   help="a directory written by vflpriv run --model-out")
    p.add_argument("--party-data", action="append", required=True, metavar="I=FILE",
                   help="party I's table of new rows (CSV/TSV/parquet with the --id column and "
                        "the model's columns of party I), repeated once per party")
    p.add_argument("--id", dest="id_column", required=True, metavar="COLUMN",
                   help="the ID column every party's file has")
    p.add_argument("--json", metavar="FILE", help="write ids, scores and costs as JSON here")
    from .options import add_backend

    add_backend(p, who="party", family="vertical")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..align import parse_party_data, read_party_table
    from ..errors import InputError
    from ..model import predict_from_tables, read_split_model
    from ..outputs import check_outputs
    from . import backend as B

    paths = parse_party_data(args.party_data)
    inputs = {f"--party-data {k}={v}": v for k, v in paths.items()}
    inputs["--model"] = args.model          # a directory: no output may land inside it
    check_outputs({"--json": args.json}, inputs)
    backend, flower = B.options(args, "vertical")
    model = read_split_model(args.model)
    if len(paths) != model.K:
        raise InputError(f"--party-data gives {len(paths)} parties; the model {args.model!r} "
                         f"has {model.K}")
    tables = [read_party_table(k, p, args.id_column, columns=model.columns[k])
              for k, p in paths.items()]
    if backend == "inprocess":
        out = predict_from_tables(model, tables)
    else:
        try:
            out = _on_flower(args, model, paths, backend, flower)
        except RuntimeError as exc:
            code = B.client_failure("predict", exc)
            if code is None:
                raise
            return code
    a, s = out["alignment"], out["scoring"]
    from ..units import format_bytes

    sys.stdout.write(f"predict: {a['intersection_size']} common rows of {a['party_rows']} per "
                     f"party scored; alignment {format_bytes(a['bytes']['total'])} in "
                     f"{a['seconds']:.2f} s, secure sum {format_bytes(s['bytes']['total'])} in "
                     f"{s['seconds']:.2f} s\n")
    if "flower" in out:
        t = out["flower"]["totals"]
        sys.stdout.write(f"  {backend}: {format_bytes(t['uplink'])} up and "
                         f"{format_bytes(t['downlink'])} down in Flower messages; the scores "
                         f"were written by the label party {model.label_party}\n")
    if not s["masked"]:
        sys.stdout.write("  note: with one party besides the label party, the secure sum is "
                         "that party's partial margin, which the scores reveal anyway\n")
    if args.json:
        from ..bench import write_json

        write_json(args.json, {"model": str(args.model), **out})
    return 0


def _on_flower(args, model, paths, backend, flower) -> dict:
    """The scoring run of :mod:`vflpriv.model.deployed` on a Flower backend, each party a
    ClientApp with its own file and model file; the label party writes the ids and scores into
    this run's folder (deleted at the end), from which the command reads them."""
    import json
    import os
    import shutil
    import tempfile
    import uuid

    from ..errors import InputError
    from ..model.deployed import make_spec, party_config
    from ..runtime.backends import launch
    from ..runtime.link import raise_recorded

    run_dir = tempfile.mkdtemp(prefix="vflpriv-predict-")
    try:
        L = model.label_party
        scores = os.path.join(run_dir, "scores.json")
        spec = make_spec(manifest=model.manifest, run_id=uuid.uuid4().hex,
                         connect_timeout=flower.connect_timeout)
        cfgs = [dict(party_config(k, data=os.path.abspath(p), id_column=args.id_column,
                                  model=os.path.join(os.path.abspath(args.model),
                                                     model.manifest["parties"][k]["file"]),
                                  leader=L, scores=scores), **{"spill-dir": run_dir})
                for k, p in paths.items()]
        res = launch(backend, spec, cfgs, os.path.join(run_dir, "deployment"), quiet=True)
        err = res.get("error")
        if err is not None:
            if err["kind"] == "PartyRefused" and str(err["reason"]).startswith("InputError"):
                raise InputError(f"party {err['party']} refused its file: "
                                 f"{err['reason'].partition(': ')[2]}")
            raise_recorded(err, res.get("flower"), backend)
        with open(scores) as fh:
            out = json.load(fh)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    out["alignment"], out["scoring"] = res["alignment"], res["scoring"]
    out["flower"] = {"backend": backend, "totals": res["flower_totals"],
                     "per_party": res["flower"]}
    return out
