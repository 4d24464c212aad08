"""The vertical engine's intercept (dp-bcfw, bcfw, dfw; docs/sensitivity.md 3.1): b held by party
0, its derivative released with each round (noisy in a private run), moved by the damped Newton
step of centralized FW in the same round as x.  Against a trusted solver's joint optimum over
(x, b), against centralized FW, the ledger against the closed-form sensitivity, the wire format,
a resumed run and the roles over a link against the in-process run, and the audit entry."""
import math

import numpy as np
import pytest
from scipy.optimize import minimize

from accounting import Gaussian, ReportNoisyMax, get_accountant, read_ledger
from vflpriv.data import VerticalData
from vflpriv.errors import InputError
from vflpriv.optim import get_loss
from vflpriv.vertical import solve
from vflpriv.vertical import messages as M

BLOCKS = [[0, 1, 2], [3, 4, 5]]


def _data(loss, n=600, seed=0):
    """Features not centred and an offset: without an intercept the l1 balls cannot reach the
    optimum.  (Least squares on [-1/2, 1]: with features in [0, 1], mean(A) and the intercept
    are so coupled that the damped intercept step of vflpriv.optim.intercept, shared with
    centralized FW, is still 3e-3 above the optimum after 3000 rounds, in FW as here.)"""
    rng = np.random.default_rng(seed)
    w = np.array([1.5, 0, -1.0, 0, 0.8, 0])
    if loss == "logistic":
        A = rng.uniform(0, 1, size=(n, 6))
        p = 1 / (1 + np.exp(-(A @ w - 3.0)))
        y = np.where(rng.uniform(size=n) < p, 1.0, -1.0)
    else:
        A = rng.uniform(-0.5, 1, size=(n, 6))
        y = A @ w + 2.0 + 0.1 * rng.standard_normal(n)
    return A, y


def _reference(A, y, loss, eta):
    """min over (x, b), ||x_k||_1 <= eta per block, by SLSQP on x = x+ - x- (a trusted solver)."""
    n, d = A.shape
    f_loss = get_loss(loss)

    def f(v):
        x = v[:d] - v[d:2 * d]
        return float(f_loss.objective(A, x, y, Ax=A @ x + v[-1]))

    cons = [{"type": "ineq", "fun": (lambda v, blk=blk: eta - v[blk].sum()
                                     - v[[d + j for j in blk]].sum())} for blk in BLOCKS]
    res = minimize(f, np.zeros(2 * d + 1), method="SLSQP", constraints=cons,
                   bounds=[(0, None)] * (2 * d) + [(None, None)],
                   options={"ftol": 1e-13, "maxiter": 1000})
    assert res.success
    return res.fun, res.x[-1]


@pytest.mark.parametrize("loss", ["squared", "logistic"])
@pytest.mark.parametrize("algorithm", ["bcfw", "dfw"])
def test_nonprivate_run_reaches_the_joint_optimum(loss, algorithm):
    A, y = _data(loss)
    data = VerticalData(A, y, BLOCKS)
    f_star, _ = _reference(A, y, loss, 1.0)
    sol = solve(data, loss=loss, algorithm=algorithm, eta=1.0, iterations=3000,
                fit_intercept=True, seed=0, reference=True)
    assert sol.intercept is not None
    assert 0 <= sol.final_objective - f_star < 1e-3     # O(1/t), as FW (Jaggi 2013, Theorem 1)
    assert sol.reference.intercept is not None and abs(sol.excess_risk) < 1e-3
    # the intercept's first-order condition at the final x (b is not pinned down more sharply:
    # f is nearly flat along (x + s v, b - s mean(A) v))
    dz = get_loss(loss).derivative(A @ sol.x + sol.intercept, y)
    assert abs(np.mean(dz)) < 5e-3
    # the reported objective is f(x_T, b_T)
    assert sol.final_objective == pytest.approx(
        get_loss(loss).objective(A, sol.x, y, Ax=A @ sol.x + sol.intercept), rel=1e-12)
    # without it the same set cannot come close
    nob = solve(data, loss=loss, algorithm=algorithm, eta=1.0, iterations=3000,
                fit_intercept=False, seed=0)
    assert nob.intercept is None and nob.final_objective - f_star > 0.05


