"""The deployment note says which samplers a run's noise came from: the ssp path's products across
parties are exact discrete Gaussians, its parties' own blocks a floating-point Gaussian."""
import numpy as np

from vflpriv.vertical.solution import Solution


def _solution(seed, path=None):
    return Solution(algorithm="dp-bcfw-secure", x=np.zeros(2), objective=[1.0],
                    initial_objective=1.0, iterations=1, seconds=0.0, K=2, n=10, seed=seed,
                    extra={} if path is None else {"path": path})


def test_ssp_note_names_both_samplers():
    """An unseeded run of the ssp path (noise from OS entropy) carries its own note."""
    import warnings

    from vflpriv.data import VerticalData
    from vflpriv.vertical import solve

    rng = np.random.default_rng(0)
    A = rng.uniform(-1, 1, (80, 4))
    y = np.where(A @ [1.0, -1.0, 0.5, 0.0] > 0, 1.0, -1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sol = solve(VerticalData(A, y, [[0, 1], [2, 3]]), algorithm="dp-bcfw-secure",
                    loss="logistic", label_party=0, epsilon=1.0, delta=1e-5,
                    feature_bound=1.0, label_bound=1.0)
    assert sol.extra["path"] == "ssp" and sol.deployment
    note = sol.deployment_note
    assert "exact discrete Gaussian" in note and "floating-point Gaussian" in note


def test_other_paths_keep_the_floating_point_note():
    assert "samplers are floating-point" in _solution(None, "glm").deployment_note
    assert "samplers are floating-point" in _solution(None).deployment_note


def test_a_seeded_run_is_not_for_deployment_whatever_its_path():
    assert _solution(3, "ssp").deployment_note.startswith("not for deployment: seeded run (seed=3)")
