"""The systems ``vflpriv bench peers`` compares, each fitted on the same training rows of a table
(:mod:`.tables`) and scored on the same held-out rows.  Every fit returns a linear model (x, b):
the margins of a held-out row a are a^T x + b, scored by
``vflpriv.vertical.metrics.classification_metrics`` (AUC, log-loss, accuracy, majority share).

Non-private references
* ``sklearn``: ``LogisticRegressionCV(l1_ratios=(1.0,), solver="liblinear",
  scoring="neg_log_loss", cv=3)``: the l1 path over scikit-learn's default grid of 10 C values,
  chosen by 3-fold cross-validated log-loss, refitted on all training rows.  liblinear, because
  saga did not converge in 1000 epochs on flights and caravan and took 2-4 x longer (probed
  once, seed 0; test AUC within 0.003 of liblinear's); liblinear penalizes the intercept like a
  coefficient (``intercept_scaling=1``), which moves no AUC.
* ``fw``: vflpriv's centralized Frank-Wolfe, ``vflpriv.vertical.solve(algorithm="fw")`` with its
  defaults (the intercept on; the line-search step and ``eta="auto"``, which for fw is 3-fold
  cross-validation over the public rule's radius times 2^-2..2^4, widened while its end wins,
  ``vflpriv.optim.eta_cv``; until 2026-11-26 it was the 2 / (t + 2) step at the rule's
  radius), the declared bound B_a given.

Central DP peers (one curator holds every column)
* ``diffprivlib``: ``diffprivlib.models.LogisticRegression`` (objective perturbation with the
  vector mechanism, Chaudhuri-Monteleoni-Sarwate 2011; pure epsilon-DP; L2-regularized with
  diffprivlib's default C = 1; intercept on), rows clipped to the public norm
  ``data_norm = sqrt(d) B_a`` (every row of a table in [-B_a, B_a]^d has at most that norm).
  diffprivlib 0.6.6's class cannot be constructed under scikit-learn >= 1.8 (it passes the
  removed ``multi_class=``); the bench then calls the function the class's ``fit`` calls,
  ``diffprivlib.models.logistic_regression._logistic_regression_path``, with the arguments
  ``fit`` passes (rows clipped by diffprivlib's ``clip_to_norm``, ``Cs=[C]``, one binary
  problem), so the mechanism and its noise are diffprivlib's own; the row says ``via``.
  The epsilon spent is what diffprivlib's ``BudgetAccountant`` records for the fit.
* ``opacus``: DP-SGD (Abadi et al. 2016) on a linear logistic model (``torch.nn.Linear(d, 1)``,
  zero start, ``BCEWithLogitsLoss``), (epsilon, delta)-DP.  Its hyperparameters are fixed by one
  rule, stated here before any table was run and not tuned per table:
  Poisson sampling with rate q = 1 / (number of batches of ceil(n_train / 50) rows), about 1/50
  (opacus' rate for a loader of that batch size), 20 epochs (about 1000 steps),
  plain SGD with learning rate 1.0, per-sample gradients clipped to norm 1.0 (``max_grad_norm``;
  the features are already on the public scale [-B_a, B_a]), noise multiplier from opacus'
  ``make_private_with_epsilon`` with its PRV accountant (opacus' default) at the target
  (epsilon, delta); the epsilon spent is ``PrivacyEngine.get_epsilon(delta)`` after training.
  torch runs on one thread (the machine is shared).  torch and opacus are the ``torch`` extra,
  imported only here; without them the rows say ``unavailable``.
* ``opacus-replace``: the same DP-SGD run (same rule, same code) made (epsilon, delta)-DP under
  the neighbouring relation of every vflpriv release, replace-one (one person's row replaced;
  docs/vertical.md, "Threat model and problem").  opacus' accountants (and the
  ``opacus`` row) are add/remove: a record added or removed.  Replacing a record is a removal and
  an addition, so an add/remove (epsilon, delta) guarantee is a replace-one guarantee only at a
  larger epsilon (up to about 2 epsilon at small epsilon), and "the same (epsilon, delta)" across
  the two relations is not the same promise.  Here the noise multiplier is calibrated by
  vflpriv's accountant (``accounting.calibrate`` over ``PoissonSubsampledGaussian(...,
  neighboring="replace_one")`` composed over the run's steps, dp-accounting's PLD) and handed to
  opacus' ``make_private(noise_multiplier=...)``; the epsilon spent is that accountant's at the
  steps actually taken, and opacus' own add/remove epsilon of the same run is kept in
  ``settings``.

vflpriv's private algorithms (``dpfw``: centralized DP-FW, Talwar et al. 2015;
``dp-bcfw-secure``: the vertical secure learner with its defaults, label at party 0 (since
the ssp path became the logistic default, its ``logistic_path="ssp"``; before, ``"glm"``: each
row's ``settings["logistic_path"]`` says which, where recorded); ``dp-bcfw-secure-glm``: its
``logistic_path="glm"``, the derivatives under secret sharing every round;
``dp-bcfw-secure-pgd``: the glm path with ``step="pgd"``, projected-gradient steps on the same
noisy scores; ``dp-bcfw-secure-ssp``: ``logistic_path="ssp"`` given, the sufficient statistics of
the loss's expansion released once and the model fitted from them), through ``solve`` with
``loss="logistic"``, the declared bounds (B_a of the table, B_y = 1), ``--iterations`` and the
defaults of each (``eta="auto"``).  Their epsilon spent is ``Solution.privacy["epsilon_spent"]
["best"]`` (the best of the end-of-run accountants); their bytes are the framed totals of every
message that crossed a party boundary (``Solution.uplink_framed``, ``downlink_framed``).

Seeds: the split's seed also seeds each system's noise and sampling (reproducible benchmark runs,
not deployments).
"""
from __future__ import annotations

