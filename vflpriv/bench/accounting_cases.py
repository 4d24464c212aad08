"""The accountant cases of issue #11, side by side: our value and time, dp-accounting's and
opacus' where they have an answer, and the exact value where one exists (computed here, in high
precision with mpmath, independently of the accountants)."""
from __future__ import annotations

import math
import time


def _clear_caches():
    from accounting.accountants import bounded_range, pld

    bounded_range.adaptive_curve.cache_clear()
    bounded_range.bounded_range_pld.cache_clear()
    pld.clear_caches()


def _time(fn):
    """(value, seconds) of fn() from cold caches: every figure pays its own construction."""
    _clear_caches()
    t0 = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - t0


def _exact_kov(k, eps, delta):
    """Exact epsilon of k-fold eps-DP at delta: bisection on KOV's delta at 400 digits."""
    import mpmath

    def d(eg):
        with mpmath.workdps(400):
            e, eg = mpmath.mpf(eps), mpmath.mpf(eg)
            s = mpmath.fsum(mpmath.binomial(k, j) * (mpmath.exp((k - j) * e) - mpmath.exp(eg + j * e))
                            for j in range(k + 1) if (k - 2 * j) * e > eg)
            return s / (1 + mpmath.exp(e)) ** k

    lo, hi = 0.0, k * eps
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if d(mid) > delta else (lo, mid)
    return hi


def _exact_gaussian(mu, delta):
    import mpmath

    def d(e):
        with mpmath.workdps(50):
            phi = lambda x: mpmath.erfc(-x / mpmath.sqrt(2)) / 2
            return phi(mu / 2 - e / mu) - mpmath.exp(e) * phi(-mu / 2 - e / mu)
    lo, hi = 0.0, mu * mu / 2 + mu * math.sqrt(2 * math.log(1 / delta)) + 1
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if d(mid) > delta else (lo, mid)
    return hi


def _dpa_epsilon(events, delta, kind):
    """dp-accounting's epsilon of a list of (DpEvent, count) with its RDP or PLD accountant."""
    from dp_accounting import dp_event as de
    from dp_accounting.pld import pld_privacy_accountant as plda
    from dp_accounting.rdp import rdp_privacy_accountant as rdpa

    acc = plda.PLDAccountant() if kind == "pld" else rdpa.RdpAccountant()
    for ev, n in events:
        if not acc.supports(ev):
            return None
        acc.compose(de.SelfComposedDpEvent(ev, n))
    return acc.get_epsilon(delta)


#: opacus' accountants: RDP and PRV are upper bounds (PRV up to its stated eps_error); GDP is
#: opacus' central-limit approximation for Poisson subsampling (Bu et al. 2020), NOT a bound: a
#: cross-check of magnitude only (at q = 1 it uses sqrt(T (e^{1/sigma^2} - 1)), not the exact
#: mu = sqrt(T) / sigma)
OPACUS_ACCOUNTANTS = ("rdp", "prv", "gdp")


def _opacus_row(history, delta):
    """{accountant: {"epsilon", "seconds"}} from opacus for one (sigma, q, steps) history; {}
    without opacus."""
    import warnings

    try:
        from opacus.accountants import GaussianAccountant, PRVAccountant, RDPAccountant
    except ImportError:
        return {}
    classes = {"rdp": RDPAccountant, "prv": PRVAccountant, "gdp": GaussianAccountant}
    out = {}
    for name in OPACUS_ACCOUNTANTS:
        def op(cls=classes[name]):
            acc = cls()
            acc.history = [history]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")   # GDP warns that it is an approximation
                return acc.get_epsilon(delta)
        v, s = _time(op)
        out[name] = {"epsilon": v, "seconds": s}
    return out


