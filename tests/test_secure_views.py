"""What each party and the server receives on every secure path (issue 49).

Two independent checks over the view log (``vflpriv/runtime/views.py``):

* the mask bookkeeping (``vflpriv.audit.views.findings``): every value a receiver gets is
  blinded by a mask whose key it never receives, and no such mask blinds two values it gets
  (except the two parts of its own product);
* an attack written here, knowing nothing of which mask blinds what: for every masked array a
  party receives and every key it holds, x - PRG(key) and x + PRG(key) (the stream entered
  where the array's words start) must not look like fixed-point data.  Raw columns, labels,
  margins and factors are all below 2^56 in absolute value as signed words; a still-masked
  word is uniform, so a 24-word vector passes as "small" by chance with probability 2^-168
  per (array, key) pair: the false-failure rate of the whole file is below 1e-40.

Every path (least squares, ssp, glm), K = 2..6, every label party, in process and over the
in-process link (the Flower roles); flower-sim once (slow).  The checks are shown to fire on the
protocol before the fix (one vector mask shared by every peer of a product).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vflpriv.audit.views import PATHS, classification, findings, run_logged
from vflpriv.vertical.secure.base import blocks
from vflpriv.vertical.secure.base import party as base_party
from vflpriv.vertical.secure.mpc.ring import Prg, encode

N = 24
SMALL = np.uint64(1 << 56)


def _small(words):
    """All words within (-2^56, 2^56) as signed integers: what fixed-point data looks like."""
    w = np.asarray(words, dtype=np.uint64)
    return bool(np.all((w < SMALL) | (w > np.uint64(2 ** 64 - 2 ** 56))))


def attack(receipts):
    """[(receiver, message type, how)] for every masked array some receiver can unmask with a
    key it received (or that is not masked at all)."""
    held, out = {}, []
    for e in receipts:
        held.setdefault(e["who"], set()).update(e["keys"])
    for e in receipts:
        for field, words in e.get("data", {}).items():
            x = np.array([int(w) for w in words], dtype=np.uint64)
            if _small(x):
                out.append((e["who"], e["type"], "in the clear"))
                continue
            shape = e["shapes"][field]
            starts = {0}
            if e["type"] == "MaskedBlock":
                starts.add(int(e["row"]) * int(shape[1]))
            for key in held[e["who"]]:
                for start in starts:
                    u = Prg(bytes.fromhex(key), start).uint64(x.size)
                    if _small(x - u) or _small(x + u):
                        out.append((e["who"], e["type"], f"key {key[:8]}"))
    return out


def _check(data, path, L, backend="inprocess", iterations=2):
    masks, recs = run_logged(data, path, L, backend=backend, iterations=iterations)
    assert recs, "the view log recorded nothing"
    assert findings(masks, recs) == []
    assert attack(recs) == []
    return masks, recs


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("K", [2, 3, 4, 5, 6])
def test_every_party_s_view_in_process(path, K):
    data = classification(N, K, seed=K)
    for L in range(K):
        _check(data, path, L)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("K", [2, 3, 4, 5, 6])
def test_every_party_s_view_over_the_link(path, K):
    """The roles a SuperNode runs (rebuilt per message, sealed party-to-party frames relayed by
    the server), over the in-process LocalLink."""
    data = classification(N, K, seed=10 + K)
    for L in range(K):
        _check(data, path, L, backend="local")


@settings(max_examples=12, deadline=None)
@given(sizes=st.lists(st.integers(1, 3), min_size=2, max_size=6), path=st.sampled_from(PATHS),
       label=st.integers(0, 5), seed=st.integers(0, 2 ** 16))
def test_views_hold_over_partitions(sizes, path, label, seed):
    data = classification(N, len(sizes), seed=seed, d_per=sizes)
    _check(data, path, label % len(sizes))


@pytest.mark.slow
@pytest.mark.usefixtures("one_ray")
def test_every_party_s_view_on_flower_sim():
    """Flower's simulation runtime (ClientApps in Ray workers): each worker appends to the same
    log folder (the environment is inherited)."""
    pytest.importorskip("flwr")
    data = classification(N, 3, seed=7)
    for path in PATHS:
        masks, recs = _check(data, path, 2, backend="flower-sim")
        assert {e["who"] for e in recs} >= {0, 1, 2}


def test_the_checks_catch_one_mask_shared_by_every_peer(monkeypatch):
    """The protocol before the fix (one vector mask per product, shared by the peers) at K = 3:
    the bookkeeping names a party, and the attack recovers the label exactly at the party that
    helps a block and is itself a peer of the label's product."""
    from vflpriv.vertical.secure.mpc import ring

    real = ring.KeySource.key

    def shared(self, label):
        if label.startswith("vector-mask-"):          # drop the peer: one key per product
            label = label.rsplit("-", 1)[0]
            cache = self.__dict__.setdefault("_shared", {})
            if label not in cache:
                cache[label] = real(self, label)
            return cache[label]
        return real(self, label)

    monkeypatch.setattr(ring.KeySource, "key", shared)
    monkeypatch.setattr(base_party, "check_distinct_masks", lambda *a: None)
    data = classification(N, 3, seed=1)
    L = 0
    # the least-squares path (the ssp path no longer runs per-column products: ssp/gram.py)
    masks, recs = run_logged(data, "squares", L)
    found = findings(masks, recs)
    assert found and any("holds the key of every mask" in f for f in found)
    leaks = attack(recs)
    assert any(t == "MaskedVector" for _, t, _ in leaks)
    # the attack, spelled out: party 2 helps block 1 (h(1) = 2) and is a peer of the label's
    # product; z - PRG(v) is the label in fixed point, every row
    frac = next(e["ints"]["frac_bits"] for e in recs if e["type"] == "SecureSetup")
    y_fx = encode(np.asarray(data.y, dtype=np.float64), frac)
    keys2 = {k for e in recs if e["who"] == 2 for k in e["keys"]}
    zs = [np.array([int(w) for w in e["data"]["z"]], dtype=np.uint64) for e in recs
          if e["who"] == 2 and e["type"] == "MaskedVector" and e["ints"]["index"] == 0xFFFFFFFF]
    assert zs
    assert any(np.array_equal(z - Prg(bytes.fromhex(k)).uint64(N), y_fx)
               for z in zs for k in keys2)


