"""``vflpriv bench peers --task regression``: vflpriv's regression against its peers on held-out
real tables (issue 52, item 5), on the same seeded splits as the classification bench.

Tables (chosen before any run; ISLP 0.6.0's CSV files, read from the cached wheel as
:mod:`.tables` does, the features on the same public scales as the classification tables): the
response itself, scaled into [-1, 1] by its public range (label bound 1):

* ``boston``: medv (median home value, range 0-50, in $1000s), 506 rows, 12 features, 2 parties;
* ``carseats``: Sales (unit sales, 0-20, in thousands), 400 rows, 11 features, 2 parties;
* ``wage``: wage (0-350, $1000s a year), 3000 rows, 2 parties;
* ``bikeshare``: bikers (hourly riders, 0-1000), 8645 rows, 2 parties.

Systems (no one tuned on these tables; each with its library's defaults or the rule here):

* ``sklearn-lasso``, ``sklearn-ridge``: scikit-learn's LassoCV (3 folds) and RidgeCV
  (alphas 1e-3..1e3), non-private references;
* ``diffprivlib``: diffprivlib's LinearRegression (objective perturbation, pure epsilon-DP) with
  the public bounds; a row says ``unavailable`` where diffprivlib does not import;
* ``opacus``, ``opacus-replace``: DP-SGD on ``torch.nn.Linear`` with the squared loss, the
  classification bench's rule (:mod:`.peers_systems`: 50 batches an epoch, 20 epochs, clip 1)
  but a learning rate of 0.1 (:data:`OPACUS_LR`: the classification rule's 1.0 diverged under
  the noise on the first table tried, boston at eps 1, R^2 -317; 0.1 was fixed then, before any
  other table ran), under opacus' add/remove accountant and under replace-one (vflpriv's
  relation, calibrated by vflpriv's accountant);
* ``adassp``: central AdaSSP (Wang 2018, "Revisiting differentially private linear regression",
  Algorithm 2) on the rows with a constant column: X^T X, X^T y and the smallest eigenvalue of
  X^T X released with Gaussian noise (replace-one sensitivities 2 B^2, 2 B B_y, 2 B^2, B^2 =
  d B_a^2 + 1), one noise multiplier for the three calibrated by vflpriv's accountant (pld) to
  (epsilon, delta); the ridge lambda = max(0, sigma_2 sqrt(d log(2 d^2 / rho)) - lambda_min~),
  rho = 0.05, as the paper's rule with its noise scale;
* ``fw`` (non-private), ``dpfw`` (central DP-FW) and ``dp-bcfw-secure`` (the vertical secure
  least-squares path, label at party 0), vflpriv's own, with their defaults.

Metrics on the held-out rows: R^2 (1 - SSE / SST about the test rows' mean) and RMSE in the
response's own units; every private system paired against ``opacus-replace`` on R^2 over the
seeds (:mod:`.peers_paired`'s t interval).
"""
from __future__ import annotations

import io
import math
import statistics
import time

import numpy as np

from ..errors import InputError

SYSTEMS = ("sklearn-lasso", "sklearn-ridge", "diffprivlib", "opacus", "opacus-replace", "adassp",
           "fw", "dpfw", "dp-bcfw-secure")
PRIVATE = ("diffprivlib", "opacus", "opacus-replace", "adassp", "dpfw", "dp-bcfw-secure")
TABLES = ("boston", "carseats", "wage", "bikeshare")
#: the reference of the paired comparisons and the systems compared with it
REFERENCE, COMPARED = "opacus-replace", ("dp-bcfw-secure", "dpfw", "adassp", "diffprivlib")
#: DP-SGD's learning rate for the squared loss (module docstring)
OPACUS_LR = 0.1
#: each table's response and its public range (the label is scaled into [-1, 1] by it)
RESPONSES = {"boston": ("medv", (0.0, 50.0)), "carseats": ("Sales", (0.0, 20.0)),
             "wage": ("wage", (0.0, 350.0)), "bikeshare": ("bikers", (0.0, 1000.0))}


