"""dp-bcfw-secure's ssp path, run (``logistic_path="ssp"``, ``squared_path="ssp"``): the
sufficient statistics released once, under secret sharing, then the model fitted from them.

The math (scale rule, sensitivity, layout, the fit) is in ``ssp/release.py``; the proof in
docs/sensitivity.md 4.10; the protocol of the cross-blocks in ``ssp/gram.py`` (4.10.2):

1. setup, and the parties' keys: each makes its block mask key and the pair keys of the
   cross-blocks' parts and sends them to its peers end to end (the server deals nothing);
2. the server charges the one release (a ``DiscreteGaussian`` of sensitivity sqrt(2) R^2) to its
   budget filter, then announces it (``NewFeatures([GRAM_RELEASE])``): every party charges the
   same to its own ledger before it draws any noise, and serves its rows, parts and statistics
   only while that charge is open, each once (:class:`GramParty`);
3. every party sends its masked block Z_k = B_k + V_k to the server, in row pieces (each block
   opened once); the server adds Z_k^T Z_l for k < l;
4. every party sends its parts of the cross-blocks it contributes to (its mask corrections and,
   as block k's helper h(k), k's noise sigma / sqrt 2: the exact discrete Gaussian in the ring,
   drawn as the per-column products drew it), each blinded by pair keys that cancel in the
   block's sum; the server adds them: B_k^T B_l + N;
5. every party sends its ``GramPart``: its own noisy triangle and column sums (local), A_L^T y
   and the label sum at the label party;
6. the server assembles the noisy M and fits (post-processing; ``ssp.fit``).

No party receives anything but keys; the server receives masked blocks, the blocks' parts and
the released M.  Threat model: the server colludes with no party (docs/sensitivity.md 4.10.2).
Runs on every backend: in process (the parties as :class:`GramParty` objects here, over
:class:`LocalGram`), and over a runtime link (``backend`` local, flower-sim, flower:
``ssp/roles.py``, the same :func:`release` with each party a role that keeps its own ledger and
gates its releases by it); a seeded run gives the same M, model and ledger records on each,
and the same M as the per-column Beaver products this protocol replaced (issue 55).  No
checkpoint (one release).
"""
from __future__ import annotations

import math
import time

import numpy as np

from ....errors import InputError
from .. import privacy as SP
from . import release as S
from .party import (GramParty, LocalGram, fit_model, make_parties, model,  # noqa: F401
                    piece_rows, prepare, public_bounds, release)


#: the deployment note of a run whose noise came from OS entropy: the products across parties
#: carry the exact discrete Gaussian of the ring (4.9); each party's own block and the label's
#: products are noised by numpy's Gaussian
DEPLOYMENT_NOTE = ("noise from OS entropy; the products across parties carry the exact discrete "
                   "Gaussian, each party's own block and the label party's own products a "
                   "floating-point Gaussian, not protected against Mironov's attack "
                   "(docs/audit.md section 4)")


def check_options(cfg):
    """The options the ssp path refuses (before the run is settled)."""
    if cfg.checkpoint is not None:
        if cfg.loss_fn.name == "squared":
            how = "squared_path 'ssp'" if cfg.squared_path else "the default squared_path 'ssp'"
            hint = "" if cfg.squared_path else " (--squared-path fw checkpoints its rounds)"
        else:
            how = ("logistic_path 'ssp'" if cfg.logistic_path
                   else "the default logistic_path 'ssp'")
            hint = "" if cfg.logistic_path else " (--logistic-path glm checkpoints its rounds)"
        raise InputError(f"{how} is one release and a local fit: it takes no checkpoint{hint}, "
                         f"got checkpoint {cfg.checkpoint!r}")


def _check_label_party(run):
    if run.label_party is None:
        raise InputError("the ssp path (one release of the moments) keeps the label at one "
                         "party (label_party 0..K-1), not 'all'")


def squared(run) -> bool:
    """Whether the run fits the squared loss (the released moments read as least squares on y,
    docs/sensitivity.md 4.10.1) rather than the logistic expansion."""
    return run.loss.name == "squared"


