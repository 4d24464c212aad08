"""dp-bcfw-secure's least-squares intercept (issue 30 item 1), and the retired Taylor path of the
logistic loss refused by name.

References: the intercept's first-order condition b = mean(y - A x) at the run's own x (exact
without noise); the joint optimum over (x, b) by SLSQP (a trusted solver); the closed forms of
the sensitivities (docs/sensitivity.md 4.7); the in-process run for the roles over a link and for
a resumed run (bit for bit: the protocol is deterministic given its seed).  The audit entry's statistical test has a stated
false-failure rate of 0.05 per call with a fixed seed (Clopper-Pearson, tests/test_audit_secure.py).
"""
import math

import numpy as np
import pytest
from scipy.optimize import minimize

from accounting import read_ledger
from vflpriv.audit import audit_mechanism, registered
from vflpriv.audit.secure import make_intercept
from vflpriv.cli.main import main
from vflpriv.data import VerticalData
from vflpriv.errors import InputError
from vflpriv.vertical import solve
from vflpriv.vertical.secure import privacy as SP

BLOCKS = [[0, 1, 2], [3, 4, 5], [6, 7, 8]]


def _shifted(n=500, seed=0):
    """Features in [0, 1] (not centred) and labels around 1.5: without an intercept the l1
    balls spend themselves on the offset."""
    rng = np.random.default_rng(seed)
    A = rng.uniform(0, 1, size=(n, 9))
    w = np.array([0.8, 0, -0.6, 0, 0.5, 0, 0, -0.4, 0])
    y = A @ w + 1.5 + 0.1 * rng.normal(size=n)
    return A, y


def _reference(A, y, eta):
    """min over (x, b) of ||A x + b - y||^2 / 2n, ||x_k||_1 <= eta per block, by SLSQP."""
    n, d = A.shape

    def f(v):
        r = A @ (v[:d] - v[d:2 * d]) + v[-1] - y
        return 0.5 * float(r @ r) / n

    cons = [{"type": "ineq", "fun": (lambda v, blk=blk: eta - v[blk].sum()
                                     - v[[d + j for j in blk]].sum())} for blk in BLOCKS]
    res = minimize(f, np.zeros(2 * d + 1), method="SLSQP", constraints=cons,
                   bounds=[(0, None)] * (2 * d) + [(None, None)],
                   options={"ftol": 1e-14, "maxiter": 1000})
    assert res.success
    return res.fun


def test_nonprivate_intercept_is_the_profile_minimizer_and_reaches_the_joint_optimum():
    A, y = _shifted()
    data = VerticalData(A, y, BLOCKS)
    sol = solve(data, algorithm="dp-bcfw-secure", eta=1.0, iterations=1500, seed=0,
                label_party=0, fit_intercept=True)
    # b at the final x is mean(y - A x) (to the fixed point of the column sums)
    assert sol.intercept == pytest.approx(float(np.mean(y - A @ sol.x)), abs=1e-7)
    f_star = _reference(A, y, 1.0)
    assert sol.objective[-1] - f_star < 2e-3          # Frank-Wolfe on the profile: O(1/T)
    assert sol.objective[-1] >= f_star - 1e-9
    # without the intercept the same balls cannot come close
    sol0 = solve(data, algorithm="dp-bcfw-secure", eta=1.0, iterations=1500, seed=0,
                 label_party=0, fit_intercept=False)
    assert sol0.objective[-1] > f_star + 0.05


def test_private_run_charges_the_release_once_with_the_closed_form_sensitivity(tmp_path):
    A, y = _shifted(n=400)
    data = VerticalData(A, y, BLOCKS)
    led = tmp_path / "l.jsonl"
    Ba, By, eta = 1.0, 3.0, 1.0
    sol = solve(data, algorithm="dp-bcfw-secure", eta=eta, iterations=20, seed=1, label_party=0,
                squared_path="fw", fit_intercept=True, epsilon=2.0, delta=1e-5, feature_bound=Ba, label_bound=By,
                ledger=str(led))
    clips = sol.extra["row_clips"]
    recs = [r for r in read_ledger(led).records if r.note == "secure: intercept sums"]
    assert len(recs) == 1 and recs[0].round == 0
    assert recs[0].event.sensitivity == pytest.approx(
        2 * math.sqrt(By ** 2 + sum(c * c for c in clips)), rel=1e-12)
    cal = sol.privacy["calibration"]
    # the selection's residual bound B_a eta + B_y + B_b with B_b = B_y
    assert cal["sens_index"] == pytest.approx(2 * Ba * (Ba * eta + 2 * By) / 400, rel=1e-12)
    assert cal["intercept_feature_rounds"] >= 1
    assert sol.privacy["epsilon_spent"]["best"] <= 2.0
    assert abs(sol.intercept) <= By                    # the public range
    # each party's own ledger charged it too, before it drew its noise
    for pl in sol.extra["party_ledgers"]:
        assert [r.note for r in pl.records].count("secure: intercept sums") == 1


def test_a_party_refuses_to_release_its_sums_without_its_own_charge():
    from accounting import BudgetFilter
    from vflpriv.vertical.privacy import MemoryLedger
    from vflpriv.vertical.secure.squares.party import SecureParty

    p = SecureParty(0, np.ones((5, 2)), np.ones(5), 1.0, frac=20, private=True,
                    feature_bound=1.0, label_bound=1.0, row_clip=1.0, noise="gumbel",
                    index_scale=1.0, sigma=1.0, noise_seed=0)
    p.budget = BudgetFilter(MemoryLedger(budget={"epsilon": 1.0, "delta": 1e-5}), 1.0, 1e-5)
    with pytest.raises(InputError, match="column sums"):
        p.noisy_sums(True)


