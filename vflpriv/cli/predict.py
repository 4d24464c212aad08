"""``vflpriv predict``: score new rows with a split model, each party from its own table.

Example::

    vflpriv predict --model model/ --party-data 0=bank_new.csv --party-data 1=telco_new.csv \\
        --id customer_id --json scores.json

The rows common to every party's file are found by private set intersection, led by the label
party (docs/alignment.md); each party's partial margin reaches the label party only inside a
secure sum.  JSON: ``ids`` and ``scores`` (margins x.a + b) in the label party's file order,
``probabilities`` for a logistic model, ``alignment`` and ``scoring`` (bytes per party, seconds).
Exit codes: 0 done; 2 bad input (one line naming it, before any file is written).
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
    p.set_defaults(func=run)


def run(args) -> int:
    from ..align import parse_party_data, read_party_table
    from ..errors import InputError
    from ..model import predict_from_tables, read_split_model
    from ..outputs import check_outputs

    paths = parse_party_data(args.party_data)
    inputs = {f"--party-data {k}={v}": v for k, v in paths.items()}
    check_outputs({"--json": args.json}, inputs)
    model = read_split_model(args.model)
    if len(paths) != model.K:
        raise InputError(f"--party-data gives {len(paths)} parties; the model {args.model!r} "
                         f"has {model.K}")
    tables = [read_party_table(k, p, args.id_column, columns=model.columns[k])
              for k, p in paths.items()]
    out = predict_from_tables(model, tables)
    a, s = out["alignment"], out["scoring"]
    from ..units import format_bytes

    sys.stdout.write(f"predict: {a['intersection_size']} common rows of {a['party_rows']} per "
                     f"party scored; alignment {format_bytes(a['bytes']['total'])} in "
                     f"{a['seconds']:.2f} s, secure sum {format_bytes(s['bytes']['total'])} in "
                     f"{s['seconds']:.2f} s\n")
    if not s["masked"]:
        sys.stdout.write("  note: with one party besides the label party, the secure sum is "
                         "that party's partial margin, which the scores reveal anyway\n")
    if args.json:
        from ..bench import write_json

        write_json(args.json, {"model": str(args.model), **out})
    return 0
