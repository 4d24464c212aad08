"""The sparse federated methods, one short module each (see :mod:`.base` for the interface)."""
from .base import Strategy
from .baselines import FedAvg, FedDualAvg, FedMid
from .fedgradmp import FedGradMP
from .fedht import DistributedIHT, FedHT, FedIterHT

ALGORITHMS = ("fedht", "fediterht", "diht", "fedgradmp", "fedgradmp-inexact", "fedmid",
              "feddualavg", "fedavg")


def make_strategy(name, tau, local_steps=1, **kw):
    """The strategy called ``name`` (one of ALGORITHMS)."""
    if name == "fedht":
        return FedHT(tau, local_steps)
    if name == "fediterht":
        return FedIterHT(tau, local_steps)
    if name == "diht":
        return DistributedIHT(tau, local_steps)
    if name in ("fedgradmp", "fedgradmp-inexact"):
        return FedGradMP(tau, local_steps, inexact=name.endswith("inexact"),
                         tol=kw.get("tol"), max_iter=kw.get("max_iter"), radius=kw.get("radius"))
    if name == "fedmid":
        return FedMid(tau, local_steps, server_lr=kw.get("server_lr", 1.0))
    if name == "feddualavg":
        return FedDualAvg(tau, local_steps, server_lr=kw.get("server_lr", 1.0))
    if name == "fedavg":
        return FedAvg(tau, local_steps)
    raise ValueError(f"--algorithm must be one of {', '.join(ALGORITHMS)}, got {name!r}")


__all__ = ["Strategy", "FedHT", "FedIterHT", "DistributedIHT", "FedGradMP", "FedMid",
           "FedDualAvg", "FedAvg", "ALGORITHMS", "make_strategy"]
