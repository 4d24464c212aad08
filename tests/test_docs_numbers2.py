"""More figures in the docs traced to committed output (the pattern of tests/test_docs_numbers.py):
each check reads a committed JSON, written by the command named in it, and asserts the page quotes
what that JSON holds."""
import json
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _text(*parts):
    with open(os.path.join(ROOT, *parts)) as fh:
        return fh.read()


def _unwrapped(*parts):
    return " ".join(_text(*parts).split())


def _json(name):
    return json.loads(_text("docs", name))


def test_classification_md_flights_line_is_readme_flights_json():
    """The flights run (moved from the README to docs/classification.md): docs/readme_flights.json
    is the page's command with `--seed 0
    --json docs/readme_flights.json` (the default logistic path, ssp)."""
    d = _json("readme_flights.json")
    assert (d["algorithm"], d["seed"], d["label_party"], d["secure"]["path"]) == \
        ("dp-bcfw-secure", 0, 0, "ssp")
    assert d["defaults"][0]["name"] == "logistic_path" and d["eta"] is None
    assert d["privacy"]["target_epsilon"] == 1.0 and d["delta"] == 1e-6
    text = _unwrapped("docs", "classification.md")
    assert (f"With `--seed 0` it prints, among its lines, `held-out AUC {d['test_auc']:.4f}, "
            f"log-loss {d['test_log_loss']:.4f}, accuracy {d['test_accuracy']:.4f} (majority class "
            f"{d['majority_accuracy']:.4f}, {d['test_rows']} rows)` and epsilon "
            f"{d['epsilon_spent']['best']:.4f} spent of the 1 asked for "
            f"({d['seconds']:.1f} s in the recorded run") in text


def _ms_or_s(seconds):
    return f"{seconds * 1e3:.1f} ms" if seconds < 1 else f"{seconds:.1f} s"


def test_dependencies_md_accountant_table_is_accounting_bench_json():
    """docs/dependencies.md's accountant comparison: docs/accounting_bench.json (`vflpriv bench
    accounting --repeats 1 --json docs/accounting_bench.json`), epsilons, sigmas and times."""
    d = _json("accounting_bench.json")
    t = _ms_or_s
    v, da, op = d["vflpriv"], d["dp_accounting"], d["opacus"]
    gaussians = next(c for c in d["cases"] if c["case"].startswith("100 Gaussians sigma 2"))
    sgd = next(c for c in d["cases"] if c["case"].startswith("DP-SGD q=0.01 sigma=1 T=1000"))
    assert (d["problem"]["noise_multiplier"], d["problem"]["steps"], d["problem"]["delta"]) == \
        (1.1, 14100, 1e-5)
    page = _text("docs", "dependencies.md")
    rows = [
        f"| RDP epsilon, DP-SGD example | {v['rdp']['epsilon']:.6f} ({t(v['rdp']['seconds'])}) | "
        f"{da['rdp']['epsilon']:.6f} ({t(da['rdp']['seconds'])}) | {op['rdp']['epsilon']:.6f} "
        f"({t(op['rdp']['seconds'])}) |",
        f"| PLD / PRV epsilon | {v['pld']['epsilon']:.6f} ({t(v['pld']['seconds'])}) | "
        f"{da['pld']['epsilon']:.6f} ({t(da['pld']['seconds'])}) | PRV {op['prv']['epsilon']:.6f} "
        f"({t(op['prv']['seconds'])}) |",
        f"| GDP (CLT) | - | - | {op['gdp (CLT, not a bound)']['epsilon']:.6f} |",
        f"| sigma for epsilon 3, PLD / PRV | {v['calibrate_pld']['sigma']:.5f} "
        f"({t(v['calibrate_pld']['seconds'])}) | {da['calibrate_pld']['sigma']:.5f} "
        f"({t(da['calibrate_pld']['seconds'])}) | PRV {op['calibrate_prv']['sigma']:.5f} "
        f"({t(op['calibrate_prv']['seconds'])}) |",
        f"| q = 0.01, sigma 1, T = 1000: PLD / PRV / GDP | {sgd['vflpriv']['pld']['epsilon']:.6f} | "
        f"{sgd['dp_accounting']['pld']['epsilon']:.6f} | {sgd['opacus']['prv']['epsilon']:.6f} / "
        f"{sgd['opacus']['gdp']['epsilon']:.6f} |",
        f"| 100 Gaussians sigma 2 (exact {gaussians['exact']:.6f}) | "
        f"{gaussians['vflpriv']['best']['epsilon']:.6f} ({gaussians['vflpriv']['best']['used']}; "
        f"PLD {gaussians['vflpriv']['pld']['epsilon']:.6f}) | "
        f"{gaussians['dp_accounting']['pld']['epsilon']:.6f} | PRV "
        f"{gaussians['opacus']['prv']['epsilon']:.6f}, GDP {gaussians['opacus']['gdp']['epsilon']:.6f} |"]
    for row in rows:
        assert "  " + row in page, row
    text = _unwrapped("docs", "dependencies.md")
    assert f"({v['pld']['epsilon']:.6f} against {da['pld']['epsilon']:.6f} here)" in text
    assert (f"importing `accounting` took {d['import_accounting_seconds'] * 1e3:.0f} ms and its RDP "
            f"calibration of the DP-SGD example {v['calibrate_rdp']['seconds'] * 1e3:.1f} ms") in text
    assert (f"PLD calibration {v['calibrate_pld']['seconds']:.1f} s against dp-accounting's "
            f"{da['calibrate_pld']['seconds']:.1f} s (one PLD epsilon alone, with the proven error "
            f"bounds added since, {v['pld']['seconds']:.2f} s against {da['pld']['seconds']:.2f} s)"
            ) in text


def test_dependencies_md_kernel_speedups_are_kernels_bench_json():
    rows = [r for r in _json("kernels_bench.json")["noisy_argmax"] if r["d"] == 10 ** 6]
    sp = [r["speedup"] for r in rows]
    fl = max(r["compiled_over_uniform_floor"] for r in rows)
    assert (f"Ours is {min(sp):.1f}-{max(sp):.1f}x faster than numpy at d = 1e6 and within "
            f"{fl:.1f}x of the cost of drawing d uniforms") in _unwrapped("docs", "dependencies.md")


# ---- docs/fedp3.md "Accuracy vs epsilon": docs/fedp3/*.json (the page's command, seeds 0-2)

_EPS = ("inf", "8", "4", "1")


def _fedp3(name):
    d = _json(os.path.join("fedp3", name + ".json"))
    assert (d["data"], d["clients"], d["scheme"], d["local_pruning"], d["keep_ratio"],
            d["clip"], d["batch_size"]) == ("digits", 10, "opu2", "fixed", 0.9, 1.0, 16)
    return d


