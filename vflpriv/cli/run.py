"""``vflpriv run``: fit a sparse model on vertically partitioned data (by default dp-bcfw-secure;
``--algorithm dp-bcfw`` is paper 004's DP-BCFW-AS).

Examples::

    vflpriv run --data synthetic:n=2000,d=20000 --parties 4 --algorithm bcfw --iterations 1000 --reference
    vflpriv run --data data.csv --label y --epsilon 4 --delta 1e-5 --feature-bound 1 --label-bound 1

Exit codes: 0 done; 1 the budget refused the run (up front, when its whole planned spend does not
fit in what the ledger's budget has left: nothing released) or, when another run spent meanwhile, a
release (nothing past it was released); 2 bad input (one line naming it, before any work: output
paths are checked first; see docs/ledger.md).
"""
from __future__ import annotations

import dataclasses
import math
import os
import secrets
import sys

import numpy as np

from ..errors import MAX_CLIENTS, MAX_ROUNDS, InputError

#: the cap of a count option that no loop runs over (a chunk's rows, a sketch's dimension, the
#: features a party may select): exact as a float64
MAX_COUNT = 2 ** 53


def register(sub):
    p = sub.add_parser("run", help="fit a sparse model across parties holding different columns",
                       description="Fit a model on vertically partitioned data and report "
                       "objective, bytes and privacy: by default dp-bcfw-secure (the private "
                       "algorithm that learns, cross-party products under secret sharing); "
                       "--algorithm dp-bcfw is the paper's DP-BCFW-AS (Lou and Cheung, An Uplink "
                       "Communication-Efficient Approach to Featurewise Distributed Sparse "
                       "Optimization With Differential Privacy, Algorithm 2); the others are "
                       "baselines.")
    add_problem_arguments(p)
    p.add_argument("--compare-calibration", action="store_true",
                   help="also report the other calibration's noise and epsilon")
    from .options import count, real

    p.add_argument("--test-fraction", type=real(0, 1, lo_open=True, hi_open=True), default=None,
                   metavar="F",
                   help="hold out a random fraction F of the rows (seeded by --seed) and report "
                        "test_accuracy and test_auc there (logistic loss)")
    p.add_argument("--log-releases", action="store_true",
                   help="print 'released round T' on stdout (flushed) once round T's released "
                        "values have reached the server (their ledger records are durable by then)")
    p.add_argument("--checkpoint", metavar="FILE",
                   help="write a checkpoint (atomically) before the first round and every "
                        "--checkpoint-every rounds; private runs need --ledger")
    p.add_argument("--checkpoint-every", type=count(MAX_ROUNDS), default=None, metavar="K",
                   help="rounds between checkpoints (default 1; only with --checkpoint)")
    p.add_argument("--resume", metavar="FILE",
                   help="continue the interrupted run of this checkpoint (its options are used; "
                        "only --json, --plot, --log-releases and --quiet may be given with it)")
    p.add_argument("--model-out", metavar="DIR",
                   help="write the trained model split by party into the new directory DIR: "
                        "one file per party (its own coefficients; the label party's also the "
                        "intercept) and a public manifest, for vflpriv predict")
    p.add_argument("--reference", action="store_true",
                   help="compute the certified optimum on the same set and the excess risk")
    from . import options as O

    O.add_ledger(p)
    O.add_backend(p, who="party", family="vertical")
    O.add_outputs(p, plot="objective vs iteration and bytes per party")
    p.set_defaults(func=run, split_seed=None)
    global _PARSER
    _PARSER = p


