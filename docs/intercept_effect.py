"""What the intercept does on held-out real tables: writes docs/intercept_effect.json.

    python docs/intercept_effect.py

On the tables of `vflpriv bench peers` (vflpriv/bench/tables.py: caravan, default, flights;
their public scaling and party blocks), with the rows split by
``vflpriv.vertical.metrics.split_rows(n, 0.2, seed)`` for seeds 0 and 1:

* non-private ``fw`` (T = 200) with the intercept on and ``eta="auto"`` (the public rule's
  radius), and without an intercept at eta = 1 per party (the defaults before the intercept and
  the scale rule); both with ``step="fw"`` (2 / (t + 2)), fw's only step when this was
  measured (its default is now the line search with a cross-validated radius: docs/vertical.md,
  "The non-private learner");
* DP-BCFW-AS (``dp-bcfw``, T = 200, eps 4, delta 1e-6, ``eta="auto"``) on default, seed 0,
  with and without the intercept: where its released features' noise dominates, the fitted
  intercept fits that noise.

Test AUC and log-loss on the held-out rows, the fitted intercept.  docs/vertical.md quotes it
(checked by tests/test_docs_numbers2.py).
"""
import json
import os
import time

import numpy as np
from sklearn.metrics import log_loss, roc_auc_score

from vflpriv.bench.tables import load_table
from vflpriv.data import VerticalData
from vflpriv.vertical import solve
from vflpriv.vertical.metrics import split_rows

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "intercept_effect.json")


def _fit(table, train, test, **kw):
    data = VerticalData.from_arrays(table.A[train], table.y[train], partition=table.blocks)
    t0 = time.perf_counter()
    sol = solve(data, loss="logistic", iterations=200, feature_bound=table.feature_bound, **kw)
    margin = table.A[test] @ np.asarray(sol.x, float) + (sol.intercept or 0.0)
    p = 1.0 / (1.0 + np.exp(-margin))
    y01 = (table.y[test] > 0).astype(int)
    return {"test_auc": float(roc_auc_score(y01, margin)),
            "test_log_loss": float(log_loss(y01, np.clip(p, 1e-12, 1 - 1e-12))),
            "intercept": None if sol.intercept is None else float(sol.intercept),
            "eta": float(sol.eta), "seconds": time.perf_counter() - t0}


def main():
    rows = []
    for name in ("caravan", "default", "flights"):
        table = load_table(name)
        for seed in (0, 1):
            train, test = split_rows(table.A.shape[0], 0.2, seed)
            for label, kw in (("fw, intercept, eta auto", dict(algorithm="fw", step="fw")),
                              ("fw, no intercept, eta 1",
                               dict(algorithm="fw", fit_intercept=False, eta=1.0, step="fw"))):
                rows.append({"table": name, "seed": seed, "system": label,
                             **_fit(table, train, test, **kw)})
    table = load_table("default")
    train, test = split_rows(table.A.shape[0], 0.2, 0)
    for label, intercept in (("dp-bcfw eps 4, intercept", True),
                             ("dp-bcfw eps 4, no intercept", False)):
        rows.append({"table": "default", "seed": 0, "system": label,
                     **_fit(table, train, test, algorithm="dp-bcfw", epsilon=4.0, delta=1e-6,
                            label_bound=1.0, fit_intercept=intercept, seed=0)})
    with open(OUT, "w") as fh:
        json.dump({"script": "docs/intercept_effect.py", "iterations": 200,
                   "test_fraction": 0.2, "rows": rows}, fh, indent=1)
        fh.write("\n")
    for r in rows:
        print(f"{r['table']:>8} {r['seed']} {r['system']:<30} AUC {r['test_auc']:.3f} "
              f"log-loss {r['test_log_loss']:.3f} b {r['intercept']}")


if __name__ == "__main__":
    main()