def test_fedp3_md_accuracy_tables_are_the_json():
    page = _text("docs", "fedp3.md")
    for e in _EPS:
        d = _fedp3(f"eps_{e}_seed0")
        assert (d["rounds"], d["seed"], d["accountant"]) == (15, 0, "rdp")
        h, z = d["accuracy_history"], d["noise_multiplier"]
        spent = "-" if e == "inf" else f"{max(d['epsilon_spent']):.3f}"
        row = (f"| {e} | {d['accuracy']:.3f} | "
               f"{' '.join(f'{h[i]:.3f}' for i in (0, 3, 6, 9, 12))} | {spent} | "
               f"{min(z):.2f}-{max(z):.2f} |")
        assert row in page, row
        acc = [_fedp3(f"eps_{e}_seed{s}")["accuracy"] for s in (0, 1, 2)]
        row = f"| {e} | {' / '.join(f'{a:.3f}' for a in acc)} | {sum(acc) / 3:.3f} |"
        assert row in page, row


def test_fedp3_md_rounds8_pld_spend_and_implied_c_are_the_json():
    text = _unwrapped("docs", "fedp3.md")
    r8 = [_fedp3(f"rounds8_eps_{e}_seed0") for e in _EPS]
    assert all(d["rounds"] == 8 for d in r8)
    four = " / ".join(f"{d['accuracy']:.3f}" for d in r8)
    assert f"the four values are {four} (inf / 8 / 4 / 1)" in text
    rdp, pld = _fedp3("eps_4_seed0"), _fedp3("pld_eps_4_seed0")
    assert pld["accountant"] == "pld" and pld["rounds"] == 15
    cut = [100 * (1 - b / a) for a, b in zip(rdp["noise_multiplier"], pld["noise_multiplier"])]
    assert (f"z {min(cut):.1f}-{max(cut):.1f}% smaller over the clients; slower to calibrate) "
            f"epsilon = 4 gives {pld['accuracy']:.3f} instead of {rdp['accuracy']:.3f}") in text
    gaps = [float(e) - x for e in _EPS[1:] for s in (0, 1, 2)
            for x in _fedp3(f"eps_{e}_seed{s}")["epsilon_spent"]]
    assert min(gaps) >= 0 and max(gaps) < 1.4e-6
    assert "is within 1.4e-6 below its target in these runs" in text
    c = {e: _fedp3(f"eps_{e}_seed0")["implied_c"] for e in _EPS[1:]}
    assert (f"is {min(c['8']):.2f}-{max(c['8']):.2f} at epsilon = 8, {min(c['4']):.2f}-"
            f"{max(c['4']):.2f} at 4 and {min(c['1']):.2f}-{max(c['1']):.2f} at 1") in text


# ---- docs/vertical.md

def test_vertical_md_n1e5_paragraph_is_the_frontier_json():
    """The n = 1e5, eps = 4 run of "Measured on the issue's setting" is that point of
    docs/utility_frontier.json (`vflpriv bench utility`, the settings of the command shown)."""
    doc = _json("utility_frontier.json")
    c = doc["config"]
    assert (c["d"], c["density"], c["sparsity"], c["parties"], c["iterations"], c["delta"],
            c["bound"], c["rnm"], c["row_clip"], c["max_features"], c["derivative_clip"],
            c["seed"]) == (2000, 0.05, 0.01, 4, 200, 1e-6, 1.0, "gumbel", 4.0, 10, 1.0, 0)
    R = {r["algorithm"]: r for r in doc["rows"] if r["n"] == 100000 and r["epsilon"] == 4.0}
    s, fw, bc = R["dp-bcfw-secure"], R["dpfw"], R["dp-bcfw"]
    text = _unwrapped("docs", "vertical.md")
    assert (f"f goes {s['f0']:.6f} -> {s['final']:.6f} against the certified optimum "
            f"{s['reference']:.6f} (from `--reference` on the same data): "
            f"{100 * s['gap_removed']:.1f}% of the gap removed, excess {s['excess']:.4f}, in "
            f"{s['seconds']:.0f} s on the shared machine, the ledger's spend "
            f"{s['epsilon_spent']:.1f} under RDP") in text
    assert (f"with `--derivative-clip 1`: excess {fw['excess']:.4f} "
            f"({100 * fw['gap_removed']:.1f}%).") in text
    assert f"as in the frontier): {100 * bc['gap_removed']:.1f}% removed." in text


def test_vertical_md_checkpoint_and_locallink_figures_are_secure_bench_json():
    """docs/vertical.md "Checkpoints of dp-bcfw-secure": docs/secure_bench.json (`vflpriv bench
    secure --json docs/secure_bench.json`)."""
    from vflpriv.units import format_bytes

    d = _json("secure_bench.json")
    ip, cp, rs, sb, lo = d["inprocess"], d["checkpoint"], d["resume"], d["saved_blocks"], d["local"]
    assert cp["same_x"] and rs["same_x"] and lo["same_x"]
    text = _unwrapped("docs", "vertical.md")
    assert (f"a round takes {ip['seconds_per_round']:.4f} s without checkpoints and "
            f"{cp['seconds_per_round']:.4f} s with one after every round; a checkpoint is "
            f"{format_bytes(cp['file_bytes'])} (mostly the parties' u_k, n floats each) and takes "
            f"{cp['seconds_per_write'] * 1e3:.1f} ms to write; a resume from round 5 reaches its "
            f"first round in {rs['seconds_to_first_round']:.3f} s, of which the setup with the "
            f"offline phase recomputed {rs['setup_seconds']:.3f} s.") in text
    assert (f"would be a {format_bytes(sb['bytes'])} file (8 n d bytes; 16 GB at n = 1e6, d = 2000), "
            f"{sb['seconds_write']:.3f} s to write and fsync and {sb['seconds_read']:.3f} s to read "
            "back") in text
    assert sb["seconds_write"] >= rs["setup_seconds"]            # "no faster than recomputing"
    assert (f"In the run above: {lo['seconds_per_round']:.4f} s per round "
            f"({lo['seconds_per_round'] / ip['seconds_per_round']:.1f}x the in-process path), "
            f"{lo['seconds_to_first_round']:.2f} s to the first round, the same iterate; "
            f"{lo['seconds_pickling']:.2f} s of {lo['seconds_hosting']:.2f} s in the roles "
            f"({lo['messages']} messages) is pickling, "
            f"{format_bytes(lo['state_bytes_per_message'])} per message on average.") in text


def test_sparse_md_smoothness_figures_are_computed_from_the_data():
    """docs/sparse.md's 438 (the average objective's smoothness), max_i L_i = 4032 and "900 to
    4000" on Tong et al.'s simulation I (`synthetic-000:alpha=0.5,beta=0.5,seed=0`, 100 clients,
    the 000-fig3a setting), recomputed here exactly (eigvalsh, not the power iteration).  A
    client's Z is 100 x 1000: Z^T Z and Z Z^T have the same nonzero eigenvalues, so each L_i is
    the top eigenvalue of the smaller Gram matrix (100 x 100; the 1000 x 1000 ones took 84 s)."""
    import numpy as np
    import scipy.sparse as sp

    from vflpriv.sparse.data import load_federated

    def top(Z):                         # largest eigenvalue of Z^T Z / m, exactly
        G = Z @ Z.T if Z.shape[0] < Z.shape[1] else Z.T @ Z
        return np.linalg.eigvalsh(G / Z.shape[0])[-1]

    fd = load_federated("synthetic-000:alpha=0.5,beta=0.5,seed=0", 100, seed=0)
    Zs = [Z.toarray() if sp.issparse(Z) else np.asarray(Z) for Z, _ in fd.parts]
    L = [top(Z) for Z in Zs]
    A = np.vstack(Zs)
    g = np.linalg.eigvalsh(A.T @ A / A.shape[0])[-1]
    text = _unwrapped("docs", "sparse.md")
    assert f"it is {g:.0f} against max_i L_i = {max(L):.0f}, and FedIter-HT diverges at gamma = " \
        f"1/{g:.0f}" in text
    assert (f"a top eigenvalue of {round(min(L), -2):.0f} to {round(max(L), -3):.0f} while the "
            f"average objective's is {g:.0f}") in text


