"""Papers 000 (Fed-HT / FedIter-HT) and 003 (FedGradMP), each run through the user-facing command
(``vflpriv sparse``) with ``--json``, so a table reports exactly what a user running the printed
command gets; :func:`_cli` is shared with the entries of papers 001 (:mod:`.p001`) and 002
(:mod:`.p002`).  The paper's numbers in the tables are those of the notes on the papers.  Paper
000's Fig. 3 entries run both the shared setting (the command's default step) and each method's
best setting from a grid (the paper's local steps, steps relative to 1/L).
"""
from __future__ import annotations

import contextlib
import io
import json
import math
import os
import tempfile

from . import Claim, Outcome, Panel


def _cli(argv):
    """Run ``vflpriv ARGV --json TMP`` in-process, quietly; return the JSON."""
    from ..cli.main import main

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "out.json")
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()) as err:
            rc = main(list(argv) + ["--json", path])
        if rc != 0:
            raise RuntimeError(f"vflpriv {' '.join(argv)} exited {rc}: {err.getvalue().strip()}")
        with open(path) as f:
            return json.load(f)


def _cmd(argv):
    return "vflpriv " + " ".join(argv)


def _rounds_to(curve, level):
    """First round whose value is <= level (None if never)."""
    for t, v in enumerate(curve):
        if v is not None and v <= level:
            return t
    return None


# Paper 000, section A4: gamma grid-searched per algorithm over {10, 1, 0.6, 0.3, 0.1, 0.06, 0.03,
# 0.01, 0.001}, K over {3, 5, 8, 10}.  That grid is for the paper's data scale: on ours every
# gamma >= 0.001 diverges on the squared loss (the default step 1/L is 2.5e-4 there, 1e-3 on the
# logistic one), so gamma is searched relative to the default step, gamma = c / L, over a factor-2
# grid of c from 1/4 to 64, with the paper's K grid.
STEP_FACTORS = (0.25, 0.5, 1, 2, 4, 8, 16, 32, 64)
LOCAL_STEPS = (3, 5, 8, 10)
FAST_STEP_FACTORS = (1, 2, 4, 8, 16)
FAST_LOCAL_STEPS = (3, 5)


def p000_fig3a(fast, seed=0):
    return _p000_fig3(fast, seed, logistic=False)


def p000_fig3b(fast, seed=0):
    return _p000_fig3(fast, seed, logistic=True)


def _final(res):
    v = res["objective"][-1]
    return v if v is not None and math.isfinite(v) else math.inf


_TUNED = {}     # (fast, logistic, algorithm) -> (lr, K): the grid is searched once, on seed 0


def _grid_best(fast, logistic, algo, base):
    """Paper 000's tuning: every (gamma, K) of the grid on seed 0's data, the lowest final
    objective wins; the seeds then run at the chosen setting."""
    key = (fast, logistic, algo)
    if key not in _TUNED:
        step = _cli(base(0))["lr"]                        # the default 1/L on seed 0's data
        gammas = [c * step for c in (FAST_STEP_FACTORS if fast else STEP_FACTORS)]
        Ks = (1,) if algo == "diht" else FAST_LOCAL_STEPS if fast else LOCAL_STEPS
        best = (math.inf, None)
        for g in gammas:
            for K in Ks:
                argv = base(0) + ["--lr", f"{g:.6g}", "--local-steps", str(K)]
                try:
                    f = _final(_cli(argv))
                except RuntimeError:                       # a step that overflows: not chosen
                    f = math.inf
                if f < best[0]:
                    best = (f, (g, K))
        _TUNED[key] = best[1]
    return _TUNED[key]


