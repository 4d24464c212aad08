"""Paper 001 (FedElasticNet), Tables 2-3 (IID MNIST, 10% participation, 100 rounds; notes A.7-A.9),
on digits with an MLP, through ``vflpriv horizontal``.

Like for like (issue 24).  Table 3's baselines send the model theta_k; Algs. 1-3 send the
thresholded update Delta_k.  For FedDyn the paper gives both: 308.27 (theta sent) and 27.76
(Delta sent, in parentheses); Alg. 3's 24.76 is 0.08 of the first and 0.89 of the second.  Here
every method sends Delta and the meter also measures the theta-sent form of each baseline, so each
ratio is compared with the paper's ratio of the same kind:

- "Delta vs theta-sent base": the paper's printed ratio (Algs. 1-3: 0.18, 0.29, 0.08);
- "Delta vs Delta-sent base": the paper has it for FedDyn only (0.89); for FedProx and SCAFFOLD
  it reports no Delta-sent entropy.

The bin alignment is unstated (notes A.8): both are reported, ``round`` (bins centred on
multiples of 0.01, so |v| < 0.005 is the zero bin) and ``floor`` (bins [k w, (k + 1) w)).

Hyperparameters: Table 5's MNIST row (the command's defaults), and, beside it, lambda1 searched on
the paper's grid {1e-2, 1e-4, 1e-6, 1e-8} per algorithm, keeping "the largest lambda1 that does
not hurt accuracy" (taken as: mean accuracy of the last 5 rounds at most 1 point below the base
method's, on seed 0).  The threshold epsilon stays at Table 5's value (the paper's "doubling while
performance improved" search is not run).
"""
from __future__ import annotations

from . import Claim, Outcome, Panel
from .horizontal import _cli, _cmd

# Table 2 (nonzeros, x 1e7) and Table 3 (entropy) for IID MNIST: (base, variant); FedDyn's
# Delta-sent entropy 27.76 (notes A.9).
_T2 = {"fedprox": (20.3, 7.51), "scaffold": (40.58, 36.98), "feddyn": (20.3, 2.55)}
_T3 = {"fedprox": (266.26, 47.29), "scaffold": (286.88, 83.51), "feddyn": (308.27, 24.76)}
_T3_DELTA = {"feddyn": 27.76}
_ALG = {"fedprox": "Alg. 1", "scaffold": "Alg. 2", "feddyn": "Alg. 3"}
LAMBDA1_GRID = (1e-2, 1e-4, 1e-6, 1e-8)
LAST = 5          # accuracy: mean of the last 5 rounds

_TUNED = {}       # (fast, algo) -> lambda1 chosen on seed 0


def _acc(r):
    h = r["accuracy_history"]
    return sum(h[-LAST:]) / len(h[-LAST:])


def _base(fast, seed):
    return ["horizontal", "--data", "digits", "--seed", str(seed)] + (
        ["--clients", "20", "--rounds", "8", "--participation", "0.2", "--local-epochs", "1"]
        if fast else ["--clients", "100", "--rounds", "100", "--participation", "0.1"])


def _tune(fast, algo):
    """The largest lambda1 of the grid whose accuracy is within 1 point of the base's (seed 0)."""
    if (fast, algo) not in _TUNED:
        plain = _base(fast, 0) + ["--algorithm", algo]
        ref = _acc(_cli(plain))
        chosen = None
        for lam in LAMBDA1_GRID:                     # largest first
            if _acc(_cli(plain + ["--elastic-net", "--lambda1", f"{lam:g}"])) >= ref - 0.01:
                chosen = lam
                break
        _TUNED[(fast, algo)] = chosen
    return _TUNED[(fast, algo)]


