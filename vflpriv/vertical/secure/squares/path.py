"""Least squares as a path of dp-bcfw-secure (``paths.SecurePath``): cross-products released
once per newly selected feature (docs/sensitivity.md section 4)."""
from __future__ import annotations

from ..paths import TRIPLES, SecurePath


class SquaresPath(SecurePath):
    name = "squares"
    family = "secure"
    options = {"loss": "squared", "squared_path": "fw"}
    reads = frozenset({"rnm", "split", "max_features"})
    summary = "cross-products released once per feature selected by report-noisy-max"
    nonprivate_note = "exact cross-products A_k^T a_j are revealed"

    def solve(self, data, run):
        from .solve import solve_squares

        return solve_squares(data, run)

    def spec_for(self, shape, run, budget, noise_seed, noise_key, common):
        from ....errors import InputError
        from . import roles
        from .solve import frac_bits_for, plan_noise

        if shape.K < 2:
            raise InputError("dp-bcfw-secure needs at least 2 parties")
        plan = plan_noise(shape, run)
        budget.check_plan(plan.noise_plan.event, party="server")
        cfg = run.cfg
        kwargs = dict(eta=float(cfg.eta), iterations=run.T, frac=frac_bits_for(shape, run, plan),
                      private=True, noise_plan=plan.noise_plan, feature_bound=cfg.feature_bound,
                      label_bound=cfg.label_bound, clips=plan.clips, feature_cap=run.feature_cap,
                      seed=noise_seed, noise_key=noise_key, label_party=run.label_party)
        return roles.make_spec(shape, secure_kwargs=kwargs, **common)

    def calibration(self, spec):
        return spec["secure"]["noise_plan"].to_dict()

    def bytes_line(self, sol, by_kind, fmt):
        icpt = by_kind("NoisySums")
        return (f"  secure: {sol.extra['secure_products']} products; masked blocks "
                f"{fmt(by_kind('MaskedBlock'))} (once: each party's n x p_k block, "
                f"one-time-padded, to its helper party k + 1 mod K), masked vectors "
                f"{fmt(by_kind('MaskedVector'))}, result shares {fmt(by_kind('ResultShare'))}, "
                f"dealer triples {fmt(by_kind(*TRIPLES))}, indices and selections "
                f"{fmt(by_kind('SecureIndex', 'Selections', 'SelectionsB'))}"
                + (f", intercept sums {fmt(icpt)} (once)" if icpt else ""))


PATH = SquaresPath()
