"""The ssp path of dp-bcfw-secure (``paths.SecurePath``; the logistic loss's default): the
loss expansion's sufficient statistics released once, the model fitted from them
(docs/sensitivity.md 4.10)."""
from __future__ import annotations

from ....errors import InputError
from ..paths import ALONE, SecurePath


class SspPath(SecurePath):
    name = "ssp"
    family = "ssp"
    options = {"loss": "logistic", "logistic_path": "ssp"}
    rounds = False
    summary = "the loss expansion's statistics released once, no selection"
    ridge_note = ("no l1 ball: the ssp path's ridge (lambda = sigma sqrt(d + 2), from the noise) "
                  "regularizes; an explicit eta bounds each party's l1 norm")
    nonprivate_note = "the exact moments of the rows reach the server"

    def check_config(self, cfg, how):
        if cfg.loss_fn.name == "squared":
            return          # the squared loss: eta 'auto' is the rule's l1 radius, no helper
        if cfg.step is not None:
            raise InputError(f"step is for dp-bcfw-secure's logistic glm path (its rounds; "
                             f"--logistic-path glm); {how} is one release and a fit, got step "
                             f"{cfg.step!r}")
        if cfg.reference and cfg.eta == "auto":
            raise InputError(f"reference certifies the optimum over the run's l1 balls; {how} "
                             f"with eta 'auto' fits without any (a ridge): give --eta (the "
                             f"radius per party its fit then keeps) or --logistic-path glm")
        if cfg.helper_party is not None:
            raise InputError(f"{how} has no helper party (it runs the least-squares "
                             f"products; --logistic-path glm has one), got helper_party "
                             f"{cfg.helper_party!r}")

    def ridge_for(self, cfg):
        # the squared loss fits over the public rule's l1 balls when eta is 'auto': a ridge
        # floor of the noise's spectral scale swamped the rows' curvature where the release
        # otherwise learns (docs/vertical.md, "The squared loss's one release")
        return None if cfg.loss_fn.name == "squared" else self.ridge_note

    def check_options(self, cfg):
        from .solve import check_options

        check_options(cfg)

    def solve(self, data, run):
        from .solve import solve_ssp

        return solve_ssp(data, run)

    def check_public(self, shape, cfg, run):
        self.check_options(cfg)

    def spec_for(self, shape, run, budget, noise_seed, noise_key, common):
        """Its one release planned for n rows and checked against the server's ledger; the
        parties draw its noise (their own seeds), so the server's seed and key go unused."""
        from . import roles
        from .solve import _Plan, ring_and_fit

        if shape.K < 2:
            raise InputError("dp-bcfw-secure needs at least 2 parties")
        plan = _Plan(shape, run)
        budget.check_plan(plan.event, party="server")
        frac, fit = ring_and_fit(plan, run.cfg, shape.n, shape.d, run.loss.name)
        return roles.make_spec(shape, ssp_kwargs=roles.ssp_kwargs(run, plan, frac, fit, shape.K),
                               **common)

    def calibration(self, spec):
        """sigma and the row clips in the data's units, with the public scale s."""
        s = spec["ssp"]
        return {"sigma": s["sigma"], "row_clips": [c / s["scale"] for c in s["clips"]],
                "scale": s["scale"]}

    def rounds_text(self, sol):
        # no rounds: one release, then the server's fit (its solver's iterations)
        its = sol.extra.get("fit_iterations")
        return ("ssp path (one release, then the fit: "
                + (f"{its} solver iterations)" if its else "closed form)"))

    def helpers(self, K, label_party=None, helper_party=None) -> list:
        """Nobody: every masked block goes to the server only, and a party receives keys only
        (``gram.py``); entry k is empty."""
        return [[] for _ in range(int(K))]

    def trust(self, K, label_party=None, helper_party=None) -> str:
        return ("semi-honest parties and server; the server colludes with no party (it receives "
                "every party's masked block, and every party holds every block's mask key); no "
                "coalition of parties is excluded: a party receives keys only; "
                f"{ALONE} (docs/sensitivity.md 4.10.2)")

    def bytes_line(self, sol, by_kind, fmt):
        what = ("least squares" if sol.extra.get("loss") == "squared"
                else "logistic by its expansion at 0")
        return (f"  secure ({what}, the statistics sum_r z_r z_r^T "
                f"released once; label at party {sol.extra['label_party']}, no rounds): masked "
                f"blocks {fmt(by_kind('MaskedBlock'))} (each party's once, to the server), keys "
                f"{fmt(by_kind('GramKey'))}, parts of the cross-blocks "
                f"{fmt(by_kind('GramShare'))}, the parties' statistics "
                f"{fmt(by_kind('GramPart'))}")


PATH = SspPath()
