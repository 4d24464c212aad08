"""Tutorial 4: horizontal sparse and pruned federated learning: fewer bytes per round.

Run: python docs/tutorials/04_horizontal_sparse_pruned.py [--fast] [--out DIR]   (see _page.py)
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _page import Page, pyplot  # noqa: E402

page = Page(__file__, "Tutorial 4: horizontal sparse and pruned federated learning")
fast = page.fast

page.text("""
Many clients hold *rows* of the same kind (horizontal FL). Communication is the bill: every round
each sampled client downloads a model and uploads an update. Two ways to send less:

- **sparse models** (`vflpriv sparse`): the model has at most tau nonzeros, and messages carry
  only those (Fed-HT, FedIter-HT, FedGradMP; papers on federated nonconvex sparse learning and
  federated gradient matching pursuit);
- **sparse updates and pruned networks** (`vflpriv horizontal --elastic-net`, `vflpriv fedp3`):
  l1 / l2 terms and a transmission threshold zero most of an update (FedElasticNet), or each
  client trains and sends only some layers of a pruned network (FedP3).

Every byte below is measured on the serialized messages.

## 1. Sparse linear regression across 30 clients
""")


def run_json(*argv):
    page.run(*argv, "--json", "out.json")
    with open("out.json") as f:
        return json.load(f)


R = 8 if fast else 30
data = "synthetic-003:alpha=0.2,e=0.2,sparsity=10,seed=0"
res = {}
for algo in ("fedgradmp", "fediterht"):
    res[algo] = run_json("sparse", "--algorithm", algo, "--data", data, "--clients", 30,
                         "--tau", 10, "--rounds", R, "--seed", 0)

# Why FedIter-HT's default step barely moves here, measured on the clients' own data: the default
# is 1 / max_i L_i with L_i = lambda_max(Z_i^T Z_i) / n_i, the curvature along any direction;
# hard thresholding only moves along 2 tau-sparse directions, whose curvature is far smaller.
import numpy as np  # noqa: E402

from vflpriv.sparse.data import load_federated  # noqa: E402
from vflpriv.units import UNITS  # noqa: E402

fed = load_federated(data, 30)
rng = np.random.default_rng(0)
full, restricted, rows = [], [], []
for Z, _ in fed.parts:
    Z = np.asarray(Z.todense()) if hasattr(Z, "todense") else np.asarray(Z)
    rows.append(Z.shape[0])
    full.append(np.linalg.eigvalsh(Z.T @ Z / Z.shape[0])[-1])
    for _ in range(50):
        S = rng.choice(Z.shape[1], 20, replace=False)
        restricted.append(np.linalg.eigvalsh(Z[:, S].T @ Z[:, S] / Z.shape[0])[-1])
LR = 0.1
res["fediterht --lr 0.1"] = run_json("sparse", "--algorithm", "fediterht", "--data", data,
                                     "--clients", 30, "--tau", 10, "--rounds", R, "--seed", 0,
                                     "--lr", LR)
plt = pyplot()
fig, ax = plt.subplots(figsize=(5.5, 3.5))
for a, r in res.items():
    ax.semilogy(range(len(r["relative_error"])), [max(e, 1e-17) for e in r["relative_error"]],
                marker="o", ms=3, label=f"{a} ({sum(r['uplink_bytes']):,} B up)")
ax.set_xlabel("round")
ax.set_ylabel("relative error ||x - x#|| / ||x#||")
ax.set_title("10-sparse regression, 30 clients, d = 1000")
ax.legend(fontsize=7)
page.figure(fig, "sparse", "Relative error per round and total uplink bytes")
page.text(f"""
FedGradMP (a least-squares solve on a small support per local step, no step size) reaches
relative error {res['fedgradmp']['relative_error'][-1]:.2g} in {R} rounds. FedIter-HT with its
default step stays near 1 ({res['fediterht']['relative_error'][-1]:.2g}): not broken, but
over-cautious. The default step, {res['fediterht']['lr']:.3g}, is 1 / max_i L_i, safe for the
curvature of any client along any direction; one client here has L_i = lambda_max(Z_i^T Z_i) / n_i
= {max(full):.0f} ({rows[int(np.argmax(full))]} rows, d = 1000 columns; the median client
{np.median(full):.0f}).
Hard thresholding only moves along sparse directions (the union of two tau-sparse supports), where
the curvature is far smaller: on random 20-column supports of these clients it is at most
{max(restricted):.0f} (median {np.median(restricted):.1f}). So a step {LR / res['fediterht']['lr']:.0f} times larger is
stable: with `--lr {LR}` FedIter-HT reaches relative error
{res['fediterht --lr 0.1']['relative_error'][-1]:.2g} in the same {R} rounds. A larger step has
no guarantee for every client (too large a step diverges; the paper tunes it), which is why the
command's default stays the safe one. All three send tau = 10 values and
indices instead of d = 1000 values: {sum(res['fedgradmp']['uplink_bytes']):,} bytes up in all
({sum(res['fedgradmp']['uplink_bytes']) / (30 * R):,.0f} per client and round).