def add_problem_arguments(p):
    """The run's data, algorithm and privacy options (shared with ``vflpriv flower spec run``)."""
    p.add_argument("--data",
                   help="a shipped data set (diabetes: clinic + lab, 2 parties; datasets/), "
                        "svmlight/LIBSVM file, CSV/parquet (with --label) or "
                        "synthetic:n=2000,d=20000,density=0.01,sparsity=0.01,seed=0 (with a "
                        "classification loss its labels are the signs of the responses)")
    p.add_argument("--party-data", action="append", default=None, metavar="I=FILE",
                   help="party I's own table (CSV/TSV/parquet with the --id column; the label "
                        "party's also with --label), repeated once per party, instead of --data: "
                        "the rows common to all are found by private set intersection first "
                        "(docs/alignment.md); party I holds that file's columns")
    p.add_argument("--id", dest="id_column", default=None, metavar="COLUMN",
                   help="with --party-data: the ID column every party's file has")
    p.add_argument("--label", help="label column of a CSV/parquet file")
    from ..vertical.privacy import BOUND_RANGE
    from .options import count, real, seed

    bound = real(*BOUND_RANGE)          # a declared bound: its square a normal float
    p.add_argument("--chunk-rows", type=count(MAX_COUNT), default=None, metavar="N",
                   help="rows per chunk when reading a CSV/parquet file (default 65536): the "
                        "file is read chunk by chunk into a sparse matrix, never whole")
    p.add_argument("--parties", type=count(MAX_CLIENTS), default=None, metavar="K",
                   help="number of parties (default 2, or the shipped data set's own split)")
    p.add_argument("--partition", default=None,
                   help="balanced (eq. 11) | random | explicit groups '0-9,12;10-11,13-19' "
                        "(default balanced, or the shipped data set's own split)")
    from ..vertical.config import DEFAULT_ALGORITHM, LOGISTIC_PATHS

    p.add_argument("--algorithm", default=DEFAULT_ALGORITHM,
                   choices=["dp-bcfw", "bcfw", "fw", "dpfw", "dfw", "dp-bcfw-secure"],
                   help="dp-bcfw-secure (the default): the private algorithm that learns, "
                        "cross-party products under secret sharing (squared loss: released once "
                        "per selected feature; logistic: see --logistic-path), the label at one "
                        "party; dp-bcfw: DP-BCFW-AS, the paper's algorithm (labels at every "
                        "party, also the sketches, samplings, the smoothed-hinge loss), which "
                        "learns little at usual budgets; bcfw, fw, dfw, dpfw: baselines; "
                        "docs/vertical.md")
    p.add_argument("--loss", default="squared", choices=["squared", "logistic", "smoothed-hinge"])
    from .options import auto_or_number

    p.add_argument("--eta", default="auto", type=auto_or_number,
                   help="l1 radius of each party's block: a number, or auto (the default): "
                        "the public rule eta_k = 8 / (K B_a) for classification, 4 B_y / (K B_a) "
                        "for least squares (docs/vertical.md, 'Scale and intercept'); the "
                        "non-private fw chooses among that radius x 2^-2..2^4 (doubled further "
                        "while the largest wins) by 3-fold cross-validation (JSON selection)")
    p.add_argument("--no-intercept", dest="fit_intercept", action="store_false", default=None,
                   help="fit no intercept (default: an unpenalized intercept, held by the label "
                        "party (party 0 in dp-bcfw, bcfw, dfw) and fitted with the coefficients, "
                        "for the logistic and smoothed-hinge losses)")
    p.add_argument("--iterations", type=count(MAX_ROUNDS), default=100)
    p.add_argument("--sampling", default="elementary",
                   help="elementary | serial | nice:TAU | distributed:TAU | probs:P1,P2,...")
    p.add_argument("--rnm", default=None, choices=["laplace", "gumbel", "exponential"],
                   help="report-noisy-max noise for the private index (default laplace, the "
                        "paper's; dp-bcfw-secure: gumbel)")
    p.add_argument("--sketch", default="identity", choices=["gaussian", "countsketch", "identity"])
    p.add_argument("--sketch-dim", type=count(MAX_COUNT),
                   help="sketch dimension m (not for identity)")
    p.add_argument("--calibration", default="accountant", choices=["accountant", "paper"])
    p.add_argument("--split", type=real(0, 1, lo_open=True, hi_open=True), default=None,
                   help="share of epsilon for the index releases (accountant calibration; "
                        "default 0.5)")
    p.add_argument("--feature-bound", type=bound,
                   help="declared bound |a_ij| <= B_a (data clipped)")
    p.add_argument("--label-bound", type=bound,
                   help="declared bound |y_j| <= B_y (labels clipped)")
    p.add_argument("--derivative-clip", type=bound,
                   help="clip per-sample loss derivatives to [-c, c] (lowers the score sensitivity)")
    p.add_argument("--row-clip", type=bound, metavar="C",
                   help="dp-bcfw-secure: clip each row of a party's block to l2 norm C "
                        "(sensitivity of the released cross-products 2 B_a C per party; "
                        "default B_a p_k^(1/4) per party, printed with the reason)")
    p.add_argument("--max-features", type=count(MAX_COUNT), default=None, metavar="F",
                   help="dp-bcfw-secure: distinct features per party (default min(10, p_k))")
    p.add_argument("--label-party", default=None, metavar="{all,0,...,K-1}",
                   help="who holds the labels: all (paper 004's setting; the default of dp-bcfw, "
                        "bcfw, dfw) or one party's index (dp-bcfw-secure's default: 0); the "
                        "others see only DP releases derived from y")
    p.add_argument("--helper-party", type=count(MAX_CLIENTS - 1, minimum=0), default=None,
                   metavar="H",
                   help="dp-bcfw-secure, logistic glm path (--logistic-path glm): the party "
                        "that holds the other share of the margins and loss derivatives "
                        "(default (label party + 1) mod K). Trust assumption: H does not "
                        "collude with the label party (together they see the margins in the "
                        "clear) and no party colludes with the server; no other party ever "
                        "holds a share of the derivatives")
    p.add_argument("--logistic-path", choices=LOGISTIC_PATHS, default=None,
                   help="dp-bcfw-secure, logistic loss: ssp (default; the loss's expansion at "
                        "0, its sufficient statistics released once and the model fitted from "
                        "them, on every backend), glm (the loss's derivatives under secret "
                        "sharing every round, with a helper party; needed for --helper-party, "
                        "--step, --checkpoint); docs/vertical.md")
    p.add_argument("--step", choices=("fw", "pgd", "line"), default=None,
                   help="dp-bcfw-secure, logistic glm path (--logistic-path glm): how each "
                        "party moves on its noisy scores: fw (default; its Frank-Wolfe vertex) "
                        "or pgd (a projected-gradient step of size 4 / (sum_k C_k^2 + 1) in its "
                        "l1 ball, the model the iterates' average weighted by t + 1); the same "
                        "releases and spend.  fw (non-private): line (default; exact line "
                        "search, and --eta auto by 3-fold cross-validation) or fw (2 / (t + 2), "
                        "paper 004's FW, eta by the public rule)")
    p.add_argument("--seed", type=seed, default=None,
                   help="seed every random choice (sketch, sampling, noise) for a reproducible "
                        "run; its outputs are marked not for deployment.  Default: the noise "
                        "comes from OS entropy")
    from . import options as O

    O.add_privacy(p, epsilon="optional", delta_type=real(0, 1, lo_open=True, hi_open=True),
                  epsilon_note=" (required for dp-bcfw, dpfw and "
                  "dp-bcfw-secure)", accountants=O.ALL_ACCOUNTANTS,
                  accountant_note="; basic, advanced and optimal only for dpfw, whose releases "
                  "are all noisy-max selections; dp-bcfw-secure takes rdp or best (its ring "
                  "noise is the exact discrete Gaussian)")


