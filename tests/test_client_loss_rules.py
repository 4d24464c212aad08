"""The rules a run follows when a client is lost (issue 23, part 3), in process and without
Flower: which clients a round samples afterwards, what a client-level private round divides by,
how FedAvg's weights renormalize.  The Flower tests (test_flower_client_loss.py) check the same
loops end to end."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vflpriv.sparse import Participation, make_strategy
from vflpriv.sparse.privacy import PrivacyPlan
from vflpriv.sparse.runtime import ClientsLost, serve


@settings(max_examples=100, deadline=None)
@given(st.integers(2, 30), st.sampled_from(["full", "fixed", "poisson"]), st.integers(0, 2 ** 31),
       st.data())
def test_sampling_after_a_loss(N, kind, seed, data):
    value = None if kind == "full" else (data.draw(st.integers(1, N)) if kind == "fixed"
                                         else data.draw(st.floats(0.05, 1.0)))
    part = Participation(kind, value)
    everyone = np.ones(N, dtype=bool)
    # nobody lost: the very same draws as before the change
    assert np.array_equal(part.sample_remaining(everyone, np.random.default_rng(seed)),
                          part.sample(N, np.random.default_rng(seed)))
    lost = data.draw(st.lists(st.integers(0, N - 1), min_size=1, max_size=N - 1, unique=True))
    remaining = everyone.copy()
    remaining[lost] = False
    S = part.sample_remaining(remaining, np.random.default_rng(seed))
    assert not set(S.tolist()) & set(lost)                  # a lost client is never asked again
    n = int(remaining.sum())
    if kind == "full":
        assert S.tolist() == np.flatnonzero(remaining).tolist()
    elif kind == "fixed":
        assert len(S) == min(value, n) and len(set(S.tolist())) == len(S)
    else:   # Poisson: each remaining client keeps the coin it had in the draw of all N
        full = part.sample(N, np.random.default_rng(seed))
        assert S.tolist() == [i for i in full.tolist() if remaining[i]]
    assert part.public_count(N) == (N if kind == "full" else value if kind == "fixed"
                                    else value * N)


class _Clients:
    """In-process clients where ``lose`` ({client: round}) fail to answer; client i replies
    the broadcast + (i + 1)."""

    def __init__(self, d, lose):
        self.d, self.lose, self.asked = d, dict(lose), []
        self.reasons = {c: "test" for c in self.lose}

    def round(self, t, S, start, frame):
        self.asked.append(S.tolist())
        ok = np.array([self.lose.get(int(i), 10 ** 9) != t for i in S])
        V = start[None, :] + (S[:, None] + 1.0)
        return V, np.full(S.shape[0], 8, dtype=np.int64), ok


def test_client_level_divisor_is_the_public_count_at_the_start_of_the_round():
    N, d = 5, 4
    plan = PrivacyPlan("client", 1e6, 1e-5, 1.0, rounds=3, local_steps=1,
                       participation=Participation("full"), counts=np.full(N, 10))
    seen = []
    noisy = plan.noisy_mean
    plan.noisy_mean = lambda V, ref, ctx: seen.append((ctx.public_count, V.shape[0])) or \
        noisy(V, ref, ctx)
    clients = _Clients(d, {2: 1})
    state, tr = serve(make_strategy("fedavg", 4, 1), clients, N=N, d=d, p=np.full(N, 0.2),
                      rounds=3, participation=Participation("full"), privacy=plan, seed=0)
    # round 1: five asked, four answered, the divisor still 5 (public before anyone answered);
    # round 2: four remaining, divisor 4
    assert seen == [(5.0, 5), (5.0, 4), (4.0, 4)]
    assert clients.asked == [[0, 1, 2, 3, 4]] * 2 + [[0, 1, 3, 4]]
    assert tr.lost == [{"client": 2, "round": 1, "reason": "test"}]
    # the accounting is the planned one: one Gaussian(z, 1) per round, three rounds
    assert len(plan.ledger.records) == 3


def test_weights_renormalize_over_who_answered_and_the_last_loss_stops():
    N, d = 3, 2
    clients = _Clients(d, {0: 0})
    p = np.array([0.5, 0.25, 0.25])
    strat = make_strategy("fedavg", 2, 1)
    seen = []
    agg = strat.aggregate
    strat.aggregate = lambda state, mean: seen.append(mean.copy()) or agg(state, mean)
    serve(strat, clients, N=N, d=d, p=p, rounds=1, participation=Participation("full"), seed=0)
    start = strat.broadcast(strat.init_state(d))
    # clients 1 and 2 answered (+2, +3) with p = 1/4 each: renormalized, 1/2 each: +2.5 (the
    # unrenormalized sum would be +1.25)
    assert np.allclose(seen[0], start + 2.5)
    with pytest.raises(ClientsLost, match="every client was lost by round 1"):
        serve(make_strategy("fedavg", 2, 1), _Clients(d, {0: 0, 1: 1, 2: 1}), N=N, d=d, p=p,
              rounds=3, participation=Participation("full"), seed=0)


def test_fedavg_weights_all_count_the_remaining_clients():
    from vflpriv.horizontal.fedavg import FedAvg

    s = FedAvg(weights="all")
    s.initialize(np.zeros(2), [10, 20, 30])
    one = np.ones(2)
    assert np.allclose(s.aggregate_train(np.zeros(2), [(0, [one])]), one * 10 / 60)
    s.drop_client(2)
    assert np.allclose(s.aggregate_train(np.zeros(2), [(0, [one])]), one * 10 / 30)
