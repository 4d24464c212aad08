"""One call for a run: ``fit(data, algorithm, ...)`` builds the shards, the strategy and the privacy
plan, validates every option (naming it) before any work, and runs the round loop.

>>> from vflpriv.sparse.api import fit
>>> res = fit("synthetic-003:alpha=0.5,e=1.1,sparsity=10,seed=0", "fedgradmp", clients=30,
...           rounds=6, local_steps=3, tau=10, batch_size=40, seed=0)
>>> res.relative_error[-1] < 1e-8
True
"""
from __future__ import annotations

import math

from accounting.ledger import ends_reservations

from ..errors import InputError
from .algorithms import ALGORITHMS, make_strategy
from .data import FederatedData, apply_dictionary, load_federated, make_dictionary
from .losses import get_loss
from .runtime import BatchSchedule, Participation, run
from .shards import make_shards


def _positive_int(name, v, lo=1):
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise InputError(f"{name} must be an integer >= {lo}, got {v!r}")
    return v


def check_options(algorithm, *, rounds, local_steps, tau, lr, batch_size, batch_growth, epsilon,
                  delta, clip, level, weights, loss):
    """Every option that does not need the data, checked before anything is loaded."""
    if algorithm not in ALGORITHMS:
        raise InputError(f"--algorithm must be one of {', '.join(ALGORITHMS)}, got {algorithm!r}")
    _positive_int("--rounds", rounds)
    _positive_int("--local-steps", local_steps)
    if algorithm == "diht" and local_steps != 1:
        raise InputError(f"--algorithm diht takes one local step per round; --local-steps must "
                         f"be 1, got {local_steps}")
    if tau is not None:
        _positive_int("--tau", tau)
    if lr is not None and not (isinstance(lr, (int, float)) and lr > 0 and math.isfinite(lr)):
        raise InputError(f"--lr must be a positive finite number, got {lr!r}")
    if batch_size is not None:
        _positive_int("--batch-size", batch_size)
    if not (isinstance(batch_growth, (int, float)) and batch_growth >= 1
            and math.isfinite(batch_growth)):
        raise InputError(f"--batch-growth must be a finite number >= 1, got {batch_growth!r}")
    if weights not in ("uniform", "examples"):
        raise InputError(f"--weights must be uniform or examples, got {weights!r}")
    if loss not in ("squared", "logistic", "softmax"):
        raise InputError(f"--loss must be squared, logistic or softmax, got {loss!r}")
    if loss == "softmax" and algorithm in ("fedgradmp", "fedgradmp-inexact"):
        raise InputError(f"--algorithm {algorithm} supports --loss squared or logistic, not "
                         "softmax")
    if not (isinstance(epsilon, (int, float)) and epsilon > 0 and not math.isnan(epsilon)):
        raise InputError(f"--epsilon must be a positive number or inf, got {epsilon!r}")
    if math.isfinite(epsilon):
        if delta is None or not (isinstance(delta, (int, float)) and 0 < delta < 1):
            raise InputError(f"--delta must be in (0, 1) with a finite --epsilon, got {delta!r}")
        if level not in ("record", "client"):
            raise InputError(f"--privacy must be record or client, got {level!r}")
        if not (isinstance(clip, (int, float)) and clip > 0 and math.isfinite(clip)):
            raise InputError(f"--clip must be a positive finite number, got {clip!r}")
        if lr is None and algorithm not in ("fedgradmp", "fedgradmp-inexact"):
            raise InputError("a private run needs --lr: the default step is estimated from the "
                             "data, which a private run may not read")
        if level == "record" and algorithm in ("fedgradmp", "fedgradmp-inexact"):
            raise InputError(f"--algorithm {algorithm} cannot run with --privacy record (its "
                             "subproblem reads the full local data); use --privacy client")
        if level == "client" and weights != "uniform":
            raise InputError("--privacy client needs --weights uniform (examples weights would "
                             "make the sensitivity depend on the clients' sizes)")
        if batch_growth != 1:
            raise InputError(f"--batch-growth must be 1 in a private run (the record sampling "
                             f"rate is fixed by the plan), got {batch_growth!r}")