# ---- docs/audit.md

def test_audit_md_laplace_validity_table_is_the_json():
    """docs/audit.md's Laplace validity table: docs/audit/laplace_validity.json (`python
    docs/audit/laplace_validity.py docs/audit/laplace_validity.json`)."""
    import numpy as np

    d = _json(os.path.join("audit", "laplace_validity.json"))
    R = {(r["samples"], r["method"]): r for r in d["rows"]}
    assert {(n, R[(n, "split")]["seeds"]) for n, _ in R} == {(10 ** 4, 100), (10 ** 5, 100),
                                                             (10 ** 6, 10)}
    cell = lambda b: f"{np.mean(b):.3f} [{min(b):.3f}, {max(b):.3f}]"  # noqa: E731
    page = _text("docs", "audit.md")
    for n, label in ((10 ** 4, "1e4"), (10 ** 5, "1e5"), (10 ** 6, "1e6")):
        row = (f"| {label} | {cell(R[(n, 'split')]['bounds'])} | "
               f"{cell(R[(n, 'bonferroni')]['bounds'])} |")
        assert row in page, row
    runs = [b for r in d["rows"] for b in r["bounds"]]
    assert max(runs) <= 1.0
    assert f"In these {len(runs)} runs no bound exceeded 1" in _unwrapped("docs", "audit.md")


