"""The server's loop of the logistic (GLM) path of dp-bcfw-secure, written once (``glm/party.py`` has
the protocol; docs/vertical.md, "Classification with the label at one party").

:func:`run_secure_glm` talks to the parties only through the steps of an object handed to it
(setup, offline, round, intercept, close), as the least-squares loop does
(:func:`~.loop.run_secure`):

* in process, :class:`LocalGlmParties`: the parties are objects in this process and every
  message goes through :class:`~.local.Network` (framed, metered, party-to-party messages
  straight from sender to receiver);
* over a runtime link (``backend="local"``, ``flower-sim``, ``flower``),
  :class:`~.glm_remote.LinkGlmParties`: each party is a party role in its own host, and the
  party-to-party messages are sealed end to end and relayed by the server (``channel.Channel``).

Both meter the same frames, so a seeded run gives the same model, objective and frame bytes
per message kind on every backend (tests/test_flower_glm.py).  Checkpoints on every backend:
over a link each party saves and restores its own state (``checkpoints/saves.py``).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ....errors import InputError
from ..mpc import messages as SM
from ..mpc.beaver import Dealer
from ..mpc.fourier import SigmoidSeries
from .party import (GlmParty, helper_of, offline_receivers, ring_plan, round_event, round_lattice,
                    round_scores, summed_dimension)
from ..local import Network
from ..base.blocks import CHUNK_ROWS
from ..base.evaluation import Evaluation, fw_step
from ..mpc.ring import KeySource
from ..mpc.store import SpillDirectory, should_spill


@dataclass
class GlmResult:
    x: np.ndarray
    intercept: float | None
    objective: list
    initial_objective: float
    meter: object
    seconds: float
    selections: list
    peer_bytes: int
    setup_seconds: float
    ring: object
    extra: dict = field(default_factory=dict)


class LocalGlmParties:
    """The parties of the GLM path as objects in this process, every message framed by a
    :class:`~.local.Network` (the steps :func:`run_secure_glm` uses)."""

    def __init__(self, parties, L, H, spill=None):
        self.parties, self.L, self.H = parties, int(L), int(H)
        self.net = Network()
        self.meter = self.net.meter
        self.spill = spill
        self.intercepts = []

    @property
    def peer_bytes(self):
        return self.net.peer_bytes

    def setup(self, msgs):
        for p in self.parties:
            p.setup(self.net.down(p.k, msgs[p.k], 0))

    def offline(self):
        """H multiplies its d share with every other block, L with every other block (so that
        no party but L and H ever holds a share of d): each party's masked block goes to them."""
        parties, net, K = self.parties, self.net, len(self.parties)
        for p in parties:
            dsts = offline_receivers(p.k, self.L, self.H, K)
            store = None if self.spill is None else self.spill.store(p.k)
            for row, block in p.masked_blocks():
                msgs = net.peer(p.k, dsts, SM.MaskedBlock(row, block), 0)
                if store is not None:             # the frame's words, on disk, once per chunk
                    store.append(msgs[0].row, msgs[0].block)
                for q, m in zip(dsts, msgs):
                    if store is None:
                        parties[q].receive_block(p.k, m)
                    else:
                        parties[q].masked[p.k] = store

    def round(self, prev, t, dealer, keys):
        """Round t up to the vertices: the selections to every party (each moves its part of
        the public iterate and charges its own ledger), the noisy scores (``glm.round_scores``)
        and every party's pick, ``[(local index, sign), ...]``."""
        net = self.net
        for p in self.parties:
            msg = net.down(p.k, SM.Selections(prev), t)
            if t > 0:
                p.apply(msg, 2.0 / (t + 1.0))
            p.charge(t)
        g = round_scores(self.parties, dealer, keys, net, self.L, self.H, t)
        return [pick_of(net.up(p.k, p.select(g[p.k]), t)) for p in self.parties]

    def step_intercept(self, loss, t):
        """L's intercept step after round t; returns the new b."""
        lp = self.parties[self.L]
        lp.step_intercept(loss, t)
        self.intercepts.append(lp.b)
        return lp.b

    @property
    def intercept(self):
        return self.parties[self.L].b

    def close(self):
        if self.spill is not None:
            self.spill.close()
            self.spill = None

    def ledgers(self):
        return [None if p.budget is None else p.budget.ledger for p in self.parties]


