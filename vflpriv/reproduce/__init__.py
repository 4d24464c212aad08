"""``vflpriv reproduce``: the papers' figures and tables the project can honestly regenerate.

Each entry is a function ``f(fast, seed) -> Outcome`` registered in :data:`ENTRIES` by name
(``004-fig1``, ``000-fig3a``, ...).  It runs the project's own code (``vflpriv.vertical.solve``
for paper 004; the ``vflpriv sparse`` / ``horizontal`` / ``fedp3`` commands for papers 000-003)
on one seed (the seed draws the data and the run), and returns the curves to plot and its claims:
for each, what the paper says (numbers from the notes on the papers), what was measured, and the
measured quantity with the threshold it must clear.  :func:`run_entry` runs the entry on several
seeds and decides each claim by :func:`vflpriv.reproduce.verdict.decide` (a 95% t-interval over
the seeds must clear the threshold).  Nothing in a table is typed in as a result: every
"measured" cell comes from the run.

:func:`reproduce` writes ``NAME.png`` (the figure), ``NAME.md`` (the table) and ``NAME.json``
(the table and the curves) into an output folder.  ``fast=True`` shrinks every setting to a
minute-scale (most entries: seconds) version; its verdicts are on the small problem only.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field


@dataclass
class Claim:
    """One claim measured on one seed: the claim holds on this seed when ``value OP threshold``
    (``value`` None: not measurable on this seed)."""
    claim: str             # what the paper says, in words (with the paper's number when it has one)
    paper: str             # the paper's value or "qualitative"
    measured: str          # what this seed measured, in words
    value: float | None    # the measured quantity
    op: str                # ">", ">=", "<", "<="
    threshold: float
    quantity: str          # what ``value`` is ("ratio of rounds", "min margin", ...)


@dataclass
class Verdict:
    """One row of the measured-vs-paper table: a claim over seeds (keys as in the JSON)."""
    claim: str
    paper: str
    measured: str          # mean and interval of the quantity, and the first seed's details
    verdict: str           # holds | does not hold | inconclusive
    seeds: list
    mean: float | None
    interval: list         # [low, high] (None, None with fewer than two seeds)
    quantity: str
    rule: str              # "quantity OP threshold"
    values: list           # per seed


def combine(per_seed, seeds):
    """:class:`Verdict` rows from ``per_seed`` = one list of :class:`Claim` per seed."""
    from .verdict import decide

    rows = []
    for cs in zip(*per_seed):
        c0 = cs[0]
        values = [c.value for c in cs]
        verdict, mean, iv = decide(values, c0.op, c0.threshold)
        g = (lambda v: "n/a" if v is None else f"{v:.4g}")
        n = len(seeds)
        summary = (f"{c0.quantity}: mean {g(mean)}"
                   + (f", 95% interval [{g(iv[0])}, {g(iv[1])}]" if iv[0] is not None else "")
                   + f" over {n} seed{'s' if n > 1 else ''} (per seed: "
                   + ", ".join(g(v) for v in values) + f"); seed {seeds[0]}: {c0.measured}")
        rows.append(Verdict(c0.claim, c0.paper, summary, verdict, list(seeds), mean, iv,
                            c0.quantity, f"{c0.quantity} {c0.op} {c0.threshold:g}", values))
    return rows


@dataclass
class Panel:
    """One subplot: named curves of (x, y) points."""
    title: str
    xlabel: str
    ylabel: str
    curves: dict                      # label -> (xs, ys)
    logx: bool = False
    logy: bool = False


@dataclass
class Outcome:
    panels: list
    claims: list           # Claim (one seed) or, after run_entry, Verdict (over the seeds)
    settings: dict
    notes: list = field(default_factory=list)


@dataclass(frozen=True)
class Entry:
    name: str
    paper: str          # paper title (papers are cited by title, not by internal number)
    target: str         # "Fig. 1", "Table 2", ...
    summary: str
    module: str         # vflpriv.reproduce.<module>
    function: str


_P004 = ("An Uplink Communication-Efficient Approach to Featurewise Distributed Sparse "
         "Optimization With Differential Privacy (Lou and Cheung)")
_P000 = "Federated Nonconvex Sparse Learning (Tong, Liang, Zhu, Bi): Fed-HT and FedIter-HT"
_P003 = "Federated Gradient Matching Pursuit (Jeong, Needell, Qin): FedGradMP"
_P001 = ("Communication-Efficient and Drift-Robust Federated Learning via Elastic Net (Kim, Woo, "
         "Seo, Kim): FedElasticNet")
_P002 = ("FedP3: Federated Personalized and Privacy-friendly Network Pruning under Model "
         "Heterogeneity (Yi, Gazagnadou, Richtarik, Lyu)")

ENTRIES = {e.name: e for e in [
    Entry("004-fig1", _P004, "Fig. 1", "BCFW convergence under elementary, tau-nice and "
          "(K, tau)-distributed sampling (non-private)", "p004", "fig1"),
    Entry("004-fig2", _P004, "Fig. 2", "BCFW under (K, tau)-distributed sampling for K = 2..16",
          "p004", "fig2"),
    Entry("004-fig3", _P004, "Fig. 3", "distributed DP-BCFW (K = 4) vs centralized DP-FW vs "
          "non-private FW", "p004", "fig3"),
    Entry("004-fig4", _P004, "Fig. 4", "excess empirical risk vs n (log-log), DP-BCFW for "
          "several K and centralized DP-FW", "p004", "fig4"),
    Entry("004-fig5", _P004, "Fig. 5", "private training loss for K = 2..16 user nodes",
          "p004", "fig5"),
    Entry("004-fig6", _P004, "Fig. 6", "private training loss for epsilon 0.001..10",
          "p004", "fig6"),
    Entry("000-fig3a", _P000, "Fig. 3a", "FedIter-HT vs Fed-HT vs Distributed-IHT on "
          "synthetic(0.5, 0.5), rounds to reach DIHT's objective", "horizontal", "p000_fig3a"),
    Entry("000-fig3b", _P000, "Fig. 3b", "the same on the logistic simulation (top 10% of "
          "sigmoid scores labelled 1)", "horizontal", "p000_fig3b"),
    Entry("000-fig2", _P000, "Fig. 2", "Fed-HT / FedIter-HT under (alpha, beta) = (0.1, 0.1), "
          "(0.5, 0.5), (1, 1)", "horizontal", "p000_fig2"),
    Entry("003-fig3", _P003, "Fig. 3", "FedGradMP vs FedIterHT, FedMid, FedDualAvg: relative "
          "error on 15-sparse regression, low heterogeneity", "horizontal", "p003_fig3"),
    Entry("003-fig4", _P003, "Fig. 4", "the same comparison under high heterogeneity "
          "(alpha = 0.5)", "horizontal", "p003_fig4"),
    Entry("003-fig9", _P003, "Fig. 9", "FedGradMP reaches the ground truth to machine "
          "precision in four rounds with three local iterations", "horizontal", "p003_fig9"),
    Entry("001-table2", _P001, "Tables 2-3", "uplink nonzeros, entropy and accuracy: FedProx, "
          "SCAFFOLD, FedDyn vs Algs. 1-3 (digits MLP in place of MNIST)", "p001", "p001_table2"),
    Entry("002-table2", _P002, "Table 2", "local pruning strategies: fixed vs uniform vs "
          "ordered dropout (digits MLP and CNN in place of the image sets)", "p002",
          "p002_table2"),
]}


SEEDS = 5          # default number of seeds
FAST_SEEDS = 3     # default under --fast


def default_seeds(fast):
    """The seeds used when ``--seeds`` is not given: 0..4 (``--fast``: 0..2)."""
    return list(range(FAST_SEEDS if fast else SEEDS))


def run_entry(name, fast=False, seeds=None):
    """Run one entry on every seed and return its :class:`Outcome` with the claims decided over
    the seeds (no files written).  Panels, settings and notes are those of the first seed."""
    import importlib

    from .environment import runtime_settings

    e = ENTRIES[name]
    seeds = default_seeds(fast) if seeds is None else [int(s) for s in seeds]
    f = getattr(importlib.import_module(f"vflpriv.reproduce.{e.module}"), e.function)
    runtime_settings()
    outcomes = [f(fast, s) for s in seeds]
    first = outcomes[0]
    settings = dict(first.settings, seeds=seeds)
    return Outcome(first.panels, combine([o.claims for o in outcomes], seeds), settings,
                   first.notes + [f"figure: seed {seeds[0]}; claims: {len(seeds)} seeds "
                                  f"({', '.join(map(str, seeds))}), 95% t-interval"])


def reproduce(name, out, fast=False, seeds=None):
    """Run ``name`` and write NAME.png, NAME.md, NAME.json into ``out``; return the paths
    and the outcome."""
    from ..outputs import check_output, write_atomic
    from .environment import describe

    e = ENTRIES[name]
    os.makedirs(out, exist_ok=True)
    png, md, js = output_paths(name, out)
    for path in (png, md, js):                 # before the work
        check_output(path, "--out")
    t0 = time.perf_counter()
    oc = run_entry(name, fast, seeds)
    seconds = time.perf_counter() - t0
    plot(oc, f"{name}: {e.target} of {e.paper.split(':')[0].split(' (')[0]}", png)
    text = markdown(e, oc, fast, seconds, os.path.basename(png))
    write_atomic(md, lambda fh: fh.write(text.encode("utf-8")))
    blob = json.dumps({"name": name, "paper": e.paper, "target": e.target, "fast": fast,
                       "seconds": seconds, "seeds": oc.settings["seeds"],
                       "settings": oc.settings, "environment": describe(),
                       "claims": [dict(c.__dict__) for c in oc.claims],
                       "panels": [dict(p.__dict__) for p in oc.panels], "notes": oc.notes},
                      indent=1, default=_jsonable) + "\n"
    write_atomic(js, lambda fh: fh.write(blob.encode("utf-8")))
    return {"png": png, "md": md, "json": js, "seconds": seconds, "outcome": oc}


def output_paths(name, out):
    """NAME.png, NAME.md, NAME.json in ``out``."""
    return tuple(os.path.join(out, f"{name}.{ext}") for ext in ("png", "md", "json"))


def _jsonable(v):
    import numpy as np

    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    return str(v)


def _mode(fast, seeds):
    return (f"{'--fast (small settings)' if fast else 'full'}, seeds "
            f"{', '.join(map(str, seeds))}")


def index_markdown(done, fast):
    """All entries' tables on one page (``reproduce --all``): ``done`` = [(name, result)]."""
    seeds = done[0][1]["outcome"].settings["seeds"] if done else []
    lines = [f"# vflpriv reproduce --all{' --fast' if fast else ''}", "",
             f"Mode: {_mode(fast, seeds)}.", ""]
    for name, res in done:
        e, oc = ENTRIES[name], res["outcome"]
        lines += [f"## {name}: {e.target}, {e.summary}", "",
                  f"{res['seconds']:.1f} s. *{e.paper}*.", "", table(oc.claims), ""]
        lines += [f"- {n}" for n in oc.notes] + ([""] if oc.notes else [])
        lines += [f"![{name}]({os.path.basename(res['png'])})", ""]
    return "\n".join(lines)


