"""What selection and re-weighting could buy the shipped ssp fit: a simulation study, not a
feature (docs/ssp_selection_fit.md).

docs/ssp_tuning.py measured ridge selection, DP validation and private clips with the fit of
its time (the intercept inside the ridge).  This study repeats the parts that bear on issue 30's
item 2 with the shipped fit (``ssp.fit``: the intercept profiled out, the centered Gram's
eigenvalues floored at lambda = sigma sqrt(d + 2)), on all eleven tables of the peers benchmark,
and adds one question the earlier study did not ask: could the release put its noise elsewhere?

The released statistics are simulated as in docs/ssp_tuning.py: the rows prepared as the
protocol prepares them (entries clipped to [-B_a, B_a], party k's rows to l2 norm C_k, one scale
s), M = sum z z^T plus Gaussian noise in the svec layout (sigma on the diagonal, sigma / sqrt 2
off it), sigma from the accountant (``ssp.calibrate_sigma``; the protocol adds the exact discrete
Gaussian of the same sigma).  Systems, scored by test AUC on the peers' splits
(``split_rows(n, 0.2, seed)``):

* ``rule``: the shipped defaults (C_k = B_a p_k^(1/4), floor lambda);
* ``oracle_ridge``: the best floor of ``MULTS`` x lambda chosen on the test rows: the ceiling of
  any floor selection (not private);
* ``split_select``: the floor chosen by a DP validation loss: 20% of the training rows held out,
  the fit part's and the held-out part's M released at the same sigma (disjoint rows: together
  one release's epsilon), each floor of ``MULTS`` fitted on the fit part and scored by the
  quadratic loss written in the held-out M, the winner kept;
* ``clip_q90``: C_k = the exact 90% quantile of party k's row norms (not private: what a private
  quantile could reach at best);
* ``clip_dp_q90``: C_k chosen privately by each party on its own block: Gumbel report-noisy-max
  over 33 clips from B_a sqrt(p_k) down by 2^(1/4) steps, score -|#{||a_r|| <= c} - 0.9 n|
  (sensitivity 1 under replace-one), epsilon_q = 0.2 epsilon / K each, sigma recalibrated so that
  the K selections and the release together spend epsilon (RDP, ``Composed``);
* ``cross_weighted``: the release re-weighted towards the label column: the svec coordinates of
  the column sums sum a_r carry weight w_1 = 0.7 and those of sum y_r a_r weight
  w_y = sqrt(2 - w_1^2), the rest 1, the sensitivity recomputed (``weighted_sensitivity``: it
  rises by 3%, so the label column's noise falls by 16% and the sums' rises by 47%).

Run: ``python docs/ssp_selection_fit.py`` (a few minutes); writes docs/ssp_selection_fit.json.
"""
from __future__ import annotations

import json
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ssp_tuning import dp_quantile, prepared, quad_loss, table_lines as _table_lines  # noqa: E402

TABLES = ("flights", "caravan", "default", "oj", "fair", "anes96", "wage", "college",
          "carseats", "boston", "bikeshare")
EPSILONS = (0.5, 1.0)
SEEDS = tuple(range(20))
DELTA = 1e-6
MULTS = (0.25, 0.5, 1.0, 2.0, 4.0)
SELECT_SHARE = 0.2
W1 = 0.7
SYSTEMS = ("rule", "oracle_ridge", "split_select", "clip_q90", "clip_dp_q90", "cross_weighted")


