"""dp-bcfw-secure with the label at one party: the label release of the least-squares path and the
logistic (GLM) path -- the sigmoid series, the shared derivatives, the scores, accounting, bytes.

Statistical test: the top bit of a derivative share is tested for uniformity with a 5-sigma
two-sided bound (false-failure rate 6e-7; seeded, so CI is deterministic).
"""
import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from accounting import DistributedDiscreteGaussian, Gaussian, SelfComposed, get_accountant
from vflpriv.data import VerticalData, make_synthetic
from vflpriv.errors import InputError
from vflpriv.vertical import solve
from vflpriv.vertical.secure.mpc import messages as SM
from vflpriv.vertical.secure import privacy as SP
from vflpriv.vertical.secure.mpc.beaver import Dealer
from vflpriv.vertical.secure.mpc.fourier import SigmoidSeries, unit_factors
from vflpriv.vertical.secure.glm.party import GlmParty, offline_receivers, ring_plan, round_scores
from vflpriv.vertical.secure.base.blocks import CHUNK_ROWS
from vflpriv.vertical.secure.local import Network
from vflpriv.vertical.secure.mpc.ring import KeySource, encode

SERIES = SigmoidSeries()


#: the path this file tests, given (the logistic default is ssp: test_vertical_secure_ssp.py)
GLM = dict(loss="logistic", algorithm="dp-bcfw-secure", logistic_path="glm")


def _sigmoid(m):
    return 1.0 / (1.0 + np.exp(-m))


def _logistic(n=600, d=24, K=3, seed=0):
    """Features in [-1, 1] (standard normals / 4, clipped), so that K B_a eta + 8 stays within
    the sigmoid series' range 16 at the eta the tests use (glm_solve.check_margin_range)."""
    rng = np.random.default_rng(seed)
    A = np.clip(rng.normal(size=(n, d)) / 4, -1, 1)
    w = np.zeros(d)
    w[:4] = [6.0, -4.0, 4.0, -2.8]
    y = np.where(rng.random(n) < _sigmoid(A @ w), 1.0, -1.0)
    return VerticalData.from_arrays(A, y, "balanced", parties=K)


# -- the sigmoid series ---------------------------------------------------------------------
def test_series_error_bound_holds_on_a_ten_times_finer_grid():
    m = np.arange(-SERIES.accurate, SERIES.accurate, 1e-4)
    err = np.max(np.abs(SERIES(m) + 0.5 - _sigmoid(m)))
    bound = SERIES.error_bound()
    assert err <= bound < 0.01


def test_series_keeps_the_sign_of_the_margin_on_the_whole_half_period():
    m = np.linspace(1e-3, SERIES.half_period - 1e-3, 20001)
    assert np.all(SERIES(m) > 0) and np.all(SERIES(-m) < 0)


@settings(max_examples=200, deadline=None)
@given(st.floats(-1e7, 1e7, allow_nan=False), st.sampled_from([0.0, 1.0]))
def test_derivative_is_bounded_for_any_margin(m, y01):
    assert abs(0.5 + float(SERIES(np.array([m]))[0]) - y01) <= SERIES.derivative_bound + 1e-12


@settings(max_examples=100, deadline=None)
@given(st.floats(-40, 40, allow_nan=False), st.integers(0, 2 ** 64 - 1))
def test_factors_of_two_ring_shares_multiply_to_the_margin_angle(m, r):
    """exp(i j w s_0) exp(i j w s_1) = exp(i j w m) for ANY split s_0 + s_1 = enc(m) mod 2^64;
    the encoded product has modulus <= 2^(2 f_c) exactly (the bound privacy rests on)."""
    fm, fc = 20, 12
    x = encode(np.array([m]), fm)
    s0 = np.array([r], dtype=np.uint64)
    s1 = x - s0
    c0r, c0i = unit_factors(s0, fm, SERIES, fc)
    c1r, c1i = unit_factors(s1, fm, SERIES, fc)
    im = c0r * c1i + c0i * c1r                               # exact integers
    re = c0r * c1r - c0i * c1i
    assert np.all(im * im + re * re <= 2 ** (4 * fc))
    m_enc = float(x.view(np.int64)[0]) / 2 ** fm
    j = np.arange(1, SERIES.terms + 1)[:, None]
    expect = np.sin(j * SERIES.omega * m_enc)
    assert np.max(np.abs(im / 2.0 ** (2 * fc) - expect)) < 4 * 2.0 ** -fc


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2 ** 64 - 1), st.integers(0, 2 ** 64 - 1), st.sampled_from([0, 1]),
       st.sampled_from([6, 7, 9, 12, 16]))
