"""Audit of the horizontal local DP step: LDP-FedP3's (paper 002, Alg. 5 as made accountable in
notes B.8; entry ``fedp3_local_step``) and the shared runtime's, which every FedAvg / FedProx /
SCAFFOLD / FedDyn run with ``epsilon`` finite uses (entry ``horizontal_local_step``, through
:func:`vflpriv.horizontal.local.private_step_gradient`, the function ``local_train`` calls; the
strategy's correction, the elastic-net terms, the clip and the weight decay come after the release
and are post-processing).  Both use the same worst-case pair and score, described below.

One local step of a client is a DP-SGD step: a Poisson minibatch (every record joins with
probability q), per-sample gradients clipped to L2 norm C, N(0, z^2 C^2 I) added to the clipped
sum, divided by the expected batch size b.  The engine records it as
``PoissonSubsampledGaussian(z, q)`` with respect to the client's own records (add/remove
neighbours); the claim is the accountant's epsilon for that event.

The release is computed by the engine's own functions in :mod:`vflpriv.horizontal.fedp3`, the
ones ``FedP3._train_client`` calls: ``poisson_batch`` draws the minibatch, ``clipped_gradient_sum``
computes the data-dependent part (torch.func per-sample gradients of the model, clipping) and
``noisy_average`` adds the noise and divides.  ``clipped_gradient_sum`` is deterministic given the
batch, so it is evaluated once per distinct batch (there are two: empty and {x*}) and reused;
every sample draws its own minibatch and its own noise.  That keeps 2 x 1e5 releases at a few
seconds where calling ``private_gradient`` (vmap per call) each time took about 200 s.

Worst-case neighbours (add/remove one record): D0 is the empty data set and D1 = {x*}, a record
whose gradient norm exceeds C, so the clipped gradient has norm exactly C.  Any other records
would contribute the same clipped sum to both sides (once the minibatch is drawn) and cannot
help the distinguisher.  The sampling rate q is the event's, held fixed for both data sets, as
the accountant assumes (the engine derives it from the public record count, q = b / m).

Score of one run: the projection of the released gradient on u = clip_C(grad f(x*)) / C, times
b / C.  The two output laws differ only along u, so the projection is a sufficient statistic:
D0 gives N(0, z^2), D1 gives (1 - q) N(0, z^2) + q N(1, z^2).

Parameters (q = 0.5, claim 2 at delta 1e-5) were fixed from a search on separate samples
(simulated scores, 1e5 per side, seed 123): lower bound / claim 0.45 at q = 0.5 claim 1, 0.43 at
claim 2, 0.54 at claim 4; 0.33-0.45 at q = 0.25; 0.13-0.35 at q = 0.1.  q = 0.5 keeps the
subsampling in play with a usable fraction; claim 2 keeps z (1.51) near the values training uses.
"""
from __future__ import annotations

from . import AuditMechanism, register_mechanism, register_unavailable

DELTA = 1e-5
SAMPLE_RATE = 0.5
TARGET_EPSILON = 2.0
CLIP = 0.1
EXPECTED_BATCH = 4.0


def make_local_step(q: float = SAMPLE_RATE, epsilon: float = TARGET_EPSILON,
                    clip: float = CLIP, noise_factor: float = 1.0,
                    clip_factor: float = 1.0) -> AuditMechanism:
    """The audited LDP-FedP3 local step.

    ``noise_factor`` < 1 makes the client draw less noise than the event claims and
    ``clip_factor`` > 1 makes it clip at ``clip_factor * C`` while the noise and the claim use C
    (deliberately mis-calibrated clients, for tests of the audit itself).
    """
    import numpy as np
    import torch

    from accounting import PoissonSubsampledGaussian, calibrate
    from vflpriv.horizontal.fedp3 import MLP, clipped_gradient_sum, flat_vector, noisy_average, \
        per_sample_gradients, poisson_batch

    z = calibrate(lambda s: PoissonSubsampledGaussian(s, q), epsilon, DELTA,
                  decreasing=True).value
    event = PoissonSubsampledGaussian(z, q)

    # A small model with fixed weights (its own generator: the global torch seed is untouched),
    # trained entirely (every layer in L_i), and one record with a large loss.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        net = MLP(4, 2, hidden=(4,))
    trainable = {k: v.detach().clone() for k, v in net.named_parameters()}
    fixed: dict = {}
    x_star = torch.full((1, 4), 3.0, dtype=torch.float32)
    out = net(x_star)
    y_star = torch.tensor([int(out.argmin(1))])          # the class the model likes least
    raw = per_sample_gradients(net, trainable, fixed, x_star, y_star)
    norm = float(flat_vector(raw).norm())
    if norm <= clip * clip_factor:
        raise ValueError(f"the audit record's gradient norm {norm:.4g} does not exceed the "
                         f"clipping norm {clip * clip_factor:.4g}; the pair would not be worst case")
    data = {0: (x_star[:0], y_star[:0]), 1: (x_star, y_star)}
    u = flat_vector(clipped_gradient_sum(net, trainable, fixed, x_star, y_star, clip=clip)) / clip

    def sample(k, rng):
        before = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            outs = []
            for side in (0, 1):
                X, y = data[side]
                m = X.shape[0]
                noise_gen = np.random.default_rng(int(rng.integers(2 ** 62)))
                sums = {}                      # batch -> clipped sum (deterministic given it)
                rows = np.empty((k, u.numel()))
                for r in range(k):
                    batch = poisson_batch(rng, m, q)
                    key = batch.tobytes()
                    if key not in sums:
                        sums[key] = clipped_gradient_sum(net, trainable, fixed, X[batch],
                                                         y[batch], clip=clip * clip_factor)
                    g = noisy_average(sums[key], clip=clip, noise_multiplier=z * noise_factor,
                                      expected_batch=EXPECTED_BATCH, generator=noise_gen)
                    rows[r] = flat_vector(g).numpy()
                outs.append(rows)
            return outs[0], outs[1]
        finally:
            torch.set_num_threads(before)

    direction = u.numpy().astype(float)

    def score(rows):
        return (rows @ direction) * (EXPECTED_BATCH / clip)

    return AuditMechanism(
        "fedp3_local_step", event, DELTA, sample, score=score,
        description=f"one LDP-FedP3 local step (DP-SGD through vflpriv.horizontal.fedp3): Poisson "
        f"minibatch q={q:g}, per-sample clipping C={clip:g} (record's gradient norm {norm:.3g}), "
        f"Gaussian noise z={z:.4g}; empty data set vs one record")


