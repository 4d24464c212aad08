"""The horizontal round loop, written once (torch-free: it moves bytes, the algorithm computes).

Every horizontal method runs through :func:`round_loop`: the FedElasticNet family through
:func:`vflpriv.horizontal.runtime.run` (which wraps a :class:`~vflpriv.horizontal.strategy.Strategy`),
FedP3 through :class:`vflpriv.horizontal.fedp3.FedP3`.  Round t:

1. ``algo.sample(t)`` -- the participants, in order;
2. for each participant k not stopped: with a budget, ``algo.privacy_event(k, t)`` is charged to k's
   account first (before any noise of the round is drawn); a refused charge stops k for good.
   Then ``down = algo.downlink(k, t)`` (the serialized server message), ``up = algo.client_update(k,
   t, down)`` (the client's side: decode, train, serialize), ``algo.receive(k, t, down, up)`` (the
   server decodes; returns the transmitted values for metering and the payload to aggregate); the
   meter counts both messages;
3. ``algo.aggregate(t, replies)``, the meter closes the round, ``algo.evaluate(t)``.

The algorithm object is the only thing that knows torch, models or the wire format.

Remote clients (the Flower backends, :mod:`vflpriv.horizontal.remote`): ``clients(t, [(k, down),
...])`` returns the clients' replies in order, all of the round's participants at once (one batch of
messages per round).  Each client then charges its round to its own budget before drawing noise
and answers ``None`` when its budget refuses; it is stopped for good, as in process.  The only
difference from the in-process order is that the server builds a refusing client's downlink before
it learns of the refusal (it is not metered; FedP3's OPR2 draws its layer set for it).
"""
from __future__ import annotations


class AllClientsLost(RuntimeError):
    """The last client of the federation was lost: nothing is left to continue with."""

    def __init__(self, client, round):
        self.client, self.round = client, round
        super().__init__(f"client {client} lost at round {round} was the last client left")


#: a remote client's reply slot when the client was lost (``--on-client-loss continue``)
LOST = "lost"


def round_loop(algo, rounds: int, *, meter, budget=None, progress=None, clients=None,
               lost=None) -> list:
    """Run ``rounds`` rounds of ``algo``; returns the round at which each client was stopped by
    its budget (None: never).  ``clients``: None (in process) or the remote clients' exchange
    (module docstring); the budgets are then the clients' own and ``budget`` must be None.

    A remote client whose slot comes back :data:`LOST` (its SuperNode gone, an error, no reply:
    Flower under ``--on-client-loss continue``) is out for good, like a client its budget
    stopped: the round aggregates the replies that came (the strategy's weights over them) and
    later rounds skip it.  ``lost``: a list that gets ``(client, round)`` for each."""
    stopped = [None] * algo.n_clients
    gone = set()
    for t in range(rounds):
        active = [k for k in map(int, algo.sample(t)) if stopped[k] is None and k not in gone]
        exchanged = (_in_process(algo, t, active, budget) if clients is None
                     else _remote(algo, t, active, clients))
        replies = []
        for k, down, up in exchanged:
            if up is LOST:
                gone.add(k)
                if len(gone) == algo.n_clients:
                    raise AllClientsLost(k, t)
                if hasattr(algo, "drop_client"):
                    algo.drop_client(k)
                if lost is not None:
                    lost.append((k, t))
                continue
            if up is None:                      # its budget refused the round: stopped for good
                stopped[k] = t
                continue
            values, payload = algo.receive(k, t, down, up)
            meter.downlink(down)
            model_form = getattr(algo, "model_form", None)
            meter.uplink(values, up, model_form(values) if model_form else None)
            replies.append((k, payload))
        algo.aggregate(t, replies)
        meter.end_round()
        algo.evaluate(t)
        if progress is not None:
            progress(t)
    return stopped


def _in_process(algo, t, active, budget):
    """One client at a time (a generator: each reply is received before the next client)."""
    for k in active:
        if budget is not None:
            event, note = algo.privacy_event(k, t)
            if not budget.charge_event(event, k, t, note):     # before any noise is drawn
                yield k, None, None
                continue
        down = algo.downlink(k, t)
        yield k, down, algo.client_update(k, t, down)


def _remote(algo, t, active, clients):
    """The round's participants in one batch; each charged its own budget (None: refused)."""
    asked = [(k, algo.downlink(k, t)) for k in active]
    return [(k, down, up) for (k, down), up in zip(asked, clients(t, asked) if asked else [])]
