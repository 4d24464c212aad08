"""The job of ``vflpriv run`` (and of ``vflpriv flower spec run``, which describes the same job
for separate machines): the options checked, a resumed run's options restored, the data read
(or aligned by private set intersection from the parties' own files) and split, and the
:class:`~vflpriv.vertical.config.VerticalConfig` built.  Every bad value is refused here, with
one line naming it, before any work; the commands only read options and print.
"""
from __future__ import annotations

import math
import os
import secrets

import numpy as np

from ..errors import InputError

#: the parser of ``vflpriv run`` (set by its ``register``)
PARSER = None


#: options that may be given with --resume (they do not change the run)
_RESUME_OK = ("json", "plot", "log_releases", "quiet", "resume", "func", "command", "model_out")


def _same_value(given, saved) -> bool:
    """An option given with --resume equals the checkpoint's (a checkpoint written before
    --epsilon was read as a number keeps it as text: "1" is 1.0)."""
    if given == saved:
        return True
    try:
        return float(given) == float(saved)
    except (TypeError, ValueError):
        return False


def _resumed_args(args):
    """Replace ``args`` by the options stored in the checkpoint ``args.resume``."""
    from ..vertical.checkpoint import read_checkpoint

    meta, _ = read_checkpoint(args.resume)
    saved = (meta.get("extra") or {}).get("cli")
    if not isinstance(saved, dict):
        raise InputError(f"--resume {args.resume!r}: the checkpoint was not written by vflpriv run")
    for dest, value in vars(args).items():
        if dest in _RESUME_OK or dest not in saved:
            continue
        if value != PARSER.get_default(dest) and not _same_value(value, saved[dest]):
            raise InputError(f"--resume: --{dest.replace('_', '-')} {value!r} differs from the "
                             f"checkpoint's run ({saved[dest]!r}); resume takes its options")
    for dest, value in saved.items():
        if dest not in _RESUME_OK:
            setattr(args, dest, value)
    # a logistic run checkpointed while glm was the default saved no --logistic-path; its run's
    # config records the path it took, which the resume keeps (the default is ssp since)
    path = (meta.get("config") or {}).get("logistic_path")
    if getattr(args, "logistic_path", None) is None and path is not None:
        args.logistic_path = path
    # only the squared loss's rounds checkpoint: a checkpoint saved before its path was an
    # option (or by the rule's choice) resumes them
    if getattr(args, "loss", None) == "squared" and getattr(args, "squared_path", None) is None \
            and getattr(args, "algorithm", None) == "dp-bcfw-secure":
        args.squared_path = "fw"
    return args


def _check_paths(args):
    """Every output checked before any work (issue 13): files in writable directories, a known
    image extension for --plot, and no output that is another output or an input."""
    from ..outputs import check_outputs

    outputs = {"--json": args.json, "--plot": args.plot, "--ledger": args.ledger,
               "--resume" if args.resume else "--checkpoint": args.resume or args.checkpoint,
               "--model-out": getattr(args, "model_out", None)}
    inputs = {"--data": args.data, "--ranges": getattr(args, "ranges", None)}
    for i, spec in enumerate(getattr(args, "party_data", None) or []):
        inputs[f"--party-data {spec}"] = spec.partition("=")[2] or None
    check_outputs(outputs, inputs, images=("--plot",), directories=("--model-out",))


def _labels(y, loss):
    if loss == "squared":
        return y
    vals = np.unique(y)
    if vals.shape[0] != 2:
        raise InputError(f"the {loss} loss needs two label values, found {vals.shape[0]}")
    if set(vals.tolist()) == {-1.0, 1.0}:
        return y
    return np.where(y == vals[1], 1.0, -1.0)


#: why basic / advanced / optimal cannot guard a DP-BCFW-AS or dp-bcfw-secure run
_NO_GAUSSIAN = {
    "basic": "composes (epsilon, delta)-DP releases only, and a Gaussian release has no single "
             "(epsilon, delta)",
    "advanced": "composes (epsilon, delta)-DP releases only, and a Gaussian release has no "
                "single (epsilon, delta)",
    "optimal": "does not support a composition that mixes Gaussian releases with noisy-max "
               "selections",
}


