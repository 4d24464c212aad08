"""``vflpriv flower spec predict``: scoring new rows with a split model across machines.

From the model's public manifest and each party's schema of its file of new rows
(``vflpriv flower schema``)::

    vflpriv flower spec predict --out scoring --model model --party-schema 0=new0.json \\
        --party-schema 1=new1.json --party-schema 2=new2.json

writes the run description (``run.json``: family ``predict``, the parties' model columns, the
label party, the loss; no coefficient, no row), each party's ``node<i>.toml`` naming its own
file of new rows and ID column (``data``, ``id-column``) and its own model file
(``model-file``: ``party<i>.json`` of the model), the label party's also where it writes the
scores (``scores-file``) and whether it releases them to the server (``release-scores``), and
the Flower App.  The scoring keys of the parties other than the label party are pinned to their
own identity keys (``identity-key``, ``peer-fingerprints``: ``--fingerprints`` or their schemas,
:mod:`.flower_pins`) unless ``--unpinned``.  The run: :mod:`vflpriv.model.deployed`;
docs/alignment.md.
"""
from __future__ import annotations

import os

from ..errors import InputError


def register_spec(ssub, func):
    p = ssub.add_parser("predict", help="score new rows with a split model, each party on its "
                        "own machine (vflpriv predict across machines)",
                        description="Write the description of a scoring run for separate "
                        "machines: private set intersection of the parties' new rows, then the "
                        "secure sum of their partial margins at the label party "
                        "(docs/alignment.md).")
    p.add_argument("--out", required=True, metavar="DIR",
                   help="a new (or empty) folder for run.json, node<i>.toml, app/")
    p.add_argument("--model", required=True, metavar="DIR",
                   help="the model written by vflpriv run --model-out (its manifest.json is "
                   "read; each party's party<i>.json stays with that party)")
    p.add_argument("--party-schema", action="append", required=True, metavar="I=SCHEMA",
                   help="party I's schema of its file of new rows (vflpriv flower schema), "
                   "once per party")
    p.add_argument("--id", dest="id_column", default=None, metavar="COLUMN",
                   help="check that every schema names this ID column")
    p.add_argument("--scores", default="scores.json", metavar="FILE",
                   help="where the label party writes the ids and scores on its machine "
                   "(relative: beside its node config; default scores.json)")
    p.add_argument("--release-scores", action="store_true",
                   help="the label party also hands the ids and scores to the server (they "
                   "are then in the run's result); default: they stay on its machine")
    p.add_argument("--connect-timeout", type=float, default=600.0, metavar="S",
                   help="seconds the ServerApp waits for every party's SuperNode (default 600)")
    from .flower_pins import add_arguments as add_pins

    add_pins(p)
    p.set_defaults(func=func, ledger=None)


def _checked(args):
    """Every input refused before anything is written: ``(manifest, schemas)``."""
    from ..align import parse_party_data
    from ..align.schema import read_schema
    from ..model.files import read_manifest, read_party_model

    man = read_manifest(args.model)
    paths = parse_party_data(args.party_schema, option="--party-schema")
    schemas = {k: read_schema(p, option=f"--party-schema {k}") for k, p in paths.items()}
    K = len(man["parties"])
    if len(schemas) != K:
        raise InputError(f"--party-schema gives {len(schemas)} parties; the model "
                         f"{args.model!r} has {K}")
    for k, s in schemas.items():
        if args.id_column is not None and s["id"] != args.id_column:
            raise InputError(f"--id {args.id_column!r}: party {k}'s schema names the ID column "
                             f"{s['id']!r}")
        have = set(s["columns"])
        missing = [c for c in man["parties"][k]["columns"] if c not in have]
        if missing:
            raise InputError(f"--party-schema {k}: party {k}'s file {s['file']!r} has no column "
                             f"{missing[0]!r}, which the model's party {k} holds")
        mf = os.path.join(args.model, os.path.basename(man["parties"][k]["file"]))
        if os.path.exists(mf):          # a party file present here is checked against it
            read_party_model(mf, k, man["parties"][k]["columns"],
                             intercept=k == man["label_party"])
    if os.path.isabs(args.scores) and not os.path.isdir(os.path.dirname(args.scores)):
        raise InputError(f"--scores {args.scores!r}: its folder does not exist")
    return man, schemas


def spec_predict(args, checked_spec_options, written) -> int:
    """``vflpriv flower spec predict``; ``checked_spec_options`` and ``written``: what every
    ``flower spec`` checks first and prints last (``cli/flower.py``)."""
    import uuid

    from ..flower import require_flwr
    from .described import description_folder
    from ..flower.spec import write_description
    from ..model.deployed import make_spec, party_config

    from . import flower_pins
    from ..vertical.secure.base.roles import pin_identities

    checked_spec_options(args)
    man, schemas = _checked(args)
    K, L = len(schemas), int(man["label_party"])
    # the secure sum's keys are the parties' other than L (none when K = 2): each pinned by
    # its party's own identity key, or --unpinned
    signers = [j for j in range(K) if j != L] if K - 1 >= 2 else []
    pin = flower_pins.pinning(args, K, schemas)
    flower_pins.check(pin, signers)
    require_flwr("flower")
    out, L = args.out, int(man["label_party"])
    spec = make_spec(manifest=man, run_id=uuid.uuid4().hex,
                     connect_timeout=args.connect_timeout)
    model = os.path.abspath(args.model)
    scores = args.scores if os.path.isabs(args.scores) else os.path.join(out, args.scores)
    cfgs = [party_config(k, data=s["file"], id_column=s["id"],
                         model=os.path.join(model, os.path.basename(man["parties"][k]["file"])),
                         leader=L, scores=scores, release=args.release_scores)
            for k, s in sorted(schemas.items())]
    with description_folder(out):
        pin_identities(out, cfgs, pin, parties=signers)
        desc = write_description(out, spec, cfgs)
    return written(desc, out, "scoring", who="party",
                    files="its own file of new rows and its party<i>.json")