import math
import time

import numpy as np

SYSTEMS = ("sklearn", "diffprivlib", "opacus", "opacus-replace", "fw", "dpfw",
           "dp-bcfw-secure", "dp-bcfw-secure-glm", "dp-bcfw-secure-pgd", "dp-bcfw-secure-ssp")
PRIVATE = ("diffprivlib", "opacus", "opacus-replace", "dpfw", "dp-bcfw-secure",
           "dp-bcfw-secure-glm", "dp-bcfw-secure-pgd", "dp-bcfw-secure-ssp")
#: the vertical secure learner's variants: (logistic path, step) each one passes to ``solve``
#: (None: the default); ``dp-bcfw-secure`` itself runs with every default
VERTICAL = {"dp-bcfw-secure": (None, None), "dp-bcfw-secure-glm": ("glm", None),
            "dp-bcfw-secure-pgd": ("glm", "pgd"), "dp-bcfw-secure-ssp": ("ssp", None)}
#: the systems that need torch and opacus
TORCH = ("opacus", "opacus-replace")
#: what each system is, for the tables (the neighbouring relation of its guarantee included)
KIND = {"sklearn": "non-private, central", "fw": "non-private, central",
        "diffprivlib": "pure eps-DP, central (replace-one)",
        "opacus": "(eps, delta)-DP add/remove, central",
        "opacus-replace": "(eps, delta)-DP replace-one, central",
        "dpfw": "(eps, delta)-DP replace-one, central",
        "dp-bcfw-secure": "(eps, delta)-DP replace-one, vertical",
        "dp-bcfw-secure-glm": "(eps, delta)-DP replace-one, vertical",
        "dp-bcfw-secure-pgd": "(eps, delta)-DP replace-one, vertical",
        "dp-bcfw-secure-ssp": "(eps, delta)-DP replace-one, vertical"}

#: opacus DP-SGD's rule (module docstring)
OPACUS_BATCHES_PER_EPOCH = 50
OPACUS_EPOCHS = 20
OPACUS_LR = 1.0
OPACUS_MAX_GRAD_NORM = 1.0
OPACUS_ACCOUNTANT = "prv"


def availability(systems=SYSTEMS) -> dict:
    """``{system: None or the reason it cannot run here}`` for ``systems`` (imports checked once,
    up front; torch is imported only when opacus is asked for)."""
    out = {s: None for s in systems}
    if "diffprivlib" in out:
        try:
            import diffprivlib.models.logistic_regression  # noqa: F401
        except Exception as exc:           # any failure to import makes the peer unavailable
            out["diffprivlib"] = f"diffprivlib does not import: {exc}"
    if any(s in out for s in TORCH):
        try:
            import opacus  # noqa: F401
            import torch  # noqa: F401
        except Exception as exc:
            for s in TORCH:
                if s in out:
                    out[s] = f"torch/opacus do not import (pip install 'vflpriv[torch]'): {exc}"
    return out