def check_accountant(args, epsilon):
    """Refuse an accountant that cannot account for the run's releases, before any work: dpfw
    releases report-noisy-max selections only (every accountant works); dp-bcfw also releases
    Gaussian vectors; dp-bcfw-secure's ring noise is the exact discrete Gaussian on a stated
    lattice, which rdp, pld and best account for (its Renyi curve, or the Gaussian's profile
    plus its total variation: docs/sensitivity.md 4.9.1; ``secure.privacy.check_accountant``)."""
    acc = args.accountant
    if math.isfinite(epsilon) and args.algorithm == "dp-bcfw-secure":
        from ..vertical.secure.privacy import check_accountant as check_ring

        check_ring(acc)
    if (acc in _NO_GAUSSIAN and math.isfinite(epsilon)
            and args.algorithm in ("dp-bcfw", "dp-bcfw-secure")):
        raise InputError(f"--accountant {acc} cannot guard --algorithm {args.algorithm}: it "
                         f"releases Gaussian noisy vectors next to noisy-max selections, and "
                         f"the {acc} accountant {_NO_GAUSSIAN[acc]}; use rdp, pld or best "
                         "(dpfw works with every accountant)")


def _default_split(args):
    """A shipped vertical data set brings its own party split (e.g. diabetes: clinic | lab)
    unless --parties or --partition says otherwise; other data: 2 balanced parties."""
    from ..data.named import is_named, load_named

    if args.partition is None and args.parties is None and is_named(args.data) \
            and not os.path.exists(args.data):
        d = load_named(args.data)
        if d.kind == "vertical":
            args.partition = ";".join(",".join(str(int(c)) for c in b) for b in d.blocks)
            args.parties = len(d.blocks)
    if args.parties is None:
        args.parties = 2
    if args.partition is None:
        args.partition = "balanced"


def checked_args(args):
    """``(args, epsilon, chunk_rows)``: a resumed run's options, the outputs, and the options
    the command reads itself (``--epsilon`` as given, the accountant, the held-out fraction)
    checked, each with one line naming it, before any work."""
    if args.resume:
        args = _resumed_args(args)
    party_data = getattr(args, "party_data", None)
    if args.data and party_data:
        raise InputError("give --data (one joined table) or --party-data (each party's own "
                         "table), not both")
    if not args.data and not party_data:
        raise InputError("--data or --party-data is required (or --resume FILE)")
    if party_data:
        _check_party_options(args)
    _check_paths(args)
    _check_ranges(args)
    from ..data.stream import READ_CHUNK_ROWS, check_chunk_rows

    chunk_rows = READ_CHUNK_ROWS if getattr(args, "chunk_rows", None) is None else \
        check_chunk_rows(args.chunk_rows)
    if args.seed is not None and args.seed < 0:
        raise InputError(f"--seed must be a non-negative integer, got {args.seed}")
    private_algo = args.algorithm in ("dp-bcfw", "dpfw", "dp-bcfw-secure")
    if args.epsilon is None:
        if private_algo:
            raise InputError(f"--algorithm {args.algorithm} needs --epsilon (a number, or inf "
                             "for a non-private run)")
        epsilon = math.inf
    else:
        import argparse

        from .options import number

        try:
            epsilon = number(args.epsilon)     # 1e309 is refused: only "inf" means non-private
        except argparse.ArgumentTypeError as exc:
            raise InputError(f"--epsilon {exc}") from None
    check_accountant(args, epsilon)
    _check_private_only(args, epsilon)
    _check_secure_options(args)
    from ..vertical.metrics import check_test_fraction

    check_test_fraction(args.test_fraction)
    if args.test_fraction is not None and args.loss == "squared":
        raise InputError("--test-fraction reports classification metrics: it needs --loss "
                         "logistic or smoothed-hinge")
    # said, not silent (issue 51): a new ledger's whole budget is this run's target; the run's
    # summary says so (a line of its own on stdout, after the run, never among the errors)
    args.new_ledger = bool(args.ledger and math.isfinite(epsilon) and not args.resume and
                           not os.path.exists(args.ledger))
    return args, epsilon, chunk_rows


def _check_secure_options(args):
    """dp-bcfw-secure (the default --algorithm) takes no sketch, no sampling but elementary, no
    paper calibration, no derivative clip and not the smoothed-hinge loss: the first such option
    given is refused, naming the algorithm that takes it, before any work."""
    if args.algorithm != "dp-bcfw-secure":
        return
    given = [opt for opt, other in (
        (f"--loss {args.loss}", args.loss == "smoothed-hinge"),
        (f"--sketch {args.sketch}", args.sketch != "identity"),
        (f"--sampling {args.sampling}", str(args.sampling) != "elementary"),
        ("--calibration paper", args.calibration == "paper"),
        ("--derivative-clip", args.derivative_clip is not None)) if other]
    if given:
        raise InputError(f"{given[0]} is not for --algorithm dp-bcfw-secure (the default): give "
                         f"--algorithm dp-bcfw (DP-BCFW-AS, the paper's algorithm; bcfw without "
                         f"privacy), which takes it")