def load_regression_table(name):
    """``(Table, half-range)``: the classification table's features and parties with the
    response scaled into [-1, 1] as its label (its public range's half-width kept to report the
    RMSE in the response's units)."""
    import pandas as pd

    from . import tables as T

    if name not in RESPONSES:
        raise InputError(f"--tables: no regression table {name!r}; known: {', '.join(TABLES)}")
    table = getattr(T, name)()
    col, (lo, hi) = RESPONSES[name]
    fname = {"boston": "Boston.csv", "carseats": "Carseats.csv", "wage": "Wage.csv",
             "bikeshare": "Bikeshare.csv"}[name]
    df = pd.read_csv(io.BytesIO(T._islp_csv(fname)))
    half = (hi - lo) / 2.0
    y = np.clip((df[col].to_numpy(float) - (lo + hi) / 2.0) / half, -1.0, 1.0)
    table.y = y
    table.source = table.source + f"; label {col} scaled by its range [{lo:g}, {hi:g}]"
    return table, half


def fit(system, table, train, epsilon, delta, iterations, seed) -> dict:
    A, y = table.A[train], table.y[train]
    t0 = time.perf_counter()
    if system == "sklearn-lasso":
        from sklearn.linear_model import LassoCV

        m = LassoCV(cv=3, random_state=seed).fit(A, y)
        out = {"x": m.coef_, "b": float(m.intercept_), "settings": {"alpha": float(m.alpha_)}}
    elif system == "sklearn-ridge":
        from sklearn.linear_model import RidgeCV

        m = RidgeCV(alphas=np.logspace(-3, 3, 13)).fit(A, y)
        out = {"x": m.coef_, "b": float(m.intercept_), "settings": {"alpha": float(m.alpha_)}}
    elif system == "diffprivlib":
        out = _diffprivlib(A, y, epsilon, table.feature_bound, seed)
    elif system in ("opacus", "opacus-replace"):
        out = _opacus(A, y, epsilon, delta, seed, system == "opacus-replace")
    elif system == "adassp":
        out = adassp(A, y, epsilon, delta, table.feature_bound, seed)
    else:
        out = _vflpriv(system, table, A, y, epsilon, delta, iterations, seed)
    out["seconds"] = time.perf_counter() - t0
    return out


def _diffprivlib(A, y, epsilon, feature_bound, seed):
    import warnings

    from diffprivlib.models import LinearRegression

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = LinearRegression(epsilon=epsilon, bounds_X=(-feature_bound, feature_bound),
                             bounds_y=(-1.0, 1.0), random_state=seed)
        m.fit(A, y)
    return {"x": np.ravel(m.coef_), "b": float(np.ravel(m.intercept_)[0]),
            "epsilon_spent": float(epsilon), "settings": {"bounds_X": feature_bound}}


def adassp(A, y, epsilon, delta, feature_bound, seed, rho=0.05) -> dict:
    """Central AdaSSP (module docstring): ``{"x", "b", "epsilon_spent", "settings"}``."""
    from accounting import REPLACE_ONE, Composed, Gaussian, calibrate, get_accountant

    n, d = A.shape
    X = np.hstack([np.asarray(A, float), np.ones((n, 1))])
    B2 = d * float(feature_bound) ** 2 + 1.0          # ||x||^2 <= B^2 (the constant column)
    sens = (2.0 * B2, 2.0 * math.sqrt(B2), 2.0 * B2)   # lambda_min, X^T y, X^T X (replace-one)

    def event(z):
        return Composed(tuple(Gaussian(z * s, s, neighboring=REPLACE_ONE) for s in sens))

    z = calibrate(event, float(epsilon), float(delta), guess=4.0, accountant="pld").value
    s1, s2, s3 = (z * s for s in sens)
    rng = np.random.default_rng(seed)
    G = X.T @ X
    lam_min = max(float(np.linalg.eigvalsh(G)[0]) + s1 * rng.standard_normal()
                  - s1 * math.sqrt(2.0 * math.log(6.0 / delta)), 0.0)
    k = d + 1
    lam = max(0.0, s3 * math.sqrt(k * math.log(2.0 * k * k / rho)) - lam_min)
    N = rng.standard_normal((k, k))
    G_hat = G + s3 * (np.triu(N) + np.triu(N, 1).T)
    h_hat = X.T @ y + s2 * rng.standard_normal(k)
    w = np.linalg.solve(G_hat + lam * np.eye(k), h_hat)
    spent = float(get_accountant("pld").epsilon(event(z), float(delta)))
    return {"x": w[:-1], "b": float(w[-1]), "epsilon_spent": spent,
            "settings": {"noise_multiplier": z, "lambda": lam, "rho": rho}}


