"""What tuning could buy the ssp path (``--logistic-path ssp``): a simulation study, not a feature.

For each table, epsilon in {0.5, 1, 4} and seeds 0-9 (the peers' split: ``split_rows(n, 0.2,
seed)``), the released statistics M of the training rows are simulated centrally: the rows
prepared as the protocol prepares them (entries clipped to [-B_a, B_a], each party's rows to
l2 norm C_k, scaled), M = sum z z^T plus Gaussian noise in the svec layout of ``ssp.py``
(sigma on the diagonal, sigma / sqrt 2 off it; the protocol's ring noise is the exact discrete
Gaussian of the same sigma, so this is the continuous stand-in), sigma from the accountant
(``ssp.calibrate_sigma``).  Test AUC of:

* ``rule``: the shipped defaults (C_k = B_a p_k^(1/4), one scale s, ridge sigma sqrt(d + 2));
* ``split_select``: the ridge chosen among ``MULTS`` x the rule by a DP validation loss: 20% of
  the training rows held out, the fit part's and the held-out part's M released at the same
  sigma (disjoint rows: the same epsilon as one release), each candidate scored by the
  quadratic loss written in the held-out M, the winner refitted on the fit part;
* ``sure_select``: the ridge chosen by an unbiased (Stein) estimate of the in-sample quadratic
  loss computed from the one released M (post-processing, no split, no extra epsilon);
* ``oracle_ridge``: the best ridge of ``MULTS`` chosen on the test rows: an upper bound on what
  any ridge selection can reach (not private);
* ``rule_per_party``: the rule's clips, but each party's rows scaled to norm sqrt(2 / K) by its
  own C_k (s_k = sqrt((1 + B_y^2) / K) / C_k) instead of one s for all;
* ``clip_q90``: the rule's fit with C_k = the 90% quantile of party k's row norms (exact, not
  private: what a private quantile could reach), one scale s;
* ``clip_q90_per_party``: the same clips, each party scaled to sqrt(2 / K) by its own C_k;
* ``clip_dp_q90``: the private clips below with one scale s;
* ``clip_dp_q90_per_party``: the clips chosen privately (Gumbel report-noisy-max over a
  geometric grid of 33 clips from B_a sqrt(p_k) down by 2^(1/4) steps, score
  -|#{||a_r|| <= c} - 0.9 n|, sensitivity 1, epsilon_q = epsilon / (10 sqrt K) per party),
  sigma recalibrated so that the K selections and the release together spend epsilon.

Run: ``python docs/ssp_tuning.py`` (about one minute); writes docs/ssp_tuning.json.
"""
from __future__ import annotations

import json
import math
import sys
import time

import numpy as np
from sklearn.metrics import roc_auc_score

TABLES = ("flights", "caravan", "default", "oj", "fair", "anes96")
EPSILONS = (0.5, 1.0, 4.0)
SEEDS = tuple(range(10))
DELTA = 1e-6
MULTS = (0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 64.0)
QUANTILE = 0.9
SYSTEMS = ("rule", "split_select", "sure_select", "oracle_ridge", "rule_per_party", "clip_q90",
           "clip_q90_per_party", "clip_dp_q90", "clip_dp_q90_per_party")


def prepared(A, blocks, Ba, clips, scales):
    A = np.clip(A, -Ba, Ba)
    out = np.empty_like(A)
    for b, C, s in zip(blocks, clips, scales):
        X = A[:, b]
        f = np.minimum(1.0, C / np.maximum(np.linalg.norm(X, axis=1), 1e-300))
        out[:, b] = X * f[:, None] * s
    return out


def noisy_m(Z, y, sigma, rng):
    n = Z.shape[0]
    W = np.hstack([Z, np.ones((n, 1)), y[:, None]])
    M = W.T @ W
    D = M.shape[0]
    E = np.triu(rng.normal(0.0, sigma / math.sqrt(2.0), (D, D)), 1)
    E = E + E.T
    E[np.diag_indices(D)] = rng.normal(0.0, sigma, D)
    M = M + E
    M[D - 2, D - 2] = n                  # 1^T 1 = n is public, not released
    return M


