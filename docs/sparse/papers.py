"""The "measured here" column of docs/sparse.md's table of paper claims with no `reproduce` entry
(FedGradMP on Jeong et al.'s synthetic-003 data; seed 0 unless said), written as one JSON.

    python docs/sparse/papers.py docs/sparse/papers.json
"""
import json
import sys

from vflpriv.sparse.api import fit

DATA = "synthetic-003:alpha={alpha},e=1.1,sparsity=10,seed={seed}{noise}"
KS = (1, 3, 6, 9, 12, 15)
COHORTS = (10, 15, 20, 25, 30)
STEPS = (1e-4, 5e-4, 1e-3, 2e-3, 4e-3, 1e-2, 2e-2)


def _rounds_to(errors, tol=1e-8):
    """Rounds until the relative error is below tol (errors[0] is the start), None if never."""
    return next((t for t, e in enumerate(errors) if e < tol), None)


def _fig10(K, seed=0, noise="", rounds=20, participation=None):
    return fit(DATA.format(alpha=2.5, seed=seed, noise=noise), "fedgradmp", clients=50,
               rounds=rounds, local_steps=K, batch_size=30, seed=seed, metering=False,
               **({} if participation is None else {"participation": participation}))


def main(out):
    doc = {"command": "python docs/sparse/papers.py docs/sparse/papers.json"}
    # Fig. 10 (noiseless, alpha = 2.5, 50 clients, b = 30): rounds to 1e-8 by K
    doc["local_steps"] = {"setting": "fedgradmp, alpha 2.5, 50 clients, b 30, seed 0",
                          "rounds_to_1e-8": {str(K): _rounds_to(_fig10(K).relative_error)
                                             for K in KS}}
    # Fig. 11: cohort size L of the 50 clients (participation L / 50), K = 3, seeds 0-2
    doc["cohort"] = {"setting": "fedgradmp, alpha 2.5, 50 clients, b 30, K 3, participation L/50",
                     "rounds_to_1e-8": {str(L): [_rounds_to(_fig10(3, seed=s, participation=L / 50)
                                                            .relative_error) for s in (0, 1, 2)]
                                        for L in COHORTS}}
    # Fig. 10 noisy (noise sd 2e-3): the floor after 50 rounds, K = 3 and 9
    doc["noisy"] = {"setting": "fedgradmp, alpha 2.5, noise sd 2e-3, 50 clients, b 30, 50 rounds",
                    "final_relative_error": {str(K): _fig10(K, noise=",noise=0.002", rounds=50)
                                             .relative_error[-1] for K in (3, 9)}}
    # Jeong et al. Fig. 8: FedIterHT's steps (30 clients, alpha 1.0, b 40, K 3, 100 rounds)
    rows = []
    for lr in (None,) + STEPS:
        r = fit(DATA.format(alpha=1.0, seed=0, noise=""), "fediterht", clients=30, rounds=100,
                local_steps=3, batch_size=40, seed=0, metering=False,
                **({} if lr is None else {"lr": lr}))
        rows.append({"lr": r.lr, "default": lr is None, "final_relative_error": r.relative_error[-1],
                     "max_relative_error": max(r.relative_error),
                     "support_recall": r.support_recall})
    doc["fediterht_steps"] = {"setting": "fediterht, alpha 1.0, 30 clients, b 40, K 3, 100 rounds",
                              "runs": rows}
    with open(out, "w") as fh:
        json.dump(doc, fh, indent=1)
        fh.write("\n")
    print(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