def check(data, run):
    """What the ssp path needs of the data, refused before anything is charged or sent."""
    _check_label_party(run)
    if data.K < 2:
        raise InputError(f"dp-bcfw-secure needs at least 2 parties, got {data.K}")
    if squared(run):
        return                 # any finite label (checked with the data), clipped to B_y
    y = np.asarray(data.y, dtype=np.float64)
    if not np.all(np.abs(y) == 1.0):
        bad = y[np.abs(y) != 1.0][0]
        raise InputError(f"logistic_path 'ssp' expands the loss for labels in {{-1, +1}}; the "
                         f"label party's labels include {bad!r}")


class _Plan:
    """sigma, the event, the scale s, the row clips and the declared bounds of a run.  The
    event states the ring's lattice (docs/sensitivity.md 4.9.1): its step from the fraction bits
    the run uses at that sigma (:func:`ring_frac`), its coordinates those of the secure products
    (``release.ring_coordinates``); sigma is calibrated with the lattice each candidate sigma
    would have."""

    def __init__(self, data, run):
        cfg = run.cfg
        sizes = [len(b) for b in data.blocks]
        self.n = int(data.n)
        if run.private:
            _check_label_party(run)
            self._private(cfg, sizes, run.row_clips or SP.row_clips(
                float(cfg.feature_bound), cfg.row_clip, sizes), run.label_party, squared(run))
        else:
            # nothing is released privately: no clipping, no scaling, no noise
            from ...scale import _bound

            self.Ba = _bound(None, data.A, "feature_bound")
            self.By, self.clips, self.s, self.sigma, self.event = 1.0, None, 1.0, 0.0, None
            self.share = None

    @classmethod
    def public(cls, n, sizes, cfg, clips, label_party, least_squares):
        """The plan of a private release from public numbers alone: the squared loss's rule
        (``defaults.choose_squared_path``) reads it before the run is settled."""
        plan = cls.__new__(cls)
        plan.n = int(n)
        plan._private(cfg, [int(p) for p in sizes], clips, label_party, least_squares)
        return plan

    def _private(self, cfg, sizes, clips, label_party, least_squares):
        self.Ba, self.By = float(cfg.feature_bound), float(cfg.label_bound)
        self.clips = clips
        # the features' share of the row norm: balanced for the logistic expansion, the
        # squared loss's error bound over its l1 balls otherwise (release.squared_share)
        self.share = S.squared_share(self.By, clips, _radius(cfg)) if least_squares else None
        self.s = S.scale(self.By, clips, self.share)
        self.coordinates = S.ring_coordinates(sizes, label_party)
        self.sigma = S.calibrate_sigma(cfg.epsilon, cfg.delta, self.By, cfg.accountant,
                                       lattice=self.lattice, share=self.share)
        self.event = S.release_event(self.sigma, self.By, self.lattice(self.sigma), self.share)

    def frac(self, sigma) -> int:
        """The ring's fraction bits at noise ``sigma`` (:func:`ring_frac`)."""
        return ring_frac(self.n, self.Ba * self.s, self.By, sigma)

    def lattice(self, sigma):
        """``(resolution, coordinates)`` of the release at noise ``sigma``."""
        return S.ring_resolution(self.frac(sigma)), self.coordinates

    def noise_plan(self, cfg, d):
        from accounting import get_accountant

        from ...privacy import NoisePlan

        eps = float(get_accountant(cfg.accountant).epsilon(self.event, cfg.delta))
        return NoisePlan(mode="accountant", noise="none", index_scale=0.0,
                         feature_sigma=self.sigma, epsilon=eps, delta=float(cfg.delta),
                         accountant=cfg.accountant, event=self.event,
                         details={"path": "ssp", "sensitivity": S.sensitivity(self.By, self.share),
                                  "row_bound_sq": S.row_bound_sq(self.By, self.share),
                                  "features_sq": S.features_sq(self.By, self.share),
                                  "scale": self.s,
                                  "row_clips": self.clips,
                                  "ridge": (S.ridge(self.sigma, d) if self.share is None
                                            else S.squared_floor(self.sigma, d)),
                                  "algorithm": "dp-bcfw-secure"})


