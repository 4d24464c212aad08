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
import os
import sys

from ..errors import MAX_CLIENTS, MAX_ROUNDS
from .job import checked_args, config, load_data
from .run_report import plot, print_results, results

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
    from . import job

    job.PARSER = p                # a resumed run's options are compared with its defaults


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
    from ..vertical.config import DEFAULT_ALGORITHM, LOGISTIC_PATHS, SQUARED_PATHS

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
    p.add_argument("--ranges", default=None, metavar="FILE",
                   help="every feature column's public range (JSON {\"format\": "
                        "\"vflpriv-column-ranges/1\", \"ranges\": {column: [low, high]}} or a "
                        "CSV column,low,high): each column clipped to it and scaled into [-1, 1] "
                        "(feature bound 1), the model written in raw units; instead of "
                        "--feature-bound")
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
    p.add_argument("--squared-path", choices=SQUARED_PATHS, default=None,
                   help="dp-bcfw-secure, squared loss: ssp (the moments released once, least "
                        "squares fitted over the l1 balls) or fw (the Frank-Wolfe rounds; "
                        "needed for --rnm, --split, --max-features, --checkpoint); default: a "
                        "public rule of n, d and epsilon, printed with the run; docs/vertical.md")
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
                  "are all noisy-max selections; dp-bcfw-secure takes rdp, pld or best (its "
                  "ring noise is the exact discrete Gaussian on a stated lattice)")


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

    def __getattr__(self, name):            # the bar's other hooks (say_defaults, phase)
        return getattr(self.inner, name)


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
    args, epsilon, chunk_rows = checked_args(args)
    if not hasattr(args, "backend"):          # a resumed run's saved options predate --backend
        args.backend, args.connect_timeout = "inprocess", 60.0
    backend, flower = B.options(args, "vertical")
    cfg = config(args, epsilon, backend, flower)       # every option checked, before the data
    data, test = load_data(args, chunk_rows)
    from .progress import Progress

    progress = bar = Progress(args.iterations, args.algorithm, quiet=args.quiet, unit="round")
    if args.log_releases:
        progress = _LogReleases(progress)
    cli = {k: v for k, v in vars(args).items()          # the options, not what they made
           if k not in ("func", "resume", "alignment_report") and not k.startswith("range_")}
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
    out = results(args, cfg, sol, data, test)
    print_results(args, sol, out)
    if args.json:
        from ..bench import write_json

        write_json(args.json, out)
    if args.plot:
        plot(sol, args.plot)
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
    coef = sol.x
    if getattr(args, "range_table", None) is not None:      # fitted on the scaled columns
        from ..data.ranges import to_raw

        coef = to_raw(sol.x, args.range_factors)
    path = write_split_model(args.model_out, coef=coef, blocks=data.blocks, names=names,
                             intercept=sol.intercept, label_party=lp, loss=args.loss,
                             extra=extra)
    sys.stdout.write(f"  model: {path} (one file per party and manifest.json)\n")