def test_the_holder_refuses_one_mask_for_two_peers():
    from vflpriv.errors import InputError
    from vflpriv.vertical.secure.mpc import messages as SM

    key = bytes(16)
    with pytest.raises(InputError, match="one vector mask for two peers"):
        blocks.check_distinct_masks(2, 0, {0: SM.VectorKey(0, 0, key),
                                             1: SM.VectorKey(1, 0, key)})


def test_in_the_fixed_protocol_no_party_recovers_a_column_or_the_label():
    """The bar's harness at K = 2..5 and every label party, the ssp and least-squares paths:
    for every masked vector a party receives and every key it holds, z - PRG(key) equals no
    raw column of another party and not the label (exact comparison in fixed point)."""
    for K in (2, 3, 4, 5):
        data = classification(N, K, seed=20 + K)
        for path in ("ssp", "squares"):
            for L in range(K):
                masks, recs = run_logged(data, path, L, iterations=2)
                frac = next(e["ints"]["frac_bits"] for e in recs if e["type"] == "SecureSetup")
                A = np.asarray(data.A, dtype=np.float64)
                secrets_ = {"y": encode(np.asarray(data.y, dtype=np.float64), frac)}
                for j in range(A.shape[1]):
                    secrets_[f"a{j}"] = encode(np.clip(A[:, j], -1, 1), frac)
                held = {}
                for e in recs:
                    held.setdefault(e["who"], set()).update(e["keys"])
                for e in recs:
                    if e["type"] != "MaskedVector":
                        continue
                    z = np.array([int(w) for w in e["data"]["z"]], dtype=np.uint64)
                    for k in held[e["who"]]:
                        u = Prg(bytes.fromhex(k)).uint64(N)
                        for name, s in secrets_.items():
                            assert not np.array_equal(z - u, s), (path, K, L, e["who"], name)
                        # the columns travel clipped (and, on the ssp path, scaled): whatever
                        # their exact words, unmasked they would be small
                        assert not _small(z - u), (path, K, L, e["who"])


def test_the_audit_entry_views(tmp_path, capsys):
    import json

    from vflpriv.cli.main import main

    out = tmp_path / "views.json"
    assert main(["audit", "--mechanism", "views", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["ok"] is True and doc["mechanisms"] == []
    assert doc["views"]["ok"] and doc["views"]["findings"] == []
    # every path (PATHS: the three and the squared loss's ssp) and predict, every label party
    assert doc["views"]["runs"] == (len(PATHS) + 1) * (3 + 4) == 35
    assert "views: 35 runs" in capsys.readouterr().out


@pytest.mark.parametrize("K", [2, 3, 4, 5, 6])
def test_the_secure_sum_of_predict(K):
    """vflpriv predict's secure sum: the label party gets the K - 1 masked margins; their masks
    cancel in the whole sum (the score it is entitled to) and in no proper subset of them, no
    key of a pairwise mask reaches it, and no key it holds unmasks a margin.  At K = 2 the one
    margin is the sum itself (the score reveals it anyway: docs/alignment.md)."""
    from vflpriv.audit.views import scoring_logged

    for L in range(K):
        masks, recs, scores, expected = scoring_logged(K, L, N, seed=K + L)
        np.testing.assert_allclose(scores, expected, atol=K * 2.0 ** -30)
        assert findings(masks, recs) == []
        got = [e for e in recs if e["type"] == "MaskedMargin"]
        assert {e["who"] for e in got} == {L} and len(got) == K - 1
        leaks = attack(recs)
        if K == 2:
            assert leaks == [(L, "MaskedMargin", "in the clear")]
        else:
            assert leaks == []


def test_the_sum_check_catches_a_mask_that_does_not_cancel(monkeypatch):
    """A broken secure sum (party b adds its mask with party a where it should subtract it):
    the masks of the whole sum no longer cancel, or a partial sum does."""
    from vflpriv.audit.views import scoring_logged
    from vflpriv.model import scoring

    real = scoring.Prg

    class Shared:                    # every pair the same key stream: m_ab = m for all a, b
        def __init__(self, key, *a):
            self.p = real(bytes(16), *a)

        def uint64(self, n):
            return self.p.uint64(n)

    monkeypatch.setattr(scoring, "Prg", Shared)
    monkeypatch.setattr(scoring, "_pair_key", lambda *a: bytes(16))
    masks, recs, _, _ = scoring_logged(4, 0, N)
    # parties 1, 2, 3: +m +m, -m +m, -m -m; parts 1 and 3 together cancel: a partial sum
    assert any("partial sum leaks" in f for f in findings(masks, recs))
