"""The ssp release's cross-blocks opened once to the server (``ssp/gram.py``, issue 55;
docs/sensitivity.md 4.10.2): the same released words as the per-column Beaver products it
replaced, exact cross-blocks, the bytes it moves, and the view checks that catch a broken
variant."""
from __future__ import annotations

import hashlib
import warnings

import numpy as np
import pytest

from vflpriv.audit.views import classification, findings, run_logged, unmasked
from vflpriv.vertical import solve
from vflpriv.vertical.secure.base.blocks import prepare_block
from vflpriv.vertical.secure.mpc import messages as SM
from vflpriv.vertical.secure.ssp import gram as G
from vflpriv.vertical.secure.ssp import party as SP
from vflpriv.vertical.secure.ssp import release as S

#: digests of seeded runs (the fitted x and b: post-processing of M, so equal digests mean the
#: same released words) recorded on 2026-11-29 from the per-column Beaver protocol (commit
#: 5c9680f) with the cases of :func:`_run`: the new protocol draws the same noise in the same
#: order (gram.noise_units) and sums to the same ring words
BEAVER = {
    (2, 0, "logistic"): "6c20a56e606df789", (2, 1, "logistic"): "7a235398119e9849",
    (3, 0, "logistic"): "382f8126f5c1fcec", (3, 1, "logistic"): "7881d6ac1f0500eb",
    (3, 2, "logistic"): "c71fdf49aede7667", (4, 0, "logistic"): "7a4a7221b6190867",
    (4, 2, "logistic"): "f870e8803a074bc8", (4, 3, "logistic"): "e0c089d068b7f5ad",
    (5, 0, "logistic"): "26f792c8cd2c5a8b", (5, 2, "logistic"): "d8717eaf7345dc0e",
    (5, 4, "logistic"): "d1764a2622181ffb", (3, 1, "squared"): "b7183abad96d77ef",
    (4, 2, "squared"): "36fb625b3505384e", (2, 0, "squared"): "943c5d52aa9f1b10",
}


def _run(K, L, loss, backend="inprocess"):
    sizes = [1 + (k % 3) for k in range(K)]
    data = classification(40, K, seed=K * 10 + L, d_per=sizes)
    kw = dict(algorithm="dp-bcfw-secure", label_party=L, epsilon=2.0, delta=1e-6,
              feature_bound=1.0, label_bound=1.0, seed=7 + K, backend=backend)
    if loss == "squared":
        kw.update(loss="squared", squared_path="ssp")
    else:
        kw.update(loss="logistic", logistic_path="ssp")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sol = solve(data, **kw)
    digest = hashlib.sha256(np.asarray(sol.x, dtype=np.float64).tobytes()
                            + np.float64(sol.intercept or 0.0).tobytes()).hexdigest()[:16]
    return digest, sol


@pytest.mark.parametrize("case", sorted(BEAVER))
def test_a_seeded_run_releases_the_words_of_the_beaver_protocol(case):
    assert _run(*case)[0] == BEAVER[case]


@pytest.mark.parametrize("case", [(2, 1, "logistic"), (4, 3, "logistic"), (4, 2, "squared")])
def test_over_a_link_too(case):
    assert _run(*case, backend="local")[0] == BEAVER[case]


def _blocks(n, sizes, L, seed, frac=20):
    rng = np.random.default_rng(seed)
    y = np.where(rng.uniform(size=n) < 0.5, 1.0, -1.0)
    return [prepare_block(np.where(rng.uniform(size=(n, p)) < 0.4,
                                   rng.uniform(-1, 1, (n, p)), 0.0),
                          y if k == L else None, frac=frac, private=True, feature_bound=1.0,
                          label_bound=1.0, row_clip=2.0, k=k) for k, p in enumerate(sizes)]


def _release(blocks, sizes, L, n, sigma, seeds, frame_bytes=None, frac=20):
    event = S.release_event(max(sigma, 1.0), 1.0)
    parties = SP.make_parties(blocks, frac, sigma > 0, sigma, event, seeds)
    link = SP.LocalGram(parties, sizes, L)
    M = SP.release(link, sizes, L, n, frac, None, None,
                   SP.piece_rows(sizes, L, frame_bytes))
    return M, link


@pytest.mark.parametrize("K,L", [(2, 0), (3, 2), (4, 1), (5, 4), (6, 0)])
def test_without_noise_the_cross_blocks_are_the_exact_integer_products(K, L):
    """B_k^T B_l from the masked blocks and the parts, against Python's exact integers of the
    encoded words (the fixed-point values at scale 2^2f, small enough here to be exact in
    float64)."""
    n, frac = 37, 20
    sizes = [1 + (k * 2) % 3 for k in range(K)]
    blocks = _blocks(n, sizes, L, seed=K)
    M, _ = _release(blocks, sizes, L, n, 0.0, [0] * K, frac=frac)
    ends = np.cumsum([0] + sizes)
    d = ends[-1]

    def ints(k):
        b = blocks[k]
        cols = [[int(v) for v in b.A_fx[:, j].toarray().ravel().view(np.int64)]
                for j in range(sizes[k])]
        if k == L:
            cols.append([int(v) for v in np.trunc(b.y * 2.0 ** frac).astype(np.int64)])
        return cols

    cols = [ints(k) for k in range(K)]
    for k, l in G.cross_blocks(K):
        for i, ci in enumerate(cols[k]):
            for j, cj in enumerate(cols[l]):
                exact = sum(a * b for a, b in zip(ci, cj)) / 2.0 ** (2 * frac)
                r = d + 1 if (k == L and i == sizes[k]) else ends[k] + i
                c = d + 1 if (l == L and j == sizes[l]) else ends[l] + j
                assert M[r, c] == exact and M[c, r] == exact


