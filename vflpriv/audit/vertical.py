"""Audit of one DP-BCFW-AS iteration of one party (paper 004, Algorithm 2), index and feature.

The engine's own code path is audited: a :class:`vflpriv.vertical.engine.Party` with its
declared-bound clipping, built by the same constructor the server uses, answers a ``Round``
(signed index by report-noisy-max over its 2p signed scores) and a ``FeatureRequest`` (its active
column through the identity sketch plus Gaussian noise), drawing its noise from the audit's
generator.  The claim is the accountant's epsilon for exactly the events the engine records for
that party-iteration: ``ReportNoisyMax(noise, b, Delta_idx)`` and ``Gaussian(sigma, Delta_feat)``,
composed, with the sensitivities from :func:`vflpriv.vertical.privacy.sensitivities`.

Worst-case neighbours (docs/sensitivity.md, replace one row): row 0 of the party's column 0 is
+B_a on D0 and -B_a on D1, the label of row 0 is -B_y on both, every other entry is 0, and the
public aggregate puts the predictor of row 0 at the clipping radius R.  Then the score of column 0
moves by the full 2 B_a L / n (L = R + B_y for least squares) while the 2p - 2 other signed
scores stay tied at 0, and the released column moves by 2 B_a along e_0.

``dp_bcfw_intercept`` audits party 0's release of the intercept's derivative (a run with an
intercept, docs/sensitivity.md 3.1): the same Party answers a ``RoundB`` that asks for the
derivative alone and replies g_b + N(0, sigma_b^2), g_b = (1/n) sum_j clip(l'(u_j + b, y_j), +-L).
Worst-case neighbours: logistic loss with a declared ``derivative_clip`` c = 1/2 (L = c), public
predictors u = 0 and b = 0, so row 0's derivative is l'(0, -1) = +1/2 on D0 and l'(0, +1) = -1/2
on D1: g_b moves by the full Delta_b = 2 L / n.  The score is the released value.

Score of one run: +K if the D0-favoured vertex (column 0, sign -1) was chosen, -K for the
D1-favoured one (column 0, sign +1), plus the released column's entry 0 when column 0 was chosen
(K = 1e6 separates the index outcomes from the feature values).  Threshold tests on it cover the
index alone and the index together with the feature.
"""
from __future__ import annotations

from . import AuditMechanism, register

DELTA = 1e-5
INDEX_EPSILON = 1.0        # the selection alone, (2 Delta_idx / b)
FEATURE_EPSILON = 1.0      # the feature alone, at DELTA
_OFFSET = 1e6


#: signed-score count 2p per noise, fixed from a search over p = 1, 2, 4, 8 on separate samples
#: (20000 per side, seed 1; lower bounds 0.68/0.75/0.66/0.81 for Laplace, 1.13/0.95/0.69/0.52
#: for exponential noise), not chosen on the audited samples, so the bound stays valid.
PARTY_COLUMNS = {"laplace": 8, "gumbel": 8, "exponential": 1}