def pick_of(msg):
    """A party's answer to its noisy scores: ``(local index, sign)`` of its Frank-Wolfe vertex,
    or (step pgd) its new iterate x_k as an array."""
    if isinstance(msg, SM.Coefficients):
        return np.asarray(msg.x, dtype=np.float64)
    s = msg.signed_index
    return abs(s) - 1, 1 if s > 0 else -1


#: the steps a party may take on its noisy scores (docs/vertical.md, "Projected-gradient steps")
STEPS = ("fw", "pgd")


def pgd_step_size(clips, fit_intercept):
    """lr = 1 / L with L = (sum_k C_k^2 + [intercept]) / 4, the smoothness of the mean logistic
    loss over rows of l2 norm at most sqrt(sum_k C_k^2) (plus the intercept's constant 1): its
    Hessian is (1/n) sum_r s_r (1 - s_r) a_r a_r^T <= (max_r ||a_r||^2 / 4) I.  Public: it reads
    the row clips only."""
    total = sum(float(c) ** 2 for c in clips) + (1.0 if fit_intercept else 0.0)
    return 4.0 / total


def fw_or_pgd_step(x, blocks, picks, gamma, eta):
    """The server's move of the public iterate: Frank-Wolfe toward every party's vertex, or
    (every pick an array: step pgd) toward the parties' new iterates, x <- (1 - gamma) x +
    gamma s with gamma = 2 / (t + 2), which makes x the average of the iterates weighted by
    t + 1 (the averaged projected-gradient output).  Returns (selections, moves) as
    ``protocol.fw_step``; a pgd selection is (party, column, s_g / eta) for every nonzero s_g,
    so that a replay from the selections (gamma eta times the third field) is the same."""
    if not isinstance(picks[0], np.ndarray):
        return fw_step(x, blocks, picks, gamma, eta)
    x *= 1.0 - gamma
    sel, moves = [], []
    for l, s in enumerate(picks):
        cols = np.asarray(blocks[l], dtype=np.intp)
        if s.shape[0] != cols.shape[0]:
            raise InputError(f"party {l} sent {s.shape[0]} coefficients, its block has "
                             f"{cols.shape[0]} columns")
        x[cols] += gamma * s
        for i in np.flatnonzero(s):
            sel.append((l, int(cols[i]), float(s[i]) / eta))
            moves.append((l, int(cols[i]), gamma * float(s[i])))
    return sel, moves


def model_intercepts(raw, step, before=None, t0=0):
    """The model's intercept after each round from L's intercepts ``raw`` (rounds t0, t0 + 1,
    ...): the same (fw); their running average weighted by t + 1, as the coefficients (pgd:
    b_bar <- (1 - gamma_t) b_bar + gamma_t b_t, gamma_t = 2 / (t + 2); ``before``: b_bar
    before round t0)."""
    if step != "pgd":
        return [float(b) for b in raw]
    out, bar = [], 0.0 if before is None else float(before)
    for i, b in enumerate(raw):
        gamma = 2.0 / (t0 + i + 2.0)
        bar = (1.0 - gamma) * bar + gamma * float(b)
        out.append(bar)
    return out


def _local_parties(data, *, L, eta, ring, series, private, feature_bound, clips, sigma,
                   noise_ss, fit_intercept, budget_filter, ev_round, T, step="fw", lr=None):
    """The K in-process :class:`~.glm.GlmParty` objects, each private one with its own
    in-memory ledger and filter (same budget and accountant as the server's), its whole plan
    checked."""
    K = data.K
    party_seeds = noise_ss.spawn(2 * K)
    parties = []
    for k in range(K):
        p = GlmParty(k, data.block(k), data.y if k == L else None, eta, ring=ring, series=series,
                     private=private, feature_bound=feature_bound,
                     row_clip=None if clips is None else clips[k], sigma=sigma,
                     noise_seed=party_seeds[k], fit_intercept=fit_intercept, step=step, lr=lr)
        if private:
            from accounting import BudgetFilter

            from accounting import MemoryLedger

            bf = budget_filter
            p.budget = BudgetFilter(MemoryLedger(budget={"epsilon": bf.epsilon,
                                                         "delta": bf.delta}),
                                    bf.epsilon, bf.delta, accountant=bf.accountant.name)
            p.budget.check_plan(_plan(ev_round, T), party=k)
            p.round_event = ev_round
        parties.append(p)
    return parties


