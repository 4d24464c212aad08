"""Paired comparisons of ``vflpriv bench peers`` rows: a system against a reference on the same
splits.

Every seed is one split and one noise draw shared by all systems, so the per-seed difference
d_s = AUC_system(s) - AUC_reference(s) removes the split's share of the variance (a table whose
splits spread by 0.1 in AUC can still tell two systems apart by 0.01).  Over the n seeds that
both systems ran, the mean difference and its two-sided 95% Student t interval

    mean(d) +- t_{0.975, n - 1} sd(d) / sqrt(n)

say whether the system is above the reference (the interval above 0), below it (below 0) or
level with it (the interval holds 0: these seeds cannot tell).  A mean taken over a few seeds
of a small table is mostly the split's luck; the interval says how much.
"""
from __future__ import annotations

import math
import statistics

#: the reference of the bar's DP comparisons: DP-SGD under the relation of vflpriv's rows
REFERENCES = ("opacus-replace", "opacus")
#: the systems compared with it
COMPARED = ("dp-bcfw-secure", "dp-bcfw-secure-glm", "dp-bcfw-secure-pgd", "dp-bcfw-secure-ssp")


def t_interval(diffs, level=0.95) -> tuple:
    """``(mean, sd, lo, hi)`` of the paired differences: the Student t interval of the mean
    (``sd``, ``lo``, ``hi`` None with fewer than two values)."""
    n = len(diffs)
    mean = statistics.fmean(diffs)
    if n < 2:
        return mean, None, None, None
    from scipy.stats import t

    sd = statistics.stdev(diffs)
    half = float(t.ppf(0.5 + level / 2.0, n - 1)) * sd / math.sqrt(n)
    return mean, sd, mean - half, mean + half


def verdict(lo, hi) -> str:
    if lo is None:
        return "one seed"
    return "above" if lo > 0 else "below" if hi < 0 else "level"


def paired(rows, reference=None) -> list:
    """Per (table, epsilon, compared system): the system's test AUC minus ``reference``'s
    (default: the first of :data:`REFERENCES` present in ``rows``) over the seeds both ran."""
    cells = {}                                  # (table, epsilon, system) -> {seed: AUC}
    for r in rows:
        if r.get("test_auc") is not None and r.get("epsilon") is not None:
            cells.setdefault((r["table"], r["epsilon"], r["system"]), {})[r["seed"]] = \
                r["test_auc"]
    present = {system for (_, _, system) in cells}
    if reference is None:
        reference = next((s for s in REFERENCES if s in present), None)
    if reference is None or reference not in present:
        return []
    out = []
    for (table, eps, system), auc in cells.items():
        ref = cells.get((table, eps, reference), {})
        seeds = sorted(set(auc) & set(ref))
        if system not in COMPARED or not seeds:
            continue
        mean, sd, lo, hi = t_interval([auc[s] - ref[s] for s in seeds])
        out.append({"table": table, "epsilon": eps, "system": system, "reference": reference,
                    "seeds": len(seeds), "mean_difference": mean, "sd": sd,
                    "ci95": None if lo is None else [lo, hi], "verdict": verdict(lo, hi)})
    return out


def lines(entries) -> list:
    """The page's lines, one per entry."""
    out = []
    for p in entries:
        ci = ("" if p["ci95"] is None
              else f" (95% CI {p['ci95'][0]:+.3f} .. {p['ci95'][1]:+.3f})")
        out.append(f"- {p['table']}, eps {p['epsilon']:g}: `{p['system']}` minus "
                   f"`{p['reference']}`, paired over {p['seeds']} seeds: "
                   f"{p['mean_difference']:+.3f}{ci}: {p['verdict']}")
    return out