def _p000_fig3(fast, seed, logistic):
    R = 30 if fast else 200
    paper = "50 rounds vs 200 (~4x)" if logistic else "20 rounds vs > 100 (~5x)"
    want = 4 if logistic else 5
    algos = ("fediterht", "fedht", "diht")

    def base(algo):
        def argv(s):
            data = (f"synthetic-000:alpha=0.5,beta=0.5,seed={s}"
                    + (",logistic=1" if logistic else ""))
            return (["sparse", "--algorithm", algo, "--data", data, "--rounds", str(R), "--seed",
                     str(s)] + (["--loss", "logistic"] if logistic else [])
                    + (["--clients", "30"] if fast else []))
        return argv

    shared = {a: base(a)(seed) for a in algos}
    tuned_at = {a: _grid_best(fast, logistic, a, base(a)) for a in algos}
    tuned = {a: base(a)(seed) + ["--lr", f"{g:.6g}", "--local-steps", str(K)]
             for a, (g, K) in tuned_at.items()}
    runs = {"shared": {a: _cli(v) for a, v in shared.items()},
            "tuned": {a: _cli(v) for a, v in tuned.items()}}
    panels, claims = [], []
    for mode, res in runs.items():
        label = ("shared setting (the command's default step 1/L, K = 3)" if mode == "shared"
                 else "each method's best (gamma, K) on a grid (the paper's K, gamma = c / L)")
        curves = {a: (list(range(len(r["objective"]))),
                      [math.nan if v is None else v for v in r["objective"]])
                  for a, r in res.items()}
        panels.append(Panel(f"{'logistic' if logistic else 'squared'} loss, {mode}", "round",
                            "objective", curves, logy=True))
        target = _final(res["diht"])
        t_it = _rounds_to(res["fediterht"]["objective"], target)
        ratio = R / max(t_it if t_it is not None else R + 1, 1)
        claims.append(Claim(
            f"{label}: FedIter-HT reaches the objective Distributed-IHT reaches after {R} rounds "
            f"in about {want}x fewer rounds (taken as: >= {want - 1}x)", paper,
            f"DIHT f({R}) = {target:.4g}; FedIter-HT reaches it at round "
            f"{t_it if t_it is not None else f'> {R}'}",
            ratio, ">=", want - 1, f"{R} / (FedIter-HT's rounds to DIHT's f({R}))"))
        fi, fh = _final(res["fediterht"]), _final(res["fedht"])
        claims.append(Claim(f"{label}: FedIter-HT ends below Fed-HT",
                            "qualitative (Fig. 6: consistently better)",
                            f"FedIter-HT {fi:.4g}, Fed-HT {fh:.4g}",
                            (fh - fi) / abs(fh) if math.isfinite(fh) and math.isfinite(fi)
                            else None, ">", 0.0, "(Fed-HT - FedIter-HT) / Fed-HT at the end"))
    grid = (f"gamma = c / L, c in "
            f"{{{', '.join(f'{c:g}' for c in (FAST_STEP_FACTORS if fast else STEP_FACTORS))}}}, "
            f"K in {{{', '.join(map(str, FAST_LOCAL_STEPS if fast else LOCAL_STEPS))}}}")
    return Outcome(panels, claims,
                   {"commands": "; ".join(map(_cmd, list(shared.values()) + list(tuned.values()))),
                    "grid": grid, "chosen (gamma, K)": {a: [float(f"{v[0]:.6g}"), v[1]]
                                                         for a, v in tuned_at.items()}},
                   ["shared setting: the command's default step 1/L (L the largest client "
                    "smoothness) and K = 3 for every method; tuned: the paper's K grid and a step "
                    "grid relative to 1/L (" + grid
                    + (", a sub-grid under --fast" if fast else "") + "; DIHT has K = 1) "
                    "searched per method on seed 0's data, lowest final objective; the seeds "
                    "then run at the chosen (gamma, K)"])


def p000_fig2(fast, seed=0):
    R = 20 if fast else 100
    panels, claims = [], []
    for algo in ("fedht", "fediterht"):
        curves, ends = {}, {}
        for ab in ("0.1", "0.5", "1"):
            argv = ["sparse", "--algorithm", algo, "--data",
                    f"synthetic-000:alpha={ab},beta={ab},seed={seed}", "--rounds", str(R),
                    "--seed", str(seed)] + (["--clients", "30"] if fast else [])
            obj = _cli(argv)["objective"]
            rel = [v / obj[0] for v in obj]
            curves[f"(alpha, beta) = ({ab}, {ab})"] = (list(range(len(rel))), rel)
            ends[ab] = rel[-1]
        panels.append(Panel(algo, "round", "f(x_t) / f(x_0)", curves, logy=True))
        keys = list(ends)
        claims.append(Claim(f"{algo}: a higher degree of non-IID converges slower (f(x_R)/f(x_0) "
                            "grows with (alpha, beta))", "qualitative",
                            ", ".join(f"({k},{k}): {v:.3g}" for k, v in ends.items()),
                            min(ends[b] - ends[a] for a, b in zip(keys, keys[1:])), ">", 0.0,
                            "min step of f(x_R)/f(x_0) from one (alpha, beta) to the next"))
    return Outcome(panels, claims, {"rounds": R, "clients": 30 if fast else 100, "seed": seed},
                   ["the data sets differ per (alpha, beta), so the curves are normalized by "
                    "f(x_0)"])


