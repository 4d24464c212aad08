"""Checkpoints of dp-bcfw-secure over a link (``backend`` local, flower-sim, flower), for both
paths: each party's own saves and its ledger's replay (:class:`PartySaves`; the least-squares
party's state: :class:`SecureSaves`, the logistic one's: ``glm/saves.py``), and what the server
role and the command add around the loop (docs/vertical.md, "Checkpoints on Flower").

Over a link the server's checkpoint holds no party state: when the server checkpoints round t,
each party first saves its own (``save``), on its own disk (its node config's ``checkpoint``
names the file); on a resumed run each restores its save of round t at setup and replays its
ledger's records of the run written after it, so that a redone round draws the same noise and
matches its recorded twin instead of being charged again (``checkpoint.ReplayFilter``).  A run
resumed from its first checkpoint (stage ``start``, before any release) restores nothing: every
record of the run in a party's ledger was charged after it, and is replayed.
"""
from __future__ import annotations

import json
import os
from types import SimpleNamespace

from ....noise import state as noise_state
from ....runtime.roles import Refused, own_budget


class PartySaves:
    """Mixed into a secure party role (``self.party``, ``self.cfg``, ``self.setup``, ``self.k``,
    ``self.saved``: the rounds of its saves on its disk, ``self.replay``: ``[next, end]`` of
    its ledger's records of the run to replay).  What a save holds beside the bookkeeping:
    ``_saved_state()`` / ``_set_saved_state(meta, arrays)`` of the path's party."""

    def _own_records(self, bf):
        run_id = self.setup.get("run_id")
        return [r for r in bf.ledger.records if r.run_id == run_id]

    def _replaying(self, bf):
        """``bf``, or while records of the interrupted run remain to be replayed a
        ReplayFilter over them: a redone release matches its recorded twin."""
        from ...checkpoint import ReplayFilter

        if self.replay is not None and self.replay[0] < self.replay[1]:
            return ReplayFilter(bf, self._own_records(bf)[self.replay[0]:self.replay[1]])
        return bf

    def _replayed(self, bf):
        """After charges through ``bf`` (from :meth:`_replaying`): the records it matched are
        replayed."""
        from ...checkpoint import ReplayFilter

        if self.replay is not None and isinstance(bf, ReplayFilter):
            self.replay[0] = self.replay[1] - len(bf.pending)

    def _save_path(self, t):
        path = self.cfg.get("checkpoint")
        if not path:
            raise Refused(f"party {self.k} has no checkpoint file in its node config "
                          "(checkpoint=PATH): it cannot save its state for a resume")
        return f"{path}.t{int(t)}"

    def _save(self, t):
        """Save this party's state after round t (its generator, the path's state, how many of
        its ledger's records of this run precede it) on its own disk, mode 0600
        (``checkpoint.write_checkpoint``): it holds the noise generator's state, so it is as
        secret as the party's data.  The last two saves are kept (the server's last checkpoint
        may be one round behind the parties')."""
        from ...checkpoint import write_checkpoint

        p = self.party
        n = None
        if p.private:
            pending = 0 if self.replay is None else self.replay[1] - self.replay[0]
            n = len(self._own_records(own_budget(self.cfg, self.setup))) - pending
        meta, arrays = self._saved_state()
        meta = dict(meta, run_id=self.setup.get("run_id"), party=self.k, t=int(t),
                    rng=noise_state(p.rng), run_records=n)
        try:
            write_checkpoint(self._save_path(t), meta, arrays)
        except OSError as exc:
            raise Refused(f"party {self.k} cannot save its state: {exc}") from None
        self.saved = [s for s in self.saved if s != int(t)] + [int(t)]
        for old in self.saved[:-2]:
            try:
                os.remove(self._save_path(old))
            except OSError:
                pass
        self.saved = self.saved[-2:]

    def _restore(self, t):
        """This party's own save of round t, checked to be of this run and party; its
        ledger's records of the run charged after it are to be replayed."""
        from ....errors import InputError
        from ...checkpoint import read_checkpoint

        p = self.party
        path = self._save_path(t)
        try:
            meta, arrays = read_checkpoint(path)
        except InputError as exc:
            raise Refused(f"party {self.k} cannot resume from round {t}: {exc}") from None
        if (meta.get("run_id"), meta.get("party"), meta.get("t")) != \
                (self.setup.get("run_id"), self.k, t) or (p.rng is None) != (meta["rng"] is None):
            raise Refused(f"party {self.k}: its save {path!r} is not of this run's round {t}")
        try:
            self._set_saved_state(meta, arrays)
        except (KeyError, ValueError, InputError) as exc:
            raise Refused(f"party {self.k}: its save {path!r} does not fit this run "
                          f"({type(exc).__name__}: {exc})") from None
        self.saved = [t]
        if p.private:
            own = self._own_records(own_budget(self.cfg, self.setup))
            n = int(meta["run_records"])
            if len(own) < n:
                raise Refused(f"party {self.k}: its ledger holds {len(own)} records of this run, "
                              f"fewer than the {n} its save of round {t} saw")
            self.replay = [n, len(own)]

    def _resume_at_setup(self):
        """At a resumed run's setup (``setup["resume_round"]``: the round of the server's
        checkpoint): this party's save of that round restored, its later records to replay;
        resumed from the first checkpoint (``setup["resumed"]``, no round), every record of
        the run in its ledger is replayed.  Returns the round the run goes on from."""
        t0 = self.setup.get("resume_round")
        if t0 is not None:
            self._restore(int(t0))
            return int(t0)
        if self.setup.get("resumed") and self.party.private:
            self.replay = [0, len(self._own_records(own_budget(self.cfg, self.setup)))]
        return 0


