"""The ssp fit with the intercept unpenalized, against the fit it replaced: a simulation study.

The released statistics M of the training rows are simulated as in docs/ssp_tuning.py (the rows
prepared as the protocol prepares them with the shipped row clips and scale, M = sum z z^T plus
Gaussian noise in the svec layout, sigma from the accountant; the protocol's ring noise is the
exact discrete Gaussian of the same sigma).  From the same M, three post-processing fits (none
costs privacy), scored by test AUC on the peers' splits (``split_rows(n, 0.2, seed)``):

* ``earlier``: the fit shipped before: (G+ + lambda I)^-1 2h over w = (x, b), G's eigenvalues
  floored at 0, lambda = sigma sqrt(d + 2) on every coordinate, the intercept's included;
* ``centered``: the intercept profiled out (unpenalized), the centered Gram's eigenvalues
  floored at 0 and shifted by lambda (only the intercept leaves the ridge);
* ``shipped``: ``ssp.fit`` as shipped: the intercept unpenalized and the centered Gram's
  eigenvalues raised to at least lambda (the floor replaces the shift).

Tables: the eight of docs/peers_default.md, then carseats, boston and bikeshare, which were
defined before any fit was run on them and measured once (vflpriv/bench/tables.py).

Run: ``python docs/ssp_intercept_fit.py`` (about two minutes); writes
docs/ssp_intercept_fit.json.
"""
from __future__ import annotations

import json
import math
import os
import sys
import time

import numpy as np

SEEN = ("flights", "caravan", "default", "oj", "fair", "anes96", "wage", "college")
FRESH = ("carseats", "boston", "bikeshare")
EPSILONS = (0.5, 1.0, 4.0)
SEEDS = tuple(range(10))
DELTA = 1e-6
FITS = ("earlier", "centered", "shipped")


def centered_shift(M, lam):
    """The intercept profiled out, the centered Gram floored at 0 and shifted by ``lam``."""
    d = M.shape[0] - 2
    n, g = M[d, d], M[:d, d]
    C = M[:d, :d] - np.outer(g, g) / n
    c = 2.0 * (M[:d, d + 1] - g * M[d, d + 1] / n)
    ev, V = np.linalg.eigh((C + C.T) / 2.0)
    x = V @ ((V.T @ c) / (np.maximum(ev, 0.0) + lam))
    return x, (2.0 * M[d, d + 1] - g @ x) / n


def one_table(name):
    from sklearn.metrics import roc_auc_score

    from vflpriv.bench.tables import load_table
    from vflpriv.vertical.metrics import split_rows
    from vflpriv.vertical.secure.ssp import release as S
    from vflpriv.vertical.secure.defaults import default_row_clips

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from ssp_tuning import noisy_m, prepared, ridge_fit

    t = load_table(name)
    blocks = [np.asarray(b) for b in t.blocks]
    Ba, K = float(t.feature_bound), len(blocks)
    A = np.asarray(t.A, dtype=np.float64)
    y_all = np.asarray(t.y, dtype=np.float64)
    d = A.shape[1]
    clips = default_row_clips(Ba, [len(b) for b in blocks])
    s = S.scale(1.0, clips)
    out = []
    for eps in EPSILONS:
        sigma = S.calibrate_sigma(eps, DELTA, 1.0)
        lam = S.ridge(sigma, d)
        for seed in SEEDS:
            tr, te = split_rows(A.shape[0], 0.2, seed)
            Z = prepared(A[tr], blocks, Ba, clips, [s] * K)
            M = noisy_m(Z, y_all[tr], sigma, np.random.default_rng([seed, 0, int(eps * 8)]))

            def auc(x, b):
                return float(roc_auc_score(y_all[te], A[te] @ (s * np.asarray(x)) + b))

            w = ridge_fit(M, lam)[0]
            x, b, _ = S.fit(M, [np.arange(d)], lam=lam)
            out.append({"table": name, "epsilon": eps, "seed": seed, "sigma": sigma,
                        "earlier": auc(w[:d], w[d]), "centered": auc(*centered_shift(M, lam)),
                        "shipped": auc(x, b)})
        cell = [r for r in out if r["epsilon"] == eps]
        print(f"{name} eps {eps:g}: " + " ".join(
            f"{f} {np.mean([r[f] for r in cell]):.3f}" for f in FITS), flush=True)
    return out


def summarize(rows):
    out = []
    for name in SEEN + FRESH:
        for eps in EPSILONS:
            cell = [r for r in rows if r["table"] == name and r["epsilon"] == eps]
            row = {"table": name, "epsilon": eps, "fresh": name in FRESH}
            for f in FITS:
                v = [r[f] for r in cell]
                row[f], row[f + "_sd"] = float(np.mean(v)), float(np.std(v, ddof=1))
            row["shipped_minus_earlier"] = row["shipped"] - row["earlier"]
            out.append(row)
    return out


def main():
    t0 = time.perf_counter()
    rows = [r for name in SEEN + FRESH for r in one_table(name)]
    doc = {"command": "python docs/ssp_intercept_fit.py", "seeds": list(SEEDS), "delta": DELTA,
           "fits": list(FITS), "seen": list(SEEN), "fresh": list(FRESH),
           "seconds": time.perf_counter() - t0, "summary": summarize(rows), "rows": rows}
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ssp_intercept_fit.json")
    with open(path, "w") as fh:
        json.dump(doc, fh, indent=1)
    for r in doc["summary"]:
        print(f"| {r['table']} | {r['epsilon']:g} | {r['earlier']:.3f} | {r['centered']:.3f} | "
              f"{r['shipped']:.3f} | {r['shipped_minus_earlier']:+.3f} |")


if __name__ == "__main__":
    main()