_PARSER = None
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
        if value != _PARSER.get_default(dest) and not _same_value(value, saved[dest]):
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
    return args


def _check_paths(args):
    """Every output checked before any work (issue 13): files in writable directories, a known
    image extension for --plot, and no output that is another output or an input."""
    from ..outputs import check_outputs

    outputs = {"--json": args.json, "--plot": args.plot, "--ledger": args.ledger,
               "--resume" if args.resume else "--checkpoint": args.resume or args.checkpoint,
               "--model-out": getattr(args, "model_out", None)}
    inputs = {"--data": args.data}
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


class _LogReleases:
    """Wraps the progress callback: one stdout line per finished round.  The engine calls it after
    round t's replies reached the server, so a line means those values left their party; every
    such release was charged (ledger record appended and fsync'ed) before its noise was drawn."""

    def __init__(self, inner):
        self.inner = inner

    def __call__(self, t, f):
        sys.stdout.write(f"released round {t}\n")
        sys.stdout.flush()
        self.inner(t, f)


#: a list set by ``vflpriv demo``, which expects every party's clipping warning (its synthetic
#: features exceed the declared bound) and says them once: they are collected here, not printed
EXPECTED_CLIPPING = None


class _warnings_now:
    """Print the engine's warnings (e.g. hopeless noise, raised before anything is spent) as one
    ``vflpriv run: warning: ...`` line on stderr the moment they are raised."""

    def __enter__(self):
        import warnings

        from ..errors import ClippingWarning

        def show(message, category, *a, **k):
            if EXPECTED_CLIPPING is not None and issubclass(category, ClippingWarning):
                EXPECTED_CLIPPING.append(str(message))
            else:
                sys.stderr.write(f"vflpriv run: warning: {message}\n")

        self._cm = warnings.catch_warnings()
        self._cm.__enter__()
        warnings.simplefilter("default")
        warnings.showwarning = show
        return self

    def __exit__(self, *exc):
        return self._cm.__exit__(*exc)


