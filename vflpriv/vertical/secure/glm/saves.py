"""A party's own saves of the logistic path over a link (checkpoints on Flower; docs/vertical.md,
"Checkpoints on Flower"), and its ledger's replay on a resumed run: the bookkeeping is
:class:`~.saves.PartySaves` (shared with least squares); here what a logistic party saves, and
its charge of each round through its own filter.
"""
from __future__ import annotations

import numpy as np

from ....noise import restore as noise_restore
from ....runtime.roles import own_budget
from ..checkpoints.saves import PartySaves


class GlmSaves(PartySaves):
    """Mixed into :class:`~.glm_remote.GlmPartyRole` (``self.party``, ``self.cfg``,
    ``self.setup``, ``self.k``, ``self.event``, ``self.intercepts``, ``self.saved``,
    ``self.replay``)."""

    def _open_budget(self):
        """The party's own filter; on a resumed run, while records of the interrupted run
        remain to be replayed, a ReplayFilter over them (``checkpoint.ReplayFilter``): a
        redone round matches its recorded twin instead of being charged again."""
        self.party.budget = self._replaying(own_budget(self.cfg, self.setup))
        self.party.round_event = self.event

    def _charge(self, t):
        """Round t's charge to the party's own ledger (replayed on a resumed run)."""
        p = self.party
        if not p.private:
            return
        self._open_budget()
        p.charge(t)
        self._replayed(p.budget)

    def _saved_state(self):
        """x_k, u_k, its intercept and their history."""
        p = self.party
        return {"b": p.b, "intercepts": list(self.intercepts)}, {"x": p.x, "u": p.u}

    def _set_saved_state(self, meta, arrays):
        p = self.party
        p.x = np.array(arrays["x"], dtype=np.float64)
        p.u = np.array(arrays["u"], dtype=np.float64)
        p.b = meta["b"]
        if p.rng is not None:
            noise_restore(p.rng, meta["rng"])
        self.intercepts = [float(v) for v in meta["intercepts"]]

