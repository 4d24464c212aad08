"""``vflpriv horizontal``: horizontal federated learning on one runtime -- FedAvg, FedProx,
SCAFFOLD, FedDyn, each optionally with its FedElasticNet terms (paper 001), and FedP3 (paper 002).

Example::

    vflpriv horizontal --algorithm feddyn --elastic-net --data digits --clients 20 --rounds 30 \\
        --participation 0.1 --alpha 0.3 --seed 0 --json run.json --plot run.png

``--elastic-net`` defaults come from paper 001's Table 5, MNIST row (lambda1 / lambda2 / threshold):
FedAvg and FedProx (Alg. 1) 1e-6 / 1e-6 / 1e-3, SCAFFOLD (Alg. 2) 1e-4 / 0 / 1e-4, FedDyn (Alg. 3)
1e-4 / 5e-2 / 5e-3; without it FedProx uses mu = lambda2 = 1e-4 and FedDyn alpha = lambda2 = 5e-2.
``--backend flower-sim`` / ``flower`` runs every client as a Flower ClientApp (its own shard, key,
ledger and budget) and adds a ``flower`` section (Flower message bytes per client beside the
in-process count); a seeded run gives the same model as in process.
``--epsilon`` finite adds record-level local DP to every client (per-sample clipping, Gaussian noise
calibrated by the accountant, each round charged to the client's budget before its noise).

JSON fields: ``accuracy`` (final global test accuracy), ``accuracy_history``, ``uplink_nonzeros``
(cumulative nonzeros sent), ``uplink_entropy`` (cumulative per-element entropy, bin 0.01, pooled per
round: paper 001's definition), ``uplink_bytes`` / ``downlink_bytes`` (real serialized messages,
smallest of dense / COO / bitmap per vector), ``epsilon_spent`` (per client, from the ledger by the
accountant; null when non-private), ``settings``, ``per_round`` (the cumulative counts after every
round), ``entropy_variants`` and ``seconds`` (the training's wall time; on Flower its start-up
included).  FedP3 uploads its trained layers' weights (not an update), so its
nonzeros and entropy are those of the weights sent; its own defaults apply (``vflpriv fedp3`` has all
its options).
"""
from __future__ import annotations

import dataclasses
import math
import secrets
import sys
import time

from ..errors import MAX_CLIENTS, InputError, check_count

ALGORITHMS = ("fedavg", "fedprox", "scaffold", "feddyn", "fedp3")
#: paper 001, Table 5, MNIST row: (lambda1, lambda2, threshold) for the base method and with
#: --elastic-net (Alg. 1 for FedAvg and FedProx, Alg. 2 SCAFFOLD, Alg. 3 FedDyn)
TABLE5_MNIST = {
    "fedavg": ((0.0, 0.0, 0.0), (1e-6, 1e-6, 1e-3)),
    "fedprox": ((0.0, 1e-4, 0.0), (1e-6, 1e-6, 1e-3)),
    "scaffold": ((0.0, 0.0, 0.0), (1e-4, 0.0, 1e-4)),
    "feddyn": ((0.0, 5e-2, 0.0), (1e-4, 5e-2, 5e-3)),
}
#: run defaults; FedP3's are its own command's
DEFAULTS = {"clients": 20, "rounds": 30, "participation": 0.1, "alpha": math.inf,
            "local_epochs": 5.0, "lr": 0.1}
FEDP3_DEFAULTS = {"clients": 10, "rounds": 15, "participation": 1.0, "alpha": 0.5,
                  "local_epochs": 2.0, "lr": 0.3}


def register(sub):
    p = sub.add_parser("horizontal", help="FedAvg / FedProx / SCAFFOLD / FedDyn (+ FedElasticNet) "
                       "and FedP3 on one horizontal runtime",
                       description="Horizontal federated learning on an offline data set: one "
                       "runtime, the algorithm as a strategy; communication metered as nonzeros, "
                       "entropy and real bytes; optional per-client local DP.")
    add_run_arguments(p)
    from . import options as O

    O.add_ledger(p, temporary=True)
    O.add_backend(p)
    O.add_outputs(p, what="the figures", plot="accuracy and cumulative nonzeros / bytes per round")
    p.set_defaults(func=run)


