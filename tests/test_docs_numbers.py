"""Figures in the docs are traceable to committed output: each check below reads a committed JSON
(written by the command named in it) and asserts the page quotes what that JSON holds, so a page
cannot drift from its source, and the JSON cannot silently go stale when the command changes."""
import json
import os
import re

import pytest

from vflpriv.units import format_bytes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _page(name):
    with open(os.path.join(ROOT, "docs", name)) as fh:
        return fh.read()


def _json(name):
    with open(os.path.join(ROOT, "docs", name)) as fh:
        return json.load(fh)


def _removed(doc):
    return 100.0 * (doc["initial_objective"] - doc["final_objective"]) / \
        (doc["initial_objective"] - doc["reference_objective"])


def test_demo_json_is_the_current_demo():
    """docs/demo.json (`vflpriv demo --json docs/demo.json`) holds the runs the demo makes now."""
    from vflpriv.cli import demo

    runs = _json("demo.json")["runs"]
    assert [r["command"] for r in runs] == [
        "vflpriv " + " ".join(["run", "--data", demo.DATA, "--parties", "4", "--eta", "1",
                               "--seed", "0", "--reference", *extra]) for extra in demo.RUNS]


def test_vertical_md_quotes_the_demo():
    runs = {r["algorithm"]: r for r in _json("demo.json")["runs"]}
    m = re.search(r"In `vflpriv demo` \(n = 5e4, d = 400, T = 100, eps = 4\) it removes (\d+)%, "
                  r"against (\d+)% for\s+dp-bcfw-secure", _page("vertical_results.md"))
    assert m, "the sentence quoting the demo is not on docs/vertical_results.md any more"
    assert int(m.group(1)) == round(_removed(runs["dp-bcfw"]))
    assert int(m.group(2)) == round(_removed(runs["dp-bcfw-secure"]))
    # and the demo's predictor-noise ratio quoted by the warning's paragraph
    ratio = runs["dp-bcfw"]["privacy"]["calibration"]["outlook"]["ratio"]
    assert f"the demo's {ratio:.1f}" in _page("vertical_results.md")


@pytest.mark.parametrize("contender,key", [
    ("compiled", "compiled"), ("reference", "reference"),
    ("materialize J once (`standard_normal`) and use J[:, rows]", "materialized_J")])
def test_kernels_md_sketch_columns_memory_is_the_json(contender, key):
    b = _json("kernels_bench.json")["sketch_columns"]["peak_extra_bytes"][key]
    row = next(line for line in _page("kernels.md").splitlines()
               if line.startswith(f"| {contender} |"))
    shown = row.rstrip(" |").rsplit("|", 1)[1].strip()
    digits = 0 if b >= 1e5 and b < 1e6 else 1
    assert shown == format_bytes(b, digits)


@pytest.mark.parametrize("contender,key", [
    ("gaussian compiled", "gaussian_compiled"), ("gaussian reference", "gaussian_reference"),
    ("scikit-learn GaussianRandomProjection", "sklearn_GaussianRandomProjection"),
    ("countsketch compiled, sparse output", "countsketch_compiled_sparse_output"),
    ("countsketch compiled, dense output", "countsketch_compiled"),
    ("scipy clarkson_woodruff_transform (sparse output)", "scipy_clarkson_woodruff_transform")])
def test_kernels_md_sketch_matrix_memory_is_the_json(contender, key):
    b = _json("kernels_bench.json")["sketch_matrix"]["peak_extra_bytes"][key]
    row = next(line for line in _page("kernels.md").splitlines()
               if line.startswith(f"| {contender} |"))
    assert row.rstrip(" |").rsplit("|", 1)[1].strip() == f"{b / 1e6:.1f}"


def test_certify_md_quotes_the_recorded_calibration():
    """docs/certify.md's DP-SGD calibration: the noise and the time are those of the committed
    run (docs/certify_calibration.json); the RDP-alone noise is recomputed here."""
    from accounting import PoissonSubsampledGaussian, SelfComposed, calibrate

    cal = _json("certify_calibration.json")["calibrated"]
    page = _page("certify.md")
    assert cal["accountant"] == "pld"
    assert f"gives {cal['noise_multiplier']:.5f} (PLD)" in page
    assert f"calibration took {cal['seconds']:.2f} s in the run recorded in" in page
    m = re.search(r"where RDP alone\s+needs (\d\.\d{5})", page)
    rdp = calibrate(lambda s: SelfComposed(PoissonSubsampledGaussian(
        noise_multiplier=s, sample_rate=256 / 60000), 14100), 3.0, 1e-5, guess=1.1,
        accountant="rdp", decreasing=True)
    assert m and float(m.group(1)) == round(rdp.value, 5)


def test_vertical_md_scale_table_is_scale_bench_json():
    """The n = 1e5 / 1e6 table of docs/vertical_results.md is docs/scale_bench.json
    (`vflpriv bench scale --json docs/scale_bench.json`), formatted as the bench prints it."""
    page = _page("vertical_results.md")
    for r in _json("scale_bench.json")["runs"]:
        n = {100000: "1e5", 1000000: "1e6"}[r["n"]]
        row = next(line for line in page.splitlines() if line.startswith(f"| {n} | "))
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[1:5] == [f"{r[k]:.1f} s" for k in ("wall_seconds", "setup_seconds",
                                                        "rounds_seconds", "other_seconds")]
        assert cells[5].startswith(format_bytes(r["peak_rss_bytes"]) + " (")


