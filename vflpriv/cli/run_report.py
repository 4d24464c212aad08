"""What ``vflpriv run`` prints and writes once a run has ended: the JSON object, the summary on
stdout (each dp-bcfw-secure path's own lines come from its path object, ``secure.paths``) and
the plot.
"""
from __future__ import annotations

import os
import sys

import numpy as np


def results(args, cfg, sol, data, test) -> dict:
    """The JSON object: the Solution's fields, dp-bcfw-secure's section and defaults, the label
    party, classification metrics (training and held-out), the calibration comparison and the
    Flower section."""
    from ..vertical.api import calibration_comparison

    out = sol.to_dict()
    if getattr(args, "alignment_report", None) is not None:
        out["alignment"] = args.alignment_report
    if getattr(args, "range_table", None) is not None:
        out["ranges"] = {"file": os.path.abspath(args.ranges), "clipped": {
            str(k): per for k, (_, per) in sorted(args.range_report.items())}}
    if sol.algorithm == "dp-bcfw-secure":
        out["secure"] = {k: sol.extra[k] for k in ("secure_products", "frac_bits", "feature_cap",
                                                   "row_clips", "setup_seconds",
                                                   "bytes_by_type")}
        out["defaults"] = sol.extra.get("defaults", [])
        for k in ("path", "helper_party", "sigmoid", "step", "step_size", "scale", "ridge",
                  "fit_iterations"):
            if k in sol.extra:
                out["secure"][k] = sol.extra[k]
        out["secure"]["helpers"] = _helpers(sol, data)
    if args.algorithm not in ("fw", "dpfw"):
        lp = sol.extra.get("label_party", "all")
        out["label_party"] = "all" if lp is None else lp
    if args.loss != "squared":
        from ..vertical.metrics import classification_metrics

        m = classification_metrics(data.A, data.y, sol.x, sol.intercept, args.loss)
        out["accuracy"], out["auc"] = m["accuracy"], m["auc"]
        out["log_loss"], out["majority_accuracy"] = m["log_loss"], m["majority_accuracy"]
        if test is not None:
            mt = classification_metrics(test[0], test[1], sol.x, sol.intercept, args.loss)
            out["test_accuracy"], out["test_auc"] = mt["accuracy"], mt["auc"]
            out["test_log_loss"], out["majority_accuracy"] = mt["log_loss"], \
                mt["majority_accuracy"]
            out["training_majority_accuracy"] = m["majority_accuracy"]
            out["test_rows"] = mt["rows"]
    if args.compare_calibration and cfg.private and args.algorithm == "dp-bcfw":
        # on the run's own sketch (an unseeded run's sketch comes from entropy, not from cfg)
        out["calibration_comparison"] = calibration_comparison(
            data, sketch_seed=sol.extra["sketch_seed"], **dict(cfg.options(), eta=sol.eta))
    if sol.extra.get("flower") is not None:
        out["flower"] = _flower_section(sol)
    return out


def print_results(args, sol, out):
    """The summary on stdout: objective, bytes, privacy; accuracy; Flower bytes; calibrations."""
    if "alignment" in out:
        a = out["alignment"]
        sys.stdout.write(f"aligned by private set intersection: {a['intersection_size']} common "
                         f"rows of {a['party_rows']} per party, {_fmt_bytes(a['bytes']['total'])}"
                         f" framed, {a['seconds']:.2f} s\n")
    _summary(sol, out)
    if getattr(args, "new_ledger", False) and sol.privacy:
        sys.stdout.write(f"  ledger: {args.ledger} was new: its whole budget is this run's "
                         f"target, epsilon {sol.privacy['target_epsilon']:g} at delta "
                         f"{sol.privacy['delta']:g} (vflpriv ledger init sets a budget across "
                         "runs)\n")
    if "accuracy" in out:
        sys.stdout.write(_metrics_line(out) + "\n")
    if "flower" in out:
        f = out["flower"]
        sys.stdout.write(f"  {f['backend']}: uplink {_fmt_bytes(f['uplink_flower_bytes'])} in "
                         f"Flower messages for {_fmt_bytes(f['uplink_frame_bytes'])} of frames; "
                         f"downlink {_fmt_bytes(f['downlink_flower_bytes'])} for "
                         f"{_fmt_bytes(f['downlink_frame_bytes'])}\n")
    if args.compare_calibration:
        _print_comparison(out.get("calibration_comparison"))


