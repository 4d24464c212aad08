"""``vflpriv sparse``: horizontal sparse federated learning (papers 000 and 003), private and metered.

Examples::

    vflpriv sparse --algorithm fedgradmp --data synthetic-003:alpha=0.5,e=1.1,sparsity=10,seed=0 \\
        --clients 30 --local-steps 3 --batch-size 40 --rounds 10 --seed 0 --json run.json
    vflpriv sparse --algorithm fediterht --data synthetic-000:alpha=0.5,beta=0.5,seed=0 \\
        --clients 100 --local-steps 5 --tau 200 --rounds 100
    vflpriv sparse --algorithm fediterht --data synthetic-003:alpha=0.5,sparsity=10,samples=1000 \\
        --lr 0.05 --batch-size 100 --epsilon 4 --delta 1e-5 --privacy record --clip 1

JSON fields: ``objective`` (one per round, round 0 first), ``relative_error`` (per round, when the
data have a ground truth x#, else null), ``support_precision`` / ``support_recall`` (of the final
model's support against the planted one, else null), ``uplink_bytes`` / ``downlink_bytes`` (per
round, summed over clients; ``*_per_client`` break them down), ``epsilon_spent`` (per accountant,
with ``best``; null when non-private), ``privacy`` and the run's settings.  With ``--backend
flower-sim`` or ``flower`` a ``flower`` section sets the bytes of the real Flower messages
(``uplink_flower_bytes``, per client in ``per_client``) beside the in-process count of the same
messages (``uplink_inprocess_bytes``), with each client's own spend in a record-level private run.

Exit codes: 0 done; 1 the budget filter (the server's or a client's) refused a release; 2 bad
input (one line naming it); 3 a client was lost (Flower backends).
"""
from __future__ import annotations

import sys


ALGORITHMS = ("fedht", "fediterht", "diht", "fedgradmp", "fedgradmp-inexact", "fedmid",
              "feddualavg", "fedavg")


def register(sub):
    p = sub.add_parser("sparse", help="horizontal sparse FL: Fed-HT, FedIter-HT, FedGradMP, ...",
                       description="Run a horizontal sparse federated method (Tong et al., Federated "
                       "Nonconvex Sparse Learning; Jeong et al., Federated Gradient Matching "
                       "Pursuit) on synthetic or real data split across clients, with real "
                       "serialized messages and optional (epsilon, delta)-DP.")
    add_run_arguments(p)
    from . import options as O

    O.add_backend(p, family="sparse")
    O.add_outputs(p, plot="objective / relative error and bytes per round")
    p.set_defaults(func=run)


