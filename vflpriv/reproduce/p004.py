"""Paper 004 (DP-BCFW-AS), Figs. 1-6, on the paper's synthetic generator (Section V).

Every run is ``vflpriv.vertical.solve`` on ``make_synthetic`` data split among K parties
("balanced"), one run per point and seed (the seed draws the data and the run).  Private runs use the settings of ``vflpriv bench
utility``: bounds B_a = B_y = 1 (data clipped), Gumbel report-noisy-max, derivative clip 1,
the RDP accountant's calibration, delta = 1/n (the paper's Fig. 7 setting; it states none for
Figs. 3-6).  The paper's epsilon for Figs. 3-5 is not stated; we use epsilon = 1.
The paper plots the training loss; so do we (f = (1/2n)||Ax - y||^2 on the clipped data).
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from . import Claim, Outcome, Panel

PRIVATE = dict(feature_bound=1.0, label_bound=1.0, rnm="gumbel", derivative_clip=1.0)


def _data(n, d, density, sparsity, K, seed=0):
    from ..data import VerticalData, make_synthetic

    A, y, _ = make_synthetic(n=n, d=d, density=density, sparsity=sparsity, seed=seed)
    return VerticalData.from_arrays(A, y, "balanced", parties=K)


def _solve(data, algorithm, T, epsilon=math.inf, seed=0, **kw):
    from ..vertical import solve
    from ..vertical.privacy import HopelessNoiseWarning

    # the paper's problem: eta = 1 per party and no intercept (paper 004 fits none), whatever
    # the library's defaults (eta auto, an intercept for classification losses)
    args = dict(algorithm=algorithm, iterations=T, seed=seed, eta=1.0, fit_intercept=False)
    if algorithm == "fw":
        args["step"] = "fw"             # the paper's FW: 2 / (t + 2), not the line search
    if math.isfinite(epsilon):
        args.update(PRIVATE, epsilon=epsilon, delta=1.0 / data.n)
        if algorithm == "dp-bcfw-secure":
            args.pop("derivative_clip")
            args.update(row_clip=4.0, max_features=10)
    args.update(kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", HopelessNoiseWarning)   # the verdict is in the table
        return solve(data, **args)


def _curve(sol):
    ys = [sol.initial_objective] + list(sol.objective)
    return list(range(len(ys))), ys


def _f(v):
    return f"{v:.4g}"


def _margin(values):
    """min_j (values[j+1] - values[j]): > 0 iff ``values`` is strictly increasing."""
    return min(b - a for a, b in zip(values, values[1:]))


def fig1(fast, seed=0):
    # Paper: d = 10000, tau-nice with tau = 4000 (p = 0.4), (K = 2, tau)-distributed (p_min 0.16);
    # a 3 x 3 grid of feature density x variable sparsity.  Fast: one panel, smaller problem.
    n, d, T = (500, 1000, 60) if fast else (2000, 10000, 200)
    grid = [(0.05, 0.05)] if fast else [(0.1, 0.1), (0.01, 0.01), (0.1, 0.01), (0.01, 0.1)]
    K = 2
    samplings = {"elementary": "elementary", "tau-nice": f"nice:{int(0.4 * d)}",
                 "(K, tau)-distributed": f"distributed:{int(0.16 * d / K)}"}
    panels, claims = [], []
    for density, sparsity in grid:
        data = _data(n, d, density, sparsity, K, seed)
        curves, finals, pmins = {}, {}, {}
        for label, s in samplings.items():
            sol = _solve(data, "bcfw", T, seed=seed, sampling=s)
            pmins[label] = sol.extra.get("p_min")
            curves[f"{label} (p_min {pmins[label]:.2g})"] = _curve(sol)
            finals[label] = sol.final_objective
        panels.append(Panel(f"density {density}, sparsity {sparsity}", "iteration",
                            "objective", curves))
        order = sorted(finals, key=lambda k: -pmins[k])         # by decreasing p_min
        f0 = finals[order[0]]
        claims.append(Claim(
            f"density {density}, sparsity {sparsity}: larger p_min converges faster "
            "(elementary < tau-nice < distributed in f(x_T))", "qualitative",
            ", ".join(f"{k} {_f(finals[k])}" for k in order),
            _margin([finals[k] / f0 for k in order]), ">", 0.0,
            "min step of f(x_T)/f_elementary(x_T) along the order"))
    return Outcome(panels, claims, dict(n=n, d=d, K=K, T=T, samplings=samplings, seed=seed))


def fig2(fast, seed=0):
    n, d, T = (500, 640, 60) if fast else (2000, 10000, 200)
    Ks = [2, 4, 8] if fast else [2, 4, 8, 16]
    tau = d // (2 * max(Ks))         # the same tau per party for every K
    curves, finals = {}, {}
    for K in Ks:
        sol = _solve(_data(n, d, 0.05, 0.05, K, seed), "bcfw", T, seed=seed,
                     sampling=f"distributed:{tau}")
        curves[f"K = {K}"] = _curve(sol)
        finals[K] = sol.final_objective
    f0 = finals[Ks[0]]
    claims = [Claim("with K increasing (tau fixed), BCFW-AS converges faster", "qualitative",
                    ", ".join(f"K={k}: f(x_T) {_f(v)}" for k, v in finals.items()),
                    _margin([-finals[k] / f0 for k in Ks]), ">", 0.0,
                    "min decrease of f(x_T)/f_K=2(x_T) from one K to the next")]
    return Outcome([Panel(f"(K, tau)-distributed, tau = {tau}", "iteration", "objective",
                          curves)], claims, dict(n=n, d=d, T=T, tau=tau, density=0.05,
                                                 sparsity=0.05, seed=seed))


def fig3(fast, seed=0):
    eps = 1.0
    settings = [(200, 2000, 0.1)] if fast else [(2000, 20000, 0.1), (2000, 20000, 0.05),
                                               (200, 2000, 0.1), (200, 2000, 0.05)]
    T = 60 if fast else 200
    panels, claims = [], []
    for n, d, sp in settings:
        data = _data(n, d, sp, sp, 4, seed)
        runs = {"FW (non-private)": _solve(data, "fw", T, seed=seed),
                "DP-FW (centralized)": _solve(data, "dpfw", T, eps, seed=seed),
                "DP-BCFW (K = 4)": _solve(data, "dp-bcfw", T, eps, seed=seed)}
        panels.append(Panel(f"n={n}, d={d}, sparsity {sp}, eps {eps:g}", "iteration",
                            "training loss", {k: _curve(v) for k, v in runs.items()}))
        fw, dpfw, dpb = (runs[k].final_objective for k in runs)
        f0 = runs["FW (non-private)"].initial_objective
        claims.append(Claim(f"n={n}, d={d}, sparsity {sp}: private runs end above FW",
                            "qualitative", f"f(0) {_f(f0)}; FW {_f(fw)}, DP-FW {_f(dpfw)}, "
                            f"DP-BCFW {_f(dpb)}", (min(dpfw, dpb) - fw) / f0, ">", 0.0,
                            "(min(DP-FW, DP-BCFW) - FW) / f(0) at T"))
        learns = {k: (f0 - v) / (f0 - fw) for k, v in (("DP-FW", dpfw), ("DP-BCFW", dpb))}
        claims.append(Claim(f"n={n}, d={d}, sparsity {sp}: both private runs decrease the loss "
                            "(taken as: remove >= 50% of FW's decrease)",
                            "qualitative (curves fall, above FW)",
                            ", ".join(f"{k} {v:.1%}" for k, v in learns.items()),
                            min(learns.values()), ">=", 0.5,
                            "smaller share of FW's decrease removed"))
        claims.append(Claim(f"n={n}, d={d}, sparsity {sp}: DP-BCFW ends at a slightly "
                            "better loss than centralized DP-FW", "qualitative",
                            f"DP-BCFW {_f(dpb)} vs DP-FW {_f(dpfw)}"
                            + ("" if max(learns.values()) >= 0.05 else
                               " (neither removes 5% of FW's decrease: no comparison)"),
                            (dpfw - dpb) / f0 if max(learns.values()) >= 0.05 else None, ">",
                            0.0, "(DP-FW - DP-BCFW) / f(0) at T (only when a run learns)"))
    return Outcome(panels, claims, dict(T=T, epsilon=eps, delta="1/n", K=4, seed=seed,
                                        **_pset()))


def _share(f0, f, fref):
    return f"{(f0 - f) / (f0 - fref):.1%}" if f0 != fref else "n/a"


def _pset():
    return {"bounds": 1, "selection noise": "gumbel", "derivative clip": 1}


def fig4(fast, seed=0):
    from ..optim import get_loss, reference_optimum

    ns = [500, 1000, 2000] if fast else [500, 1000, 2000, 4000, 8000]
    Ks = [2, 4] if fast else [2, 4, 8, 16]
    d, T, eps = (200, 40) + (1.0,) if fast else (2000, 100, 1.0)
    ex = {f"DP-BCFW K={K}": [] for K in Ks}
    ex["DP-FW"] = []
    for n in ns:
        for K in Ks + [None]:
            data = _data(n, d, 0.05, 0.05, K or 4, seed)
            ref = reference_optimum(data.A, data.y, get_loss("squared"), blocks=data.blocks,
                                    eta=1.0, on_failure="flag")
            sol = _solve(data, "dp-bcfw" if K else "dpfw", T, eps, seed=seed)
            ex[f"DP-BCFW K={K}" if K else "DP-FW"].append(max(sol.final_objective
                                                                - ref.objective, 1e-12))
    claims = []
    for k, v in ex.items():
        slope = np.polyfit(np.log(ns), np.log(v), 1)[0]
        claims.append(Claim(f"{k}: excess risk falls with n along a line in log-log (Theorem "
                            "4: slope about -2/3; taken as: slope <= -1/3)", "~ -0.67",
                            f"slope {slope:.2f}; excess {', '.join(_f(e) for e in v)}",
                            float(slope), "<=", -1 / 3, "log-log slope"))
    last = {k: v[-1] for k, v in ex.items() if k.startswith("DP-BCFW")}
    keys = list(last)
    claims.append(Claim(f"more user nodes give a smaller excess risk (n = {ns[-1]})",
                        "qualitative", ", ".join(f"{k} {_f(v)}" for k, v in last.items()),
                        _margin([-math.log(last[k]) for k in keys]), ">", 0.0,
                        "min decrease of log(excess) from one K to the next"))
    return Outcome([Panel(f"d={d}, T={T}, eps={eps:g}", "n", "excess empirical risk",
                          {k: (ns, v) for k, v in ex.items()}, logx=True, logy=True)],
                   claims, dict(d=d, T=T, epsilon=eps, delta="1/n", density=0.05,
                                sparsity=0.05, seed=seed, **_pset()),
                   ["excess = f(x_T) - f(opt) with opt the certified optimum over the same "
                    "product of l1 balls (DP-FW: K = 4 blocks)"])


def fig5(fast, seed=0):
    n, d, T, eps = (500, 640, 60, 1.0) if fast else (2000, 2000, 200, 1.0)
    Ks = [2, 4, 8] if fast else [2, 4, 8, 16]
    curves, finals = {}, {}
    fw = None
    for K in Ks:
        data = _data(n, d, 0.1, 0.1, K, seed)
        if fw is None:
            fw = _solve(data, "fw", T, seed=seed)
            curves["FW (non-private)"] = _curve(fw)
        sol = _solve(data, "dp-bcfw", T, eps, seed=seed)
        curves[f"DP-BCFW K = {K}"] = _curve(sol)
        finals[K] = sol.final_objective
    f0 = fw.initial_objective
    learned = max((f0 - v) / (f0 - fw.final_objective) for v in finals.values()) >= 0.05
    claims = [Claim("private runs end above the non-private FW", "qualitative",
                    f"FW {_f(fw.final_objective)}; DP-BCFW " + ", ".join(
                        f"K={k} {_f(v)}" for k, v in finals.items()),
                    (min(finals.values()) - fw.final_objective) / f0, ">", 0.0,
                    "(min over K of f(x_T) - FW's f(x_T)) / f(0)"),
              Claim("the private runs decrease the loss (taken as: remove >= 50% of FW's "
                    "decrease)", "qualitative (curves fall, above FW)",
                    ", ".join(f"K={k}: {_share(f0, v, fw.final_objective)}"
                              for k, v in finals.items()),
                    min((f0 - v) / (f0 - fw.final_objective) for v in finals.values()), ">=",
                    0.5, "smallest share of FW's decrease removed"),
              Claim("more worker nodes result in better performance", "qualitative",
                    ", ".join(f"K={k}: {_f(v)}" for k, v in finals.items())
                    + ("" if learned else " (no run removes 5% of FW's decrease: no comparison)"),
                    _margin([-finals[k] / f0 for k in Ks]) if learned else None, ">", 0.0,
                    "min decrease of f(x_T)/f(0) from one K to the next (only when a run "
                    "learns)")]
    return Outcome([Panel(f"n={n}, d={d}, eps={eps:g}", "iteration", "training loss", curves)],
                   claims, dict(n=n, d=d, T=T, epsilon=eps, delta="1/n", seed=seed, **_pset()))


def fig6(fast, seed=0):
    n, d, T = (500, 500, 40) if fast else (2000, 2000, 200)
    epss = [0.001, 0.1, 10.0] if fast else [0.001, 0.01, 0.1, 1.0, 10.0]
    K = 4
    data = _data(n, d, 0.1, 0.1, K, seed)
    fw = _solve(data, "fw", T, seed=seed)
    f0, ffw = fw.initial_objective, fw.final_objective
    curves = {"FW (non-private)": _curve(fw)}
    shares, secure = {}, {}
    for e in epss:
        sol = _solve(data, "dp-bcfw", T, e, seed=seed)
        curves[f"DP-BCFW eps {e:g}"] = _curve(sol)
        shares[e] = (f0 - sol.final_objective) / (f0 - ffw)
        sec = _solve(data, "dp-bcfw-secure", T, e, seed=seed)
        secure[e] = (f0 - sec.final_objective) / (f0 - ffw)
    claims = [Claim("the decrease of the loss is almost unaffected by epsilon from 0.001 to 10 "
                    "(taken here as: every run removes >= 80% of FW's decrease)",
                    "qualitative (curves overlap)",
                    ", ".join(f"eps {e:g}: {s:.1%}" for e, s in shares.items()),
                    min(shares.values()), ">=", 0.8, "smallest share of FW's decrease removed")]
    notes = ["for contrast, the project's dp-bcfw-secure on the same data and T: " +
             ", ".join(f"eps {e:g}: {s:.1%}" for e, s in secure.items()) +
             " of FW's decrease"]
    return Outcome([Panel(f"n={n}, d={d}, K={K}", "iteration", "training loss", curves)],
                   claims, dict(n=n, d=d, K=K, T=T, delta="1/n", seed=seed, **_pset()), notes)