def _metrics_line(out):
    """AUC first, then log-loss, then accuracy beside the majority-class share of the same rows
    (an accuracy at that share has learned nothing)."""
    def part(prefix, rows, auc, ll, acc, maj):
        a = "n/a" if auc is None else f"{auc:.4f}"
        s = f"{prefix} AUC {a}"
        if ll is not None:
            s += f", log-loss {ll:.4f}"
        return s + f", accuracy {acc:.4f} (majority class {maj:.4f}{rows})"

    if "test_accuracy" in out:
        return (part("  held-out", f", {out['test_rows']} rows", out["test_auc"],
                     out["test_log_loss"], out["test_accuracy"], out["majority_accuracy"])
                + ";" + part(" training", "", out["auc"], out["log_loss"], out["accuracy"],
                             out["training_majority_accuracy"]))
    return part("  training", "", out["auc"], out["log_loss"], out["accuracy"],
                out["majority_accuracy"])


def _flower_section(sol) -> dict:
    """The JSON ``flower`` section: Flower message bytes beside the project's frame bytes (the
    in-process count), per party and in total, and each party's own spend."""
    info = sol.extra["flower"]
    t = info["totals"]
    return {"backend": info["backend"], "uplink_flower_bytes": t["uplink"],
            "downlink_flower_bytes": t["downlink"], "uplink_frame_bytes": t["uplink_frames"],
            "downlink_frame_bytes": t["downlink_frames"], "per_party": info["bytes"],
            "party_spend": info.get("party_spend")}


def _fmt_bytes(b):
    from ..units import format_bytes       # SI units, as everywhere (vflpriv/units.py)

    return format_bytes(b)


def _print_comparison(cmp):
    """--compare-calibration on the terminal: each calibration's noise and what it spends."""
    w = sys.stdout.write
    if cmp is None:
        w("  calibration comparison: only for a private dp-bcfw run (finite --epsilon)\n")
        return
    a = cmp["accountant"]
    w(f"  calibration comparison at delta={a['delta']:g} (epsilon by the {a['accountant']} "
      "accountant):\n")
    for name in ("accountant", "paper"):
        c = cmp[name]
        w(f"    {name:<10} index noise scale {c['index_scale']:.4g}, feature noise sigma "
          f"{c['feature_sigma']:.4g}, epsilon {c['epsilon']:.4g}\n")


