"""dp-bcfw-secure's logistic glm path with projected-gradient steps (``step="pgd"``).

References: SLSQP's joint optimum over (x, b) (a trusted solver) for the non-private run; the
in-process run for the roles over a link and for a resumed run (to the fixed point's rounding:
the masks come from the OS in every run, so the shares' truncation differs by one unit in the
last place, which a continuous step carries on where a Frank-Wolfe vertex absorbs it; the
frames and the spend are equal); the Frank-Wolfe run's ledger for the spend (the step is a
post-processing: the same releases are charged); the l1 balls for the iterates (a property that
fails if the projection or the averaging is wrong)."""
import numpy as np
import pytest
from scipy.optimize import minimize

from accounting import read_ledger
from vflpriv.cli.main import main
from vflpriv.data import VerticalData
from vflpriv.errors import InputError
from vflpriv.vertical import solve
from vflpriv.vertical.secure.glm.loop import model_intercepts, pgd_step_size

BLOCKS = [[0, 1, 2], [3, 4, 5], [6, 7, 8]]


def _data(n=400, seed=0):
    rng = np.random.default_rng(seed)
    A = rng.uniform(0, 1, size=(n, 9))
    w = np.array([2.0, 0, -1.5, 0, 1.0, 0, 0, -1.0, 0])
    p = 1 / (1 + np.exp(-(A @ w - 1.5)))
    return A, np.where(rng.uniform(size=n) < p, 1.0, -1.0)


def _reference(A, y, eta):
    n, d = A.shape

    def f(v):
        m = A @ (v[:d] - v[d:2 * d]) + v[-1]
        return float(np.mean(np.logaddexp(0.0, -y * m)))

    cons = [{"type": "ineq", "fun": (lambda v, blk=blk: eta - v[blk].sum()
                                     - v[[d + j for j in blk]].sum())} for blk in BLOCKS]
    res = minimize(f, np.zeros(2 * d + 1), method="SLSQP", constraints=cons,
                   bounds=[(0, None)] * (2 * d) + [(None, None)],
                   options={"ftol": 1e-12, "maxiter": 500})
    assert res.success
    return res.fun


KW = dict(algorithm="dp-bcfw-secure", loss="logistic", logistic_path="glm", label_party=0,
          eta=1.0)


def test_nonprivate_pgd_reaches_the_joint_optimum_and_stays_in_the_balls():
    A, y = _data()
    sol = solve(VerticalData(A, y, BLOCKS), step="pgd", iterations=600, seed=0, **KW)
    f_star = _reference(A, y, 1.0)
    # the sigmoid series and fixed point bound how close any secure run gets (as fw's tests)
    assert sol.objective[-1] - f_star < 5e-3
    for blk in BLOCKS:
        assert np.abs(sol.x[blk]).sum() <= 1.0 + 1e-9
    assert sol.extra["step"] == "pgd"
    # non-private: the clips B_a sqrt(p_k) with B_a = max |a_ij| of the data
    Ba = float(np.abs(A).max())
    assert sol.extra["step_size"] == pytest.approx(pgd_step_size([Ba * np.sqrt(3.0)] * 3, True),
                                                   rel=1e-12)


def test_private_pgd_charges_exactly_what_fw_charges(tmp_path):
    A, y = _data()
    kw = dict(KW, iterations=12, seed=3, epsilon=2.0, delta=1e-5, feature_bound=1.0,
              label_bound=1.0)
    fw = solve(VerticalData(A, y, BLOCKS), ledger=str(tmp_path / "fw"), **kw)
    pgd = solve(VerticalData(A, y, BLOCKS), ledger=str(tmp_path / "pgd"), step="pgd", **kw)
    key = lambda r: (r.party, r.round, r.note, r.event)  # noqa: E731
    assert [key(r) for r in read_ledger(tmp_path / "fw").records] == \
        [key(r) for r in read_ledger(tmp_path / "pgd").records]
    assert fw.privacy["epsilon_spent"] == pgd.privacy["epsilon_spent"]
    assert "Coefficients" in pgd.extra["bytes_by_type"]
    for blk in BLOCKS:
        assert np.abs(pgd.x[blk]).sum() <= 1.0 + 1e-9
    # the intercept is the average of L's intercepts, weighted as the coefficients
    assert abs(pgd.intercept) <= 8.0


