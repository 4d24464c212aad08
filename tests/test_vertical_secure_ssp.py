"""dp-bcfw-secure's ssp path (``logistic_path="ssp"``): the sufficient statistics of the logistic
loss's expansion released once under secret sharing, the model fitted from them
(vflpriv/vertical/secure/ssp/release.py, ssp_run.py; docs/sensitivity.md 4.10)."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from scipy.optimize import minimize

from accounting import DiscreteGaussian, get_accountant, read_ledger
from accounting.budget import BudgetExceeded
from vflpriv.audit import audit_mechanism, registered
from vflpriv.cli.main import main
from vflpriv.data import VerticalData
from vflpriv.errors import InputError
from vflpriv.vertical import solve
from vflpriv.vertical.secure.mpc import messages as SM
from vflpriv.vertical.secure.ssp import release as S
from vflpriv.vertical.secure.ssp import solve as R
from vflpriv.vertical.secure.base.blocks import clip_block, prepare_block

BLOCKS = [[0, 1, 2], [3, 4], [5, 6, 7, 8]]


def _classification(n=600, seed=0):
    rng = np.random.default_rng(seed)
    A = rng.uniform(-1, 1, size=(n, 9))
    w = np.array([2.0, 0, -1.5, 0, 1.0, 0, 0, -1.0, 0])
    p = 1 / (1 + np.exp(-(A @ w - 0.5)))
    return A, np.where(rng.uniform(size=n) < p, 1.0, -1.0)


def _capture(monkeypatch):
    """The noisy M the server assembles (a spy on ssp.assemble)."""
    seen = {}
    orig = S.assemble

    def spy(blocks, parts, n):
        seen["M"] = orig(blocks, parts, n)
        return seen["M"]

    monkeypatch.setattr(S, "assemble", spy)
    return seen


def _moments(A, y, blocks, s=1.0):
    order = np.concatenate([np.asarray(b) for b in blocks])
    Z = np.hstack([s * A[:, order], np.ones((A.shape[0], 1)), y[:, None]])
    return Z.T @ Z


def test_without_noise_the_released_statistics_are_the_exact_moments(monkeypatch):
    A, y = _classification()
    seen = _capture(monkeypatch)
    sol = solve(VerticalData(A, y, BLOCKS), algorithm="dp-bcfw-secure", loss="logistic",
                logistic_path="ssp", label_party=1, seed=0)
    M, ref = seen["M"], _moments(A, y, BLOCKS)
    ref[-1, -1] = 0.0                       # y^T y is neither released nor used
    # fixed point (f = 24 here): every entry within n 2^-23 of the float moments
    assert np.max(np.abs(M - ref)) < A.shape[0] * 2.0 ** -23
    # the fit is least squares on 2y (numpy's solver as the reference), in the data's order,
    # then its scale read from the classes' margins (calibrate_margins: the discriminant on
    # the fitted direction, recomputed here from the rows' margins)
    Z = np.hstack([A, np.ones((A.shape[0], 1))])
    w = np.linalg.lstsq(Z, 2 * y, rcond=None)[0]
    m = Z @ w
    m1, m0 = m[y > 0], m[y < 0]
    v = (((m1 - m1.mean()) ** 2).sum() + ((m0 - m0.mean()) ** 2).sum()) / (len(m) - 2)
    alpha = min((m1.mean() - m0.mean()) / v, 1.0)       # never sharper than the fit
    c = -alpha * (m1.mean() + m0.mean()) / 2 + np.log(len(m1) / len(m0))
    assert np.allclose(sol.x, alpha * w[:-1], atol=1e-6)
    assert sol.intercept == pytest.approx(alpha * w[-1] + c, rel=1e-6)
    assert sol.extra["path"] == "ssp" and sol.privacy is None
    kinds = set(sol.extra["bytes_by_type"])
    # each block opened once to the server (ssp/gram.py): no per-column product travels
    assert {"GramPart", "GramKey", "GramShare", "MaskedBlock"} <= kinds
    assert not kinds & {"MaskedVector", "ResultShare", "TripleToHolder", "TripleToHelper"}
    assert "MaskedFactors" not in kinds and "SecureIndex" not in kinds     # no rounds


def test_a_private_run_charges_one_release_on_every_ledger(tmp_path):
    A, y = _classification()
    led = tmp_path / "run.jsonl"
    sol = solve(VerticalData(A, y, BLOCKS), algorithm="dp-bcfw-secure", loss="logistic",
                logistic_path="ssp", label_party=0, epsilon=1.0, delta=1e-6,
                feature_bound=1.0, label_bound=1.0, seed=0, ledger=str(led))
    recs = read_ledger(led).records
    sigma = sol.noise_plan.feature_sigma
    # on the ring's lattice (docs/sensitivity.md 4.9.1): svec's step sqrt(2) 2^-2f, the cross
    # entries (3*2 + 3*4 + 2*4) and A_k^T y of the two parties without the label (2 + 4)
    f = sol.extra["frac_bits"]
    assert len(recs) == 1 and recs[0].event == DiscreteGaussian(
        sigma, math.sqrt(2) * 2 * (1 + 1.0), neighboring="replace_one",
        resolution=math.sqrt(2) * 2.0 ** (-2 * f), coordinates=26 + 6)
    # the accountant's epsilon is at most the target, and 1% less noise would exceed it
    rdp = get_accountant("rdp")
    assert rdp.epsilon(recs[0].event, 1e-6) <= 1.0
    assert rdp.epsilon(S.release_event(0.99 * sigma, 1.0), 1e-6) > 1.0
    for party_ledger in sol.extra["party_ledgers"]:
        assert [r.event for r in party_ledger.records] == [recs[0].event]
    # the public scale: the features' squared norm bound equals 1 + B_y^2
    clips = sol.extra["row_clips"]
    assert sol.extra["scale"] ** 2 * sum(c * c for c in clips) == pytest.approx(2.0)


def test_a_budget_that_cannot_hold_the_release_is_refused_before_any_noise(tmp_path):
    A, y = _classification(n=100)
    led = tmp_path / "run.jsonl"
    kw = dict(algorithm="dp-bcfw-secure", loss="logistic", logistic_path="ssp", label_party=0,
              delta=1e-6, feature_bound=1.0, label_bound=1.0, seed=0, ledger=str(led))
    solve(VerticalData(A, y, BLOCKS), epsilon=1.0, **kw)
    with pytest.raises(BudgetExceeded, match="nothing was released"):
        solve(VerticalData(A, y, BLOCKS), epsilon=1.0, **kw)
    assert len(read_ledger(led).records) == 1


def test_released_noise_has_the_stated_variances(monkeypatch):
    """M - (exact moments) over 40 runs: diagonal entries N(0, sigma^2), off-diagonal
    N(0, sigma^2 / 2).  Two-sided chi-square test on each group's sum of squares; false-failure
    rate 2e-6 per group."""
    rng = np.random.default_rng(5)
    A = rng.uniform(-0.5, 0.5, size=(40, 5))
    y = np.where(rng.uniform(size=40) < 0.5, 1.0, -1.0)
    blocks = [[0, 1], [2, 3, 4]]
    seen = _capture(monkeypatch)
    diag, off = [], []
    for seed in range(40):
        sol = solve(VerticalData(A, y, blocks), algorithm="dp-bcfw-secure", loss="logistic",
                    logistic_path="ssp", label_party=0, epsilon=1.0, delta=1e-6,
                    feature_bound=1.0, label_bound=1.0, seed=seed)
        s, sigma = sol.extra["scale"], sol.noise_plan.feature_sigma
        # the rows are within the clips (norms <= 0.5 sqrt(3) < C_k): the data are as given
        E = seen["M"] - _moments(A, y, blocks, s)
        iu = np.triu_indices(7)
        keep = ~((iu[0] == 5) & (iu[1] == 5)) & ~((iu[0] == 6) & (iu[1] == 6))
        e, on_diag = E[iu][keep], (iu[0] == iu[1])[keep]
        diag.extend(e[on_diag] / sigma)
        off.extend(e[~on_diag] / (sigma / math.sqrt(2)))
    for z in (np.array(diag), np.array(off)):
        q = float(np.sum(z * z))
        lo, hi = stats.chi2.ppf([1e-6, 1 - 1e-6], z.size)
        assert lo < q < hi, (q, z.size)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(-3, 3), min_size=9, max_size=9),
       st.lists(st.floats(-3, 3), min_size=9, max_size=9),
       st.sampled_from([-1.0, 1.0]), st.sampled_from([-1.0, 1.0]))
def test_one_replaced_row_moves_svec_m_by_at_most_the_sensitivity(a, b, ya, yb):
    """Rows clipped by the protocol's own clip_block (entries to B_a = 1, rows to the default
    clips), scaled by s: ||z z^T - z' z'^T||_F <= sqrt(2) R^2."""
    Ba, By = 1.0, 1.0
    clips = [Ba * len(bl) ** 0.25 for bl in BLOCKS]
    s = S.scale(By, clips)

    def z(row, yv):
        parts = [clip_block(np.asarray(row)[bl][None, :], Ba, c).toarray().ravel()
                 for bl, c in zip(BLOCKS, clips)]
        return np.concatenate([s * np.concatenate(parts), [1.0, yv]])

    za, zb = z(a, ya), z(b, yb)
    D = np.outer(za, za) - np.outer(zb, zb)
    assert np.linalg.norm(D) <= S.sensitivity(By) * (1 + 1e-12)


def test_the_fit_is_the_constrained_minimizer():
    """Noiseless moments of 200 rows: every centered eigenvalue is far above lam = 3, so the floor
    is inactive and the fit is least squares on 2y with an unpenalized intercept (numpy's lstsq);
    with l1 balls and an intercept bound, SLSQP on the same quadratic is the reference."""
    rng = np.random.default_rng(1)
    Z = np.hstack([rng.normal(size=(200, 6)), np.ones((200, 1)), rng.normal(size=(200, 1))])
    M = Z.T @ Z
    blocks = [np.arange(0, 3), np.arange(3, 6)]
    G, h = M[:7, :7], M[:7, 7]
    Zc = Z[:, :6] - Z[:, :6].mean(axis=0)
    assert np.linalg.eigvalsh(Zc.T @ Zc).min() > 30 * 3.0   # the floor lam = 3 does not bind

    def obj(w):
        return 0.5 * w @ G @ w - 2 * h @ w

    # unconstrained: the normal equations
    x, b, it = S.fit(M, blocks, lam=3.0)
    w = np.linalg.lstsq(Z[:, :7], 2 * Z[:, 7], rcond=None)[0]
    assert it == 0 and np.allclose(np.r_[x, b], w, atol=1e-9)
    # no intercept (b_bound 0): least squares on the features alone
    x, b, it = S.fit(M, blocks, lam=3.0, b_bound=0.0)
    w = np.linalg.lstsq(Z[:, :6], 2 * Z[:, 7], rcond=None)[0]
    assert b == 0.0 and np.allclose(x, w, atol=1e-9)
    # l1 balls of radius 0.2 and |b| <= 0.05: SLSQP on the same problem as the reference
    x, b, it = S.fit(M, blocks, lam=3.0, radius=0.2, b_bound=0.05)
    assert it > 0 and all(np.abs(x[bl]).sum() <= 0.2 + 1e-9 for bl in blocks)
    cons = [{"type": "ineq", "fun": lambda w, bl=bl: 0.2 - np.sum(np.abs(w[bl]))}
            for bl in blocks]
    ref = minimize(obj, np.zeros(7), method="SLSQP", constraints=cons,
                   bounds=[(None, None)] * 6 + [(-0.05, 0.05)], options={"ftol": 1e-12,
                                                                         "maxiter": 500})
    assert obj(np.r_[x, b]) <= ref.fun + 1e-6 * abs(ref.fun)


def _noisy_moments(seed, n=300, d=5, sigma=40.0, positives=0.05):
    rng = np.random.default_rng(seed)
    A = rng.uniform(0, 1, (n, d))
    y = np.where(rng.uniform(size=n) < positives, 1.0, -1.0)
    M = _moments(A, y, [list(range(d))])
    E = np.triu(rng.normal(0, sigma / math.sqrt(2), M.shape), 1)
    E = E + E.T + np.diag(rng.normal(0, sigma, M.shape[0]))
    E[d, d] = 0.0                          # 1^T 1 = n is public
    return M + E


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), shift=st.lists(st.floats(-3, 3), min_size=5, max_size=5),
       lam=st.floats(0.1, 1e4))
def test_the_fit_does_not_depend_on_where_a_feature_s_zero_is(seed, shift, lam):
    """The intercept is unpenalized, so shifting feature j by t_j (a_j -> a_j + t_j, which moves
    the released moments by the linear map T M T^T: the statistics of the shifted rows, noise
    included) changes only the intercept, by -t^T x, and never the coefficients.  The fit that
    kept the intercept inside the ridge fails this (docs/vertical_results.md, "The ssp fit leaves
    the intercept unpenalized")."""
    M = _noisy_moments(seed)
    d = M.shape[0] - 2
    T = np.eye(d + 2)
    T[:d, d] = shift                       # row j of T: e_j + t_j e_one
    x, b, _ = S.fit(M, [list(range(d))], lam=lam)
    x2, b2, _ = S.fit(T @ M @ T.T, [list(range(d))], lam=lam)
    scale = 1.0 + np.abs(x).max()
    np.testing.assert_allclose(x2, x, atol=1e-8 * scale)
    assert b2 == pytest.approx(b - np.dot(shift, x), abs=1e-7 * scale * (1 + abs(b)))


def test_a_huge_floor_leaves_the_intercept_at_the_label_mean():
    """lam -> infinity shrinks every coefficient to 0, never the intercept: b -> 2 sum(y) / n
    (the least-squares intercept on 2y with no features), here with 5% positives."""
    M = _noisy_moments(3)
    d = M.shape[0] - 2
    x, b, _ = S.fit(M, [list(range(d))], lam=1e12)
    assert np.abs(x).max() < 1e-8
    assert b == pytest.approx(2.0 * M[d, d + 1] / M[d, d], rel=1e-6)


def test_the_floor_raises_only_the_eigenvalues_below_it():
    """The centered quadratic's curvature: each eigenvalue of C = G_aa - g g^T / n below lam is
    raised to lam, the others are kept (checked against the fit's own solution: c = C_f x)."""
    M = _noisy_moments(4)
    d = M.shape[0] - 2
    n, g = M[d, d], M[:d, d]
    C = M[:d, :d] - np.outer(g, g) / n
    c = 2 * (M[:d, d + 1] - g * M[d, d + 1] / n)
    ev, V = np.linalg.eigh(C)
    lam = float(np.median(ev))                # some eigenvalues on each side
    x, _, _ = S.fit(M, [list(range(d))], lam=lam)
    Cf = (V * np.maximum(ev, lam)) @ V.T
    np.testing.assert_allclose(Cf @ x, c, rtol=1e-9, atol=1e-9 * np.abs(c).max())
    assert (ev < lam).any() and (ev > lam).any()


def _parties(n=5):
    rng = np.random.default_rng(0)
    A = [rng.uniform(-1, 1, (n, 2)), rng.uniform(-1, 1, (n, 2)), rng.uniform(-1, 1, (n, 1))]
    y = np.where(rng.uniform(size=n) < 0.5, 1.0, -1.0)
    blocks = [prepare_block(A[k], y if k == 0 else None, frac=20, private=True,
                            feature_bound=1.0, label_bound=1.0, row_clip=2.0, k=k)
              for k in range(3)]
    event = S.release_event(10.0, 1.0)
    parties = R.make_parties(blocks, 20, True, 10.0, event, [0, 1, 2])
    for p in parties:
        p.gated = True                     # as a party role: its own ledger governs
        p.K = 3
    return parties, event


def test_a_party_releases_only_what_its_own_ledger_charged():
    parties, _ = _parties()
    sizes, L = [2, 2, 1], 0
    link = R.LocalGram(parties, sizes, L)
    link.gram_keys()
    # nothing charged: its masked rows, its parts and its GramPart are refused
    with pytest.raises(InputError, match="charged no"):
        parties[1].gram_rows(0, 5, sizes, L)
    with pytest.raises(InputError, match="charged no"):
        parties[2].gram_shares(sizes, L)
    with pytest.raises(InputError, match="charged no"):
        parties[0].gram_part(sizes, L)
    with pytest.raises(InputError, match="once|GRAM"):
        parties[0].charge_features(SM.NewFeatures([3]), 0)
    link.new_features([SM.GRAM_RELEASE], 0)
    with pytest.raises(InputError, match="second"):
        parties[0].charge_features(SM.NewFeatures([SM.GRAM_RELEASE]), 0)
    # its rows in order, each once
    with pytest.raises(InputError, match="once, in order"):
        parties[1].gram_rows(2, 5, sizes, L)
    parties[1].gram_rows(0, 3, sizes, L)
    with pytest.raises(InputError, match="once, in order"):
        parties[1].gram_rows(0, 3, sizes, L)
    # its parts once (a second would draw its noise again)
    parties[2].gram_shares(sizes, L)
    with pytest.raises(InputError, match="again"):
        parties[2].gram_shares(sizes, L)
    # its keys once; a key from a party it shares no block part with is refused
    with pytest.raises(InputError, match="again"):
        parties[0].gram_keys(sizes, L)
    # a key it already holds is not replaced (party 0 made the pair key of block (0, 1) for 1)
    with pytest.raises(InputError, match="second pair key"):
        parties[1].take_gram_key(0, SM.GramKey(0, 1, b"\1" * 16), sizes, L)
    with pytest.raises(InputError, match="second block mask key"):
        parties[1].take_gram_key(2, SM.GramKey(0xFFFF, 0xFFFF, b"\1" * 16), sizes, L)
    with pytest.raises(InputError, match="does not share"):
        parties[2].take_gram_key(1, SM.GramKey(2, 3, b"\0" * 16), [2, 2, 1, 1], L)
    # no per-column product is served on this path
    with pytest.raises(InputError, match="no per-column product"):
        parties[1]._gate_release(0)
    with pytest.raises(InputError, match="no per-column product"):
        parties[2]._gate_help(2, 1)


def test_ssp_audit_entry_holds_and_catches_a_tenth_of_the_noise():
    from vflpriv.audit.secure_ssp import make_ssp

    assert "dp_bcfw_secure_ssp" in registered()
    m = make_ssp()
    assert m.event.sensitivity == pytest.approx(4 * math.sqrt(2))
    assert audit_mechanism(m, samples=600, seed=0)["ok"]
    bad = audit_mechanism(make_ssp(noise_factor=0.1), samples=600, seed=2)
    assert not bad["ok"] and bad["lower_bound"] > bad["claimed_epsilon"]


def test_refusals_name_the_bad_value(tmp_path):
    A, y = _classification(n=50)
    kw = dict(algorithm="dp-bcfw-secure", loss="logistic", logistic_path="ssp", label_party=0)
    with pytest.raises(InputError, match="-1, \\+1"):
        solve(VerticalData(A, 0.5 * y, BLOCKS), **kw)
    with pytest.raises(InputError, match="-1, \\+1"):
        solve(VerticalData(A, 0.5 * y, BLOCKS), backend="local", **kw)
    # one release: no checkpoint on any backend, refused before any file is touched
    for backend in ("inprocess", "local"):
        with pytest.raises(InputError, match="checkpoint"):
            solve(VerticalData(A, y, BLOCKS), checkpoint=str(tmp_path / "x.ck"),
                  backend=backend, ledger=str(tmp_path / "x.ledger"), epsilon=1.0,
                  delta=1e-6, feature_bound=1.0, label_bound=1.0, **kw)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(InputError, match="helper"):
        solve(VerticalData(A, y, BLOCKS), helper_party=1, **kw)


def _csv(tmp_path, n=300):
    import pandas as pd

    A, y = _classification(n=n)
    csv = tmp_path / "t.csv"
    pd.DataFrame(np.c_[A, y], columns=[f"f{j}" for j in range(9)] + ["y"]).to_csv(csv,
                                                                                  index=False)
    return csv


_CLI = ["--label", "y", "--parties", "3", "--algorithm", "dp-bcfw-secure", "--loss",
        "logistic", "--logistic-path", "ssp", "--label-party", "0", "--epsilon", "1",
        "--delta", "1e-6", "--feature-bound", "1", "--label-bound", "1", "--seed", "0"]


def test_cli_runs_the_ssp_path(tmp_path):
    out = tmp_path / "run.json"
    rc = main(["run", "--data", str(_csv(tmp_path))] + _CLI + ["--json", str(out)])
    assert rc == 0
    doc = json.loads(out.read_text())
    assert doc["intercept"] is not None and doc["epsilon_spent"]["best"] <= 1.0
    assert doc["secure"]["path"] == "ssp" and doc["auc"] > 0.6


def _ledger_events(led):
    return [r.event for r in (read_ledger(led) if isinstance(led, str) else led).records]


def test_the_local_link_run_equals_the_in_process_run(tmp_path):
    """backend="local": the server role and the parties' roles (each rebuilt per message from
    its own file, state and ledger file) over an in-process LocalLink, bit for bit the
    in-process run: x, intercept, the bytes of every message kind, one identical record on the
    server's ledger and on every party's own."""
    A, y = _classification(n=150)
    data = VerticalData(A, y, BLOCKS)
    kw = dict(algorithm="dp-bcfw-secure", loss="logistic", logistic_path="ssp", label_party=1,
              epsilon=1.0, delta=1e-6, feature_bound=1.0, label_bound=1.0, seed=3)
    ref = solve(data, ledger=str(tmp_path / "a.ledger"), **kw)
    sol = solve(data, ledger=str(tmp_path / "b.ledger"), backend="local", **kw)
    assert np.array_equal(ref.x, sol.x) and ref.intercept == sol.intercept
    assert ref.objective == sol.objective
    assert ref.privacy["epsilon_spent"] == sol.privacy["epsilon_spent"]
    assert ref.uplink_framed == sol.uplink_framed and ref.downlink == sol.downlink
    assert ref.extra["bytes_by_type"] == sol.extra["bytes_by_type"]
    event = _ledger_events(str(tmp_path / "a.ledger"))
    assert len(event) == 1 and _ledger_events(str(tmp_path / "b.ledger")) == event
    assert [_ledger_events(pl) for pl in ref.extra["party_ledgers"]] == [event] * 3
    assert [_ledger_events(pl) for pl in sol.extra["party_ledgers"]] == [event] * 3
    assert sol.extra["backend"] == "local" and sol.extra["flower"]["error"] is None
    # without noise (no budget, no ledger) the same holds, the constrained fit included
    kw = dict(algorithm="dp-bcfw-secure", loss="logistic", logistic_path="ssp", label_party=2,
              seed=1, eta=0.5, fit_intercept=False)
    ref, sol = solve(data, **kw), solve(data, backend="local", **kw)
    assert np.array_equal(ref.x, sol.x) and sol.intercept is None
    assert ref.extra["fit_iterations"] == sol.extra["fit_iterations"] > 0


def test_a_party_whose_own_budget_cannot_hold_the_release_refuses_at_setup(tmp_path):
    """Each party checks the release against its own budget at setup: a party budget below
    the release stops the run there, before anything is charged on any ledger."""
    from vflpriv.runtime.backends import FlowerOptions
    from vflpriv.runtime.link import PartyRefused

    A, y = _classification(n=60)
    led = tmp_path / "run.ledger"
    with pytest.raises(PartyRefused, match="party 0 refused round 0: BudgetExceeded.*nothing "
                                           "was released"):
        solve(VerticalData(A, y, BLOCKS), algorithm="dp-bcfw-secure", loss="logistic",
              logistic_path="ssp", label_party=0, epsilon=1.0, delta=1e-6, feature_bound=1.0,
              label_bound=1.0, seed=0, ledger=str(led), backend="local",
              flower=FlowerOptions(party_budget=(0.1, 1e-6)))
    assert read_ledger(led).records == []
    for k in range(3):
        p = tmp_path / f"run.ledger.party{k}"
        assert not p.exists() or read_ledger(p).records == []


def test_over_a_link_each_party_serves_only_what_its_own_ledger_charged(tmp_path,
                                                                        monkeypatch):
    """The roles' gates over a link: a server that does not announce the release (so no party
    charges it) is refused the first party's masked rows, before any noise is drawn; a server
    asking for the statistics twice is refused the second time."""
    from vflpriv.runtime.link import PartyRefused
    from vflpriv.vertical.secure.ssp import roles as SR

    A, y = _classification(n=60)
    kw = dict(algorithm="dp-bcfw-secure", loss="logistic", logistic_path="ssp", label_party=1,
              epsilon=1.0, delta=1e-6, feature_bound=1.0, label_bound=1.0, seed=0,
              backend="local")
    data = VerticalData(A, y, BLOCKS)
    monkeypatch.setattr(SR.LinkSspParties, "new_features", lambda self, holders, t: None)
    with pytest.raises(PartyRefused) as err:
        solve(data, ledger=str(tmp_path / "a.ledger"), **kw)
    assert err.value.party == 0 and "refused to release its masked block" in err.value.reason
    assert all(read_ledger(tmp_path / f"a.ledger.party{k}").records == [] for k in range(3))
    monkeypatch.undo()
    real = SR.LinkSspParties.gram_parts
    monkeypatch.setattr(SR.LinkSspParties, "gram_parts",
                        lambda self, t=0: (real(self, t), real(self, t))[1])
    with pytest.raises(PartyRefused) as err:
        solve(data, ledger=str(tmp_path / "b.ledger"), **kw)
    assert err.value.party == 0 and "refused to release its statistics" in err.value.reason


def test_a_description_for_separate_machines_is_of_the_ssp_family(tmp_path):
    """``flower.spec_dir``: nothing runs; the run description (data only) names the ssp family
    and carries the public scale, bounds and noise; each party's file holds its block as given."""
    pytest.importorskip("flwr")
    from vflpriv.runtime.backends import FlowerOptions
    from vflpriv.runtime.partydata import load_party_data

    from vflpriv.runtime.keys import Pinning, new_identity

    A, y = _classification(n=60)
    out = tmp_path / "d"
    keys = {k: str(tmp_path / f"own{k}.key") for k in range(3)}       # each party's own key
    pin = Pinning({k: new_identity(path) for k, path in keys.items()}, keys)
    info = solve(VerticalData(A, y, BLOCKS), algorithm="dp-bcfw-secure", loss="logistic",
                 logistic_path="ssp", label_party=2, epsilon=1.0, delta=1e-6,
                 feature_bound=1.0, label_bound=1.0, backend="flower",
                 flower=FlowerOptions(spec_dir=str(out), pinning=pin))
    assert info["family"] == "ssp" and info["clients"] == 3
    spec = json.loads((out / "run.json").read_text())
    assert spec["family"] == "ssp" and spec["ssp"]["label_party"] == 2
    assert spec["ssp"]["scale"] < 1.0 and spec["ssp"]["sigma"] > 0
    A0, y0 = load_party_data(str(out / "party0.npz"))
    assert np.array_equal(A0, A[:, BLOCKS[0]]) and y0.size == 0
    assert "own0.key" in (out / "node0.toml").read_text()    # its key pinned, never written


@pytest.mark.slow
@pytest.mark.usefixtures("one_ray")                  # conftest: one Ray for all runs
def test_ssp_path_on_flower_sim_equals_in_process(tmp_path):
    """The ssp path as Flower ClientApps (each party's GramParty rebuilt per message, its own
    ledger file gating its releases): bit for bit the in-process run."""
    pytest.importorskip("flwr")
    pytest.importorskip("ray")
    A, y = _classification(n=150)
    data = VerticalData(A, y, BLOCKS)
    kw = dict(algorithm="dp-bcfw-secure", loss="logistic", logistic_path="ssp", label_party=1,
              epsilon=1.0, delta=1e-6, feature_bound=1.0, label_bound=1.0, seed=4)
    ref = solve(data, ledger=str(tmp_path / "a.ledger"), **kw)
    sol = solve(data, ledger=str(tmp_path / "b.ledger"), backend="flower-sim", **kw)
    assert np.array_equal(ref.x, sol.x) and ref.intercept == sol.intercept
    assert ref.objective == sol.objective
    assert ref.uplink_framed == sol.uplink_framed
    assert ref.privacy["epsilon_spent"] == sol.privacy["epsilon_spent"]
    event = _ledger_events(str(tmp_path / "a.ledger"))
    assert len(event) == 1 and _ledger_events(str(tmp_path / "b.ledger")) == event
    assert [_ledger_events(pl) for pl in ref.extra["party_ledgers"]] == [event] * 3
    assert [_ledger_events(pl) for pl in sol.extra["party_ledgers"]] == [event] * 3


@pytest.mark.slow
@pytest.mark.usefixtures("one_ray")
def test_cli_runs_the_ssp_path_on_flower_sim(tmp_path):
    pytest.importorskip("flwr")
    pytest.importorskip("ray")
    out = tmp_path / "run.json"
    rc = main(["run", "--data", str(_csv(tmp_path))] + _CLI +
              ["--backend", "flower-sim", "--json", str(out)])
    assert rc == 0
    doc = json.loads(out.read_text())
    assert doc["secure"]["path"] == "ssp" and doc["epsilon_spent"]["best"] <= 1.0
    assert doc["flower"]["backend"] == "flower-sim"


@pytest.mark.filterwarnings("ignore:.*a private fit without a ledger")
def test_an_explicit_eta_bounds_every_party_and_the_classifier_takes_the_path():
    from vflpriv.estimators import VerticalDPLogisticRegression

    A, y = _classification()
    kw = dict(algorithm="dp-bcfw-secure", loss="logistic", logistic_path="ssp", label_party=0,
              epsilon=1.0, delta=1e-6, feature_bound=1.0, label_bound=1.0, seed=0)
    free = solve(VerticalData(A, y, BLOCKS), **kw)
    assert free.eta is None and "no l1 ball" in free.eta_rule
    sol = solve(VerticalData(A, y, BLOCKS), eta=0.5, **kw)
    norms = [np.abs(sol.x[b]).sum() for b in BLOCKS]
    assert max(norms) <= 0.5 + 1e-9 and max(np.abs(free.x[b]).sum() for b in BLOCKS) > 0.5
    assert sol.eta == 0.5 and sol.extra["fit_iterations"] > 0
    m = VerticalDPLogisticRegression(parties=3, logistic_path="ssp", epsilon=1.0, delta=1e-6,
                                     feature_bound=1.0, random_state=0).fit(A, y > 0)
    assert m.solution_.extra["path"] == "ssp" and m.score(A, y > 0) > 0.7
    assert m.predict_proba(A).shape == (A.shape[0], 2)


def test_the_margins_calibration_is_the_discriminant_computed_from_the_rows():
    """calibrate_margins reads each class's margin mean and the pooled within-class variance
    from the released moments; without noise they are the rows' own (an independent numpy
    computation on the margins), the slope keeps the ranking and the log-loss on the rows falls
    where the expansion's scale was off (a rare label)."""
    rng = np.random.default_rng(0)
    n, d = 4000, 5
    y = np.where(rng.uniform(size=n) < 0.07, 1.0, -1.0)          # rare positives
    A = rng.normal(size=(n, d)) + 0.6 * (y[:, None] > 0) * np.arange(1, d + 1) / d
    z = np.column_stack([A, np.ones(n), y])
    M = z.T @ z
    # a direction that separates the classes, at a scale the discriminant softens (slope < 1)
    x, b = 0.9 * np.arange(1, d + 1) / d + 0.15 * rng.normal(size=d), -0.2
    x2, b2, slope = S.calibrate_margins(M, x, b)
    m = A @ x + b
    m1, m0 = m[y > 0], m[y < 0]
    v = (((m1 - m1.mean()) ** 2).sum() + ((m0 - m0.mean()) ** 2).sum()) / (n - 2)
    alpha = min((m1.mean() - m0.mean()) / v, 1.0)       # never sharper than the fit
    c = -alpha * (m1.mean() + m0.mean()) / 2 + np.log(len(m1) / len(m0))
    assert alpha < 1 and slope == pytest.approx(alpha, rel=1e-9)
    np.testing.assert_allclose(x2, alpha * x, rtol=1e-9)
    assert b2 == pytest.approx(alpha * b + c, rel=1e-9)

    def log_loss(xx, bb):
        return float(np.mean(np.logaddexp(0.0, -y * (A @ xx + bb))))

    prior = float(np.mean(np.logaddexp(0.0, -y * np.log(np.mean(y > 0) / np.mean(y < 0)))))
    assert log_loss(x2, b2) < min(log_loss(x, b), prior)
    # no intercept: c = 0; an l1 ball: the slope capped so the model stays inside it
    _, b3, _ = S.calibrate_margins(M, x, 0.0, intercept=False)
    assert b3 == 0.0
    x4, _, s4 = S.calibrate_margins(M, x, b, blocks=[[0, 1], [2, 3, 4]], radius=0.1)
    assert max(np.abs(x4[:2]).sum(), np.abs(x4[2:]).sum()) <= 0.1 * (1 + 1e-12)
    # a direction the classes do not separate in its sign: returned as fitted
    xr, br, sr = S.calibrate_margins(M, -x, b)
    assert sr is None and np.array_equal(xr, -x) and br == b
