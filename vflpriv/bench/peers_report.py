"""The page ``vflpriv bench peers --markdown FILE`` writes (docs/peers.md): the command, the
versions, the tables, one summary table per data table (mean +- sd over seeds), and the bar
(issue 30) checked against the measured means (computed here from the rows, nothing typed in)."""
from __future__ import annotations

from ..units import format_bytes
from .peers_systems import KIND, OPACUS_ACCOUNTANT, OPACUS_BATCHES_PER_EPOCH, OPACUS_EPOCHS, \
    OPACUS_LR, OPACUS_MAX_GRAD_NORM


def _pm(s, f, digits):
    if s.get(f) is None:
        return "-"
    sd = s.get(f + "_sd")
    return f"{s[f]:.{digits}f}" + ("" if sd is None else f" ± {sd:.{digits}f}")


def _mean(summary, table, system, eps=None):
    for s in summary:
        if s["table"] == table and s["system"] == system and s["epsilon"] == eps and \
                "unavailable" not in s:
            return s.get("test_auc")
    return None


def default_path(doc) -> str:
    """The logistic path ``dp-bcfw-secure``'s rows took by default: recorded in the settings
    since ssp became the default; a file without it was written when glm was."""
    return doc["settings"].get("default_logistic_path", "glm")


def vertical_bar(doc) -> tuple:
    """The vertical systems checked against the bar, ``(system, label)``: the default first,
    then its variants, each marked when it is not what the default ran."""
    path = default_path(doc)
    # a file from before ssp became the default says so ("then"): its default was glm
    then = "" if "default_logistic_path" in doc["settings"] else " then"
    other = {True: "", False: f" (not the default{then})"}
    return (("dp-bcfw-secure", f"`dp-bcfw-secure` (its default{then}: the {path} path)"),
            ("dp-bcfw-secure-glm", "`dp-bcfw-secure --logistic-path glm`" + other[path == "glm"]),
            ("dp-bcfw-secure-pgd", ("`dp-bcfw-secure --step pgd` (not the default then)" if then
                                    else "`dp-bcfw-secure --logistic-path glm --step pgd` (not "
                                         "the default)")),
            ("dp-bcfw-secure-ssp", "`dp-bcfw-secure --logistic-path ssp`" + other[path == "ssp"]))


def bar_lines(doc) -> list:
    """Issue 30's bar, each line a comparison of measured means (None where a side is missing)."""
    summ, eps_list = doc["summary"], doc["settings"]["epsilons"]
    lines = []
    for t in doc["settings"]["tables"]:
        fw, sk = _mean(summ, t, "fw"), _mean(summ, t, "sklearn")
        if fw is not None and sk is not None:
            ok = "met" if fw >= sk - 0.01 else "NOT met"
            lines.append(f"- {t}: `fw` AUC {fw:.3f} vs sklearn l1 CV {sk:.3f} "
                         f"(difference {fw - sk:+.3f}; bar: within 0.01): {ok}")
        for e in eps_list:
            if e > 1:
                continue               # the bar names eps 1 and 0.5
            op, dpl = _mean(summ, t, "opacus", e), _mean(summ, t, "diffprivlib", e)
            opr = _mean(summ, t, "opacus-replace", e)
            # the bar is the default's (dp-bcfw-secure); its variants, where run, beside it
            for system, label in vertical_bar(doc):
                sec = _mean(summ, t, system, e)
                if sec is None:
                    continue
                parts = []
                if op is not None:
                    parts.append(f"opacus DP-SGD add/remove {op:.3f} "
                                 f"({'met' if sec >= op else 'NOT met'}: at or above)")
                if opr is not None:
                    parts.append(f"opacus DP-SGD replace-one {opr:.3f} "
                                 f"({'met' if sec >= opr else 'NOT met'}: at or above)")
                if dpl is not None:
                    parts.append(f"diffprivlib {dpl:.3f} (difference {sec - dpl:+.3f})")
                if parts:
                    lines.append(f"- {t}, eps {e:g}: {label} AUC {sec:.3f} vs "
                                 + "; ".join(parts))
    priv = [r for r in doc["rows"] if r.get("private") and r.get("epsilon_spent") is not None]
    if priv:
        worst = max(priv, key=lambda r: r["epsilon_spent"] / r["epsilon"])
        ok = all(r["epsilon_spent"] <= r["epsilon"] for r in priv)
        lines.append(f"- epsilon spent <= target in all {len(priv)} private runs: "
                     f"{'yes' if ok else 'NO'} (largest spent/target "
                     f"{worst['epsilon_spent'] / worst['epsilon']:.4f}: {worst['system']} on "
                     f"{worst['table']}, eps {worst['epsilon']:g}, seed {worst['seed']})")
    return lines


def paired_lines(doc) -> list:
    """The paired comparisons of the page: the file's own (``paired``), else computed from its
    rows (a file written before they were recorded)."""
    from .peers_paired import lines, paired

    return lines(doc.get("paired") or paired(doc["rows"]))


def _via(doc):
    """How diffprivlib was called, when not through its class (scikit-learn >= 1.8)."""
    vias = {r["settings"].get("via") for r in doc["rows"]
            if r["system"] == "diffprivlib" and "settings" in r}
    if any(v and v.startswith("_logistic") for v in vias):
        return (" (here through `diffprivlib.models.logistic_regression._logistic_regression_path`"
                ", the function its `fit` calls with the same arguments: the class cannot be "
                "built under scikit-learn 1.8)")
    return ""


def _path_note(doc) -> str:
    """Which logistic path the page's ``dp-bcfw-secure`` rows took (the default's, named where
    the file records it)."""
    if "default_logistic_path" not in doc["settings"]:
        return (", its logistic path the default one when this file was written, glm (the "
                "default is ssp since)")
    return (f", its logistic path the default one, {default_path(doc)} "
            "(`dp-bcfw-secure-glm`: `--logistic-path glm`)")