#: why basic / advanced / optimal cannot guard a DP-BCFW-AS or dp-bcfw-secure run
_NO_GAUSSIAN = {
    "basic": "composes (epsilon, delta)-DP releases only, and a Gaussian release has no single "
             "(epsilon, delta)",
    "advanced": "composes (epsilon, delta)-DP releases only, and a Gaussian release has no "
                "single (epsilon, delta)",
    "optimal": "does not support a composition that mixes Gaussian releases with noisy-max "
               "selections",
}


def _check_accountant(args, epsilon):
    """Refuse an accountant that cannot account for the run's releases, before any work: dpfw
    releases report-noisy-max selections only (every accountant works); dp-bcfw also releases
    Gaussian vectors; dp-bcfw-secure's ring noise is the exact discrete Gaussian, whose only
    proven analysis is its Renyi curve (docs/sensitivity.md 4.9, 5.7)."""
    acc = args.accountant
    if (acc not in ("rdp", "best") and math.isfinite(epsilon)
            and args.algorithm == "dp-bcfw-secure"):
        raise InputError(f"--accountant {acc} cannot guard --algorithm dp-bcfw-secure: its ring "
                         f"noise is the exact discrete Gaussian, which only the rdp accountant "
                         f"accounts for (best includes it; docs/sensitivity.md 4.9, 5.7); use "
                         f"rdp or best")
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


def run(args) -> int:
    from accounting import BudgetExceeded

    from ..vertical import solve
    from . import backend as B

    if args.plot:
        try:
            import matplotlib  # noqa: F401  (lazy: optional dependency)
        except ImportError:
            sys.stderr.write("vflpriv run: error: --plot needs matplotlib, which is not installed "
                             "(pip install matplotlib)\n")
            return 2
    args, epsilon, chunk_rows = _checked_args(args)
    if not hasattr(args, "backend"):          # a resumed run's saved options predate --backend
        args.backend, args.connect_timeout = "inprocess", 60.0
    backend, flower = B.options(args, "vertical")
    cfg = _config(args, epsilon, backend, flower)       # every option checked, before the data
    data, test = _load_data(args, chunk_rows)
    from .progress import Progress

    progress = bar = Progress(args.iterations, args.algorithm, quiet=args.quiet, unit="round")
    if args.log_releases:
        progress = _LogReleases(progress)
    if args.algorithm == "dp-bcfw-secure":
        _print_defaults(args, data, epsilon)
    cli = {k: v for k, v in vars(args).items()
           if k not in ("func", "resume", "alignment_report")}
    if args.ledger:
        cli["ledger"] = os.path.abspath(args.ledger)
    cfg = dataclasses.replace(cfg, callback=progress, checkpoint_extra={"cli": cli})
    try:
        with _warnings_now():
            sol = solve(data, config=cfg)
        bar.close()
    except BudgetExceeded as exc:
        sys.stderr.write(f"\nvflpriv run: {exc}\n")
        return 1
    except RuntimeError as exc:
        code = B.client_failure("run", exc, bar.close)
        if code is None:
            raise
        return code
    out = _results(args, cfg, sol, data, test)
    _print_results(args, sol, out)
    if args.json:
        from ..bench import write_json

        write_json(args.json, out)
    if args.plot:
        _plot(sol, args.plot)
    if getattr(args, "model_out", None):
        _write_model(args, sol, data, out)
    return 0


def _write_model(args, sol, data, out):
    """--model-out: the coefficients split by party (each party's own file), the manifest."""
    from ..model import write_split_model

    names = data.feature_names or [f"x{j}" for j in range(data.d)]
    lp = sol.extra.get("label_party", args.label_party)
    extra = {"algorithm": sol.algorithm, "id_column": getattr(args, "id_column", None),
             "label": args.label, "epsilon_spent": out.get("epsilon_spent"),
             "delta": out.get("delta"), "deployment": out.get("deployment")}
    path = write_split_model(args.model_out, coef=sol.x, blocks=data.blocks, names=names,
                             intercept=sol.intercept, label_party=lp, loss=args.loss,
                             extra=extra)
    sys.stdout.write(f"  model: {path} (one file per party and manifest.json)\n")