def test_vertical_md_flower_paragraph_is_scale_bench_flower_json():
    r = _json("scale_bench_flower.json")["runs"][0]
    page = " ".join(_page("vertical_results.md").split())          # the paragraph, unwrapped
    assert (f"wall {r['wall_seconds']:.1f} s ({r['wall_seconds'] / 60:.1f} min): setup "
            f"{r['setup_seconds']:.1f} s, 200 rounds {r['rounds_seconds']:.1f} s "
            f"({r['seconds_per_round']:.1f} s per round; {r['products']} secure products), "
            f"generation and start-up {r['other_seconds']:.1f} s; epsilon "
            f"{r['epsilon_spent']:.1f}") in page
    assert f"the largest process {format_bytes(r['peak_rss_bytes'])} (`wait4`)" in page
    assert f"together {format_bytes(r['peak_tree_rss_bytes'])} at their peak" in page
    assert f"relays {r['masked_block_bytes'] / 1e9:.0f} GB of masked blocks" in page


def _frontier_rows(page_text, header_start):
    """Rows ``(n, algorithm, [(removed %, excess)...])`` of the table whose header starts so."""
    lines = page_text.splitlines()
    i = next(k for k, line in enumerate(lines) if line.replace(" ", "").startswith(header_start))
    out = []
    for line in lines[i + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        pts = [re.fullmatch(r"(-?[\d.]+)% \(([\d.e-]+)\)", c).groups() for c in cells[2:]]
        out.append((float(cells[0]), cells[1], pts))
    return out


@pytest.mark.parametrize("json_name,header", [
    ("utility_frontier_flights.json", "|n|algorithm|eps0.5|"),
    ("utility_frontier.json", "|n|algorithm|eps0.5|")])
def test_vertical_md_frontier_tables_are_the_json(json_name, header):
    """Each frontier table of docs/vertical_results.md quotes its committed JSON (`vflpriv bench utility
    --json ...`): the share removed to 0.1% and the excess to its printed digits."""
    doc = _json(json_name)
    by = {(r["n"], r["algorithm"], r["epsilon"]): r for r in doc["rows"] if "gap_removed" in r}
    eps = [float(e) for e in doc["config"]["epsilons"].split(",")]
    ns = {r["n"] for r in doc["rows"]}
    page = _page("vertical_results.md")
    # the flights table comes first on the page, the synthetic one after it
    start = page.index("## Measured on real data: flights") if "flights" in json_name else \
        page.index("## The frontier (`vflpriv bench utility`)")
    rows = _frontier_rows(page[start:], header)
    assert {int(n) for n, _, _ in rows} == ns
    for n, algo, pts in rows:
        for e, (removed, excess) in zip(eps, pts):
            r = by[(int(n), algo, e)]
            assert float(removed) == round(100 * r["gap_removed"], 1), (n, algo, e)
            decimals = len(excess.split(".")[1]) if "." in excess and "e" not in excess else 0
            assert abs(float(excess) - r["excess"]) <= 0.5 * 10 ** -decimals * \
                max(1.0, abs(r["excess"]) if decimals == 0 else 1.0) + 1e-12, (n, algo, e)


def test_vertical_md_t50_table_is_the_json():
    doc = _json("utility_frontier_T50.json")
    by = {(r["algorithm"], r["epsilon"]): r for r in doc["rows"] if "gap_removed" in r}
    eps = [float(e) for e in doc["config"]["epsilons"].split(",")]
    lines = _page("vertical_results.md").splitlines()
    i = next(k for k, line in enumerate(lines) if line.startswith("| n = 1e5, T = 50 |"))
    for line in lines[i + 2:i + 4]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        for e, c in zip(eps, cells[1:]):
            removed, excess = re.fullmatch(r"(-?[\d.]+)% \(([\d.]+)\)", c).groups()
            r = by[(cells[0], e)]
            assert removed == f"{100 * r['gap_removed']:.1f}", (cells[0], e)
            assert excess == f"{r['excess']:.{len(excess.split('.')[1])}f}", (cells[0], e)


def test_kernels_md_noisy_argmax_table_is_the_json():
    """docs/kernels.md's d = 1e6 noisy-argmax table (ms) is docs/kernels_bench.json."""
    rows = {r["noise"]: r for r in _json("kernels_bench.json")["noisy_argmax"]
            if r["d"] == 1000000}
    page = _page("kernels.md")
    floor = rows["laplace"]["seconds"]["draw_d_uniforms"] * 1e3
    assert f"floor = `rng.random(d)`, {floor:.1f} ms in this run" in page
    for noise, r in rows.items():
        s = r["seconds"]
        line = next(x for x in page.splitlines() if x.startswith(f"| {noise} | "))
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        assert cells[1:] == [f"{s['compiled'] * 1e3:.1f}", f"{s['reference'] * 1e3:.1f}",
                             f"{s['naive'] * 1e3:.1f}", f"{r['speedup']:.1f}x",
                             f"{r['compiled_over_uniform_floor']:.1f}"], noise


def test_alignment_md_quotes_the_align_bench():
    """docs/alignment.md's table is docs/align_bench.json (`vflpriv bench align --sizes
    100000,1000000 --json docs/align_bench.json`): seconds, bytes, bytes per ID, |C|."""
    page, doc = _page("alignment.md"), _json("align_bench.json")
    assert len(doc["rows"]) == 4
    for r in doc["rows"]:
        name = "vflpriv ECDH-PSI (X25519)" if r["system"].startswith("vflpriv") else \
            "openmined-psi 2.0 (P-256)"
        row = (f"| {r['size']} | {name} | {r['seconds']:.1f} | {format_bytes(r['wire_bytes'])} | "
               f"{r['wire_bytes_per_id']:.1f} B | {r['intersection_size']} |")
        assert row in page, row
        assert r.get("correct", True) is True


def test_alignment_md_quotes_the_1e6_align_run():
    """docs/align_bench_1e6.json (`vflpriv bench align --sizes 1000000 --no-peer --json ...`)."""
    page, r = _page("alignment.md"), _json("align_bench_1e6.json")["rows"][0]
    assert r["size"] == 1000000 and r["parties"] == 3 and r["correct"] is True
    assert f"**{r['seconds']:.1f} s** of wall time" in page
    assert f"({r['cpu_seconds']:.1f} s of CPU)" in page


def test_network_md_table_is_network_bench_json():
    """docs/network.md's figures are `vflpriv bench network`'s JSON, through the bench's own
    table (docs/network_bench.json)."""
    from vflpriv.bench.network import table

    runs = _json("network_bench.json")["runs"]
    assert table(runs) in _page("network.md")
    assert {r["rate"] for r in runs if r.get("status") == "done"} == {"1gbit", "100mbit"}


# ---- docs/audit.md: every figure is one of the committed audit / ledger JSONs (docs/audit/)

def _audit(name):
    return _json(os.path.join("audit", name + ".json"))


def _by_name(doc):
    return {m["name"]: m for m in doc["mechanisms"]}


def _unwrapped(name):
    return " ".join(_page(name).split())


@pytest.mark.parametrize("name,command", [
    ("full", "vflpriv audit --json docs/audit/full.json"),
    ("gaussian_1e7", "vflpriv audit --mechanism gaussian --samples 10000000 --json "
                     "docs/audit/gaussian_1e7.json")])
def test_audit_md_tables_are_the_audit_json(name, command):
    """The two audit tables on docs/audit.md are what `vflpriv audit` prints for the committed
    JSON (the command's own formatting, vflpriv.cli.audit.table)."""
    from vflpriv.cli.audit import table

    doc = _audit(name)
    assert doc["ok"] is True and doc["seed"] == 0
    assert f"$ {command}\n{table(doc)}\n```" in _page("audit.md")


def test_audit_md_quotes_the_full_audit():
    doc = _audit("full")
    M = _by_name(doc)
    page = _unwrapped("audit.md")
    mech_level = ["laplace", "gaussian", "rnm_laplace", "rnm_gumbel", "rnm_exponential",
                  "sketch_gaussian", "laplace_snapping", "private_selection"]
    assert (f"({doc['wall_seconds']:.0f} s wall time for the {len(M)} mechanisms" in page)
    assert f"take {sum(M[n]['seconds'] for n in mech_level):.1f} s together" in page
    # the share table
    s = {n: f"{m['share']:.2f}" for n, m in M.items()}
    g = {n: f"{m['tradeoff']['gdp_share']:.2f}" for n, m in M.items()
         if m["tradeoff"]["gdp_share"] is not None}
    gauss = M["gaussian"]
    for row in (f"| laplace | {s['laplace']} | - |",
                f"| rnm_laplace, rnm_gumbel, rnm_exponential | {s['rnm_laplace']}, "
                f"{s['rnm_gumbel']}, {s['rnm_exponential']} | - |",
                f"| gaussian | {s['gaussian']} (split test alone: "
                f"{gauss['split_epsilon'] / gauss['claimed_epsilon']:.2f}) | {g['gaussian']} |",
                f"| sketch_gaussian, dp_bcfw_intercept, dp_bcfw_secure_intercept | "
                f"{s['sketch_gaussian']}, {s['dp_bcfw_intercept']}, "
                f"{s['dp_bcfw_secure_intercept']} | {g['sketch_gaussian']}, "
                f"{g['dp_bcfw_intercept']}, {g['dp_bcfw_secure_intercept']} |",
                f"| discrete_gaussian, distributed_discrete_gaussian, dp_bcfw_secure_release | "
                f"{s['discrete_gaussian']}, {s['distributed_discrete_gaussian']}, "
                f"{s['dp_bcfw_secure_release']} | - (Renyi claims) |"):
        assert row in page, row
    it = M["dp_bcfw_iteration"]
    assert f"the engine records ({it['claimed_epsilon']:.4f} at delta 1e-5)" in page
    assert f"2 x 1e5 steps took {M['fedp3_local_step']['seconds']:.0f} s in the run above" in page
    # the threshold test against the envelope, in the run above
    assert (f"releases audit at {M['gaussian']['split_epsilon']:.2f} and "
            f"{M['sketch_gaussian']['split_epsilon']:.2f} against a claim of 1") in page
    assert (f"reaches {g['gaussian']} and {g['sketch_gaussian']} of those claims in "
            "Gaussian-DP terms") in page
    assert (f"(gaussian {gauss['tradeoff']['epsilon']:.2f} against "
            f"{gauss['split_epsilon']:.2f}, dp_bcfw_iteration {it['tradeoff']['epsilon']:.2f} "
            f"against {it['split_epsilon']:.2f} in the run above)") in page
    lap = M["laplace"]
    assert (f"(laplace {lap['split_epsilon']:.3f} against {lap['tradeoff']['epsilon']:.3f})"
            in page)
    gl = ["gaussian", "sketch_gaussian", "dp_bcfw_intercept", "dp_bcfw_secure_intercept"]
    gd = [M[n]["tradeoff"]["gdp_share"] for n in gl]
    ep = [M[n]["share"] for n in gl]
    assert (f"the Gaussian entries reach {min(gd):.2f}-{max(gd):.2f} of their claim in GDP terms "
            f"(gaussian, sketch_gaussian, dp_bcfw_intercept, dp_bcfw_secure_intercept), against "
            f"{min(ep):.2f}-{max(ep):.2f} as epsilon bounds") in page
    # the envelope's epsilon over the claim (the logistic path's claims are discrete
    # Gaussians, not GDP claims, so the JSON's gdp_share is empty for them)
    share = lambda m: m["tradeoff"]["gdp_epsilon"] / m["claimed_epsilon"]  # noqa: E731
    assert (f"{share(M['dp_bcfw_secure_glm_scores']):.2f} and "
            f"{share(M['dp_bcfw_secure_glm_intercept']):.2f}.") in page


def test_audit_md_quotes_the_1e6_and_1e7_audits():
    page = _unwrapped("audit.md")
    g6, g7, three = _audit("gaussian_1e6"), _audit("gaussian_1e7"), _audit("three_1e7")
    a, b = g6["mechanisms"][0], g7["mechanisms"][0]
    assert a["samples"] == 1_000_000 and b["samples"] == 10_000_000
    assert (f"This run took {g7['wall_seconds']:.1f} s and "
            f"{format_bytes(g7['peak_rss_bytes'])} of peak memory") in page
    T = _by_name(three)
    assert {m["samples"] for m in three["mechanisms"]} == {10_000_000}
    assert f"--json docs/audit/three_1e7.json`) took {three['wall_seconds']:.0f} s." in page
    assert (f"Their bounds were {T['gaussian']['lower_bound']:.3f}, "
            f"{T['laplace']['lower_bound']:.3f} and {T['sketch_gaussian']['lower_bound']:.3f} "
            f"(confidence {three['per_mechanism_confidence']:.4g} each)") in page
    assert f"per side: {format_bytes(three['peak_rss_bytes'])} at peak." in page
    assert (f"With the split test it was {a['split_epsilon']:.2f} at 1e6 and "
            f"{b['split_epsilon']:.2f} at 1e7; with the envelope's tail-dense grid, "
            f"{a['tradeoff']['epsilon']:.2f} and {b['tradeoff']['epsilon']:.2f}") in page
    m = _by_name(_audit("full"))["gaussian"]["tradeoff"]
    assert (f"{m['mu_lower']:.3f} of {m['mu_claimed']:.3f} at 1e5, "
            f"{a['tradeoff']['mu_lower']:.3f} at 1e6 and {b['tradeoff']['mu_lower']:.3f} at 1e7"
            in page)


def test_audit_md_quotes_the_per_entry_audits():
    page = _unwrapped("audit.md")
    S = _by_name(_audit("secure"))
    assert (f"--json docs/audit/secure.json` (1e5 samples, seed 0): lower bounds "
            f"{S['dp_bcfw_secure_selection']['lower_bound']:.4f} and "
            f"{S['dp_bcfw_secure_release']['lower_bound']:.4f} "
            f"({_audit('secure')['wall_seconds']:.0f} s for both)") in page
    for name, mech, claim in (("glm_scores", "dp_bcfw_secure_glm_scores", ""),
                              ("glm_intercept", "dp_bcfw_secure_glm_intercept", " 1.0"),
                              ("ls_intercept", "dp_bcfw_secure_intercept", " 1.0"),
                              ("release_routed", "dp_bcfw_secure_release_routed", " 1.0")):
        doc = _audit(name)
        m = doc["mechanisms"][0]
        assert m["name"] == mech and m["samples"] == 30000 and doc["seed"] == 0
        assert (f"docs/audit/{name}.json`" in page)
        share = m["tradeoff"]["gdp_epsilon"] / m["claimed_epsilon"]
        assert (f"lower bound {m['lower_bound']:.4f}, Gaussian-DP envelope "
                f"{m['tradeoff']['gdp_epsilon']:.4f} ({share:.0%} of the "
                f"claim{claim})") in page
    P = _by_name(_audit("sparse"))
    assert (f"--json docs/audit/sparse.json` (1e5 samples, seed 0): lower bounds "
            f"{P['sparse_client_round']['lower_bound']:.3f} and "
            f"{P['sparse_record_step']['lower_bound']:.3f}") in page
    H = _by_name(_audit("horizontal"))
    assert _audit("horizontal")["per_mechanism_confidence"] == 0.975
    assert (f"lower bounds {H['horizontal_local_step']['lower_bound']:.4f} and "
            f"{H['fedp3_local_step']['lower_bound']:.4f}, both ok") in page


def test_audit_md_ledger_section_is_the_committed_run():
    """Section 1: the run's printed figures are docs/audit/ledger_run.json (the page's command
    with `--json`), the `ledger verify --json` block is docs/audit/ledger_verify.json, and the
    PLD figure is docs/audit/ledger_verify_pld.json (`... --accountant pld --json`)."""
    text = _page("audit.md")
    run, ver = _audit("ledger_run"), _audit("ledger_verify")
    pld = _audit("ledger_verify_pld")
    eps = run["epsilon_spent"]
    tot = {k: format_bytes(sum(run[k].values())) for k in (
        "uplink_bytes", "uplink_bytes_framed", "uplink_bytes_naive", "uplink_bytes_full_gradient",
        "downlink_bytes")}
    for line in (f"dp-bcfw: {run['iterations']} iterations, K={run['parties']}, n={run['n']}, "
                 f"{run['seconds']:.2f} s",
                 f"  objective {run['initial_objective']:.6f} -> {run['final_objective']:.6f}, "
                 f"support {run['support_size']}",
                 f"  uplink {tot['uplink_bytes']} payload ({tot['uplink_bytes_framed']} framed); "
                 f"raw columns would be {tot['uplink_bytes_naive']}, full gradients "
                 f"{tot['uplink_bytes_full_gradient']}",
                 f"  downlink {tot['downlink_bytes']} payload",
                 f"  privacy: epsilon spent {eps['best']:.4g} (best: "
                 f"{run['privacy']['best_accountant']}; rdp={eps['rdp']:.4g}, "
                 f"pld={eps['pld']:.4g}) at delta=1e-05, target 2, "
                 f"{run['privacy']['releases']} ledger records"):
        assert "\n" + line + "\n" in text, line
    assert "$ vflpriv ledger verify run.ledger --json\n" + json.dumps(ver, indent=2) + "\n```" \
        in text
    assert ver["run_ids"][0][:8] in text.split("$ vflpriv ledger show run.ledger")[1][:400]
    for party, e in ver["epsilon_spent_per_party"].items():
        assert f"  {party}: epsilon {e:.6g}\n" in text
    assert f"  total: epsilon {ver['epsilon_spent']:.6g}\n" in text
    assert f"spent {ver['epsilon_spent']:.6g}\n" in text
    assert pld["accountant"] == "pld" and pld["run_ids"] == ver["run_ids"]
    assert f"`--accountant pld` reports {pld['epsilon_spent']:.6g} and still" in _unwrapped(
        "audit.md")


# ---- docs/flower.md: bytes and seconds per round (vflpriv bench transport; vflpriv run --json)

def _row(page, start):
    line = next(x for x in page.splitlines() if x.startswith(start))
    return [c.strip() for c in line.strip().strip("|").split("|")][1:]


def _plus(a, b):
    r = a / b - 1
    return f"+{100 * r:.0f}%" if r >= 0.01 else f"+{100 * r:.1f}%"


def test_flower_md_tables_are_the_transport_bench_and_the_runs():
    """docs/flower.md's Bytes and Time tables: docs/transport_bench.json (`vflpriv bench
    transport --rounds 4 --deploy-rounds 2 --json ...`) for DP-BCFW-AS and FedAvg, the three
    `vflpriv run --json` files of the logistic path (docs/flower_glm_*.json) for its row."""
    page = _page("flower.md")
    tb = _json("transport_bench.json")
    V = {r["backend"]: r for r in tb["vertical"]}
    H = {r["backend"]: r for r in tb["horizontal"]}
    assert V["inprocess"]["rounds"] == V["flower-sim"]["rounds"] == 4 and V["flower"]["rounds"] == 2
    assert V["flower-sim"]["same_model_as_inprocess"] is True
    c = lambda x: f"{x:,.0f} B"  # noqa: E731
    fs, fd, hs = V["flower-sim"], V["flower"], H["flower-sim"]
    assert _row(page, "| DP-BCFW-AS, 4 parties, n = 500") == [
        c(fs["uplink_frame_bytes_per_round"]),
        f"{c(fs['uplink_flower_bytes_per_round'])} "
        f"({_plus(fs['uplink_flower_bytes_per_round'], fs['uplink_frame_bytes_per_round'])})",
        c(fs["downlink_frame_bytes_per_round"]), c(fs["downlink_flower_bytes_per_round"])]
    assert _row(page, "| same, loopback deployment") == [
        c(fd["uplink_frame_bytes_per_round"]), c(fd["uplink_flower_bytes_per_round"]),
        c(fd["downlink_frame_bytes_per_round"]), c(fd["downlink_flower_bytes_per_round"])]
    assert _row(page, "| FedAvg, 100 clients (digits") == [
        c(hs["uplink_bytes_per_round"]),
        f"{c(hs['uplink_flower_bytes_per_round'])} "
        f"({_plus(hs['uplink_flower_bytes_per_round'], hs['uplink_bytes_per_round'])})",
        c(hs["downlink_bytes_per_round"]), c(hs["downlink_flower_bytes_per_round"])]
    gin, gsim = _json("flower_glm_inprocess.json"), _json("flower_glm_sim.json")
    gdep = _json("flower_glm_deploy.json")
    T, f = gsim["iterations"], gsim["flower"]
    up, down = sum(gsim["uplink_bytes_framed"].values()), sum(gsim["downlink_bytes_framed"].values())
    assert _row(page, "| dp-bcfw-secure logistic, 3 parties, n = 2000, d = 40") == [
        c(up / T), f"{c(f['uplink_flower_bytes'] / T)} ({_plus(f['uplink_flower_bytes'], up)})",
        c(down / T), c(f["downlink_flower_bytes"] / T)]
    # the time table
    assert _row(page, "| DP-BCFW-AS, 4 parties (index, then feature") == [
        f"{V['inprocess']['seconds_per_round']:.3f}",
        f"{fs['seconds_per_round']:.3f} ({fs['startup_seconds']:.1f} s)",
        f"{fd['seconds_per_round']:.1f} ({fd['startup_seconds']:.0f} s)"]
    assert _row(page, "| FedAvg, 100 clients, one local epoch") == [
        f"{H['inprocess']['seconds_per_round']:.3f}",
        f"{hs['seconds_per_round']:.3f} ({hs['startup_seconds']:.1f} s)", "not run (100 SuperNodes)"]
    Td = gdep["iterations"]
    assert gin["iterations"] == T and gdep["flower"]["backend"] == "flower"
    assert _row(page, "| dp-bcfw-secure logistic, 3 parties, n = 2000 (four") == [
        f"{gin['seconds'] / T:.3f}", f"{gsim['seconds'] / T:.1f} ({gsim['seconds']:.1f} s for {T} "
        "rounds)", f"{gdep['seconds'] / Td:.0f} (n = {gdep['n']}, {Td} rounds: "
        f"{gdep['seconds']:.0f} s)"]


def test_vertical_md_on_flower_table_is_the_glm_runs():
    """docs/vertical.md "On Flower": docs/flower_glm_inprocess.json and flower_glm_sim.json."""
    page = _page("vertical.md")
    gin, gsim = _json("flower_glm_inprocess.json"), _json("flower_glm_sim.json")
    c = lambda x: f"{x:,.0f} B"  # noqa: E731
    up, down = sum(gin["uplink_bytes_framed"].values()), sum(gin["downlink_bytes_framed"].values())
    assert (sum(gsim["uplink_bytes_framed"].values()),
            sum(gsim["downlink_bytes_framed"].values())) == (up, down)
    f = gsim["flower"]
    assert _row(page, "| inprocess | ") == [f"{gin['seconds']:.2f}", f"{c(up)} / {c(down)}", "-"]
    assert _row(page, "| flower-sim | ") == [
        f"{gsim['seconds']:.2f}", "the same",
        f"{c(f['uplink_flower_bytes'])} / {c(f['downlink_flower_bytes'])} "
        f"({_plus(f['uplink_flower_bytes'] + f['downlink_flower_bytes'], up + down)})"]
    text = " ".join(page.split())
    assert gin["auc"] == gsim["auc"] and gin["epsilon_spent"] == gsim["epsilon_spent"]
    assert (f"Both reach training AUC {gin['auc']:.4f} and spend "
            f"{gin['epsilon_spent']['rdp']:.3f} (rdp); the intercepts are "
            f"{gin['intercept']:.7f} and {gsim['intercept']:.7f}") in text
    assert f"about {gsim['seconds'] / gsim['iterations']:.1f} s a round" in text
    gdep = _json("flower_glm_deploy.json")
    assert (f"took {gdep['seconds']:.0f} s, about {gdep['seconds'] / gdep['iterations']:.0f} s a "
            "round") in text
    assert (f"include the {gdep['secure']['setup_seconds']:.0f} s setup "
            "(`secure.setup_seconds`)") in text


# ---- docs/sparse.md: Flower bytes and seconds, utility, audit, speed (docs/sparse/*.json)

def test_sparse_md_flower_paragraph_is_the_json():
    sim, inp = _json("sparse/flower_sim.json"), _json("sparse/inprocess.json")
    dep = _json("sparse/flower_deploy.json")
    assert (sim["backend"], inp["backend"], dep["backend"]) == ("flower-sim", "inprocess", "flower")
    assert sim["objective"] == inp["objective"]          # "same objective as in process"
    f = sim["flower"]
    per = (f["uplink_flower_bytes"] - f["uplink_inprocess_bytes"]) / sum(
        len(r) for r in sim["participants"])
    text = _unwrapped("sparse.md")
    assert (f"uplink {f['uplink_flower_bytes']} B of Flower messages for "
            f"{f['uplink_inprocess_bytes']} B of wire messages (about {per:.0f} B of record and "
            f"metadata per message), downlink {f['downlink_flower_bytes']} B for "
            f"{f['downlink_inprocess_bytes']} B, setup {f['setup_flower_bytes']['uplink']} B up / "
            f"{f['setup_flower_bytes']['downlink']} B down; "
            f"{sim['seconds'] / sim['rounds']:.2f} s per round of 100 clients (in process "
            f"{inp['seconds'] / inp['rounds']:.3f} s;") in text
    assert f"and {f['wall_seconds'] - sim['seconds']:.0f} s of Ray start-up and setup" in text
    assert dep["clients"] == 4
    assert f"--json docs/sparse/flower_deploy.json`) took {dep['seconds'] / dep['rounds']:.0f} s:" \
        in text


def test_sparse_md_utility_and_audit_are_the_json():
    g4, i4 = _json("sparse/utility_gmp_eps4.json"), _json("sparse/utility_iht_eps4.json")
    i1, inp = _json("sparse/utility_iht_eps1.json"), _json("sparse/utility_iht_np.json")
    assert (g4["epsilon"], i4["epsilon"], i1["epsilon"], inp["epsilon"]) == (4.0, 4.0, 1.0, None)
    assert all(d["support_recall"] == 1.0 for d in (g4, i4, inp))   # "support recovered"
    assert i1["support_recall"] == 0.8                                 # "4 of 5 at eps 1"
    page = _page("sparse.md")
    e = lambda x: f"{x:.1e}".replace("e-0", "e-")  # noqa: E731
    assert (f"| relative error {e(g4['relative_error'][-1])}, support recovered; epsilon spent "
            f"{g4['epsilon_spent']['pld']:.2f} (PLD; RDP {g4['epsilon_spent']['rdp']:.2f}) |") in page
    assert (f"| relative error {i4['relative_error'][-1]:.2f} / {i1['relative_error'][-1]:.2f} "
            f"(non-private {inp['relative_error'][-1]:.2f}), support recovered at eps 4 and "
            f"without privacy, 4 of 5 at eps 1 |") \
        in page
    au = _by_name(_audit("sparse"))
    c, r = au["sparse_client_round"], au["sparse_record_step"]
    assert (f"`sparse_client_round` claim {c['claimed_epsilon']:.3f} (best accountant), lower "
            f"bound {c['lower_bound']:.3f}; `sparse_record_step` claim {r['claimed_epsilon']:.3f}, "
            f"lower bound {r['lower_bound']:.3f}.") in _unwrapped("sparse.md")


def test_sparse_md_message_sizes_are_the_wire_format():
    """The Metering paragraph's message sizes are what vflpriv.sparse.wire.encode writes."""
    import numpy as np

    from vflpriv.sparse.wire import encode

    def vec(d, nnz):
        x = np.zeros(d)
        x[:nnz] = 1.5
        return x

    dense, ht, gmp = len(encode(vec(1000, 1000))), len(encode(vec(1000, 200))), \
        len(encode(vec(1000, 10)))
    text = _unwrapped("sparse.md")
    assert (f"Fed-HT and Distributed-IHT send 100 x {dense} B up (dense) and FedIter-HT 100 x "
            f"{ht} B") in text
    assert f"FedGradMP's messages are {gmp} B each way per client" in text


def test_sparse_md_speed_tables_are_the_bench_json():
    """docs/sparse.md "Speed": docs/sparse/bench.json (`vflpriv bench sparse --json ...`), the
    load average it records and both tables, to the printed digits."""
    b = _json("sparse/bench.json")
    page = _page("sparse.md")
    la = b["load_average"]
    assert (f"average was {la['before']:.1f} before the run and {la['after']:.1f} after"
            in " ".join(page.split()))
    dense = [r for r in b["results"] if r["case"] == "d=1000 dense"]
    sparse = [r for r in b["results"] if r["case"] == "d=100000 sparse"]
    assert len(dense) == len(sparse) == 8
    for r in dense:
        assert (f"| {r['algorithm']} | {r['rounds_per_s']:.1f} | {r['loop_rounds_per_s']:.1f} | "
                f"{r['ratio']:.2f} | {r['ms_per_round']:.1f} |") in page, r["algorithm"]
    for r in sparse:
        assert f"| {r['algorithm']} | {r['ms_per_round']:.0f} |" in page, r["algorithm"]
    ht = next(r for r in dense if r["algorithm"] == "fediterht")["ms_per_round"]
    text = " ".join(page.split())
    assert f"at d = 1000 took {ht:.1f} ms in this run" in text
    ratios = [r["ratio"] for r in dense]
    assert f"gains a factor {min(ratios):.1f} to {max(ratios):.1f} over" in text


def test_vertical_md_flower_1e5_memory_is_scale_bench_flower_1e5_json():
    """The machine's used memory on Flower (docs/vertical_results.md) and the 8.4 MB pieces' setup time
    (docs/flower.md): docs/scale_bench_flower_1e5.json (`vflpriv bench scale --backend
    flower-sim --n 100000 --iterations 200 --json ...`)."""
    r = _json("scale_bench_flower_1e5.json")["runs"][0]
    assert (r["n"], r["iterations"], r["backend"], r["returncode"]) == (100000, 200, "flower-sim", 0)
    text = _unwrapped("vertical_results.md")
    assert (f"wall {r['wall_seconds']:.1f} s (setup {r['setup_seconds']:.1f} s, 200 rounds "
            f"{r['rounds_seconds']:.1f} s), the largest process {format_bytes(r['peak_rss_bytes'])}, "
            f"all the run's processes together {format_bytes(r['peak_tree_rss_bytes'])}, the "
            f"machine's used memory at most "
            f"{format_bytes(r['peak_used_memory_above_start_bytes'])} above its start.") in text
    assert (f"--n 100000 --iterations 200` took {r['setup_seconds']:.1f} s "
            "(docs/scale_bench_flower_1e5.json") in _unwrapped("flower.md")


def test_fedelasticnet_md_flower_figures_are_the_json():
    """docs/fedelasticnet.md "On Flower": docs/fedelasticnet/flower_inprocess.json and
    flower_flower-sim.json (`vflpriv horizontal ... --backend B --json ...`)."""
    a = _json("fedelasticnet/flower_inprocess.json")
    b = _json("fedelasticnet/flower_flower-sim.json")
    assert (a["backend"], b["backend"]) == ("inprocess", "flower-sim")
    assert a["accuracy_history"] == b["accuracy_history"]          # "the same accuracy"
    f = b["flower"]
    assert f["inprocess_uplink_bytes"] == a["uplink_bytes"]
    assert (f"the training took {a['seconds']:.2f} s in process and {b['seconds']:.1f} s on "
            f"flower-sim, Ray's start-up included (the JSON's `seconds`); the same accuracy; "
            f"uplink {f['inprocess_uplink_bytes']:,} B in process, {f['uplink_frame_bytes']:,} B of "
            f"frames (+ the hello replies), {f['uplink_flower_bytes']:,} B of Flower messages."
            ) in _unwrapped("fedelasticnet.md")


def test_vertical_md_bcfw_speed_and_uplink_are_the_json():
    """docs/vertical_results.md "Benchmarks": docs/bcfw_speed.json (`vflpriv bench bcfw --sections
    speed --iterations 1000 --json ...`), in the bench's own units (format_bytes)."""
    b = _json("bcfw_speed.json")
    S = {r["sketch"]: r for r in b["speed"]}
    page = _page("vertical_results.md")
    for k, sk in (("identity", "0"),
                  ("countsketch", format_bytes(S["countsketch"]["party_sketch_bytes"]) + " (16 n B)"),
                  ("gaussian", format_bytes(S["gaussian"]["party_sketch_bytes"]) + " (8 m n)")):
        r = S[k]
        cells = _row(page, f"| {k} | ")
        assert cells[:4] == [f"{r['ms_per_iteration']:.2f}", f"{r['loop_s']:.1f} s",
                             format_bytes(max(r["party_block_bytes"])), sk], k
        assert cells[4].startswith(format_bytes(r["traced_peak_bytes_all_parties"])), k
    text = " ".join(page.split())
    pw = b["party_work"]
    ms = ", ".join(f"{w['ms']:.2f}" for w in pw)
    nnz = ", ".join(f"{w['nnz'] / 1e6:.2f}" for w in pw)
    assert (f"{ms} ms for {nnz} M nonzeros, log-log slope "
            f"{b['party_work_loglog_slope']:.2f}") in text
    tot = lambda r, k: sum(r[k])  # noqa: E731
    idn, cs, ga = S["identity"], S["countsketch"], S["gaussian"]
    full = tot(idn, "uplink_full_gradient")
    assert (f"identity {format_bytes(tot(idn, 'uplink'), 2)} = raw-column sharing (it *is* "
            f"raw-column sharing; {100 * tot(idn, 'uplink') / full:.2f}% of sending full local "
            f"gradients, {format_bytes(full)}); countsketch {format_bytes(tot(cs, 'uplink'))} "
            f"({100 * tot(cs, 'uplink') / tot(cs, 'uplink_naive'):.2f}% of raw columns, "
            f"{100 * tot(cs, 'uplink') / full:.3f}% of full gradients); Gaussian "
            f"{format_bytes(tot(ga, 'uplink'))} "
            f"({100 * tot(ga, 'uplink') / tot(ga, 'uplink_naive'):.2f}%, "
            f"{100 * tot(ga, 'uplink') / full:.3f}%)") in text
    assert tot(idn, "uplink") == tot(idn, "uplink_naive")
    rel = sorted({sum(r["released"]) for r in b["speed"]})
    assert f"Only {' to '.join(map(str, rel))} distinct features were released" in text
    assert f"(identity: {format_bytes(tot(idn, 'downlink'))} in total)" in text


def test_vertical_md_table_reading_and_flower_ratio_are_scale_bench_json():
    """The CSV read under a memory limit (scale_bench.json's `tables`) and the Flower run's wall
    time against the in-process one (scale_bench_flower.json / scale_bench.json)."""
    text = _unwrapped("vertical_results.md")
    chunked, whole = _json("scale_bench.json")["tables"]
    assert chunked["returncode"] == 0 and whole["error"] == "MemoryError"
    assert (f"a {chunked['rows']} x {chunked['d']} CSV of {chunked['file_bytes'] / 1e9:.2f} GB, "
            f"{chunked['dense_bytes'] / 1e9:.1f} GB as a dense float64 array, each reader in a "
            f"child with `RLIMIT_AS` = {chunked['limit_bytes'] / 1e9:.2f} GB") in text
    assert (f"(exit 0, {chunked['wall_seconds']:.1f} s, peak RSS "
            f"{chunked['peak_rss_bytes'] / 1e9:.2f} GB)") in text
    assert f"failed with MemoryError (peak RSS {whole['peak_rss_bytes'] / 1e9:.2f} GB)" in text
    fl = _json("scale_bench_flower.json")["runs"][0]
    inp = next(r for r in _json("scale_bench.json")["runs"] if r["n"] == fl["n"])
    assert f"It is {fl['wall_seconds'] / inp['wall_seconds']:.0f}x the in-process wall time" in text


def test_kernels_md_sketch_seconds_and_ratios_are_the_json():
    """The seconds columns and the ratios around docs/kernels.md's sketch tables
    (docs/kernels_bench.json)."""
    doc = _json("kernels_bench.json")
    c, m = doc["sketch_columns"], doc["sketch_matrix"]
    page = _page("kernels.md")
    for contender, key in (("compiled", "compiled"), ("reference", "reference"),
                           ("materialize J once (`standard_normal`) and use J[:, rows]",
                            "materialized_J")):
        assert _row(page, f"| {contender} |")[0] == f"{c['seconds'][key]:.2f}", contender
    text = " ".join(page.split())
    assert (f"The compiled path is {c['speedup']:.1f}x faster than the reference and uses about "
            f"{round(c['memory_ratio_materialized_over_compiled'], -3):,.0f}x less memory") in text
    assert (f"Countsketch per column: {c['seconds']['countsketch_compiled']:.2f} s compiled, "
            f"{c['seconds']['countsketch_reference']:.2f} s reference.") in text
    sec = lambda x: f"{x:.3f}" if x < 0.01 else f"{x:.2f}"  # noqa: E731
    for contender, key in (
            ("gaussian compiled", "gaussian_compiled"), ("gaussian reference", "gaussian_reference"),
            ("scikit-learn GaussianRandomProjection", "sklearn_GaussianRandomProjection"),
            ("countsketch compiled, sparse output", "countsketch_compiled_sparse_output"),
            ("countsketch compiled, dense output", "countsketch_compiled"),
            ("scipy clarkson_woodruff_transform (sparse output)",
             "scipy_clarkson_woodruff_transform")):
        assert _row(page, f"| {contender} |")[0] == sec(m["seconds"][key]), contender
    assert f"against scikit-learn: level ({m['vs_sklearn']:.2f}x)" in text
    assert f"sparse output is {m['vs_scipy']:.1f}x faster than scipy" in text
    assert f"slower than scipy ({m['vs_scipy_dense_output']:.2f}x)" in text


def test_kernels_md_noisy_argmax_sentences_are_the_json():
    doc = _json("kernels_bench.json")
    R = {(r["d"], r["noise"]): r for r in doc["noisy_argmax"]}
    noises = ("laplace", "gumbel", "exponential")
    la = doc["load_average"]
    text = " ".join(_page("kernels.md").split())
    assert f"median of {doc['repeats']} runs" in text
    assert f"(load averages {la[0]:.1f}, {la[1]:.1f} and {la[2]:.1f} over 1, 5 and 15 minutes" in text
    assert f"Gumbel misses it in this run ({R[(10 ** 6, 'gumbel')]['speedup']:.1f}x)" in text
    assert f"**Exponential misses it** ({R[(10 ** 6, 'exponential')]['speedup']:.1f}x)" in text
    assert R[(10 ** 6, "laplace")]["speedup"] >= 3
    fl = [R[(10 ** 6, n)]["compiled_over_uniform_floor"] for n in noises]
    assert f"within about {min(fl):.1f}–{max(fl):.1f}x of the cost" in text
    assert ("the speedups are " + " / ".join(f"{R[(10 ** 5, n)]['speedup']:.1f}x" for n in noises)
            ) in text
    c = [R[(10 ** 4, n)]["seconds"]["compiled"] * 1e3 for n in noises]
    assert (f"the compiled call takes {min(c):.2f}–{max(c):.2f} ms, the uniforms alone "
            f"{R[(10 ** 4, 'laplace')]['seconds']['draw_d_uniforms'] * 1e3:.2f} ms") in text


def test_peers_md_is_rendered_from_peers_json():
    """docs/peers.md is what `vflpriv bench peers --json docs/peers.json --markdown docs/peers.md`
    writes from its JSON (vflpriv.bench.peers_report.render), so every figure on it is the JSON's."""
    from vflpriv.bench.peers_report import render

    assert _page("peers.md") == render(_json("peers.json")) + "\n"


def test_reproduce_md_results_are_assembled_from_docs_reproduce():
    """docs/reproduce.md below its marker is `python -m vflpriv.reproduce.assemble docs/reproduce
    docs/reproduce.md` of the committed files (each entry's JSON and the page its command wrote)."""
    from vflpriv.reproduce.assemble import MARKER, results

    page = _page("reproduce.md")
    assert page[page.index(MARKER) + len(MARKER):] == \
        "\n\n" + results(os.path.join(ROOT, "docs", "reproduce"), os.path.join(ROOT, "docs")) + "\n"