def render(doc) -> str:
    st, v = doc["settings"], doc["versions"]
    out = ["# vflpriv against its peers on held-out tables", "",
           f"Produced by `{doc['command']}` (finished {doc.get('finished_utc', '?')} UTC; "
           "written by the command itself: edit the code, not this page).", "",
           "Versions: " + ", ".join(f"{k} {val}" for k, val in v.items() if val) + ".", "",
           f"Every system is fitted on the same training rows and scored on the same held-out "
           f"rows: seeds {', '.join(map(str, st['seeds']))}, each a split holding out "
           f"{st['test_fraction']:g} of the rows (`vflpriv.vertical.metrics.split_rows`) and "
           f"seeding the noise. Private systems at eps "
           f"{', '.join(f'{e:g}' for e in st['epsilons'])}, delta {st['delta']:g} (diffprivlib: "
           "pure eps-DP). Cells: mean ± sample sd over seeds (no ± with one seed). `eps spent` "
           "is the largest over seeds, from each system's own accountant at run time. Bytes: "
           "framed bytes of every message between parties (vflpriv's vertical learner; the "
           "central systems move no data between parties, shown as -). "
           "Seconds: wall time of one fit on a shared 2-core machine.", "",
           "No system was tuned on these tables. scikit-learn: `LogisticRegressionCV(l1_ratios="
           "(1.0,), solver=\"liblinear\", scoring=\"neg_log_loss\", cv=3)`. diffprivlib: "
           "`LogisticRegression(epsilon, data_norm=sqrt(d) B_a)`, its defaults otherwise"
           f"{_via(doc)}. "
           f"opacus DP-SGD, by a rule fixed before any table was run: Poisson rate "
           f"about 1/{OPACUS_BATCHES_PER_EPOCH}, {OPACUS_EPOCHS} epochs, SGD lr {OPACUS_LR:g}, "
           f"max_grad_norm {OPACUS_MAX_GRAD_NORM:g}, noise from `make_private_with_epsilon` "
           f"({OPACUS_ACCOUNTANT.upper()} accountant), an (eps, delta) guarantee under add/remove "
           "(a record added or removed); `opacus-replace`: the same run with its noise multiplier "
           "calibrated by vflpriv's accountant (PLD) to (eps, delta) under replace-one, the "
           "relation of every vflpriv and diffprivlib row (one person's record replaced: a "
           "removal and an addition, so an add/remove eps is a replace-one guarantee only at up "
           "to about twice that eps). vflpriv: `solve` with its defaults "
           f"(`eta=\"auto\"`, intercept on), {st['iterations']} iterations, the declared bounds "
           "(B_a of the table, B_y = 1); `dp-bcfw-secure` with the label at party 0"
           f"{_path_note(doc)}. "
           "Details: `vflpriv/bench/peers_systems.py`, tables: `vflpriv/bench/tables.py`.", ""]
    out += ["## Tables", "", "| table | source | rows | columns | declared bound B_a | "
            "parties (columns each) | positives |", "|---|---|---|---|---|---|---|"]
    for t in doc["tables"]:
        out.append(f"| {t['name']} | {t['source']} | {t['rows']} | {t['columns']} | "
                   f"{t['feature_bound']:g} | {t['parties']} "
                   f"({', '.join(map(str, t['blocks']))}) | {100 * t['positives']:.1f}% |")
    out += ["", "## Results", ""]
    for t in st["tables"]:
        out += [f"### {t}", "", "| system | kind | eps | test AUC | test log-loss | accuracy "
                "(majority) | eps spent | bytes | seconds |",
                "|---|---|---|---|---|---|---|---|---|"]
        for s in doc["summary"]:
            if s["table"] != t:
                continue
            eps = "-" if s["epsilon"] is None else f"{s['epsilon']:g}"
            if "unavailable" in s:
                out.append(f"| {s['system']} | {KIND[s['system']]} | {eps} | unavailable: "
                           f"{s['unavailable']} | | | | | |")
                continue
            spent = "-" if s["epsilon_spent_max"] is None else f"{s['epsilon_spent_max']:.3f}"
            mb = "-" if s["bytes"] is None else format_bytes(s["bytes"])
            out.append(f"| {s['system']} | {s['kind']} | {eps} | {_pm(s, 'test_auc', 3)} | "
                       f"{_pm(s, 'test_log_loss', 4)} | {s['test_accuracy']:.3f} "
                       f"({s['majority_accuracy']:.3f}) | {spent} | {mb} | {s['seconds']:.1f} |")
        out.append("")
    lines = bar_lines(doc)
    if lines:
        out += ["## The bar, against these means", "",
                "`fw` within 0.01 test AUC of scikit-learn's l1 logistic regression; the private "
                "vertical learner at or above opacus DP-SGD at eps 1 and 0.5; every private run "
                "within its epsilon.", ""] + lines + [""]
    pairs = paired_lines(doc)
    if pairs:
        out += ["## Paired over the seeds", "",
                "The same comparison seed by seed: each seed is one split and one noise draw "
                "shared by both systems, so the per-seed difference in test AUC leaves out the "
                "split's luck. Mean difference and its 95% Student t interval; `level`: the "
                "interval holds 0, these seeds cannot tell the two apart "
                "(`vflpriv/bench/peers_paired.py`).", ""] + pairs + [""]
    return "\n".join(out)


def write_markdown(path, doc):
    from ..outputs import write_atomic

    text = render(doc) + "\n"
    write_atomic(path, lambda fh: fh.write(text.encode("utf-8")))