def ridge_fit(M, lam):
    """ssp.fit without an l1 ball: w = 2 (G+ + lam I)^-1 h, and P = (G+ + lam I)^-1."""
    d = M.shape[0] - 2
    ev, V = np.linalg.eigh((M[:d + 1, :d + 1] + M[:d + 1, :d + 1].T) / 2.0)
    ev = np.maximum(ev, 0.0) + lam
    P = (V / ev) @ V.T
    return 2.0 * P @ M[:d + 1, d + 1], P


def quad_loss(M, w):
    d = M.shape[0] - 2
    return float(w @ M[:d + 1, :d + 1] @ w - 4.0 * M[:d + 1, d + 1] @ w)


def sure(M, w, P, sigma):
    """E[true loss] = E[plug-in loss] + sigma^2 (tr P ||w||^2 + w^T P w - 2 P_cc w_c^2)
    + 4 sigma^2 tr P (Stein's lemma on the svec noise; c the intercept's exact coordinate)."""
    c = M.shape[0] - 2
    corr = sigma ** 2 * (np.trace(P) * (w @ w) + w @ P @ w - 2.0 * P[c, c] * w[c] ** 2)
    return quad_loss(M, w) + corr + 4.0 * sigma ** 2 * np.trace(P)


def dp_quantile(norms, top, eps_q, rng):
    grid = top * 2.0 ** (-np.arange(33) / 4.0)
    below = np.searchsorted(np.sort(norms), grid, side="right")     # #{||a_r|| <= c}
    score = -np.abs(below - QUANTILE * norms.size)
    return float(grid[int(np.argmax(score + rng.gumbel(0.0, 2.0 / eps_q, grid.size)))])


