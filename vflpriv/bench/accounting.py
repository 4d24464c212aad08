"""``vflpriv bench accounting``: our accountant against dp-accounting and opacus, in one run.

Figures: import time of ``accounting`` (fresh interpreter; torch must not be loaded), epsilon of the
DP-SGD example (q = 256/60000, sigma = 1.1, T = 14100, delta = 1e-5) with RDP and PLD and their
times, calibration time (sigma for epsilon = 3), and the cases of ``accounting_cases`` (tiny deltas,
exact compositions, bounded-range selections, the vertical plan) with exact values where they
exist.  opacus is measured only if it is installed: its RDP and PRV accountants (upper bounds, the
independent implementations we cross-check against), its GDP accountant (a central-limit
approximation, shown for magnitude, not a bound) and its RDP and PRV calibrations.
"""
from __future__ import annotations

import subprocess
import sys
import time

from . import median_time, write_json

Q, SIGMA, STEPS, DELTA, TARGET = 256 / 60000, 1.1, 14100, 1e-5, 3.0

_IMPORT_PROBE = ("import time, sys; t = time.perf_counter(); import accounting; "
                 "dt = time.perf_counter() - t; print(dt, 'torch' in sys.modules, "
                 "'vflpriv' in sys.modules)")


def add_arguments(p):
    p.add_argument("--repeats", type=int, default=5, help="timed runs per figure (median)")


