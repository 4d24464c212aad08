"""Re-derive the shipped data sets from the packages they come from, offline, and print their
SHA-256 checksums (compare with each ``provenance.toml``).

    python datasets/derive.py diabetes          # needs scikit-learn (a vflpriv dependency)
    python datasets/derive.py gapminder PATH    # PATH: plotly's package_data/datasets folder
                                                # (pip install --no-deps --target DIR plotly==7.1.0)

The output is deterministic: same inputs, same bytes, same checksums.
"""
from __future__ import annotations

import hashlib
import os
import sys

import numpy as np
import pandas as pd

HERE = os.path.dirname(os.path.abspath(__file__))


def _write(df, path):
    df.to_csv(path, index=False, lineterminator="\n", float_format="%.10g")
    with open(path, "rb") as fh:
        digest = hashlib.sha256(fh.read()).hexdigest()
    print(f"{os.path.relpath(path, HERE)}  sha256 {digest}  ({len(df)} rows)")


def diabetes():
    """scikit-learn's raw (unscaled) diabetes data, split as a clinic and a laboratory would hold
    it, joined on a patient key.  The laboratory's rows are in its own (seeded, shuffled) order."""
    import sklearn

    src = os.path.join(os.path.dirname(sklearn.__file__), "datasets", "data")
    X = pd.read_csv(os.path.join(src, "diabetes_data_raw.csv.gz"), sep=" ", header=None)
    y = pd.read_csv(os.path.join(src, "diabetes_target.csv.gz"), header=None)[0]
    X.columns = ["age", "sex", "bmi", "bp", "tc", "ldl", "hdl", "tch", "ltg", "glu"]
    key = [f"P{i:04d}" for i in range(len(X))]
    clinic = pd.DataFrame({"patient_id": key})
    for c in ["age", "sex", "bmi", "bp"]:
        clinic[c] = X[c]
    clinic["progression"] = y.astype(float)
    lab = pd.DataFrame({"patient_id": key})
    for c in ["tc", "ldl", "hdl", "tch", "ltg", "glu"]:
        lab[c] = X[c]
    lab = lab.iloc[np.random.default_rng(17).permutation(len(lab))]
    out = os.path.join(HERE, "diabetes")
    os.makedirs(out, exist_ok=True)
    _write(clinic, os.path.join(out, "clinic.csv"))
    _write(lab, os.path.join(out, "lab.csv"))


def gapminder(folder):
    """Gapminder (life expectancy, GDP per capita, population of 142 countries, 1952-2007, every
    5 years) from plotly's bundled copy; one record per country and year, clients by continent."""
    g = pd.read_csv(os.path.join(folder, "gapminder.csv.gz"))
    g = g[["country", "continent", "year", "lifeExp", "pop", "gdpPercap"]]
    g = g.rename(columns={"lifeExp": "life_expectancy", "pop": "population",
                          "gdpPercap": "gdp_per_capita"})
    g = g.sort_values(["continent", "country", "year"], kind="stable").reset_index(drop=True)
    out = os.path.join(HERE, "gapminder")
    os.makedirs(out, exist_ok=True)
    _write(g, os.path.join(out, "gapminder.csv"))


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in ("diabetes", "gapminder"):
        sys.exit(__doc__)
    if sys.argv[1] == "diabetes":
        diabetes()
    else:
        if len(sys.argv) != 3:
            sys.exit("gapminder needs the path of plotly's package_data/datasets folder")
        gapminder(sys.argv[2])