def _checked_args(args):
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
    _check_accountant(args, epsilon)
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


def _load_data(args, chunk_rows):
    """``(VerticalData, (A_test, y_test) or None)``: the rows read, labels mapped for the loss,
    a held-out fraction split off (seeded), and the columns split among the parties.  With
    --party-data the rows are the parties' common IDs (private set intersection first) and the
    JSON ``alignment`` section is kept in ``args.alignment_report``."""
    from ..data import VerticalData, load

    if getattr(args, "party_data", None):
        A, y, names, args.alignment_report = _party_tables(args, chunk_rows)
    else:
        A, y, names = load(args.data, args.label, chunk_rows)
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
    return data, test


def _results(args, cfg, sol, data, test) -> dict:
    """The JSON object: the Solution's fields, dp-bcfw-secure's section and defaults, the label
    party, classification metrics (training and held-out), the calibration comparison and the
    Flower section."""
    from ..vertical.api import calibration_comparison

    out = sol.to_dict()
    if getattr(args, "alignment_report", None) is not None:
        out["alignment"] = args.alignment_report
    if sol.algorithm == "dp-bcfw-secure":
        out["secure"] = {k: sol.extra[k] for k in ("secure_products", "frac_bits", "feature_cap",
                                                   "row_clips", "setup_seconds",
                                                   "bytes_by_type")}
        out["defaults"] = sol.extra.get("defaults", [])
        for k in ("path", "helper_party", "sigmoid", "step", "step_size", "scale", "ridge",
                  "fit_iterations"):
            if k in sol.extra:
                out["secure"][k] = sol.extra[k]
        out["secure"]["helpers"] = _helpers(sol, data)
    if args.algorithm not in ("fw", "dpfw"):
        lp = sol.extra.get("label_party", "all")
        out["label_party"] = "all" if lp is None else lp
    if args.loss != "squared":
        from ..vertical.metrics import classification_metrics

        m = classification_metrics(data.A, data.y, sol.x, sol.intercept, args.loss)
        out["accuracy"], out["auc"] = m["accuracy"], m["auc"]
        out["log_loss"], out["majority_accuracy"] = m["log_loss"], m["majority_accuracy"]
        if test is not None:
            mt = classification_metrics(test[0], test[1], sol.x, sol.intercept, args.loss)
            out["test_accuracy"], out["test_auc"] = mt["accuracy"], mt["auc"]
            out["test_log_loss"], out["majority_accuracy"] = mt["log_loss"], \
                mt["majority_accuracy"]
            out["training_majority_accuracy"] = m["majority_accuracy"]
            out["test_rows"] = mt["rows"]
    if args.compare_calibration and cfg.private and args.algorithm == "dp-bcfw":
        # on the run's own sketch (an unseeded run's sketch comes from entropy, not from cfg)
        out["calibration_comparison"] = calibration_comparison(
            data, sketch_seed=sol.extra["sketch_seed"], **dict(cfg.options(), eta=sol.eta))
    if sol.extra.get("flower") is not None:
        out["flower"] = _flower_section(sol)
    return out


def _print_results(args, sol, out):
    """The summary on stdout: objective, bytes, privacy; accuracy; Flower bytes; calibrations."""
    if "alignment" in out:
        a = out["alignment"]
        sys.stdout.write(f"aligned by private set intersection: {a['intersection_size']} common "
                         f"rows of {a['party_rows']} per party, {_fmt_bytes(a['bytes']['total'])}"
                         f" framed, {a['seconds']:.2f} s\n")
    _summary(sol, out)
    if getattr(args, "new_ledger", False) and sol.privacy:
        sys.stdout.write(f"  ledger: {args.ledger} was new: its whole budget is this run's "
                         f"target, epsilon {sol.privacy['target_epsilon']:g} at delta "
                         f"{sol.privacy['delta']:g} (vflpriv ledger init sets a budget across "
                         "runs)\n")
    if "accuracy" in out:
        sys.stdout.write(_metrics_line(out) + "\n")
    if "flower" in out:
        f = out["flower"]
        sys.stdout.write(f"  {f['backend']}: uplink {_fmt_bytes(f['uplink_flower_bytes'])} in "
                         f"Flower messages for {_fmt_bytes(f['uplink_frame_bytes'])} of frames; "
                         f"downlink {_fmt_bytes(f['downlink_flower_bytes'])} for "
                         f"{_fmt_bytes(f['downlink_frame_bytes'])}\n")
    if args.compare_calibration:
        _print_comparison(out.get("calibration_comparison"))


