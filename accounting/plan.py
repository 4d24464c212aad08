"""Release plans: the TOML file ``vflpriv certify`` reads, turned into privacy events.

A plan names the releases a deployment will make and the guarantee it must meet::

    name = "dpsgd-example"           # optional
    delta = 1e-5                     # or: epsilon = 1.0 (then delta is reported)
    target_epsilon = 3.0             # optional verdict (with epsilon = ...: target_delta)
    neighboring = "add_remove"       # or "replace_one"
    [[release]]
    mechanism = "poisson_subsampled_gaussian"
    noise_multiplier = 1.1
    sample_rate = 0.004266666666666667
    count = 14100                    # default 1

Private selection (hyperparameter tuning with random stopping, Papernot & Steinke 2022; the
event ``PrivateSelection``) is a release whose base, one training run with its DP score, is a
list of nested release tables composed together::

    [[release]]
    mechanism = "private_selection"
    stopping = "truncated_negative_binomial"     # eta > -1, gamma in (0, 1); or "poisson", mu
    eta = 1.0                                    # 1: geometric, E[K] = 1 / gamma
    gamma = 0.1
    [[release.base]]                             # what one run releases
    mechanism = "poisson_subsampled_gaussian"
    noise_multiplier = 1.1
    sample_rate = 0.004266666666666667
    count = 1000
    [[release.base]]                             # its DP validation score
    mechanism = "gaussian"
    sigma = 20.0

A base entry takes every field of a release except another private selection.

Every field is checked; an error names the field (``release[0].noise_multiplier``,
``release[0].base[1].sigma``).
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field

from .accountants import ACCOUNTANT_NAMES, report
from .calibration import calibrate
from .events import (MAX_COUNT, NEIGHBORING_RELATIONS, ApproxDP, Composed, DiscreteGaussian,
                     DistributedDiscreteGaussian, Exponential,
                     Gaussian, Laplace,
                     PoissonSubsampledGaussian, PrivateSelection, PureDP, ReportNoisyMax,
                     SelfComposed, ZCDP)

#: mechanism -> (event class, required parameters, optional parameters with defaults)
MECHANISMS = {
    "laplace": (Laplace, ("scale",), {"sensitivity": 1.0}),
    "gaussian": (Gaussian, ("sigma",), {"sensitivity": 1.0}),
    # resolution and coordinates (optional, together): the lattice (docs/sensitivity.md 4.9.1)
    "discrete_gaussian": (DiscreteGaussian, ("sigma",), {"sensitivity": 1.0, "resolution": None,
                                                         "coordinates": None}),
    "distributed_discrete_gaussian": (DistributedDiscreteGaussian, ("sigma",),
                                      {"sensitivity": 1.0, "summands": 2, "dimension": 1,
                                       "granularity": 1.0, "resolution": None,
                                       "coordinates": None}),
    "poisson_subsampled_gaussian": (PoissonSubsampledGaussian, ("noise_multiplier", "sample_rate"), {}),
    "report_noisy_max": (ReportNoisyMax, ("noise", "scale"), {"sensitivity": 1.0}),
    "exponential": (Exponential, ("epsilon",), {}),
    "pure_dp": (PureDP, ("epsilon",), {}),
    "approx_dp": (ApproxDP, ("epsilon", "delta"), {}),
    "zcdp": (ZCDP, ("rho",), {}),
    # its base is the nested [[release.base]] list (parse_plan); eta/gamma or mu by stopping
    "private_selection": (PrivateSelection, ("stopping",), {}),
}
#: the private selection's stopping parameters (each optional; the event says which it needs)
SELECTION_PARAMETERS = ("eta", "gamma", "mu")

#: parameters kept as declared (the event checks they are integers)
INTEGER_PARAMETERS = ("summands", "dimension", "coordinates")
#: parameters whose growth lowers epsilon (noise); the others raise it
NOISE_PARAMETERS = ("noise_multiplier", "sigma", "scale")
TOP_LEVEL_KEYS = ("name", "delta", "epsilon", "target_epsilon", "target_delta", "neighboring",
                  "release")


#: sensitivity / noise ratios the accountants compute in float64: below, the privacy loss
#: underflows to zero; above, the release protects nothing (epsilon in the tens of millions)
RATIO_RANGE = (1e-100, 1e4)


def _check_ratio(where, mech, params):
    """Refuse a sensitivity/noise ratio outside RATIO_RANGE, naming the field."""
    noise = next((k for k in NOISE_PARAMETERS if k in params), None)
    if noise is None or not (params[noise] > 0 and math.isfinite(params[noise])):
        return                               # the event's own check names the field
    sens = params.get("sensitivity", 1.0)
    if not (sens > 0 and math.isfinite(sens)):
        return
    ratio = sens / params[noise]
    lo, hi = RATIO_RANGE
    if not lo <= ratio <= hi:
        what = "sensitivity / " + noise if "sensitivity" in params else "1 / " + noise
        raise ValueError(f"{where}: {what} = {ratio:.3g} is outside [{lo:g}, {hi:g}] "
                         f"({noise} = {params[noise]!r}, sensitivity = {sens!r}): "
                         + ("the privacy loss underflows" if ratio < lo else
                            "the release protects nothing"))


#: smallest epsilon of a bounded-range selection (exponential mechanism, Gumbel report-noisy-max)
#: a plan may declare: below ~1.1e-16, e^epsilon rounds to 1 in float64 and the bounded-range
#: optimum divides by e^epsilon - 1 = 0 (certify looped forever at epsilon = 1e-20 or 1e-320).
#: Declaring this epsilon instead is a valid upper bound (a smaller epsilon is more private).
MIN_BR_EPSILON = 1e-15


def _check_bounded_range(where, mech, params):
    """Refuse a bounded-range selection whose epsilon is below MIN_BR_EPSILON, naming it."""
    if mech == "exponential":
        eps, what = params.get("epsilon"), f"epsilon = {params.get('epsilon')!r}"
    elif mech == "report_noisy_max" and params.get("noise") == "gumbel":
        scale, sens = params.get("scale"), params.get("sensitivity", 1.0)
        if not (isinstance(scale, float) and scale > 0 and math.isfinite(scale)
                and isinstance(sens, float) and sens > 0 and math.isfinite(sens)):
            return                               # the event's own check names the field
        eps = 2.0 * sens / scale
        what = f"2 sensitivity / scale = {eps:.3g} (scale = {scale!r}, sensitivity = {sens!r})"
    else:
        return
    if isinstance(eps, float) and 0 < eps < MIN_BR_EPSILON:
        raise ValueError(f"{where}: the bounded-range selection's {what} is below "
                         f"{MIN_BR_EPSILON:g}, where e^epsilon is 1 in floating point and no "
                         f"accountant resolves it; declare epsilon = {MIN_BR_EPSILON:g} (a valid "
                         "upper bound) or drop the release")


def _number(where: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where} must be a number, got {value!r}")
    return float(value)


@dataclass
class Plan:
    releases: list
    delta: float | None = None
    epsilon: float | None = None
    target_epsilon: float | None = None
    target_delta: float | None = None
    neighboring: str = "add_remove"
    name: str = ""
    source: str = ""
    _events: list = field(default_factory=list, repr=False)

    def event(self, overrides: dict | None = None):
        """The plan as one composed event; ``overrides`` maps (release index, param) -> value."""
        parts = []
        for i, rel in enumerate(self.releases):
            params = dict(rel["params"])
            count = rel["count"]
            for (j, key), value in (overrides or {}).items():
                if j == i:
                    if key == "count":
                        count = int(value)
                    else:
                        params[key] = value
            parts.append(_release_event(f"release[{i}]", dict(rel, params=params, count=count),
                                        self.neighboring))
        return parts[0] if len(parts) == 1 else Composed(tuple(parts))


def _release_event(where: str, rel: dict, neighboring: str):
    """One parsed release (its base too, for a private selection) as an event; a ValueError
    names the release (``release[0].base[1] (gaussian): ...``)."""
    count = rel["count"]
    try:
        if rel["mechanism"] == "private_selection":
            base = [_release_event(f"{where}.base[{j}]", b, neighboring)
                    for j, b in enumerate(rel["base"])]
            ev = PrivateSelection(base[0] if len(base) == 1 else Composed(tuple(base)),
                                  **rel["params"])
        else:
            ev = MECHANISMS[rel["mechanism"]][0](**rel["params"], neighboring=neighboring)
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"count must be an integer >= 1, got {count!r}")
    except ValueError as exc:
        if str(exc).startswith(f"{where}."):          # a base entry's error, already named
            raise
        raise ValueError(f"{where} ({rel['mechanism']}): {exc}") from None
    return ev if count == 1 else SelfComposed(ev, count)


def _parse_release(where: str, r, *, nested: bool = False) -> dict:
    """One [[release]] table (or a selection's [[release.base]] entry), every field checked."""
    if not isinstance(r, dict):
        raise ValueError(f"{where} must be a table")
    mech = r.get("mechanism")
    if mech not in MECHANISMS:
        raise ValueError(f"{where}.mechanism must be one of {', '.join(MECHANISMS)}, got {mech!r}")
    if nested and mech == "private_selection":
        raise ValueError(f"{where}.mechanism: a private selection's base cannot itself be a "
                         "private_selection in a plan file")
    _, required, optional = MECHANISMS[mech]
    selection = mech == "private_selection"
    extra_keys = set(SELECTION_PARAMETERS) | {"base"} if selection else set()
    allowed = set(required) | set(optional) | {"mechanism", "count"} | extra_keys
    extra = [k for k in r if k not in allowed]
    if extra:
        expects = required + tuple(optional) + (SELECTION_PARAMETERS + ("base",) if selection
                                                 else ())
        raise ValueError(f"{where}: unknown parameter(s) {', '.join(map(repr, extra))} for "
                         f"{mech} (expects {', '.join(expects)})")
    params = dict(optional)
    for key in required:
        if key not in r:
            raise ValueError(f"{where}.{key} is missing (required for {mech})")
    for key in set(required) | set(optional) | (set(SELECTION_PARAMETERS) if selection else set()):
        if key in r:
            params[key] = (r[key] if key in ("noise", "stopping") or key in INTEGER_PARAMETERS
                           else _number(f"{where}.{key}", r[key]))
    count = r.get("count", 1)
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"{where}.count must be an integer >= 1, got {count!r}")
    if count > MAX_COUNT:
        raise ValueError(f"{where}.count must be at most 2**53 = {MAX_COUNT} (beyond, counts "
                         f"are not exact in floating point), got {count!r}")
    _check_ratio(where, mech, params)
    _check_bounded_range(where, mech, params)
    out = {"mechanism": mech, "params": params, "count": count}
    if selection:
        base = r.get("base")
        if isinstance(base, dict):                   # [release.base]: a single table
            base = [base]
        if not isinstance(base, list) or not base:
            raise ValueError(f"{where}.base is missing: a private_selection needs the release(s) "
                             "of one run as [[release.base]] tables")
        out["base"] = [_parse_release(f"{where}.base[{j}]", b, nested=True)
                       for j, b in enumerate(base)]
    return out