def run_secure_glm(data, loss, *, eta, iterations, label_party, private, series=None,
                   sigma=0.0, budget_filter=None, feature_bound=None, clips=None, seed=None,
                   noise_key=None, callback=None, state=None, on_round=None,
                   fit_intercept=False, helper_party=None, ring=None,
                   remote=None, step="fw") -> GlmResult:
    """Run the GLM protocol (``glm/party.py``'s docstring).  ``sigma``: std of the Gaussian on each
    A_k^T d (sum units); ``clips``: per-party row clips C_k (private runs); ``ring``: the
    fixed-point plan (default: ``glm.ring_plan`` from the declared bound, or from the data
    when not private).  ``remote(public)``: parties elsewhere, returning an object with
    :class:`LocalGlmParties`' steps (``glm_remote.LinkGlmParties``); the objective is then
    left to the caller (``glm_remote.replay_objective``).  ``on_round`` and ``state``:
    checkpoints and resume, as :func:`~.loop.run_secure`'s (``checkpoints/state.py``); over a link
    each party saves and restores its own state (``glm/roles.py``).  ``step``: "fw" (every
    party picks a Frank-Wolfe vertex from its noisy scores) or "pgd" (every party takes a
    projected-gradient step of size :func:`pgd_step_size` on them and reports its iterate; the
    model is their weighted average, :func:`fw_or_pgd_step`)."""
    from ...engine import _seeds
    from ..checkpoints.state import RoundState, Snapshot, restore, restore_keys

    series = series or SigmoidSeries()
    K, n, T = data.K, data.n, int(iterations)
    if K < 2:
        raise InputError(f"dp-bcfw-secure needs at least 2 parties, got {K}")
    L = int(label_party)
    H = helper_of(L, K, helper_party)
    D = series.derivative_bound
    if ring is None:
        from ....optim._checks import max_abs

        Ba = float(feature_bound) if private else (max_abs(data.A) or 1.0)
        ring = ring_plan(n, Ba, sigma, series)
    if step not in STEPS:
        raise InputError(f"step must be one of {STEPS}, got {step!r}")
    lr = None
    if step == "pgd":
        from ..privacy import row_clips

        if clips is not None:
            lr = pgd_step_size(clips, fit_intercept)
        else:       # non-private: the bound B_a sqrt(p_k) of the data's own entries
            from ....optim._checks import max_abs

            lr = pgd_step_size(row_clips(max_abs(data.A) or 1.0, None,
                                         [len(b) for b in data.blocks]), fit_intercept)
    t_setup = time.perf_counter()
    _, _, noise_ss = _seeds(seed, noise_key)
    # masks, triples and share keys from the OS, seeded run or not: they cancel in the ring, so
    # a seed would buy no reproducibility and a reused seed would be a two-time pad (issue 32)
    keys = KeySource(None)
    sizes = [len(b) for b in data.blocks]
    summed = summed_dimension(sizes, L, H)
    # the ring's lattice (docs/sensitivity.md 4.9.1): the plan states the same, from the same
    # public numbers (``solve.plan_lattice``)
    ev_round = (round_event(sigma, D, clips, fit_intercept, summed,
                            round_lattice(ring, sum(sizes), fit_intercept))
                if private else None)
    if remote is not None:
        link = remote({"K": K, "n": n, "eta": float(eta), "private": bool(private),
                       "feature_bound": feature_bound,
                       "clips": None if clips is None else [float(c) for c in clips],
                       "label_party": L, "helper_party": H, "sigma": float(sigma),
                       "summed": summed, "features": int(sum(sizes)),
                       "fit_intercept": bool(fit_intercept), "loss": loss.name,
                       "step": step, "lr": lr,
                       "ring": [ring.fa, ring.fm, ring.fc, ring.h],
                       "series": [series.accurate, series.period_bits, series.terms,
                                  series.coef_bits],
                       # a resumed run: each party restores its own save of that round
                       "resume_round": int(state[0]["t"]) if state is not None and
                       state[0]["stage"] == "ready" else None})
        parties = None
    else:
        parties = _local_parties(data, L=L, eta=eta, ring=ring, series=series, private=private,
                                 feature_bound=feature_bound, clips=clips, sigma=sigma,
                                 noise_ss=noise_ss, fit_intercept=fit_intercept,
                                 budget_filter=budget_filter, ev_round=ev_round, T=T,
                                 step=step, lr=lr)
        # above store.SPILL_BYTES the received masked blocks live on disk, read chunk by chunk
        link = LocalGlmParties(parties, L, H,
                               SpillDirectory() if should_spill(n, sizes) else None)
    dealer = Dealer(keys, sizes, n, CHUNK_ROWS)
    resumed = state is not None and state[0]["stage"] == "ready"
    if state is not None:
        restore_keys(state[0], keys, dealer)       # before the run draws any key again
    run = RoundState(K, data.d)
    ev = Evaluation(data, loss) if remote is None else None
    if remote is not None and on_round is not None:
        from ..checkpoints.saves import saving

        on_round = saving(on_round, link, run)
    snap = None if on_round is None else Snapshot(run, parties, link, keys, dealer, ev)
    if snap is not None and not resumed:
        on_round(snap)           # nothing charged yet
    try:
        link.setup({k: SM.SecureSetup(ring.fa, 0, K, n, dealer.mask_keys[k]) for k in range(K)})
        link.offline()
        if resumed:
            # the masked blocks were recomputed above (checkpoints/state.py); everything else comes back
            restore(state[0], state[1], run, parties, link, ev)
        run.stage = "ready"
        setup_seconds = time.perf_counter() - t_setup

        t0 = time.perf_counter()
        x = run.x
        initial = float(np.mean(loss.value(np.zeros(n), data.y))) if remote is None else None
        history, selections = run.history, run.selections
        if snap is not None:
            on_round(snap)
        for t in range(run.t, T):
            if private:
                budget_filter.charge(ev_round, party=",".join(map(str, range(K))), round=t,
                                     note="secure glm: noisy scores")
            picks = link.round(run.prev, t, dealer, keys)
            gamma = 2.0 / (t + 2.0)
            sel, moves = fw_or_pgd_step(x, data.blocks, picks, gamma, eta)
            # L's intercept after the round (None over a link: L hands them over at close)
            b = link.step_intercept(loss, t) if fit_intercept else None
            if b is not None:
                b = model_intercepts([b], step, run.intercepts[-1] if run.intercepts
                                     else None, t)[0]
                run.intercepts.append(b)
            selections.append(sel)
            run.prev = [0] * K if step == "pgd" else [sign * (i + 1) for i, sign in picks]
            if ev is not None:
                history.append(ev.advance(moves, gamma, b or 0.0))
            run.t = t + 1
            if snap is not None:
                on_round(snap)
            if callback is not None:
                callback(t, history[-1] if history else float("nan"))
        link.close()
        if fit_intercept and remote is not None:
            run.intercepts = model_intercepts(link.intercepts, step)
        return GlmResult(x=x, intercept=(run.intercepts[-1] if run.intercepts else 0.0)
                         if fit_intercept else None, objective=history,
                         initial_objective=initial, meter=link.meter,
                         seconds=time.perf_counter() - t0 + setup_seconds, selections=selections,
                         peer_bytes=link.peer_bytes, setup_seconds=setup_seconds, ring=ring,
                         extra={"party_ledgers": link.ledgers(), "helper_party": H,
                                "intercepts": list(run.intercepts), "step": step,
                                "step_size": lr})
    finally:
        if remote is None:
            link.close()


def _plan(ev, T):
    from accounting import SelfComposed

    return SelfComposed(ev, int(T))
