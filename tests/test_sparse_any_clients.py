"""Any client count for file data in ``vflpriv sparse`` (issue 23, part 5): the k-means non-IID
split adapts (docs/sparse.md, "Any client count").

Each split is checked against k-means labels recomputed here (scikit-learn, same seed) and
against the rule itself: every row dealt exactly once, no empty client, no client with two parts
of one cluster (so a client's distinct clusters = its parts, counted from the rule's part counts),
each client floor(P / C) or ceil(P / C) parts.  The paper's counts (a multiple of the clusters)
keep the paper's split bit for bit."""
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.cluster import KMeans
from sklearn.datasets import load_digits

from vflpriv.cli.main import main
from vflpriv.errors import InputError
from vflpriv.sparse.data import (adaptive_partition, file_partition, kmeans_partition,
                                 part_counts)


@pytest.fixture(scope="module")
def digits():
    Z = load_digits().data[:400]
    labels = KMeans(n_clusters=10, n_init=3, random_state=0).fit_predict(Z)
    return Z, labels


@pytest.mark.parametrize("clients", [1, 2, 3, 7, 8, 13, 37, 97, 400])
def test_any_count_deals_every_row_once_and_distinct_clusters(digits, clients):
    Z, labels = digits
    idx, rule = file_partition(Z, clients, seed=0)
    assert len(idx) == clients
    rows = np.concatenate(idx)
    assert np.array_equal(np.sort(rows), np.arange(Z.shape[0]))     # every row exactly once
    assert all(len(i) > 0 for i in idx)
    sizes = np.bincount(labels, minlength=10)
    P = int(part_counts(sizes, clients).sum())
    held = [len(set(labels[i].tolist())) for i in idx]
    # distinct clusters per client == its parts: the parts add up to P, each client
    # floor/ceil(P / C) of them, so no client can hold two parts of one cluster
    assert sum(held) == P
    assert set(held) <= {P // clients, -(-P // clients)}
    if clients * 2 >= 10 and clients <= int(np.minimum(sizes, clients).sum()) // 2:
        assert P == 2 * clients and set(held) == {2}            # two clusters each, as 000
    if clients < 5:
        assert P == 10                                          # fewer clients than 2 per one


def test_paper_counts_keep_the_paper_split(digits):
    Z, _ = digits
    a, rule = file_partition(Z, 10, seed=3)
    b = kmeans_partition(Z, 10, 2, 2, seed=3)
    assert rule == "paper" and all(np.array_equal(x, y) for x, y in zip(a, b))
    _, rule = file_partition(Z, 8, seed=3)
    assert rule == "adaptive"


def test_more_clients_than_rows_and_zero_are_refused(digits):
    Z, _ = digits
    with pytest.raises(InputError, match="--clients 401 is more than the 400 rows"):
        file_partition(Z, 401)
    with pytest.raises(InputError, match="got 0"):
        adaptive_partition(Z, 0)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 60), min_size=1, max_size=12), st.integers(1, 80),
       st.integers(1, 4))
def test_part_counts_rule(sizes, clients, m):
    """The rule's invariants over random cluster sizes: P parts in all, at least one part per
    cluster, never more than the cluster's rows or the clients; P >= clients whenever the data
    have that many rows; and no cluster could take a part from another with a larger size per
    part without ending below it (the D'Hondt balance)."""
    sizes = np.array(sizes)
    p = part_counts(sizes, clients, m)
    caps = np.minimum(sizes, clients)
    P = min(max(clients * m, len(sizes)), int(caps.sum()))
    assert p.sum() == P
    assert np.all(p >= 1) and np.all(p <= caps)
    if sizes.sum() >= clients:
        assert P >= clients
    # balance: moving one part from cluster a to cluster b (room left) never raises the
    # smallest part size, i.e. sizes[b] / (p[b] + 1) <= sizes[a] / p[a] for p[a] > 1
    for a in range(len(sizes)):
        for b in range(len(sizes)):
            if a != b and p[a] > 1 and p[b] < caps[b]:
                assert sizes[b] / (p[b] + 1) <= sizes[a] / p[a] + 1e-12


def _svm(tmp_path, n=120):
    from sklearn.datasets import dump_svmlight_file

    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(c, 0.3, (n // 4, 6)) for c in range(4)])
    y = X @ np.array([1.0, 0, 0, -0.5, 0, 0]) + 0.01 * rng.standard_normal(X.shape[0])
    path = tmp_path / "d.svm"
    dump_svmlight_file(X, y, str(path))
    return str(path), X.shape[0]


@pytest.mark.parametrize("clients", [8, 3, 11])
def test_cli_file_data_any_client_count(tmp_path, clients, capsys):
    path, n = _svm(tmp_path)
    out = tmp_path / f"r{clients}.json"
    rc = main(["sparse", "--data", path, "--clients", str(clients), "--algorithm", "fedht",
               "--tau", "2", "--rounds", "2", "--seed", "0", "--quiet", "--json", str(out)])
    assert rc == 0, capsys.readouterr().err
    res = json.loads(out.read_text())
    assert res["clients"] == clients
    assert res["data"]["split"] == "adaptive" and res["data"]["rows"] == n


@pytest.mark.parametrize("clients,needle", [("0", "got 0"), ("121", "more than the 120 rows")])
def test_cli_bad_client_counts_exit_2(tmp_path, clients, needle, capsys):
    path, _ = _svm(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    rc = main(["sparse", "--data", path, "--clients", clients, "--rounds", "2", "--quiet",
               "--json", str(tmp_path / "x.json")])
    err = capsys.readouterr().err
    assert rc == 2
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before
