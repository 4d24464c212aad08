"""``vflpriv bench transport``: seconds and bytes per round, in process vs Flower.

Vertical, 4 parties: the same seeded private DP-BCFW-AS run (synthetic n x d, identity sketch) on
``inprocess``, ``flower-sim`` and ``flower`` (a real loopback deployment).  Seconds per round are
measured between the first and the last completed round (start-up -- Ray, or the SuperLink and
SuperNodes -- is reported apart); bytes per round are the project's frames (what the in-process
transport counts) and the Flower messages that carry them (protobuf size), uplink and downlink.

Horizontal, 100 clients: FedAvg (digits, an 8-unit MLP, one local epoch, every client every
round) on ``inprocess`` and ``flower-sim`` (needs torch); the deployment is not run at 100
clients (100 SuperNode processes on 2 cores, each polling every 3 s).
"""
from __future__ import annotations

import time


def add_arguments(p):
    p.add_argument("--rounds", type=int, default=6, help="rounds per vertical run (default 6)")
    p.add_argument("--deploy-rounds", type=int, default=3,
                   help="rounds of the loopback deployment (seconds each; default 3)")
    p.add_argument("--skip-deploy", action="store_true", help="skip the loopback deployment")
    p.add_argument("--n", type=int, default=500, help="samples (default 500)")
    p.add_argument("--d", type=int, default=200, help="features (default 200)")


def _vertical(backend, data, rounds):
    from ..vertical.api import solve

    stamps = []
    t0 = time.perf_counter()
    sol = solve(data, algorithm="dp-bcfw", epsilon=4.0, delta=1e-5, feature_bound=1.0,
                label_bound=3.0, iterations=rounds, seed=0, backend=backend,
                callback=lambda t, f: stamps.append(time.perf_counter()))
    total = time.perf_counter() - t0
    per_round = (stamps[-1] - stamps[0]) / (len(stamps) - 1) if len(stamps) > 1 else total
    row = {"backend": backend, "parties": data.K, "rounds": rounds, "seconds_total": total,
           "seconds_per_round": per_round, "startup_seconds": max(0.0, stamps[0] - t0 - per_round),
           "uplink_frame_bytes_per_round": sum(sol.uplink_framed) / rounds,
           "downlink_frame_bytes_per_round": sum(sol.downlink_framed) / rounds}
    fl = sol.extra.get("flower")
    if fl is not None:
        t = fl["totals"]
        # Flower's counts include the hello and the setup message: reported per round as sent
        row.update(uplink_flower_bytes_per_round=t["uplink"] / rounds,
                   downlink_flower_bytes_per_round=t["downlink"] / rounds,
                   flower_overhead=(t["uplink"] + t["downlink"])
                   / max(1, t["uplink_frames"] + t["downlink_frames"]) - 1.0)
    return row, sol


def _horizontal(backend, rounds, clients=100):
    """FedAvg on scikit-learn's digits split over ``clients`` clients (an 8-unit MLP, one local
    epoch, every client every round): seconds and bytes per round."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return None
    from ..horizontal.fedavg import FedAvg
    from ..horizontal.fedp3 import MLP
    from ..horizontal.local import LocalConfig
    from ..horizontal.partition import load_federated
    from ..horizontal.runtime import run

    data = load_federated("digits", clients, seed=0)
    stamps = []
    t0 = time.perf_counter()
    res = run(FedAvg(), data, lambda: MLP(64, 10, (8,)), rounds=rounds, participation=1.0,
              local=LocalConfig(epochs=1, batch_size=10, lr=0.1), seed=0, backend=backend,
              progress=lambda t: stamps.append(time.perf_counter()))
    total = time.perf_counter() - t0
    per_round = (stamps[-1] - stamps[0]) / (len(stamps) - 1) if len(stamps) > 1 else total
    row = {"backend": backend, "clients": clients, "rounds": rounds, "seconds_total": total,
           "seconds_per_round": per_round, "startup_seconds": max(0.0, stamps[0] - t0 - per_round),
           "uplink_bytes_per_round": res.meter.uplink_bytes / rounds,
           "downlink_bytes_per_round": res.meter.downlink_bytes / rounds,
           "accuracy": float(res.accuracy)}
    if res.flower is not None:
        by = res.flower["bytes"]
        row["uplink_flower_bytes_per_round"] = sum(v["flower"] for v in by["uplink"].values()) \
            / rounds
        row["downlink_flower_bytes_per_round"] = sum(v["flower"] for v in by["downlink"].values()) \
            / rounds
    return row


def run(args) -> int:
    import numpy as np

    from ..data import VerticalData, make_synthetic
    from ..errors import InputError
    from ..flower import require_flwr

    for name in ("rounds", "deploy_rounds", "n", "d"):
        v = getattr(args, name)
        if v < 2:
            raise InputError(f"--{name.replace('_', '-')} must be at least 2, got {v}")
    require_flwr("flower-sim")
    A, y, _ = make_synthetic(n=args.n, d=args.d, density=0.05, seed=0)
    data = VerticalData.from_arrays(A, y, "balanced", parties=4)
    rows, ref = [], None
    backends = [("inprocess", args.rounds), ("flower-sim", args.rounds)]
    if not args.skip_deploy:
        backends.append(("flower", args.deploy_rounds))
    for backend, rounds in backends:
        row, sol = _vertical(backend, data, rounds)
        if backend == "inprocess":
            ref = {rounds: sol}
        elif rounds in ref:
            row["same_model_as_inprocess"] = bool(np.array_equal(sol.x, ref[rounds].x))
        rows.append(row)
    print(f"vertical DP-BCFW-AS, 4 parties, n={args.n}, d={args.d}:")
    print(f"{'backend':<11} {'s/round':>8} {'start-up s':>10} {'up B/round':>11} "
          f"{'Flower up B/round':>17} {'down B/round':>12} {'Flower down':>11}")
    for r in rows:
        print(f"{r['backend']:<11} {r['seconds_per_round']:8.3f} {r['startup_seconds']:10.2f} "
              f"{r['uplink_frame_bytes_per_round']:11.0f} "
              f"{r.get('uplink_flower_bytes_per_round', float('nan')):17.0f} "
              f"{r['downlink_frame_bytes_per_round']:12.0f} "
              f"{r.get('downlink_flower_bytes_per_round', float('nan')):11.0f}")
    out = {"vertical": rows}
    hz = [h for h in (_horizontal(b, args.rounds) for b in ("inprocess", "flower-sim"))
          if h is not None]
    if hz:
        out["horizontal"] = hz
        print("horizontal FedAvg, 100 clients (digits):")
        print(f"{'backend':<11} {'s/round':>8} {'start-up s':>10} {'up B/round':>11} "
              f"{'Flower up B/round':>17} {'down B/round':>12} {'Flower down':>11} {'acc':>6}")
        for r in hz:
            print(f"{r['backend']:<11} {r['seconds_per_round']:8.3f} "
                  f"{r['startup_seconds']:10.2f} {r['uplink_bytes_per_round']:11.0f} "
                  f"{r.get('uplink_flower_bytes_per_round', float('nan')):17.0f} "
                  f"{r['downlink_bytes_per_round']:12.0f} "
                  f"{r.get('downlink_flower_bytes_per_round', float('nan')):11.0f} "
                  f"{r['accuracy']:6.3f}")
    else:
        print("horizontal: needs torch (the torch extra)")
    if getattr(args, "json", None):
        from . import write_json

        write_json(args.json, out)
    return 0
