"""Issue 23 part 4 (n = 1e6): streamed generation, chunked table reading, the chunked (and spilled)
secure product, against independent references.

References: exact products in Python integers mod 2^64 (object arrays), pandas reading a whole
file, the same run with one chunk and no spill.  Statistical test: the streamed generator's values
by Kolmogorov-Smirnov against N(0, 1) at level 1e-3 (false-failure rate 1e-3; seeded, so CI is
deterministic).
"""
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from vflpriv.data import VerticalData, load, make_synthetic
from vflpriv.data import loaders, stream
from vflpriv.errors import InputError
from vflpriv.vertical import solve
from vflpriv.vertical.secure.mpc import beaver, ring, store
from vflpriv.vertical.secure.base import blocks
from vflpriv.vertical.secure.squares import loop

M64 = 2 ** 64


def _exact(v, E):
    """v^T E mod 2^64 in Python integers (an independent reference for the ring product)."""
    return np.array([int(x) % M64 for x in v.astype(object) @ E.astype(object)], dtype=object)


# -- the chunked ring product ----------------------------------------------------------------
@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 60), p=st.integers(1, 7), chunk=st.integers(1, 70),
       seed=st.integers(0, 2 ** 32 - 1))
def test_chunked_masked_product_is_the_exact_ring_product(n, p, chunk, seed):
    rng = np.random.default_rng(seed)
    E = rng.integers(0, M64, size=(n, p), dtype=np.uint64)
    v = rng.integers(0, M64, size=n, dtype=np.uint64)
    chunks = [(s, E[s:s + chunk]) for s in range(0, n, chunk)]
    got = beaver.masked_product(chunks, v)
    assert [int(g) for g in got] == list(_exact(v, E))


def test_dealer_mask_product_and_masked_chunks_match_the_whole_mask():
    """U_k regenerated chunk by chunk is the one row-major AES-CTR stream: U^T v and E = A - U
    are the same words for any chunk size (A sparse with fixed-point entries)."""
    rng = np.random.default_rng(3)
    n, p = 101, 5
    A = sp.random(n, p, density=0.3, format="csr", random_state=rng, dtype=np.float64)
    A_fx = A.copy()
    A_fx.data = ring.encode(A.data, 16)
    key = bytes(range(16))
    U = ring.Prg(key).uint64(n * p).reshape(n, p)
    v = rng.integers(0, M64, size=n, dtype=np.uint64)
    keys = ring.KeySource(seed=0)
    for chunk in (1, 7, 100, 1000):
        d = beaver.Dealer(keys, [p], n, chunk)
        d.mask_keys = [key]
        assert [int(x) for x in d.mask_product(0, v)] == list(_exact(v, U))
        E = np.vstack([e for _, e in beaver.masked_block_chunks(A_fx, key, chunk)])
        np.testing.assert_array_equal(E, A_fx.toarray() - U)


def test_spilled_blocks_read_back_the_same_chunks(tmp_path):
    rng = np.random.default_rng(0)
    spill = store.SpillDirectory(str(tmp_path))
    s = spill.store(2)
    chunks = [(r, rng.integers(0, M64, size=(m, 3), dtype=np.uint64))
              for r, m in ((0, 4), (4, 4), (8, 1))]
    for r, c in chunks:
        s.append(r, c)
    for _ in range(2):                                  # read twice: the file is kept
        back = list(s)
        assert [r for r, _ in back] == [0, 4, 8]
        for (_, a), (_, b) in zip(back, chunks):
            np.testing.assert_array_equal(a, b)
    spill.close()
    assert list(tmp_path.iterdir()) == []


def _run(D, **kw):
    args = dict(algorithm="dp-bcfw-secure", iterations=12, epsilon=2.0, delta=1e-6,
                feature_bound=1.0, label_bound=1.0, row_clip=2.0, max_features=3, seed=0,
                rnm="gumbel", label_party=0)
    args.update(kw)
    return solve(D, **args)


