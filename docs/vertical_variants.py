"""Which vertical learner, over ten splits: paired comparisons from docs/peers_seeds10.json.

    python docs/vertical_variants.py          # prints the table docs/vertical.md quotes

docs/peers_seeds10.json is written by

    vflpriv bench peers --tables flights,caravan,default,oj,fair,anes96,wage,college \\
      --systems opacus-replace,dp-bcfw-secure,dp-bcfw-secure-pgd,dp-bcfw-secure-ssp \\
      --epsilons 0.5,1 --delta 1e-6 --seeds 0,1,2,3,4,5,6,7,8,9 --test-fraction 0.2 \\
      --iterations 200 --json docs/peers_seeds10.json --markdown docs/peers_seeds10.md

Every system is fitted on the same split and seed, so the comparisons are paired: for each
(table, epsilon) the mean over the ten seeds of the difference in test AUC, and its standard
error (sample sd of the ten differences / sqrt 10).  A difference is called clear when it is
more than two standard errors from 0 (about a 5% two-sided test per cell; with 16 cells per
comparison, about one cell in such a family is called clear by chance when there is no
difference).  The tests in tests/test_docs_numbers2.py recompute everything from the JSON.
"""
import json
import math
import os

HERE = os.path.dirname(os.path.abspath(__file__))
TABLES = ("flights", "caravan", "default", "oj", "fair", "anes96", "wage", "college")
EPSILONS = (0.5, 1.0)
VERTICAL = ("dp-bcfw-secure", "dp-bcfw-secure-pgd", "dp-bcfw-secure-ssp")
SHORT = {"dp-bcfw-secure": "glm", "dp-bcfw-secure-pgd": "pgd", "dp-bcfw-secure-ssp": "ssp",
         "opacus-replace": "opacus-replace"}


def load(path=os.path.join(HERE, "peers_seeds10.json")):
    with open(path) as fh:
        doc = json.load(fh)
    auc = {(r["table"], r["system"], r["epsilon"], r["seed"]): r["test_auc"]
           for r in doc["rows"] if r.get("test_auc") is not None}
    return doc, auc


def paired(auc, table, eps, a, b, seeds):
    """(mean, standard error) of AUC(a) - AUC(b) over the seeds."""
    d = [auc[(table, a, eps, s)] - auc[(table, b, eps, s)] for s in seeds]
    m = sum(d) / len(d)
    sd = math.sqrt(sum((x - m) ** 2 for x in d) / (len(d) - 1))
    return m, sd / math.sqrt(len(d))


def mean(auc, table, system, eps, seeds):
    return sum(auc[(table, system, eps, s)] for s in seeds) / len(seeds)


def verdict(m, se):
    return "above" if m > 2 * se else ("below" if m < -2 * se else "level")


def summary(doc, auc):
    seeds = doc["settings"]["seeds"]
    rows, counts = [], {}
    for t in TABLES:
        for e in EPSILONS:
            cells = [f"{mean(auc, t, s, e, seeds):.3f}" for s in ("opacus-replace",) + VERTICAL]
            diffs = []
            for a, b in (("dp-bcfw-secure-pgd", "dp-bcfw-secure"),
                         ("dp-bcfw-secure-ssp", "dp-bcfw-secure"),
                         ("dp-bcfw-secure-ssp", "opacus-replace")):
                m, se = paired(auc, t, e, a, b, seeds)
                v = verdict(m, se)
                counts[(a, b, v)] = counts.get((a, b, v), 0) + 1
                diffs.append(f"{m:+.3f} ± {se:.3f}")
            rows.append(f"| {t} | {e:g} | " + " | ".join(cells + diffs) + " |")
    return rows, counts


def main():
    doc, auc = load()
    rows, counts = summary(doc, auc)
    print("| table | eps | opacus-replace | glm | pgd | ssp | pgd - glm | ssp - glm | "
          "ssp - opacus-replace |")
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    for (a, b, v), n in sorted(counts.items()):
        print(f"{SHORT[a]} - {SHORT[b]}: {v} in {n} cells")


if __name__ == "__main__":
    main()