def _check_party_options(args):
    """--party-data's companions, checked before any file is read: --id, --label, a label
    party among the files, and no --partition/--parties (each file is one party's columns)."""
    from ..align import parse_party_data

    paths = parse_party_data(args.party_data)
    if not args.id_column:
        raise InputError("--party-data needs --id COLUMN (the ID column every file has)")
    if not args.label:
        raise InputError("--party-data needs --label COLUMN (in the label party's file)")
    for opt, v in (("--partition", args.partition), ("--parties", args.parties)):
        if v is not None and not args.resume and not (opt == "--parties" and v == len(paths)):
            raise InputError(f"{opt} {v!r} does not go with --party-data: each file is one "
                             f"party's columns ({len(paths)} parties)")
    if args.algorithm in ("dp-bcfw", "bcfw", "dfw"):
        raise InputError(f"--algorithm {args.algorithm} needs the labels at every party (paper "
                         "004's setting); with --party-data the label is in one party's file: "
                         "use dp-bcfw-secure (or the central baselines fw, dpfw)")
    if args.algorithm in ("fw", "dpfw"):          # central baselines: the label party leads
        args.id_leader = 0                          # the alignment, no label_party option
        return
    if args.label_party in (None, "all"):
        if args.label_party == "all":
            raise InputError("--label-party all does not go with --party-data: the label is "
                             "in one party's file; give its index")
        args.label_party = "0"
    try:
        lp = args.id_leader = int(args.label_party)
    except ValueError:
        raise InputError(f"--label-party {args.label_party!r} is not a party index") from None
    if lp not in paths:
        raise InputError(f"--label-party {lp}: --party-data gives parties 0..{len(paths) - 1}")


def _party_tables(args, chunk_rows):
    """``(A, y, names, alignment)`` from the parties' own files: each read alone, the common
    rows found by PSI (metered), the aligned columns in party order."""
    from ..align import align, aligned_data, parse_party_data, read_party_tables

    paths = parse_party_data(args.party_data)
    lp = args.id_leader
    tables = read_party_tables(paths, args.id_column, args.label, lp)
    al = align(tables, leader=lp)
    data = aligned_data(tables, al)
    args.parties = data.K
    args.partition = ";".join(",".join(str(int(c)) for c in b) for b in data.blocks)
    return data.A, data.y, data.feature_names, al.report()


def load_data(args, chunk_rows):
    """``(VerticalData, (A_test, y_test) or None)``: the rows read, labels mapped for the loss,
    a held-out fraction split off (seeded), and the columns split among the parties.  With
    --party-data the rows are the parties' common IDs (private set intersection first) and the
    JSON ``alignment`` section is kept in ``args.alignment_report``."""
    from ..data import VerticalData, load

    if getattr(args, "party_data", None):
        A, y, names, args.alignment_report = _party_tables(args, chunk_rows)
    else:
        A, y, names = load(args.data, args.label, chunk_rows)
    A = _ranged(args, A, names)            # the declared ranges, before any split
    if args.loss != "squared" and str(args.data).startswith("synthetic"):
        y = np.where(np.asarray(y) >= 0, 1.0, -1.0)   # the signs of the responses (as the bench)
    y = _labels(y, args.loss)
    test = None
    if args.test_fraction is not None:
        from ..vertical.metrics import split_rows

        if args.seed is None:
            args.split_seed = getattr(args, "split_seed", None) or secrets.randbits(63)
        train, held = split_rows(A.shape[0], args.test_fraction,
                                 args.seed if args.seed is not None else args.split_seed)
        A, y, test = A[train], y[train], (A[held], y[held])
    _default_split(args)
    if getattr(args, "partition_seed", None) is None:
        # a random partition is public (everyone learns who holds which column); an unseeded
        # run still keeps its partition seed so that --resume rebuilds the same partition
        args.partition_seed = args.seed if args.seed is not None else secrets.randbits(63)
    try:
        data = VerticalData.from_arrays(A, y, args.partition, parties=args.parties,
                                        seed=args.partition_seed)
    except InputError as exc:
        raise InputError(f"--partition/--parties: {exc}") from None
    if names is not None and len(names) == data.d:
        data.feature_names = [str(c) for c in names]
    if any(c.isdigit() for c in args.partition) and data.K != args.parties:
        raise InputError(f"--partition lists {data.K} parties but --parties is {args.parties}")
    _say_clipped(args, data)
    return data, test