def p001_table2(fast, seed=0):
    base = _base(fast, seed)
    claims, nnz_curves, acc_curves, cmds, chosen = [], {}, {}, [], {}
    for algo in ("fedprox", "scaffold", "feddyn"):
        plain = base + ["--algorithm", algo]
        enet = plain + ["--elastic-net"]
        cmds += [_cmd(plain), _cmd(enet)]
        a, b = _cli(plain), _cli(enet)
        for lab, r in ((algo, a), (f"{algo} + elastic net", b)):
            cum, s = [], 0
            for pr in r["per_round"]:
                s += pr["uplink_nonzeros"]
                cum.append(s)
            nnz_curves[lab] = (list(range(1, len(cum) + 1)), cum)
            acc_curves[lab] = (list(range(1, len(r["accuracy_history"]) + 1)),
                               r["accuracy_history"])
        alg = _ALG[algo]
        pn, pe = _T2[algo], _T3[algo]
        rn = b["uplink_nonzeros"] / a["uplink_nonzeros"]
        claims.append(Claim(f"{alg} sends fewer uplink nonzeros than {algo} (cumulative; ratio)",
                            f"{pn[1] / pn[0]:.2f} ({pn[1]} / {pn[0]} x 1e7)",
                            f"{rn:.2f} ({b['uplink_nonzeros']:,} / {a['uplink_nonzeros']:,})",
                            rn, "<", 1.0, "nonzeros ratio"))
        for binning in ("round", "floor"):
            key = f"pooled/{binning}"
            hb = b["entropy_variants"][key]
            for form, ha, paper in (
                    ("theta", a["entropy_variants_model_sent"][key],
                     f"{pe[1] / pe[0]:.2f} ({pe[1]} / {pe[0]})"),
                    ("Delta", a["entropy_variants"][key],
                     f"{pe[1] / _T3_DELTA[algo]:.2f} ({pe[1]} / {_T3_DELTA[algo]})"
                     if algo in _T3_DELTA else "not reported (qualitative: lower)")):
                ratio = hb / ha if ha else None
                claims.append(Claim(
                    f"{alg} (sends Delta) has a lower cumulative uplink entropy than {algo} "
                    f"sending {form} ({binning} bins of 0.01; ratio)", paper,
                    f"{hb:.3g} / {ha:.3g}", ratio, "<", 1.0,
                    f"entropy ratio, {form}-sent base, {binning} bins"))
        claims.append(Claim(f"{alg} keeps {algo}'s accuracy or loses marginally "
                            f"(taken as <= 2 points; mean of the last {LAST} rounds)",
                            "qualitative", f"{_acc(b):.3f} vs {_acc(a):.3f}",
                            _acc(b) - _acc(a), ">=", -0.02, "accuracy difference"))
        lam = chosen[algo] = _tune(fast, algo)
        if lam is None:
            continue
        tuned = plain + ["--elastic-net", "--lambda1", f"{lam:g}"]
        cmds.append(_cmd(tuned))
        c = _cli(tuned)
        rt = c["uplink_nonzeros"] / a["uplink_nonzeros"]
        claims.append(Claim(f"{alg} with lambda1 = {lam:g} from the paper's grid: fewer uplink "
                            f"nonzeros than {algo} (ratio)", f"{pn[1] / pn[0]:.2f}",
                            f"{rt:.2f}", rt, "<", 1.0, "nonzeros ratio, tuned lambda1"))
        key = "pooled/round"
        ht, ha = c["entropy_variants"][key], a["entropy_variants"][key]
        claims.append(Claim(f"{alg} with lambda1 = {lam:g}: lower entropy than {algo} sending "
                            "Delta (round bins; ratio)",
                            f"{pe[1] / _T3_DELTA[algo]:.2f}" if algo in _T3_DELTA
                            else "not reported (qualitative: lower)",
                            f"{ht:.3g} / {ha:.3g}", ht / ha if ha else None, "<", 1.0,
                            "entropy ratio, Delta-sent base, round bins, tuned lambda1"))
    return Outcome([Panel("cumulative uplink nonzeros", "round", "nonzeros", nnz_curves,
                          logy=True),
                    Panel("test accuracy", "round", "accuracy", acc_curves)], claims,
                   {"commands": "; ".join(cmds), "lambda1 chosen (seed 0)": chosen},
                   ["digits (8x8, 1797 images) and an MLP stand in for MNIST; the paper's "
                    "ratios are for MNIST IID, 10% participation, 100 rounds",
                    "the paper's Algs. 1-3 entropies (Table 3) are against baselines sending "
                    "theta; its FedDyn-sending-Delta value (27.76) is the like-for-like one "
                    "(ratio 0.89); the bin alignment is unstated, both are shown"])