@pytest.mark.parametrize("loss", ["logistic", "smoothed-hinge", "squared"])
def test_bcfw_with_elementary_sampling_is_central_fw_with_an_intercept(loss):
    """Every party every round, identity sketch: BCFW-AS is FW on the product of balls, and the
    intercept takes the same steps from the same derivatives (up to rounding)."""
    A, y = _data("squared" if loss == "squared" else "logistic")
    data = VerticalData(A, y, BLOCKS)
    kw = dict(loss=loss, eta=1.0, iterations=200, fit_intercept=True)
    a = solve(data, algorithm="bcfw", seed=0, **kw)
    b = solve(data, algorithm="fw", step="fw", **kw)   # the same 2 / (t + 2) iteration
    assert np.allclose(a.x, b.x, rtol=0, atol=1e-12)
    assert a.intercept == pytest.approx(b.intercept, abs=1e-10)
    assert np.allclose(a.objective, b.objective, rtol=1e-12)


def test_default_is_an_intercept_for_classification_only():
    A, y = _data("logistic", n=100)
    data = VerticalData(A, y, BLOCKS)
    assert solve(data, loss="logistic", algorithm="bcfw", eta=1.0, iterations=3,
                 seed=0).intercept is not None
    assert solve(data, loss="squared", algorithm="bcfw", eta=1.0, iterations=3,
                 seed=0).intercept is None


def test_wire_format_and_party_zero_asked_when_not_sampled():
    """RoundB is 8 m + 9 bytes; party 0's reply carries g_b (IndexB 12 B, InterceptGrad 8 B when
    a sampling leaves it out); the other parties' replies are unchanged."""
    A, y = _data("squared", n=50)
    data = VerticalData(A, y, BLOCKS)
    sol = solve(data, loss="squared", algorithm="bcfw", eta=1.0, iterations=6, sampling="serial",
                fit_intercept=True, seed=1)
    by = sol.meter.by_type
    assert by["RoundB"][0] == 6 + sum(1 for sel in sol.extra["selections"] if sel[0][0] != 0)
    assert by["RoundB"][1] == by["RoundB"][0] * (M.HEADER_BYTES + 8 * 50 + 9)
    assert "Round" not in by
    grads = by.get("InterceptGrad", [0, 0])[0]
    assert grads + by.get("IndexB", [0, 0])[0] == 6          # party 0 answers every round
    assert grads == sum(1 for sel in sol.extra["selections"] if sel[0][0] != 0) > 0
    assert by["IndexB"][1] == by["IndexB"][0] * (M.HEADER_BYTES + 12)
    for msg in (M.RoundB(np.arange(3.0), -0.25, M.SELECT | M.RELEASE_INTERCEPT),
                M.IndexB(-3, 0.5), M.IndexGapB(2, 0.1, -0.5), M.InterceptGrad(1e-3)):
        back, party, t = M.decode(M.encode(msg, 1, 7))
        assert (party, t) == (1, 7) and type(back) is type(msg)
        assert repr(back) == repr(msg)


@pytest.mark.parametrize("loss", ["logistic", "squared"])
def test_private_run_charges_each_rounds_derivative_with_the_closed_form_sensitivity(loss):
    """One Gaussian(sigma_b, 2 L / n) per round, party 0, charged right after the round's
    indices (before any noise); L at the margins' bound B_a K eta + B_b; sigma_b tied to the
    index scale; the whole run's spend <= the target."""
    n, T, K, eta, Ba, By = 400, 12, 2, 1.0, 1.0, 1.0
    A, y = _data(loss, n=n)
    data = VerticalData(A, y, BLOCKS)
    sol = solve(data, loss=loss, algorithm="dp-bcfw", eta=eta, iterations=T, seed=0,
                fit_intercept=True, epsilon=2.0, delta=1e-6, feature_bound=Ba, label_bound=By)
    recs = sol.ledger.records
    icpt = [r for r in recs if r.note == "intercept derivative"]
    assert len(icpt) == T and [r.round for r in icpt] == list(range(T))
    assert all(r.party == "0" and isinstance(r.event, Gaussian) for r in icpt)
    R = Ba * K * eta
    L = 1 / (1 + math.exp(-(R + 8.0))) if loss == "logistic" else R + By + By   # B_b = 8 | B_y
    ev = icpt[0].event
    assert ev.sensitivity == pytest.approx(2 * L / n, rel=1e-12)
    idx = [r for r in recs if r.note == "signed index"]
    rnm = idx[0].event.event
    assert isinstance(rnm, ReportNoisyMax) and rnm.sensitivity == pytest.approx(2 * Ba * L / n)
    assert ev.sigma == pytest.approx(math.sqrt(2) * rnm.scale / Ba, rel=1e-12)
    for r in icpt:        # right after the round's index charge
        assert recs[r.seq - 1].note == "signed index" and recs[r.seq - 1].round == r.round
    spent = get_accountant("rdp").epsilon(sol.ledger.event(), 1e-6)
    assert spent <= 2.0 + 1e-9
    plan = sol.noise_plan
    assert plan.details["intercept_sigma"] == ev.sigma
    assert -plan.details["intercept_bound"] <= sol.intercept <= plan.details["intercept_bound"]


