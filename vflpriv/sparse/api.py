"""One call for a run: ``fit(data, algorithm, ...)`` builds the shards, the strategy and the privacy
plan, validates every option (naming it) before any work, and runs the round loop.

>>> from vflpriv.sparse.api import fit
>>> res = fit("synthetic-003:alpha=0.5,e=1.1,sparsity=10,seed=0", "fedgradmp", clients=30,
...           rounds=6, local_steps=3, tau=10, batch_size=40, seed=0)
>>> res.relative_error[-1] < 1e-8
True
"""
from __future__ import annotations

import numpy as np

from accounting.ledger import ends_reservations

from ..errors import InputError
from .algorithms import make_strategy
from .config import OPTIONS, SparseConfig
from .data import FederatedData, apply_dictionary, load_federated, make_dictionary
from .losses import get_loss
from .runtime import BatchSchedule, Participation, run
from .shards import make_shards


@ends_reservations      # a run's unused reservation is released when it ends (docs/ledger.md)
def fit(data, algorithm=None, config: SparseConfig | None = None, **options):
    """Run ``algorithm`` on ``data`` (a --data spec or a :class:`FederatedData`).

    ``config`` is a :class:`~vflpriv.sparse.config.SparseConfig`; without one, ``algorithm`` and
    the keyword ``options`` build it (``fit(data, "fedht", rounds=10, ...)``), which checks every
    option before any data are read.  Returns a :class:`~vflpriv.sparse.runtime.SparseResult`.
    ``epsilon`` finite makes the run private at level ``privacy`` (record | client); see
    :mod:`vflpriv.sparse.privacy`.
    ``backend``: ``inprocess`` (default), ``flower-sim`` or ``flower`` (:mod:`vflpriv.runtime.backends`;
    ``flower``: a :class:`~vflpriv.runtime.backends.FlowerOptions`; with ``flower.spec_dir`` set nothing
    runs: the run's description for separate machines is written there and a dict naming the
    files is returned, :mod:`vflpriv.flower.spec`).  A seeded run ends at the same model
    with the same spend on every backend; the Flower backends add ``res.flower`` (Flower message
    bytes beside the in-process count) and always meter (the messages are the wire bytes).
    """
    cfg = _config(algorithm, config, options)
    fd = _load(data, cfg)
    lossf = get_loss(cfg.loss, cfg.l2)
    parts, D, d_in = _prepare(fd, cfg, lossf)
    d = parts[0][0].shape[1]
    tau = cfg.tau
    if tau is None:
        tau = len(fd.support_true) if fd.support_true is not None else min(10, d)
    if tau > d:
        raise InputError(f"--tau must be at most the dimension d={d}, got {tau}")
    part = Participation.parse(cfg.participation, len(parts))
    shards = make_shards(parts, lossf, cfg.layout)
    strategy = make_strategy(cfg.algorithm, tau, cfg.local_steps, tol=cfg.tol, radius=cfg.radius,
                             server_lr=cfg.server_lr)
    batch = BatchSchedule(cfg.batch_size, cfg.batch_growth)
    if cfg.backend != "inprocess":
        from .config import RemoteConfig
        from .remote import run as run_flower

        res = run_flower(parts, shards, strategy, RemoteConfig.of(cfg, part, batch),
                         x_true=fd.x_true, support_true=fd.support_true, dictionary=D)
        if getattr(cfg.flower, "spec_dir", None):       # a run description was written, no run
            return res
        res.settings["backend"] = cfg.backend
        return _settings(res, fd, parts, d_in, cfg, cfg.private)
    plan = None
    if cfg.private:
        from .privacy import PrivacyPlan

        plan = PrivacyPlan(cfg.privacy, cfg.epsilon, cfg.delta, cfg.clip, rounds=cfg.rounds,
                           local_steps=cfg.local_steps, participation=part,
                           counts=shards.counts, batch_size=cfg.batch_size, ledger=cfg.ledger,
                           accountant=cfg.accountant)
        plan.check_plan()         # the whole plan fits (and is reserved) before any round
    res = run(strategy, shards, rounds=cfg.rounds, participation=part, batch=batch, lr=cfg.lr,
              weights=cfg.weights, seed=cfg.seed, x_true=fd.x_true, support_true=fd.support_true,
              dictionary=D, privacy=plan, callback=cfg.callback, metering=cfg.metering)
    res.settings["backend"] = "inprocess"
    return _settings(res, fd, parts, d_in, cfg, plan is not None)


def _config(algorithm, config, options) -> SparseConfig:
    """The run's config: ``config`` as given, or built from ``algorithm`` and the options."""
    if config is None:
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise TypeError(f"fit() got unexpected keyword argument(s) {', '.join(unknown)}")
        return SparseConfig(algorithm, **options)
    if algorithm is not None or options:
        raise TypeError("fit() takes config= or the algorithm and keyword options, not both; "
                        "use dataclasses.replace(config, ...)")
    if not isinstance(config, SparseConfig):
        raise TypeError(f"config must be a SparseConfig, got {type(config).__name__}")
    return config


def _load(data, cfg) -> FederatedData:
    """The federated data: a --data spec read (``cfg.clients`` clients, default 100), or as given;
    a classification loss needs class labels."""
    if isinstance(data, str):
        fd = load_federated(data, cfg.clients or 100, label=cfg.label,
                            seed=0 if cfg.seed is None else cfg.seed)
    elif isinstance(data, FederatedData):
        fd = data
    else:
        raise InputError(f"data must be a --data spec or FederatedData, got {type(data).__name__}")
    loss = cfg.loss
    if loss in ("softmax", "logistic") and str(fd.description.get("kind", "")).startswith(
            "synthetic") and not (loss == "logistic" and fd.description.get("logistic")):
        raise InputError(f"--loss {loss} needs class labels; {fd.description['kind']} data have "
                         "real-valued labels (use a labelled file or sklearn:digits)")
    return fd


def _prepare(fd, cfg, lossf):
    """``(parts, dictionary, d_in)``: the clients' rows with one label mapping for the whole
    federation (a client may hold one class only; ``lossf`` learns the classes), in the seeded
    dictionary's coordinates."""
    try:
        ys = lossf.labels(np.concatenate([np.asarray(y, dtype=float) for _, y in fd.parts]))
    except ValueError as exc:
        raise InputError(f"--loss {cfg.loss}: {exc}") from None
    cuts = np.cumsum([Z.shape[0] for Z, _ in fd.parts])[:-1]
    parts = [(Z, yi) for (Z, _), yi in zip(fd.parts, np.split(ys, cuts))]
    D = make_dictionary(cfg.dictionary, fd.d, seed=0 if cfg.seed is None else cfg.seed)
    return apply_dictionary(parts, D), D, fd.d


def _settings(res, fd, parts, d_in, cfg, private):
    res.settings.update({"data": fd.description, "clients": len(parts), "d": d_in,
                         "loss": cfg.loss, "l2": cfg.l2, "dictionary": cfg.dictionary,
                         "epsilon": None if not cfg.private else cfg.epsilon,
                         "delta": cfg.delta, "privacy_level": cfg.privacy if private else None,
                         "deployment": cfg.seed is None})
    return res