def _check_ranges(args):
    """--ranges: read and checked before any work; it declares every feature column's range,
    so the feature bound is 1 in the scaled units (a --feature-bound beside it is refused: it
    would bound the raw values, which the ranges already do)."""
    path = getattr(args, "ranges", None)
    if path is None:
        args.range_table = None
        return
    from ..data.ranges import read_ranges

    if args.feature_bound is not None and not args.resume:
        raise InputError("--ranges declares every feature column's range (the columns are then "
                         "scaled into [-1, 1], bound 1): leave --feature-bound out")
    args.range_table = read_ranges(path)
    args.feature_bound = 1.0


def _ranged(args, A, names):
    """The table's columns clipped to their declared ranges and scaled into [-1, 1]
    (``data.ranges.apply_ranges``); the factors kept to write the model in raw units."""
    table = getattr(args, "range_table", None)
    if table is None:
        return A
    from ..data.ranges import apply_ranges, ranges_for

    if names is None:
        raise InputError("--ranges names columns: give a table with a header (a generated "
                         "synthetic table has none)")
    low, high = ranges_for(table, names)
    A, args.range_factors, args.range_clipped = apply_ranges(A, low, high)
    args.range_names = [str(c) for c in names]
    return A


def _say_clipped(args, data):
    """Each party hears how many of its values lay outside their declared ranges (clipped)."""
    if getattr(args, "range_table", None) is None:
        return
    import sys

    from ..data.ranges import clipped_by_party

    args.range_report = clipped_by_party(args.range_clipped, args.range_names, data.blocks)
    for k, (count, per) in sorted(args.range_report.items()):
        cols = ", ".join(f"{c} {n}" for c, n in sorted(per.items(), key=lambda kv: -kv[1])[:5])
        sys.stderr.write(f"vflpriv run: warning: party {k}: {count} value"
                         f"{'s' if count != 1 else ''} outside their declared ranges clipped "
                         f"({cols}{', ...' if len(per) > 5 else ''})\n")


def config(args, epsilon, backend, flower):
    """The :class:`~vflpriv.vertical.config.VerticalConfig` of ``args``: the one place the
    command's options become the run's options; it checks every one, before the data are read
    (the progress bar and the options a checkpoint keeps are added once the run starts)."""
    from ..vertical.config import VerticalConfig

    _check_ignored(args)
    return VerticalConfig(
        loss=args.loss, eta=args.eta, iterations=args.iterations, algorithm=args.algorithm,
        sampling=args.sampling, epsilon=epsilon, delta=args.delta, rnm=args.rnm,
        fit_intercept=getattr(args, "fit_intercept", None),
        sketch=args.sketch, sketch_dim=args.sketch_dim, calibration=args.calibration,
        split=args.split, feature_bound=args.feature_bound, label_bound=args.label_bound,
        accountant=args.accountant, seed=args.seed, derivative_clip=args.derivative_clip,
        row_clip=args.row_clip, max_features=args.max_features, label_party=args.label_party,
        helper_party=getattr(args, "helper_party", None),
        logistic_path=getattr(args, "logistic_path", None),
        squared_path=getattr(args, "squared_path", None),
        step=getattr(args, "step", None),
        ledger=args.ledger, reference=args.reference, checkpoint=args.resume or args.checkpoint,
        checkpoint_every=args.checkpoint_every or 1, resume=bool(args.resume), backend=backend,
        flower=flower)


def _check_private_only(args, epsilon):
    """A non-private run (``--epsilon inf``, or an algorithm without privacy) reads no delta,
    no selection noise, no split and writes no ledger: such an option is refused, naming it,
    never silently ignored (issue 53)."""
    if math.isfinite(epsilon):
        return
    why = (f"--algorithm {args.algorithm} is non-private" if args.epsilon is None else
           "--epsilon inf makes this run non-private")
    for option, value in (("--delta", args.delta), ("--rnm", args.rnm),
                          ("--split", args.split), ("--ledger", args.ledger),
                          ("--derivative-clip", args.derivative_clip),
                          ("--calibration paper", args.calibration != "accountant" or None),
                          ("--compare-calibration", args.compare_calibration or None)):
        if value is not None:
            raise InputError(f"{option} is for a private run (a finite --epsilon): {why}, so it "
                             f"would be ignored; leave {option} out")