def add_run_arguments(p):
    """The options that describe a sparse run (shared with ``vflpriv flower spec sparse``)."""
    a = p.add_argument
    a("--algorithm", default="fediterht", choices=ALGORITHMS)
    a("--data", default="synthetic-003:alpha=0.5,e=1.1,sparsity=10,seed=0",
      help="synthetic-000:alpha=0.5,beta=0.5,seed=0 | synthetic-003:alpha=0.5,e=1.1,sparsity=10,"
           "seed=0 | gapminder (shipped, one client per continent) | diabetes (shipped; k-means "
           "split) | an svmlight/CSV/parquet file (k-means non-IID split) | sklearn:diabetes "
           "(regression) | sklearn:breast_cancer (2 classes) | sklearn:digits (10 classes)")
    a("--label", help="label column of a CSV/parquet file")
    a("--clients", type=int, help="number of clients (default: 100 for synthetic-000 and "
      "files, 30 for synthetic-003)")
    a("--rounds", type=int, default=50, help="communication rounds (default 50)")
    a("--local-steps", type=int, help="local steps K per round (default 3; 1 for diht)")
    a("--tau", type=int, help="sparsity level (default: the planted sparsity; 200 for "
      "synthetic-000, 10 for files)")
    a("--lr", type=float, help="client step size (default: 1 / the largest client smoothness, "
      "estimated from the data; required for private runs)")
    a("--batch-size", type=int, help="minibatch size b (default 40 for synthetic-003, else full "
      "local data)")
    a("--batch-growth", type=float, default=1.0, help="geometric batch schedule b * growth^t "
      "(000's theory; default 1 = constant)")
    a("--participation", default="full", help="full | L (clients per round, without "
      "replacement) | a fraction | poisson:Q (default full)")
    a("--weights", default="uniform", choices=["uniform", "examples"],
      help="p_i = 1/N (uniform, default) or n_i/n (examples)")
    a("--loss", default="squared", choices=["squared", "logistic", "softmax"],
      help="squared | logistic (two labels) | softmax (classes; tau per class)")
    a("--l2", type=float, default=0.0, help="l2 regularization lambda (default 0)")
    a("--dictionary", default="identity", choices=["identity", "orthonormal", "gaussian"],
      help="sparsity with respect to a seeded dictionary (default identity)")
    a("--radius", type=float, help="l2-ball radius R (FedGradMP, Alg. 2)")
    a("--tol", type=float, help="subproblem tolerance of fedgradmp-inexact (default 1e-6)")
    a("--server-lr", type=float, default=1.0, help="server step of fedmid/feddualavg (default 1)")
    from . import options as O

    g = O.add_privacy(p, accountant_note="; pld and best may evaluate a PLD per charge, slow "
                      "with many clients")
    g.add_argument("--privacy", default="record", choices=["record", "client"],
                   help="what a private run protects: one record (local DP-SGD) or one client's "
                   "data (clipped updates, noise at the aggregator); default record")
    from .options import real, seed

    g.add_argument("--clip", type=real(0, lo_open=True), default=1.0,
                   help="clipping norm C (per-sample "
                   "gradients at record level, client updates at client level; default 1)")
    O.add_ledger(p)
    a("--seed", type=seed, help="seed every random choice (reproducible; marked not for "
      "deployment); default OS entropy")


def _defaults(args):
    """Fill in the defaults that depend on the data spec (a shipped set's own clients, the
    planted sparsity of synthetic-000, 003's batch size) and on the algorithm."""
    kind = "file"
    for k in ("synthetic-000", "synthetic-003"):
        if args.data == k or args.data.startswith(k + ":"):
            kind = k
    from ..data.named import is_named, load_named
    import os

    if args.clients is None and is_named(args.data) and not os.path.exists(args.data):
        d = load_named(args.data)
        args.clients = len(d.clients) if d.kind == "horizontal" else 10
    if args.clients is None:
        args.clients = 30 if kind == "synthetic-003" else 100
    if args.local_steps is None:
        args.local_steps = 1 if args.algorithm == "diht" else 3
    if args.tau is None and kind == "synthetic-000":
        args.tau = 200
    if args.batch_size is None and kind == "synthetic-003":
        args.batch_size = 40


def config(args, **run):
    """The :class:`~vflpriv.sparse.config.SparseConfig` of ``args`` (defaults filled in), which
    checks every option before any work; ``run``: the run-control fields (backend, flower,
    callback).  The one place the command's options become a sparse run's options."""
    from ..sparse.config import SparseConfig
    from ..sparse.data import check_spec

    _defaults(args)
    cfg = SparseConfig(args.algorithm, clients=args.clients, rounds=args.rounds,
                       local_steps=args.local_steps, tau=args.tau, lr=args.lr,
                       batch_size=args.batch_size, batch_growth=args.batch_growth,
                       participation=args.participation, weights=args.weights, loss=args.loss,
                       l2=args.l2, epsilon=args.epsilon, delta=args.delta, privacy=args.privacy,
                       clip=args.clip, accountant=args.accountant, ledger=args.ledger,
                       seed=args.seed, label=args.label, dictionary=args.dictionary,
                       radius=args.radius, tol=args.tol, server_lr=args.server_lr, **run)
    check_spec(args.data, cfg.clients, args.label)
    return cfg