def _summary(sol, out):
    w = sys.stdout.write
    chose = (sol.selection or {}).get("seconds")
    path = _secure_path(sol)
    rounds = path.rounds_text(sol) if path else f"{sol.iterations} iterations"
    w(f"{sol.algorithm}: {rounds}, K={sol.K}, n={sol.n}, "
      f"{sol.seconds:.2f} s" + (f" ({chose:.2f} s of it choosing eta)" if chose else "") + "\n")
    w(f"  objective {out['initial_objective']:.6g} -> {out['final_objective']:.6g}, "
      f"support {out['support_size']}\n")
    holder = "party 0" if sol.algorithm in ("dp-bcfw", "bcfw", "dfw") else "label party"
    icpt = "" if sol.intercept is None else f"; intercept {sol.intercept:.4g} ({holder})"
    if sol.eta is not None:
        how = f"auto: {sol.eta_rule}" if sol.eta_rule else "as given"
        w(f"  eta {sol.eta:.4g} per party ({how}){icpt}\n")
    elif sol.eta_rule:
        w(f"  eta auto: {sol.eta_rule}{icpt}\n")
    if "reference_objective" in out:
        w(f"  reference {out['reference_objective']:.6g} (certified={out['reference_certified']}), "
          f"excess risk {out['excess_risk']:.4g}\n")
    if sol.uplink is not None:
        up, naive = sum(sol.uplink), sum(sol.uplink_naive)
        full = ("" if sol.uplink_full_gradient is None else
                f", full gradients {_fmt_bytes(sum(sol.uplink_full_gradient))}")
        w(f"  uplink {_fmt_bytes(up)} payload ({_fmt_bytes(sum(sol.uplink_framed))} framed); "
          f"raw columns would be {_fmt_bytes(naive)}{full}\n")
        w(f"  downlink {_fmt_bytes(sum(sol.downlink))} payload\n")
        if path:
            w(f"  trust: {_trust(sol)}\n" + path.bytes_line(sol, _by_kind(sol), _fmt_bytes)
              + "\n")
    if sol.privacy:
        w(f"  {'deployment: ' if sol.deployment else ''}{sol.deployment_note}\n")
    if not sol.privacy:
        what = (path.nonprivate_note if path
                else "exact scores and noiseless columns are shared")
        w(f"  privacy: none (non-private run: {what})\n")
    else:
        pr = sol.privacy
        vals = ", ".join(f"{k}={v:.4g}" for k, v in pr["epsilon_spent"].items()
                         if v is not None and k != "best")
        w(f"  privacy: epsilon spent {pr['epsilon_spent']['best']:.4g} (best: "
          f"{pr['best_accountant']}; {vals}) at delta={pr['delta']:g}, target "
          f"{pr['target_epsilon']:g}, {pr['releases']} ledger records\n")


def _secure_path(sol):
    """The dp-bcfw-secure path of ``sol`` (``secure.paths``), None for other algorithms."""
    if sol.algorithm != "dp-bcfw-secure":
        return None
    from ..vertical.secure import paths

    return paths.of_solution(sol)


def _helpers(sol, data):
    """``secure.helpers``: entry k lists the parties that hold k's masked block and help its
    products."""
    x = sol.extra
    return _secure_path(sol).helpers(sol.K, x.get("label_party"), x.get("helper_party"))


def _trust(sol):
    x = sol.extra
    return _secure_path(sol).trust(sol.K, x.get("label_party"), x.get("helper_party"))


def _by_kind(sol):
    """``by_kind(*names)``: the framed bytes of those wire messages, summed over senders and
    receivers' copies."""
    by = sol.extra.get("bytes_by_type", {})
    return lambda *names: sum(by.get(n, [0, 0])[1] for n in names)


def plot(sol, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2 if sol.uplink is not None else 1, figsize=(10, 4), squeeze=False)
    ax = axes[0][0]
    ax.plot(np.arange(1, len(sol.objective) + 1), sol.objective, label=sol.algorithm)
    if sol.reference is not None:
        ax.axhline(sol.reference.objective, color="k", ls="--", label="reference")
    ax.set_xlabel("iteration")
    ax.set_ylabel("objective")
    ax.set_title(f"{sol.algorithm}: objective, K={sol.K} parties, n={sol.n}")
    ax.legend()
    from ..outputs import integer_ticks, save_figure

    integer_ticks(ax)
    if sol.uplink is not None:
        ax = axes[0][1]
        k = np.arange(sol.K)
        ax.bar(k - 0.2, sol.uplink, width=0.4, label="uplink (payload)")
        ax.bar(k + 0.2, sol.uplink_naive, width=0.4,
               label=_secure_path(sol).naive_label if _secure_path(sol) else "raw columns")
        ax.set_xticks(k)
        ax.set_xlabel("party")
        ax.set_ylabel("bytes")
        ax.set_title("bytes sent by each party")
        ax.legend()
    fig.tight_layout()

    save_figure(fig, path)
    plt.close(fig)
