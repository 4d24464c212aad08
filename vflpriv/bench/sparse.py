"""``vflpriv bench sparse``: rounds per second of every sparse method at 100 clients.

Two data shapes:

* d = 1000 dense: 000's synthetic(0.5, 0.5), 100 clients x 100 rows (DenseShards: the clients of a
  round are one batched array).  Each method runs ``--rounds`` rounds vectorized and again as a
  plain per-client Python loop over the same code (``run(vectorize=False)``); the ratio is the
  gain of batching the clients.
* d = 100000 sparse: 100 clients x 100 rows with 100 nonzeros each (density 0.001), CSR per
  client (SparseShards, which loops over the clients by construction, so only rounds/s).

Settings: K = 3 local steps, minibatch 10, tau = 200 (Fed-HT family, FedMid, FedDualAvg, FedAvg)
and tau = 10 (FedGradMP), messages serialized and metered as in a real run; the objective is
evaluated only after the last round (``evaluate=False``), so the figures are the rounds alone.
The JSON records the machine's 1-minute load average before and after (``load_average``) beside
its CPU count: on a shared machine the figures scale with what else runs.
"""
from __future__ import annotations

import os
import time

import numpy as np

ALGS = ("fediterht", "fedht", "diht", "fedgradmp", "fedgradmp-inexact", "fedmid", "feddualavg",
        "fedavg")


def add_arguments(p):
    p.add_argument("--rounds", type=int, default=10, help="rounds per timing (default 10)")
    p.add_argument("--skip-sparse", action="store_true", help="skip the d = 100000 case")


def _time(strategy_fn, shards, rounds, vectorize, batch=10):
    from ..sparse import BatchSchedule, run

    best = np.inf
    for _ in range(2):
        t0 = time.perf_counter()
        run(strategy_fn(), shards, rounds=rounds, lr=1e-4, batch=BatchSchedule(batch), seed=0,
            evaluate=False, vectorize=vectorize)
        best = min(best, time.perf_counter() - t0)
    return rounds / best


def _strategy(name):
    from ..sparse import make_strategy

    tau = 10 if name.startswith("fedgradmp") else 200
    return lambda: make_strategy(name, tau, 1 if name == "diht" else 3)


def sparse_data(clients=100, rows=100, d=100_000, nnz=100, seed=0):
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    x = np.zeros(d)
    x[rng.choice(d, 10, replace=False)] = 1.0
    parts = []
    for _ in range(clients):
        cols = np.sort(rng.random((rows, d)).argpartition(nnz, axis=1)[:, :nnz], axis=1) \
            if d <= 10_000 else np.sort(rng.integers(0, d, (rows, nnz)), axis=1)
        indptr = np.arange(0, rows * nnz + 1, nnz)
        Z = sp.csr_matrix((rng.standard_normal(rows * nnz), cols.ravel(), indptr), shape=(rows, d))
        Z.sum_duplicates()
        parts.append((Z, Z @ x))
    return parts


def run(args) -> int:
    from ..sparse.data import synthetic_000
    from ..sparse.losses import SquaredLoss
    from ..sparse.shards import DenseShards, SparseShards
    from . import write_json

    rounds = args.rounds
    if rounds < 1:
        raise ValueError(f"--rounds must be >= 1, got {rounds}")
    load0 = os.getloadavg()[0]
    fd = synthetic_000(clients=100, d=1000, samples=100, seed=0)
    dense = DenseShards(fd.parts, SquaredLoss())
    rows = []
    print("d = 1000 dense, 100 clients x 100 rows, K = 3, batch 10 (rounds/s; higher is better)")
    print(f"{'algorithm':20s} {'vectorized':>11s} {'per-client loop':>16s} {'ratio':>6s} "
          f"{'ms/round':>9s}")
    for name in ALGS:
        v = _time(_strategy(name), dense, rounds, True)
        lp = _time(_strategy(name), dense, rounds, False)
        rows.append({"case": "d=1000 dense", "algorithm": name, "rounds_per_s": v,
                     "loop_rounds_per_s": lp, "ratio": v / lp, "ms_per_round": 1e3 / v})
        print(f"{name:20s} {v:11.1f} {lp:16.1f} {v / lp:6.2f} {1e3 / v:9.2f}", flush=True)
    if not args.skip_sparse:
        sparse = SparseShards(sparse_data(), SquaredLoss())
        print("\nd = 100000 sparse (CSR, 100 nonzeros per row), 100 clients x 100 rows")
        for name in ALGS:
            if name in ("fedht", "diht", "feddualavg", "fedavg"):
                pass      # dense replies of 100000 floats per client: timed as well
            v = _time(_strategy(name), sparse, max(2, rounds // 2), True)
            rows.append({"case": "d=100000 sparse", "algorithm": name, "rounds_per_s": v,
                         "ms_per_round": 1e3 / v})
            print(f"{name:20s} {v:11.1f} rounds/s {1e3 / v:9.1f} ms/round", flush=True)
    write_json(args.json, {"rounds": rounds, "results": rows, "cpus": os.cpu_count(),
                           "load_average": {"before": load0, "after": os.getloadavg()[0]}})
    return 0
