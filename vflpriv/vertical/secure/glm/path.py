"""The glm path of dp-bcfw-secure (``paths.SecurePath``): the logistic loss's derivatives under
secret sharing every round, with a helper party (docs/sensitivity.md section 5)."""
from __future__ import annotations

from ..paths import ALONE, SecurePath


class GlmPath(SecurePath):
    name = "glm"
    family = "glm"
    options = {"loss": "logistic", "logistic_path": "glm"}
    summary = "noisy scores every round, each party's pick their argmax"
    steps = ("fw", "pgd")
    takes_helper = True
    naive_label = "partial margins"
    nonprivate_note = "exact scores A_k^T l'(Ax, y) reach each party"

    def checkpoint_step(self, cfg):
        return cfg.step or self.steps[0]

    def solve(self, data, run):
        from .solve import solve_glm

        return solve_glm(data, run)

    def check_public(self, shape, cfg, run):
        from ..mpc.fourier import SigmoidSeries
        from .party import helper_of
        from .solve import check_margin_range

        check_margin_range(shape, cfg, SigmoidSeries())
        helper_of(run.label_party, shape.K, cfg.helper_party)

    def spec_for(self, shape, run, budget, noise_seed, noise_key, common):
        """The server draws no noise of its own on this path: seed and key are the parties'."""
        from ..mpc.fourier import SigmoidSeries
        from . import roles
        from .party import helper_of, ring_plan
        from .solve import _plan_noise, check_margin_range

        series = SigmoidSeries()
        cfg = run.cfg
        check_margin_range(shape, cfg, series)
        helper = helper_of(run.label_party, shape.K, cfg.helper_party)
        noise = _plan_noise(shape, run, series)
        budget.check_plan(noise.plan.event, party="server")
        ring = ring_plan(shape.n, float(cfg.feature_bound), noise.sigma, series)
        kwargs = dict(eta=float(cfg.eta), iterations=run.T, label_party=run.label_party,
                      private=True, sigma=noise.sigma, feature_bound=cfg.feature_bound,
                      clips=noise.clips, fit_intercept=bool(cfg.fit_intercept),
                      helper_party=helper, loss=run.loss.name,
                      ring=[ring.fa, ring.fm, ring.fc, ring.h],
                      series=[series.accurate, series.period_bits, series.terms,
                              series.coef_bits])
        return roles.make_spec(shape, glm_kwargs=kwargs, **common)

    def calibration(self, spec):
        return {"sigma": spec["glm"]["sigma"], "row_clips": spec["glm"]["clips"]}

    def helpers(self, K, label_party=None, helper_party=None):
        """The two holders of the derivative's shares, L and H (but k itself)."""
        from .party import offline_receivers

        return [offline_receivers(k, int(label_party), int(helper_party), int(K))
                for k in range(int(K))]

    def trust(self, K, label_party=None, helper_party=None):
        return (f"semi-honest parties and server; the helper party {helper_party} does not "
                f"collude with the label party {label_party}, and no party colludes with the "
                f"server (the dealer); {ALONE} (docs/sensitivity.md 5.4)")

    def bytes_line(self, sol, by_kind, fmt):
        return (f"  secure (logistic, label at party {sol.extra['label_party']}, helper party "
                f"{sol.extra['helper_party']}): masked blocks {fmt(by_kind('MaskedBlock'))} "
                f"(once), margin shares {fmt(by_kind('MarginShare', 'MarginKey'))}, sigmoid "
                f"factors {fmt(by_kind('MaskedFactors', 'FactorTriple'))}, intercept "
                f"{fmt(by_kind('InterceptShare'))}, score products "
                f"{fmt(by_kind('MaskedVector', 'ResultShare', 'TripleToHolder', 'TripleToPeer'))}"
                f", indices and selections {fmt(by_kind('SecureIndex', 'Selections'))}")


PATH = GlmPath()