def table(claims):
    rows = ["| claim | paper | measured here | verdict |", "|---|---|---|---|"]
    rows += [f"| {c.claim} | {c.paper} | {c.measured} | {c.verdict} |" for c in claims]
    return "\n".join(rows)


def markdown(entry, oc, fast, seconds, png_name):
    lines = [f"# {entry.name}: {entry.target}, {entry.summary}", "",
             f"Paper: *{entry.paper}*.", "",
             f"Mode: {_mode(fast, oc.settings['seeds'])}; {seconds:.1f} s.", "",
             "Settings: " + ", ".join(f"{k} = {v}" for k, v in oc.settings.items()), "",
             table(oc.claims), ""]
    if oc.notes:
        lines += [f"- {n}" for n in oc.notes] + [""]
    lines += [f"![{entry.name}]({png_name})", ""]
    return "\n".join(lines)


def plot(oc, title, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    k = len(oc.panels)
    cols = min(k, 3)
    rows = (k + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.6 * rows), squeeze=False)
    for ax, p in zip(axes.flat, oc.panels):
        for label, (xs, ys) in p.curves.items():
            ax.plot(xs, ys, marker="o" if len(xs) <= 12 else None, ms=3, label=label)
        if p.logx:
            ax.set_xscale("log")
        if p.logy:
            ax.set_yscale("log")
        ax.set_title(p.title, fontsize=9)
        ax.set_xlabel(p.xlabel)
        ax.set_ylabel(p.ylabel)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[k:]:
        ax.set_visible(False)
    import textwrap

    fig.suptitle(textwrap.fill(title, int(13 * 4.6 * cols)), fontsize=9)
    fig.tight_layout()
    from ..outputs import save_figure

    fig.set_dpi(90)
    save_figure(fig, path)
    plt.close(fig)
