"""``vflpriv fedp3``: FedP3 / LDP-FedP3 (paper 002) on an offline data set.

Example::

    vflpriv fedp3 --data digits --clients 10 --rounds 15 --scheme opu2 --local-pruning fixed \\
        --keep-ratio 0.9 --epsilon 4 --delta 1e-5 --clip 1 --batch-size 16 --seed 0 --json run.json

``--epsilon inf`` runs non-private FedP3.  JSON fields: ``accuracy`` (final mean personalized test
accuracy), ``accuracy_history``, ``epsilon_spent`` (per client, recomputed from the ledger by the
accountant; null when non-private), ``uplink_bytes`` / ``downlink_bytes`` (per client, real
serialized messages), ``uplink_bytes_full`` / ``downlink_bytes_full`` (the unpruned full-model
exchange), ``rounds``, ``seed`` and the run's settings and noise figures.  ``--backend flower-sim``
/ ``flower`` runs every client as a Flower ClientApp (its own records, key, ledger and budget) and
adds a ``flower`` section: Flower message bytes per client beside the in-process count.
"""
from __future__ import annotations

import math
import secrets
import sys

from ..errors import MAX_CLIENTS, MAX_ROUNDS, InputError, check_count


def register(sub):
    p = sub.add_parser("fedp3", help="FedP3 / LDP-FedP3: layer-wise pruned federated learning",
                       description="Run FedP3 (personalized layer-wise pruning) on an offline "
                       "data set, optionally with per-client record-level DP (LDP-FedP3: "
                       "per-sample clipping, Poisson minibatches, Gaussian noise calibrated by "
                       "the accountant, every client's spend in a ledger).")
    a = p.add_argument
    a("--data", default="digits", help="digits | synthetic (default digits)")
    a("--model", default="mlp", help="mlp | cnn (cnn needs image data; default mlp)")
    a("--hidden", default="128,128,128", help="mlp hidden widths, comma-separated "
      "(default 128,128,128)")
    a("--clients", type=int, default=10, help="number of clients (default 10)")
    a("--alpha", type=float, default=0.5, help="Dirichlet concentration of the non-IID split "
      "(default 0.5, the paper's S2; inf = IID)")
    a("--rounds", type=int, default=15, help="communication rounds (default 15)")
    a("--scheme", default="opu2", help="layer sets: fedavg | lowerb | opu2 | opu3 | opr2 | "
      "opu1-2-3 | opu2-3 (default opu2)")
    a("--local-pruning", default="fixed", help="fixed | uniform | ordered_dropout (default fixed)")
    a("--train-layers", default="all", help="all | selected: train every layer and upload L_i "
      "(the paper's update, default) or train only L_i")
    a("--local-p", type=float, default=0.9, help="local keep ratio q ~ U[p, 1] (default 0.9)")
    a("--keep-ratio", type=float, default=0.9, help="global pruning keep ratio r (default 0.9)")
    a("--global-pruning", default="random", help="random | magnitude (default random)")
    a("--aggregation", default="simple", help="simple | weighted (default simple)")
    a("--participation", type=float, default=1.0, help="fraction of clients per round (default 1)")
    from .options import real, seed

    a("--local-epochs", type=real(0, lo_open=True), default=2.0,
      help="local epochs per round (default 2)")
    a("--local-steps", type=int, default=None, help="local steps per round (overrides epochs)")
    a("--lr", type=float, default=0.3, help="local SGD step size (default 0.3)")
    from . import options as O

    g = O.add_privacy(p, scope="per-client ", delta_default=1e-5, choices=False)
    g.add_argument("--clip", type=real(0, lo_open=True), default=1.0,
                   help="per-sample clipping norm C (default 1)")
    a("--batch-size", type=int, default=16, help="expected minibatch size b; q = b/m (default 16)")
    a("--noise", default="calibrate", help="calibrate (accountant) | paper (eq. 18, needs --paper-c)")
    a("--paper-c", type=real(0, lo_open=True), default=None,
      help="the constant c of the paper's eq. (18)")
    O.add_ledger(p, temporary=True)
    a("--seed", type=seed, default=None, help="seed the data split, pruning and noise for a "
      "reproducible run (outputs marked not for deployment); default: OS entropy")
    O.add_backend(p, family="fedp3")
    O.add_outputs(p, what="the figures", plot="accuracy per round")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..outputs import check_command_outputs

    # every output checked before any work or budget is spent (issue 13)
    plt = check_command_outputs(args)
    try:
        from ..horizontal.fedp3 import FedP3
    except ImportError as exc:
        raise InputError(f"vflpriv fedp3 needs torch ({exc}); install the torch extra") from None
    from ..bench import write_json
    from ..horizontal.partition import load_dataset, make_clients

    from ..horizontal.partition import check_dataset
    from . import backend as B

    args.data = check_dataset(args.data)
    backend, flower = B.options(args, "fedp3")
    if args.seed is not None and args.seed < 0:
        raise InputError(f"--seed must be a non-negative integer, got {args.seed}")
    if args.clients < 1:
        raise InputError(f"--clients must be a positive integer, got {args.clients}")
    check_count("--clients", args.clients, MAX_CLIENTS)
    check_count("--rounds", args.rounds, MAX_ROUNDS)
    # Unseeded: FedP3 draws its own OS entropy (seed=None, never reported); the data split gets
    # its own 32 bits (scikit-learn's limit).
    data_seed = args.seed if args.seed is not None else secrets.randbits(32)
    X, y, n_classes, image_shape = load_dataset(args.data, seed=data_seed)
    clients = make_clients(X, y, args.clients, alpha=args.alpha, seed=data_seed)
    try:
        hidden = tuple(int(h) for h in args.hidden.split(","))
        if not hidden or min(hidden) < 1:
            raise ValueError
    except ValueError:
        raise InputError(f"--hidden must be positive integers separated by commas, "
                         f"got {args.hidden!r}") from None
    model = args.model
    if model == "mlp":
        from ..horizontal.fedp3 import MLP
        model = lambda: MLP(X.shape[1], n_classes, hidden)  # noqa: E731
    elif model != "cnn":
        raise InputError(f"unknown model {model!r}; choose mlp or cnn")
    est = FedP3(model=model, scheme=args.scheme, keep_ratio=args.keep_ratio,
                global_pruning=args.global_pruning, local_pruning=args.local_pruning,
                local_p=args.local_p, aggregation=args.aggregation,
                participation=args.participation, rounds=args.rounds,
                local_epochs=args.local_epochs, local_steps=args.local_steps,
                batch_size=args.batch_size, lr=args.lr, epsilon=args.epsilon, delta=args.delta,
                clip=args.clip, noise=args.noise, paper_c=args.paper_c,
                accountant=args.accountant, ledger=args.ledger, seed=args.seed,
                backend=backend, flower=flower, train_layers=args.train_layers)
    from accounting import BudgetExceeded

    try:
        from .progress import Progress

        est.fit(clients, n_classes, image_shape,
                progress=Progress(args.rounds, f"FedP3 {args.scheme}", quiet=args.quiet,
                                  unit="round"))
    except BudgetExceeded as exc:
        sys.stderr.write(f"vflpriv fedp3: {exc}\n")
        return 1
    except RuntimeError as exc:
        code = B.client_failure("fedp3", exc) if backend != "inprocess" else None
        if code is None:
            raise
        return code
    deployment = est.deployment_
    out = {"rounds": args.rounds, "seed": args.seed, "deployment": deployment,
           "deployment_note": "noise from OS entropy; floating-point samplers (docs/audit.md "
           "section 4)" if deployment else f"not for deployment: seeded run (seed={args.seed}); "
           "anyone who knows the seed can regenerate the noise",
           "data": args.data, "model": args.model,
           "hidden": list(hidden) if args.model == "mlp" else None,
           "clients": args.clients, "scheme": args.scheme, "local_pruning": args.local_pruning,
           "train_layers": args.train_layers,
           "keep_ratio": args.keep_ratio, "global_pruning": args.global_pruning,
           "epsilon": None if math.isinf(args.epsilon) else args.epsilon,
           "private": math.isfinite(args.epsilon), "delta": args.delta, "clip": args.clip,
           "batch_size": args.batch_size, "accountant": args.accountant,
           "ledger": est.ledger_.path if est.ledger_ is not None else None, **est.summary(),
           "backend": backend}
    if backend != "inprocess":
        out["flower"] = B.section(est.flower_, est.meter_.uplink_bytes,
                                  est.meter_.downlink_bytes)
        out["client_ledgers"] = est.flower_.get("client_ledgers")
    eps = [e for e in out["epsilon_spent"] if e is not None]
    print(f"FedP3 {args.scheme} on {args.data}: {args.clients} clients, {args.rounds} rounds")
    print(f"  final mean personalized accuracy  {out['accuracy']:.4f}")
    print(f"  epsilon spent (max over clients)  "
          f"{max(eps):.4f} at delta={args.delta:g}" if eps else "  non-private (epsilon = inf)")
    if out["private"]:
        print(f"  {'deployment: ' if deployment else ''}{out['deployment_note']}")
    up, upf = sum(out["uplink_bytes"]), sum(out["uplink_bytes_full"])
    down, downf = sum(out["downlink_bytes"]), sum(out["downlink_bytes_full"])
    # a ledger whose budget is already spent lets no client train: no bytes at all
    print(f"  uplink bytes    {up:>12,}  (unpruned {upf:,}; "
          f"{f'{up / upf:.1%}' if upf else 'nothing sent'})")
    print(f"  downlink bytes  {down:>12,}  (unpruned {downf:,}; "
          f"{f'{down / downf:.1%}' if downf else 'nothing sent'})")
    if "flower" in out:
        B.print_line(out["flower"])
    write_json(args.json, out)
    if args.plot:
        fig, ax = plt.subplots(figsize=(5, 3.5))
        ax.plot(range(1, len(out["accuracy_history"]) + 1), out["accuracy_history"], marker="o")
        ax.set_xlabel("round")
        ax.set_ylabel("mean personalized test accuracy")
        ax.set_title(f"FedP3 {args.scheme}, epsilon={args.epsilon:g}")
        from ..outputs import integer_ticks, save_figure

        integer_ticks(ax)
        fig.tight_layout()

        save_figure(fig, args.plot)
    return 0