def test_pieces_of_any_size_give_the_same_words():
    """The server adds Z_k^T Z_l piece by piece: one row per piece, or all rows at once, the same
    noisy M (the same seeds draw the same noise)."""
    n, sizes, L = 29, [3, 1, 2], 1
    blocks = _blocks(n, sizes, L, seed=3)
    M1, link1 = _release(blocks, sizes, L, n, 2.0, [5, 6, 7])
    M2, link2 = _release(blocks, sizes, L, n, 2.0, [5, 6, 7], frame_bytes=8)
    assert np.array_equal(M1, M2)
    assert link2.meter.by_type["MaskedBlock"] != link1.meter.by_type["MaskedBlock"]


def test_the_bytes_are_each_block_once_and_nothing_of_size_n_between_parties():
    """Uplink of the masked blocks: 8 n q_k words plus each piece's 24-byte frame header and row
    header, per party, to the server; every party-to-party message is a key (20-byte payload);
    the parts are q_k q_l words per contributor and block.  So the bytes grow linearly in d at
    fixed n, and no message between parties grows with n."""
    n, sizes, L = 50, [3, 2, 4, 1], 2
    K = len(sizes)
    blocks = _blocks(n, sizes, L, seed=9)
    _, link = _release(blocks, sizes, L, n, 1.0, list(range(K)), frame_bytes=8 * 4 * 7)
    q = G.widths(sizes, L)
    rows = SP.piece_rows(sizes, L, 8 * 4 * 7)
    pieces = -(-n // rows)
    head = SM.HEADER_BYTES + 12
    count, up = link.meter.by_type["MaskedBlock"]          # (messages, bytes)
    assert count == pieces * K and up == sum(8 * n * qk + pieces * head for qk in q)
    shares = sum(len(G.contributors(k, l, K, L)) * (SM.HEADER_BYTES + 12 + 8 * q[k] * q[l])
                 for k, l in G.cross_blocks(K))
    assert link.meter.by_type["GramShare"][1] == shares
    # keys: each party's block key to every other party, one pair key per pair per block
    keys = K * (K - 1) + sum(len(G.contributors(k, l, K, L)) * (len(G.contributors(k, l, K, L))
                                                                - 1) // 2
                             for k, l in G.cross_blocks(K))
    assert link.meter.by_type["GramKey"] == [keys, keys * (SM.HEADER_BYTES + 20)]
    assert link.peer_bytes == keys * (SM.HEADER_BYTES + 20)
    assert not {"MaskedVector", "ResultShare"} & set(link.meter.by_type)


def test_every_unit_of_noise_is_drawn_once_by_its_blocks_helper():
    """The units of gram.noise_units cover every cross entry exactly once, each drawn by the
    helper of the party whose columns it multiplies."""
    for K in range(2, 7):
        for L in range(K):
            sizes = [1 + (k % 3) for k in range(K)]
            q = G.widths(sizes, L)
            hits = {b: np.zeros((q[b[0]], q[b[1]]), dtype=int) for b in G.cross_blocks(K)}
            for h in range(K):
                k, units = G.noise_units(h, sizes, L)
                assert k == (h - 1) % K
                for blk, (kind, idx) in units:
                    assert h in G.contributors(*blk, K, L)
                    if kind == "col":
                        hits[blk][:sizes[k], idx] += 1
                    else:
                        hits[blk][idx, :sizes[k]] += 1
            for b, m in hits.items():
                assert (m == 1).all(), (K, L, b)


N = 24


def test_the_checks_catch_a_part_sent_without_its_pair_mask(monkeypatch):
    """A contributor that forgets to blind its parts (party 1 adds no pair mask): each block's
    secure sum no longer cancels, and the view check names it."""
    real = SP.GramParty._blind

    def careless(self, part, blk, K, L):
        return (part, []) if self.k == 1 else real(self, part, blk, K, L)

    monkeypatch.setattr(SP.GramParty, "_blind", careless)
    # the run completes (the server cannot tell a wrong sum); the view check catches it
    masks, recs = run_logged(classification(N, 3, seed=2), "ssp", 0)
    found = findings(masks, recs)
    assert any("do not cancel" in f for f in found), found


def test_the_checks_catch_a_server_that_holds_a_block_key(monkeypatch):
    """A variant in which the server made (or was given) a party's block mask key: the view
    check names the masked block it can read, and the attack unmasks it."""
    from vflpriv.runtime import views

    real = views.made

    def leaky(who, keys):
        real(who, keys)
        if who == 1 and keys:
            real("server", keys[:1])           # party 1's block mask key

    monkeypatch.setattr(views, "made", leaky)
    masks, recs = run_logged(classification(N, 3, seed=4), "ssp", 2)
    found = findings(masks, recs)
    assert any(f.startswith("the server holds the key of every mask on the MaskedBlock")
               for f in found), found
    assert any("unmasks MaskedBlock" in f for f in unmasked(recs))


@pytest.mark.parametrize("K", [2, 3, 4, 5, 6])
def test_no_participant_receives_a_value_it_can_unmask(K):
    """The ssp path's views at K = 2..6, every label party: no finding, no attack success, and
    the parties receive keys only."""
    data = classification(N, K, seed=30 + K)
    for L in range(K):
        masks, recs = run_logged(data, "ssp", L)
        assert findings(masks, recs) == [] and unmasked(recs) == []
        got = {e["type"] for e in recs if e["who"] != "server"}
        assert got <= {"SecureSetup", "NewFeatures", "GramKey", "KeyMade"}, got