def parse_plan(data: dict, source: str = "<plan>") -> Plan:
    if not isinstance(data, dict):
        raise ValueError(f"{source}: a plan is a TOML table")
    unknown = [k for k in data if k not in TOP_LEVEL_KEYS]
    if unknown:
        raise ValueError(f"{source}: unknown field(s) {', '.join(map(repr, unknown))}; "
                         f"expected some of {', '.join(TOP_LEVEL_KEYS)}")
    has_delta, has_eps = "delta" in data, "epsilon" in data
    if has_delta == has_eps:
        raise ValueError(f"{source}: give exactly one of 'delta' (to compute epsilon) or "
                         "'epsilon' (to compute delta)")
    plan = Plan(releases=[], name=str(data.get("name", "")), source=source)
    if has_delta:
        d = _number("delta", data["delta"])
        if not 0 < d < 1:
            raise ValueError(f"delta must be in (0, 1), got {data['delta']!r}")
        plan.delta = d
    else:
        e = _number("epsilon", data["epsilon"])
        if not (e >= 0 and math.isfinite(e)):
            raise ValueError(f"epsilon must be a finite number >= 0, got {data['epsilon']!r}")
        plan.epsilon = e
    if "target_epsilon" in data:
        t = _number("target_epsilon", data["target_epsilon"])
        if not (t > 0 and math.isfinite(t)):
            raise ValueError(f"target_epsilon must be a positive finite number, got {data['target_epsilon']!r}")
        if not has_delta:
            raise ValueError("target_epsilon needs 'delta' (with 'epsilon' given, use target_delta)")
        plan.target_epsilon = t
    if "target_delta" in data:
        t = _number("target_delta", data["target_delta"])
        if not 0 < t < 1:
            raise ValueError(f"target_delta must be in (0, 1), got {data['target_delta']!r}")
        if has_delta:
            raise ValueError("target_delta goes with 'epsilon' (with 'delta' given, use target_epsilon)")
        plan.target_delta = t
    rel = data.get("neighboring", "add_remove")
    if rel not in NEIGHBORING_RELATIONS:
        raise ValueError(f"neighboring must be one of {', '.join(NEIGHBORING_RELATIONS)}, got {rel!r}")
    plan.neighboring = rel
    releases = data.get("release")
    if not isinstance(releases, list) or not releases:
        raise ValueError(f"{source}: the plan needs at least one [[release]] table")
    for i, r in enumerate(releases):
        plan.releases.append(_parse_release(f"release[{i}]", r))
    plan.event()      # validate every event now, with field names
    return plan


