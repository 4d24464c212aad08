"""Hosting a horizontal run's roles (FedAvg / FedProx / SCAFFOLD / FedDyn, FedP3) on a remote
backend: the clients' files, models as public descriptions, budgets, the clients' exchange, and
:func:`launch` (shared by :mod:`.remote` and :mod:`.fedp3_remote`; the backend is the caller's
pick, :mod:`vflpriv.runtime.backends`)."""
from __future__ import annotations

import os
import secrets

import numpy as np

from ..errors import InputError
from ..runtime.link import raise_recorded
from ..runtime.roles import own_budget

REFUSED = "refused"
_CACHE = {}          # (path, mtime) -> arrays: an actor serving many messages reads a file once
_Z = {}              # noise multipliers already calibrated in this process


# -- files, models, budgets (shared with .fedp3_remote) ---------------------------------
def save_client_data(path, **arrays):
    """One client's records as the npz file its node config names."""
    np.savez(path, **{k: np.asarray(v) for k, v in arrays.items()})


def load_client_data(path) -> dict:
    try:
        key = (str(path), os.path.getmtime(path))
        if key not in _CACHE:
            with np.load(path, allow_pickle=False) as z:
                _CACHE[key] = {k: z[k] for k in z.files}
        return _CACHE[key]
    except (OSError, KeyError, ValueError) as exc:
        raise InputError(f"client data file {str(path)!r} cannot be read: {exc}") from None


def describe_model(net) -> dict:
    """The architecture of ``net`` as public JSON a client rebuilds it from (:func:`build_net`);
    the clients never need the weights' initial values (they arrive every round)."""
    from .models import MLP, SmallCNN

    if type(net) is MLP:
        hidden = [getattr(net, n).out_features for n in net.layer_names[:-1]]
        return {"kind": "mlp", "n_inputs": net.fc1.in_features if hidden else
                net.ffc.in_features, "n_classes": net.ffc.out_features, "hidden": hidden,
                "bias": net.ffc.bias is not None}
    if type(net) is SmallCNN:
        return {"kind": "cnn", "in_channels": net.conv1.in_channels,
                "image_size": net.image_shape[1], "n_classes": net.ffc.out_features,
                "channels": [net.conv1.out_channels, net.conv2.out_channels],
                "hidden": [net.fc1.out_features, net.fc2.out_features]}
    raise InputError(f"the Flower backends build the clients' model from a description; "
                     f"{type(net).__name__} has none (use the MLP or SmallCNN models)")


def build_net(spec: dict):
    from .models import MLP, SmallCNN

    if spec["kind"] == "mlp":
        return MLP(spec["n_inputs"], spec["n_classes"], tuple(spec["hidden"]), bias=spec["bias"])
    return SmallCNN(spec["in_channels"], spec["image_size"], spec["n_classes"],
                    tuple(spec["channels"]), tuple(spec["hidden"]))


def client_budget(cfg, setup):
    """Client k's own :class:`accounting.BudgetFilter` (its ledger, its budget: local DP)."""
    return own_budget(cfg, setup, per_party=True, who="client")


def calibrated_z(epsilon, delta, q, total, accountant):
    from .ldp import noise_multiplier

    key = (epsilon, delta, q, total, accountant)
    if key not in _Z:
        _Z[key] = noise_multiplier(epsilon, delta, q, total, accountant)
    return _Z[key]


def client_key(cfg, state_key):
    """The client's secret key: its node config's ``noise-entropy`` (seeded runs: the same key
    as in process) or the one it drew from OS entropy at setup (kept in its own state)."""
    ent = cfg.get("noise-entropy")
    if ent not in (None, ""):
        return int(ent)
    return state_key if state_key is not None else secrets.randbits(128)


def client_spend(ledgers, epsilon_delta, accountant) -> list:
    """Each client's spend, recomputed by the accountant from its own ledger (None: no ledger)."""
    from accounting import BudgetFilter, Ledger

    out = []
    for k, path in enumerate(ledgers):
        if not path or not os.path.exists(path) or os.path.getsize(path) == 0:
            out.append(0.0)
            continue
        f = BudgetFilter(Ledger(path), *epsilon_delta, accountant=accountant, per_party=True)
        out.append(float(f.spent(f"client-{k}")))
    return out


def lost_records(lost, link) -> list:
    """``[{"client", "round", "reason"}]`` of the clients lost under ``--on-client-loss
    continue`` (the JSON's ``lost_clients``; the reason is the Link's)."""
    why = {(int(p), int(r)): reason for p, r, reason in link.lost}
    return [{"client": int(k), "round": int(t), "reason": why.get((int(k), int(t)), "")}
            for k, t in lost]


def stop_record(exc, link, round) -> dict:
    """What stopped a server role's run, as data (:func:`~vflpriv.runtime.link.error_record`);
    losing the last client (nothing left to continue with) is reported as that client lost,
    with the link's reason."""
    from ..runtime.link import PartyLost, error_record
    from .loop import AllClientsLost

    if isinstance(exc, AllClientsLost):
        why = {(int(p), int(r)): w for p, r, w in link.lost}
        exc = PartyLost(exc.client, exc.round,
                        f"{why.get((exc.client, exc.round), 'lost')}; {exc}")
    return error_record(exc, round)


