"""The logistic paths of dp-bcfw-secure as the number of columns grows: ssp (the default) and glm.

The default's case (docs/vertical_results.md, "The logistic default is the ssp path") rests on eight real
tables with 3 to 85 columns.  The ssp path releases all d (d + 1) / 2 second moments, and its
products grow with n d^2; the glm path's noise is on d scores a round and its Frank-Wolfe
vertices suit a sparse truth.  This script measures both on seeded synthetic classification
data (``vflpriv.data.synthetic``: a sparse true model, labels the signs of its responses), the
same rows and splits for both, held-out AUC and framed bytes:

    n = 20000 rows, K = 4 parties, density 0.3, 5% of the coefficients nonzero,
    d in {50, 200, 800, 2000}, eps in {1, 4} (delta 1e-6), seeds 0 and 1, test fraction 0.2,
    declared bound B_a = 3 (N(0, 1) entries: 0.27% clipped), B_y = 1, each path with its
    defaults (glm: 200 rounds, eta by the public rule).

Writes docs/logistic_paths_by_dimension.json (about 8 minutes here).

    python docs/logistic_paths_by_dimension.py
"""
import json
import os
import time

import numpy as np
from sklearn.metrics import roc_auc_score

from vflpriv.data import VerticalData, make_synthetic
from vflpriv.vertical import solve
from vflpriv.vertical.metrics import split_rows

N, K, DENSITY, SPARSITY = 20000, 4, 0.3, 0.05
#: the declared feature bound: the generator's entries are N(0, 1), 0.27% of them beyond 3
BOUND = 3.0
DIMS, EPSILONS, SEEDS, PATHS = (50, 200, 800, 2000), (1.0, 4.0), (0, 1), ("ssp", "glm")
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                   "logistic_paths_by_dimension.json")


def main():
    rows, t_start = [], time.perf_counter()
    for d in DIMS:
        for seed in SEEDS:
            A, y, _ = make_synthetic(n=N, d=d, density=DENSITY, sparsity=SPARSITY, seed=seed)
            y = np.where(y >= 0, 1.0, -1.0)
            train, test = split_rows(N, 0.2, seed)
            data = VerticalData.from_arrays(A[train], y[train], "balanced", parties=K)
            for eps in EPSILONS:
                for path in PATHS:
                    t0 = time.perf_counter()
                    sol = solve(data, algorithm="dp-bcfw-secure", loss="logistic",
                                label_party=0, epsilon=eps, delta=1e-6, feature_bound=BOUND,
                                label_bound=1.0, iterations=200, seed=seed,
                                logistic_path=path)
                    margin = np.asarray(A[test] @ sol.x).ravel() + (sol.intercept or 0.0)
                    rows.append({
                        "d": d, "seed": seed, "epsilon": eps, "path": path,
                        "test_auc": float(roc_auc_score(y[test] > 0, margin)),
                        "support_size": int(np.count_nonzero(sol.x)),
                        "bytes": int(sum(sol.uplink_framed) + sum(sol.downlink_framed)),
                        "epsilon_spent": float(sol.privacy["epsilon_spent"]["best"]),
                        "seconds": round(time.perf_counter() - t0, 2)})
                    r = rows[-1]
                    print(f"d {d:5d} seed {seed} eps {eps:g} {path}: AUC {r['test_auc']:.4f} "
                          f"{r['bytes'] / 1e9:.2f} GB {r['seconds']:.1f} s", flush=True)
    summary = []
    for d in DIMS:
        for eps in EPSILONS:
            cell = {"d": d, "epsilon": eps}
            for path in PATHS:
                sel = [r for r in rows if (r["d"], r["epsilon"], r["path"]) == (d, eps, path)]
                cell[f"{path}_auc"] = float(np.mean([r["test_auc"] for r in sel]))
                cell[f"{path}_bytes"] = float(np.mean([r["bytes"] for r in sel]))
                cell[f"{path}_seconds"] = float(np.mean([r["seconds"] for r in sel]))
            summary.append(cell)
    doc = {"command": "python docs/logistic_paths_by_dimension.py", "n": N, "K": K,
           "density": DENSITY, "sparsity": SPARSITY, "seeds": list(SEEDS),
           "seconds": round(time.perf_counter() - t_start, 1), "rows": rows,
           "summary": summary}
    with open(OUT, "w") as fh:
        json.dump(doc, fh, indent=1)
        fh.write("\n")
    for c in summary:
        print(f"d {c['d']:5d} eps {c['epsilon']:g}: ssp {c['ssp_auc']:.4f} glm {c['glm_auc']:.4f}"
              f"  bytes {c['ssp_bytes'] / 1e9:.2f} / {c['glm_bytes'] / 1e9:.2f} GB  "
              f"seconds {c['ssp_seconds']:.1f} / {c['glm_seconds']:.1f}")


if __name__ == "__main__":
    main()