def test_computed_derivative_is_within_D_for_any_pair_of_shares(s0, s1, y01, fc):
    """The derivative the protocol computes, 1/2 + sum_j b_j Im(c_0j c_1j) - y01 with the
    factors exactly as ``unit_factors`` encodes them, for ANY two ring shares (any decoded
    margin, wrap-around included) and every factor precision a ring plan can pick (f_c >= 6), is
    within D = ``derivative_bound`` (docs/sensitivity.md 5.1): the bound privacy rests on."""
    fm = 20
    a = np.array([s0], dtype=np.uint64)
    b = np.array([s1], dtype=np.uint64)
    c0r, c0i = unit_factors(a, fm, SERIES, fc)
    c1r, c1i = unit_factors(b, fm, SERIES, fc)
    im = (c0r * c1i + c0i * c1r).astype(np.float64)[:, 0]    # exact integers (< 2^33)
    g = float(np.sum(SERIES.coefficients * im)) / 2.0 ** (2 * fc + SERIES.coef_bits)
    assert abs(0.5 + g - y01) <= SERIES.derivative_bound


def test_sup_of_the_series_against_refined_local_maxima():
    """``sup_abs`` bounds sup |g| over all reals (g has period 2P) and is tight: every local
    maximum of |g| on one period, refined by scipy from a coarse grid, is below it, and the
    largest is within 2e-5 of it; D then sits between 1/2 + sup |g| and the any-factors bound."""
    from scipy.optimize import minimize_scalar

    P = SERIES.half_period
    grid = np.linspace(-P, P, 4001)
    vals = np.abs(SERIES(grid))
    peaks = [i for i in range(1, grid.size - 1)
             if vals[i] >= vals[i - 1] and vals[i] >= vals[i + 1]]
    best = 0.0
    for i in peaks:
        r = minimize_scalar(lambda m: -abs(float(SERIES(np.array([m]))[0])),
                            bounds=(grid[i - 1], grid[i + 1]), method="bounded",
                            options={"xatol": 1e-12})
        best = max(best, -r.fun)
    assert best <= SERIES.sup_abs() <= best + 2e-5
    # the period: g(m + 2P) = g(m) far out, so the sup over one period is the sup everywhere
    far = np.linspace(-3 * P, 3 * P, 3001)
    assert np.allclose(SERIES(far + 2 * P), SERIES(far), atol=1e-12)
    assert 0.5 + best < SERIES.derivative_bound < SERIES.share_bound
    assert SERIES.derivative_bound == pytest.approx(1.0314721, abs=1e-7)


# -- one round of the protocol against the plain formula --------------------------------------
def _parties(D, L, private=False, sigma=0.0, clip=None):
    ring = ring_plan(D.n, 3.0, sigma, SERIES)
    keys = KeySource(seed=5)
    parties = [GlmParty(k, D.block(k), D.y if k == L else None, 1.0, ring=ring, series=SERIES,
                        private=private, feature_bound=3.0, row_clip=clip, sigma=sigma,
                        noise_seed=k) for k in range(D.K)]
    dealer = Dealer(keys, [len(b) for b in D.blocks], D.n, CHUNK_ROWS)
    H = (L + 1) % D.K
    for p in parties:
        p.setup(SM.SecureSetup(ring.fa, 0, D.K, D.n, dealer.mask_keys[p.k]))
    for p in parties:
        for row, block in p.masked_blocks():
            for q in offline_receivers(p.k, L, H, D.K):
                parties[q].receive_block(p.k, SM.MaskedBlock(row, block))
    return parties, dealer, keys, H