def test_worst_case_plan_spends_the_target_exactly():
    """release_cache=False: every round releases K features, so the ledger holds the calibrated
    plan itself, intercept releases included."""
    A, y = _data("logistic", n=300)
    data = VerticalData(A, y, BLOCKS)
    sol = solve(data, loss="logistic", algorithm="dp-bcfw", eta=1.0, iterations=8, seed=2,
                epsilon=1.0, delta=1e-6, feature_bound=1.0, label_bound=1.0,
                release_cache=False)
    assert sol.intercept is not None
    spent = get_accountant("rdp").epsilon(sol.ledger.event(), 1e-6)
    assert spent == pytest.approx(1.0, rel=1e-4) and spent <= 1.0 + 1e-9


def test_a_party_without_intercept_noise_releases_no_derivative():
    from vflpriv.vertical.engine import Party
    from vflpriv.vertical.sampling import Sampling

    # party 0 of a run whose plan gave it no intercept noise (the only holder of that noise)
    p = Party(0, np.ones((5, 2)), np.ones(5), get_loss("logistic"), 1.0, noise="laplace",
              index_scale=1.0, feature_sigma=1.0, clip=(1.0, 1.0, 2.0, 1.0), noise_seed=0)
    p.sampling = Sampling("elementary", [np.arange(2)])
    p._K = 1
    p.setup(M.Setup(0, 0, 5, 5, "identity", 1), [np.arange(2)])
    with pytest.raises(InputError, match="no noise for the intercept"):
        p.handle(M.RoundB(np.zeros(5), 0.0, M.SELECT | M.RELEASE_INTERCEPT), 0)


def test_a_remote_party_other_than_zero_refuses_to_release_it(tmp_path):
    from vflpriv.runtime.partydata import save_party_data
    from vflpriv.runtime.roles import Refused
    from vflpriv.vertical.remote import VerticalParty

    path = str(tmp_path / "p1.npz")
    save_party_data(path, np.ones((5, 2)), np.ones(5))
    setup = {"algorithm": "bcfw", "loss": "logistic", "eta": 1.0, "K": 2, "n": 5, "m": 5,
             "sketch": "identity", "sketch_seed": 0, "sampling_seed": 0,
             "sampling": {"kind": "elementary", "tau": None, "probs": None,
                          "blocks": [[0, 1], [2, 3]]},
             "private": True, "noise": "laplace", "index_scale": 1.0, "feature_sigma": 1.0,
             "sens_index": 0.1, "sens_feature": 2.0, "clip": [1.0, 1.0, 2.0, 1.0],
             "intercept": True, "intercept_sigma": 1.0, "sens_intercept": 0.1,
             "iterations": 3, "run_id": "r", "accountant": "rdp"}
    role = VerticalParty({"party": 1, "data": path, "ledger": str(tmp_path / "p1.ledger"),
                          "budget-epsilon": 1e4, "budget-delta": 1e-5, "accountant": "rdp"},
                         setup)
    role.handle("setup", b"", 0)
    frame = M.encode(M.RoundB(np.zeros(5), 0.0, M.SELECT | M.RELEASE_INTERCEPT), 1, 0)
    with pytest.raises(Refused, match="intercept"):
        role.handle("round", frame, 0)


@pytest.mark.parametrize("kw", [
    dict(algorithm="dp-bcfw", loss="logistic", epsilon=4.0, delta=1e-5, feature_bound=1.0,
         label_bound=1.0, iterations=5, seed=3),
    dict(algorithm="dfw", loss="squared", fit_intercept=True, iterations=4, seed=5),
    dict(algorithm="bcfw", loss="logistic", sampling="serial", iterations=6, seed=1)],
    ids=["dp-bcfw-logistic", "dfw-squared", "bcfw-serial"])