def ring_frac(n, Ba_s, By, sigma) -> int:
    """The ring's fraction bits for n rows of scaled entries within ``Ba_s`` (B_a s), labels
    within ``By`` and noise ``sigma``: every product and its noise within range."""
    from ..mpc.ring import frac_bits, noisy_range

    return frac_bits(noisy_range(n * Ba_s * max(Ba_s, By), sigma))


def _radius(cfg) -> float:
    """Each party's l1 radius in the data's units (inf: eta 'auto', the ridge fit)."""
    return math.inf if cfg.eta == "auto" else float(cfg.eta)


def ring_and_fit(plan, cfg, n, d, loss="logistic"):
    """``(frac, fit)``: the ring's fraction bits for n rows of the plan's scaled bounds, and the
    post-processing fit's options (eigenvalue floor, l1 radius in the scaled units, intercept
    bound, the labels' scale in the quadratic, whether the margins are calibrated).

    The floor: the ridge lambda = sigma sqrt(d + 2) where no l1 ball bounds the fit; the squared
    loss over l1 balls takes ``release.squared_floor``, a multiple of the largest noise entry:
    over a ball of l1 radius W the noise moves x^T E x by at most W^2 max |E_ij|, far below the
    spectral bound the ridge answers (docs/sensitivity.md 4.10.1, docs/vertical.md)."""
    frac = ring_frac(n, plan.Ba * plan.s, plan.By, plan.sigma)
    radius = _radius(cfg)
    least_squares = loss == "squared"
    fit = dict(lam=(S.squared_floor(plan.sigma, d) if least_squares and math.isfinite(radius)
                    else S.ridge(plan.sigma, d)),
               radius=radius / plan.s, b_bound=math.inf if cfg.fit_intercept else 0.0,
               labels_scale=1.0 if least_squares else 2.0, margins=not least_squares)
    return frac, fit


def solve_ssp(data, run):
    """The Solution of ``run`` (a logistic SecureRun with ``logistic_path="ssp"``): in process,
    or over a runtime link (``cfg.backend`` local, flower-sim, flower: :func:`.ssp_remote.
    on_flower`; with ``flower.spec_dir`` the written description's info instead)."""
    from ...engine import _seeds
    from ..run import finish, open_budget, server_ledger

    check(data, run)
    cfg, K, n, d = run.cfg, data.K, data.n, data.d
    sizes = [len(b) for b in data.blocks]
    L = int(run.label_party)
    t0 = time.perf_counter()
    plan = _Plan(data, run)
    noise_plan = plan.noise_plan(cfg, d) if run.private else None
    led = budget = run_dir = None
    if run.private:
        ledger, run_dir = server_ledger(run)
        led, budget = open_budget(run, ledger, plan.event, lambda: plan.event)
    frac, fit = ring_and_fit(plan, cfg, n, d, run.loss.name)
    _, _, noise_ss = _seeds(run.seed, None)
    info = None
    if cfg.backend != "inprocess":
        from .roles import on_flower

        got, info = on_flower(data, run, plan, frac, fit, led, budget, run_dir,
                              None if run.seed is None else noise_ss)
        if got is None:                    # flower.spec_dir: the description was written
            return info
        if run.private:
            from ..run import server_accounts

            led, budget = server_accounts(run, info, budget)
        x, b, iters = got["x"], got["intercept"], got["fit_iterations"]
        meter, party_ledgers = got["meter"], info.get("party_ledgers")
        release_seconds = got["setup_seconds"]
    else:
        M, meter, party_ledgers = _in_process(data, run, plan, frac, budget,
                                              noise_ss.spawn(K), sizes, L)
        release_seconds = time.perf_counter() - t0
        x_s, b, iters = fit_model(M, sizes, fit)
        x, b = model(x_s, b, plan.s, data.blocks, d, cfg.fit_intercept)
    return finish(_solution(data, run, x, b, meter, party_ledgers, noise_plan, led, iters,
                            release_seconds, time.perf_counter() - t0, frac, plan, info,
                            fit["lam"]),
                  data, run, led, budget, noise_plan)


