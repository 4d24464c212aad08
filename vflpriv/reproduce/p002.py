"""Paper 002 (FedP3), Table 2: local pruning strategies, fixed > uniform (p = 0.9) > ordered
dropout (p = 0.9) (FashionMNIST S2: 84.27 > 77.24 > 73.27; notes B.11), through ``vflpriv fedp3``
on digits, with the MLP and the CNN.

The clients train every layer and upload only L_i (``--train-layers all``, the paper's Alg. 2 and
its released code).  The measured accuracy of a run is the mean personalized accuracy averaged
over its last 5 rounds (it swings by several points from one round to the next on digits' small
test splits); the claim is decided over seeds (:mod:`vflpriv.reproduce.verdict`).
"""
from __future__ import annotations

from . import Claim, Outcome, Panel
from .horizontal import _cli, _cmd

# Table 2, FashionMNIST column (S1 / S2), notes B.11.
_FP3 = {"fixed": (81.75, 84.27), "uniform": (78.81, 77.24), "ordered_dropout": (75.45, 73.27)}
LAST = 5


def p002_table2(fast, seed=0):
    rounds = 8 if fast else 30
    panels, claims, cmds = [], [], []
    for model in ("mlp", "cnn"):
        base = ["fedp3", "--data", "digits", "--model", model, "--seed", str(seed), "--alpha",
                "0.5", "--rounds", str(rounds), "--train-layers", "all"] + (
            ["--local-epochs", "1"] if fast else [])
        acc, curves = {}, {}
        for strat in _FP3:
            argv = base + ["--local-pruning", strat]
            cmds.append(_cmd(argv))
            h = _cli(argv)["accuracy_history"]
            acc[strat] = sum(h[-LAST:]) / len(h[-LAST:])
            curves[strat] = (list(range(1, len(h) + 1)), h)
        panels.append(Panel(f"FedP3 opu2, digits, {model.upper()}, Dirichlet 0.5", "round",
                            "mean personalized accuracy", curves))
        f, u, o = acc["fixed"], acc["uniform"], acc["ordered_dropout"]
        shown = ", ".join(f"{k} {100 * v:.2f}" for k, v in acc.items())
        paper = "FashionMNIST S2: " + " > ".join(f"{v[1]}" for v in _FP3.values())
        claims.append(Claim(f"{model.upper()}: local pruning fixed > uniform (p = 0.9) > ordered "
                            f"dropout (p = 0.9) in accuracy (mean of the last {LAST} rounds)",
                            paper, shown, min(f - u, u - o), ">", 0.0,
                            "min(fixed - uniform, uniform - ordered dropout)"))
        claims.append(Claim(f"{model.upper()}: fixed is the best of the three", paper, shown,
                            f - max(u, o), ">", 0.0, "fixed - max(uniform, ordered dropout)"))
    return Outcome(panels, claims, {"commands": "; ".join(cmds)},
                   ["digits (8x8) with an MLP and a CNN stand in for the paper's image sets "
                    "and CNNs; every layer is trained and L_i uploaded (--train-layers all)"])
