"""FedP3 / LDP-FedP3 (paper 002) as roles: the server's rounds as the server role, every client a
party role holding only its own train and test records (hosted by Flower's apps, or in process
over a :class:`~vflpriv.runtime.link.LocalLink`).

The server role fits a :class:`RemoteFedP3`, the in-process :class:`~vflpriv.horizontal.fedp3.FedP3`
whose clients answer over the run's link: the same round loop, sampling, layer sets,
global pruning and aggregation; the server sees each client's record count (public: it sets the
sampling rate q = b/m and the noise plan) and nothing else of its data.  A client
(:class:`FedP3Party`) rebuilds the model from the public description, decodes the pruned downlink,
trains its layers L_i with the in-process code (``FedP3._train_client``) and its own key, and
sends back its layers, preceded by its personalized test accuracy (8 bytes, float64: the figure
FedP3 reports, a release about its test records that the in-process run also makes).  The layer
set L_i travels as the request's kind ("train fc1,fc2,ffc").  A client not yet trained is scored
with the global model as in process: the server sends it the full model ("eval", metered by
Flower; in process no message is needed).

LDP-FedP3: each client's ledger and budget are its own (node config).  At setup a client checks
its whole plan (every round, as the in-process fit does per client) and refuses the run if it
cannot pay; each round it charges its DP-SGD steps before drawing noise and answers ``refused``
when the charge would overspend (the server stops it, as in process).
"""
from __future__ import annotations

import json
import math
import struct
from functools import partial

import numpy as np

from ..errors import InputError
from ..runtime.roles import PartyRole
from .fedp3 import FedP3
from .hosting import (REFUSED, build_net, client_budget, client_key, flower_summary,
                      load_client_data, lost_records, remote_clients, stop_record)

_ACC = struct.Struct("<d")
_PLANS = {}          # (settings, m) -> the client's plan (calibrated once per process)


class FedP3Party(PartyRole):
    """Client k of a FedP3 run (see module docstring)."""

    def __init__(self, cfg, setup):
        import torch

        from .partition import ClientData

        self.k = k = int(cfg["party"])
        self.cfg, self.setup = cfg, setup
        d = load_client_data(cfg["data"])
        self.client = ClientData(d["X_train"], d["y_train"], d["X_test"], d["y_test"])
        if self.client.m != setup["sizes"][k]:
            raise InputError(f"client {k} holds {self.client.m} training records, the run "
                             f"expects {setup['sizes'][k]}")
        torch.set_num_threads(int(setup["threads"]))
        est = self.est = FedP3(**setup["params"])
        est.net_ = build_net(setup["model"])
        est.layer_names_ = tuple(est.net_.layer_names)
        est.shapes_ = {n: tuple(v.shape) for n, v in est.net_.named_parameters()}
        key = (json.dumps(setup["params"], sort_keys=True), self.client.m)
        if key not in _PLANS:
            _PLANS[key] = est._plan(self.client)
        self.plan = _PLANS[key]
        self.private = math.isfinite(est.epsilon)
        self.budget = client_budget(cfg, setup) if self.private else None
        self.key = None

    def _event(self, steps):
        from accounting import PoissonSubsampledGaussian, SelfComposed

        return SelfComposed(PoissonSubsampledGaussian(self.plan.noise_multiplier, self.plan.q),
                            steps)

    def handle(self, kind, frame, round):
        import torch

        self.key = client_key(self.cfg, self.key)
        est, party = self.est, f"client-{self.k}"
        if kind == "setup":
            if self.budget is not None and est.noise == "calibrate":
                # the whole worst case up front, as the in-process fit checks every client
                self.budget.check_plan(self._event(self.plan.steps * est.rounds), party=party)
            return "ok", b""
        params, _ = est._unpack(frame)
        if kind == "eval":
            return "accuracy", _ACC.pack(est._accuracy(params, self.client.X_test,
                                                       self.client.y_test))
        if not kind.startswith("train "):
            raise InputError(f"unknown request {kind!r}")
        L_i = tuple(kind[len("train "):].split(","))
        if self.budget is not None:
            from accounting import BudgetExceeded

            try:                                 # charged before any noise is drawn
                self.budget.charge(self._event(self.plan.steps), party=party, round=round,
                                   note=f"FedP3 round {round}: {self.plan.steps} DP-SGD steps")
            except BudgetExceeded as exc:
                return REFUSED, str(exc).encode()
        from ..noise import generator as noise_generator

        rng = noise_generator([self.key, round, self.k, 3])     # secret: batches and DP noise
        local, trained = est._train_client(params, L_i, self.client, self.plan, rng, rng)
        acc = est._accuracy(local, self.client.X_test, self.client.y_test)
        return "update", _ACC.pack(acc) + est._uplink(trained, L_i)

    def get_state(self):
        return {"key": self.key}

    def set_state(self, state):
        self.key = state["key"]