def add_run_arguments(p):
    """The run's options (algorithm, data, model, training, privacy), shared with ``vflpriv
    flower spec horizontal``."""
    a = p.add_argument
    a("--algorithm", default="fedavg", help="fedavg | fedprox | scaffold | feddyn | fedp3")
    a("--elastic-net", action="store_true", help="add FedElasticNet's l1 / l2 terms on the local "
      "update and the transmission threshold (Kim et al., Communication-Efficient "
      "and Drift-Robust Federated Learning via Elastic Net, Alg. 1-3)")
    a("--lambda1", type=float, default=None, help="l1 coefficient (default: Table 5, MNIST)")
    a("--lambda2", type=float, default=None, help="l2 coefficient = FedProx mu = FedDyn alpha "
      "(default: Table 5, MNIST)")
    a("--threshold", type=float, default=None, help="transmission threshold epsilon on the update "
      "(default: Table 5, MNIST)")
    a("--step", default="subgradient", help="local step for the l1 term: subgradient (the "
      "paper's) | prox (soft-thresholding); default subgradient")
    a("--data", default="digits", help="digits | synthetic | fashion-mnist (default digits)")
    a("--model", default="mlp", help="mlp | cnn (default mlp)")
    a("--hidden", default="200,200", help="mlp hidden widths (default 200,200: FedDyn's MNIST FC)")
    a("--clients", type=int, default=None, help="number of clients (default 20)")
    a("--rounds", type=int, default=None, help="communication rounds (default 30)")
    a("--participation", type=float, default=None, help="fraction of clients per round "
      "(default 0.1; FedDyn's Bernoulli sampler)")
    a("--alpha", type=float, default=None, help="Dirichlet label-skew concentration "
      "(default inf = IID)")
    a("--local-epochs", type=float, default=None, help="local epochs per round (default 5)")
    a("--batch-size", type=int, default=10, help="local minibatch size (default 10)")
    a("--lr", type=float, default=None, help="local step size (default 0.1)")
    a("--weight-decay", type=float, default=1e-3, help="local weight decay (default 1e-3)")
    a("--grad-clip", type=float, default=10.0, help="local gradient norm clip (default 10; inf off)")
    a("--seed", type=int, default=None, help="seed everything (reproducible run, not for "
      "deployment); default: OS entropy")
    from . import options as O

    g = O.add_privacy(p, epsilon="float", scope="per-client ", epsilon_note=" (local DP)",
                      delta_default=1e-5, choices=False)
    g.add_argument("--clip", type=float, default=1.0,
                   help="per-sample clipping norm under local DP (default 1)")


def _settings(args) -> dict:
    """Validate everything before any work; returns the resolved settings."""
    if args.algorithm not in ALGORITHMS:
        raise InputError(f"--algorithm must be one of {', '.join(ALGORITHMS)}, got {args.algorithm!r}")
    fedp3 = args.algorithm == "fedp3"
    d = FEDP3_DEFAULTS if fedp3 else DEFAULTS
    s = {k: getattr(args, k) if getattr(args, k) is not None else v for k, v in d.items()}
    if fedp3 and (args.elastic_net or args.lambda1 is not None or args.lambda2 is not None
                  or args.threshold is not None):
        raise InputError("--elastic-net / --lambda1 / --lambda2 / --threshold do not apply to "
                         "--algorithm fedp3")
    if not args.elastic_net:
        if args.lambda1 is not None:
            raise InputError(f"--lambda1 {args.lambda1:g} needs --elastic-net")
        if args.threshold is not None:
            raise InputError(f"--threshold {args.threshold:g} needs --elastic-net")
        if args.lambda2 is not None and args.algorithm in ("fedavg", "scaffold"):
            raise InputError(f"--lambda2 {args.lambda2:g} needs --elastic-net for "
                             f"{args.algorithm} (use fedprox for a proximal term)")
    if not fedp3:
        base, en = TABLE5_MNIST[args.algorithm]
        l1, l2, thr = en if args.elastic_net else base
        s["lambda1"] = l1 if args.lambda1 is None else args.lambda1
        s["lambda2"] = l2 if args.lambda2 is None else args.lambda2
        s["threshold"] = thr if args.threshold is None else args.threshold
        for name in ("lambda1", "lambda2", "threshold"):
            v = s[name]
            if not (math.isfinite(v) and v >= 0):
                raise InputError(f"--{name} must be a finite number >= 0, got {v!r}")
        if args.algorithm == "feddyn" and not s["lambda2"] > 0:
            raise InputError(f"--lambda2 must be > 0 for feddyn, got {s['lambda2']!r}")
    from ..horizontal.partition import check_dataset
    args.data = check_dataset(args.data)
    if args.model not in ("mlp", "cnn"):
        raise InputError(f"--model must be mlp or cnn, got {args.model!r}")
    if args.model == "cnn" and args.data == "synthetic":
        raise InputError("--model cnn needs image data; --data synthetic has none")
    try:
        hidden = tuple(int(h) for h in args.hidden.split(","))
        if not hidden or min(hidden) < 1:
            raise ValueError
    except ValueError:
        raise InputError(f"--hidden must be positive integers separated by commas, "
                         f"got {args.hidden!r}") from None
    s["hidden"] = list(hidden)
    if s["clients"] < 1:
        raise InputError(f"--clients must be a positive integer, got {s['clients']}")
    check_count("--clients", s["clients"], MAX_CLIENTS)
    if not s["alpha"] > 0:
        raise InputError(f"--alpha must be > 0 (inf = IID), got {s['alpha']!r}")
    s["config"] = _config(args, s)
    s.update(algorithm=args.algorithm, elastic_net=args.elastic_net, step=args.step,
             data=args.data, model=args.model, batch_size=args.batch_size,
             weight_decay=args.weight_decay, grad_clip=args.grad_clip, seed=args.seed,
             epsilon=args.epsilon, delta=args.delta, clip=args.clip, accountant=args.accountant)
    return s


