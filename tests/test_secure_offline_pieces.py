"""dp-bcfw-secure's offline phase over a link, in pieces (vflpriv/vertical/secure/squares/roles.py):
each message carries a bounded number of rows of the masked blocks, the parties keep what they
receive in files on their own disk (the pickled role state only names them), and the files are
removed when the run ends, also when a party refuses.  The pieces are entered at their place in
the AES-CTR stream (ring.Prg's ``word``), checked here against the stream read from its start."""
import os

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from vflpriv.data import VerticalData, make_synthetic
from vflpriv.runtime.link import LocalLink
from vflpriv.vertical import remote as VR
from vflpriv.vertical.api import solve
from vflpriv.vertical.secure.mpc import beaver
from vflpriv.vertical.secure.base import roles as BR
from vflpriv.vertical.secure.squares import roles as SR
from vflpriv.vertical.secure.base.blocks import CHUNK_ROWS
from vflpriv.vertical.secure.mpc.ring import Prg

KEY = bytes(range(16))
PRIVATE = dict(algorithm="dp-bcfw-secure", epsilon=4.0, delta=1e-5, feature_bound=1.0,
               label_bound=3.0, iterations=3, seed=4, max_features=2)


@settings(max_examples=60, deadline=None)
@given(word=st.integers(0, 5000), count=st.integers(0, 300))
def test_prg_entered_at_a_word_gives_the_words_of_the_whole_stream(word, count):
    whole = Prg(KEY).uint64(word + count)
    assert np.array_equal(Prg(KEY, word).uint64(count), whole[word:])


@settings(max_examples=30, deadline=None)
@given(cuts=st.lists(st.integers(1, 49), max_size=6, unique=True), chunk=st.integers(1, 20))
def test_masked_block_in_pieces_equals_the_whole_block(cuts, chunk):
    rng = np.random.default_rng(1)
    A = sp.random(50, 7, density=0.4, random_state=2, format="csr",
                  data_rvs=lambda m: rng.integers(0, 2 ** 40, m).astype(np.float64))
    A_fx = sp.csr_matrix(A.astype(np.uint64))
    whole = np.vstack([e for _, e in beaver.masked_block_chunks(A_fx, KEY, 50)])
    bounds = [0] + sorted(cuts) + [50]
    rows, parts = [], []
    for a, b in zip(bounds, bounds[1:]):
        for r, e in beaver.masked_block_chunks(A_fx, KEY, chunk, a, b):
            rows.append(r)
            parts.append(e)
    assert rows == sorted(rows) and rows[0] == 0
    assert np.array_equal(np.vstack(parts), whole)


def _data(K=3, n=300, d=24, seed=0):
    A, y, _ = make_synthetic(n=n, d=d, density=0.3, seed=seed)
    return VerticalData.from_arrays(A, y, "balanced", parties=K)


class _Watch:
    """Wraps LocalLink.exchange: the largest offline frame each way, the pickled party states,
    and the files in the parties' spill folder right after the offline phase."""

    def __init__(self, monkeypatch, spill):
        self.spill, self.down, self.up, self.states, self.files = spill, 0, 0, [], None
        self.offline = 0
        orig = LocalLink.exchange
        watch = self

        def exchange(link, requests, round, kinds=False, tolerate=False):
            out = orig(link, requests, round, kinds=kinds, tolerate=tolerate)
            kind = requests[0][2]
            if kind == "offline":
                watch.offline += 1
                watch.down = max([watch.down] + [len(f) for _, f, _ in requests])
                watch.up = max([watch.up] + [len(r) for r in out if r is not None])
            elif kind == "select" and watch.files is None:
                watch.files = sorted(os.path.relpath(os.path.join(d, f), spill)
                                     for d, _, fs in os.walk(spill) for f in fs)
            watch.states += [len(s["state"]) for s in link._store if "state" in s]
            return out

        monkeypatch.setattr(LocalLink, "exchange", exchange)


def _with_spill_dir(monkeypatch, spill):
    orig = VR.party_configs

    def configs(*a, **kw):
        return [dict(c, **{"spill-dir": str(spill)}) for c in orig(*a, **kw)]

    monkeypatch.setattr(VR, "party_configs", configs)


