"""Tutorial 3: vertical private regression: a privacy-utility curve over epsilon, bytes per party.

Run: python docs/tutorials/03_vertical_regression.py [--fast] [--out DIR]   (see _page.py)
"""
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _page import Page, pyplot  # noqa: E402

page = Page(__file__, "Tutorial 3: private regression across organisations (vertical FL)")

page.text("""
Two organisations hold different columns about the same 442 patients: a **clinic** knows age,
sex, body-mass index and blood pressure; a **lab** knows six blood-serum measurements. Together
they want a sparse linear model of disease progression one year later (the label, held by the
clinic), without pooling their columns and with (epsilon, delta)-DP for every patient. The data
are scikit-learn's bundled diabetes set (Efron et al. 2004), split into the two parties by column
(the same split ships as the `diabetes` data set in `datasets/` where a checkout has that folder;
this tutorial builds it from scikit-learn so it runs without it).

## 1. Prepare the data with declared bounds

Differential privacy needs declared bounds on every value (|a_ij| <= B_a, |y_j| <= B_y), because
the noise is calibrated to them. We standardise each column, divide by 3 and clip to [-1, 1]
(about 3 standard deviations), so B_a = B_y = 1. (Here the means and standard deviations come from
the data themselves; in a deployment they must be public or fixed in advance, or they leak.)
""")
from sklearn.datasets import load_diabetes  # noqa: E402

ds = load_diabetes()
X, y = ds.data, ds.target
X = np.clip((X - X.mean(0)) / X.std(0) / 3, -1, 1)
y = np.clip((y - y.mean()) / y.std() / 3, -1, 1)
names = list(ds.feature_names)
clinic, lab = names[:4], names[4:]
page.table(["party", "columns"], [("clinic (party 0)", ", ".join(clinic)),
                                  ("lab (party 1)", ", ".join(lab))])
with open("diabetes.csv", "w") as f:
    f.write(",".join(names + ["progression"]) + "\n")
    for row, t in zip(X, y):
        f.write(",".join(f"{v:.6f}" for v in row) + f",{t:.6f}\n")

page.text("""
## 2. One private run from the command line

`dp-bcfw-secure` (the private algorithm that learns: cross-party products under secret sharing,
released once per selected feature) at epsilon = 16, with the certified optimum on the same
constraint set for comparison (`--reference`). The partition gives each party its columns.
""")
page.run("run", "--data", "diabetes.csv", "--label", "progression", "--partition", "0-3;4-9",
         "--algorithm", "dp-bcfw-secure", "--epsilon", 16, "--delta", "1e-5", "--feature-bound", 1,
         "--label-bound", 1, "--row-clip", 2, "--iterations", 20, "--seed", 0, "--reference")

page.text("""
## 3. The privacy-utility curve

The same problem through the Python API, for a range of epsilon, with dp-bcfw-secure and the
paper's DP-BCFW-AS (`dp-bcfw`). Utility is the share of the gap f(0) - f(opt) a run removes
(100% = the certified non-private optimum on the same l1 balls, 0% = no better than predicting
0). Each point is the median over seeds: at n = 442 one run is noisy.
""")
from vflpriv.data import VerticalData  # noqa: E402
from vflpriv.optim import get_loss, reference_optimum  # noqa: E402
from vflpriv.units import UNITS  # noqa: E402
from vflpriv.vertical import solve  # noqa: E402

data = VerticalData.from_arrays(X, y, "0-3;4-9")
ref = reference_optimum(data.A, data.y, get_loss("squared"), blocks=data.blocks, eta=1.0)
epsilons = [1, 16, 64] if page.fast else [0.5, 1, 2, 4, 8, 16, 32, 64, 128, 256]
seeds = [0] if page.fast else [0, 1, 2, 3, 4]
T = 20
ALGS = {"dp-bcfw-secure": dict(row_clip=2.0, max_features=10),
        "dp-bcfw": dict(derivative_clip=1.0)}
share, upl, dnl, spent, naive = {}, {}, {}, {}, {}
for alg, kw in ALGS.items():
    for e in epsilons:
        vals = []
        for s in seeds:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")     # the hopeless-noise warning, on purpose
                sol = solve(data, algorithm=alg, epsilon=e, delta=1e-5, feature_bound=1.0,
                            label_bound=1.0, iterations=T, seed=s, rnm="gumbel", **kw)
            vals.append((sol.initial_objective - sol.final_objective)
                        / (sol.initial_objective - ref.objective))
            if s == seeds[0]:
                upl[alg, e], dnl[alg, e] = list(sol.uplink), list(sol.downlink)
                if alg == "dp-bcfw":
                    naive[e] = list(sol.uplink_naive)
                spent[alg, e] = sol.privacy["epsilon_spent"]["best"]
        share[alg, e] = float(np.median(vals))
        print(f"{alg} eps={e}: median share {share[alg, e]:.1%} over {len(seeds)} seed(s)")