def _toml_float(text: str) -> float:
    """A TOML float read literally: ``1e309`` (overflows to inf) and ``1e-400`` (underflows to
    0) are refused naming the literal; only ``inf`` spelled out is infinite."""
    v = float(text)
    spelled = text.strip().lstrip("+-").lower()
    if math.isinf(v) and spelled != "inf":
        raise ValueError(f"the number {text} is too large for a float (it overflows to {v}); "
                         "write inf if infinity is meant")
    mantissa = spelled.replace("_", "").split("e")[0]
    if v == 0 and any(c in "123456789" for c in mantissa):
        raise ValueError(f"the number {text} is too small for a float (it underflows to 0)")
    return v


def load_plan(path) -> Plan:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    import os
    import stat

    # a FIFO would block the reader until a writer appears; /dev/zero never ends
    if os.path.exists(path) and not stat.S_ISREG(os.stat(path).st_mode):
        raise ValueError(f"plan {str(path)!r} is not a regular file")
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh, parse_float=_toml_float)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not valid TOML ({exc})") from None
    except ValueError as exc:                # a float literal _toml_float refused
        raise ValueError(f"{path}: {exc}") from None
    except RecursionError:
        raise ValueError(f"{path}: not a plan (nested too deeply)") from None
    return parse_plan(data, source=str(path))


