"""How sparse the ssp path's models are, and what an l1 ball costs it: writes docs/ssp_sparsity.json.

    python docs/ssp_sparsity.py        # about a minute

The eight tables of ``vflpriv bench peers``, the peers' splits (``split_rows(n, 0.2, seed)``),
seeds 0-9, eps 0.5 and 1 at delta 1e-6: ``solve(algorithm="dp-bcfw-secure", loss="logistic",
logistic_path="ssp")`` with the declared bounds, the label at party 0, and each party's l1 radius
either left out (``eta="auto"``: the ridge alone, the path's default) or set to the public rule's
radius eta_0 = 8 / (K B_a) (``vflpriv.vertical.scale``) times 1, 1/4 or 1/16.  Mean test AUC
and mean support (nonzero coefficients) over the seeds.  docs/vertical.md quotes it (checked by
tests/test_docs_numbers2.py).
"""
import json
import os
import time
import warnings

import numpy as np
from sklearn.metrics import roc_auc_score

from vflpriv.bench.tables import load_table
from vflpriv.data import VerticalData
from vflpriv.vertical import solve
from vflpriv.vertical.metrics import split_rows
from vflpriv.vertical.scale import auto_eta

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ssp_sparsity.json")
TABLES = ("flights", "caravan", "default", "oj", "fair", "anes96", "wage", "college")
RADII = (("none", None), ("rule", 1.0), ("rule/4", 0.25), ("rule/16", 1 / 16))


def main():
    warnings.simplefilter("ignore")
    rows, t0 = [], time.perf_counter()
    for name in TABLES:
        table = load_table(name)
        eta0, _ = auto_eta("logistic", len(table.blocks), table.feature_bound, 1.0)
        for eps in (0.5, 1.0):
            for label, mult in RADII:
                aucs, support = [], []
                for seed in range(10):
                    train, test = split_rows(table.A.shape[0], 0.2, seed)
                    data = VerticalData.from_arrays(table.A[train], table.y[train],
                                                    partition=table.blocks)
                    sol = solve(data, algorithm="dp-bcfw-secure", loss="logistic",
                                logistic_path="ssp", feature_bound=table.feature_bound,
                                label_bound=1.0, label_party=0, epsilon=eps, delta=1e-6,
                                seed=seed, eta="auto" if mult is None else mult * eta0)
                    x = np.asarray(sol.x, float)
                    aucs.append(float(roc_auc_score(table.y[test],
                                                    table.A[test] @ x + (sol.intercept or 0.0))))
                    support.append(int(np.count_nonzero(x)))
                rows.append({"table": name, "epsilon": eps, "radius": label,
                             "eta": None if mult is None else mult * eta0,
                             "test_auc": float(np.mean(aucs)), "support": float(np.mean(support)),
                             "columns": int(table.A.shape[1]), "aucs": aucs})
                print(f"{name} eps {eps:g} {label:>7}: AUC {rows[-1]['test_auc']:.3f}, support "
                      f"{rows[-1]['support']:.1f} of {table.A.shape[1]}", flush=True)
    with open(OUT, "w") as fh:
        json.dump({"command": "python docs/ssp_sparsity.py", "seeds": list(range(10)),
                   "delta": 1e-6, "seconds": time.perf_counter() - t0, "rows": rows}, fh,
                  indent=1)


if __name__ == "__main__":
    main()