@pytest.mark.parametrize("L", [0, 2])
def test_round_scores_equal_the_plain_approximate_gradient(L):
    D = _logistic(K=4, d=20)
    parties, dealer, keys, H = _parties(D, L)
    rng = np.random.default_rng(1)
    x = rng.normal(size=D.d) * 0.8
    for p in parties:                                    # a public iterate, margins up to ~6
        p.x = x[D.blocks[p.k]].copy()
        p.u = np.asarray(p.A_csc @ p.x).ravel()
    g = round_scores(parties, dealer, keys, Network(), L, H, 0)
    A = np.asarray(D.A)
    m = A @ x
    d = 0.5 + SERIES(m) - (D.y > 0)
    for k in range(D.K):
        ref = A[:, D.blocks[k]].T @ d / D.n
        np.testing.assert_allclose(g[k], ref, atol=2e-3)
    # and the approximation is close to the true logistic gradient
    true = A.T @ (_sigmoid(m) - (D.y > 0)) / D.n
    est = np.concatenate([g[k] for k in range(D.K)])[np.argsort(np.concatenate(D.blocks))]
    assert np.max(np.abs(est - true)) < 0.02


def test_no_third_party_holds_a_share_of_the_derivatives():
    """Issue 32: a party outside {L, H} receives only masked vectors from the two holders of d's
    shares (d_H + v_H from H, d_L + v_L from L, each with the dealer's mask that only the holder
    and the dealer know), never d_L itself; so that party and H together still miss v_L and
    cannot rebuild d (hence the labels).  Checked: the vector k receives from L is not d_L and
    looks uniform (its top bits: mean 1/2 within 5 sigma)."""
    D = _logistic(n=20000, d=12, K=3)
    parties, dealer, keys, H = _parties(D, 0)
    k = 3 - H                                     # the party outside {L = 0, H}
    net = Network()
    seen, kinds = {}, set()
    orig = net.peer

    def spy(src, dsts, msg, t):
        if k in dsts:
            kinds.add(type(msg).__name__)
            if isinstance(msg, SM.MaskedVector):
                seen[src] = msg.z.copy()
        return orig(src, dsts, msg, t)

    net.peer = spy
    held = {}
    for q in (0, H):                              # what each holder passes in as its share
        real = parties[q].holder_messages
        parties[q].holder_messages = (lambda real, q: lambda vec, *a: (
            held.__setitem__(q, vec.copy()), real(vec, *a))[1])(real, q)
    round_scores(parties, dealer, keys, net, 0, H, 0)
    assert kinds <= {"MaskedVector", "ResultShare", "MarginShare", "MarginKey"}
    assert "DerivativeShare" not in kinds and set(seen) == {0, H}
    z_from_L = seen[0]
    assert np.mean(z_from_L == held[0]) < 1e-3               # not d_L in the clear
    top = (z_from_L >> np.uint64(63)).astype(float)
    assert abs(top.mean() - 0.5) < 5 * 0.5 / math.sqrt(top.size)


# -- whole runs -------------------------------------------------------------------------------
def test_non_private_logistic_secure_tracks_bcfw():
    D = _logistic()
    ref = solve(D, loss="logistic", algorithm="bcfw", eta=2.0, iterations=60, seed=0,
                reference=True)
    sec = solve(D, **GLM, eta=2.0, iterations=60, seed=0,
                fit_intercept=False)                 # bcfw fits none: the same problem
    gap = ref.initial_objective - ref.reference.objective
    assert sec.privacy is None and sec.extra["label_party"] == 0
    assert abs(sec.final_objective - ref.final_objective) < 0.02 * gap
    assert (sec.initial_objective - sec.final_objective) > 0.9 * gap