def cases():
    """(name, delta, our event, dp-accounting events or None, opacus history or None, exact fn)."""
    from dp_accounting import dp_event as de

    from accounting import (Composed, Gaussian, Laplace, PoissonSubsampledGaussian, PureDP,
                            ReportNoisyMax, SelfComposed)

    return [
        ("100 x 0.1-DP, delta 1e-20", 1e-20, SelfComposed(PureDP(0.1), 100), None, None,
         lambda: _exact_kov(100, 0.1, 1e-20)),
        ("1000 x 0.01-DP, delta 1e-50", 1e-50, SelfComposed(PureDP(0.01), 1000), None, None,
         lambda: _exact_kov(1000, 0.01, 1e-50)),
        ("100 x 0.1-DP, delta 1e-5", 1e-5, SelfComposed(PureDP(0.1), 100), None, None,
         lambda: _exact_kov(100, 0.1, 1e-5)),
        ("100 Gaussians sigma 2, delta 1e-5", 1e-5, SelfComposed(Gaussian(2.0), 100),
         [(de.GaussianDpEvent(2.0), 100)], (2.0, 1.0, 100),
         lambda: _exact_gaussian(5.0, 1e-5)),
        ("DP-SGD q=0.01 sigma=1 T=1000, delta 1e-5", 1e-5,
         SelfComposed(PoissonSubsampledGaussian(1.0, 0.01), 1000),
         [(de.PoissonSampledDpEvent(0.01, de.GaussianDpEvent(1.0)), 1000)], (1.0, 0.01, 1000),
         None),
        ("10 Laplace b=1, delta 1e-5", 1e-5, SelfComposed(Laplace(1.0), 10),
         [(de.LaplaceDpEvent(1.0), 10)], None, None),
        ("100 Gumbel RNM eps 0.1, delta 1e-5", 1e-5, SelfComposed(ReportNoisyMax("gumbel", 20.0), 100),
         [(de.ZCDpEvent(0.1 ** 2 / 8), 100)], None, None),
        ("vertical_selection.toml", 1e-6,
         Composed((SelfComposed(ReportNoisyMax("gumbel", 0.4, 0.01), 800),
                   SelfComposed(Gaussian(60.0, 2.0), 200))),
         [(de.ZCDpEvent(0.05 ** 2 / 8), 800), (de.GaussianDpEvent(30.0), 200)], None, None),
    ]


def run_cases():
    from accounting import get_accountant
    from accounting.accountants.best import BestAccountant
    from accounting.accountants.bounded_range import nonadaptive_delta

    rows = []
    for name, delta, event, dpa_events, opacus_hist, exact in cases():
        row = {"case": name, "delta": delta, "vflpriv": {}, "dp_accounting": {}, "opacus": {}}
        (value, source), secs = _time(lambda: BestAccountant().epsilon_and_source(event, delta))
        row["vflpriv"]["best"] = {"epsilon": value, "seconds": secs, "used": source}
        for acc in ("optimal", "rdp", "pld", "advanced", "basic"):
            try:
                v, s = _time(lambda: get_accountant(acc).epsilon(event, delta))
            except Exception:          # unsupported: shown as absent
                continue
            row["vflpriv"][acc] = {"epsilon": v, "seconds": s}
        for kind in ("rdp", "pld"):
            if dpa_events is None:
                continue
            v, s = _time(lambda: _dpa_epsilon(dpa_events, delta, kind))
            if v is not None:
                row["dp_accounting"][kind] = {"epsilon": v, "seconds": s}
        if opacus_hist is not None:
            row["opacus"] = _opacus_row(opacus_hist, delta)
        row["exact"] = exact() if exact is not None else None
        if "Gumbel" in name:
            # the non-adaptive optimum (Dong, Durfee, Rogers 2020): a lower bound on the truth
            lo, hi = 0.0, row["vflpriv"]["best"]["epsilon"]
            for _ in range(25):
                mid = (lo + hi) / 2
                lo, hi = (mid, hi) if nonadaptive_delta(0.1, 100, mid, t_grid=16) > delta else (lo, mid)
            row["lower_bound"] = hi
        rows.append(row)
    return rows


def print_cases(rows):
    print("accountant cases (epsilon; time):")
    for row in rows:
        best = row["vflpriv"]["best"]
        ref = (f"exact {row['exact']:.6f}" if row.get("exact") is not None else
               f"non-adaptive lower bound {row['lower_bound']:.6f}" if row.get("lower_bound")
               else "no closed form")
        print(f"  {row['case']}  [{ref}]")
        print(f"    {'vflpriv best':<22}{best['epsilon']:>12.6f}{best['seconds'] * 1e3:>11.2f} ms"
              f"   (used {best['used']})")
        for lib in ("vflpriv", "dp_accounting", "opacus"):
            for m, v in row[lib].items():
                if lib == "vflpriv" and m == "best":
                    continue
                note = "   (CLT approximation, not a bound)" if (lib, m) == ("opacus", "gdp") else ""
                print(f"    {lib + ' ' + m:<22}{v['epsilon']:>12.6f}{v['seconds'] * 1e3:>11.2f} ms"
                      f"{note}")