#: the options only some algorithms read (given: not at their default), and which read them:
#: the sketch and the sampling are the party engine's (DP-BCFW-AS, BCFW, dFW); the paper's
#: closed-form calibration, its comparison and the split of epsilon are DP-BCFW-AS's (the split
#: also dp-bcfw-secure's, per path); the derivative clip the private engines' (DP-BCFW-AS, DP-FW);
#: the step rule the central fw's (dp-bcfw-secure's glm path: its config says so)
_READ_BY = {       # option -> (the value given, or None at its default; the readers)
    "--sketch": (lambda a: a.sketch if a.sketch != "identity" else None,
                 ("dp-bcfw", "bcfw", "dfw")),
    "--sketch-dim": (lambda a: a.sketch_dim, ("dp-bcfw", "bcfw", "dfw")),
    "--sampling": (lambda a: a.sampling if str(a.sampling) != "elementary" else None,
                   ("dp-bcfw", "bcfw", "dfw")),
    "--calibration": (lambda a: a.calibration if a.calibration != "accountant" else None,
                      ("dp-bcfw",)),
    "--compare-calibration": (lambda a: "" if a.compare_calibration else None, ("dp-bcfw",)),
    "--split": (lambda a: a.split, ("dp-bcfw", "dp-bcfw-secure")),
    "--derivative-clip": (lambda a: a.derivative_clip, ("dp-bcfw", "dpfw")),
    "--step": (lambda a: getattr(a, "step", None), ("fw", "dp-bcfw-secure")),
}


def _check_ignored(args):
    """An option the chosen algorithm would not read is refused, naming it, never silently
    accepted (``--algorithm bcfw --row-clip 2 --max-features 3`` ran without a word while
    ``--helper-party`` was refused): the options of :data:`_READ_BY` with an algorithm that does
    not read them, dp-bcfw-secure's own options with another algorithm, and the options of its
    paths with a path that does not read them (``paths.SecurePath.reads``), and
    ``--checkpoint-every`` without a checkpoint."""
    for option, (given, readers) in _READ_BY.items():
        value = given(args)
        if value is not None and args.algorithm not in readers:
            shown = f"{option} {value!r}" if isinstance(value, str) and value else \
                f"{option} {value}".rstrip()
            raise InputError(f"{shown} is not read by --algorithm {args.algorithm} (only by "
                             f"{', '.join(readers)}): leave it out")
    if args.algorithm == "dp-bcfw-secure":
        _check_path_options(args)
    else:
        for option, value in (("--row-clip", args.row_clip),
                              ("--max-features", args.max_features)):
            if value is not None:
                raise InputError(f"{option} is for --algorithm dp-bcfw-secure (it clips and "
                                 f"caps what each party's secure products release), got "
                                 f"{option} {value:g} with {args.algorithm}, which ignores it")
    if getattr(args, "checkpoint_every", None) is not None and not (
            getattr(args, "checkpoint", None) or getattr(args, "resume", None)):
        raise InputError(f"--checkpoint-every {args.checkpoint_every} needs --checkpoint FILE "
                         "(without one, nothing is checkpointed)")


def _check_path_options(args):
    """dp-bcfw-secure's path (least squares, or the logistic loss's ssp or glm) reads only some
    of the secure options: the selection noise, the split and the feature cap are least
    squares' (the logistic paths select by argmax of noisy scores, or release once)."""
    from ..vertical.config import choose_logistic_path
    from ..vertical.secure import paths

    if args.loss not in ("squared", "logistic"):
        return                                # refused by name where the loss is checked
    if args.loss == "squared":
        given = getattr(args, "squared_path", None)
        if given is None:
            return      # the rule takes the rounds for an option only they read (defaults.py)
        path, how = paths.of(args.loss, None, given), f"--squared-path {given}"
    else:
        given = getattr(args, "logistic_path", None)
        path = paths.of(args.loss, given or choose_logistic_path(args.algorithm, args.loss)[0])
        how = f"--logistic-path {given}" if given else f"the {args.loss} loss's default path"
    for option, value in (("--rnm", args.rnm), ("--split", args.split),
                          ("--max-features", args.max_features)):
        dest = option[2:].replace("-", "_")
        if value is not None and dest not in path.reads:
            raise InputError(f"{option} is not read by dp-bcfw-secure with {how} "
                             f"({path.name}: {path.summary}): leave it out")