def weighted_sensitivity(wG, w1, wy, w1y, S=2.0, grid=201):
    """max ||W o (z z^T - z' z'^T)||_F over the released svec coordinates, z = (u, 1, y) with
    ||u||^2 <= S and y = +-1, by brute force: the norms r = ||u||, r' = ||u'|| on a grid, the
    cosine c between u and u' at its two ends and at the stationary point of the (concave in c)
    objective, and y y' = +-1:

        wG^2 (r^4 + r'^4 - 2 r^2 r'^2 c^2) + 2 w1^2 (r^2 + r'^2 - 2 r r' c)
        + 2 wy^2 (r^2 + r'^2 - 2 e r r' c) + 2 w1y^2 (2 - 2 e)."""
    r = np.linspace(0.0, math.sqrt(S), grid)
    R, Rp = np.meshgrid(r, r, indexing="ij")
    best = 0.0
    for e in (1.0, -1.0):
        base = (wG ** 2 * (R ** 4 + Rp ** 4) + 2 * (w1 ** 2 + wy ** 2) * (R ** 2 + Rp ** 2)
                + 2 * w1y ** 2 * (2 - 2 * e))
        quad = 2 * wG ** 2 * R ** 2 * Rp ** 2
        lin = -4 * (w1 ** 2 + e * wy ** 2) * R * Rp
        stat = np.clip(lin / np.maximum(2 * quad, 1e-300), -1.0, 1.0)
        for c in (-1.0, 1.0, stat):
            best = max(best, float((base - quad * c ** 2 + lin * c).max()))
    return math.sqrt(best)


def noise(d, sig, rng, w=(1.0, 1.0, 1.0, 1.0)):
    """The svec noise of sigma ``sig`` on the weighted coordinates, in M's units (each block's
    noise divided by its weight ``w`` = (Gram, column sums, label column, label sum))."""
    wG, w1, wy, w1y = w
    E = np.zeros((d + 2, d + 2))
    G = np.triu(rng.normal(0.0, sig / wG / math.sqrt(2.0), (d, d)), 1)
    E[:d, :d] = G + G.T
    E[np.arange(d), np.arange(d)] = rng.normal(0.0, sig / wG, d)
    E[:d, d] = E[d, :d] = rng.normal(0.0, sig / w1 / math.sqrt(2.0), d)
    E[:d, d + 1] = E[d + 1, :d] = rng.normal(0.0, sig / wy / math.sqrt(2.0), d)
    E[d, d + 1] = E[d + 1, d] = rng.normal(0.0, sig / w1y / math.sqrt(2.0))
    return E


def moments(Z, y):
    n = Z.shape[0]
    W = np.hstack([Z, np.ones((n, 1)), y[:, None]])
    return W.T @ W