def _in_process(data, run, plan, frac, budget, seeds, sizes, L):
    """The release with the parties as :class:`GramParty` objects here, each with its own
    memory ledger under the server's budget: ``(M, meter, party ledgers)``."""
    K, n, cfg = data.K, data.n, run.cfg
    Ba_s, By, clips = public_bounds(plan, run.private, K)
    blocks = [prepare(data.block(k), data.y if k == L else None, plan.s, k, frac, run.private,
                      Ba_s, By, None if clips is None else clips[k]) for k in range(K)]
    parties = make_parties(blocks, frac, run.private, plan.sigma, plan.event, seeds)
    if run.private:
        from accounting import BudgetFilter

        from accounting import MemoryLedger

        for p in parties:
            p.budget = BudgetFilter(MemoryLedger(budget={"epsilon": budget.epsilon,
                                                         "delta": budget.delta}),
                                    budget.epsilon, budget.delta, accountant=cfg.accountant)
    link = LocalGram(parties, sizes, L)
    try:
        M = _release(link, parties, sizes, L, n, frac, budget, plan)
    finally:
        link.close()
    return M, link.meter, link.ledgers()


def _release(link, parties, sizes, L, n, frac, budget, plan, frame_bytes=None):
    """:func:`release` in process (``link`` a :class:`LocalGram` of ``parties``; ``plan`` None
    when no budget is charged, as in the audit, ``vflpriv.audit.secure_ssp``)."""
    return release(link, sizes, L, n, frac, budget, None if plan is None else plan.event,
                   piece_rows(sizes, L, frame_bytes))


def _solution(data, run, x, b, meter, party_ledgers, noise_plan, led, iters,
              release_seconds, seconds, frac, plan, flower_info=None, floor=None):
    """The Solution of the model ``(x, b)`` (:func:`model`)."""
    from ....optim.losses import get_loss
    from ...solution import Solution
    from ..run import meter_totals

    K, n = data.K, data.n
    loss = get_loss(run.loss.name)
    y = np.asarray(data.y, float)
    m = np.asarray(data.A @ x).ravel() + (b or 0.0)
    obj = float(np.mean(loss.value(m, y)))
    sol = Solution(algorithm="dp-bcfw-secure", x=x, objective=[obj],
                   initial_objective=float(np.mean(loss.value(np.zeros_like(y), y))),
                   iterations=int(run.cfg.iterations),
                   seconds=seconds, K=K, n=n, seed=run.seed, **meter_totals(meter, K),
                   meter=meter, noise_plan=noise_plan, ledger=led, intercept=b,
                   released=[len(bl) for bl in data.blocks],
                   uplink_naive=[8 * n * len(bl) for bl in data.blocks],
                   extra={"path": "ssp", "deployment_note": DEPLOYMENT_NOTE,
                          "label_party": run.label_party, "frac_bits": frac,
                          # the cross-blocks the server computes (ssp/gram.py)
                          "secure_products": K * (K - 1) // 2,
                          "feature_cap": None, "setup_seconds": release_seconds,
                          "fit_iterations": iters, "release_seconds": release_seconds,
                          "scale": plan.s, "row_clips": plan.clips,
                          # the fit's eigenvalue floor (the ridge, or the squared loss's floor
                          # over l1 balls: ring_and_fit)
                          "ridge": S.ridge(plan.sigma, data.d) if floor is None else floor,
                          "defaults": run.defaults,
                          "party_ledgers": party_ledgers,
                          "bytes_by_type": {k: list(v) for k, v in meter.by_type.items()},
                          "backend": run.cfg.backend, "flower": flower_info,
                          "loss": loss.name, "features_sq": S.features_sq(plan.By, plan.share),
                          "sigmoid": None if loss.name == "squared" else {
                              "kind": "taylor", "degree": 2, "at": 0.0,
                              "statistics": "released once"}})
    return sol
