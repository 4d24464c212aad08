"""A party's own saves of the logistic path over a link (checkpoints on Flower; docs/vertical.md,
"Checkpoints on Flower"), and its ledger's replay on a resumed run.

Over a link the server's checkpoint holds no party state: when the server checkpoints round t,
each party first saves its own (``save``), on its own disk; on a resumed run each restores its
save of round t at setup and replays its ledger's records of the run written after it, so that
a redone round draws the same noise and matches its recorded twin instead of being charged
again (``checkpoint.ReplayFilter``).
"""
from __future__ import annotations

import os

import numpy as np

from ...noise import restore as noise_restore
from ...noise import state as noise_state
from ...runtime.roles import Refused, own_budget


class PartySaves:
    """Mixed into :class:`~.glm_remote.GlmPartyRole` (``self.party``, ``self.cfg``,
    ``self.setup``, ``self.k``, ``self.event``, ``self.intercepts``, ``self.saved``,
    ``self.replay``)."""

    def _open_budget(self):
        """The party's own filter; on a resumed run, while records of the interrupted run
        remain to be replayed, a ReplayFilter over them (``checkpoint.ReplayFilter``): a
        redone round matches its recorded twin instead of being charged again."""
        from ..checkpoint import ReplayFilter

        bf = own_budget(self.cfg, self.setup)
        if self.replay is not None and self.replay[0] < self.replay[1]:
            bf = ReplayFilter(bf, self._own_records(bf)[self.replay[0]:self.replay[1]])
        self.party.budget = bf
        self.party.round_event = self.event

    def _own_records(self, bf):
        run_id = self.setup.get("run_id")
        return [r for r in bf.ledger.records if r.run_id == run_id]

    def _charge(self, t):
        """Round t's charge to the party's own ledger (replayed on a resumed run)."""
        p = self.party
        if not p.private:
            return
        self._open_budget()
        before = len(getattr(p.budget, "pending", ()))
        p.charge(t)
        if self.replay is not None:
            self.replay[0] += before - len(getattr(p.budget, "pending", ()))

    # -- this party's own saves (checkpoints over a link) --------------------------------------
    def _save_path(self, t):
        path = self.cfg.get("checkpoint")
        if not path:
            raise Refused(f"party {self.k} has no checkpoint file in its node config "
                          "(checkpoint=PATH): it cannot save its state for a resume")
        return f"{path}.t{int(t)}"

    def _save(self, t):
        """Save this party's state after round t (its generator, x_k, u_k, its intercept and
        their history, how many of its ledger's records of this run precede it) on its own
        disk, mode 0600 (``checkpoint.write_checkpoint``): it holds the noise generator's state,
        so it is as secret as the party's data.  The last two saves are kept (the server's last
        checkpoint may be one round behind the parties')."""
        from ..checkpoint import write_checkpoint

        p = self.party
        n = None
        if p.private:
            bf = own_budget(self.cfg, self.setup)
            pending = 0 if self.replay is None else self.replay[1] - self.replay[0]
            n = len(self._own_records(bf)) - pending
        meta = {"run_id": self.setup.get("run_id"), "party": self.k, "t": int(t),
                "rng": noise_state(p.rng), "b": p.b,
                "intercepts": list(self.intercepts), "run_records": n}
        try:
            write_checkpoint(self._save_path(t), meta, {"x": p.x, "u": p.u})
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
        """On a resumed run's setup: this party's own save of round t, checked to be of this
        run and party; its ledger's records of the run charged after it are replayed."""
        from ...errors import InputError
        from ..checkpoint import read_checkpoint

        p = self.party
        path = self._save_path(t)
        try:
            meta, arrays = read_checkpoint(path)
        except InputError as exc:
            raise Refused(f"party {self.k} cannot resume from round {t}: {exc}") from None
        if (meta.get("run_id"), meta.get("party"), meta.get("t")) != \
                (self.setup.get("run_id"), self.k, t) or (p.rng is None) != (meta["rng"] is None):
            raise Refused(f"party {self.k}: its save {path!r} is not of this run's round {t}")
        p.x = np.array(arrays["x"], dtype=np.float64)
        p.u = np.array(arrays["u"], dtype=np.float64)
        p.b = meta["b"]
        if p.rng is not None:
            noise_restore(p.rng, meta["rng"])
        self.intercepts = [float(v) for v in meta["intercepts"]]
        self.saved = [t]
        if p.private:
            own = self._own_records(own_budget(self.cfg, self.setup))
            n = int(meta["run_records"])
            if len(own) < n:
                raise Refused(f"party {self.k}: its ledger holds {len(own)} records of this run, "
                              f"fewer than the {n} its save of round {t} saw")
            self.replay = [n, len(own)]