## 2. A sparse update on a neural network: FedElasticNet

FedDyn on the scikit-learn digits (an MLP, 20 clients, 10% of them per round), without and with
FedElasticNet's l1 / l2 terms and transmission threshold:
""")
hargs = ["--clients", 20, "--rounds", 6 if fast else 40, "--participation", 0.2 if fast else 0.1,
         "--local-epochs", 1 if fast else 5, "--seed", 0]
h = {"feddyn": run_json("horizontal", "--algorithm", "feddyn", *hargs),
     "feddyn + elastic net": run_json("horizontal", "--algorithm", "feddyn", "--elastic-net",
                                      *hargs)}
page.table(["algorithm", "test accuracy", "uplink nonzeros", "uplink bytes", "entropy (cum.)"],
           [(k, f"{v['accuracy']:.3f}", f"{v['uplink_nonzeros']:,}", f"{v['uplink_bytes']:,}",
             f"{v['uplink_entropy']:.3g}") for k, v in h.items()])

page.text("""
## 3. Pruned personalised networks: FedP3

Ten clients with a non-IID (Dirichlet 0.5) split of digits; with `--scheme opu2` each client trains
and uploads two of the three hidden layers (plus the output layer), on a globally pruned network
(keep ratio 0.9). `--scheme fedavg` sends everything:
""")
fargs = ["--rounds", 5 if fast else 20, "--local-epochs", 1 if fast else 2, "--seed", 0]
p = {s: run_json("fedp3", "--scheme", s, *fargs) for s in ("fedavg", "opu2")}
page.table(["scheme", "mean personalised accuracy", "uplink bytes", "of unpruned"],
           [(s, f"{v['accuracy']:.3f}", f"{sum(v['uplink_bytes']):,}",
             f"{sum(v['uplink_bytes']) / sum(v['uplink_bytes_full']):.0%}") for s, v in p.items()])

fig, axes = plt.subplots(1, 2, figsize=(8.5, 3.4))
labels = list(h) + [f"fedp3 {s}" for s in p]
upl = [v["uplink_bytes"] for v in h.values()] + [sum(v["uplink_bytes"]) for v in p.values()]
acc = [v["accuracy"] for v in h.values()] + [v["accuracy"] for v in p.values()]
axes[0].bar(labels, [b / dict(UNITS)["MB"] for b in upl])   # decimal, as the CLI (vflpriv.units)
axes[0].set_ylabel("uplink MB (all rounds)")
axes[1].bar(labels, acc)
axes[1].set_ylabel("accuracy")
for ax in axes:
    ax.tick_params(axis="x", labelrotation=20, labelsize=7)
axes[0].set_title("bytes sent by clients")
axes[1].set_title("accuracy (FedP3: personalised)")
page.figure(fig, "bytes_accuracy", "Uplink bytes and accuracy: FedDyn with and without "
            "FedElasticNet, FedP3 with and without layer pruning")
os.remove("out.json")

page.text("""
## What to take away

- Sparse models cut the bytes in proportion to tau / d, on both links; FedGradMP needs no step
  size on least squares.
- FedElasticNet zeroes most of an update, so the uplink nonzeros drop by a large factor; check
  what it costs in accuracy on your data (the table above) before you adopt it.
- FedP3's layer subsets cut the uplink by the share of parameters left out.
- All three take `--epsilon/--delta` for a private run held to a ledger (record or client level
  for `sparse`, per-client local DP for `horizontal` and `fedp3`); see docs/sparse.md,
  docs/fedelasticnet.md and docs/fedp3.md.
""")
page.write()