def _opacus(A, y, epsilon, delta, seed, replace_one):
    """DP-SGD on the squared loss (``torch.nn.MSELoss``: the mean of (m - y)^2, the bench's
    loop ``peers_systems.opacus_linear``) at :data:`OPACUS_LR`."""
    import torch

    from .peers_systems import opacus_linear

    return opacus_linear(A, y, epsilon, delta, seed, replace_one, torch.nn.MSELoss(),
                         OPACUS_LR)


def _vflpriv(system, table, A, y, epsilon, delta, iterations, seed):
    from ..data import VerticalData
    from ..vertical import solve

    data = VerticalData.from_arrays(A, y, partition=table.blocks)
    kw = {}
    if system in PRIVATE:
        kw = {"epsilon": epsilon, "delta": delta, "label_bound": 1.0}
    if system == "dp-bcfw-secure":
        kw["label_party"] = 0
    sol = solve(data, algorithm=system, loss="squared", iterations=iterations,
                feature_bound=table.feature_bound, seed=seed, fit_intercept=True, **kw)
    out = {"x": np.asarray(sol.x, float), "b": float(sol.intercept or 0.0),
           "settings": {"eta": sol.eta, "eta_rule": sol.eta_rule, "iterations": iterations}}
    if sol.privacy is not None:
        out["epsilon_spent"] = float(sol.privacy["epsilon_spent"]["best"])
    return out


def scores(A, y, x, b, half) -> dict:
    """Test R^2 (about the test rows' mean) and RMSE in the response's units."""
    pred = np.asarray(A, float) @ np.asarray(x, float) + float(b)
    sse = float(np.sum((y - pred) ** 2))
    sst = float(np.sum((y - np.mean(y)) ** 2))
    ok = bool(np.all(np.isfinite(pred)))
    return {"test_r2": (1.0 - sse / sst) if ok and sst > 0 else None,
            "test_rmse": math.sqrt(sse / len(y)) * half if ok else None}