def test_roles_over_a_link_equal_the_in_process_run(tmp_path, kw):
    A, y = _data(kw["loss"], n=80)
    data = VerticalData(A, y, BLOCKS)
    private = "epsilon" in kw
    ref = solve(data, ledger=str(tmp_path / "a.ledger") if private else None, eta=1.0, **kw)
    sol = solve(data, ledger=str(tmp_path / "b.ledger") if private else None, eta=1.0,
                backend="local", **kw)
    assert ref.intercept is not None and ref.intercept == sol.intercept
    assert np.array_equal(ref.x, sol.x) and ref.objective == sol.objective
    assert ref.uplink_framed == sol.uplink_framed and ref.downlink == sol.downlink
    if private:
        assert ref.privacy["epsilon_spent"] == sol.privacy["epsilon_spent"]
        own = read_ledger(str(tmp_path / "b.ledger") + ".party0").records
        assert sum(r.note == "intercept derivative" for r in own) == kw["iterations"]
        assert not any(r.note == "intercept derivative"
                       for r in read_ledger(str(tmp_path / "b.ledger") + ".party1").records)


def test_a_resumed_run_equals_an_uninterrupted_one(tmp_path):
    A, y = _data("logistic", n=200)
    data = VerticalData(A, y, BLOCKS)
    kw = dict(algorithm="dp-bcfw", loss="logistic", eta=1.0, iterations=10, seed=5,
              epsilon=2.0, delta=1e-5, feature_bound=1.0, label_bound=1.0)
    ref = solve(data, ledger=str(tmp_path / "ref.jsonl"), **kw)

    class Crash(Exception):
        pass

    def crash(t, _):
        if t == 5:
            raise Crash

    led, ck = tmp_path / "l.jsonl", tmp_path / "c.npz"
    with pytest.raises(Crash):
        solve(data, ledger=str(led), checkpoint=str(ck), checkpoint_every=3, callback=crash, **kw)
    sol = solve(data, ledger=str(led), checkpoint=str(ck), resume=True, **kw)
    assert ref.intercept is not None and sol.intercept == ref.intercept
    assert np.array_equal(sol.x, ref.x) and sol.objective == ref.objective
    key = lambda r: (r.party, r.round, r.note, r.event)  # noqa: E731
    assert [key(r) for r in read_ledger(led).records] == \
        [key(r) for r in read_ledger(tmp_path / "ref.jsonl").records]


def test_estimators_fit_it_jointly():
    from vflpriv.estimators import VerticalDPLogisticRegression

    A, y = _data("logistic")
    est = VerticalDPLogisticRegression(partition=BLOCKS, eta=1.0, max_iter=500,
                                       random_state=0).fit(A, y)
    sol = est.solution_
    assert sol.intercept is not None and est.intercept_ == sol.intercept
    assert est.coef_.shape == (6,) and est.history_[-1] == sol.final_objective


def test_audit_entry_holds_and_catches_a_quarter_of_the_noise():
    from vflpriv.audit import audit_mechanism, registered
    from vflpriv.audit.vertical import make_intercept

    assert "dp_bcfw_intercept" in registered()
    m = make_intercept()
    assert m.event.sensitivity == pytest.approx(2 * 0.5 / 4)       # 2 L / n, L = c = 1/2
    row = audit_mechanism(m, samples=20_000, seed=3)
    assert row["ok"] and row["lower_bound"] > 0.2                   # not vacuous
    bad = audit_mechanism(make_intercept(noise_factor=0.25), samples=20_000, seed=2)
    assert not bad["ok"] and bad["lower_bound"] > bad["claimed_epsilon"]


@pytest.mark.slow
def test_flower_sim_equals_the_in_process_run(tmp_path, request):
    """On Flower's simulation runtime: the same frames, so the same intercept, x, history, bytes
    and spend; party 0's own ledger holds the intercept releases."""
    pytest.importorskip("flwr")
    pytest.importorskip("ray")
    request.getfixturevalue("one_ray")
    A, y = _data("logistic", n=80)
    data = VerticalData(A, y, BLOCKS)
    kw = dict(algorithm="dp-bcfw", loss="logistic", eta=1.0, epsilon=4.0, delta=1e-5,
              feature_bound=1.0, label_bound=1.0, iterations=4, seed=3)
    ref = solve(data, ledger=str(tmp_path / "a.ledger"), **kw)
    sol = solve(data, ledger=str(tmp_path / "b.ledger"), backend="flower-sim", **kw)
    assert ref.intercept is not None and ref.intercept == sol.intercept
    assert np.array_equal(ref.x, sol.x) and ref.objective == sol.objective
    assert ref.uplink_framed == sol.uplink_framed and ref.downlink == sol.downlink
    assert ref.privacy["epsilon_spent"] == sol.privacy["epsilon_spent"]
    own = read_ledger(str(tmp_path / "b.ledger") + ".party0").records
    assert sum(r.note == "intercept derivative" for r in own) == 4