@ends_reservations      # a run's unused reservation is released when it ends (docs/ledger.md)
def fit(data, algorithm, *, clients=None, rounds=50, local_steps=1, tau=None, lr=None,
        batch_size=None, batch_growth=1.0, participation="full", weights="uniform",
        loss="squared", l2=0.0, epsilon=math.inf, delta=None, privacy="record", clip=1.0,
        accountant="rdp", ledger=None, seed=None, label=None, dictionary="identity",
        radius=None, tol=None, server_lr=1.0, layout="auto", callback=None, metering=True,
        backend="inprocess", flower=None):
    """Run ``algorithm`` on ``data`` (a --data spec or a :class:`FederatedData`).

    Returns a :class:`~vflpriv.sparse.runtime.SparseResult`.  ``epsilon`` finite makes the run
    private at level ``privacy`` (record | client); see :mod:`vflpriv.sparse.privacy`.
    ``backend``: ``inprocess`` (default), ``flower-sim`` or ``flower`` (:mod:`vflpriv.runtime.backends`;
    ``flower``: a :class:`~vflpriv.runtime.backends.FlowerOptions`; with ``flower.spec_dir`` set nothing
    runs: the run's description for separate machines is written there and a dict naming the
    files is returned, :mod:`vflpriv.flower.spec`).  A seeded run ends at the same model
    with the same spend on every backend; the Flower backends add ``res.flower`` (Flower message
    bytes beside the in-process count) and always meter (the messages are the wire bytes).
    """
    from ..runtime.backends import check_backend

    check_backend(backend)
    if backend != "inprocess":
        from ..runtime.backends import require_flwr

        require_flwr(backend)           # before any data is read or budget spent
    check_options(algorithm, rounds=rounds, local_steps=local_steps, tau=tau, lr=lr,
                  batch_size=batch_size, batch_growth=batch_growth, epsilon=epsilon, delta=delta,
                  clip=clip, level=privacy, weights=weights, loss=loss)
    if isinstance(data, str):
        fd = load_federated(data, clients or 100, label=label,
                            seed=0 if seed is None else seed)
    elif isinstance(data, FederatedData):
        fd = data
    else:
        raise InputError(f"data must be a --data spec or FederatedData, got {type(data).__name__}")
    if loss in ("softmax", "logistic") and str(fd.description.get("kind", "")).startswith(
            "synthetic") and not (loss == "logistic" and fd.description.get("logistic")):
        raise InputError(f"--loss {loss} needs class labels; {fd.description['kind']} data have "
                         "real-valued labels (use a labelled file or sklearn:digits)")
    lossf = get_loss(loss, l2)
    try:      # one label mapping for the whole federation (a client may hold one class only)
        import numpy as np

        ys = lossf.labels(np.concatenate([np.asarray(y, dtype=float) for _, y in fd.parts]))
    except ValueError as exc:
        raise InputError(f"--loss {loss}: {exc}") from None
    cuts = np.cumsum([Z.shape[0] for Z, _ in fd.parts])[:-1]
    parts = [(Z, yi) for (Z, _), yi in zip(fd.parts, np.split(ys, cuts))]
    d_in = fd.d
    if loss == "softmax" and dictionary not in (None, "identity"):
        raise InputError("--dictionary needs --loss squared or logistic")
    D = make_dictionary(dictionary, d_in, seed=0 if seed is None else seed)
    parts = apply_dictionary(parts, D)
    d = parts[0][0].shape[1]
    if tau is None:
        tau = len(fd.support_true) if fd.support_true is not None else min(10, d)
    if tau > d:
        raise InputError(f"--tau must be at most the dimension d={d}, got {tau}")

    part = Participation.parse(participation, len(parts))
    shards = make_shards(parts, lossf, layout)
    strategy = make_strategy(algorithm, tau, local_steps, tol=tol, radius=radius,
                             server_lr=server_lr)
    plan = None
    if backend != "inprocess":
        from .remote import run as run_flower

        res = run_flower(backend, parts, shards, strategy, rounds=rounds, participation=part,
                         batch=BatchSchedule(batch_size, batch_growth), lr=lr, weights=weights,
                         seed=seed, loss=loss, l2=l2,
                         privacy=None if not math.isfinite(epsilon) else {
                             "level": privacy, "epsilon": epsilon, "delta": delta, "clip": clip,
                             "accountant": accountant, "ledger": ledger},
                         strategy_kw={"tol": tol, "radius": radius, "server_lr": server_lr},
                         x_true=fd.x_true, support_true=fd.support_true, dictionary=D,
                         callback=callback, options=flower)
        if getattr(flower, "spec_dir", None):       # a run description was written, no run
            return res
        res.settings["backend"] = backend
        return _settings(res, fd, parts, d_in, loss, l2, dictionary, epsilon, delta, privacy,
                         math.isfinite(epsilon), seed)
    if math.isfinite(epsilon):
        from .privacy import PrivacyPlan

        plan = PrivacyPlan(privacy, epsilon, delta, clip, rounds=rounds, local_steps=local_steps,
                           participation=part, counts=shards.counts, batch_size=batch_size,
                           ledger=ledger, accountant=accountant)
        plan.check_plan()         # the whole plan fits (and is reserved) before any round
    res = run(strategy, shards, rounds=rounds, participation=part,
              batch=BatchSchedule(batch_size, batch_growth), lr=lr, weights=weights, seed=seed,
              x_true=fd.x_true, support_true=fd.support_true, dictionary=D, privacy=plan,
              callback=callback, metering=metering)
    res.settings["backend"] = "inprocess"
    return _settings(res, fd, parts, d_in, loss, l2, dictionary, epsilon, delta, privacy,
                     plan is not None, seed)


def _settings(res, fd, parts, d_in, loss, l2, dictionary, epsilon, delta, privacy, private,
              seed):
    res.settings.update({"data": fd.description, "clients": len(parts), "d": d_in,
                         "loss": loss, "l2": l2, "dictionary": dictionary,
                         "epsilon": None if not math.isfinite(epsilon) else epsilon,
                         "delta": delta, "privacy_level": privacy if private else None,
                         "deployment": seed is None})
    return res