def test_roles_over_a_link_equal_the_in_process_run(tmp_path):
    A, y = _shifted(n=120)
    data = VerticalData(A, y, BLOCKS)
    kw = dict(algorithm="dp-bcfw-secure", eta=1.0, iterations=5, seed=4, label_party=1,
              fit_intercept=True, epsilon=4.0, delta=1e-5, feature_bound=1.0, label_bound=3.0,
              max_features=2)
    ref = solve(data, ledger=str(tmp_path / "a.ledger"), **kw)
    sol = solve(data, ledger=str(tmp_path / "b.ledger"), backend="local", **kw)
    assert np.array_equal(ref.x, sol.x)
    assert ref.intercept == sol.intercept
    assert ref.objective == sol.objective
    assert ref.uplink_framed == sol.uplink_framed and ref.downlink == sol.downlink
    assert ref.privacy["epsilon_spent"] == sol.privacy["epsilon_spent"]


def test_a_resumed_run_equals_an_uninterrupted_one(tmp_path):
    A, y = _shifted(n=200)
    data = VerticalData(A, y, BLOCKS)
    kw = dict(algorithm="dp-bcfw-secure", eta=1.0, iterations=10, seed=5, label_party=0,
              squared_path="fw", fit_intercept=True, epsilon=2.0, delta=1e-5, feature_bound=1.0, label_bound=3.0)
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
    assert np.array_equal(sol.x, ref.x) and sol.intercept == ref.intercept
    assert sol.objective == ref.objective
    key = lambda r: (r.party, r.round, r.note, r.event)  # noqa: E731
    assert [key(r) for r in read_ledger(led).records] == \
        [key(r) for r in read_ledger(tmp_path / "ref.jsonl").records]


def test_intercept_audit_entry_holds_and_catches_a_quarter_of_the_noise():
    assert "dp_bcfw_secure_intercept" in registered()
    m = make_intercept()
    assert m.event.sensitivity == pytest.approx(2 * math.sqrt(3.0))   # B_y = C_0 = C_1 = 1
    assert audit_mechanism(m, samples=20_000, seed=3)["ok"]
    bad = audit_mechanism(make_intercept(noise_factor=0.25), samples=20_000, seed=2)
    assert not bad["ok"] and bad["lower_bound"] > bad["claimed_epsilon"]


# -- the Taylor path ------------------------------------------------------------------------

def _classification(n=600, seed=0):
    rng = np.random.default_rng(seed)
    A = rng.uniform(0, 1, size=(n, 9))
    w = np.array([2.0, 0, -1.5, 0, 1.0, 0, 0, -1.0, 0])
    p = 1 / (1 + np.exp(-(A @ w - 1.5)))
    return A, np.where(rng.uniform(size=n) < p, 1.0, -1.0)


def test_cli_names_a_bad_logistic_path_with_exit_2(capsys):
    with pytest.raises(SystemExit) as e:
        main(["run", "--data", "synthetic:n=50,d=6,seed=0", "--algorithm", "dp-bcfw-secure",
              "--loss", "logistic", "--logistic-path", "cubic", "--label-party", "0"])
    assert e.value.code == 2 and "cubic" in capsys.readouterr().err
    rc = main(["run", "--data", "synthetic:n=50,d=6,seed=0", "--algorithm", "dp-bcfw-secure",
               "--loss", "squared", "--logistic-path", "glm", "--label-party", "0",
               "--iterations", "2", "--epsilon", "inf"])
    assert rc == 2 and "logistic_path" in capsys.readouterr().err


def test_the_retired_taylor_path_is_refused_by_name(capsys):
    """The taylor path (least squares on 2y) was below ssp on every measured row and is no
    longer a choice: the command refuses it (exit 2, naming it), as do solve() and the
    classifier, before any work."""
    from vflpriv.estimators import VerticalDPLogisticRegression

    with pytest.raises(SystemExit) as e:
        main(["run", "--data", "synthetic:n=50,d=6,seed=0", "--algorithm", "dp-bcfw-secure",
              "--loss", "logistic", "--logistic-path", "taylor", "--label-party", "0"])
    assert e.value.code == 2 and "'taylor'" in capsys.readouterr().err
    A, y = _classification(n=50)
    with pytest.raises(InputError, match="'taylor'"):
        solve(VerticalData(A, y, BLOCKS), algorithm="dp-bcfw-secure", loss="logistic",
              logistic_path="taylor", label_party=0, iterations=2)
    with pytest.raises(InputError, match="'taylor'"):
        VerticalDPLogisticRegression(logistic_path="taylor", parties=2, epsilon=1.0, delta=1e-5,
                                     feature_bound=1.0).fit(A[:, :6], y)


def test_an_accountant_that_cannot_account_the_ring_noise_is_refused_by_name():
    A, y = _shifted(n=60)
    # (pld accounts for it since every ring release states its lattice, docs/sensitivity.md
    # 4.9.1: tests/test_secure_ring_lattice.py)
    with pytest.raises(InputError, match="--accountant optimal"):
        solve(VerticalData(A, y, BLOCKS), algorithm="dp-bcfw-secure", label_party=0,
              iterations=2, epsilon=1.0, delta=1e-5, feature_bound=1.0, label_bound=3.0,
              accountant="optimal")
