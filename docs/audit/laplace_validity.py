"""The Laplace validity table of docs/audit.md: the threshold-test lower bound on Laplace with
epsilon = 1 (sensitivity 1, scale 1; samples Laplace(0, 1) against Laplace(1, 1)), confidence
0.95, methods "split" and "bonferroni" (200 thresholds, 10 % pilot), over 100 seeds at 1e4 and
1e5 samples per side and 10 at 1e6.

    python docs/audit/laplace_validity.py docs/audit/laplace_validity.json
"""
import json
import sys

import numpy as np

from accounting.audit import audit_samples

SIZES = {10 ** 4: 100, 10 ** 5: 100, 10 ** 6: 10}


def main(out):
    rows = []
    for n, seeds in SIZES.items():
        for method in ("split", "bonferroni"):
            bounds = []
            for seed in range(seeds):
                rng = np.random.default_rng(seed)
                d0, d1 = rng.laplace(0.0, 1.0, n), rng.laplace(1.0, 1.0, n)
                bounds.append(audit_samples(d0, d1, 0.0, 0.95, method=method, thresholds=200,
                                            pilot_fraction=0.1, seed=seed).epsilon)
            rows.append({"samples": n, "method": method, "seeds": seeds, "bounds": bounds})
    doc = {"mechanism": "laplace", "epsilon": 1.0, "confidence": 0.95,
           "command": "python docs/audit/laplace_validity.py docs/audit/laplace_validity.json",
           "rows": rows}
    with open(out, "w") as fh:
        json.dump(doc, fh, indent=1)
        fh.write("\n")
    for r in rows:
        b = r["bounds"]
        print(r["samples"], r["method"], f"{np.mean(b):.3f} [{min(b):.3f}, {max(b):.3f}]",
              "above 1:", sum(x > 1 for x in b))


if __name__ == "__main__":
    main(sys.argv[1])