def _import_time(module_probe: str, repeats: int = 5):
    times, flags = [], None
    for _ in range(repeats):
        out = subprocess.run([sys.executable, "-c", module_probe], capture_output=True, text=True,
                             check=True).stdout.split()
        times.append(float(out[0]))
        flags = out[1:]
    times.sort()
    return times[len(times) // 2], flags


def _timed(fn, repeats):
    value = fn()
    return value, median_time(fn, repeats=repeats, warmup=0)


def run(args) -> int:
    from accounting import PoissonSubsampledGaussian, SelfComposed, calibrate, get_accountant
    from accounting.accountants import pld as pld_module

    if args.repeats < 1:
        raise ValueError(f"--repeats must be >= 1, got {args.repeats}")
    r = args.repeats
    res = {"problem": {"sample_rate": Q, "noise_multiplier": SIGMA, "steps": STEPS,
                       "delta": DELTA, "target_epsilon": TARGET}}
    t_imp, flags = _import_time(_IMPORT_PROBE)
    res["import_accounting_seconds"] = t_imp
    res["import_loads_torch"] = flags[0] == "True"
    res["import_loads_vflpriv"] = flags[1] == "True"

    event = lambda s: SelfComposed(PoissonSubsampledGaussian(s, Q), STEPS)
    rdp, pld = get_accountant("rdp"), get_accountant("pld")
    ours = {}
    ours["rdp"] = _timed(lambda: rdp.epsilon(event(SIGMA), DELTA), r)

    def fresh_pld():   # no cache: measure the whole construction every time
        pld_module.clear_caches()
        return pld.epsilon(event(SIGMA), DELTA)
    ours["pld"] = _timed(fresh_pld, max(1, r // 2))
    t0 = time.perf_counter()
    cal_rdp = calibrate(event, TARGET, DELTA, guess=SIGMA, accountant="rdp", decreasing=True)
    t_cal_rdp = time.perf_counter() - t0
    pld_module.clear_caches()
    t0 = time.perf_counter()
    cal_pld = calibrate(event, TARGET, DELTA, guess=cal_rdp.value, accountant="pld",
                        decreasing=True)
    t_cal_pld = time.perf_counter() - t0
    res["vflpriv"] = {
        "rdp": {"epsilon": ours["rdp"][0], "seconds": ours["rdp"][1]},
        "pld": {"epsilon": ours["pld"][0], "seconds": ours["pld"][1]},
        "calibrate_rdp": {"sigma": cal_rdp.value, "epsilon": cal_rdp.epsilon, "seconds": t_cal_rdp},
        "calibrate_pld": {"sigma": cal_pld.value, "epsilon": cal_pld.epsilon, "seconds": t_cal_pld},
    }

    # dp-accounting, same problem, default settings.
    import dp_accounting
    from dp_accounting import dp_event as de
    from dp_accounting.pld import pld_privacy_accountant as plda
    from dp_accounting.rdp import rdp_privacy_accountant as rdpa

    de_event = lambda s: de.SelfComposedDpEvent(de.PoissonSampledDpEvent(Q, de.GaussianDpEvent(s)), STEPS)

    def dpa(acc_cls, s=SIGMA):
        acc = acc_cls()
        acc.compose(de_event(s))
        return acc.get_epsilon(DELTA)
    d_rdp = _timed(lambda: dpa(rdpa.RdpAccountant), r)
    d_pld = _timed(lambda: dpa(plda.PLDAccountant), max(1, r // 2))

    def dpa_cal(acc_cls):
        return dp_accounting.calibrate_dp_mechanism(
            acc_cls, lambda s: de_event(s), TARGET, DELTA,
            dp_accounting.LowerEndpointAndGuess(0.3, 1.0))
    t0 = time.perf_counter(); s_rdp = dpa_cal(rdpa.RdpAccountant); t_dr = time.perf_counter() - t0
    t0 = time.perf_counter(); s_pld = dpa_cal(plda.PLDAccountant); t_dp = time.perf_counter() - t0
    res["dp_accounting"] = {
        "version": getattr(dp_accounting, "__version__", "?"),
        "rdp": {"epsilon": d_rdp[0], "seconds": d_rdp[1]},
        "pld": {"epsilon": d_pld[0], "seconds": d_pld[1]},
        "calibrate_rdp": {"sigma": s_rdp, "seconds": t_dr},
        "calibrate_pld": {"sigma": s_pld, "seconds": t_dp},
    }

    try:
        t_op, _ = _import_time("import time, sys; t = time.perf_counter(); "
                               "import opacus.accountants; print(time.perf_counter() - t, "
                               "'torch' in sys.modules, False)", repeats=3)
        from opacus.accountants import PRVAccountant, RDPAccountant
        from opacus.accountants.utils import get_noise_multiplier

        def op(acc_cls):
            acc = acc_cls()
            acc.history = [(SIGMA, Q, STEPS)]
            return acc.get_epsilon(DELTA)
        from opacus.accountants import GaussianAccountant

        o_rdp = _timed(lambda: op(RDPAccountant), r)
        o_prv = _timed(lambda: op(PRVAccountant), max(1, r // 2))
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")       # opacus: GDP is an approximation
            o_gdp = _timed(lambda: op(GaussianAccountant), r)
        res["opacus"] = {"import_seconds": t_op,
                         "rdp": {"epsilon": o_rdp[0], "seconds": o_rdp[1]},
                         "prv": {"epsilon": o_prv[0], "seconds": o_prv[1]},
                         "gdp (CLT, not a bound)": {"epsilon": o_gdp[0], "seconds": o_gdp[1]}}
        for acc_name in ("rdp", "prv"):
            t0 = time.perf_counter()
            o_cal = get_noise_multiplier(target_epsilon=TARGET, target_delta=DELTA,
                                         sample_rate=Q, steps=STEPS, accountant=acc_name)
            res["opacus"][f"calibrate_{acc_name}"] = {"sigma": o_cal,
                                                      "seconds": time.perf_counter() - t0}
    except ImportError:
        res["opacus"] = None

    from .accounting_cases import print_cases, run_cases
    res["cases"] = run_cases()

    _print(res)
    print_cases(res["cases"])
    write_json(args.json, res)
    return 0


def _print(res):
    print(f"import accounting: {res['import_accounting_seconds'] * 1e3:.0f} ms "
          f"(torch loaded: {res['import_loads_torch']}, vflpriv loaded: {res['import_loads_vflpriv']})")
    if res.get("opacus"):
        print(f"import opacus.accountants: {res['opacus']['import_seconds'] * 1e3:.0f} ms")
    print(f"DP-SGD example (q={Q:.6g}, sigma={SIGMA}, T={STEPS}, delta={DELTA:g}):")
    print(f"  {'library':<14}{'method':<24}{'epsilon':>10}{'time':>12}")
    rows = [("vflpriv", "rdp"), ("vflpriv", "pld"), ("dp_accounting", "rdp"),
            ("dp_accounting", "pld"), ("opacus", "rdp"), ("opacus", "prv"),
            ("opacus", "gdp (CLT, not a bound)")]
    for lib, m in rows:
        if res.get(lib) and m in res[lib]:
            v = res[lib][m]
            print(f"  {lib:<14}{m:<24}{v['epsilon']:>10.6f}{v['seconds'] * 1e3:>10.2f} ms")
    print(f"calibration (sigma for epsilon = {TARGET}):")
    for lib, m in [("vflpriv", "calibrate_rdp"), ("vflpriv", "calibrate_pld"),
                   ("dp_accounting", "calibrate_rdp"), ("dp_accounting", "calibrate_pld"),
                   ("opacus", "calibrate_rdp"), ("opacus", "calibrate_prv")]:
        if res.get(lib) and m in res[lib]:
            v = res[lib][m]
            print(f"  {lib:<14}{m:<16}{v['sigma']:>10.5f}{v['seconds']:>10.3f} s")