def one_table(name):
    from sklearn.metrics import roc_auc_score

    from accounting import REPLACE_ONE, Composed, DiscreteGaussian, ReportNoisyMax, calibrate
    from vflpriv.bench.tables import load_table
    from vflpriv.vertical.metrics import split_rows
    from vflpriv.vertical.secure.ssp import release as S
    from vflpriv.vertical.secure.defaults import default_row_clips

    t = load_table(name)
    blocks = [np.asarray(b) for b in t.blocks]
    Ba, K = float(t.feature_bound), len(blocks)
    sizes = [len(b) for b in blocks]
    A = np.asarray(t.A.todense() if hasattr(t.A, "todense") else t.A, dtype=np.float64)
    y_all = np.asarray(t.y, dtype=np.float64)
    d = A.shape[1]
    rule = default_row_clips(Ba, sizes)
    s_rule = S.scale(1.0, rule)
    w_cross = (1.0, W1, math.sqrt(2.0 - W1 ** 2), 1.0)
    ratio = weighted_sensitivity(*w_cross) / S.sensitivity(1.0)
    out = []
    for eps in EPSILONS:
        sigma = S.calibrate_sigma(eps, DELTA, 1.0)
        eps_q = SELECT_SHARE * eps / K

        def event(sg):
            return Composed(tuple([ReportNoisyMax("gumbel", 2.0 / eps_q, 1.0,
                                                  neighboring=REPLACE_ONE)] * K
                                  + [DiscreteGaussian(sg, S.sensitivity(1.0),
                                                      neighboring=REPLACE_ONE)]))

        sigma_q = float(calibrate(event, eps, DELTA, guess=4.0 * S.sensitivity(1.0),
                                  accountant="rdp").value)
        for seed in SEEDS:
            tr, te = split_rows(A.shape[0], 0.2, seed)
            At, y, yt = A[tr], y_all[tr], y_all[te]

            def rng(stream):
                return np.random.default_rng([seed, stream, int(eps * 8)])

            def fitted(M, lam, s):
                x, b, _ = S.fit(M, blocks, lam=lam)
                return x, b, float(roc_auc_score(yt, A[te] @ (x * s) + b))

            def released(clips, s, sg, rows=None, stream=0, w=(1.0, 1.0, 1.0, 1.0)):
                rows = slice(None) if rows is None else rows
                M = moments(prepared(At[rows], blocks, Ba, clips, [s] * K), y[rows])
                n = M[d, d]
                M = M + noise(d, sg, rng(stream), w)
                M[d, d] = n                       # 1^T 1 = n is public, not released
                return M

            lam = S.ridge(sigma, d)
            M = released(rule, s_rule, sigma)
            aucs = [fitted(M, m * lam, s_rule)[2] for m in MULTS]
            row = {"table": name, "epsilon": eps, "seed": seed,
                   "rule": aucs[MULTS.index(1.0)], "oracle_ridge": max(aucs)}
            perm = rng(99).permutation(len(tr))
            held, part = perm[:len(tr) // 5], perm[len(tr) // 5:]
            Mf = released(rule, s_rule, sigma, part, 1)
            Mv = released(rule, s_rule, sigma, held, 2)
            fits = [fitted(Mf, m * lam, s_rule) for m in MULTS]
            best = int(np.argmin([quad_loss(Mv, np.append(x, b)) for x, b, _ in fits]))
            row["split_select"], row["split_multiplier"] = fits[best][2], MULTS[best]
            norms = [np.linalg.norm(np.clip(At[:, b], -Ba, Ba), axis=1) for b in blocks]
            q90 = [max(float(np.quantile(v, 0.9)), 1e-6) for v in norms]
            s_q = S.scale(1.0, q90)
            row["clip_q90"] = fitted(released(q90, s_q, sigma), lam, s_q)[2]
            qrng = rng(7)
            dpc = [dp_quantile(v, Ba * math.sqrt(p), eps_q, qrng) for v, p in zip(norms, sizes)]
            s_dp = S.scale(1.0, dpc)
            row["clip_dp_q90"] = fitted(released(dpc, s_dp, sigma_q),
                                        S.ridge(sigma_q, d), s_dp)[2]
            row["dp_clips"] = dpc
            sg_w = sigma * ratio
            Mw = released(rule, s_rule, sg_w, w=w_cross)
            row["cross_weighted"] = fitted(Mw, S.ridge(sg_w, d), s_rule)[2]
            row["sigma"], row["sigma_with_selection"] = sigma, sigma_q
            out.append(row)
        cell = [r for r in out if r["epsilon"] == eps]
        print(f"{name} eps {eps:g}: " + " ".join(
            f"{s} {np.mean([r[s] for r in cell]):.3f}" for s in SYSTEMS), flush=True)
    return out


def summarize(rows):
    """Mean over the seeds, and the standard error of each system's mean paired difference
    with the rule, per (table, epsilon)."""
    out = []
    for name in TABLES:
        for eps in EPSILONS:
            cell = [r for r in rows if r["table"] == name and r["epsilon"] == eps]
            if not cell:
                continue
            entry = {"table": name, "epsilon": eps}
            for s in SYSTEMS:
                v = np.array([r[s] for r in cell])
                entry[s] = round(float(v.mean()), 4)
                diff = v - np.array([r["rule"] for r in cell])
                entry[s + "_diff_se"] = round(float(diff.std(ddof=1) / math.sqrt(len(v))), 4)
            out.append(entry)
    return out


def table_lines(summary):
    """The markdown table of docs/ssp_selection_fit.md (its test reads it back)."""
    return _table_lines(summary, SYSTEMS)


def main(path="docs/ssp_selection_fit.json"):
    t0 = time.time()
    rows = [r for name in TABLES for r in one_table(name)]
    summary = summarize(rows)
    with open(path, "w") as f:
        json.dump({"command": "python docs/ssp_selection_fit.py", "seeds": list(SEEDS),
                   "delta": DELTA, "multipliers": list(MULTS), "select_share": SELECT_SHARE,
                   "w1": W1, "systems": list(SYSTEMS), "seconds": round(time.time() - t0, 1),
                   "summary": summary, "rows": rows}, f, indent=1)
    print("\n".join(table_lines(summary)))


if __name__ == "__main__":
    main(*sys.argv[1:])