def test_roles_over_a_link_equal_the_in_process_run(tmp_path):
    A, y = _data(n=120)
    kw = dict(KW, iterations=4, seed=4, epsilon=4.0, delta=1e-5, feature_bound=1.0,
              label_bound=1.0, step="pgd")
    ref = solve(VerticalData(A, y, BLOCKS), ledger=str(tmp_path / "a"), **kw)
    sol = solve(VerticalData(A, y, BLOCKS), ledger=str(tmp_path / "b"), backend="local", **kw)
    np.testing.assert_allclose(ref.x, sol.x, atol=1e-4)
    assert ref.intercept == pytest.approx(sol.intercept, abs=1e-4)
    assert ref.uplink_framed == sol.uplink_framed
    np.testing.assert_allclose(ref.objective, sol.objective, rtol=1e-5)
    assert ref.privacy["epsilon_spent"] == sol.privacy["epsilon_spent"]


def test_a_resumed_pgd_run_equals_an_uninterrupted_one(tmp_path):
    A, y = _data(n=200)
    kw = dict(KW, iterations=10, seed=5, epsilon=2.0, delta=1e-5, feature_bound=1.0,
              label_bound=1.0, step="pgd")
    ref = solve(VerticalData(A, y, BLOCKS), ledger=str(tmp_path / "ref"), **kw)

    class Crash(Exception):
        pass

    def crash(t, _):
        if t == 6:
            raise Crash

    led, ck = tmp_path / "l", tmp_path / "c.npz"
    with pytest.raises(Crash):
        solve(VerticalData(A, y, BLOCKS), ledger=str(led), checkpoint=str(ck),
              checkpoint_every=3, callback=crash, **kw)
    sol = solve(VerticalData(A, y, BLOCKS), ledger=str(led), checkpoint=str(ck), resume=True,
                **kw)
    np.testing.assert_allclose(sol.x, ref.x, atol=1e-4)
    assert sol.intercept == pytest.approx(ref.intercept, abs=1e-4)
    np.testing.assert_allclose(sol.objective, ref.objective, rtol=1e-5)
    key = lambda r: (r.party, r.round, r.note, r.event)  # noqa: E731
    assert [key(r) for r in read_ledger(led).records] == \
        [key(r) for r in read_ledger(tmp_path / "ref").records]


def test_model_intercepts_is_the_weighted_average():
    raw = [1.0, -2.0, 0.5, 3.0]
    got = model_intercepts(raw, "pgd")
    for t in range(len(raw)):
        w = np.arange(1, t + 2, dtype=float)
        assert got[t] == pytest.approx(float(w @ raw[:t + 1] / w.sum()), rel=1e-12)
    assert model_intercepts(raw, "fw") == raw


def test_refusals(capsys):
    A, y = _data(n=50)
    with pytest.raises(InputError, match="step 'pgd'"):
        solve(VerticalData(A, y, BLOCKS), algorithm="dp-bcfw-secure", loss="squared",
              label_party=0, step="pgd", iterations=2)
    with pytest.raises(InputError, match="step must be"):
        solve(VerticalData(A, y, BLOCKS), step="newton", iterations=2, **KW)
    with pytest.raises(SystemExit) as e:
        main(["run", "--data", "synthetic:n=50,d=6,seed=0", "--algorithm", "dp-bcfw-secure",
              "--loss", "logistic", "--step", "sgd", "--label-party", "0"])
    assert e.value.code == 2 and "sgd" in capsys.readouterr().err
