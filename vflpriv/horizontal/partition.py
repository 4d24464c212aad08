"""Offline data and client partitions for horizontal federated learning (numpy only).

FedP3 (paper 002, Sec. 4 and Table 3) pools each data set, splits it across clients, and gives every
client its own 70% / 30% train/test split; non-IID split S2 draws the label mix from a Dirichlet
distribution (alpha = 0.5 in the paper).  Here the data sets are the ones available offline:
scikit-learn's bundled ``digits`` (1797 images of 8x8 pixels, 10 classes) and a synthetic task from
``sklearn.datasets.make_classification``.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np

from ..errors import InputError

DATASETS = ("digits", "synthetic", "fashion-mnist")
#: data sets with their own train/test split: name -> number of training records (load_dataset
#: returns train then test, pooled)
PRESPLIT = {"fashion-mnist": 60000}
#: where the IDX files of Fashion-MNIST (28x28, 10 classes: MNIST's shape) are looked for unless the
#: environment variable ``VFLPRIV_FASHION_MNIST`` names another folder; Debian's
#: ``dataset-fashion-mnist`` package installs them here
FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"


def _idx(path):
    import gzip
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    shape = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(shape)


def _fashion_mnist():
    d = os.environ.get("VFLPRIV_FASHION_MNIST", FASHION_MNIST_DIR)
    try:
        parts = [_idx(os.path.join(d, f"{s}-{k}-idx{n}-ubyte.gz"))
                 for s in ("train", "t10k") for k, n in (("images", 3), ("labels", 1))]
    except OSError:
        raise InputError(f"fashion-mnist needs its IDX files in {d} (Debian package "
                         "dataset-fashion-mnist, or set VFLPRIV_FASHION_MNIST)") from None
    f = lambda im: (im.reshape(im.shape[0], -1) / 255.0).astype(np.float32)  # noqa: E731
    return (f(parts[0]), parts[1].astype(np.int64)), (f(parts[2]), parts[3].astype(np.int64))


@dataclass
class ClientData:
    """One client's records: train and test parts (features float32, labels int64)."""
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray

    @property
    def m(self) -> int:
        """Number of training records (the paper's m, per client)."""
        return int(self.y_train.shape[0])


def check_dataset(name: str) -> str:
    """The canonical (lower-case) name of a classification data set for the horizontal commands;
    a shipped regression data set (datasets/: diabetes, gapminder) is refused with the reason."""
    from ..data.named import NAMES, is_named

    low = name.lower() if isinstance(name, str) else name
    if low in DATASETS:
        return low
    if is_named(low):
        raise InputError(f"--data {name}: a shipped regression data set, but this command trains "
                         f"classifiers; use it with vflpriv sparse (or run, for the vertical "
                         f"diabetes); here choose one of {', '.join(DATASETS)}")
    raise InputError(f"--data must be one of {', '.join(DATASETS)}, got {name!r} (the shipped "
                     f"data sets {', '.join(NAMES)} are regression sets)")


def load_dataset(name: str, *, seed: int = 0):
    """Return ``(X, y, n_classes, image_shape)``; ``image_shape`` is ``(C, H, W)`` or None.

    ``digits``: pixel values 0..16 scaled to [0, 1].  ``synthetic``: 2000 records, 20 features
    (10 informative), 5 classes, 2 clusters per class, standardized (a public generator, so
    standardizing with its own statistics leaks nothing private).
    """
    name = check_dataset(name)
    if name == "digits":
        from sklearn.datasets import load_digits
        d = load_digits()
        X = (d.data / 16.0).astype(np.float32)
        return X, d.target.astype(np.int64), 10, (1, 8, 8)
    if name == "synthetic":
        from sklearn.datasets import make_classification
        X, y = make_classification(n_samples=2000, n_features=20, n_informative=10,
                                   n_redundant=4, n_classes=5, n_clusters_per_class=2,
                                   class_sep=1.5, random_state=seed)
        X = (X - X.mean(axis=0)) / X.std(axis=0)
        return X.astype(np.float32), y.astype(np.int64), 5, None
    if name == "fashion-mnist":
        (X, y), (Xt, yt) = _fashion_mnist()
        return np.concatenate([X, Xt]), np.concatenate([y, yt]), 10, (1, 28, 28)
    raise InputError(f"unknown data set {name!r}; choose one of {', '.join(DATASETS)}")


def dirichlet_partition(y, n_clients: int, alpha: float, rng, *, min_size: int = 10,
                        max_tries: int = 1000) -> list:
    """Split record indices across clients with label skew from Dir(alpha).

    For every class c a share vector p_c ~ Dir(alpha * 1_n) is drawn and the records of class c are
    dealt to the clients in those proportions (the standard scheme of Hsu et al. 2019, used by FedCR,
    which FedP3's split S2 follows).  Draws are repeated until every client holds at least
    ``min_size`` records.  ``alpha = inf`` gives an IID split.
    """
    y = np.asarray(y)
    if isinstance(n_clients, bool) or not isinstance(n_clients, (int, np.integer)) or n_clients < 1:
        raise InputError(f"the number of clients must be a positive integer, got {n_clients!r}")
    if not (alpha > 0):
        raise InputError(f"the Dirichlet concentration alpha must be positive, got {alpha!r}")
    if n_clients * min_size > y.shape[0]:
        raise InputError(f"{n_clients} clients with at least {min_size} records each need "
                         f"{n_clients * min_size} records; the data set has {y.shape[0]}")
    if np.isinf(alpha):
        perm = rng.permutation(y.shape[0])
        return [np.sort(part) for part in np.array_split(perm, n_clients)]
    classes = np.unique(y)
    for _ in range(max_tries):
        parts = [[] for _ in range(n_clients)]
        for c in classes:
            idx = rng.permutation(np.flatnonzero(y == c))
            p = rng.dirichlet(np.full(n_clients, float(alpha)))
            cuts = (np.cumsum(p)[:-1] * idx.shape[0]).astype(int)
            for i, chunk in enumerate(np.split(idx, cuts)):
                parts[i].extend(chunk.tolist())
        if min(len(p) for p in parts) >= min_size:
            return [np.sort(np.asarray(p, dtype=np.int64)) for p in parts]
    raise InputError(f"could not give each of {n_clients} clients {min_size} records with "
                     f"alpha={alpha} in {max_tries} draws; use fewer clients or a larger alpha")