def one_table(name):
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
    out = []
    for eps in EPSILONS:
        sigma = S.calibrate_sigma(eps, DELTA, 1.0)
        eps_q = eps / (10.0 * math.sqrt(K))

        def event(s):
            return Composed(tuple([ReportNoisyMax("gumbel", 2.0 / eps_q, 1.0,
                                                  neighboring=REPLACE_ONE)] * K
                                  + [DiscreteGaussian(s, S.sensitivity(1.0),
                                                      neighboring=REPLACE_ONE)]))

        sigma_q = float(calibrate(event, eps, DELTA, guess=4.0 * S.sensitivity(1.0),
                                  accountant="rdp").value)
        for seed in SEEDS:
            tr, te = split_rows(A.shape[0], 0.2, seed)
            At, y, yt = A[tr], y_all[tr], y_all[te]

            def auc(w, scales):
                x = np.zeros(d)
                for b, s in zip(blocks, scales):
                    x[b] = w[b] * s
                return float(roc_auc_score(yt, A[te] @ x + w[d]))

            def release(clips, scales, sg, rows=None, stream=0):
                Z = prepared(At if rows is None else At[rows], blocks, Ba, clips, scales)
                yy = y if rows is None else y[rows]
                return noisy_m(Z, yy, sg, np.random.default_rng([seed, stream, int(eps * 8)]))

            lam0 = S.ridge(sigma, d)
            s_rule = [S.scale(1.0, rule)] * K
            M = release(rule, s_rule, sigma)
            row = {"table": name, "epsilon": eps, "seed": seed}
            fits = [ridge_fit(M, m * lam0) for m in MULTS]
            aucs = [auc(w, s_rule) for w, _ in fits]
            row["rule"] = aucs[MULTS.index(1.0)]
            row["oracle_ridge"] = max(aucs)
            sures = [sure(M, w, P, sigma) for w, P in fits]
            row["sure_select"] = aucs[int(np.argmin(sures))]
            row["sure_multiplier"] = MULTS[int(np.argmin(sures))]
            perm = np.random.default_rng([seed, 99]).permutation(len(tr))
            held, fit_rows = perm[:len(tr) // 5], perm[len(tr) // 5:]
            Mf = release(rule, s_rule, sigma, fit_rows, 1)
            Mv = release(rule, s_rule, sigma, held, 2)
            val = [quad_loss(Mv, ridge_fit(Mf, m * lam0)[0]) for m in MULTS]
            best = MULTS[int(np.argmin(val))]
            row["split_select"] = auc(ridge_fit(Mf, best * lam0)[0], s_rule)
            row["split_multiplier"] = best
            s_rp = [math.sqrt(2.0 / K) / c for c in rule]
            row["rule_per_party"] = auc(ridge_fit(release(rule, s_rp, sigma), lam0)[0], s_rp)
            norms = [np.linalg.norm(np.clip(At[:, b], -Ba, Ba), axis=1) for b in blocks]
            q90 = [max(float(np.quantile(v, QUANTILE)), 1e-6) for v in norms]
            s_q = [S.scale(1.0, q90)] * K
            row["clip_q90"] = auc(ridge_fit(release(q90, s_q, sigma), lam0)[0], s_q)
            s_pp = [math.sqrt(2.0 / K) / c for c in q90]
            row["clip_q90_per_party"] = auc(ridge_fit(release(q90, s_pp, sigma), lam0)[0], s_pp)
            qrng = np.random.default_rng([seed, 7, int(eps * 8)])
            dpc = [dp_quantile(v, Ba * math.sqrt(p), eps_q, qrng) for v, p in zip(norms, sizes)]
            s_dg = [S.scale(1.0, dpc)] * K
            row["clip_dp_q90"] = auc(
                ridge_fit(release(dpc, s_dg, sigma_q), S.ridge(sigma_q, d))[0], s_dg)
            s_dp = [math.sqrt(2.0 / K) / c for c in dpc]
            row["clip_dp_q90_per_party"] = auc(
                ridge_fit(release(dpc, s_dp, sigma_q), S.ridge(sigma_q, d))[0], s_dp)
            row["dp_clips"] = dpc
            row["sigma"], row["sigma_with_quantiles"] = sigma, sigma_q
            out.append(row)
        means = {s: np.mean([r[s] for r in out if r["epsilon"] == eps]) for s in SYSTEMS}
        print(f"{name} eps {eps:g}: " + " ".join(f"{s} {v:.3f}" for s, v in means.items()),
              flush=True)
    return out


def summarize(rows):
    """Mean and standard deviation over the seeds of every system, per (table, epsilon)."""
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
                entry[s + "_sd"] = round(float(v.std(ddof=1)), 4)
            out.append(entry)
    return out


def table_lines(summary, systems=SYSTEMS):
    """The markdown table of docs/ssp_tuning.md (tests/test_docs_ssp_tuning.py reads it back),
    or of another study's ``systems`` (docs/ssp_selection_fit.py)."""
    lines = ["| table | eps | " + " | ".join(systems) + " |",
             "|---|---|" + "---|" * len(systems)]
    for e in summary:
        lines.append(f"| {e['table']} | {e['epsilon']:g} | "
                     + " | ".join(f"{e[s]:.3f}" for s in systems) + " |")
    return lines


def main(path="docs/ssp_tuning.json"):
    t0 = time.time()
    rows = [r for name in TABLES for r in one_table(name)]
    summary = summarize(rows)
    with open(path, "w") as f:
        json.dump({"command": "python docs/ssp_tuning.py", "seeds": list(SEEDS), "delta": DELTA,
                   "multipliers": list(MULTS), "quantile": QUANTILE, "systems": list(SYSTEMS),
                   "seconds": round(time.time() - t0, 1), "summary": summary, "rows": rows},
                  f, indent=1)
    print("\n".join(table_lines(summary)))


if __name__ == "__main__":
    main(*sys.argv[1:])