def run(args) -> int:
    from ..bench import write_json
    from ..vertical.metrics import split_rows
    from .peers_paired import t_interval, verdict
    from .peers_systems import availability, versions

    tables = _names(args.tables, TABLES, "tables", default="flights,caravan,default")
    systems = _names(args.systems, SYSTEMS, "systems", default=None)
    epsilons = [float(v) for v in str(args.epsilons).split(",") if v.strip()]
    seeds = [int(v) for v in str(args.seeds).split(",") if v.strip()]
    avail = {s: None for s in systems}
    if "diffprivlib" in systems:
        try:
            import diffprivlib.models  # noqa: F401  (reported as unavailable where it fails)
        except Exception as exc:                      # noqa: BLE001 (reported as data)
            avail["diffprivlib"] = f"diffprivlib does not import: {exc}"
    torch_msg = availability(("opacus",)).get("opacus")
    for s in ("opacus", "opacus-replace"):
        if s in systems:
            avail[s] = torch_msg
    rows, info = [], []
    for name in tables:
        table, half = load_regression_table(name)
        info.append({"name": name, "source": table.source, "rows": int(table.A.shape[0]),
                     "columns": int(table.A.shape[1]), "parties": len(table.blocks),
                     "feature_bound": table.feature_bound, "response_half_range": half})
        print(f"{name}: {table.source}; {table.A.shape[1]} columns, {len(table.blocks)} parties")
        for seed in seeds:
            train, test = split_rows(table.A.shape[0], args.test_fraction, seed)
            for system in systems:
                for eps in (epsilons if system in PRIVATE else [None]):
                    row = {"table": name, "seed": seed, "system": system, "epsilon": eps}
                    if avail[system]:
                        rows.append(dict(row, unavailable=avail[system]))
                        continue
                    try:
                        res = fit(system, table, train, eps, args.delta, args.iterations, seed)
                    except Exception as exc:              # noqa: BLE001 (a peer's failure is data)
                        rows.append(dict(row, failed=f"{type(exc).__name__}: {exc}"))
                        continue
                    row.update(scores(table.A[test], table.y[test], res["x"], res["b"], half),
                               epsilon_spent=res.get("epsilon_spent"), seconds=res["seconds"],
                               settings=res.get("settings"))
                    rows.append(row)
                    print(f"  seed {seed} {system:>14} eps {'-' if eps is None else f'{eps:g}':>4}"
                          f": R^2 {_f(row['test_r2'])} RMSE {_f(row['test_rmse'])} spent "
                          f"{_f(row['epsilon_spent'])}")
    summary = _summary(rows)
    paired = []
    for (table, eps, system) in sorted({(r["table"], r["epsilon"], r["system"]) for r in rows
                                        if r["system"] in COMPARED and "test_r2" in r}):
        mine = {r["seed"]: r["test_r2"] for r in rows if (r["table"], r["epsilon"],
                r["system"]) == (table, eps, system) and r.get("test_r2") is not None}
        ref = {r["seed"]: r["test_r2"] for r in rows if (r["table"], r["epsilon"],
               r["system"]) == (table, eps, REFERENCE) and r.get("test_r2") is not None}
        common = sorted(set(mine) & set(ref))
        if not common:
            continue
        mean, sd, lo, hi = t_interval([mine[s] - ref[s] for s in common])
        paired.append({"table": table, "epsilon": eps, "system": system,
                       "reference": REFERENCE, "seeds": len(common), "mean_difference": mean,
                       "sd": sd, "ci95": None if lo is None else [lo, hi],
                       "verdict": verdict(lo, hi)})
    print()
    for s in summary:
        print(f"{s['table']:>9} {s['system']:>14} {_f(s['epsilon'], 'g'):>4}  R^2 "
              f"{_f(s.get('test_r2'))} +- {_f(s.get('test_r2_sd'))}  RMSE {_f(s.get('test_rmse'))}"
              + (f"  {s['note']}" if s.get("note") else ""))
    for p in paired:
        print(f"  {p['table']}, eps {p['epsilon']:g}: {p['system']} - {p['reference']} R^2 "
              f"{p['mean_difference']:+.3f}: {p['verdict']}")
    from datetime import datetime, timezone

    doc = {"command": "vflpriv bench peers --task regression " + " ".join(
               f"--{k} {v}" for k, v in (("tables", ",".join(tables)),
                                         ("epsilons", args.epsilons), ("delta", args.delta),
                                         ("seeds", args.seeds),
                                         ("systems", ",".join(systems)))),
           "finished_utc": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M"),
           "versions": versions(), "tables": info, "rows": rows, "summary": summary,
           "paired": paired}
    write_json(args.json, doc)
    return 0


def _names(given, known, what, default):
    vals = [v.strip() for v in str(given).split(",") if v.strip()]
    if default is not None and given == default:            # the classification default
        return list(known)
    if what == "systems":
        from .peers_systems import SYSTEMS as CLASSIFICATION

        if vals == list(CLASSIFICATION):
            return list(known)
    bad = [v for v in vals if v not in known]
    if bad:
        raise InputError(f"--{what}: {bad[0]!r} is not a regression {what[:-1]}; known: "
                         f"{', '.join(known)}")
    return vals


def _summary(rows):
    groups = {}
    for r in rows:
        groups.setdefault((r["table"], r["system"], r["epsilon"]), []).append(r)
    out = []
    for (table, system, eps), rs in groups.items():
        ok = [r for r in rs if r.get("test_r2") is not None]
        s = {"table": table, "system": system, "epsilon": eps, "seeds": len(ok)}
        if not ok:
            s["note"] = rs[0].get("unavailable") or rs[0].get("failed") or "no finite model"
            out.append(s)
            continue
        for f in ("test_r2", "test_rmse"):
            vals = [r[f] for r in ok]
            s[f] = statistics.fmean(vals)
            s[f + "_sd"] = statistics.stdev(vals) if len(vals) > 1 else None
        spent = [r["epsilon_spent"] for r in ok if r.get("epsilon_spent") is not None]
        s["epsilon_spent_max"] = max(spent) if spent else None
        out.append(s)
    return out


def _f(v, fmt=".3f"):
    return "-" if v is None else format(v, fmt)
