"""Federated data for the sparse methods: both papers' synthetic generators, real data split by
the k-means non-IID partition, and dictionaries (a change of variables).

A federated data set is a :class:`FederatedData`: ``parts`` (one (Z_i, y_i) per client), the
ground truth ``x_true`` when one is planted (003), the planted support when only that is known
(000: every client has its own model on the first 100 coordinates, so there is no x#, notes
P000-9), and a description.

Specs (``--data``): ``synthetic-000:alpha=0.5,beta=0.5,seed=0``,
``synthetic-003:alpha=0.5,e=1.1,sparsity=10,seed=0``, a file (svmlight/LIBSVM, or CSV/parquet
with ``label=``) or a scikit-learn bundled set (``sklearn:diabetes``, ``sklearn:breast_cancer``,
``sklearn:digits``), each split by :func:`kmeans_partition` (any client count:
:func:`file_partition`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError


@dataclass
class FederatedData:
    parts: list
    x_true: np.ndarray | None = None
    support_true: np.ndarray | None = None
    description: dict = field(default_factory=dict)

    @property
    def d(self):
        return int(self.parts[0][0].shape[1])


def synthetic_000(clients=100, d=1000, samples=100, alpha=0.5, beta=0.5, active=100, seed=0,
                  logistic=False):
    """Paper 000's synthetic(alpha, beta), after FedProx's generator (Sec. 5, simulation I / II).

    Client i: its own model x_i with the first ``active`` entries ~ N(u_i, 1), u_i ~ N(0.1, alpha),
    the rest 0; features z_ij ~ N(v_i, Sigma) with Sigma = diag(j^-1.2) (j the coordinate) and
    v_i entries ~ N(B_i, 1), B_i ~ N(0, beta); labels y_ij = z_ij^T x_i + b_ij, b_ij ~ N(u_i, 1).
    alpha and beta are variances (FedProx's reading; notes A4 [decide]).  Logistic (simulation II):
    y' = sigmoid(z^T x_i + b), the top 10% of y' per client get label +1, the rest -1 (spec key
    ``logistic=1``; the paper's 1000 rows per client are ``samples=1000``, 800 MB at d = 1000).
    """
    rng = np.random.default_rng(seed)
    sd = np.arange(1, d + 1, dtype=float) ** -0.6
    parts = []
    for _ in range(clients):
        u = rng.normal(0.1, np.sqrt(alpha))
        x = np.zeros(d)
        x[:active] = rng.normal(u, 1.0, active)
        B = rng.normal(0.0, np.sqrt(beta))
        v = rng.normal(B, 1.0, d)
        Z = v + sd * rng.standard_normal((samples, d))
        y = Z @ x + rng.normal(u, 1.0, samples)
        if logistic:
            top = np.argsort(-y, kind="stable")[:max(1, samples // 10)]
            y = -np.ones(samples)
            y[top] = 1.0
        parts.append((Z, y))
    return FederatedData(parts, None, np.arange(active),
                         {"kind": "synthetic-000", "clients": clients, "d": d, "samples": samples,
                          "alpha": alpha, "beta": beta, "active": active, "seed": seed,
                          "logistic": bool(logistic)})


def synthetic_003(clients=30, d=1000, samples=100, alpha=0.5, e=1.1, sparsity=10, noise=0.0,
                  seed=0):
    """Paper 003's shifted-mean Gaussian data with a common x# (Sec. V; notes B4, P003-9).

    Client i (1-based): A_i entries ~ N(mu_i, 1 / i^e) (variance, i the client index), mu_i ~
    N(0, alpha) (variance), one scalar shift for all entries; x# has ``sparsity`` nonzeros at
    uniformly random positions with values uniform on the unit sphere; y_i = A_i x# + noise
    (``noise`` the standard deviation; 0 = the noiseless setting)."""
    rng = np.random.default_rng(seed)
    x = np.zeros(d)
    pos = np.sort(rng.choice(d, size=sparsity, replace=False))
    v = rng.standard_normal(sparsity)
    x[pos] = v / np.linalg.norm(v)
    parts = []
    for i in range(1, clients + 1):
        mu = rng.normal(0.0, np.sqrt(alpha))
        A = mu + rng.standard_normal((samples, d)) * i ** (-e / 2)
        y = A @ x + noise * rng.standard_normal(samples)
        parts.append((A, y))
    return FederatedData(parts, x, pos,
                         {"kind": "synthetic-003", "clients": clients, "d": d, "samples": samples,
                          "alpha": alpha, "e": e, "sparsity": sparsity, "noise": noise,
                          "seed": seed})


def kmeans_partition(Z, n_clusters=10, parts_per_cluster=20, clusters_per_client=2, seed=0):
    """000's non-IID split: k-means with ``n_clusters`` clusters, each cluster split evenly into
    ``parts_per_cluster`` parts, each client takes one part from each of ``clusters_per_client``
    different clusters.  Returns a list of row-index arrays (one per client).

    Decisions (P000-12): k-means (scikit-learn, k-means++, n_init=3, seeded) on the raw features;
    parts drawn without replacement, so every row goes to exactly one client and there are
    n_clusters * parts_per_cluster / clusters_per_client clients (100 with the defaults); the
    pairing is a seeded shuffle of the parts, repaired by random swaps (never increasing the
    number of bad clients) until no client holds two parts of one cluster.  Empty or tiny clusters give empty parts: a cluster smaller than its part count is
    refused (name the numbers).  Any other client count: :func:`adaptive_partition`."""
    total = n_clusters * parts_per_cluster
    if total % clusters_per_client:
        raise InputError(f"{n_clusters} clusters x {parts_per_cluster} parts cannot be dealt "
                         f"{clusters_per_client} per client")
    n = Z.shape[0]
    if n < total:
        raise InputError(f"the k-means partition needs at least {total} rows, the data has {n}")
    rng = np.random.default_rng(seed)
    labels = _kmeans_labels(Z, n_clusters, seed)
    return _paper_pairing(labels, n_clusters, parts_per_cluster, clusters_per_client, rng)


def _kmeans_labels(Z, n_clusters, seed):
    from sklearn.cluster import KMeans

    return KMeans(n_clusters=n_clusters, n_init=3, random_state=seed).fit_predict(Z)


def _paper_pairing(labels, n_clusters, parts_per_cluster, clusters_per_client, rng):
    total = n_clusters * parts_per_cluster
    parts = []
    for c in range(n_clusters):
        rows = rng.permutation(np.flatnonzero(labels == c))
        if rows.shape[0] < parts_per_cluster:
            raise InputError(f"k-means cluster {c} has {rows.shape[0]} rows, fewer than the "
                             f"{parts_per_cluster} parts it must be split into (use fewer --clients)")
        parts.extend((c, chunk) for chunk in np.array_split(rows, parts_per_cluster))
    n_clients = total // clusters_per_client
    cluster = np.array([c for c, _ in parts])
    groups = rng.permutation(total).reshape(n_clients, clusters_per_client)

    def bad(g):
        return len(set(cluster[g].tolist())) < clusters_per_client

    for _ in range(100000):
        bads = [r for r in range(n_clients) if bad(groups[r])]
        if not bads:
            return [np.sort(np.concatenate([parts[j][1] for j in g])) for g in groups]
        r = bads[int(rng.integers(len(bads)))]
        h = int(rng.integers(n_clients))
        a, b = int(rng.integers(clusters_per_client)), int(rng.integers(clusters_per_client))
        if h == r:
            continue
        before = bad(groups[r]) + bad(groups[h])
        groups[r, a], groups[h, b] = groups[h, b], groups[r, a]
        if bad(groups[r]) + bad(groups[h]) > before:          # never make it worse
            groups[r, a], groups[h, b] = groups[h, b], groups[r, a]
    raise InputError("could not pair the k-means parts so that each client holds different "
                     "clusters; use fewer clusters per client")


def part_counts(sizes, clients, clusters_per_client=2):
    """How many parts each k-means cluster is cut into when ``clients`` clients share clusters
    of ``sizes`` rows (the adaptive rule, docs/sparse.md "Any client count").

    P = min(max(clients * m, k), sum_c min(clients, n_c)) parts in all (m clusters per client,
    k nonempty clusters, n_c rows in cluster c): every cluster gets at least one part (every row
    is dealt), no cluster more parts than clients (so that no client gets two parts of one
    cluster) or than rows (no empty part).  The parts are apportioned to the clusters by their
    sizes with the D'Hondt rule (the next part goes to the cluster with the largest
    n_c / (p_c + 1) among those below their cap), which keeps the parts' sizes as even as the
    caps allow.  P >= clients whenever the data have at least ``clients`` rows, so every client
    gets at least one part."""
    import heapq

    sizes = np.asarray(sizes, dtype=np.int64)
    caps = np.minimum(sizes, clients)
    P = int(min(max(clients * clusters_per_client, sizes.shape[0]), caps.sum()))
    p = np.ones(sizes.shape[0], dtype=np.int64)
    heap = [(-sizes[c] / 2.0, c) for c in range(sizes.shape[0]) if caps[c] > 1]
    heapq.heapify(heap)
    for _ in range(P - sizes.shape[0]):
        _, c = heapq.heappop(heap)
        p[c] += 1
        if p[c] < caps[c]:
            heapq.heappush(heap, (-sizes[c] / (p[c] + 1.0), c))
    return p


def adaptive_partition(Z, clients, n_clusters=10, clusters_per_client=2, seed=0, labels=None):
    """The k-means non-IID split for any number of clients (1 <= clients <= rows).

    Like :func:`kmeans_partition` (k-means on the raw features, seeded), with
    ``min(n_clusters, rows)`` clusters; cluster c is cut into :func:`part_counts` parts of
    (nearly) equal size.  Dealing: the clusters in a seeded random order, each cluster's parts
    one after another, part j goes to client j mod clients (then the client numbers are
    shuffled).  A cluster's parts are consecutive and at most ``clients`` many, so they land on
    different clients: no client holds two parts of one cluster.  Each client gets
    floor(P / clients) or ceil(P / clients) parts: ``clusters_per_client`` of different clusters
    when the count allows it exactly, more clusters per client when there are fewer clients than
    clusters (every row is dealt), fewer when clusters are too small to be cut further.  Every row
    goes to exactly one client; no client is empty.  ``labels``: the k-means labels when
    already computed (same clusters, same seed)."""
    n = Z.shape[0]
    _check_clients(clients, n)
    k = min(int(n_clusters), n)
    rng = np.random.default_rng(seed)
    if labels is None:
        labels = _kmeans_labels(Z, k, seed)
    present = [c for c in range(k) if np.any(labels == c)]
    sizes = [int(np.sum(labels == c)) for c in present]
    counts = part_counts(sizes, clients, clusters_per_client)
    parts = []
    for j in rng.permutation(len(present)):
        rows = rng.permutation(np.flatnonzero(labels == present[j]))
        parts.extend(np.array_split(rows, int(counts[j])))
    owner = rng.permutation(clients)
    out = [[] for _ in range(clients)]
    for j, rows in enumerate(parts):
        out[owner[j % clients]].append(rows)
    return [np.sort(np.concatenate(r)) for r in out]


SKLEARN_SETS = ("diabetes", "breast_cancer", "digits", "california_housing")


def load_table(spec, label=None):
    """(Z, y) from a file (the project's loaders) or ``sklearn:NAME``."""
    if spec.startswith("sklearn:"):
        name = spec.split(":", 1)[1]
        import sklearn.datasets as skd

        if name not in SKLEARN_SETS or name == "california_housing":
            raise InputError(f"unknown bundled data set {name!r}; choose one of "
                             f"{', '.join(SKLEARN_SETS[:3])}")
        ds = getattr(skd, f"load_{name}")()
        Z = np.asarray(ds.data, dtype=float)
        y = np.asarray(ds.target, dtype=float)
        return Z, y
    from ..data import load

    A, y, _ = load(spec, label)
    return A, y


def parse_spec(spec):
    """'synthetic-000:alpha=0.5,...' -> (kind, {key: value}); for other specs (kind, {})."""
    for kind, keys in SYNTHETIC_KEYS.items():
        if spec == kind or spec.startswith(kind + ":"):
            body = spec.split(":", 1)[1] if ":" in spec else ""
            kw = {}
            for item in filter(None, (s.strip() for s in body.split(","))):
                if "=" not in item:
                    raise InputError(f"--data option {item!r} must be key=value (in {spec!r})")
                k, v = (s.strip() for s in item.split("=", 1))
                if k not in keys:
                    raise InputError(f"unknown {kind} option {k!r}; known: {', '.join(keys)}")
                try:
                    kw[k] = keys[k](v)
                except ValueError:
                    raise InputError(f"--data {kind} option {k}={v!r} is not a "
                                     f"{keys[k].__name__}") from None
            return kind, kw
    return "file", {}


SYNTHETIC_KEYS = {
    "synthetic-000": {"alpha": float, "beta": float, "seed": int, "d": int, "samples": int,
                      "active": int, "logistic": int},
    "synthetic-003": {"alpha": float, "e": float, "sparsity": int, "seed": int, "d": int,
                      "samples": int, "noise": float},
}


def _check_synthetic(kind, kw, clients):
    for k in ("alpha", "beta", "noise"):
        if k in kw and not (kw[k] >= 0 and np.isfinite(kw[k])):
            raise InputError(f"--data {kind} {k} must be a finite number >= 0, got {kw[k]!r}")
    for k in ("d", "samples"):
        if k in kw and kw[k] < 1:
            raise InputError(f"--data {kind} {k} must be >= 1, got {kw[k]!r}")
    if "sparsity" in kw and not (1 <= kw["sparsity"] <= kw.get("d", 1000)):
        raise InputError(f"--data {kind} sparsity must be between 1 and d, got {kw['sparsity']}")
    if "active" in kw and not (1 <= kw["active"] <= kw.get("d", 1000)):
        raise InputError(f"--data {kind} active must be between 1 and d, got {kw['active']}")
    if "logistic" in kw and kw["logistic"] not in (0, 1):
        raise InputError(f"--data {kind} logistic must be 0 or 1, got {kw['logistic']!r}")
    if "e" in kw and not np.isfinite(kw["e"]):
        raise InputError(f"--data {kind} e must be finite, got {kw['e']!r}")
    if clients < 1:
        raise InputError(f"--clients must be >= 1, got {clients}")
    # the generators build every client's dense float64 block at once: refuse a size that
    # cannot fit before numpy tries ("Maximum allowed dimension exceeded", a MemoryError)
    d, samples = kw.get("d", 1000), kw.get("samples", 100)
    values = clients * samples * d
    if values > MAX_SYNTHETIC_VALUES:
        from ..units import format_bytes

        raise InputError(f"--data {kind}: clients x samples x d = {clients:,} x {samples:,} x "
                         f"{d:,} = {values:,} values ({format_bytes(values * 8)}) is more "
                         f"than the {MAX_SYNTHETIC_VALUES:,} ({format_bytes(MAX_SYNTHETIC_VALUES * 8)}"
                         ") a synthetic federation may hold")


#: largest synthetic federation (float64 values): 4 GiB
MAX_SYNTHETIC_VALUES = 2 ** 29


def check_spec(spec, clients, label=None):
    """Validate a --data spec cheaply (before any work): returns (kind, kw)."""
    if not isinstance(spec, str) or not spec:
        raise InputError(f"--data must be a synthetic spec or a file, got {spec!r}")
    kind, kw = parse_spec(spec)
    if kind != "file":
        _check_synthetic(kind, kw, clients)
    elif _named(spec):
        from ..data.named import load_named

        d = load_named(spec)
        if d.kind == "horizontal" and clients != len(d.clients):
            raise InputError(f"--data {spec} has its own split into {len(d.clients)} clients "
                             f"({', '.join(d.client_names)}); --clients must be "
                             f"{len(d.clients)}, got {clients}")
    elif spec.startswith("sklearn:"):
        if spec.split(":", 1)[1] not in SKLEARN_SETS[:3]:
            raise InputError(f"--data {spec!r}: unknown bundled data set; choose one of "
                             f"{', '.join('sklearn:' + s for s in SKLEARN_SETS[:3])}")
    else:
        import os

        if not os.path.exists(spec):
            raise InputError(f"--data file {spec!r} does not exist")
        from ..data.files import regular_file

        regular_file(spec, "--data file")
    return kind, kw


def _named(spec):
    import os

    from ..data.named import is_named
    return is_named(spec) and not os.path.exists(spec)


def load_federated(spec, clients, *, label=None, seed=0, clusters=10, clusters_per_client=2):
    """A :class:`FederatedData` from a --data spec with ``clients`` clients.  A shipped
    horizontal data set (``gapminder``) keeps its natural split (one client per continent)."""
    kind, kw = check_spec(spec, clients, label)
    if _named(spec):
        from ..data.named import load_named

        d = load_named(spec)
        if d.kind == "horizontal":
            return FederatedData(d.parts(), None, None,
                                 {"kind": "named", "name": d.name, "rows": int(d.A.shape[0]),
                                  "d": int(d.A.shape[1]), "split": "natural",
                                  "clients": list(d.client_names)})
    if kind == "synthetic-000":
        return synthetic_000(clients=clients, **kw)
    if kind == "synthetic-003":
        return synthetic_003(clients=clients, **kw)
    Z, y = load_table(spec, label)
    idx, split = file_partition(Z, clients, clusters, clusters_per_client, seed)
    import scipy.sparse as sp

    Zr = Z.tocsr() if sp.issparse(Z) else Z
    return FederatedData([(Zr[i], y[i]) for i in idx], None, None,
                         {"kind": "file", "path": spec, "rows": int(Z.shape[0]),
                          "d": int(Z.shape[1]), "clusters": clusters,
                          "clusters_per_client": clusters_per_client, "partition_seed": seed,
                          "split": split})


def _check_clients(clients, n):
    """A client count from 1 to the number of rows (every client needs a row)."""
    if isinstance(clients, bool) or int(clients) != clients or clients < 1:
        raise InputError(f"--clients must be an integer >= 1, got {clients!r}")
    if clients > n:
        raise InputError(f"--clients {clients} is more than the {n} rows of the data: every "
                         "client needs at least one row")


def file_partition(Z, clients, clusters=10, clusters_per_client=2, seed=0):
    """Row indices per client for a data file, and which rule made them: ``"paper"`` (000's
    split, :func:`kmeans_partition`) when clients x clusters_per_client is a multiple of the
    clusters and every cluster has enough rows for its parts, else ``"adaptive"``
    (:func:`adaptive_partition`): any client count from 1 to the number of rows works."""
    n = Z.shape[0]
    _check_clients(clients, n)
    total = clients * clusters_per_client
    if total % clusters == 0 and n >= total:
        labels = _kmeans_labels(Z, clusters, seed)
        per = total // clusters
        if all(np.sum(labels == c) >= per for c in range(clusters)):
            rng = np.random.default_rng(seed)
            return _paper_pairing(labels, clusters, per, clusters_per_client, rng), "paper"
        return adaptive_partition(Z, clients, clusters, clusters_per_client, seed,
                                  labels=labels), "adaptive"
    return adaptive_partition(Z, clients, clusters, clusters_per_client, seed), "adaptive"


def make_dictionary(kind, n, seed=0, atoms=None):
    """An n x d dictionary: ``identity`` (None), ``orthonormal`` (a seeded Haar-random orthogonal
    n x n matrix) or ``gaussian`` (n x atoms, entries N(0, 1/n), shared by its seed: 003 Remark 8).
    The methods run on Z A with the coefficient vector as the model (a change of variables):
    exact for orthonormal dictionaries (003's approx with eta = 1), a heuristic for the Gaussian
    one (top-k of the coefficients, notes P003-3)."""
    if kind in (None, "identity"):
        return None
    rng = np.random.default_rng(seed)
    if kind == "orthonormal":
        Q, R = np.linalg.qr(rng.standard_normal((n, n)))
        return Q * np.sign(np.diag(R))
    if kind == "gaussian":
        return rng.standard_normal((n, atoms or n)) / np.sqrt(n)
    raise InputError(f"--dictionary must be identity, orthonormal or gaussian, got {kind!r}")


def apply_dictionary(parts, D):
    return parts if D is None else [(Z @ D, y) for Z, y in parts]