def test_offline_phase_in_pieces_keeps_messages_and_state_small_and_ends_as_in_process(
        tmp_path, monkeypatch):
    data = _data()
    n, K, p = data.n, data.K, max(len(b) for b in data.blocks)
    cap = 8 * p * 16          # 16 rows per offline message (one block each way: E_k to h(k))
    monkeypatch.setattr(BR, "OFFLINE_FRAME_BYTES", cap)
    spill = tmp_path / "spill"
    _with_spill_dir(monkeypatch, spill)
    ref = solve(data, ledger=str(tmp_path / "a.ledger"), **PRIVATE)
    watch = _Watch(monkeypatch, spill)
    sol = solve(data, ledger=str(tmp_path / "b.ledger"), backend="local", **PRIVATE)
    # the model, its history and the spend are those of the in-process run
    assert np.array_equal(ref.x, sol.x) and ref.objective == sol.objective
    assert ref.privacy["epsilon_spent"] == sol.privacy["epsilon_spent"]
    # ceil(n / 16) pieces and one more message for the last delivery
    assert watch.offline == -(-n // 16) + 1
    # no offline message is much larger than the cap: a frame header, the 28 bytes of nonce and
    # tag, and the bundle's 6-byte entry header on top of 16 rows of the one block it carries
    slack = 256 + BR.OVERHEAD + 6 + 16
    assert 0 < watch.up <= cap + slack and 0 < watch.down <= cap + slack
    # what a party received is in files (one: its helpee's block) while the run goes on ...
    assert len(watch.files) == K
    received = 8 * n * min(len(b) for b in data.blocks)
    for f in watch.files:
        assert f.startswith("vflpriv-masked-")
    # ... and its pickled state only names them: far smaller than the blocks it holds
    assert max(watch.states) < received / 4
    # the run's end removed every party's files and folders
    assert list(spill.iterdir()) == []


def test_pieces_aligned_to_the_parties_chunks_send_the_in_process_frames(tmp_path):
    """A large cap: whole chunks per piece, so the frames (and the byte meter) are those of
    the in-process run."""
    data = _data(n=40)
    ref = solve(data, ledger=str(tmp_path / "a.ledger"), **PRIVATE)
    sol = solve(data, ledger=str(tmp_path / "b.ledger"), backend="local", **PRIVATE)
    assert ref.uplink == sol.uplink and ref.downlink == sol.downlink
    parties = BR.LinkParties(None, {"K": 4, "n": 10 ** 6}, {}, [500] * 4)
    rows = parties.offline_rows()
    assert rows % CHUNK_ROWS == 0 or rows < CHUNK_ROWS
    assert 8 * 500 * rows <= BR.OFFLINE_FRAME_BYTES       # one block per message each way


def test_a_refusal_after_the_offline_phase_still_removes_the_parties_files(
        tmp_path, monkeypatch):
    from vflpriv.runtime.roles import Refused

    data = _data(n=60)
    spill = tmp_path / "spill"
    _with_spill_dir(monkeypatch, spill)
    seen = {}
    orig = SR.SecurePartyRole.handle

    def handle(role, kind, frame, t):
        if kind == "select" and role.k == 1:
            # party 1 refuses its first round, once the blocks are exchanged
            seen["files"] = sum(len(fs) for _, _, fs in os.walk(spill))
            raise Refused("party 1 refuses (test)")
        return orig(role, kind, frame, t)

    monkeypatch.setattr(SR.SecurePartyRole, "handle", handle)
    with pytest.raises(Exception, match="party 1"):
        solve(data, ledger=str(tmp_path / "run.ledger"), backend="local", **PRIVATE)
    assert seen["files"] == data.K                   # each party: its helpee's block
    assert list(spill.iterdir()) == []


def test_a_spill_dir_that_cannot_be_made_is_a_refusal_naming_it(tmp_path, monkeypatch):
    data = _data(n=40)
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    _with_spill_dir(monkeypatch, blocker / "spill")
    with pytest.raises(Exception, match="spill-dir") as err:
        solve(data, ledger=str(tmp_path / "run.ledger"), backend="local", **PRIVATE)
    assert str(blocker / "spill") in str(err.value)


def test_after_a_lost_party_the_others_remove_their_files(tmp_path, monkeypatch):
    """A party lost in the rounds (its role fails, as a dead SuperNode does) is not asked
    again; the parties that still answer delete their blocks; the lost one's folder stays."""
    data = _data(n=60)
    spill = tmp_path / "spill"
    _with_spill_dir(monkeypatch, spill)
    orig = SR.SecurePartyRole.handle
    asked = []

    def handle(role, kind, frame, t):
        asked.append((role.k, kind))
        if kind == "select" and role.k == 1:
            raise RuntimeError("party 1's host died (test)")
        return orig(role, kind, frame, t)

    monkeypatch.setattr(SR.SecurePartyRole, "handle", handle)
    with pytest.raises(Exception, match="party 1 lost"):
        solve(data, ledger=str(tmp_path / "run.ledger"), backend="local", **PRIVATE)
    assert sorted(k for k, kind in asked if kind == "close") == [0, 2]
    left = [p.name for p in spill.iterdir()]
    assert len(left) == 1 and "-p1-" in left[0], left
    assert len(list((spill / left[0]).iterdir())) == 1
