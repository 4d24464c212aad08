"""Audits of the sparse methods' private releases (vflpriv.sparse.privacy; proofs in
docs/sparse.md, "Privacy").

``sparse_client_round``: one client-level round with Poisson participation.  The engine's own
functions run: :meth:`Participation.sample` draws who joins (rate q), :meth:`PrivacyPlan.clip_updates`
clips each participant's update to C around the public broadcast, :meth:`PrivacyPlan.noisy_mean`
adds N(0, z^2 C^2 I) to the clipped sum and divides by q N.  The event is the one the plan charges
per round, ``PoissonSubsampledGaussian(z, q)`` with z calibrated by the accountant.
Neighbours (add/remove one client's contribution): on D1 the target client's update is 3C e_0
(clipped to C e_0); on D0 its update is zero (a slot that contributes nothing).  Three other
clients have fixed updates orthogonal to e_0, so the projection of the released mean on e_0,
times q N / C, is a sufficient statistic: N(0, z^2) on D0 and (1 - q) N(0, z^2) + q N(1, z^2)
on D1 (the same law as the LDP-FedP3 step, hence the same q = 0.5, claim 2).

``sparse_record_step``: one record-level DP-SGD step of a client through
:meth:`DenseShards.private_grad` (Poisson records at rate q, per-sample clipping, Gaussian noise
on the clipped sum).  D1 holds a record x* whose gradient norm exceeds C; on D0 that record is
replaced by a record with zero features, whose gradient is 0 whether or not it is sampled, which
is the add/remove pair with the client's public count held fixed (as the engine holds it).
Score: the projection of the released gradient on the direction of x*'s clipped gradient, times
q n / C.
"""
from __future__ import annotations

from . import AuditMechanism, register

DELTA = 1e-5
TARGET_EPSILON = 2.0
SAMPLE_RATE = 0.5
CLIP = 1.0


class _Ctx:
    def __init__(self, N, rng):
        from types import SimpleNamespace

        self.shards = SimpleNamespace(N=N)
        self.secret_rng = rng


@register("sparse_client_round")
def client_round(q: float = SAMPLE_RATE, epsilon: float = TARGET_EPSILON,
                 noise_factor: float = 1.0) -> AuditMechanism:
    import numpy as np

    from vflpriv.sparse.privacy import PrivacyPlan
    from vflpriv.sparse.runtime import Participation

    N, d = 4, 5
    part = Participation("poisson", q)
    plan = PrivacyPlan("client", epsilon, DELTA, CLIP, rounds=1, local_steps=1,
                       participation=part, counts=np.full(N, 10))
    event = plan.round_event()
    ref = np.zeros(d)
    others = np.array([[0, 1, 0, 0, 0], [0, 0, 2, 0, 0], [0, 0, 0, 0.5, 0.5]], dtype=float)
    target = {0: np.zeros(d), 1: 3.0 * CLIP * np.eye(d)[0]}
    z_true = plan.z
    plan.z = z_true * noise_factor          # a mis-calibrated aggregator, for tests

    def sample(n, rng):
        outs = []
        for side in (0, 1):
            rows = np.empty((n, d))
            for r in range(n):
                S = part.sample(N, rng)
                V = np.array([target[side] if i == 0 else others[i - 1] for i in S]).reshape(-1, d)
                V = plan.clip_updates(V, ref)
                rows[r] = plan.noisy_mean(V, ref, _Ctx(N, rng))
            outs.append(rows)
        return outs[0], outs[1]

    return AuditMechanism(
        "sparse_client_round", event, DELTA, sample,
        score=lambda rows: rows[:, 0] * (q * N / CLIP),
        description=f"one client-level round of the sparse methods: Poisson participation "
        f"q={q:g}, updates clipped to C={CLIP:g}, N(0, (z C)^2), z={z_true:.4g}; a client's "
        "update 3C e_0 vs nothing")


@register("sparse_record_step")
def record_step(q: float = SAMPLE_RATE, epsilon: float = TARGET_EPSILON) -> AuditMechanism:
    import numpy as np

    from accounting import PoissonSubsampledGaussian, calibrate
    from vflpriv.sparse.losses import SquaredLoss
    from vflpriv.sparse.shards import DenseShards

    z = calibrate(lambda s: PoissonSubsampledGaussian(s, q), epsilon, DELTA,
                  decreasing=True).value
    event = PoissonSubsampledGaussian(z, q)
    d = 3
    x_star = np.array([[2.0, 1.0, 0.0]])
    shards = {0: DenseShards([(np.zeros((1, d)), np.array([0.0]))], SquaredLoss()),
              1: DenseShards([(x_star, np.array([-3.0]))], SquaredLoss())}
    X = np.zeros((1, d))
    clients = np.array([0])
    g = x_star[0] * 3.0                            # grad of (z^T x - y)^2 / 2 at x = 0 is -y z
    u = g / np.linalg.norm(g)
    qa = np.array([q])

    def sample(n, rng):
        outs = []
        for side in (0, 1):
            rows = np.empty((n, d))
            for r in range(n):
                rows[r] = shards[side].private_grad(X, clients, qa, CLIP,
                                                    np.array([[z * CLIP]]), rng)[0]
            outs.append(rows)
        return outs[0], outs[1]

    return AuditMechanism(
        "sparse_record_step", event, DELTA, sample,
        score=lambda rows: (rows @ u) * (q / CLIP),
        description=f"one record-level DP-SGD step of a sparse-method client "
        f"(DenseShards.private_grad): Poisson q={q:g}, clip C={CLIP:g}, z={z:.4g}; a record "
        "with gradient norm 3|x*| > C vs a zero record")