def make_runtime_step(q: float = SAMPLE_RATE, epsilon: float = TARGET_EPSILON,
                      clip: float = CLIP, noise_factor: float = 1.0) -> AuditMechanism:
    """The audited local DP step of the horizontal runtime (``noise_factor`` < 1: a client that
    draws less noise than claimed, for tests of the audit)."""
    import numpy as np
    import torch

    from accounting import PoissonSubsampledGaussian, calibrate
    from vflpriv.horizontal.local import FlatModel, private_step_gradient
    from vflpriv.horizontal.models import MLP

    z = calibrate(lambda s: PoissonSubsampledGaussian(s, q), epsilon, DELTA,
                  decreasing=True).value
    event = PoissonSubsampledGaussian(z, q)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = FlatModel(MLP(4, 2, hidden=(4,)))
    theta = model.flat()
    x_star = torch.full((1, 4), 3.0, dtype=torch.float32)
    y_star = torch.tensor([int(model.logits(theta, x_star).argmin(1))])
    raw = model.clipped_sum(theta, x_star, y_star, clip=float("inf"))
    norm = float(torch.cat([v.reshape(-1) for v in raw.values()]).norm())
    if norm <= clip:
        raise ValueError(f"the audit record's gradient norm {norm:.4g} does not exceed the "
                         f"clipping norm {clip:.4g}; the pair would not be worst case")
    u = torch.cat([v.reshape(-1) for v in model.clipped_sum(theta, x_star, y_star,
                                                             clip=clip).values()]) / clip
    data = {0: (x_star[:0], y_star[:0]), 1: (x_star, y_star)}

    def sample(k, rng):
        before = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            outs = []
            for side in (0, 1):
                X, y = data[side]
                gen = np.random.default_rng(int(rng.integers(2 ** 62)))
                cache: dict = {}
                rows = np.empty((k, u.numel()))
                for r in range(k):
                    rows[r] = private_step_gradient(
                        model, theta, X, y, q=q, clip=clip, noise_multiplier=z * noise_factor,
                        expected_batch=EXPECTED_BATCH, rng=rng, generator=gen,
                        cache=cache).numpy()
                outs.append(rows)
            return outs[0], outs[1]
        finally:
            torch.set_num_threads(before)

    direction = u.numpy().astype(float)

    def score(rows):
        return (rows @ direction) * (EXPECTED_BATCH / clip)

    return AuditMechanism(
        "horizontal_local_step", event, DELTA, sample, score=score,
        description=f"one local DP step of the horizontal runtime (FedAvg / FedProx / SCAFFOLD / "
        f"FedDyn with local DP, vflpriv.horizontal.local): Poisson minibatch q={q:g}, per-sample "
        f"clipping C={clip:g} (record's gradient norm {norm:.3g}), Gaussian noise z={z:.4g}; "
        f"empty data set vs one record")


def _available() -> str | None:
    import importlib.util

    try:
        found = importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):      # a broken or blocked installation counts as absent
        found = False
    return None if found else "needs torch (pip install 'vflpriv[torch]')"


if _available() is None:
    register_mechanism("fedp3_local_step", make_local_step)
    register_mechanism("horizontal_local_step", make_runtime_step)
else:
    register_unavailable("fedp3_local_step", _available())
    register_unavailable("horizontal_local_step", _available())