def _config(args, s):
    """The run's :class:`~vflpriv.horizontal.config.HorizontalConfig` (its local training a
    :class:`~vflpriv.horizontal.config.LocalConfig`): the one place the command's options become
    the runtime's, every one checked before any work (FedP3 takes the same values)."""
    from ..horizontal.config import HorizontalConfig, LocalConfig

    local = LocalConfig(epochs=s["local_epochs"], batch_size=args.batch_size, lr=s["lr"],
                        weight_decay=args.weight_decay, grad_clip=args.grad_clip, step=args.step)
    return HorizontalConfig(rounds=s["rounds"], participation=s["participation"], local=local,
                            epsilon=args.epsilon, delta=args.delta, clip=args.clip,
                            accountant=args.accountant, ledger=args.ledger, seed=args.seed)


def _json_num(x):
    return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else x


def _run_fedp3(s, args, progress, backend="inprocess", flower=None):
    from ..horizontal.fedp3 import MLP, FedP3
    from ..horizontal.partition import load_dataset, make_clients
    data_seed = s["seed"] if s["seed"] is not None else secrets.randbits(32)
    X, y, n_classes, image_shape = load_dataset(s["data"], seed=data_seed)
    clients = make_clients(X, y, s["clients"], alpha=s["alpha"], seed=data_seed)
    model = (lambda: MLP(X.shape[1], n_classes, tuple(s["hidden"]))) if s["model"] == "mlp" \
        else "cnn"
    est = FedP3(model=model, participation=s["participation"], rounds=s["rounds"],
                threads=1,
                local_epochs=s["local_epochs"], batch_size=s["batch_size"], lr=s["lr"],
                epsilon=s["epsilon"], delta=s["delta"], clip=s["clip"],
                accountant=s["accountant"], ledger=args.ledger, seed=s["seed"],
                backend=backend, flower=flower)
    fitted = est.fit(clients, n_classes, image_shape, progress=progress)
    if isinstance(fitted, dict):          # flower.spec_dir: a description was written, no run
        return fitted
    eps = est.epsilon_spent_ if math.isfinite(s["epsilon"]) else None
    return est.accuracy_history_, est.meter_.history, eps, est.meter_, getattr(est, "flower_",
                                                                               None)


def _run_elastic(s, args, progress, backend="inprocess", flower=None):
    import torch

    from ..horizontal.fedavg import FedAvg, FedProx
    from ..horizontal.feddyn import FedDyn
    from ..horizontal.models import MLP, SmallCNN
    from ..horizontal.partition import load_federated
    from ..horizontal.runtime import run as run_rounds
    from ..horizontal.scaffold import Scaffold
    data_seed = s["seed"] if s["seed"] is not None else secrets.randbits(32)
    data = load_federated(s["data"], s["clients"], alpha=s["alpha"], seed=data_seed)
    l1, l2, thr = s["lambda1"], s["lambda2"], s["threshold"]
    strategy = {"fedavg": lambda: FedAvg(l1, l2, thr), "fedprox": lambda: FedProx(l1, l2, thr),
                "scaffold": lambda: Scaffold(l1, l2, thr),
                "feddyn": lambda: FedDyn(l2, l1, thr)}[s["algorithm"]]()
    n_in = data.X_test.shape[1]
    if s["model"] == "mlp":
        model_fn = lambda: MLP(n_in, data.n_classes, hidden=tuple(s["hidden"]))  # noqa: E731
    else:
        c, h, _ = data.image_shape
        model_fn = lambda: SmallCNN(c, h, data.n_classes)  # noqa: E731
    for X, _ in data.clients:
        if s["batch_size"] > X.shape[0] and math.isfinite(s["epsilon"]):
            raise InputError(f"--batch-size {s['batch_size']} exceeds a client's {X.shape[0]} "
                             "training records")
    torch.set_num_threads(1)
    cfg = dataclasses.replace(s["config"], progress=progress, backend=backend, flower=flower)
    res = run_rounds(strategy, data, model_fn, config=cfg)
    if isinstance(res, dict):             # flower.spec_dir: a description was written, no run
        return res
    return res.accuracy_history, res.meter.history, res.epsilon_spent, res.meter, res.flower