class RemoteFedP3(FedP3):
    """The ServerApp's FedP3: the in-process estimator whose clients answer over a Link."""

    def attach(self, link, tolerate=False):
        self._link, self._tolerate = link, bool(tolerate)
        self._remote = remote_clients(link, lambda i: "train " + ",".join(self._L[i]),
                                      self._on_reply, tolerate=self._tolerate)

    def _on_reply(self, i, frame):
        self.client_accuracy_[i] = _ACC.unpack(frame[:_ACC.size])[0]
        self._trained_once[i] = True
        return frame[_ACC.size:]

    def evaluate(self, t):
        todo = [i for i in range(self.n_clients)
                if not self._trained_once[i] and i not in self._gone]
        if todo:          # not trained yet: scored with the global model, on the client
            full = tuple(self.layer_names_)
            reqs = [(i, self._downlink(self._W, full, i, t, full=True), "eval") for i in todo]
            replies = self._link.exchange(reqs, t, kinds=True, tolerate=self._tolerate)
            for (i, _, _), reply in zip(reqs, replies):
                if reply is None:                 # lost while being scored ("continue")
                    self._lost.append((i, t))
                    self.drop_client(i)
                    continue
                self.client_accuracy_[i] = _ACC.unpack(reply[0])[0]
        if len(self._gone) == self.n_clients:
            from .loop import AllClientsLost

            raise AllClientsLost(self._lost[-1][0], t)
        self.accuracy_history_.append(self._mean_accuracy())


def serve(connect, spec, progress=None) -> dict:
    """The ServerApp's work for one FedP3 run described by ``spec`` (:func:`fit`)."""
    from .partition import ClientData

    link = connect(spec["K"])
    out = {"t": 0, "error": None}
    try:
        link.connect(b"")
        setup = json.dumps(spec["setup"]).encode()
        link.exchange([(k, setup, "setup") for k in range(spec["K"])], 0)
        est = RemoteFedP3(model=partial(build_net, spec["setup"]["model"]), seed=spec["seed"],
                          threads=spec["setup"]["threads"], **spec["setup"]["params"])
        est.attach(link, tolerate=spec.get("on_client_loss") == "continue")
        # the server's view of the clients: their record counts, no records
        stubs = [ClientData(np.empty((m, 0), np.float32), np.zeros(m, np.int64), None, None)
                 for m in spec["setup"]["sizes"]]

        def prog(t):
            out["t"] = t + 1
            if progress is not None:
                progress(t + 1)
        est.fit(stubs, spec["n_classes"], None, progress=prog)
        out["fitted"] = {k: v for k, v in vars(est).items()
                         if k.endswith("_") and not k.startswith("_")}
        out["lost_clients"] = lost_records(est._lost, link)
    except Exception as exc:
        out["error"] = stop_record(exc, link, out["t"])
    out["flower"] = flower_summary(link, spec["K"])
    return out
