"""Offline data and client partitions for horizontal federated learning (numpy only).

FedP3 (paper 002, Sec. 4 and Table 3) pools each data set, splits it across clients, and gives every
client its own 70% / 30% train/test split; non-IID split S2 draws the label mix from a Dirichlet
distribution (alpha = 0.5 in the paper).  Here the data sets are the ones available offline:
scikit-learn's bundled ``digits`` (1797 images of 8x8 pixels, 10 classes) and a synthetic task from
``sklearn.datasets.make_classification``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InputError

DATASETS = ("digits", "synthetic")


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


def load_dataset(name: str, *, seed: int = 0):
    """Return ``(X, y, n_classes, image_shape)``; ``image_shape`` is ``(C, H, W)`` or None.

    ``digits``: pixel values 0..16 scaled to [0, 1].  ``synthetic``: 2000 records, 20 features
    (10 informative), 5 classes, 2 clusters per class, standardized (a public generator, so
    standardizing with its own statistics leaks nothing private).
    """
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