def require_torch():
    """One line saying what to install when torch is missing (before any work)."""
    try:
        import torch  # noqa: F401
    except ImportError as exc:
        raise InputError(f"vflpriv horizontal needs torch ({exc}); install the torch extra") \
            from None


def run(args) -> int:
    s = _settings(args)
    from ..outputs import check_command_outputs

    # every output checked before any training: writable folder, an image extension for --plot,
    # no output that is another output or the ledger
    plt = check_command_outputs(args)
    require_torch()
    from ..bench import write_json
    from .progress import Progress

    from . import backend as B

    backend, flower = B.options(args, "fedp3" if s["algorithm"] == "fedp3" else "horizontal")
    progress = Progress(s["rounds"], args.algorithm, quiet=args.quiet, unit="round")
    from accounting import BudgetExceeded

    t0 = time.perf_counter()
    try:
        acc, hist, eps, meter, finfo = (_run_fedp3 if s["algorithm"] == "fedp3" else
                                        _run_elastic)(s, args, progress, backend, flower)
    except BudgetExceeded as exc:
        progress.close()
        sys.stderr.write(f"\nvflpriv horizontal: {exc}\n")
        return 1
    except RuntimeError as exc:
        code = B.client_failure("horizontal", exc) if backend != "inprocess" else None
        if code is None:
            raise
        return code
    last = hist[-1]
    out = {"accuracy": acc[-1], "accuracy_history": acc,
           "uplink_nonzeros": last["uplink_nonzeros"], "uplink_entropy": last["uplink_entropy"],
           "uplink_bytes": last["uplink_bytes"], "downlink_bytes": last["downlink_bytes"],
           "epsilon_spent": [_json_num(e) for e in eps] if eps is not None else None,
           "settings": {k: _json_num(v) for k, v in s.items() if k != "config"},
           "per_round": hist,
           "entropy_variants": dict(meter.entropy),
           "entropy_variants_model_sent": dict(meter.entropy_model), "backend": backend,
           # the training's wall time: the rounds, and on Flower its start-up too
           "seconds": time.perf_counter() - t0}
    out["lost_clients"] = list((finfo or {}).get("lost_clients") or [])
    if finfo is not None:
        out["flower"] = B.section(finfo, last["uplink_bytes"], last["downlink_bytes"])
        out["on_client_loss"] = finfo.get("on_client_loss")
    B.lost_line("horizontal", out["lost_clients"])
    name = s["algorithm"] + (" + elastic net" if s["elastic_net"] else "")
    print(f"{name} on {s['data']}: {s['clients']} clients, {s['rounds']} rounds, "
          f"participation {s['participation']:g}")
    print(f"  final test accuracy      {out['accuracy']:.4f}")
    if out["uplink_nonzeros"] is not None:
        print(f"  uplink nonzeros          {out['uplink_nonzeros']:,}")
        print(f"  uplink entropy (cum.)    {out['uplink_entropy']:.2f}")
    print(f"  uplink bytes             {out['uplink_bytes']:,}")
    print(f"  downlink bytes           {out['downlink_bytes']:,}")
    spent = [e for e in (out["epsilon_spent"] or []) if e is not None]
    print(f"  epsilon spent (max)      {max(spent):.4f} at delta={s['delta']:g}" if spent
          else "  non-private (epsilon = inf)")
    if "flower" in out:
        B.print_line(out["flower"])
    write_json(args.json, out)
    if args.plot:
        r = range(1, len(acc) + 1)
        fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
        axes[0].plot(r, acc, marker="o")
        axes[0].set_xlabel("round")
        axes[0].set_ylabel("test accuracy")
        if out["uplink_nonzeros"] is not None:
            axes[1].plot(r, [h["uplink_nonzeros"] for h in hist], label="uplink nonzeros")
        axes[1].plot(r, [h["uplink_bytes"] for h in hist], label="uplink bytes")
        axes[1].plot(r, [h["downlink_bytes"] for h in hist], label="downlink bytes")
        axes[1].set_xlabel("round")
        axes[1].set_ylabel("cumulative")
        axes[1].legend()
        axes[0].set_title("test accuracy")
        axes[1].set_title("communication")
        fig.suptitle(name)
        from ..outputs import integer_ticks, save_figure

        integer_ticks(*axes)
        fig.tight_layout()
        save_figure(fig, args.plot)
    return 0
