"""Shared helpers for the test suite."""
import functools

import pytest


@functools.lru_cache(maxsize=None)
def _epsilon(accountant: str, event, delta: float) -> float:
    from accounting import get_accountant

    return get_accountant(accountant).epsilon(event, delta)


@pytest.fixture(scope="session")
def eps_of():
    """``eps_of(accountant_name, event, delta)``, memoised for the session.

    Events are frozen dataclasses (hashable).  A PLD evaluation costs 0.05-1.3 s, so tests that
    need the same value (a reference table and an invariant over it) share one evaluation.
    """
    return _epsilon
