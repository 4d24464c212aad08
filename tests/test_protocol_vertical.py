"""Wire format and metering of the vertical protocol: the meter must equal what the format says."""
import numpy as np
import pytest

from vflpriv.data import VerticalData, make_synthetic
from vflpriv.errors import InputError
from vflpriv.vertical import solve
from vflpriv.vertical import messages as M
from vflpriv.vertical.transport import DOWN, UP


@pytest.mark.parametrize("msg, size", [
    (M.Setup(2 ** 63 - 1, 5, 1000, 50, "countsketch", 4), 27),
    (M.Round(np.array([1.5, -2.0, 3.25])), 24),
    (M.Index(-17), 4),
    (M.FeatureRequest(1), 1),
    (M.Feature(np.arange(7.0)), 56),
    (M.IndexGap(9, 0.125), 12),
])
def test_roundtrip_and_sizes(msg, size):
    frame = M.encode(msg, party=3, round=70000)
    assert len(frame) == M.HEADER_BYTES + size == 12 + size
    back, party, rnd = M.decode(frame)
    assert (party, rnd) == (3, 70000) and type(back) is type(msg)
    for k, v in vars(msg).items():
        assert np.array_equal(getattr(back, k), v)


def test_signed_index_encoding():
    assert M.signed_index(0, -1) == -1 and M.unsign_index(-1) == (0, -1)
    assert M.unsign_index(M.signed_index(41, 1)) == (41, 1)
    with pytest.raises(InputError, match="signed index 0"):
        M.unsign_index(0)


@pytest.mark.parametrize("frame, match", [
    (b"\x01\x03", "truncated"),
    (bytes([9, 3, 0, 0]) + bytes(8), "version 9"),
    (bytes([1, 99, 0, 0]) + bytes(8), "unknown message type 99"),
    (M.encode(M.Index(3), 0, 0)[:-1], "does not match"),
])
def test_malformed_frames(frame, match):
    with pytest.raises(InputError, match=match):
        M.decode(frame)


def _replay_new(selections, K):
    """Which (round, party) released a new feature, from the selections alone (cache replay)."""
    seen, new = set(), set()
    for t, sel in enumerate(selections):
        for k, j, _ in sel:
            if (k, j) not in seen:
                seen.add((k, j))
                new.add((t, k))
    return new


@pytest.fixture(scope="module")
def data():
    A, y, _ = make_synthetic(n=120, d=300, density=0.05, sparsity=0.02, seed=3)
    return VerticalData.from_arrays(A, y, "balanced", parties=3)


@pytest.mark.parametrize("sketch, m", [("gaussian", 16), ("countsketch", 8), ("identity", None)])
def test_meter_equals_format_bcfw(data, sketch, m):
    T = 40
    sol = solve(data, algorithm="bcfw", eta=2.0, iterations=T, sketch=sketch, sketch_dim=m, seed=0)
    mdim = sol.extra["m"]
    meter, K = sol.meter, data.K
    new = _replay_new(sol.extra["selections"], K)
    for k in range(K):
        up = meter.per_round(k, UP)
        upf = meter.per_round(k, UP, framed=True)
        down = meter.per_round(k, DOWN)
        for t in range(T):
            released = (t, k) in new
            # uplink = signed index (int32) + m float64 when a new feature is released
            assert up[t] == 4 + (8 * mdim if released else 0)
            assert upf[t] == up[t] + 12 * (2 if released else 1)
            # downlink = Round(q_hat: m float64) + FeatureRequest(1 byte) when released;
            # round 0 also carries the 27-byte Setup
            assert down[t] == 8 * mdim + (1 if released else 0) + (27 if t == 0 else 0)
        n_new = sum(1 for (_, kk) in new if kk == k)
        assert sol.released[k] == n_new
        assert sol.uplink[k] == 4 * T + 8 * mdim * n_new
        assert sol.uplink_naive[k] == 4 * T + 8 * data.n * n_new
        assert sol.uplink_full_gradient[k] == 8 * len(data.blocks[k]) * T


def test_meter_equals_format_dfw(data):
    T = 30
    sol = solve(data, algorithm="dfw", eta=2.0, iterations=T, sketch="gaussian", sketch_dim=10, seed=0)
    new = _replay_new(sol.extra["selections"], data.K)
    winners = {t: sel[0][0] for t, sel in enumerate(sol.extra["selections"])}
    for k in range(data.K):
        up = sol.meter.per_round(k, UP)
        down = sol.meter.per_round(k, DOWN)
        for t in range(T):
            # IndexGap (int32 + float64) every round; the feature only when the winner's is new
            assert up[t] == 12 + (80 if (t, k) in new else 0)
            assert down[t] == 80 + (1 if winners[t] == k else 0) + (27 if t == 0 else 0)