page.table(["epsilon"] + [f"{a}: gap removed" for a in ALGS] + [f"{a}: eps spent" for a in ALGS],
           [(e,) + tuple(f"{share[a, e]:.1%}" for a in ALGS)
            + tuple(f"{spent[a, e]:.3g}" for a in ALGS) for e in epsilons])
plt = pyplot()
fig, ax = plt.subplots(figsize=(5.8, 3.8))
for a in ALGS:
    ax.plot(epsilons, [100 * share[a, e] for e in epsilons], marker="o", label=a)
ax.axhline(0, color="k", lw=0.6)
ax.axhline(100, color="k", lw=0.6, ls=":")
ax.set_xscale("log", base=2)
ax.set_xlabel("epsilon (delta = 1e-5)")
ax.set_ylabel("% of f(0) - f(opt) removed")
ax.set_title(f"diabetes, 2 parties, n = {data.n}, T = {T}")
ax.legend()
page.figure(fig, "utility", "Privacy-utility curve: share of the gap removed against epsilon")

e_b = 16 if 16 in epsilons else epsilons[len(epsilons) // 2]
page.text(f"""
## 4. Bytes per party

What each party sent (uplink) and received (downlink) in the run at epsilon = {e_b}
(the first seed), measured on the serialized messages:
""")
page.table(["algorithm", "party", "uplink bytes", "downlink bytes"],
           [(a, k, f"{upl[a, e_b][k]:,}", f"{dnl[a, e_b][k]:,}") for a in ALGS
            for k in range(len(upl[a, e_b]))])
KB = dict(UNITS)["kB"]          # decimal, as the CLI prints bytes (vflpriv.units)
fig, ax = plt.subplots(figsize=(5.8, 3.4))
w = 0.2
for i, a in enumerate(ALGS):
    for j, (lab_, d) in enumerate((("uplink", upl), ("downlink", dnl))):
        ax.bar([k + (2 * i + j - 1.5) * w for k in range(2)], [v / KB for v in d[a, e_b]], w,
               label=f"{a} {lab_}")
ax.set_xticks([0, 1])
ax.set_xticklabels(["clinic (party 0)", "lab (party 1)"])
ax.set_ylabel("kB (1 kB = 1000 B)")
ax.set_title(f"bytes per party, epsilon = {e_b}, T = {T}")
ax.legend(fontsize=7)
page.figure(fig, "bytes", "Bytes sent and received per party")

best = {a: max(epsilons, key=lambda e: share[a, e]) for a in ALGS}
half = {a: next((e for e in epsilons if share[a, e] >= 0.5), None) for a in ALGS}
page.text(f"""
## What to take away

- With 442 patients privacy is expensive: dp-bcfw-secure first removes half the gap at epsilon
  = {half['dp-bcfw-secure']}, the paper's DP-BCFW-AS at epsilon = {half['dp-bcfw']} (median over
  {len(seeds)} seed(s); "None" = not within the epsilons tried). dp-bcfw-secure releases noisy
  aggregates over all patients, whose relative noise falls like 1/n, so the same epsilon buys far
  more on larger data; DP-BCFW-AS releases noisy per-patient columns, whose noise does not fall
  with n (docs/vertical_results.md, "The frontier" and "Where DP-BCFW-AS learns").
- Traffic at epsilon = {e_b}: dp-bcfw-secure's parties sent {sum(upl['dp-bcfw-secure', e_b]):,}
  bytes and received {sum(dnl['dp-bcfw-secure', e_b]):,}; DP-BCFW-AS's sent
  {sum(upl['dp-bcfw', e_b]):,} and received {sum(dnl['dp-bcfw', e_b]):,}. DP-BCFW-AS (no sketch)
  sends each selected feature's column with noise, n numbers per feature: the raw columns would
  have taken {sum(naive[e_b]):,} bytes.
- Use `vflpriv certify` on the run's plan before deploying (Tutorial 1) and keep its ledger
  (Tutorial 2).
""")
page.write()
