"""FedAvg / FedProx / SCAFFOLD / FedDyn (± FedElasticNet, paper 001) as roles: the server loop as
the server role, every client a party role holding only its own training shard (hosted by
Flower's apps, or in process over a :class:`~vflpriv.runtime.link.LocalLink`).

The ServerApp runs the same :func:`~vflpriv.horizontal.loop.round_loop` over the same
``_StrategyRun`` as in process; only the client step goes over the :class:`~.link.Link` (one
batch of messages per round, :func:`~vflpriv.horizontal.loop._remote_loop`).  The server knows
what it knows in process and nothing more: the clients' record counts (public, they weight the
aggregation), the global test set, the public seed (initial model, participation).  Each client
(:class:`StrategyParty`) rebuilds from its data file, the public setup and its pickled state (the
strategy's per-client state: SCAFFOLD's c_k, FedDyn's g_k), and runs
:func:`~vflpriv.horizontal.runtime.client_step`, the function the in-process client runs, with
its own secret key: a seeded run gives the same model bit for bit and the same spend.

Local DP: each client owns a ledger and budget (node config ``ledger``, ``budget-epsilon``,
``budget-delta``, ``accountant``), computes its noise multiplier from the public plan, charges its
round to its own filter before drawing noise, and answers ``refused`` when the charge would
overspend; the server then stops that client for good, as in process.

Bytes: the in-process :class:`~vflpriv.horizontal.metering.Meter` counts the same wire messages,
and the Link's :class:`~.link.FlowerMeter` counts the whole Flower messages carrying them
(including the hello and setup messages).
"""
from __future__ import annotations

import json

import numpy as np

from ..errors import InputError
from ..runtime.roles import PartyRole
from .hosting import (REFUSED, build_net, client_budget, client_key, calibrated_z,  # noqa: F401
                      flower_summary, load_client_data, lost_records, remote_clients,
                      stop_record)

# -- the client --------------------------------------------------------------------------------
def make_strategy(name, settings):
    from .fedavg import FedAvg, FedProx
    from .feddyn import FedDyn
    from .scaffold import Scaffold

    cls = {"fedavg": FedAvg, "fedprox": FedProx, "scaffold": Scaffold, "feddyn": FedDyn}[name]
    return cls(**settings)


class StrategyParty(PartyRole):
    """Client k of a FedAvg / FedProx / SCAFFOLD / FedDyn run (see module docstring)."""

    def __init__(self, cfg, setup):
        import torch

        from .local import FlatModel, LocalConfig

        self.k = k = int(cfg["party"])
        self.cfg, self.setup = cfg, setup
        d = load_client_data(cfg["data"])
        self.X, self.y = torch.from_numpy(d["X"]), torch.from_numpy(d["y"])
        if int(self.y.shape[0]) != setup["sizes"][k]:
            raise InputError(f"client {k} holds {int(self.y.shape[0])} records, the run expects "
                             f"{setup['sizes'][k]}")
        torch.set_num_threads(int(setup["threads"]))
        self.model = FlatModel(build_net(setup["model"]))
        self.local = LocalConfig(**setup["local"])
        self.strategy = make_strategy(setup["strategy"], setup["settings"])
        zeros = torch.zeros(int(setup["dim"]), dtype=torch.float32)
        self.strategy.initialize(zeros, setup["sizes"])
        self.state = self.strategy.init_client(k, zeros)
        self.key = None
        self.budget = client_budget(cfg, setup) if setup["private"] else None

    def handle(self, kind, frame, round):
        from .runtime import client_step

        self.key = client_key(self.cfg, self.key)
        if kind == "setup":
            return "ok", b""
        noise = None
        if self.budget is not None:
            from accounting import BudgetExceeded, PoissonSubsampledGaussian, SelfComposed

            s, m = self.setup, int(self.y.shape[0])
            q, steps = self.local.batch_size / m, self.local.steps(m, True)
            z = calibrated_z(s["epsilon"], s["delta"], q, s["rounds"] * steps, s["accountant"])
            try:                                  # charged before any noise is drawn
                self.budget.charge(SelfComposed(PoissonSubsampledGaussian(z, q), steps),
                                   party=f"client-{self.k}", round=round,
                                   note=f"horizontal round {round}: {steps} DP-SGD steps")
            except BudgetExceeded as exc:
                return REFUSED, str(exc).encode()
            noise = (s["clip"], z)
        up = client_step(self.strategy, self.model, self.local, self.X, self.y, self.state,
                         self.k, round, frame, self.key, noise)
        return "update", up

    def get_state(self):
        return {"state": {n: v.numpy() for n, v in self.state.items()}, "key": self.key}

    def set_state(self, state):
        import torch

        self.state = {n: torch.from_numpy(v) for n, v in state["state"].items()}
        self.key = state["key"]


# -- the server --------------------------------------------------------------------------------
def serve(connect, spec, progress=None) -> dict:
    """The server role of one strategy run described by ``spec`` (:func:`run`); ``connect(K)``
    is the run's link to its K clients."""
    import torch

    from .local import FlatModel, LocalConfig
    from .loop import round_loop
    from .metering import Meter
    from .partition import FederatedData
    from .runtime import _StrategyRun

    link = connect(spec["K"])
    out = {"t": 0, "error": None}
    try:
        torch.set_num_threads(int(spec["setup"]["threads"]))
        link.connect(b"")
        setup = json.dumps(spec["setup"]).encode()
        link.exchange([(k, setup, "setup") for k in range(spec["K"])], 0)
        net = build_net(spec["setup"]["model"])
        torch.nn.utils.vector_to_parameters(torch.from_numpy(spec["theta0"]), net.parameters())
        # the server's view of the clients: their record counts, no records
        shards = [(np.empty((m, 0), np.float32), np.empty(m, np.int64))
                  for m in spec["setup"]["sizes"]]
        data = FederatedData(shards, spec["X_test"], spec["y_test"], 0, None)
        st = spec["setup"]
        algo = _StrategyRun(make_strategy(st["strategy"], st["settings"]), data,
                            FlatModel(net), participation=spec["participation"],
                            local=LocalConfig(**st["local"]), sampler=spec["sampler"],
                            public=spec["public"], client_key=None, dp=None, clip=st["clip"])
        meter = Meter()

        def prog(t):
            out["t"] = t + 1
            if progress is not None:
                progress(t + 1)
        lost = []
        stopped = round_loop(algo, spec["rounds"], meter=meter, progress=prog, lost=lost,
                             clients=remote_clients(
                                 link, lambda k: "train",
                                 tolerate=spec.get("on_client_loss") == "continue"))
        out.update(theta=algo.theta.numpy(), history=algo.history,
                   participants=algo.participants, stopped=stopped, meter=meter,
                   lost_clients=lost_records(lost, link))
    except Exception as exc:
        out["error"] = stop_record(exc, link, out["t"])
    out["flower"] = flower_summary(link, spec["K"])
    return out


