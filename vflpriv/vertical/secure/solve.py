"""``solve(..., algorithm="dp-bcfw-secure")``: the run settled once, then its path's solve.

:func:`solve_secure` finds the run's path (``paths.of_config``: least squares, or the logistic
loss's ssp or glm path), lets it refuse what it does not take, settles the run
(:func:`settle`: the checks of the options, the defaults chosen once, the checkpoint) and hands
it to the path (docs/vertical.md "dp-bcfw-secure", docs/sensitivity.md sections 4 and 5).
"""
from __future__ import annotations

from ...errors import InputError
from ..checkpoint import check_every
from . import paths
from . import privacy as SP
from .checkpoints import resume as SC
from .run import SecureRun


def solve_secure(data, cfg, label_party):
    """dp-bcfw-secure on ``data`` (a VerticalData) as ``cfg`` (a VerticalConfig) says, with the
    labels at ``label_party`` as ``cfg.check_data`` resolved it (None: every party).  Returns
    the Solution, or with ``flower.spec_dir`` the written description's info."""
    path, rule = resolve(data, cfg, label_party)
    path.check_options(cfg)         # before settle reads a checkpoint or the radius
    return path.solve(data, settle(data, cfg, cfg.loss_fn, label_party, (path, rule)))


def resolve(data, cfg, label_party):
    """``(path, chosen)``: the run's path, and the ``defaults.Chosen`` of the squared loss's
    path when the public rule chose it from the data's shape (else None)."""
    if cfg.secure_path is not None or cfg.loss_fn.name != "squared":
        return paths.of_config(cfg), None
    from .defaults import Chosen, choose_squared_path

    _check_options(cfg, cfg.loss_fn)            # the bounds the rule reads, checked first
    value, rule = choose_squared_path(cfg, data, label_party)
    path = paths.of("squared", None, value)
    path.check_config(cfg, f"the default squared_path {value!r}")
    return path, Chosen("squared_path", value, rule)


def settle(data, cfg, loss, label_party, resolved=None) -> SecureRun:
    """The run once settled: its options checked, the ones left at None chosen, and on resume
    the checkpoint read and checked against them (in that order, so that bad input is refused
    before any file is read).  ``resolved``: :func:`resolve`'s answer when the caller has it."""
    _check_options(cfg, loss)
    path, rule = resolved or resolve(data, cfg, label_party)
    chosen = _choose(data, cfg, loss, path, rule)
    config = _checkpoint_config(cfg, loss, label_party, chosen, path)
    ck = SC.read_resume(cfg.checkpoint, config, cfg.seed, data, cfg.backend) if (
        config is not None and cfg.resume) else None
    return SecureRun(cfg=cfg, loss=loss, label_party=label_party, checkpoint_config=config,
                     ck=ck, seed=cfg.seed if ck is None else ck["seed"], **chosen)


def _check_options(cfg, loss):
    """Refuse what dp-bcfw-secure does not do, then check the declared bounds (private runs)
    and the row clip."""
    paths.check_loss(loss.name)
    if str(cfg.sampling) != "elementary":
        raise InputError(f"dp-bcfw-secure moves every party every round (sampling 'elementary'), "
                         f"got sampling {cfg.sampling!r}")
    if cfg.sketch != "identity":
        raise InputError(f"dp-bcfw-secure releases no columns, so it takes no sketch; got "
                         f"sketch {cfg.sketch!r}")
    if cfg.calibration != "accountant":
        raise InputError("dp-bcfw-secure is calibrated by the accountant (the paper's closed "
                         "forms are for DP-BCFW-AS)")
    if cfg.derivative_clip is not None:
        raise InputError("derivative_clip does not apply to dp-bcfw-secure (its scores use the "
                         "party's own partial residual; use row_clip to lower the sensitivity)")
    if cfg.private:
        # the bounds first: every default and sensitivity below is read from them
        SP.P.check_bound("feature_bound", cfg.feature_bound)
        SP.P.check_bound("label_bound", cfg.label_bound)
        SP.check_accountant(cfg.accountant)
    if cfg.row_clip is not None:
        SP.check_row_clip(cfg.row_clip)


def _choose(data, cfg, loss, path, rule=None) -> dict:
    """rnm, split, the feature cap F and the row clips, each ``cfg``'s or chosen by the stated
    rules of ``defaults.choose`` from public quantities (docs/vertical.md, "Defaults of
    dp-bcfw-secure"), and the list of the choices made (``rule``: the squared loss's path
    when the rule chose it, listed first)."""
    from .defaults import choose, describe

    values, chosen = choose(loss=loss.name, private=cfg.private,
                            feature_bound=cfg.feature_bound,
                            block_sizes=[len(b) for b in data.blocks], rnm=cfg.rnm,
                            split=cfg.split, max_features=cfg.max_features,
                            row_clip=cfg.row_clip, logistic_path=cfg.logistic_path,
                            selects="rnm" in path.reads)
    if rule is not None:
        chosen.insert(0, rule)
    # chosen once, here; a caller that reports the choices before the run starts (the
    # command's progress) hears them from this one call
    say = getattr(cfg.callback, "say_defaults", None)
    if say is not None and chosen:
        say(describe(chosen))
    return dict(rnm=values["rnm"], split=values["split"],
                feature_cap=SP.check_feature_cap(values["max_features"]),
                row_clips=values["row_clips"], defaults=[c.to_dict() for c in chosen])


def _checkpoint_config(cfg, loss, label_party, chosen, path):
    """What the run's checkpoint records and a resume compares, the chosen defaults included
    (None without ``cfg.checkpoint``).  A bad interval is refused before any file is touched.
    Every backend has them: over a link the ServerApp writes the server's checkpoint and each
    party saves its own state (``checkpoints/saves.py``)."""
    if cfg.checkpoint is None:
        return None
    check_every(cfg.checkpoint_every)     # bad input before any file is touched
    return dict(loss=loss.name, eta=float(cfg.eta), iterations=int(cfg.iterations),
                algorithm="dp-bcfw-secure", sampling=str(cfg.sampling), epsilon=cfg.epsilon,
                delta=cfg.delta, rnm=chosen["rnm"], split=chosen["split"],
                feature_bound=cfg.feature_bound, label_bound=cfg.label_bound,
                accountant=cfg.accountant, row_clip=cfg.row_clip,
                max_features=chosen["feature_cap"], row_clips=chosen["row_clips"],
                label_party=label_party, fit_intercept=bool(cfg.fit_intercept),
                logistic_path=cfg.resolved_logistic_path,
                step=path.checkpoint_step(cfg))
