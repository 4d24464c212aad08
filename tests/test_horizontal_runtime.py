"""The horizontal runtime and the FedElasticNet family (paper 001) against independent references.

References are numpy / scipy re-implementations of softmax regression (a convex problem): one
local full-batch step with full participation is centralized gradient descent (FedAvg, FedProx,
SCAFFOLD, and the prox step's closed form); SCAFFOLD's option-II control variate equals the client's
gradient at the round's model; FedDyn reaches the minimizer of the regularized global objective (its
fixed point) where FedAvg with many local steps drifts; FedDyn keeps h = mean_k g_k.
"""
import json
import math
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from vflpriv.cli.main import main  # noqa: E402
from vflpriv.horizontal import wire  # noqa: E402
from vflpriv.horizontal.fedavg import FedAvg, FedProx  # noqa: E402
from vflpriv.horizontal.feddyn import FedDyn  # noqa: E402
from vflpriv.horizontal.local import LocalConfig  # noqa: E402
from vflpriv.horizontal.metering import entropy_bits  # noqa: E402
from vflpriv.horizontal.models import MLP, FedDynCNN, feddyn_mlp  # noqa: E402
from vflpriv.horizontal.participation import feddyn_sample  # noqa: E402
from vflpriv.horizontal.partition import FederatedData, feddyn_partition  # noqa: E402
from vflpriv.horizontal.runtime import run  # noqa: E402
from vflpriv.horizontal.scaffold import Scaffold  # noqa: E402
from vflpriv.horizontal.strategy import threshold  # noqa: E402

torch.set_num_threads(1)
P, C = 5, 3          # features, classes


def _data(sizes=(12, 20, 16), seed=0, skew=True):
    """Clients with different label mixes (heterogeneous), one global test set."""
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(P, C))
    clients = []
    for k, n in enumerate(sizes):
        X = (rng.normal(size=(n, P)) + (k - 1.0) * skew).astype(np.float32)
        logits = X @ W + rng.normal(scale=1.0, size=(n, C))
        clients.append((X, logits.argmax(1).astype(np.int64)))
    Xt = rng.normal(size=(30, P)).astype(np.float32)
    return FederatedData(clients, Xt, (Xt @ W).argmax(1).astype(np.int64), C, None)


def _model():
    return MLP(P, C, hidden=())          # softmax regression: ffc.weight (C x P), ffc.bias (C)


def _theta0(seed):
    torch.manual_seed(seed)
    return torch.cat([v.detach().reshape(-1) for v in _model().parameters()]).double().numpy()


