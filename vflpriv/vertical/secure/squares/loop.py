"""The server's loop of dp-bcfw-secure, least squares (the protocol: ``squares/party.py``'s docstring).

:func:`run_secure` is written as its steps: the parties reached (:func:`_parties`: in process,
each with its own ledger, or elsewhere through ``remote``), the setup and the offline phase,
the label release (:func:`_release_label`), then T rounds (:func:`_round`).  Its options are one
frozen :class:`SecureOptions`; keyword arguments of the same names still build one.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ....errors import InputError
from ..mpc import messages as SM
from ..mpc.beaver import Dealer
from ..base.evaluation import Evaluation, fw_step
from .party import SecureParty, SecureResult


@dataclass(frozen=True)
class SecureOptions:
    """What a run of the loop is: the l1 radius and rounds, the fixed-point scale, and (private
    runs) the noise plan, the server's budget filter, the declared bounds and the row clips.
    ``label_party``: None when every party holds y, else its index (A_k^T y is then released
    once, by a secure product, before the first round).  ``chunk_rows``: rows per masked-block
    chunk (the result does not depend on it); ``spill``: keep received masked blocks on disk
    (``mpc/store.py``: None = when they are large, or a directory)."""

    eta: float
    iterations: int
    frac: int
    private: bool
    noise_plan: object = None
    budget_filter: object = None
    feature_bound: float | None = None
    label_bound: float | None = None
    clips: object = None
    feature_cap: int = 10
    seed: int | None = None
    noise_key: object = None
    label_party: int | None = None
    chunk_rows: int | None = None
    spill: object = None
    fit_intercept: bool = False

    def checked(self):
        from ..base import blocks  # read at run time: a test may set blocks.CHUNK_ROWS

        chunk = blocks.CHUNK_ROWS if self.chunk_rows is None else int(self.chunk_rows)
        if chunk < 1:
            raise InputError(f"chunk_rows must be a positive integer, got {self.chunk_rows!r}")
        if self.private and (self.noise_plan is None or self.budget_filter is None):
            raise InputError("a private secure run needs a noise plan and a budget filter")
        return chunk


def run_secure(data, options: SecureOptions | None = None, *, callback=None, remote=None,
               state=None, on_round=None, **kwargs) -> SecureResult:
    """Run the protocol (``squares/party.py``) with ``options`` (or the keyword arguments of
    :class:`SecureOptions`).  ``remote(public)``: parties elsewhere (Flower), returning an
    object with :class:`~.local.LocalParties`' steps; the objective is then left to
    :func:`~.protocol.replay_objective`.  ``on_round(snapshot)`` (for
    ``checkpoint.Checkpointer``) is called before anything is charged, once the parties are set
    up and after every round; ``state`` (a checkpoint's ``(meta, arrays)``) continues an
    interrupted run: the offline phase is recomputed, the rest restored (``checkpoints/state.py``).  Over a
    link the snapshot holds the server's state only: each party saves its own before it is
    written, and restores it at setup (``checkpoints/saves.py``)."""
    from ..mpc.ring import KeySource
    from ..checkpoints.state import RoundState, Snapshot, restore, restore_keys

    opts = options if options is not None else SecureOptions(**kwargs)
    chunk = opts.checked()
    K, n, T = data.K, data.n, int(opts.iterations)
    t_setup = time.perf_counter()
    # masks, triples and share keys from the OS, seeded run or not: they cancel exactly in the
    # ring (results do not change), and a seed reused on neighbouring data would be a two-time
    # pad that unmasks a person's row (issue 32); a seed fixes only the DP noise of a test run
    keys = KeySource(None)
    sizes = [len(b) for b in data.blocks]
    link, parties = _parties(data, opts, remote, chunk, state)
    dealer = Dealer(keys, sizes, n, chunk)
    resumed = state is not None and state[0]["stage"] == "ready"
    if state is not None:
        restore_keys(state[0], keys, dealer)       # before the run draws any key again
    run = RoundState(K, data.d)
    if remote is not None and on_round is not None:
        from ..checkpoints.saves import saving

        on_round = saving(on_round, link, run)     # every party saves its own state first
    ev = Evaluation(data) if remote is None else None
    snap = None if on_round is None else Snapshot(run, parties, link, keys, dealer, ev)
    if snap is not None and not resumed:
        on_round(snap)           # nothing charged yet: a crash from here on can be resumed
    link.setup({k: SM.SecureSetup(opts.frac, opts.feature_cap, K, n, dealer.mask_keys[k])
                for k in range(K)})
    link.offline()               # offline phase: each masked block E_k to its helper h(k)
    if resumed:
        # the masked blocks were recomputed above (checkpoints/state.py); everything else comes back
        restore(state[0], state[1], run, parties, link, ev)
    else:
        if opts.label_party is not None and K > 1:
            _release_label(link, dealer, opts, K)
        if opts.fit_intercept:
            run.intercept_sums = _release_sums(link, opts, data)
    run.stage = "ready"
    setup_seconds = time.perf_counter() - t_setup

    t0 = time.perf_counter()
    initial = float(0.5 * np.mean(data.y ** 2)) if remote is None else None
    if snap is not None:
        on_round(snap)
    for t in range(run.t, T):
        _round(t, link, dealer, run, opts, data, ev)
        if snap is not None:
            on_round(snap)
        if callback is not None:
            callback(t, run.history[-1] if run.history else float("nan"))
    # the masked blocks kept by the parties are removed (in process, on an error, by the
    # temporary directory's finalizer; over a link, by the server role, remote.serve)
    link.close()
    intercept = _intercept(run, opts, n) if opts.fit_intercept else None
    return SecureResult(x=run.x, objective=run.history, initial_objective=initial,
                        meter=link.meter, seconds=time.perf_counter() - t0 + setup_seconds,
                        released=run.released, selections=run.selections,
                        products=run.products, frac_bits=opts.frac,
                        peer_bytes=link.peer_bytes, setup_seconds=setup_seconds,
                        extra={"party_ledgers": link.ledgers()}, intercept=intercept,
                        intercepts=run.intercepts if opts.fit_intercept else None)


def _public(data, opts, state=None) -> dict:
    """What a remote party needs to build its role (public: sizes, bounds, the noise plan;
    on a resumed run the round it resumes from, ``saves.resume_fields``)."""
    from ..checkpoints.saves import resume_fields

    plan = opts.noise_plan
    return {"K": data.K, "n": data.n, "eta": float(opts.eta), "frac": int(opts.frac),
            "sizes": [len(b) for b in data.blocks],
            **resume_fields(state),
            "feature_cap": int(opts.feature_cap), "private": bool(opts.private),
            "feature_bound": opts.feature_bound, "label_bound": opts.label_bound,
            "clips": None if opts.clips is None else [float(c) for c in opts.clips],
            "label_party": opts.label_party, "fit_intercept": bool(opts.fit_intercept),
            "label_rounds": 0 if not opts.private else
            int(plan.details.get("label_feature_rounds", 0)) +
            int(plan.details.get("intercept_feature_rounds", 0)),
            "plan": None if not opts.private else
            [plan.noise, plan.index_scale, plan.details["sens_index"], plan.feature_sigma,
             plan.details["sens_feature"]]}


def _parties(data, opts, remote, chunk, state=None):
    """``(link, parties)``: the parties reached through ``remote`` (parties None), or made in
    this process, each with its own noise stream and, private, its own ledger and filter with
    the server's budget and accountant (each gates its own releases)."""
    from ...engine import _seeds
    from ..local import LocalParties
    from ..mpc.store import SpillDirectory, should_spill

    if remote is not None:
        return remote(_public(data, opts, state)), None
    K, plan, lp = data.K, opts.noise_plan, opts.label_party
    _, _, noise_ss = _seeds(opts.seed, opts.noise_key)
    party_seeds = noise_ss.spawn(K)
    parties = [SecureParty(k, data.block(k), data.y if lp in (None, k) else None, opts.eta,
                           frac=opts.frac, private=opts.private,
                           feature_bound=opts.feature_bound, label_bound=opts.label_bound,
                           row_clip=None if opts.clips is None else opts.clips[k],
                           noise=plan.noise if opts.private else None,
                           index_scale=plan.index_scale if opts.private else 0.0,
                           sigma=plan.feature_sigma if opts.private else 0.0,
                           noise_seed=party_seeds[k]) for k in range(K)]
    if opts.private:
        from accounting import BudgetFilter

        from accounting import MemoryLedger

        bf = opts.budget_filter
        for p in parties:
            p.budget = BudgetFilter(MemoryLedger(budget={"epsilon": bf.epsilon,
                                                         "delta": bf.delta}),
                                    bf.epsilon, bf.delta, accountant=bf.accountant.name)
            p.plan = (plan.noise, plan.index_scale, plan.details["sens_index"],
                      plan.feature_sigma, float(opts.feature_bound), opts.clips,
                      float(opts.label_bound))
            p.ring = (int(opts.frac), [len(b) for b in data.blocks])
    for p in parties:
        p.chunk_rows = chunk
    spill = should_spill(data.n, [len(b) for b in data.blocks]) if opts.spill is None \
        else opts.spill
    link = LocalParties(parties, spill=SpillDirectory(None if spill is True else spill)
                        if spill else None)
    return link, parties


def _release_label(link, dealer, opts, K):
    """The label party's y times every other party's block, released once (noised), charged
    before any of its noise is drawn."""
    L = int(opts.label_party)
    if opts.private:
        from ..privacy import label_release_event

        opts.budget_filter.charge(label_release_event(opts.noise_plan.feature_sigma,
                                                      opts.label_bound, opts.clips, L,
                                                      (opts.frac, dealer.sizes)),
                                  party=str(L), round=0, note="secure: A_k^T y")
        link.new_features([SM.LABEL_RELEASE + L], 0)
    others = [k for k in range(K) if k != L]
    link.product(L, SM.LABEL_INDEX, *dealer.routed_triples(L, SM.LABEL_INDEX, others), 0)


def _release_sums(link, opts, data):
    """The intercept's release, once: every party's noisy column sums and the label party's
    noisy label sum (one Gaussian, charged before any of its noise is drawn).  Returns
    ``(noisy sum of y, noisy column sums in global order)``, public from here on."""
    K = data.K
    if opts.private:
        from ..privacy import intercept_release_event

        opts.budget_filter.charge(intercept_release_event(opts.noise_plan.feature_sigma,
                                                          opts.label_bound, opts.clips),
                                  party=",".join(map(str, range(K))), round=0,
                                  note="secure: intercept sums")
        link.new_features([SM.INTERCEPT_RELEASE], 0)
    releaser = 0 if opts.label_party is None else int(opts.label_party)
    msgs = link.sums(releaser, 0)
    s = np.zeros(data.d)
    for k, m in enumerate(msgs):
        if len(m.sums) != len(data.blocks[k]):
            raise InputError(f"party {k} sent {len(m.sums)} column sums, its block has "
                             f"{len(data.blocks[k])} columns")
        s[np.asarray(data.blocks[k], dtype=np.intp)] = m.sums
    return float(msgs[releaser].label_sum), s


def _intercept(run, opts, n):
    """b(x) = clip((sum y - s^T x) / n, -B_b, B_b): the intercept that minimizes the objective
    at x (the noisy sums in place of the exact ones; a post-processing of their release).
    B_b = B_y in a private run (``vflpriv.optim.intercept.bound``), no clip otherwise."""
    ysum, s = run.intercept_sums
    b = (ysum - float(s @ run.x)) / n
    if opts.private:
        b = float(np.clip(b, -float(opts.label_bound), float(opts.label_bound)))
    return b


def _round(t, link, dealer, run, opts, data, ev):
    """Round t: the K selections charged and made, the new features' cross-products charged
    and computed, the Frank-Wolfe move (gamma = 2 / (t + 2))."""
    from ...privacy import index_event
    from ..privacy import round_feature_event

    K, plan = data.K, opts.noise_plan
    if opts.private:
        opts.budget_filter.charge(index_event(plan.noise, plan.index_scale,
                                              plan.details["sens_index"], K),
                                  party=",".join(map(str, range(K))), round=t,
                                  note="secure: signed index")
    b = None
    if opts.fit_intercept:          # b at this round's x: the last round's, or computed at x^0
        b = run.intercepts[-1] if run.intercepts else _intercept(run, opts, data.n)
    picks = link.select(run.prev, t, b)
    new = [(l, i) for l, (i, _) in enumerate(picks) if i not in run.chosen[l]]
    if new and K > 1:
        if opts.private:
            opts.budget_filter.charge(round_feature_event(plan.feature_sigma,
                                                          opts.feature_bound, opts.clips,
                                                          [l for l, _ in new],
                                                          (opts.frac, dealer.sizes)),
                                      party=",".join(str(l) for l, _ in new), round=t,
                                      note="secure: cross-products")
            link.new_features([l for l, _ in new], t)
        for l, i in new:
            others = [k for k in range(K) if k != l]
            link.product(l, i, *dealer.routed_triples(l, i, others), t)
            run.products += len(others)
    for l, i in new:
        run.chosen[l].add(i)
        run.released[l] += 1
    gamma = 2.0 / (t + 2.0)
    sel, moves = fw_step(run.x, data.blocks, picks, gamma, opts.eta)
    run.selections.append(sel)
    run.prev = [sign * (i + 1) for i, sign in picks]
    b_next = None
    if opts.fit_intercept:
        b_next = _intercept(run, opts, data.n)
        run.intercepts.append(b_next)
    if ev is not None:
        run.history.append(ev.advance(moves, gamma, intercept=b_next or 0.0))
    run.t = t + 1
