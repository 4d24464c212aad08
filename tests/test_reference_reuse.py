"""A run's certified reference optimum is computed once per problem in a process: asked again
for the same rows, labels, set and loss (``vflpriv demo``'s three runs) it is the last one's
copy, and anything that changes the problem computes it anew (a counting wrapper around the
solver is the reference)."""
import numpy as np

import vflpriv.optim as O
from vflpriv.data import VerticalData
from vflpriv.vertical import solve


def test_the_same_problem_reuses_the_reference_and_a_changed_one_does_not(monkeypatch):
    calls = []
    real = O.reference_optimum

    def counting(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(O, "reference_optimum", counting)
    rng = np.random.default_rng(0)
    A, y = rng.normal(size=(60, 6)), rng.normal(size=60)
    kw = dict(algorithm="fw", eta=1.0, iterations=5, reference=True)
    a = solve(VerticalData(A, y, [[0, 1, 2], [3, 4, 5]]), **kw)
    b = solve(VerticalData(A.copy(), y.copy(), [[0, 1, 2], [3, 4, 5]]), **kw)
    assert len(calls) == 1
    assert b.reference is not a.reference and b.reference.objective == a.reference.objective
    assert np.array_equal(b.reference.x, a.reference.x)
    y2 = y.copy()
    y2[7] += 1e-9                                   # one label moved: another problem
    solve(VerticalData(A, y2, [[0, 1, 2], [3, 4, 5]]), **kw)
    solve(VerticalData(A, y2, [[0, 1, 2], [3, 4, 5]]), **dict(kw, eta=2.0))
    solve(VerticalData(A, y2, [[0, 1], [2, 3, 4, 5]]), **dict(kw, eta=2.0))
    assert len(calls) == 4
    fresh = real(A, y2, "squared", blocks=[[0, 1], [2, 3, 4, 5]], eta=2.0, on_failure="flag")
    again = solve(VerticalData(A, y2, [[0, 1], [2, 3, 4, 5]]), **dict(kw, eta=2.0)).reference
    assert len(calls) == 4 and again.objective == fresh.objective