def _calibration_target(plan: Plan, param: str):
    if plan.delta is None or plan.target_epsilon is None:
        raise ValueError("--calibrate needs a plan with 'delta' and 'target_epsilon'")
    if param in SELECTION_PARAMETERS + ("stopping",):
        raise ValueError(f"cannot calibrate {param!r}: a private selection's stopping "
                         "parameters are chosen, not calibrated (certify each choice)")
    if param != "count" and any(param in b["params"] for rel in plan.releases
                                for b in rel.get("base", ())):
        raise ValueError(f"cannot calibrate {param!r}: it is a parameter of a private "
                         "selection's base, which --calibrate does not reach (certify each "
                         "value)")
    if param == "count":
        sites = list(range(len(plan.releases)))
    else:
        sites = [i for i, rel in enumerate(plan.releases) if param in rel["params"]]
    if param == "noise" or (sites and param != "count"
                            and not isinstance(plan.releases[sites[0]]["params"][param], float)):
        raise ValueError(f"cannot calibrate {param!r}: not a numeric parameter")
    if not sites:
        names = sorted({k for rel in plan.releases for k in rel["params"]
                        if k not in ("noise", "stopping") + SELECTION_PARAMETERS} | {"count"})
        raise ValueError(f"--calibrate {param!r}: no release has that parameter "
                         f"(calibratable: {', '.join(names)})")
    if len(sites) > 1:
        raise ValueError(f"--calibrate {param}: {len(sites)} releases have that parameter; "
                         "the plan must have exactly one")
    return sites[0]


def certify(plan: Plan, calibrate_param: str | None = None, accountants=ACCOUNTANT_NAMES) -> dict:
    """Evaluate the plan with every accountant; optionally calibrate one parameter first.

    Returns the JSON-ready certificate (see ``vflpriv certify --help``).
    """
    overrides, calibrated = {}, None
    if calibrate_param is not None:          # '' is a (missing) name, never "no calibration"
        site = _calibration_target(plan, calibrate_param)
        rel = plan.releases[site]
        guess = rel["count"] if calibrate_param == "count" else rel["params"][calibrate_param]
        upper = 1.0 if calibrate_param == "sample_rate" else None
        result = calibrate(lambda v: plan.event({(site, calibrate_param): v}), plan.target_epsilon,
                           plan.delta, guess=guess, discrete=calibrate_param == "count",
                           decreasing=calibrate_param in NOISE_PARAMETERS,
                           upper=upper, lower=0.0 if upper else None)
        value = int(result.value) if calibrate_param == "count" else float(result.value)
        overrides[(site, calibrate_param)] = value
        calibrated = {calibrate_param: value, "accountant": result.accountant,
                      "seconds": result.seconds}
    event = plan.event(overrides)
    if plan.delta is not None:
        rep = report(event, delta=plan.delta, accountants=accountants)
        out = {"name": plan.name or None, "delta": plan.delta, "epsilon": rep.values,
               "best": {"accountant": rep.best_accountant, "epsilon": rep.best_value},
               "target_epsilon": plan.target_epsilon}
        out["certified"] = (None if plan.target_epsilon is None
                            else bool(rep.best_value <= plan.target_epsilon))
    else:
        rep = report(event, epsilon=plan.epsilon, accountants=accountants)
        out = {"name": plan.name or None, "epsilon": plan.epsilon, "delta": rep.values,
               "best": {"accountant": rep.best_accountant, "delta": rep.best_value},
               "target_delta": plan.target_delta}
        out["certified"] = (None if plan.target_delta is None
                            else bool(rep.best_value <= plan.target_delta))
    out["neighboring"] = plan.neighboring
    out["unsupported"] = rep.unsupported
    out["infinite"] = rep.reasons        # accountant -> why its epsilon is inf
    if calibrated is not None:
        out["calibrated"] = calibrated
    return out