def run(args) -> int:
    from accounting import BudgetExceeded

    import os

    from ..outputs import check_command_outputs

    # every output checked before any work (the shared checks of issue 13: writable folder, an
    # image extension for --plot, no output that is another output, the ledger or the data file)
    data_file = args.data if args.data and os.path.isfile(args.data) else None
    check_command_outputs(args, {"--data": data_file})
    import dataclasses

    from ..sparse.api import fit
    from . import backend as B

    cfg = config(args, backend=args.backend)
    _, flower = B.options(args, "sparse")
    from .progress import Progress

    progress = Progress(args.rounds, args.algorithm, quiet=args.quiet, unit="round")
    try:
        res = fit(args.data, config=dataclasses.replace(cfg, flower=flower, callback=progress))
        progress.close()                # stopped early (--tol): end the bar before the results
    except BudgetExceeded as exc:
        sys.stderr.write(f"\nvflpriv sparse: {exc}\n")
        return 1
    except RuntimeError as exc:
        code = B.client_failure("sparse", exc, progress.close)
        if code is None:
            raise
        return code
    out = res.to_dict()
    B.lost_line("sparse", res.lost_clients)
    _summary(res, out)
    if args.json:
        from ..bench import write_json

        write_json(args.json, out)
    if args.plot:
        _plot(res, args.plot)
    return 0


def _summary(res, out):
    w = sys.stdout.write
    s = res.settings
    w(f"{res.algorithm}: {s['rounds']} rounds, {s['clients']} clients, d={s['d']}, "
      f"tau={s['tau']}, K={s['local_steps']}, lr={res.lr if res.lr is None else f'{res.lr:.4g}'}"
      f", {res.seconds:.2f} s\n")
    w(f"  objective {res.objective[0]:.6g} -> {res.objective[-1]:.6g}\n")
    if res.relative_error is not None:
        w(f"  relative error {res.relative_error[-1]:.3g}\n")
    if res.support_precision is not None:
        w(f"  support precision {res.support_precision:.3g}, recall {res.support_recall:.3g}\n")
    w(f"  bytes: uplink {sum(res.uplink_bytes)}, downlink {sum(res.downlink_bytes)} "
      f"(serialized messages, all rounds and clients)\n")
    if "flower" in out:
        f = out["flower"]
        from ..units import format_bytes as fb

        w(f"  {f['backend']}: uplink {fb(f['uplink_flower_bytes'])} in Flower messages for "
          f"{fb(f['uplink_inprocess_bytes'])} in process; downlink "
          f"{fb(f['downlink_flower_bytes'])} for {fb(f['downlink_inprocess_bytes'])} (+ setup "
          f"{fb(f['setup_flower_bytes']['uplink'])} / {fb(f['setup_flower_bytes']['downlink'])})\n")
        if f.get("party_spend"):
            worst = max(v["epsilon"] for v in f["party_spend"].values())
            w(f"  clients' own ledgers: largest spend epsilon {worst:.4g}\n")
    if res.privacy is None:
        w("  privacy: none (non-private run)\n")
    else:
        pr = res.privacy
        vals = ", ".join(f"{k}={v:.4g}" for k, v in pr["epsilon_spent"].items()
                         if v is not None and k != "best")
        w(f"  privacy ({pr['level']} level): epsilon spent {pr['epsilon_spent']['best']:.4g} "
          f"(best: {pr['best_accountant']}; {vals}) at delta={pr['delta']:g}, target "
          f"{pr['epsilon']:g}, {pr['releases']} ledger records\n")
        if not s.get("deployment"):
            w(f"  not for deployment: seeded run (seed={s['seed']})\n")


def _plot(res, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    ax = axes[0]
    if res.relative_error is not None:
        ax.semilogy(res.relative_error, label=f"{res.algorithm} relative error")
        ax.set_ylabel("relative error")
    else:
        ax.plot(res.objective, label=res.algorithm)
        ax.set_ylabel("objective")
    ax.set_xlabel("round")
    ax.legend()
    ax = axes[1]
    r = np.arange(1, len(res.uplink_bytes) + 1)
    ax.plot(r, res.uplink_bytes, label="uplink")
    ax.plot(r, res.downlink_bytes, label="downlink")
    ax.set_xlabel("round")
    ax.set_ylabel("bytes (all clients)")
    ax.set_title("bytes per round")
    ax.legend()
    axes[0].set_title(f"{res.algorithm}: {'relative error' if res.relative_error is not None else 'objective'}")
    from ..outputs import integer_ticks, save_figure

    integer_ticks(*axes)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)