def make_clients(X, y, n_clients: int, *, alpha: float = 0.5, test_fraction: float = 0.3,
                 seed: int = 0, min_size: int = 10) -> list:
    """Dirichlet partition, then each client's own random train/test split (paper: 70% / 30%)."""
    if not (0 < test_fraction < 1):
        raise InputError(f"test fraction must be in (0, 1), got {test_fraction!r}")
    rng = np.random.default_rng(seed)
    clients = []
    for idx in dirichlet_partition(y, n_clients, alpha, rng, min_size=min_size):
        idx = rng.permutation(idx)
        n_test = max(1, int(round(test_fraction * idx.shape[0])))
        te, tr = idx[:n_test], idx[n_test:]
        clients.append(ClientData(X[tr], y[tr], X[te], y[te]))
    return clients


# ---------------------------------------------------------------------------------------------
# FedDyn's partition (paper 001 uses FedDyn's data pipeline; notes A.7 [C]): one global test set,
# the training records dealt to clients.

def feddyn_partition(y, n_clients: int, alpha: float, rng, *, sigma: float = 0.0) -> list:
    """Split training record indices across clients the way FedDyn's code does.

    Client sizes: lognormal(log(N / m), sigma) scaled to sum to N and truncated (sigma = 0, the
    code's default, is balanced); the leftover records go to client 0.  ``alpha = inf``: IID, a
    random permutation cut into those sizes.  Otherwise every client k gets a class prior
    pi_k ~ Dir(alpha 1_C); while records remain, a random client with remaining quota is picked and
    one record of a class drawn from pi_k is dealt to it.  FedDyn redraws the class while the drawn
    class is exhausted; drawing from pi_k restricted to the classes that still have records and
    renormalized is the same distribution without the retry loop (which can spin for a very long
    time when pi_k puts almost no mass on the classes left).
    """
    y = np.asarray(y)
    N = y.shape[0]
    if isinstance(n_clients, bool) or not isinstance(n_clients, (int, np.integer)) \
            or not 1 <= n_clients <= N:
        raise InputError(f"the number of clients must be an integer in [1, {N}], got {n_clients!r}")
    if not (alpha > 0):
        raise InputError(f"the Dirichlet concentration alpha must be positive, got {alpha!r}")
    sizes = rng.lognormal(np.log(N / n_clients), sigma, size=n_clients) if sigma > 0 \
        else np.full(n_clients, N / n_clients)
    sizes = (sizes / sizes.sum() * N).astype(int)
    sizes[0] += N - sizes.sum()
    if sizes.min() < 1:
        raise InputError(f"{n_clients} clients leave some client without records; use fewer")
    if np.isinf(alpha):
        perm = rng.permutation(N)
        return [np.sort(part) for part in np.split(perm, np.cumsum(sizes)[:-1])]
    classes = np.unique(y)
    pools = [list(rng.permutation(np.flatnonzero(y == c))) for c in classes]
    left = np.array([len(p) for p in pools])
    priors = rng.dirichlet(np.full(classes.size, float(alpha)), size=n_clients)
    quota = sizes.copy()
    parts = [[] for _ in range(n_clients)]
    while quota.sum():
        k = int(rng.integers(n_clients))
        if quota[k] <= 0:
            continue
        p = priors[k] * (left > 0)
        if p.sum() <= 0:                     # only exhausted classes have mass: fall back to counts
            p = left.astype(float)
        c = int(rng.choice(classes.size, p=p / p.sum()))
        left[c] -= 1
        quota[k] -= 1
        parts[k].append(pools[c][left[c]])
    return [np.sort(np.asarray(p, dtype=np.int64)) for p in parts]


@dataclass
class FederatedData:
    """Clients' training sets and one global test set (FedDyn / paper 001's evaluation)."""
    clients: list            # list of (X_k, y_k)
    X_test: np.ndarray
    y_test: np.ndarray
    n_classes: int
    image_shape: tuple | None


def load_federated(name: str, n_clients: int, *, alpha: float = math.inf, sigma: float = 0.0,
                   test_fraction: float = 0.25, seed: int = 0) -> FederatedData:
    """Load ``name``, hold out a stratified global test set, FedDyn-partition the rest."""
    from sklearn.model_selection import train_test_split
    if not (0 < test_fraction < 1):
        raise InputError(f"test fraction must be in (0, 1), got {test_fraction!r}")
    X, y, n_classes, image_shape = load_dataset(name, seed=seed)
    if name in PRESPLIT:
        cut = PRESPLIT[name]
        X, Xte, y, yte = X[:cut], X[cut:], y[:cut], y[cut:]
    else:
        X, Xte, y, yte = train_test_split(X, y, test_size=test_fraction, stratify=y,
                                          random_state=seed % 2 ** 32)
    rng = np.random.default_rng([seed, 15])
    parts = feddyn_partition(y, n_clients, alpha, rng, sigma=sigma)
    return FederatedData([(X[i], y[i]) for i in parts], Xte, yte, n_classes, image_shape)