def test_private_logistic_secure_charges_t_discrete_gaussians_within_target():
    D = _logistic()
    T = 25
    sol = solve(D, **GLM, eta=2.0, iterations=T, seed=0,
                epsilon=2.0, delta=1e-6, feature_bound=1.0, label_bound=1.0, row_clip=3.0,
                label_party=1)
    led = sol.ledger
    assert len(led.records) == T
    # exact discrete Gaussians in the ring; party 0 (outside {L=1, H=2}) gets the sum of two
    # holders' halves on its 8 scores (docs/sensitivity.md 5.7)
    assert all(isinstance(r.event, DistributedDiscreteGaussian) for r in led.records)
    ev = led.records[0].event
    assert (ev.summands, ev.dimension) == (2, 8)
    D_bound = SERIES.derivative_bound
    # three blocks of 8 columns, C_k = min(C, B_a sqrt(p_k)) = min(3, sqrt(8)) (sensitivity.md
    # 4.1), and the intercept's constant column 1 (5.5)
    assert sol.extra["intercept_fitted"] is True
    assert ev.sensitivity == pytest.approx(2 * D_bound * math.sqrt(3 * 8.0 + 1.0))
    # its proven curve is the Gaussian's to the last bits at the ring's scale
    assert ev.mu == pytest.approx(ev.sensitivity / ev.sigma, rel=1e-15)
    assert ev.mu >= ev.sensitivity / ev.sigma
    assert get_accountant("rdp").epsilon(SelfComposed(ev, T), 1e-6) <= 2.0 + 1e-9
    assert get_accountant("rdp").epsilon(led.event(), 1e-6) <= 2.0 + 1e-9
    for pl in sol.extra["party_ledgers"]:                  # each party charged every round
        assert len(pl.records) == T


def test_logistic_bytes_match_the_wire_format():
    D = _logistic(n=300, d=12, K=3)
    T, n, K, J = 4, 300, 3, SERIES.terms
    sol = solve(D, **GLM, eta=1.0, iterations=T, seed=0,
                epsilon=2.0, delta=1e-6, feature_bound=1.0, label_bound=1.0)
    by = sol.extra["bytes_by_type"]
    Hd = SM.HEADER_BYTES
    assert by["MaskedFactors"] == [2 * T, 2 * T * (Hd + 6 + 16 * J * n)]
    assert by["MarginShare"] == [(K - 2) * T, (K - 2) * T * (Hd + 8 * n)]
    assert "DerivativeShare" not in by                # no party outside {L, H} gets a d share
    assert by["MaskedVector"] == [2 * (K - 1) * T, 2 * (K - 1) * T * (Hd + 6 + 8 * n)]
    assert by["InterceptShare"] == [T, T * (Hd + 8)]  # H -> L, one word a round
    assert by["SecureIndex"] == [K * T, K * T * (Hd + 4)]


def test_logistic_refuses_bad_labels_and_label_everywhere():
    D = _logistic()
    bad = VerticalData.from_arrays(np.asarray(D.A), np.arange(D.n) % 3 - 1.0, "balanced",
                                   parties=3)
    with pytest.raises(InputError, match="binary labels"):
        solve(bad, **GLM, iterations=2)
    with pytest.raises(InputError, match="label at one party"):
        solve(D, **GLM, iterations=2, label_party="all")
    with pytest.raises(InputError, match="party index 0..2"):
        solve(D, **GLM, iterations=2, label_party=3)
    with pytest.raises(InputError, match="centralized"):
        solve(D, loss="logistic", algorithm="dpfw", iterations=2, label_party=0)
    with pytest.raises(InputError, match="every party"):
        solve(D, loss="logistic", algorithm="dp-bcfw", iterations=2, label_party=0)


# -- least squares, label at one party ---------------------------------------------------------
def test_least_squares_label_party_releases_aty_once_and_accounts_for_it():
    A, y, _ = make_synthetic(n=400, d=30, density=0.2, sparsity=0.1, seed=2)
    D = VerticalData.from_arrays(A, y, "balanced", parties=3)
    base = dict(algorithm="dp-bcfw-secure", iterations=8, epsilon=2.0, delta=1e-6,
                feature_bound=1.0, label_bound=1.0, row_clip=2.0, max_features=3, seed=0)
    sol = solve(D, label_party=2, **base)
    notes = [r.note for r in sol.ledger.records]
    assert notes.count("secure: A_k^T y") == 1
    rec = next(r for r in sol.ledger.records if r.note == "secure: A_k^T y")
    clips = sol.extra["row_clips"]
    assert rec.event.sensitivity == pytest.approx(SP.label_sensitivity(1.0, clips, 2))
    assert rec.event.sigma == pytest.approx(sol.noise_plan.feature_sigma)
    assert sol.noise_plan.epsilon <= 2.0 + 1e-9
    by = sol.extra["bytes_by_type"]
    assert by["MaskedVector"][0] == (sum(sol.released) + 1) * 2   # + the label product
    # non-private: the exact A_k^T y, the same iterates as paper 004's setting
    a = solve(D, algorithm="dp-bcfw-secure", iterations=30, seed=0, max_features=1000,
              label_party=1)
    b = solve(D, algorithm="bcfw", iterations=30, seed=0)
    np.testing.assert_allclose(a.x, b.x, atol=1e-9)