class SecureSaves(PartySaves):
    """The least-squares party's save (``state.party_state`` without its ledger, which stays
    in its own file): its generator, x_k, u_k, c_k, the cross-products released to it, A_k^T y
    + noise, its selected set and the round's intercept."""

    def _saved_state(self):
        from .state import party_state

        meta, arrays = party_state(self.party)
        meta["ledger"] = None
        return meta, arrays

    def _set_saved_state(self, meta, arrays):
        from .state import set_party_state

        set_party_state(self.party, dict(meta, ledger=None), arrays)

    def _released(self):
        """r_l, the features of party l whose cross-products were released so far, from this
        party's own state: the ones it picked (its own) and the products it received."""
        p = self.party
        r = [0] * int(self.setup["K"])
        for (l, _) in p.cross:
            r[int(l)] += 1
        r[self.k] = len(p.selected)
        return r

    def check_own_plan(self, t0):
        """The server's worst-case plan against this party's own ledger (every release of the
        run touches its people): K selections per round and at most F rounds of K new features
        (and the label's and intercept's releases); on a resumed run what remains of it from
        round t0 (``resume.remaining_plan``, from this party's own count of the features
        released), its records to replay excluded."""
        from ... import privacy as P
        from .. import privacy as SP
        from .resume import remaining_plan

        s, bf = self.setup, self.party.budget
        plan = s["plan"]
        T, K, F = int(s["iterations"]), int(s["K"]), int(s["feature_cap"])
        sens = P.Sensitivity(z_bound=0.0, derivative_bound=0.0, index=plan[2], feature=plan[4])
        # the ring's lattice (docs/sensitivity.md 4.9.1), as the server's plan states it
        ring = (int(s["frac"]), [int(v) for v in s["sizes"]])
        event = P.plan_event(plan[0], plan[1], plan[3], sens, T, K,
                             feature_rounds=F + int(s.get("label_rounds") or 0), discrete=True,
                             lattice=SP.plan_lattice(lambda _s: ring[0], ring[1]))
        if s.get("resume_round") is not None:
            event = remaining_plan(
                SimpleNamespace(noise=plan[0], index_scale=plan[1], feature_sigma=plan[3],
                                event=event), sens, T, K, F, None,
                {"stage": "ready", "t": t0, "released": self._released()}, ring=ring)
        if event is not None:
            bf.check_plan(event, party=self.k, exclude=getattr(bf, "pending", ()))


# -- around the loop: the server role and the command -------------------------------------------
def saving(checkpointer, link, run):
    """Over a link the server's checkpoint holds no party state: before it is written (once
    the parties are set up) every party saves its own, on its own disk (``link.save``), so
    that a server checkpoint of round t always has every party's save of round t beside it."""
    def on_round(snap):
        if run.stage == "ready" and checkpointer.due(run.t):
            link.save(run.t)
        checkpointer(snap)
    return on_round


def server_checkpoints(spec, budget):
    """The server's checkpoints over a link (``spec["checkpoint"]``: its path, interval and
    the run's metadata as JSON, as the command's ``resume.checkpointer`` made them): ``(budget
    filter, on_round hook, state to resume from)``.  On resume (``spec["resume"]``) the
    checkpoint is read here, where the ServerApp runs, and the ledger's records charged after
    it are replayed (``checkpoint.ReplayFilter``), as in process."""
    ck = spec.get("checkpoint")
    if not ck:
        return budget, None, None
    from ...checkpoint import Checkpointer, ReplayFilter, pending_records, read_checkpoint

    state = None
    if spec.get("resume"):
        meta, arrays = read_checkpoint(ck["path"])
        state = (meta["state"], arrays)
        if budget is not None:
            budget = ReplayFilter(budget, pending_records(budget.ledger, meta, ck["path"]))
    return budget, Checkpointer(ck["path"], int(ck["every"]), int(spec["iterations"]),
                                json.loads(ck["meta"]), budget), state


def check_replayed(spec, budget):
    """After a resumed run: every record of the interrupted run was matched by a release."""
    if spec.get("resume") and getattr(budget, "pending", None):
        raise Refused(f"the ledger holds {len(budget.pending)} records of this run beyond its "
                      f"{spec['iterations']} rounds; it does not belong to this checkpoint")


def checkpoint_spec(checkpointer):
    """What the ServerApp needs to write the server's checkpoints (None without one): the
    path, the interval and the metadata as one JSON string (the hosts make path-like keys of a
    spec absolute, flower/paths.py, and the saved command line's --data is not a path of
    theirs)."""
    if checkpointer is None:
        return None
    return {"path": os.path.abspath(checkpointer.path), "every": checkpointer.every,
            "meta": json.dumps(checkpointer.meta, allow_nan=True)}


def party_checkpoints(cfgs, checkpoint, spec_dir):
    """Each party's own save file in its node config: ``<path>.party<k>`` beside the server's
    checkpoint, in a description ``party<k>.ckpt`` beside its node config."""
    if not checkpoint:
        return
    for c in cfgs:
        k = int(c["party"])
        c["checkpoint"] = os.path.join(spec_dir, f"party{k}.ckpt") if spec_dir else \
            f"{checkpoint['path']}.party{k}"


def resume_fields(state):
    """What a party needs at setup to resume (``setup["resume_round"]``, ``["resumed"]``)."""
    ready = state is not None and state[0]["stage"] == "ready"
    return {"resume_round": int(state[0]["t"]) if ready else None,
            "resumed": state is not None}