def versions() -> dict:
    import importlib.metadata as md

    out = {}
    for pkg in ("vflpriv", "scikit-learn", "diffprivlib", "torch", "opacus", "numpy"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = None
    return out


def fit(system, table, train, epsilon, delta, iterations, seed) -> dict:
    """Fit ``system`` on ``table``'s ``train`` rows; returns ``{"x", "b", "seconds",
    "epsilon_spent", "uplink_bytes", "downlink_bytes", "settings"}``."""
    A, y = table.A[train], table.y[train]
    t0 = time.perf_counter()
    if system == "sklearn":
        out = _sklearn(A, y, seed)
    elif system == "diffprivlib":
        out = _diffprivlib(A, y, epsilon, table.feature_bound, seed)
    elif system in TORCH:
        out = _opacus(A, y, epsilon, delta, seed, replace_one=system == "opacus-replace")
    else:
        out = _vflpriv(system, table, A, y, epsilon, delta, iterations, seed)
    out["seconds"] = time.perf_counter() - t0
    return out


def _sklearn(A, y, seed):
    from sklearn.linear_model import LogisticRegressionCV

    m = LogisticRegressionCV(l1_ratios=(1.0,), solver="liblinear", scoring="neg_log_loss", cv=3,
                             use_legacy_attributes=False, random_state=seed)
    m.fit(A, y > 0)
    return {"x": m.coef_.ravel(), "b": float(m.intercept_[0]),
            "settings": {"C": float(np.ravel(m.C_)[0])}}


def _diffprivlib(A, y, epsilon, feature_bound, seed):
    import warnings

    from diffprivlib.accountant import BudgetAccountant
    from diffprivlib.models import LogisticRegression

    d = A.shape[1]
    norm = math.sqrt(d) * feature_bound
    acc = BudgetAccountant()
    labels = (y > 0).astype(float)
    with warnings.catch_warnings():
        # scipy deprecates the iprint= diffprivlib passes to L-BFGS-B; nothing to act on here
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            model = LogisticRegression(epsilon=epsilon, data_norm=norm, random_state=seed,
                                       accountant=acc)
        except TypeError:
            model = None
        if model is not None:
            model.fit(A, labels)
            x, b, via = model.coef_.ravel(), float(model.intercept_[0]), "LogisticRegression"
        else:
            from diffprivlib.models.logistic_regression import _logistic_regression_path
            from diffprivlib.utils import check_random_state
            from diffprivlib.validation import clip_to_norm

            acc.check(epsilon, 0)
            coefs, _, _ = _logistic_regression_path(
                clip_to_norm(np.ascontiguousarray(A, dtype=float), norm), labels,
                epsilon=epsilon, data_norm=norm, pos_class=1.0, Cs=[1.0], fit_intercept=True,
                random_state=check_random_state(seed), check_input=False)
            acc.spend(epsilon, 0)          # what LogisticRegression.fit records after the path
            x, b = coefs[0][:-1], float(coefs[0][-1])
            via = "_logistic_regression_path (the class needs scikit-learn < 1.8)"
    spent, spent_delta = acc.total()
    return {"x": np.asarray(x, float), "b": b, "epsilon_spent": float(spent),
            "delta_spent": float(spent_delta),
            "settings": {"data_norm": norm, "C": 1.0, "via": via}}


def replace_one_noise_multiplier(epsilon, delta, sample_rate, steps):
    """The smallest noise multiplier (to the calibration's tolerance, conservative) whose
    ``steps`` Poisson-subsampled Gaussian steps at ``sample_rate`` are (epsilon, delta)-DP under
    replace-one, by vflpriv's accountant; ``(multiplier, its epsilon)``."""
    from accounting import PoissonSubsampledGaussian, SelfComposed, calibrate

    res = calibrate(lambda s: SelfComposed(PoissonSubsampledGaussian(
        noise_multiplier=s, sample_rate=sample_rate, neighboring="replace_one"), steps),
        epsilon, delta, guess=2.0, accountant="pld", decreasing=True)
    return res.value, res.epsilon


def replace_one_epsilon(noise_multiplier, sample_rate, steps, delta):
    """The replace-one epsilon of ``steps`` DP-SGD steps, by vflpriv's accountant (PLD)."""
    from accounting import PoissonSubsampledGaussian, SelfComposed, get_accountant

    ev = SelfComposed(PoissonSubsampledGaussian(noise_multiplier=noise_multiplier,
                                                sample_rate=sample_rate,
                                                neighboring="replace_one"), steps)
    return float(get_accountant("pld").epsilon(ev, delta))


def _opacus(A, y, epsilon, delta, seed, replace_one=False):
    """DP-SGD on the logistic loss (labels y > 0 as 1)."""
    import torch

    return opacus_linear(A, y > 0, epsilon, delta, seed, replace_one,
                         torch.nn.BCEWithLogitsLoss(), OPACUS_LR)


def opacus_linear(A, targets, epsilon, delta, seed, replace_one, criterion, lr):
    """DP-SGD (opacus) on a linear model from zero with ``criterion`` on ``targets`` at
    learning rate ``lr``, the bench's batches, epochs and clip: the classification bench's and
    the regression bench's (``peers_regression``) one loop.  ``replace_one``: calibrated and
    accounted under replace-one by vflpriv's accountant (opacus' add/remove epsilon kept)."""
    import warnings

    import torch
    from opacus import PrivacyEngine
    from torch.utils.data import DataLoader, TensorDataset

    torch.set_num_threads(1)
    torch.manual_seed(seed)
    n, d = A.shape
    X = torch.tensor(A, dtype=torch.float32)
    Y = torch.tensor(targets, dtype=torch.float32)
    loader = DataLoader(TensorDataset(X, Y), batch_size=math.ceil(n / OPACUS_BATCHES_PER_EPOCH))
    model = torch.nn.Linear(d, 1)
    torch.nn.init.zeros_(model.weight)
    torch.nn.init.zeros_(model.bias)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    with warnings.catch_warnings():
        # opacus warns that secure_mode is off: this is a seeded benchmark, said in the docs
        warnings.simplefilter("ignore", UserWarning)
        engine = PrivacyEngine(accountant=OPACUS_ACCOUNTANT)
        if replace_one:
            # opacus' rate for this loader (1 / its number of batches), the same steps
            q, steps = 1.0 / len(loader), OPACUS_EPOCHS * len(loader)
            sigma, _ = replace_one_noise_multiplier(epsilon, delta, q, steps)
            model, opt, loader = engine.make_private(
                module=model, optimizer=opt, data_loader=loader, noise_multiplier=sigma,
                max_grad_norm=OPACUS_MAX_GRAD_NORM)
        else:
            model, opt, loader = engine.make_private_with_epsilon(
                module=model, optimizer=opt, data_loader=loader, target_epsilon=epsilon,
                target_delta=delta, epochs=OPACUS_EPOCHS, max_grad_norm=OPACUS_MAX_GRAD_NORM)
        taken = 0
        for _ in range(OPACUS_EPOCHS):
            for xb, yb in loader:
                taken += 1                # an empty batch is still a step of the mechanism
                if len(xb) == 0:          # Poisson sampling can draw an empty batch
                    continue
                opt.zero_grad()
                criterion(model(xb).squeeze(-1), yb).backward()
                opt.step()
        add_remove = float(engine.get_epsilon(delta))
    lin = model._module if hasattr(model, "_module") else model
    settings = {"noise_multiplier": float(opt.noise_multiplier),
                "sample_rate": float(loader.sample_rate), "epochs": OPACUS_EPOCHS,
                "lr": lr, "max_grad_norm": OPACUS_MAX_GRAD_NORM,
                "neighboring": "replace_one" if replace_one else "add_remove"}
    if replace_one:
        spent = replace_one_epsilon(float(opt.noise_multiplier), float(loader.sample_rate),
                                    taken, delta)
        settings.update(accountant="vflpriv accounting (pld), replace-one", steps=taken,
                        opacus_add_remove_epsilon=add_remove)
    else:
        spent = add_remove
        settings["accountant"] = OPACUS_ACCOUNTANT
    return {"x": lin.weight.detach().double().numpy().ravel(),
            "b": float(lin.bias.detach().double().numpy()[0]), "epsilon_spent": float(spent),
            "settings": settings}


def _vflpriv(system, table, A, y, epsilon, delta, iterations, seed):
    from ..data import VerticalData
    from ..vertical import solve

    data = VerticalData.from_arrays(A, y, partition=table.blocks)
    kw = {}
    if system in PRIVATE:
        kw = {"epsilon": epsilon, "delta": delta, "label_bound": 1.0}
    if system in VERTICAL:
        path, step = VERTICAL[system]
        system, kw["label_party"] = "dp-bcfw-secure", 0
        kw.update({k: v for k, v in (("logistic_path", path), ("step", step)) if v})
    sol = solve(data, algorithm=system, loss="logistic", iterations=iterations,
                feature_bound=table.feature_bound, seed=seed, **kw)
    out = {"x": np.asarray(sol.x, float), "b": sol.intercept,
           "settings": {"eta": sol.eta, "eta_rule": sol.eta_rule, "iterations": iterations}}
    if "path" in sol.extra:          # the logistic path the run took (given or the default)
        out["settings"]["logistic_path"] = sol.extra["path"]
    if sol.privacy is not None:
        out["epsilon_spent"] = float(sol.privacy["epsilon_spent"]["best"])
    if sol.uplink_framed is not None:
        out["uplink_bytes"] = int(sum(sol.uplink_framed))
        out["downlink_bytes"] = int(sum(sol.downlink_framed))
    return out