def _metrics_line(out):
    """AUC first, then log-loss, then accuracy beside the majority-class share of the same rows
    (an accuracy at that share has learned nothing)."""
    def part(prefix, rows, auc, ll, acc, maj):
        a = "n/a" if auc is None else f"{auc:.4f}"
        s = f"{prefix} AUC {a}"
        if ll is not None:
            s += f", log-loss {ll:.4f}"
        return s + f", accuracy {acc:.4f} (majority class {maj:.4f}{rows})"

    if "test_accuracy" in out:
        return (part("  held-out", f", {out['test_rows']} rows", out["test_auc"],
                     out["test_log_loss"], out["test_accuracy"], out["majority_accuracy"])
                + ";" + part(" training", "", out["auc"], out["log_loss"], out["accuracy"],
                             out["training_majority_accuracy"]))
    return part("  training", "", out["auc"], out["log_loss"], out["accuracy"],
                out["majority_accuracy"])


def _config(args, epsilon, backend, flower):
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
                          ("--split", args.split), ("--ledger", args.ledger)):
        if value is not None:
            raise InputError(f"{option} is for a private run (a finite --epsilon): {why}, so it "
                             f"would be ignored; leave {option} out")


def _check_ignored(args):
    """An option the chosen algorithm would not read is refused, naming it, never silently
    accepted (``--algorithm bcfw --row-clip 2 --max-features 3`` ran without a word while
    ``--helper-party`` was refused): dp-bcfw-secure's own options with another algorithm, and
    ``--checkpoint-every`` without a checkpoint."""
    if args.algorithm != "dp-bcfw-secure":
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


def _print_defaults(args, data, epsilon):
    """dp-bcfw-secure: the values its rules choose for the options left out, and why (the same
    rules ``solve`` applies; public quantities only), before the run starts."""
    from ..vertical.secure.defaults import choose, describe

    if args.feature_bound is None and math.isfinite(epsilon):
        return                                      # solve refuses it, naming the bound
    _, chosen = choose(loss=args.loss, private=math.isfinite(epsilon),
                       feature_bound=args.feature_bound, block_sizes=[len(b) for b in data.blocks],
                       rnm=args.rnm, split=args.split, max_features=args.max_features,
                       row_clip=args.row_clip,
                       logistic_path=getattr(args, "logistic_path", None))
    for line in describe(chosen):
        sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _flower_section(sol) -> dict:
    """The JSON ``flower`` section: Flower message bytes beside the project's frame bytes (the
    in-process count), per party and in total, and each party's own spend."""
    info = sol.extra["flower"]
    t = info["totals"]
    return {"backend": info["backend"], "uplink_flower_bytes": t["uplink"],
            "downlink_flower_bytes": t["downlink"], "uplink_frame_bytes": t["uplink_frames"],
            "downlink_frame_bytes": t["downlink_frames"], "per_party": info["bytes"],
            "party_spend": info.get("party_spend")}


def _fmt_bytes(b):
    from ..units import format_bytes       # SI units, as everywhere (vflpriv/units.py)

    return format_bytes(b)


def _print_comparison(cmp):
    """--compare-calibration on the terminal: each calibration's noise and what it spends."""
    w = sys.stdout.write
    if cmp is None:
        w("  calibration comparison: only for a private dp-bcfw run (finite --epsilon)\n")
        return
    a = cmp["accountant"]
    w(f"  calibration comparison at delta={a['delta']:g} (epsilon by the {a['accountant']} "
      "accountant):\n")
    for name in ("accountant", "paper"):
        c = cmp[name]
        w(f"    {name:<10} index noise scale {c['index_scale']:.4g}, feature noise sigma "
          f"{c['feature_sigma']:.4g}, epsilon {c['epsilon']:.4g}\n")