def make_iteration(noise: str = "laplace", n: int = 8, p: int | None = None,
                   feature_bound: float = 1.0, label_bound: float = 1.0, eta: float = 1.0,
                   noise_factor: float = 1.0) -> AuditMechanism:
    """The audited party-iteration.  ``noise_factor`` < 1 makes the party draw less noise than
    the event claims (a deliberately mis-calibrated party, for tests of the audit itself)."""
    import numpy as np

    from accounting import Composed, Gaussian, calibrate
    from vflpriv.optim.losses import SquaredLoss
    from vflpriv.vertical import messages as M
    from vflpriv.vertical.engine import Party
    from vflpriv.vertical.privacy import feature_event, index_event, sensitivities
    from vflpriv.vertical.sampling import Sampling

    p = PARTY_COLUMNS[noise] if p is None else p
    loss = SquaredLoss()
    # one party, identity sketch (largest column norm 1), feasible radius sum K * eta = eta
    sens = sensitivities(loss, feature_bound, label_bound, eta, n, 1.0)
    b = 2.0 * sens.index / INDEX_EPSILON
    sigma = calibrate(lambda s: Gaussian(s, sens.feature), FEATURE_EPSILON, DELTA,
                      decreasing=True).value
    event = Composed((index_event(noise, b, sens.index), feature_event(sigma, sens.feature)))
    y = np.zeros(n)
    y[0] = -label_bound
    q_hat = np.zeros(n)
    q_hat[0] = sens.z_bound                      # public predictor of row 0 at the clipping radius
    setup = M.Setup(0, 0, n, n, "identity", 1)

    def make_party(a00):
        A = np.zeros((n, p))
        A[0, 0] = a00
        party = Party(0, A, y, loss, eta, noise=noise, index_scale=b * noise_factor,
                      feature_sigma=sigma * noise_factor,
                      clip=(feature_bound, label_bound, sens.z_bound, sens.derivative_bound),
                      noise_seed=0)
        party.sampling = Sampling("elementary", [np.arange(p)])
        party._K = 1
        party.setup(setup, [np.arange(p)])
        return party

    parties = (make_party(feature_bound), make_party(-feature_bound))

    def sample(k, rng):
        outs = []
        for party in parties:
            party.rng = rng                    # the audit's seeded stream feeds the party's noise
            out = np.empty((k, 2))
            for r in range(k):
                s_idx = party.handle(M.Round(q_hat), 0).signed_index
                a_hat = party.handle(M.FeatureRequest(1), 0).a_hat
                i, sign = M.unsign_index(s_idx)
                out[r, 0] = (i + 1) * sign
                out[r, 1] = a_hat[0] if i == 0 else 0.0
            outs.append(out)
        return outs[0], outs[1]

    def score(out):
        idx, feat = out[:, 0], out[:, 1]
        return _OFFSET * ((idx == -1).astype(float) - (idx == 1)) + feat * (np.abs(idx) == 1)

    return AuditMechanism(
        "dp_bcfw_iteration", event, DELTA, sample, score=score,
        description=f"one DP-BCFW-AS party-iteration (engine Party): {noise} report-noisy-max "
        f"over {2 * p} signed scores (b={b:.4g}, sensitivity {sens.index:.4g}) + identity-sketch "
        f"feature with Gaussian noise (sigma={sigma:.4g}, sensitivity {sens.feature:.4g}); "
        "row 0 flipped")


register("dp_bcfw_iteration")(lambda: make_iteration("laplace"))


def make_intercept(n: int = 4, epsilon: float = 1.0, derivative_clip: float = 0.5,
                   noise_factor: float = 1.0) -> AuditMechanism:
    """Party 0's noisy intercept derivative (module docstring); the claim is the event the engine
    charges, ``intercept_event(sigma_b, Delta_b)``, with sigma_b calibrated to ``epsilon`` at
    DELTA.  ``noise_factor`` < 1: a party drawing less noise than claimed."""
    import numpy as np

    from accounting import calibrate
    from vflpriv.optim.intercept import bound
    from vflpriv.optim.losses import LogisticLoss
    from vflpriv.vertical import messages as M
    from vflpriv.vertical.engine import Party
    from vflpriv.vertical.privacy import intercept_event, sensitivities
    from vflpriv.vertical.sampling import Sampling

    loss, eta, Ba, By = LogisticLoss(), 1.0, 1.0, 1.0
    sens = sensitivities(loss, Ba, By, eta, n, 1.0, derivative_clip, bound(loss, By))
    sigma = calibrate(lambda s: intercept_event(s, sens.intercept), epsilon, DELTA,
                      decreasing=True).value
    event = intercept_event(sigma, sens.intercept)
    setup = M.Setup(0, 0, n, n, "identity", 1)
    ask = M.RoundB(np.zeros(n), 0.0, M.RELEASE_INTERCEPT)     # u = 0, b = 0: public

    def make_party(y0):
        y = np.ones(n)
        y[0] = y0
        party = Party(0, np.zeros((n, 1)), y, loss, eta, noise="laplace", index_scale=1.0,
                      feature_sigma=1.0, clip=(Ba, By, sens.z_bound, sens.derivative_bound),
                      noise_seed=0, intercept_sigma=sigma * noise_factor)
        party.sampling = Sampling("elementary", [np.arange(1)])
        party._K = 1
        party.setup(setup, [np.arange(1)])
        return party

    parties = (make_party(-1.0), make_party(1.0))

    def sample(k, rng):
        outs = []
        for party in parties:
            party.rng = rng
            outs.append(np.array([party.handle(ask, 0).g_b for _ in range(k)]))
        return outs[0], outs[1]

    return AuditMechanism(
        "dp_bcfw_intercept", event, DELTA, sample, score=None,
        description=f"party 0's intercept derivative in a DP-BCFW-AS round (engine Party, "
        f"RoundB -> InterceptGrad): Gaussian sigma={sigma:.4g}, sensitivity "
        f"{sens.intercept:.4g} (2 L / n, L = derivative_clip {derivative_clip:g}); y_0 flipped "
        "at u = b = 0")


register("dp_bcfw_intercept")(lambda: make_intercept())