def p003_fig3(fast, seed=0):
    return _p003_compare(fast, seed, alpha=0.2, extra_claim=None)


def p003_fig4(fast, seed=0):
    return _p003_compare(fast, seed, alpha=0.5, extra_claim="high")


def _log10(v):
    return math.log10(max(v, 1e-300))


def _p003_compare(fast, seed, alpha, extra_claim):
    R = 15 if fast else 50
    data = f"synthetic-003:alpha={alpha},e=0.2,sparsity=15,seed={seed}"
    algos = ("fedgradmp", "fediterht", "fedmid", "feddualavg")
    argv = {a: ["sparse", "--algorithm", a, "--data", data, "--tau", "15", "--rounds", str(R),
                "--seed", str(seed)] + (["--clients", "20"] if fast else ["--clients", "50"])
            for a in algos}
    res = {a: _cli(v) for a, v in argv.items()}
    curves = {a: (list(range(len(r["relative_error"]))), [max(e, 1e-17) for e in
                                                          r["relative_error"]])
              for a, r in res.items()}
    ends = {a: r["relative_error"][-1] for a, r in res.items()}
    lvl = 1e-3
    reach = {a: _rounds_to(r["relative_error"], lvl) for a, r in res.items()}
    others = [a for a in algos if a != "fedgradmp"]
    never = R + 1
    claims = [Claim("FedGradMP has the smallest residual (relative) error", "qualitative",
                    ", ".join(f"{a} {v:.3g}" for a, v in ends.items()),
                    min(_log10(ends[a]) for a in others) - _log10(ends["fedgradmp"]), ">", 0.0,
                    "min over the others of log10(their error / FedGradMP's)"),
              Claim(f"FedGradMP converges faster in rounds (first round with relative error "
                    f"<= {lvl:g})", "qualitative",
                    ", ".join(f"{a} {reach[a] if reach[a] is not None else 'never'}"
                              for a in algos),
                    None if reach["fedgradmp"] is None else
                    min(never if reach[a] is None else reach[a] for a in others)
                    - reach["fedgradmp"], ">=", 0.0,
                    f"min over the others of their rounds to {lvl:g} minus FedGradMP's "
                    f"(never = {never})")]
    if extra_claim:
        claims.append(Claim("high heterogeneity (alpha = 0.5): FedGradMP still performs well "
                            "(taken as: relative error <= 1e-6 at the last round)",
                            "qualitative", f"{ends['fedgradmp']:.3g}",
                            _log10(ends["fedgradmp"]), "<=", -6.0,
                            "log10 of FedGradMP's final relative error"))
    return Outcome([Panel(f"15-sparse regression, alpha = {alpha}, e = 0.2", "round",
                          "relative error", curves, logy=True)], claims,
                   {"commands": "; ".join(map(_cmd, argv.values()))},
                   ["baselines use the command's default step sizes (the paper does not state "
                    "its own)"])


def p003_fig9(fast, seed=0):
    data = f"synthetic-003:alpha=0.2,e=0.2,sparsity=15,seed={seed}"
    argv = ["sparse", "--algorithm", "fedgradmp", "--data", data, "--tau", "15", "--rounds", "4",
            "--local-steps", "3", "--seed", str(seed)] + (["--clients", "20"] if fast else [])
    r = _cli(argv)
    rel = r["relative_error"]
    claims = [Claim("FedGradMP reaches the ground truth up to (almost) machine precision in four "
                    "rounds with three local iterations, no learning rate", "~1e-15 at round 4",
                    f"relative error at round 4: {rel[-1]:.3g} (rounds 0-4: "
                    + ", ".join(f"{e:.2g}" for e in rel) + ")", _log10(rel[-1]), "<=", -10.0,
                    "log10 of the relative error at round 4")]
    return Outcome([Panel("FedGradMP, K = 3", "round", "relative error",
                          {"fedgradmp": (list(range(len(rel))), [max(e, 1e-17) for e in rel])},
                          logy=True)], claims, {"command": _cmd(argv)})