def _summary(sol, out):
    w = sys.stdout.write
    chose = (sol.selection or {}).get("seconds")
    path = _secure_path(sol)
    rounds = path.rounds_text(sol) if path else f"{sol.iterations} iterations"
    w(f"{sol.algorithm}: {rounds}, K={sol.K}, n={sol.n}, "
      f"{sol.seconds:.2f} s" + (f" ({chose:.2f} s of it choosing eta)" if chose else "") + "\n")
    w(f"  objective {out['initial_objective']:.6g} -> {out['final_objective']:.6g}, "
      f"support {out['support_size']}\n")
    holder = "party 0" if sol.algorithm in ("dp-bcfw", "bcfw", "dfw") else "label party"
    icpt = "" if sol.intercept is None else f"; intercept {sol.intercept:.4g} ({holder})"
    if sol.eta is not None:
        how = f"auto: {sol.eta_rule}" if sol.eta_rule else "as given"
        w(f"  eta {sol.eta:.4g} per party ({how}){icpt}\n")
    elif sol.eta_rule:
        w(f"  eta auto: {sol.eta_rule}{icpt}\n")
    if "reference_objective" in out:
        w(f"  reference {out['reference_objective']:.6g} (certified={out['reference_certified']}), "
          f"excess risk {out['excess_risk']:.4g}\n")
    if sol.uplink is not None:
        up, naive = sum(sol.uplink), sum(sol.uplink_naive)
        full = ("" if sol.uplink_full_gradient is None else
                f", full gradients {_fmt_bytes(sum(sol.uplink_full_gradient))}")
        w(f"  uplink {_fmt_bytes(up)} payload ({_fmt_bytes(sum(sol.uplink_framed))} framed); "
          f"raw columns would be {_fmt_bytes(naive)}{full}\n")
        w(f"  downlink {_fmt_bytes(sum(sol.downlink))} payload\n")
        if path:
            w(f"  trust: {_trust(sol)}\n" + path.bytes_line(sol, _by_kind(sol), _fmt_bytes)
              + "\n")
    if sol.privacy:
        w(f"  {'deployment: ' if sol.deployment else ''}{sol.deployment_note}\n")
    if not sol.privacy:
        what = (path.nonprivate_note if path
                else "exact scores and noiseless columns are shared")
        w(f"  privacy: none (non-private run: {what})\n")
    else:
        pr = sol.privacy
        vals = ", ".join(f"{k}={v:.4g}" for k, v in pr["epsilon_spent"].items()
                         if v is not None and k != "best")
        w(f"  privacy: epsilon spent {pr['epsilon_spent']['best']:.4g} (best: "
          f"{pr['best_accountant']}; {vals}) at delta={pr['delta']:g}, target "
          f"{pr['target_epsilon']:g}, {pr['releases']} ledger records\n")


def _secure_path(sol):
    """The dp-bcfw-secure path of ``sol`` (``secure.paths``), None for other algorithms."""
    if sol.algorithm != "dp-bcfw-secure":
        return None
    from ..vertical.secure import paths

    return paths.of_solution(sol)


def _helpers(sol, data):
    """``secure.helpers``: entry k lists the parties that hold k's masked block and help its
    products."""
    x = sol.extra
    return _secure_path(sol).helpers(sol.K, x.get("label_party"), x.get("helper_party"))


def _trust(sol):
    x = sol.extra
    return _secure_path(sol).trust(sol.K, x.get("label_party"), x.get("helper_party"))


def _by_kind(sol):
    """``by_kind(*names)``: the framed bytes of those wire messages, summed over senders and
    receivers' copies."""
    by = sol.extra.get("bytes_by_type", {})
    return lambda *names: sum(by.get(n, [0, 0])[1] for n in names)


def _plot(sol, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2 if sol.uplink is not None else 1, figsize=(10, 4), squeeze=False)
    ax = axes[0][0]
    ax.plot(np.arange(1, len(sol.objective) + 1), sol.objective, label=sol.algorithm)
    if sol.reference is not None:
        ax.axhline(sol.reference.objective, color="k", ls="--", label="reference")
    ax.set_xlabel("iteration")
    ax.set_ylabel("objective")
    ax.set_title(f"{sol.algorithm}: objective, K={sol.K} parties, n={sol.n}")
    ax.legend()
    from ..outputs import integer_ticks, save_figure

    integer_ticks(ax)
    if sol.uplink is not None:
        ax = axes[0][1]
        k = np.arange(sol.K)
        ax.bar(k - 0.2, sol.uplink, width=0.4, label="uplink (payload)")
        ax.bar(k + 0.2, sol.uplink_naive, width=0.4,
               label=_secure_path(sol).naive_label if _secure_path(sol) else "raw columns")
        ax.set_xticks(k)
        ax.set_xlabel("party")
        ax.set_ylabel("bytes")
        ax.set_title("bytes sent by each party")
        ax.legend()
    fig.tight_layout()

    save_figure(fig, path)
    plt.close(fig)