def test_audit_md_rnm_k_table_is_the_json():
    """docs/audit.md's report-noisy-max k table: docs/audit/rnm_pairs.json (`python
    docs/audit/rnm_pairs.py docs/audit/rnm_pairs.json`), in the script's own format."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("rnm_pairs", os.path.join(ROOT, "docs", "audit",
                                                                            "rnm_pairs.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    d = _json(os.path.join("audit", "rnm_pairs.json"))
    block = "\n".join(mod.line(n, d["pairs"][n]) for n in mod.NOISES)
    assert "```\n" + block + "\n```" in _text("docs", "audit.md")
    g = dict(d["pairs"]["gumbel"])
    assert 0 < g[16] - g[32] < 0.01


def test_audit_md_miscalibrated_gaussian_figures_are_recomputed():
    """docs/audit.md "What it buys": the Gaussian drawing 0.7 sigma, audited at 1e5 samples with
    seeds 1-3 (tests/test_audit_tradeoff.py's mechanism): threshold bounds and mu bounds."""
    import importlib.util

    from vflpriv.audit import audit_mechanism

    spec = importlib.util.spec_from_file_location(
        "audit_tradeoff_for_docs", os.path.join(ROOT, "tests", "test_audit_tradeoff.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rows = [audit_mechanism(mod.weak_gaussian(0.7), samples=100_000, seed=s) for s in (1, 2, 3)]
    lb = [r["lower_bound"] for r in rows]
    mu = [r["tradeoff"]["mu_lower"] for r in rows]
    text = _unwrapped("docs", "audit.md")
    assert (f"audits at {min(lb):.2f}-{max(lb):.2f} < 1 with threshold tests, which miss it. The "
            f"trade-off audit bounds its mu at {min(mu):.3f}-{max(mu):.3f} > "
            f"{rows[0]['tradeoff']['mu_claimed']:.3f} and fails it (1e5 samples, seeds 1-3;") in text


def test_alignment_md_cpu_per_operation_and_load_are_the_1e6_json():
    d = _json("align_bench_1e6.json")
    r = d["rows"][0]
    assert (r["size"], r["parties"]) == (1000000, 3)
    text = _unwrapped("docs", "alignment.md")
    per_op = r["cpu_seconds"] / (7 * r["size"]) * 1e6                 # 7 n X25519 operations
    assert (f"the 1e6 run below spent {r['cpu_seconds']:.1f} s of CPU in all, about "
            f"{per_op:.0f} microseconds per X25519 operation") in text
    assert f"(load average {d['load_average']:.1f} at its end" in text


def test_network_md_prose_is_network_bench_json():
    """docs/network.md "What it says" restates docs/network_bench.json (whose table
    tests/test_docs_numbers.py checks): each figure here from the same runs."""
    runs = {(r["loss"], r["rate"]): r for r in _json("network_bench.json")["runs"]}
    P = {k: r["phases"] for k, r in runs.items()}
    ls1, ls100 = P[("squared", "1gbit")], P[("squared", "100mbit")]
    lo1, lo100 = P[("logistic", "1gbit")], P[("logistic", "100mbit")]
    model = lambda p: p["setup"]["wire_seconds_model"] + p["rounds"]["wire_seconds_model"]  # noqa
    per_exchange = [p[k]["seconds_in_exchanges"] / p[k]["exchanges"] for p in P.values()
                    for k in ("setup", "rounds")]
    text = _unwrapped("docs", "network.md")
    mb = lambda b: f"{b / 1e6:.0f} MB"  # noqa: E731
    for s in (
        f"At 1 Gbit/s the model puts {ls1['setup']['wire_seconds_model']:.1f} s of the least-squares "
        f"setup and {ls1['rounds']['wire_seconds_model']:.1f} s of its rounds on the wire; the "
        f"measured phases took {ls1['setup']['seconds']:.0f} s and {ls1['rounds']['seconds']:.0f} s.",
        f"A deployed exchange costs {min(per_exchange):.0f} to {max(per_exchange):.0f} s here "
        f"({ls1['setup']['exchanges']} exchanges in the setup, {ls1['rounds']['exchanges']} in the "
        f"10 rounds of least squares; {lo1['setup']['exchanges']} and {lo1['rounds']['exchanges']} "
        "for logistic)",
        f"Logistic: the model adds {model(lo100) - model(lo1):.0f} s at 100 Mbit/s (setup "
        f"{lo100['setup']['wire_seconds_model']:.1f} s against {lo1['setup']['wire_seconds_model']:.1f}"
        f" s, rounds {lo100['rounds']['wire_seconds_model']:.1f} s against "
        f"{lo1['rounds']['wire_seconds_model']:.1f} s: {mb(lo1['rounds']['flower_uplink_bytes'])} up "
        "in the rounds)",
        f"the measured wall grew by {runs[('logistic', '100mbit')]['wall_seconds'] - runs[('logistic', '1gbit')]['wall_seconds']:.0f}"
        f" s ({runs[('logistic', '1gbit')]['wall_seconds']:.0f} s to "
        f"{runs[('logistic', '100mbit')]['wall_seconds']:.0f} s; load average "
        f"{runs[('logistic', '1gbit')]['load_average_before']:.1f} to "
        f"{runs[('logistic', '100mbit')]['load_average_after']:.1f}).",
        f"Least squares: the model adds {model(ls100) - model(ls1):.0f} s (the setup's "
        f"{mb(ls1['setup']['flower_uplink_bytes'])} each way: "
        f"{ls100['setup']['wire_seconds_model']:.1f} s against "
        f"{ls1['setup']['wire_seconds_model']:.1f} s), yet the 100 Mbit/s run was the faster "
        f"({runs[('squared', '100mbit')]['wall_seconds']:.0f} s against "
        f"{runs[('squared', '1gbit')]['wall_seconds']:.0f} s)",
        f"{ls1['setup']['exchanges'] + ls1['rounds']['exchanges']} exchanges x 20 ms = "
        f"{(ls1['setup']['exchanges'] + ls1['rounds']['exchanges']) * 0.02:.1f} s for least squares",
        f"and {mb(ls1['rounds']['flower_uplink_bytes'])} in the rounds",
        f"round: {mb(lo1['rounds']['flower_uplink_bytes'])} up and "
        f"{mb(lo1['rounds']['flower_downlink_bytes'])} down in 10 rounds"):
        assert s in text, s
    over = max(max(r["flower_uplink_bytes"] / r["frame_uplink_bytes"],
                   r["flower_downlink_bytes"] / r["frame_downlink_bytes"]) - 1
               for r in runs.values())
    assert over <= 0.0002 and "most 0.02% overhead here" in text
    tcp = max(max(sum(v["uplink"] for v in r["link_tcp_bytes"].values()) / r["flower_uplink_bytes"],
                  sum(v["downlink"] for v in r["link_tcp_bytes"].values()) /
                  r["flower_downlink_bytes"]) - 1 for r in runs.values())
    assert 0 <= tcp < 0.01 and "is under 1% more" in text
    ls = runs[("squared", "1gbit")]
    share = ls1["setup"]["flower_uplink_bytes"] / ls["flower_uplink_bytes"]
    assert f"squares sends {100 * share:.0f}% of its bytes in the setup" in text


def test_network_md_n_1e6_logistic_is_its_json():
    """docs/network.md's n = 1e6 logistic table: docs/network_bench_1e6_logistic.json."""
    (r,) = _json("network_bench_1e6_logistic.json")["runs"]
    assert (r["n"], r["loss"], r["rate"], r["iterations"], r["status"]) == \
        (1000000, "logistic", "1gbit", 10, "done")
    text = _unwrapped("docs", "network.md")
    mb = lambda b: f"{b / 1e6:.1f} MB"  # noqa: E731
    for k in ("setup", "rounds"):
        p = r["phases"][k]
        row = (f"| | {k} | {p['seconds']:.1f} | {p['exchanges']} | {mb(p['flower_uplink_bytes'])} "
               f"/ {mb(p['flower_downlink_bytes'])} | {p['wire_seconds_model']:.2f} (RTTs "
               f"{p['wire_rtt_seconds_model']:.2f}) |")
        assert row in text, row
    assert f"| | **wall** | **{r['wall_seconds']:.1f}** |" in text
    assert r["wall_seconds"] < 30 * 60
    assert f"**n = 1e6, logistic (glm path), after the fix: {r['wall_seconds'] / 60:.1f} minutes.**" \
        in text


def test_network_md_n_1e6_is_its_json():
    """docs/network.md's n = 1e6 least-squares table and prose: docs/network_bench_1e6.json."""
    (r,) = _json("network_bench_1e6.json")["runs"]
    assert (r["n"], r["loss"], r["rate"], r["iterations"], r["status"]) == \
        (1000000, "squared", "1gbit", 10, "done")
    text = _unwrapped("docs", "network.md")
    ph = r["phases"]
    mb = lambda b: f"{b / 1e6:.1f} MB"  # noqa: E731
    for k in ("setup", "rounds"):
        p = ph[k]
        row = (f"| | {k} | {p['seconds']:.1f} | {p['exchanges']} | {mb(p['flower_uplink_bytes'])} "
               f"/ {mb(p['flower_downlink_bytes'])} | {p['wire_seconds_model']:.2f} (RTTs "
               f"{p['wire_rtt_seconds_model']:.2f}) |")
        assert row in text, row
    assert f"| | **wall** | **{r['wall_seconds']:.1f}** |" in text
    assert f"{r['wall_seconds'] / 60:.1f} minutes in all" in text
    assert f"epsilon spent {r['epsilon_spent']['best']:.3f} (rdp) of 1" in text
    per = ph["setup"]["seconds_in_exchanges"] / ph["setup"]["exchanges"]
    assert f"in {ph['setup']['exchanges']} exchanges ({per:.1f} s each on average)" in text
    wire = ph["setup"]["wire_seconds_model"] + ph["rounds"]["wire_seconds_model"]
    assert f"The wire model puts {wire:.0f} s of it on the link" in text
    gaps = [b - a for a, b in zip(r["round_stamps"], r["round_stamps"][1:])]
    assert f"rounds after the first took {min(gaps):.0f} to {max(gaps):.0f} s each" in text


def _sparse_paper_cells(d):
    """The "measured here" cells of docs/sparse.md's paper-claims table, from papers.json."""
    k = d["local_steps"]["rounds_to_1e-8"]
    assert len({k[x] for x in ("6", "9", "12", "15")}) == 1
    r1 = f"rounds to 1e-8: K = 1: {k['1']}, K = 3: {k['3']}, K = 6..15: {k['6']}"
    c = d["cohort"]["rounds_to_1e-8"]
    allr = [v for vs in c.values() for v in vs]
    r2 = ("rounds to 1e-8 (seeds 0, 1, 2; L of the 50 clients per round): " +
          "; ".join(f"L = {L}: {', '.join(map(str, v))}" for L, v in c.items()) +
          f" (little room: already {min(allr)}-{max(allr)} rounds)")
    n = d["noisy"]["final_relative_error"]
    r3 = f"relative error after 50 rounds {n['3']:.1e} (K = 3), {n['9']:.1e} (K = 9)".replace("e-0", "e-")
    runs = d["fediterht_steps"]["runs"]
    grid = [r for r in runs if not r["default"]]
    dflt = next(r for r in runs if r["default"])
    rec = {r["support_recall"] for r in runs}
    assert len(rec) == 1
    r4 = ("no step in {" + ", ".join(f"{r['lr']:.0e}".replace("e-0", "e-") for r in grid) + "} diverges here (relative "
          f"error never above {max(r['max_relative_error'] for r in runs):.2f}); after 100 rounds "
          + ", ".join(f"{r['final_relative_error']:.3f}" for r in grid) +
          f", support recall {rec.pop():g} for all: the runs stay near their start, a plateau, not a "
          "divergence (003 does not state its loss scaling; ours is 1/(2 n_i)). The default step "
          f"({dflt['lr']:.1e} here) is far below".replace("e-0", "e-"))
    return r1, r2, r3, r4


def test_sparse_md_paper_claims_table_is_papers_json():
    """docs/sparse.md "Measured against the papers": docs/sparse/papers.json (`python
    docs/sparse/papers.py docs/sparse/papers.json`)."""
    page = _text("docs", "sparse.md")
    for cell in _sparse_paper_cells(_json(os.path.join("sparse", "papers.json"))):
        assert "| " + cell in page, cell


def test_dependencies_md_diffprivlib_comparison_is_the_json():
    """docs/dependencies.md's diffprivlib paragraph: docs/dependencies_utility.json (`vflpriv bench
    utility --n 10000 --d 200 --epsilons 1,8 --iterations 50 --seed 0 --json ...`)."""
    d = _json("dependencies_utility.json")
    c = d["config"]
    assert (c["n"], c["d"], c["epsilons"], c["iterations"], c["seed"]) == ("10000", 200, "1,8", 50, 0)
    R = {(r["algorithm"], r["epsilon"]): r for r in d["rows"]}
    text = _unwrapped("docs", "dependencies.md")
    assert (f"Its final objective was {R[('dpl-linreg', 1.0)]['final']:.1e} at epsilon 1 and "
            f"{R[('dpl-linreg', 8.0)]['final']:.1e} at epsilon 8, against f(0) = "
            f"{R[('dpl-linreg', 1.0)]['f0']:.3f}.").replace("e+0", "e") in text
    assert (f"At epsilon 8 dpfw removed {100 * R[('dpfw', 8.0)]['gap_removed']:.1f}% of the gap; "
            f"dp-bcfw-secure, at this small n and T = 50 with its default row clip, removed "
            f"{100 * R[('dp-bcfw-secure', 8.0)]['gap_removed']:.1f}% (nothing)") in text
    assert R[("dp-bcfw-secure", 8.0)]["gap_removed"] <= 0


def test_vertical_md_default_rules_run_is_the_json():
    """docs/vertical.md "Measured on the issue's case, no tuning flags": the command with
    `--json docs/vertical_defaults_T200.json` (and T = 100, and DP-FW at T = 100)."""
    a, b = _json("vertical_defaults_T200.json"), _json("vertical_defaults_T100.json")
    f0, f1 = _json("vertical_dpfw_T100.json"), _json("vertical_dpfw_T100_clip1.json")
    assert (a["iterations"], b["iterations"], f0["iterations"], f1["iterations"]) == \
        (200, 100, 100, 100)
    assert a["reference_certified"] is True
    ref, f = a["reference_objective"], a["initial_objective"]
    assert all(d["initial_objective"] == f for d in (b, f0, f1))           # the same data
    rem = lambda d: 100 * (f - d["final_objective"]) / (f - ref)  # noqa: E731
    ex = lambda d: d["final_objective"] - ref  # noqa: E731
    fw200 = next(r for r in _json("utility_frontier.json")["rows"] if r["n"] == 100000 and
                 r["algorithm"] == "dpfw" and r["epsilon"] == 4.0)["excess"]
    text = _unwrapped("docs", "vertical.md")
    for s in (
        f"removes {rem(a):.1f}% of the gap ({f:.6f} -> {a['final_objective']:.6f} against {ref:.6f}; "
        f"excess {ex(a):.4f}; spend {a['epsilon_spent']['best']:.2f} by RDP; {a['seconds']:.0f} s;",
        f"With `--iterations 100`: {rem(b):.1f}% (excess {ex(b):.4f}, {b['seconds']:.0f} s;",
        f"excess {ex(f0):.4f} with its defaults, {ex(f1):.4f} with `--derivative-clip 1`, so the "
        f"default dp-bcfw-secure run at T = 100 is within {ex(b) / ex(f1):.2f}x of the better DP-FW "
        f"(T = 200: {ex(a):.4f} against {fw200:.4f} for DP-FW with clip 1 in the frontier in "
        f"[vertical_results.md](vertical_results.md))."):
        assert s in text, s


def test_fedp3_md_bytes_table_is_the_json():
    """docs/fedp3.md "Bytes per scheme": docs/fedp3/bytes/M_S_G.json, one run per row."""
    lines = [x for x in _text("docs", "fedp3.md").splitlines()
             if x.startswith("| cnn |") or x.startswith("| mlp |")]
    assert len(lines) == 26
    for line in lines:
        M, S, G = [c.strip() for c in line.strip("|").split("|")[:3]]
        d = _json(os.path.join("fedp3", "bytes", f"{M}_{S}_{G}.json"))
        assert (d["model"], d["scheme"], d["global_pruning"], d["rounds"], d["private"]) == \
            (M, S, G, 10, False)
        c = d["clients"] * d["rounds"]
        U, Uf, D, Df = (sum(d[k]) for k in ("uplink_bytes", "uplink_bytes_full", "downlink_bytes",
                                             "downlink_bytes_full"))
        assert line == (f"| {M} | {S} | {G} | {U / c:.0f} | {100 * U / Uf:.1f}% | {D / c:.0f} | "
                        f"{100 * D / Df:.1f}% | {d['accuracy']:.3f} |"), line


def test_certify_md_issue35_example_is_recomputed():
    """docs/certify.md's issue-35 example (tests/test_accounting_proven.py's first plan),
    recomputed: RDP against the PLD and the share paid by skipping the PLD."""
    from accounting import Composed, ReportNoisyMax, SelfComposed, report

    ev = Composed([SelfComposed(ReportNoisyMax("gumbel", 20.0, 1.0), 50),
                   SelfComposed(ReportNoisyMax("exponential", 20.0, 1.0), 50)])
    v = report(ev, delta=1e-5).values
    assert (f"paying +{100 * (v['rdp'] / v['pld'] - 1):.1f}% on Gumbel x50 + exponential-noise RNM "
            f"x50 (scale 20, sensitivity 1, delta 1e-5), {v['rdp']:.6f} by RDP where the PLD gives "
            f"{v['pld']:.6f}).") in _unwrapped("docs", "certify.md")


def test_dependencies_md_seed_spread_is_the_json():
    d = _json("dependencies_utility_seeds.json")
    g = [100 * r["gap_removed"] for r in sorted(d["rows"], key=lambda r: r["seed"])]
    assert [r["seed"] for r in sorted(d["rows"], key=lambda r: r["seed"])] == [0, 1, 2]
    text = _unwrapped("docs", "dependencies.md")
    assert (f"the same run at seeds 0, 1, 2 removes {g[0]:.1f}%, {g[1]:.1f}% and {g[2]:.1f}%"
            in text)


def test_vertical_md_flights_eps4_run_is_its_json():
    """docs/vertical_results.md's eps 4, T = 50 flights run: docs/flights_eps4_T50.json."""
    d = _json("flights_eps4_T50.json")
    assert (d["algorithm"], d["seed"], d["iterations"], d["eta"]) == \
        ("dp-bcfw-secure", 0, 50, 2.0)
    gap = (d["initial_objective"] - d["final_objective"]) / \
        (d["initial_objective"] - d["reference_objective"])
    assert (f"--reference --json docs/flights_eps4_T50.json` reached {d['accuracy']:.3f} and "
            f"{d['auc']:.3f} ({100 * gap:.1f}% of the gap, {d['seconds']:.0f} s)") in \
        _unwrapped("docs/vertical_results.md")
def test_certify_md_pld_is_the_exact_value_to_1e_6():
    """docs/certify.md section 3: 100 x 0.1-DP at delta 1e-5, the PLD row "4.306791, the exact value
    to 1e-6 here": the accountant's PLD against the exact optimum computed here independently (the
    Kairouz-Oh-Viswanath delta, term by term at 40 digits with mpmath, solved by bisection; not
    accounting's closed form)."""
    import mpmath

    from accounting import PureDP, SelfComposed, get_accountant

    k, eps, delta = 100, mpmath.mpf("0.1"), mpmath.mpf("1e-5")
    with mpmath.workdps(40):
        def kov_delta(eg):
            return sum(mpmath.binomial(k, j) * max(mpmath.mpf(0), mpmath.exp((k - j) * eps) -
                                                   mpmath.exp(eg + j * eps))
                       for j in range(k + 1)) / (1 + mpmath.exp(eps)) ** k
        lo, hi = mpmath.mpf(0), k * eps                  # delta(lo) > 1e-5 >= delta(hi) = 0
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if kov_delta(mid) > delta else (lo, mid)
        exact = float(hi)
    pld = get_accountant("pld").epsilon(SelfComposed(PureDP(0.1), 100), 1e-5)
    assert exact - 1e-12 <= pld <= exact + 1e-6           # an upper bound, and exact to 1e-6
    text = _unwrapped("docs", "certify.md")
    assert f"composed numerically (pessimistic discretization, and a proven bound on the float " \
        f"error added to every delta): {pld:.6f}, the exact value to 1e-6 here." in text
    assert f"| optimal | **{exact:.3f}** |" in text and f"| pld | {pld:.3f} |" in text


def test_alignment_md_scoring_deployment_is_the_json():
    """docs/alignment.md "Scoring across machines": the deployed scoring run's figures are
    docs/alignment_predict_deploy.json (`python docs/alignment_predict_deploy.py ...`: the run of
    tests/test_flower_predict_deploy.py, once, its scores checked against `vflpriv predict`)."""
    from vflpriv.units import format_bytes

    d = _json("alignment_predict_deploy.json")
    al, sc, tot = d["alignment"], d["scoring"], d["flower_totals"]
    assert (d["parties"], d["ids"]) == (3, 160) and sc["masked"] is True
    ps = al["party_seconds"]
    (nk, kb), (nm, mb) = sc["messages_by_type"]["ScoreKey"], sc["messages_by_type"]["MaskedMargin"]
    text = _unwrapped("docs", "alignment.md")
    assert (f"3 parties holding {', '.join(map(str, al['party_rows'][:-1]))} and "
            f"{al['party_rows'][-1]} of {d['ids']} IDs, {al['intersection_size']} in common; the "
            f"shared 2-core machine, load average {d['load_average']['before']:.1f} before and "
            f"{d['load_average']['after']:.1f} after): {d['seconds']:.1f} s of wall time in all, "
            f"start-up included. The alignment took {al['seconds']:.1f} s for its 4 exchanges (the "
            f"parties' own work {min(ps):.1f}-{max(ps):.1f} s each) and "
            f"{format_bytes(al['bytes']['total'])} of PSI frames. The secure sum took "
            f"{sc['seconds']:.1f} s for its 2 exchanges and {format_bytes(sc['bytes']['total'])} of "
            f"frames ({nk} key offers of {kb // nk} B, {nm} masked margins of {mb // nm} B). In all, "
            f"{format_bytes(tot['uplink'])} of Flower messages went up and "
            f"{format_bytes(tot['downlink'])} down.") in text


def test_vertical_md_dpbcfw_larger_budgets_table_is_the_json():
    """docs/vertical_results.md "Where DP-BCFW-AS learns": the T = 50 / 200 rows are
    docs/dpbcfw_budgets_T50.json and _T200.json (`vflpriv bench utility --algorithms dp-bcfw
    --epsilons 8,16,32,64,128 --iterations T`): share removed and the warning's ratio."""
    lines = _text("docs", "vertical_results.md").splitlines()
    for T in (50, 200):
        d = _json(f"dpbcfw_budgets_T{T}.json")
        c = d["config"]
        assert (c["n"], c["iterations"], c["epsilons"], c["algorithms"], c["seed"]) == \
            ("100000", T, "8,16,32,64,128", "dp-bcfw", 0)
        rows = sorted(d["rows"], key=lambda r: r["epsilon"])
        line = next(x for x in lines if x.startswith(f"| {T} ") and "%" in x)
        cells = [x.strip() for x in line.strip().strip("|").split("|")][1:]
        want = [f"{100 * r['gap_removed']:.1f}% ({'ratio ' if T == 50 and i == 0 else ''}"
                f"{r['outlook_ratio']:.2g})" for i, r in enumerate(rows)]
        assert cells == want, (T, cells, want)
    t50 = _json("dpbcfw_budgets_T50.json")["rows"]
    spent32 = next(r["epsilon_spent"] for r in t50 if r["epsilon"] == 32.0)
    assert f"e.g. {spent32:.1f} of 32 at T = 50" in _unwrapped("docs", "vertical_results.md")


def test_vertical_md_intercept_figures_are_intercept_effect_json():
    """docs/vertical.md's intercept figures: docs/intercept_effect.json (`python
    docs/intercept_effect.py`), sklearn's from docs/peers.json."""
    J = _json("intercept_effect.json")
    R = {(r["table"], r["seed"], r["system"]): r for r in J["rows"]}
    S = {(r["table"], r["seed"]): r["test_auc"] for r in _json("peers.json")["rows"]
         if r["system"] == "sklearn"}
    W, N = "fw, intercept, eta auto", "fw, no intercept, eta 1"

    def pair(t, sy):
        return f"{R[(t, 0, sy)]['test_auc']:.3f} / {R[(t, 1, sy)]['test_auc']:.3f}"

    page = _unwrapped("docs/vertical.md")
    assert (f"test AUC on Default (3.3% positives) {pair('default', W)} against "
            f"{pair('default', N)}, Caravan {pair('caravan', W)} against {pair('caravan', N)}, "
            f"flights {pair('flights', W)} against {pair('flights', N)}") in page
    di = R[("default", 0, "dp-bcfw eps 4, intercept")]
    dn = R[("default", 0, "dp-bcfw eps 4, no intercept")]
    assert (f"b = {di['intercept']:g}, held-out log-loss {di['test_log_loss']:.3f} against "
            f"{dn['test_log_loss']:.3f} without an intercept (AUCs {di['test_auc']:.2f} and "
            f"{dn['test_auc']:.2f}, both below chance)") in page
    assert (f"(Caravan, 2 parties) {pair('caravan', W)} with the intercept and eta auto, "
            f"{pair('caravan', N)} without an intercept (eta 1); scikit-learn's") in page
    assert (f"docs/peers.json) {S[('caravan', 0)]:.3f} / {S[('caravan', 1)]:.3f}. Default (3 "
            f"columns, 3.3% positives): {pair('default', W)} against {S[('default', 0)]:.3f} / "
            f"{S[('default', 1)]:.3f}. flights (40k sample, 3 parties): {pair('flights', W)} "
            f"against {S[('flights', 0)]:.3f} / {S[('flights', 1)]:.3f}.") in page


def test_vertical_md_regression_bar_is_regression_bar_json():
    """docs/vertical.md's regression-bar table: the nine `vflpriv run --json` outputs in
    docs/regression_bar/, each the stated command (algorithm, seed, epsilon, data shape)."""
    rows = []
    for s in (0, 1, 2):
        a, b, c = (_json(f"regression_bar/{k}_seed{s}.json")
                   for k in ("dp-bcfw-secure", "dpfw", "dpfw_clip1"))
        assert (a["algorithm"], b["algorithm"], c["algorithm"]) == \
            ("dp-bcfw-secure", "dpfw", "dpfw")
        assert a["seed"] == b["seed"] == c["seed"] == s
        assert a["n"] == b["n"] == c["n"] == 100000 and a["parties"] == 4
        for d in (a, b, c):
            assert d["privacy"]["target_epsilon"] == 4.0 and d["delta"] == 1e-6
            assert d["reference_certified"]
        assert c["privacy"]["calibration"]["derivative_clip"] == 1.0
        assert b["privacy"]["calibration"]["derivative_clip"] is None
        ratio = a["excess_risk"] / c["excess_risk"]
        assert ratio <= 2.0                       # the bar, as the page claims
        rows.append(f"| {s} | {a['excess_risk']:.4f} | {b['excess_risk']:.4f} | "
                    f"{c['excess_risk']:.4f} | {ratio:.2f} | "
                    f"{a['excess_risk'] / b['excess_risk']:.2f} |")
        assert f"spending {a['epsilon_spent']['best']:.3f} of 4 by RDP" in \
            _unwrapped("docs", "vertical.md")
    page = _text("docs", "vertical.md")
    for r in rows:
        assert r in page
    old = _json("vertical_defaults_T200.json")["excess_risk"]
    mean = sum(_json(f"regression_bar/dp-bcfw-secure_seed{s}.json")["excess_risk"]
               for s in (0, 1, 2)) / 3
    assert abs(mean - old) < 0.001
    assert (f"the three-seed mean, {mean:.4f}, is within 0.001 of that earlier single run"
            in _unwrapped("docs", "vertical.md"))


def test_vertical_md_fw_table_is_peers_fw_json():
    """docs/vertical.md's non-private learner table and claims: docs/peers_fw.json (the bench
    command named there), means over seeds 0-2."""
    d = _json("peers_fw.json")
    assert d["settings"]["systems"] == ["sklearn", "fw"] and d["settings"]["seeds"] == [0, 1, 2]
    S = {(r["table"], r["system"]): r for r in d["summary"]}
    page, flat = _text("docs", "vertical.md"), _unwrapped("docs", "vertical.md")
    worst = 0.0
    for t in ("flights", "caravan", "default", "oj", "fair", "anes96"):
        f, k = S[(t, "fw")]["test_auc"], S[(t, "sklearn")]["test_auc"]
        assert f"| {t} | {f:.3f} | {k:.3f} | {f - k:+.3f} |" in page
        assert abs(f - k) <= 0.01
        worst = max(worst, k - f)
    assert f"(the largest shortfall {worst:.3f})" in flat
    assert f"(Default: {S[('default', 'fw')]['test_log_loss']:.4f} against " \
           f"{S[('default', 'sklearn')]['test_log_loss']:.4f};" in flat
    fw_s = [S[(t, "fw")]["seconds"] for t in d["settings"]["tables"]]
    sk_s = [S[(t, "sklearn")]["seconds"] for t in d["settings"]["tables"]]
    assert f"{min(fw_s):.1f}-{max(fw_s):.0f} s a fit here" in flat
    assert f"(scikit-learn: {min(sk_s):.1f}-{max(sk_s):.0f} s)" in flat


def test_vertical_md_fresh_tables_are_peers_fresh_json():
    """docs/vertical_results.md's wage / college section: docs/peers_fresh.json, and its claims."""
    d = _json("peers_fresh.json")
    assert d["settings"]["tables"] == ["wage", "college"] and d["settings"]["seeds"] == [0, 1, 2]
    S = {(r["table"], r["system"], r["epsilon"]): r["test_auc"] for r in d["summary"]}
    page, flat = _text("docs", "vertical_results.md"), _unwrapped("docs", "vertical_results.md")
    vertical = ("dp-bcfw-secure", "dp-bcfw-secure-pgd", "dp-bcfw-secure-ssp")
    gaps, ssp_best = [], 0
    for t in ("wage", "college"):
        f, k = S[(t, "fw", None)], S[(t, "sklearn", None)]
        assert abs(f - k) <= 0.01
        assert (f"{f:.3f} against scikit-learn's {k:.3f} on {t}" in flat
                or f"{f:.3f} against {k:.3f} on {t}" in flat)
        for e in (0.5, 1.0, 4.0):
            cells = [S[(t, sy, e)] for sy in ("opacus", "opacus-replace") + vertical
                     + ("diffprivlib",)]
            assert f"| {t} | {e:g} | " + " | ".join(f"{v:.3f}" for v in cells) + " |" in page
            ssp_best += max(vertical, key=lambda sy: S[(t, sy, e)]) == "dp-bcfw-secure-ssp"
            if e < 4:
                gaps.append(S[(t, "opacus-replace", e)] - S[(t, "dp-bcfw-secure", e)])
    assert min(gaps) > 0
    assert f"by {min(gaps):.3f}-{max(gaps):.3f}" in flat
    assert ssp_best == 5 and "in five of the six cells" in flat
    assert S[("wage", "dp-bcfw-secure-ssp", 1.0)] >= S[("wage", "opacus-replace", 1.0)]


def test_vertical_md_ten_splits_is_peers_seeds10_json():
    """docs/vertical_results.md's ten-split table and its counts: docs/vertical_variants.py's paired
    statistics recomputed here from docs/peers_seeds10.json (numpy, not the script's own
    arithmetic)."""
    import importlib.util

    import numpy as np

    spec = importlib.util.spec_from_file_location(
        "vertical_variants", os.path.join(ROOT, "docs", "vertical_variants.py"))
    V = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(V)
    doc, auc = V.load(os.path.join(ROOT, "docs", "peers_seeds10.json"))
    seeds = doc["settings"]["seeds"]
    assert seeds == list(range(10)) and doc["settings"]["epsilons"] == [0.5, 1.0]
    rows, counts = V.summary(doc, auc)
    page, flat = _text("docs", "vertical_results.md"), _unwrapped("docs", "vertical_results.md")
    for r in rows:
        assert r in page
    clear = {}
    below_dpsgd = 0
    for t in V.TABLES:
        for e in V.EPSILONS:
            for a, b in (("dp-bcfw-secure-pgd", "dp-bcfw-secure"),
                         ("dp-bcfw-secure-ssp", "dp-bcfw-secure"),
                         ("dp-bcfw-secure-ssp", "opacus-replace")):
                d = np.array([auc[(t, a, e, s)] - auc[(t, b, e, s)] for s in seeds])
                m, se = d.mean(), d.std(ddof=1) / np.sqrt(len(d))
                v = "above" if m > 2 * se else ("below" if m < -2 * se else "level")
                clear[(a, b, v)] = clear.get((a, b, v), 0) + 1
            glm = np.mean([auc[(t, "dp-bcfw-secure", e, s)] for s in seeds])
            below_dpsgd += glm < np.mean([auc[(t, "opacus-replace", e, s)] for s in seeds])
    assert clear == counts
    S, G, O = "dp-bcfw-secure-ssp", "dp-bcfw-secure", "opacus-replace"
    assert (clear[(S, G, "above")], clear.get((S, G, "below"), 0)) == (10, 0)
    assert "clearly above in 10 of the 16 cells, never clearly below" in flat
    P = "dp-bcfw-secure-pgd"
    assert (clear[(P, G, "above")], clear[(P, G, "below")], clear[(P, G, "level")]) == (4, 1, 11)
    assert (clear[(S, O, "above")], clear[(S, O, "below")], clear[(S, O, "level")]) == (4, 1, 11)
    ssp_at_or_above = sum(
        np.mean([auc[(t, S, e, s)] for s in seeds]) >= np.mean([auc[(t, O, e, s)] for s in seeds])
        for t in V.TABLES for e in V.EPSILONS)
    assert ssp_at_or_above == 9 and "at or above DP-SGD's in 9 of the 16 cells" in flat
    assert below_dpsgd == 16 and "glm's mean is below DP-SGD's in all 16" in flat
    readme = _unwrapped("docs", "classification.md")
    assert ("the ssp path is clearly above the per-round path (glm, below) in 10 of 16 cells and "
            "never clearly below, its mean AUC is at or above central DP-SGD's in 9 of 16 where "
            "glm's is below in all 16") in readme


def test_vertical_md_ssp_sparsity_is_ssp_sparsity_json():
    """docs/vertical_results.md's paragraph on the ssp path's density: docs/ssp_sparsity.json."""
    d = _json("ssp_sparsity.json")
    R = {(r["table"], r["epsilon"], r["radius"]): r for r in d["rows"]}
    tables = ("flights", "caravan", "default", "oj", "fair", "anes96", "wage", "college")
    cells = [(t, e) for t in tables for e in (0.5, 1.0)]
    flat = _unwrapped("docs", "vertical_results.md")
    assert all(R[(t, e, "none")]["support"] == R[(t, e, "none")]["columns"] for t, e in cells)
    assert all(len(R[c + ("none",)]["aucs"]) == 10 for c in cells)

    def share(lab):
        return sum(R[c + (lab,)]["support"] / R[c + (lab,)]["columns"] for c in cells) / len(cells)

    def diffs(lab):
        return [R[c + (lab,)]["test_auc"] - R[c + ("none",)]["test_auc"] for c in cells]

    assert max(abs(v) for v in diffs("rule")) < 1e-4
    assert f"binds ({100 * share('rule'):.0f}% of the coefficients nonzero" in flat
    d4, d16 = diffs("rule/4"), diffs("rule/16")
    assert (f"keep {100 * share('rule/4'):.0f}% of their coefficients and the AUC moves by "
            f"{min(d4):+.3f} to {max(d4):+.3f} (mean {sum(d4) / 16:+.3f}, below the ridge alone "
            f"in {sum(v < 0 for v in d4)} of the 16 cells)") in flat
    assert (f"at eta_0 / 16, {100 * share('rule/16'):.0f}% and {min(d16):+.3f} to "
            f"{max(d16):+.3f} (mean {sum(d16) / 16:+.3f}, below in {sum(v < 0 for v in d16)};")\
        in flat


def test_every_peers_page_is_rendered_from_its_json():
    """Each docs/peers*.md next to a docs/peers*.json is what `vflpriv bench peers --markdown`
    renders from that JSON (vflpriv.bench.peers_report.render), so no page is edited by hand."""
    import glob

    from vflpriv.bench.peers_report import render

    pages = sorted(glob.glob(os.path.join(ROOT, "docs", "peers*.json")))
    assert len(pages) >= 7
    for j in pages:
        md = j[:-len(".json")] + ".md"
        with open(j) as fh:
            doc = json.load(fh)
        assert _text("docs", os.path.basename(md)) == render(doc) + "\n", md


def test_vertical_md_fw_fresh_table_is_peers_fw_fresh_json():
    """docs/vertical.md's `fw` rows on carseats, boston and bikeshare: docs/peers_fw_fresh.json
    (the command named there), the first bar (within 0.01 of scikit-learn) on each, and the
    widened grid recorded in every fw row."""
    d = _json("peers_fw_fresh.json")
    assert d["settings"]["tables"] == ["carseats", "boston", "bikeshare"]
    S = {(r["table"], r["system"]): r for r in d["summary"]}
    page, flat = _text("docs", "vertical.md"), _unwrapped("docs", "vertical.md")
    worst = 0.0
    for t in d["settings"]["tables"]:
        f, k = S[(t, "fw")]["test_auc"], S[(t, "sklearn")]["test_auc"]
        assert f"| {t} | {f:.3f} | {k:.3f} | {f - k:+.3f} |" in page
        assert abs(f - k) <= 0.01
        worst = max(worst, k - f)
    assert f"(the largest shortfall {worst:.3f}, carseats)" in flat
    fw = [r for r in d["rows"] if r["system"] == "fw"]
    assert fw and all("2^-2..2^" in r["settings"]["eta_rule"] for r in fw)


def test_vertical_md_one_release_bar_is_its_json():
    """docs/vertical.md's table of the squared loss's one release on the regression target:
    docs/regression_bar/dp-bcfw-secure-ssp_seedS.json (the default, floor 1.5) and
    dp-bcfw-secure-ssp-floor0_seedS.json (floor 0), the rule's choice printed in each, beside
    the rounds' JSON; the page's claims about which met the 88% checked here."""
    page = _text("docs", "vertical.md")

    def removed(d):
        f0, fT, ref = d["initial_objective"], d["final_objective"], d["reference_objective"]
        return (f0 - fT) / (f0 - ref)

    for s in (0, 1, 2):
        a = _json(f"regression_bar/dp-bcfw-secure-ssp_seed{s}.json")
        z = _json(f"regression_bar/dp-bcfw-secure-ssp-floor0_seed{s}.json")
        c = _json(f"regression_bar/dpfw_clip1_seed{s}.json")
        old = _json(f"regression_bar/dp-bcfw-secure_seed{s}.json")
        for d in (a, z):
            assert d["algorithm"] == "dp-bcfw-secure" and d["secure"]["path"] == "ssp"
            assert d["seed"] == s and d["n"] == 100000 and d["parties"] == 4
            assert d["privacy"]["target_epsilon"] == 4.0 and d["delta"] == 1e-6
            assert d["reference_certified"] and d["defaults"][0]["name"] == "squared_path"
            assert "n a / d = 962 is at least 4 times the largest noise entry 205" in \
                d["defaults"][0]["rule"]
        # the default's floor is 1.5 times the noise entry (205.2 here); the first version's 0
        assert a["secure"]["ridge"] == pytest.approx(1.5 * 205.2, rel=1e-3)
        ratio = a["excess_risk"] / c["excess_risk"]
        assert ratio <= 2.0 and removed(z) >= 0.88          # as the page says
        assert (f"| {s} | {a['excess_risk']:.4f} | {100 * removed(a):.1f}% | {ratio:.2f} | "
                f"{z['excess_risk']:.4f} | {100 * removed(z):.1f}% | {old['excess_risk']:.4f} | "
                f"{100 * removed(old):.1f}% |") in page
    worst = min(removed(_json(f"regression_bar/dp-bcfw-secure-ssp_seed{s}.json"))
                for s in (0, 1, 2))
    assert worst < 0.88 and f"{100 * worst:.1f}% on seed 2" in _unwrapped("docs", "vertical.md")