def _grad(theta, X, y):
    """numpy gradient of the mean cross-entropy of softmax regression at flat theta."""
    W, b = theta[:C * P].reshape(C, P), theta[C * P:]
    z = X.astype(np.float64) @ W.T + b
    z -= z.max(1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(1, keepdims=True)
    p[np.arange(len(y)), y] -= 1
    p /= len(y)
    return np.concatenate([(p.T @ X).ravel(), p.sum(0)])


def _loss(theta, X, y):
    W, b = theta[:C * P].reshape(C, P), theta[C * P:]
    z = X.astype(np.float64) @ W.T + b
    m = z.max(1, keepdims=True)
    return float(np.mean(m[:, 0] + np.log(np.exp(z - m).sum(1)) - z[np.arange(len(y)), y]))


def _one_step(lr, **kw):
    return dict(local=LocalConfig(epochs=1, batch_size=1000, lr=lr, weight_decay=0.0,
                                  grad_clip=math.inf, **kw))


@pytest.mark.parametrize("strategy", [FedAvg(), FedProx(lambda2=0.3),
                                      FedAvg(lambda1=1e-3, lambda2=1e-2)])
def test_one_local_step_full_participation_is_gradient_descent(strategy):
    data = _data()
    res = run(strategy, data, _model, rounds=4, participation=1.0, seed=1, **_one_step(0.5))
    theta = _theta0(1)
    n = np.array([len(y) for _, y in data.clients], dtype=float)
    for _ in range(4):     # the weighted mean of the client gradients = the pooled gradient
        g = sum(w * _grad(theta, X, y) for w, (X, y) in zip(n / n.sum(), data.clients))
        theta = theta - 0.5 * g
    np.testing.assert_allclose(res.theta.numpy(), theta, atol=2e-5)


def test_prox_step_is_soft_thresholding():
    data = _data()
    lr, l1, l2 = 0.5, 0.02, 0.3
    res = run(FedAvg(lambda1=l1, lambda2=l2), data, _model, rounds=2, seed=2,
              **_one_step(lr, step="prox"))
    theta = _theta0(2)
    n = np.array([len(y) for _, y in data.clients], dtype=float)
    for _ in range(2):
        ups = []
        for X, y in data.clients:
            u = -lr * _grad(theta, X, y)
            ups.append(np.sign(u) * np.maximum(np.abs(u) - lr * l1, 0) / (1 + lr * l2))
        theta = theta + sum(w * u for w, u in zip(n / n.sum(), ups))
    np.testing.assert_allclose(res.theta.numpy(), theta, atol=2e-5)


def test_scaffold_one_step_is_gradient_descent_and_control_variates_are_gradients():
    data = _data()
    res = run(Scaffold(), data, _model, rounds=3, seed=3, **_one_step(0.4))
    theta, prev = _theta0(3), None
    for _ in range(3):
        prev = theta
        theta = theta - 0.4 * np.mean([_grad(theta, X, y) for X, y in data.clients], axis=0)
    np.testing.assert_allclose(res.theta.numpy(), theta, atol=2e-5)
    # option II with one full-batch step: c_k = grad L_k(theta^{t-1}); c = mean_k c_k
    for st, (X, y) in zip(res.client_states, data.clients):
        np.testing.assert_allclose(st["c"].numpy(), _grad(prev, X, y), atol=1e-4)


def test_scaffold_keeps_c_the_mean_of_client_variates_under_partial_participation():
    data = _data(sizes=(10,) * 6)
    strat = Scaffold(lambda1=1e-3, threshold=1e-3)
    res = run(strat, data, _model, rounds=6, participation=0.4, seed=4,
              local=LocalConfig(epochs=2, batch_size=4, lr=0.1))
    assert 0 < sum(len(p) for p in res.participants) < 36
    mean_ck = np.mean([st["c"].numpy() for st in res.client_states], axis=0)
    np.testing.assert_allclose(strat.c.numpy(), mean_ck, atol=1e-6)


def test_feddyn_keeps_h_the_mean_of_client_states():
    data = _data(sizes=(10, 14, 9, 12, 11))        # unbalanced: lambda2_k = lambda2 n_bar / n_k
    strat = FedDyn(lambda2=0.1, lambda1=1e-3, threshold=2e-3)
    res = run(strat, data, _model, rounds=6, participation=0.5, seed=5,
              local=LocalConfig(epochs=2, batch_size=4, lr=0.1))
    mean_g = np.mean([st["g"].numpy() for st in res.client_states], axis=0)
    np.testing.assert_allclose(strat.h.numpy(), mean_g, atol=1e-6)


def test_feddyn_reaches_the_global_minimizer_where_fedavg_drifts():
    from scipy.optimize import minimize
    data = _data(sizes=(20, 20, 20))
    wd = 0.05

    def objective(theta):        # R(theta) = mean_k L_k + (wd/2)||theta||^2 (balanced clients)
        f = np.mean([_loss(theta, X, y) for X, y in data.clients]) + wd / 2 * theta @ theta
        g = np.mean([_grad(theta, X, y) for X, y in data.clients], axis=0) + wd * theta
        return f, g
    star = minimize(objective, np.zeros(C * P + C), jac=True, method="L-BFGS-B",
                    options={"gtol": 1e-10, "ftol": 1e-14, "maxiter": 5000}).x
    local = LocalConfig(epochs=10, batch_size=1000, lr=0.3, weight_decay=wd, grad_clip=math.inf)
    dyn = run(FedDyn(lambda2=0.3), data, _model, rounds=60, seed=6, local=local)
    avg = run(FedAvg(), data, _model, rounds=60, seed=6, local=local)
    err_dyn = np.linalg.norm(dyn.theta.numpy() - star)
    err_avg = np.linalg.norm(avg.theta.numpy() - star)
    assert err_dyn < 1e-3 and err_avg > 20 * err_dyn


def test_threshold_and_sign_zero():
    d = torch.tensor([0.0, 1e-3, -1e-3, 2e-3, -0.5])
    out = threshold(d, 1e-3)
    assert out.tolist() == torch.tensor([0.0, 0.0, 0.0, 2e-3, -0.5]).tolist()
    assert not torch.signbit(out[:3]).any()                 # no -0.0
    s = FedDyn(lambda2=1.0, lambda1=0.5, threshold=1e-3)
    s.initialize(torch.zeros(5), [1])
    st = s.init_client(0, torch.zeros(5))
    s.client_reply(0, st, [torch.zeros(5)], d, 1, 0.1)
    # g = -lambda2 Delta - lambda1 sign(Delta); sign(0) = 0 on the zeroed entries
    kept = out.numpy()
    np.testing.assert_allclose(st["g"].numpy(), -kept - 0.5 * np.sign(kept), atol=1e-7)


# -- the three counts ---------------------------------------------------------------------------

def test_feddyn_sampler_and_baseline_nnz_formula_reproduce_table2():
    counts = [sum(len(feddyn_sample(100, 0.1, t)) for t in range(T)) for T in (100, 200, 500)]
    assert counts == [1019, 2053, 5070]
    d_mnist = sum(p.numel() for p in feddyn_mlp().parameters())
    d_cifar = sum(p.numel() for p in FedDynCNN().parameters())
    assert (d_mnist, d_cifar) == (199_210, 797_962)
    assert round(d_mnist * 1019 / 1e7, 2) == 20.30          # Table 2, MNIST, FedProx / FedDyn
    assert round(d_cifar * 2053 / 1e7, 2) == 163.82         # CIFAR-10, 200 rounds
    assert round(2 * d_cifar * 2053 / 1e7, 2) == 327.64     # SCAFFOLD sends Delta and Delta c


@pytest.mark.parametrize("strategy,factor", [(FedAvg(), 1), (Scaffold(), 2)])
def test_dense_methods_send_d_times_participants(strategy, factor):
    data = _data(sizes=(10,) * 8)
    res = run(strategy, data, _model, rounds=5, participation=0.3, seed=7,
              local=LocalConfig(epochs=1, batch_size=5, lr=0.1))
    d = C * P + C
    total = sum(len(p) for p in res.participants)
    assert total == sum(len(feddyn_sample(8, 0.3, t, seed=7)) for t in range(5))
    assert res.meter.nonzeros == factor * d * total
    # dense vectors: message header 7 + per vector (entry header 8 + 4 d) bytes per message
    assert res.meter.uplink_bytes == total * (7 + factor * (8 + 4 * d))


def test_entropy_on_a_hand_computed_vector():
    v = [0.0, 0.004, 0.012, 0.011, -0.02, 0.5, 0.5, 0.5, 0.006]
    # bins of width 0.01 centred on multiples of 0.01: 0, 0, 1, 1, -2, 50, 50, 50, 1
    # p = {0: 2/9, 1: 3/9, -2: 1/9, 50: 3/9}
    h = -(2 / 9 * math.log2(2 / 9) + 2 * 3 / 9 * math.log2(3 / 9) + 1 / 9 * math.log2(1 / 9))
    assert entropy_bits(v) == pytest.approx(h, abs=1e-12)
    # floor bins [k w, (k+1) w): 0, 0, 1, 1, -2, 50, 50, 50, 0 -> {0: 3, 1: 2, -2: 1, 50: 3}
    hf = -(2 * 3 / 9 * math.log2(3 / 9) + 2 / 9 * math.log2(2 / 9) + 1 / 9 * math.log2(1 / 9))
    assert entropy_bits(v, binning="floor") == pytest.approx(hf, abs=1e-12)
    assert entropy_bits([0.3] * 7) == 0.0


@pytest.mark.parametrize("d,k", [(100, 0), (100, 3), (100, 30), (1000, 10), (1000, 400)])
def test_bytes_are_the_encoded_length_of_the_smallest_encoding(d, k):
    rng = np.random.default_rng(d + k)
    v = np.zeros(d, np.float32)
    v[rng.choice(d, k, replace=False)] = rng.normal(size=k).astype(np.float32)
    msg = wire.encode_vectors([v, np.ones(d, np.float32)], wire.UP)
    best = min(4 * d, 4 + 8 * k, 4 + (d + 7) // 8 + 4 * k)
    assert len(msg) == 7 + (8 + best) + (8 + 4 * d)        # header 3s B B H, entries H B B I
    out = wire.decode_vectors(msg)
    assert np.array_equal(out[0], v) and np.array_equal(out[1], np.ones(d, np.float32))


def test_elastic_net_reduces_nonzeros_and_threshold_holds():
    data = _data(sizes=(15,) * 4)
    kw = dict(rounds=4, seed=8, local=LocalConfig(epochs=2, batch_size=5, lr=0.1))
    base = run(FedDyn(lambda2=0.05), data, _model, **kw)
    en = run(FedDyn(lambda2=0.05, lambda1=1e-3, threshold=5e-3), data, _model, **kw)
    assert en.meter.nonzeros < base.meter.nonzeros
    assert en.meter.entropy["pooled/round"] <= base.meter.entropy["pooled/round"] + 1e-9


# -- data, local DP, command line -------------------------------------------------------------

def test_feddyn_partition_is_a_balanced_disjoint_cover():
    y = np.repeat(np.arange(4), 25)
    for alpha in (math.inf, 0.3):
        parts = feddyn_partition(y, 7, alpha, np.random.default_rng(0))
        allidx = np.concatenate(parts)
        assert sorted(allidx.tolist()) == list(range(100))
        assert sorted(len(p) for p in parts) == [14] * 6 + [16]


def test_local_dp_spends_at_most_the_target_and_charges_before_noise(tmp_path):
    from accounting import PoissonSubsampledGaussian, SelfComposed, read_ledger
    data = _data(sizes=(20, 20, 20))
    res = run(FedAvg(), data, _model, rounds=3, participation=1.0, seed=9, epsilon=2.0, delta=1e-5,
              clip=1.0, ledger=str(tmp_path / "h.ledger"),
              local=LocalConfig(epochs=1, batch_size=5, lr=0.1))
    assert all(0 < e <= 2.0 + 1e-9 for e in res.epsilon_spent)
    assert max(res.epsilon_spent) == pytest.approx(2.0, rel=1e-3)   # every client in every round
    recs = read_ledger(res.ledger).records
    assert len(recs) == 9
    ev = recs[0].event
    assert isinstance(ev, SelfComposed) and ev.count == 4            # ceil(1 * 20 / 5) steps
    assert isinstance(ev.event, PoissonSubsampledGaussian) and ev.event.sample_rate == 0.25


def test_cli_json_fields_and_settings(tmp_path, capsys):
    out = tmp_path / "h.json"
    rc = main(["horizontal", "--algorithm", "feddyn", "--elastic-net", "--data", "synthetic",
               "--clients", "5", "--rounds", "2", "--participation", "1", "--hidden", "16",
               "--local-epochs", "1", "--seed", "0", "--json", str(out)])
    assert rc == 0
    d = json.loads(out.read_text())
    for key in ("accuracy", "accuracy_history", "uplink_nonzeros", "uplink_entropy",
                "uplink_bytes", "downlink_bytes", "epsilon_spent", "settings"):
        assert key in d
    s = d["settings"]
    assert (s["lambda1"], s["lambda2"], s["threshold"]) == (1e-4, 5e-2, 5e-3)   # Table 5 MNIST
    assert len(d["accuracy_history"]) == 2 and d["epsilon_spent"] is None
    assert d["uplink_nonzeros"] == d["per_round"][-1]["uplink_nonzeros"] > 0


@pytest.mark.parametrize("argv,needle", [
    (["--algorithm", "fedsgd"], "fedsgd"), (["--lambda1", "0.1"], "--lambda1"),
    (["--elastic-net", "--threshold", "-1"], "-1"), (["--participation", "1.5"], "1.5"),
    (["--alpha", "0"], "--alpha"), (["--algorithm", "fedp3", "--elastic-net"], "fedp3"),
    (["--data", "mnist"], "mnist"), (["--step", "newton"], "newton"), (["--epsilon", "-1"], "-1"),
    (["--algorithm", "feddyn", "--lambda2", "0"], "--lambda2"),
])
def test_cli_bad_input_exits_2_with_one_line(argv, needle, capsys):
    rc = main(["horizontal", "--rounds", "1", *argv])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and needle in err


def test_torch_free_modules_do_not_import_torch():
    code = ("import sys, vflpriv.horizontal.participation, vflpriv.horizontal.metering, "
            "vflpriv.horizontal.wire, vflpriv.horizontal.partition, vflpriv.horizontal.strategy, "
            "vflpriv.horizontal.fedavg, vflpriv.horizontal.scaffold, vflpriv.horizontal.feddyn, "
            "vflpriv.horizontal.ldp, vflpriv.horizontal.loop, vflpriv.cli.horizontal; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_fashion_mnist_idx_loader_keeps_the_official_split(tmp_path, monkeypatch):
    import gzip

    from vflpriv.horizontal.partition import PRESPLIT, load_federated

    def idx(path, arr):
        head = bytes([0, 0, 8, arr.ndim]) + b"".join(int(n).to_bytes(4, "big") for n in arr.shape)
        with gzip.open(path, "wb") as f:
            f.write(head + arr.astype(np.uint8).tobytes())
    n_train = PRESPLIT["fashion-mnist"]
    for split, n in (("train", n_train), ("t10k", 50)):
        idx(tmp_path / f"{split}-images-idx3-ubyte.gz", np.full((n, 28, 28), 51))
        idx(tmp_path / f"{split}-labels-idx1-ubyte.gz", np.arange(n) % 10)
    monkeypatch.setenv("VFLPRIV_FASHION_MNIST", str(tmp_path))
    fd = load_federated("fashion-mnist", 100, seed=0)
    assert fd.X_test.shape == (50, 784) and fd.image_shape == (1, 28, 28)
    assert sum(len(y) for _, y in fd.clients) == n_train
    assert fd.X_test.max() == pytest.approx(0.2)            # 51 / 255
    monkeypatch.setenv("VFLPRIV_FASHION_MNIST", str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="VFLPRIV_FASHION_MNIST"):
        load_federated("fashion-mnist", 10, seed=0)


def test_cli_plot_and_fedp3_through_horizontal(tmp_path, capsys):
    import importlib.util
    if importlib.util.find_spec("matplotlib") is None:
        pytest.skip("matplotlib not installed")
    png, js = tmp_path / "h.png", tmp_path / "p3.json"
    assert main(["horizontal", "--algorithm", "scaffold", "--data", "synthetic", "--clients", "4",
                 "--rounds", "2", "--participation", "1", "--hidden", "8", "--local-epochs", "1",
                 "--seed", "1", "--plot", str(png)]) == 0
    assert png.stat().st_size > 0
    assert main(["horizontal", "--algorithm", "fedp3", "--data", "synthetic", "--clients", "3",
                 "--rounds", "1", "--hidden", "8,8", "--local-epochs", "1", "--seed", "1",
                 "--json", str(js)]) == 0
    d = json.loads(js.read_text())
    assert d["uplink_bytes"] > 0 and d["uplink_nonzeros"] > 0 and d["settings"]["algorithm"] == "fedp3"


def test_meter_also_measures_the_model_sent_form():
    # One client, one round of FedAvg: the update is Delta = theta_1 - theta_0 and the model a
    # theta-sending client would send is theta_0 + Delta = theta_1; the two entropies are those of
    # these vectors, computed here from the run's own start and end points (both binnings).
    data = _data(sizes=(20,))
    res = run(FedAvg(), data, _model, rounds=1, seed=3,
              local=LocalConfig(epochs=1, batch_size=5, lr=0.5))
    theta0 = _theta0(3)
    theta1 = res.theta.double().numpy()
    for b in ("round", "floor"):
        assert res.meter.entropy_model[f"pooled/{b}"] == pytest.approx(
            entropy_bits(theta1, binning=b), abs=1e-9)
        assert res.meter.entropy[f"pooled/{b}"] == pytest.approx(
            entropy_bits(theta1 - theta0, binning=b), abs=1e-9)


def test_cli_reports_model_sent_entropy_for_every_binning(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["horizontal", "--algorithm", "feddyn", "--clients", "4", "--rounds", "2",
                 "--local-epochs", "1", "--seed", "0", "--json", str(out)]) == 0
    r = json.loads(out.read_text())
    assert set(r["entropy_variants_model_sent"]) == {"pooled/round", "pooled/floor"}
    # FedDyn's models spread over many 0.01 bins, its small updates over few (paper 001, Table 3:
    # 308.27 theta-sent vs 27.76 Delta-sent)
    assert r["entropy_variants_model_sent"]["pooled/round"] > r["entropy_variants"]["pooled/round"]