def test_cli_label_party_and_test_fraction_bad_values_exit_2(tmp_path):
    csv = tmp_path / "d.csv"
    D = _logistic(n=80, d=4, K=2)
    rows = np.column_stack([np.asarray(D.A), D.y])
    np.savetxt(csv, rows, delimiter=",", header="a,b,c,d,label", comments="")
    base = [sys.executable, "-m", "vflpriv", "run", "--data", str(csv), "--label", "label",
            "--loss", "logistic", "--iterations", "2", "--epsilon", "1", "--delta", "1e-6",
            "--feature-bound", "3", "--label-bound", "1"]
    ledger = tmp_path / "l.jsonl"
    for extra, needle in ((["--algorithm", "dp-bcfw-secure", "--label-party", "7"], "0..1"),
                          (["--algorithm", "dpfw", "--label-party", "0"], "centralized"),
                          (["--algorithm", "dp-bcfw", "--test-fraction", "1.5"], "(0, 1)")):
        r = subprocess.run(base + extra + ["--ledger", str(ledger)], capture_output=True,
                           text=True)
        assert r.returncode == 2, r.stderr
        assert needle in r.stderr and "Traceback" not in r.stderr
        assert not ledger.exists()


def test_cli_logistic_path_is_accounted_by_its_renyi_curve(tmp_path):
    """The logistic path's ring noise is the exact discrete Gaussian (K = 2: no summed scores),
    whose only proven analysis is its Renyi curve alpha mu^2 / 2: --accountant optimal is
    refused by name for both losses, and the default run's spend equals the RDP conversion of
    T alpha mu^2 / 2 (mu = Delta / sigma) recomputed here by scipy (Balle et al. 2020, Thm 21),
    and stays <= the target."""
    import json
    import math

    from scipy.optimize import minimize_scalar

    csv = tmp_path / "d.csv"
    D = _logistic(n=200, d=4, K=2)
    np.savetxt(csv, np.column_stack([np.asarray(D.A), D.y]), delimiter=",",
               header="a,b,c,d,label", comments="")
    base = [sys.executable, "-m", "vflpriv", "run", "--data", str(csv), "--label", "label",
            "--algorithm", "dp-bcfw-secure", "--iterations", "5", "--epsilon", "1", "--delta",
            "1e-6", "--feature-bound", "3", "--label-bound", "1", "--seed", "0"]
    glm = ["--logistic-path", "glm"]
    for loss in ("logistic", "squared"):
        r = subprocess.run(base + ["--loss", loss, "--accountant", "optimal"],
                           capture_output=True, text=True)
        assert r.returncode == 2 and "--accountant optimal" in r.stderr, (loss, r.stderr)
        assert "Traceback" not in r.stderr
    out = tmp_path / "o.json"
    r = subprocess.run(base + ["--loss", "logistic", "--json", str(out)] + glm,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    priv = json.loads(out.read_text())["privacy"]
    cal = priv["calibration"]
    rho = 5 * (cal["sens_scores"] / cal["feature_sigma"]) ** 2 / 2

    def eps(a):
        return rho * a + math.log((a - 1) / a) - (math.log(1e-6) + math.log(a)) / (a - 1)

    ref = minimize_scalar(eps, bounds=(1.0001, 500.0), method="bounded",
                          options={"xatol": 1e-10}).fun
    spent = priv["epsilon_spent"]["rdp"]
    # the accountant minimizes over a grid of orders: at or above the continuous minimum
    assert ref - 1e-9 <= spent <= ref * 1.01 and spent <= 1.0 + 1e-9


def test_cli_synthetic_data_with_the_logistic_loss_uses_the_signs(tmp_path):
    """`--data synthetic:...` with --loss logistic takes the signs of the responses as labels
    (as `vflpriv bench utility` does): the run's accuracy is checked against the same labels
    computed here from make_synthetic."""
    import json

    from vflpriv.data import make_synthetic
    from vflpriv.vertical.metrics import classification_metrics

    out = tmp_path / "o.json"
    r = subprocess.run([sys.executable, "-m", "vflpriv", "run", "--data",
                        "synthetic:n=300,d=12,density=0.5,sparsity=0.25", "--loss", "logistic",
                        "--algorithm", "bcfw", "--iterations", "20", "--json", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    res = json.loads(out.read_text())
    A, y, _ = make_synthetic(n=300, d=12, density=0.5, sparsity=0.25)
    signs = np.where(y >= 0, 1.0, -1.0)
    sol = solve(VerticalData.from_arrays(A, signs, "balanced", parties=2), loss="logistic",
                algorithm="bcfw", iterations=20)
    m = classification_metrics(A, signs, sol.x, sol.intercept)
    assert res["accuracy"] == pytest.approx(m["accuracy"]) and res["accuracy"] > 0.6
    assert res["objective"] == pytest.approx(sol.objective)


def test_spilled_masked_blocks_give_the_same_run(monkeypatch, tmp_path):
    """Above store.SPILL_BYTES the GLM path keeps the received masked blocks on disk: a seeded
    private run with every block spilled (limit forced to 0) is bit-identical to one in memory
    (x, objectives, ledger events, bytes by type), and leaves no spill file behind."""
    import tempfile

    import vflpriv.vertical.secure.mpc.store as ST

    D = _logistic(n=300, d=6, K=3)
    kw = dict(**GLM, iterations=6, epsilon=2.0,
              delta=1e-6, feature_bound=3.0, label_bound=1.0, seed=5, label_party=1)
    a = solve(D, **kw)
    monkeypatch.setattr(ST, "SPILL_BYTES", 0)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    made = []
    real_store = ST.SpillDirectory.store
    monkeypatch.setattr(ST.SpillDirectory, "store",
                        lambda self, k: made.append(k) or real_store(self, k))
    b = solve(D, **kw)
    assert sorted(made) == [0, 1, 2]                      # every sender's block went to disk
    # OS masks in both runs: the sigmoid factors' per-share rounding (2^-f_c) moves the
    # derivatives slightly from run to run; the selections are the same
    assert np.array_equal(a.x, b.x)
    assert a.objective == pytest.approx(b.objective, abs=1e-5)
    assert [r.event for r in a.ledger.records] == [r.event for r in b.ledger.records]
    assert a.extra["bytes_by_type"] == b.extra["bytes_by_type"]
    assert list(tmp_path.iterdir()) == []


def test_an_eta_beyond_the_sigmoid_range_is_refused_before_anything(tmp_path):
    """K B_a eta + 8 (intercept) > 16: the series would wrap (issue 32); refused with the largest
    eta that fits, before the ledger file is made; eta auto (8 / (K B_a)) sits at the edge."""
    D = _logistic(n=200, d=6, K=2)
    led = tmp_path / "l.ledger"
    with pytest.raises(InputError, match=r"--eta 20: .* use --eta <= 2"):
        solve(D, **GLM, eta=20.0, iterations=3, seed=0,
              epsilon=1.0, delta=1e-6, feature_bound=2.0, label_bound=1.0, ledger=str(led))
    assert not led.exists()
    with pytest.raises(InputError, match=r"use --eta <= 4"):         # no intercept: 16 / (2 * 2)
        solve(D, **GLM, eta=4.5, iterations=3, seed=0,
              epsilon=1.0, delta=1e-6, feature_bound=2.0, label_bound=1.0, fit_intercept=False)
    sol = solve(D, **GLM, iterations=3, seed=0,
                epsilon=1.0, delta=1e-6, feature_bound=2.0, label_bound=1.0)
    assert sol.eta == pytest.approx(2.0)


def test_glm_holders_add_noise_only_for_rounds_their_ledgers_charged():
    """Issue 32: the holder of a derivative share adds noise (scores, intercept) only once per
    round its own ledger charged; a round the server runs without that charge is refused."""
    from accounting import BudgetFilter

    from vflpriv.vertical.privacy import MemoryLedger
    from vflpriv.vertical.secure.glm.party import round_event, round_scores
    from vflpriv.vertical.secure.local import Network

    D = _logistic(n=120, d=6, K=2)
    parties, dealer, keys, H = _parties(D, 0, private=True, sigma=1.0, clip=1.0)
    ev = round_event(1.0, SERIES.derivative_bound, [1.0, 1.0])
    for p in parties:
        p.budget = BudgetFilter(MemoryLedger(budget={"epsilon": 50.0, "delta": 1e-5}), 50.0,
                                1e-5, accountant="rdp")
        p.round_event = ev
    net = Network()
    with pytest.raises(InputError, match="refused to release noisy scores"):
        round_scores(parties, dealer, keys, net, 0, H, 0)
    for p in parties:
        p.charge(0)
    g = round_scores(parties, dealer, keys, net, 0, H, 0)
    assert set(g) == {0, 1}
    with pytest.raises(InputError, match="refused to release noisy scores"):
        round_scores(parties, dealer, keys, net, 0, H, 1)     # no charge for round 1


def test_the_helper_party_is_the_users_choice(tmp_path):
    """--helper-party H: the run uses H (reported), ends where the default helper's run ends up
    to the sigmoid factors' rounding (the same computation on different shares); H = L, an
    index outside 0..K-1, or a least-squares run is refused before anything is written."""
    D = _logistic(n=300, d=12, K=3)
    kw = dict(**GLM, eta=1.0, iterations=15, seed=0)
    a = solve(D, **kw)
    b = solve(D, helper_party=2, **kw)
    assert a.extra["helper_party"] == 1 and b.extra["helper_party"] == 2
    assert np.array_equal(a.x, b.x)
    assert a.final_objective == pytest.approx(b.final_objective, abs=1e-5)
    led = tmp_path / "l.ledger"
    for bad, match in ((0, "other than the label party 0"), (3, "0..2")):
        with pytest.raises(InputError, match=match):
            solve(D, helper_party=bad, ledger=str(led), epsilon=1.0, delta=1e-6,
                  feature_bound=1.0, label_bound=1.0, **kw)
        assert not led.exists()
    with pytest.raises(InputError, match="--helper-party is for dp-bcfw-secure"):
        solve(D, algorithm="dp-bcfw-secure", helper_party=1, iterations=2)


@pytest.mark.parametrize("K", [2, 3])
def test_every_partys_scores_carry_the_planned_noise(K):
    """Each party's released scores (A_k^T d + N_k) / n carry noise of std sigma / n in all: the
    label party's (from H) and the helper's (from L) included, and a third party's (half the
    variance from each holder), for K = 2 and 3.  Checked on 400 rounds of the same round (same
    margins, fresh noise): the sample std of each score is sigma / n within 15% (400 draws: the
    relative sd of a sample std is ~3.5%, so a false failure needs a 4-sigma deviation,
    p < 1e-4), and a missing noise (std 0) or a doubled one (sqrt 2) fails."""
    D = _logistic(n=200, d=3 * K, K=K)
    sigma = 50.0
    parties, dealer, keys, H = _parties(D, 0, private=True, sigma=sigma, clip=1.0)
    for p in parties:
        p.rng = np.random.default_rng(100 + p.k)
    draws = {k: [] for k in range(K)}
    for t in range(400):
        g = round_scores(parties, dealer, keys, Network(), 0, H, t)
        for k in range(K):
            draws[k].append(g[k])
    for k in range(K):
        sd = np.std(np.asarray(draws[k]), axis=0, ddof=1)
        assert np.all(np.abs(sd / (sigma / D.n) - 1) < 0.15), (k, sd * D.n / sigma)