def flower_summary(link, K) -> dict:
    return {"bytes": link.meter.summary(K), "totals": link.meter.totals()}


def remote_clients(link, kind_of, on_reply=None, tolerate=False):
    """The ``clients`` callable of :func:`round_loop`: one batch per round over ``link``;
    ``kind_of(k)`` names the request, ``on_reply(k, frame)`` strips what rides with the update.
    ``tolerate`` (``--on-client-loss continue``): a client that fails answers
    :data:`~vflpriv.horizontal.loop.LOST` (the Link notes why) instead of stopping the run."""
    from .loop import LOST

    def clients(t, asked):
        replies = link.exchange([(k, down, kind_of(k)) for k, down in asked], t, kinds=True,
                                tolerate=tolerate)
        out = []
        for (k, _), reply in zip(asked, replies):
            if reply is None:
                out.append(LOST)
                continue
            frame, kind = reply
            if kind == REFUSED:
                out.append(None)
            else:
                out.append(on_reply(k, frame) if on_reply else frame)
        return out
    return clients


def _settings_of(strategy) -> dict:
    s = dict(strategy.settings())
    if strategy.name == "feddyn":
        return {"lambda2": s["lambda2"], "lambda1": s["lambda1"], "threshold": s["threshold"]}
    return s


def launch(backend, spec, shards, *, private, epsilon, delta, accountant, ledger, seed, flower,
           progress):
    """Write each client's shard to its own file, start the clients on ``backend``, run ``spec``;
    returns ``(server output, flower info, client ledgers)``.  Shared with FedP3.

    With ``flower.spec_dir`` nothing runs: the shards, the clients' node configs and the run
    description are written there for separate machines (``vflpriv flower spec``; each client's
    ledger is ``client<k>.ledger`` beside its node config) and ``(None, what was written,
    ledgers)`` is returned."""
    import shutil
    import tempfile

    from ..runtime.backends import check_backend, require_flwr

    check_backend(backend)
    require_flwr(backend)
    K = len(shards)
    spec_dir = getattr(flower, "spec_dir", None)
    own_dir = not (flower.run_dir or spec_dir)
    run_dir = spec_dir or flower.run_dir or tempfile.mkdtemp(prefix="vflpriv-flower-")
    os.makedirs(run_dir, exist_ok=True)
    ledgers = [None] * K
    budgets = [None] * K
    if private:
        if flower.party_ledgers:
            ledgers = [str(p) for p in flower.party_ledgers]
        elif spec_dir:                    # each on its client's machine, beside its node config
            ledgers = [os.path.join(spec_dir, f"client{k}.ledger") for k in range(K)]
        else:
            # beside the run's ledger; without one, in a directory of their own that outlives
            # the run (as the in-process temporary ledger does)
            base = getattr(ledger, "path", ledger) or os.path.join(
                tempfile.mkdtemp(prefix="vflpriv-client-ledgers-"), "ledger")
            ledgers = [f"{base}.client{k}" for k in range(K)]
        if len(ledgers) != K:
            raise InputError(f"party_ledgers names {len(ledgers)} files for {K} clients")
        pb = flower.party_budget or (epsilon, delta)
        budgets = list(pb) if isinstance(pb[0], (tuple, list)) else [tuple(pb)] * K
        if len(budgets) != K:
            raise InputError(f"party_budget gives {len(budgets)} budgets for {K} clients")
    cfgs = []
    try:
        for k, arrays in enumerate(shards):
            path = os.path.join(run_dir, f"client{k}.npz")
            save_client_data(path, **arrays)
            cfg = {"party": k, "data": path}
            if private:
                cfg.update({"ledger": ledgers[k], "budget-epsilon": float(budgets[k][0]),
                            "budget-delta": float(budgets[k][1]), "accountant": accountant})
            if seed is not None:          # seeded runs only: the in-process client key
                cfg["noise-entropy"] = str(int(seed))
            cfgs.append(cfg)
        if spec_dir:
            from ..runtime.backends import describe

            return None, describe(run_dir, spec, cfgs), ledgers
        from ..runtime.backends import launch

        out = launch(backend, spec, cfgs, run_dir, quiet=flower.quiet,
                     progress=progress and (lambda t: progress(t - 1)))
        info = {"backend": backend, **out["flower"], "error": out["error"],
                "rounds_completed": out["t"], "client_ledgers": ledgers if private else None}
        if private:
            info["epsilon_spent"] = client_spend(ledgers, (epsilon, delta), accountant)
    finally:
        if own_dir:
            shutil.rmtree(run_dir, ignore_errors=True)
    return out, info, ledgers


def raise_error(out, info, backend):
    raise_recorded(out["error"] or {"kind": "RuntimeError", "round": out["t"], "party": None,
                                    "reason": "no result",
                                    "message": "the run ended without a result"}, info, backend)
