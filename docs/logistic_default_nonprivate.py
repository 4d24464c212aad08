"""Without noise, which logistic path of dp-bcfw-secure ranks better: ssp or glm?

The default logistic path became ssp (docs/vertical_results.md, "The logistic default").  Its case was
measured under privacy; this script checks the non-private run too, where ssp fits the loss's
quadratic expansion from the exact statistics and glm runs 200 Frank-Wolfe rounds on the exact
derivatives over the public rule's l1 balls.  The eight tables of `vflpriv bench peers`, its
splits (`split_rows(n, 0.2, seed)`), seeds 0-2, each path with its defaults (label at party 0,
`eta="auto"`, intercept on).  Writes docs/logistic_default_nonprivate.json (about 30 s
here); tests/test_docs_logistic_default.py ties vertical.md's figures to it.

    python docs/logistic_default_nonprivate.py
"""
import json
import os
import time

import numpy as np
from sklearn.metrics import roc_auc_score

from vflpriv.bench.tables import load_table
from vflpriv.data import VerticalData
from vflpriv.vertical import solve
from vflpriv.vertical.metrics import split_rows

TABLES = ("flights", "caravan", "default", "oj", "fair", "anes96", "wage", "college")
SEEDS = (0, 1, 2)
PATHS = ("glm", "ssp")
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "logistic_default_nonprivate.json")


def main():
    rows, t_start = [], time.perf_counter()
    for name in TABLES:
        t = load_table(name)
        for seed in SEEDS:
            train, test = split_rows(len(t.y), 0.2, seed)
            data = VerticalData.from_arrays(t.A[train], t.y[train], partition=t.blocks)
            for path in PATHS:
                t0 = time.perf_counter()
                sol = solve(data, algorithm="dp-bcfw-secure", loss="logistic", label_party=0,
                            feature_bound=t.feature_bound, iterations=200, seed=seed,
                            logistic_path=path)
                margin = np.asarray(t.A[test] @ sol.x).ravel() + (sol.intercept or 0.0)
                rows.append({"table": name, "seed": seed, "path": path,
                             "test_auc": float(roc_auc_score(t.y[test] > 0, margin)),
                             "support_size": int(np.count_nonzero(sol.x)),
                             "seconds": round(time.perf_counter() - t0, 3)})
                print(f"{name:8s} seed {seed} {path}: AUC {rows[-1]['test_auc']:.4f}",
                      flush=True)
    summary = []
    for name in TABLES:
        auc = {p: float(np.mean([r["test_auc"] for r in rows
                                 if r["table"] == name and r["path"] == p])) for p in PATHS}
        summary.append({"table": name, **{f"{p}_auc": auc[p] for p in PATHS},
                        "ssp_minus_glm": auc["ssp"] - auc["glm"]})
    doc = {"command": "python docs/logistic_default_nonprivate.py", "seeds": list(SEEDS),
           "iterations": 200, "seconds": round(time.perf_counter() - t_start, 1),
           "rows": rows, "summary": summary}
    with open(OUT, "w") as fh:
        json.dump(doc, fh, indent=1)
        fh.write("\n")
    for s in summary:
        print(f"{s['table']:8s} glm {s['glm_auc']:.4f} ssp {s['ssp_auc']:.4f} "
              f"({s['ssp_minus_glm']:+.4f})")


if __name__ == "__main__":
    main()