def test_chunked_and_spilled_run_is_bit_identical_to_one_chunk(monkeypatch):
    """A private run with the label at one party (so both the cross-products and A_k^T y go
    through the chunked product): 7-row chunks spilled to disk vs one chunk in memory give the
    same iterate, objective, released features and ledger; every message type's bytes are the
    same except the masked blocks' frames, which differ by exactly their headers."""
    A, y, _ = make_synthetic(n=150, d=24, density=0.2, sparsity=0.1, seed=4)
    D = VerticalData.from_arrays(A, y, "balanced", parties=3)
    monkeypatch.setattr(blocks, "CHUNK_ROWS", 10 ** 9)
    monkeypatch.setattr(store, "SPILL_BYTES", 10 ** 12)
    whole = _run(D)
    monkeypatch.setattr(blocks, "CHUNK_ROWS", 7)
    monkeypatch.setattr(store, "SPILL_BYTES", 0)
    spilled = []
    real = store.SpilledBlocks.append
    monkeypatch.setattr(store.SpilledBlocks, "append",
                        lambda self, r, b: (spilled.append(r), real(self, r, b))[1])
    chunked = _run(D)
    assert spilled, "the run did not spill"
    np.testing.assert_array_equal(chunked.x, whole.x)
    assert chunked.objective == whole.objective
    assert chunked.released == whole.released
    assert [r.event for r in chunked.ledger.records] == [r.event for r in whole.ledger.records]
    bw, bc = whole.extra["bytes_by_type"], chunked.extra["bytes_by_type"]
    frames = -(-D.n // 7)
    from vflpriv.vertical.secure.mpc import messages as SM
    per_frame = SM.HEADER_BYTES + 12
    K = D.K
    # each party's block goes to its helper only: K blocks of ``frames`` frames
    assert bc["MaskedBlock"][0] == K * frames
    assert bc["MaskedBlock"][1] - bw["MaskedBlock"][1] == K * (frames - 1) * per_frame
    for kind in bw:
        if kind != "MaskedBlock":
            assert bc[kind] == bw[kind], kind


def test_run_secure_refuses_a_bad_chunk_size():
    A, y, _ = make_synthetic(n=40, d=6, density=0.5, seed=0)
    D = VerticalData.from_arrays(A, y, "balanced", parties=2)
    with pytest.raises(InputError, match="chunk_rows must be a positive integer, got 0"):
        loop.run_secure(D, eta=1.0, iterations=2, frac=16, private=False, chunk_rows=0,
                            seed=0)


# -- streamed synthetic generation -----------------------------------------------------------
def test_small_synthetic_keeps_the_in_memory_stream():
    """Below STREAM_CELLS the matrix is scipy.sparse.random's draw, as before streaming."""
    A, y, x = make_synthetic(n=300, d=50, density=0.1, sparsity=0.1, seed=5)
    rng = np.random.default_rng(5)
    ref = sp.random(300, 50, density=0.1, format="csc", random_state=rng,
                    data_rvs=rng.standard_normal, dtype=np.float64)
    assert (A != ref).nnz == 0


def test_streamed_synthetic_blocks_have_the_declared_law(monkeypatch):
    n, d, density = 1000, 300, 0.05
    monkeypatch.setattr(loaders, "STREAM_CELLS", 0)
    monkeypatch.setattr(stream, "GEN_ROWS", 128)
    A, y, x = make_synthetic(n=n, d=d, density=density, sparsity=0.05, seed=9, noise=0.0)
    assert sp.isspmatrix_csc(A) and A.shape == (n, d)
    R = sp.csr_matrix(A)
    # exactly round(density r d) distinct nonzeros per block of GEN_ROWS rows
    for s in range(0, n, 128):
        r = min(128, n - s)
        assert R[s:s + r].nnz == round(density * r * d)
    assert np.all(A.data != 0)
    # values N(0, 1): KS at level 1e-3
    assert stats.kstest(A.data, "norm").pvalue > 1e-3
    # y = A x exactly when noise = 0, x with round(sparsity d) nonzeros
    np.testing.assert_allclose(y, A @ x, rtol=0, atol=1e-12)
    assert np.count_nonzero(x) == round(0.05 * d)
    # deterministic in the seed
    A2, _, _ = make_synthetic(n=n, d=d, density=density, sparsity=0.05, seed=9, noise=0.0)
    assert (A != A2).nnz == 0


# -- chunked table reading --------------------------------------------------------------------
def _frame(n=203, d=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * (rng.random((n, d)) < 0.3)
    return pd.DataFrame(np.column_stack([rng.standard_normal(n), X]),
                        columns=["target"] + [f"c{j}" for j in range(d)])


@pytest.mark.parametrize("chunk", [1, 7, 64, 10 ** 6])
def test_csv_read_in_chunks_equals_the_whole_file(tmp_path, chunk, monkeypatch):
    df = _frame()
    path = tmp_path / "t.csv"
    df.to_csv(path, index=False)
    ref = pd.read_csv(path)
    for dense_cells in (stream.DENSE_CELLS, 0):       # small: dense as before; else CSR
        monkeypatch.setattr(stream, "DENSE_CELLS", dense_cells)
        A, y, names = load(str(path), "target", chunk_rows=chunk)
        assert names == [f"c{j}" for j in range(6)]
        dense = A.toarray() if sp.issparse(A) else A
        assert sp.issparse(A) == (dense_cells == 0)
        np.testing.assert_array_equal(dense, ref.drop(columns=["target"]).to_numpy())
        np.testing.assert_array_equal(y, ref["target"].to_numpy())


def test_parquet_read_by_row_batches_equals_the_whole_file(tmp_path, monkeypatch):
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    df = _frame(n=500)
    path = tmp_path / "t.parquet"
    pq.write_table(pa.Table.from_pandas(df), path, row_group_size=60)   # 9 row groups
    monkeypatch.setattr(stream, "DENSE_CELLS", 0)
    A, y, _ = load(str(path), "target", chunk_rows=11)
    assert sp.issparse(A)
    np.testing.assert_array_equal(A.toarray(), df.drop(columns=["target"]).to_numpy())
    np.testing.assert_array_equal(y, df["target"].to_numpy())


def test_a_bad_value_past_the_first_chunk_is_named_by_its_file_row(tmp_path):
    df = _frame(n=50)
    df.iloc[37, 3] = np.nan
    path = tmp_path / "t.csv"
    df.to_csv(path, index=False)
    with pytest.raises(InputError, match="non-finite value nan at row 37, column 2$"):
        load(str(path), "target", chunk_rows=8)


# -- command line: bad input exits 2, one line, nothing written -------------------------------
@pytest.mark.parametrize("extra, needle", [
    (["--data", "MISSING.csv", "--label", "y"], "data file 'MISSING.csv' does not exist"),
    (["--data", "TABLE", "--label", "target", "--chunk-rows", "0"],
     "--chunk-rows: must be an integer >= 1, got '0'"),
    (["--data", "TABLE", "--label", "target", "--chunk-rows", "-5"],
     "--chunk-rows: must be an integer >= 1, got '-5'"),
])
def test_cli_bad_data_or_chunk_size_exits_2_before_any_file(tmp_path, extra, needle):
    table = tmp_path / "t.csv"
    _frame(n=20).to_csv(table, index=False)
    extra = [str(table) if a == "TABLE" else str(tmp_path / a) if a == "MISSING.csv" else a
             for a in extra]
    needle = needle.replace("MISSING.csv", str(tmp_path / "MISSING.csv"))
    out, led = tmp_path / "out.json", tmp_path / "ledger.json"
    r = subprocess.run([sys.executable, "-m", "vflpriv", "run", *extra, "--algorithm",
                        "dp-bcfw-secure", "--parties", "2", "--epsilon", "1", "--delta", "1e-6",
                        "--feature-bound", "1", "--label-bound", "1", "--json", str(out),
                        "--ledger", str(led)], capture_output=True, text=True,
                       cwd=str(tmp_path), env={**os.environ, "VFLPRIV_NO_PROGRESS": "1"})
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in r.stderr
    assert not out.exists() and not led.exists()


def test_cli_reads_a_table_in_chunks_smaller_than_the_file(tmp_path):
    table = tmp_path / "t.csv"
    _frame(n=300).to_csv(table, index=False)
    out = tmp_path / "o.json"
    r = subprocess.run([sys.executable, "-m", "vflpriv", "run", "--data", str(table), "--label",
                        "target", "--chunk-rows", "16", "--algorithm", "fw", "--iterations", "3",
                        "--json", str(out), "--quiet"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    import json

    assert json.loads(out.read_text())["n"] == 300


@pytest.mark.parametrize("zero_chunk", [16, 24, 1 << 25])
def test_prg_keystream_is_aes_ctr_of_zeros(monkeypatch, zero_chunk):
    """Prg.uint64 (update_into, in pieces of zero_chunk bytes) continues one AES-128-CTR stream:
    the same words as cryptography's update(bytes(8 n)) over the concatenated requests."""
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    monkeypatch.setattr(ring, "_ZERO_CHUNK", zero_chunk)
    key = bytes(range(1, 17))
    counts = [1, 3, 0, 1000, 77, 5]
    prg = ring.Prg(key)
    got = np.concatenate([prg.uint64(c) for c in counts])
    enc = Cipher(algorithms.AES(key), modes.CTR(bytes(16))).encryptor()
    ref = np.frombuffer(enc.update(bytes(8 * sum(counts))), dtype="<u8")
    np.testing.assert_array_equal(got, ref)


def test_bench_scale_smoke(tmp_path):
    """The bench's figures come out (small n: a few seconds; the real figures are in the notes),
    and a CSV is read in chunks by a child under an address-space limit."""
    import json

    out = tmp_path / "scale.json"
    r = subprocess.run([sys.executable, "-m", "vflpriv", "bench", "scale", "--n", "3000", "--d",
                        "40", "--iterations", "5", "--table-rows", "300", "--table-limit-gb",
                        "8", "--json", str(out), "--quiet"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    res = json.loads(out.read_text())
    (row,) = res["runs"]
    assert row["returncode"] == 0 and row["n"] == 3000 and row["peak_rss_bytes"] > 0
    assert row["backend"] == "inprocess" and row["peak_tree_rss_bytes"] > 0
    assert row["products"] > 0 and 0 < row["epsilon_spent"] <= 1.0 + 1e-9
    assert row["setup_seconds"] + row["rounds_seconds"] <= row["wall_seconds"]
    chunked = res["tables"][0]
    assert chunked["returncode"] == 0 and chunked["rows"] == 300


def test_tree_rss_counts_a_grandchild():
    """The bench's memory of a run with helper processes: a child that starts a grandchild
    holding 200 MiB (touched) is counted with it, and neither alone reaches the sum."""
    import time

    from vflpriv.bench.scale import _tree_rss

    code = ("import subprocess, sys, time\n"
            "g = subprocess.Popen([sys.executable, '-c', 'b = bytearray(200 * 2**20); "
            "import time; print(1, flush=True); time.sleep(30)'], stdout=subprocess.PIPE)\n"
            "g.stdout.readline(); print(g.pid, flush=True); time.sleep(30)")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        grandchild = int(child.stdout.readline())
        time.sleep(0.2)
        total, own = _tree_rss(child.pid), _tree_rss(grandchild)
        assert own >= 200 * 2 ** 20
        assert total > own
    finally:
        child.kill()
        subprocess.run(["kill", "-9", str(grandchild)], capture_output=True)
