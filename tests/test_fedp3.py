"""FedP3 / LDP-FedP3 (paper 002): layer sets, pruning, messages, clipping, noise, accounting, CLI."""
import json
import math
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from accounting import get_accountant, read_ledger  # noqa: E402
from vflpriv.cli.main import main  # noqa: E402
from vflpriv.horizontal import wire  # noqa: E402
from vflpriv.horizontal.fedp3 import (MLP, FedP3, PaperCNN, SmallCNN, clip_per_sample,  # noqa: E402
                                      cyclic_layers, kept_count, nonprivate_gradient,
                                      ordered_dropout_masks, paper_layer_counts, paper_mlp,
                                      per_sample_gradients, private_gradient)
from vflpriv.horizontal.partition import ClientData, load_dataset, make_clients  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def digits():
    X, y, k, shape = load_dataset("digits")
    return make_clients(X, y, 10, alpha=0.5, seed=0), k, shape


@pytest.fixture(scope="module")
def tiny():
    """Three clients of a small synthetic problem (fast)."""
    rng = np.random.default_rng(0)
    out = []
    for _ in range(3):
        X = rng.normal(size=(40, 6)).astype(np.float32)
        y = (X[:, 0] + X[:, 1] > 0).astype(np.int64) + 2 * (X[:, 2] > 0)
        out.append(ClientData(X[:30], y[:30], X[30:], y[30:]))
    return out


def tiny_model():
    return MLP(6, 4, hidden=(8, 7, 5, 9))


# -- layer sets and what is sent -------------------------------------------------------------

def test_cyclic_layer_sets_cover_layers_uniformly():
    # notes B.5: 100 clients, 4 non-final layers, d1 = floor(i / 25); each layer is trained by
    # 25 (LowerB), 50 (OPU2) or 75 (OPU3) clients.
    for k, per_layer in ((1, 25), (2, 50), (3, 75)):
        sets = [cyclic_layers(i, 100, 4, k) for i in range(100)]
        assert all(s[0] == i // 25 or (i // 25) in s for i, s in enumerate(sets))
        assert [sum(j in s for s in sets) for j in range(4)] == [per_layer] * 4
        assert all(len(s) == k for s in sets)


def _expected_bytes(shapes, L, r, pruning):
    """Byte counts from the wire format's definition, computed independently of the encoder."""
    head, entry = 7, 8
    up = head + sum(entry + 4 * math.prod(s) for k, s in shapes.items() if k.split(".")[0] in L)
    down = head
    for k, s in shapes.items():
        n = math.prod(s)
        if k.split(".")[0] in L or k.endswith("bias") or r == 1:
            down += entry + 4 * n
        else:
            kept = math.ceil(r * n - 1e-9)
            down += entry + (8 + 4 + 4 * kept if pruning == "random"
                             else 4 + (n + 7) // 8 + 4 * kept)
    return up, down


@pytest.mark.parametrize("scheme,pruning", [("lowerb", "random"), ("opu2", "magnitude"),
                                            ("opu3", "random"), ("fedavg", "random"),
                                            ("opu1-2-3", "magnitude")])
def test_bytes_sent_match_the_scheme(tiny, scheme, pruning):
    est = FedP3(model=tiny_model, scheme=scheme, keep_ratio=0.6, global_pruning=pruning,
                rounds=2, local_steps=1, batch_size=5, seed=1).fit(tiny, 4)
    shapes = est.shapes_
    full = _expected_bytes(shapes, set(est.layer_names_), 1.0, pruning)
    n_layers = {"lowerb": 1, "opu2": 2, "opu3": 3, "fedavg": 4}
    for rec in est.comm_log_:
        L = set(rec["layers"])
        assert "ffc" in L
        if scheme in n_layers:
            assert len(L) == n_layers[scheme] + 1
        r = 1.0 if scheme == "fedavg" else 0.6
        assert (rec["up"], rec["down"]) == _expected_bytes(shapes, L, r, pruning)
        assert (rec["up_full"], rec["down_full"]) == full
    # totals per client are the per-round sums
    for i in range(3):
        assert est.uplink_bytes_[i] == sum(r["up"] for r in est.comm_log_ if r["client"] == i)
    if scheme != "fedavg":
        assert sum(est.uplink_bytes_) < sum(est.uplink_bytes_full_)


def test_wire_round_trip_and_pruned_positions():
    rng = np.random.default_rng(3)
    w = rng.normal(size=50).astype(np.float32)
    mask = np.abs(w) >= np.sort(np.abs(w))[-20]
    data = wire.encode([(0, 0, w, wire.DENSE, None), (1, 0, w, wire.BITMAP, mask),
                        (2, 1, w, wire.SEEDED, (12345, 17))], wire.DOWN)
    direction, out = wire.decode(data)
    assert direction == wire.DOWN
    np.testing.assert_array_equal(out[0][2], w)
    np.testing.assert_array_equal(out[1][2], np.where(mask, w, 0))
    m3 = out[2][3]
    assert m3.sum() == 17 and np.array_equal(m3, wire.random_keep_mask(50, 17, 12345))
    np.testing.assert_array_equal(out[2][2], np.where(m3, w, 0))
    assert len(data) == 7 + (8 + 200) + (8 + 4 + 7 + 80) + (8 + 12 + 68)


def test_magnitude_pruning_keeps_largest(tiny):
    est = FedP3(model=tiny_model, scheme="lowerb", keep_ratio=0.5, global_pruning="magnitude",
                rounds=1, local_steps=1, batch_size=5, seed=0).fit(tiny, 4)
    W = est.global_weights_
    L = ("fc1", "ffc")      # client 0 of 3 with 4 layers: d1 = 0
    params, masks = est._unpack(est._downlink(W, L, 0, 0))
    for key, mask in masks.items():
        w = W[key].numpy().ravel()
        kept = np.abs(w[mask])
        assert mask.sum() == kept_count(w.size, 0.5)
        assert kept.min() >= np.abs(w[~mask]).max()
        assert np.all(params[key].numpy().ravel()[~mask] == 0)
    assert "fc1.weight" not in masks and "ffc.weight" not in masks


# -- the paper's parameter counts (Table 4) and Fig. 6 ratios (notes B.11) ----------------------

def _one_layer_plus_ffc_ratio(counts):
    names = list(counts)
    body, ffc = names[:-1], counts[names[-1]]
    sizes = [counts[n] + ffc for n in body]
    return 100 * (max(sizes) - min(sizes)) / min(sizes)


def _deployed_ratio(counts, r):
    names = list(counts)
    body, ffc = names[:-1], counts[names[-1]]
    dep = {n: counts[n] + r * sum(counts[o] for o in body if o != n) + ffc for n in body}
    return 100 * (dep[max(body, key=counts.get)] - dep[body[0]]) / dep[body[0]]


def test_paper_table4_counts_and_fig6_ratios():
    with torch.device("meta"):
        cifar10, cifar100 = PaperCNN(3, 10, 32), PaperCNN(3, 100, 32)
        fmnist, emnist = PaperCNN(1, 10, 28), paper_mlp(10)
    c10 = paper_layer_counts(cifar10)
    assert c10 == {"conv1": 4864, "conv2": 102464, "fc1": 1638400, "fc2": 1048576, "ffc": 10240}
    assert sum(c10.values()) == 2804544
    assert paper_layer_counts(cifar100)["ffc"] == 102400
    assert paper_layer_counts(fmnist)["conv1"] == 1664
    assert list(paper_layer_counts(emnist).values()) == [802816, 1048576, 1048576, 10240]
    # Fig. 6 / App. B.5 ("10,815 times" is a percentage), and the r = 0.5 deployed sizes
    for model, ratio, deployed in ((cifar10, 10815.25, 57.93), (cifar100, 1522.91, 54.38),
                                   (fmnist, 13749.46, 58.18), (emnist, 30.23, 6.60)):
        counts = paper_layer_counts(model)
        assert round(_one_layer_plus_ffc_ratio(counts), 2) == ratio
        assert round(_deployed_ratio(counts, 0.5), 2) == deployed
    # the 28x28 input really produces the table's 1600-dim flatten (padding 2 on conv1)
    out = PaperCNN(1, 10, 28)(torch.zeros(2, 784))
    assert out.shape == (2, 10)


# -- per-sample gradients, clipping, noise ----------------------------------------------------

def _setup(net, n=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = 3 * torch.randn(n, 64, generator=g)
    y = torch.randint(0, 10, (n,), generator=g)
    params = {k: v.detach() for k, v in net.named_parameters()}
    tr = {k: v for k, v in params.items() if k.split(".")[0] in ("fc2", "ffc")}
    fx = {k: v for k, v in params.items() if k not in tr}
    return X, y, tr, fx


@pytest.mark.parametrize("make", [lambda: MLP(64, 10), lambda: SmallCNN(1, 8, 10)])
def test_per_sample_gradients_match_a_loop_and_clipping_bounds_them(make):
    torch.manual_seed(0)
    net = make()
    X, y, tr, fx = _setup(net)
    grads = per_sample_gradients(net, tr, fx, X, y)
    for j in range(X.shape[0]):   # reference: one autograd call per record
        ref = nonprivate_gradient(net, tr, fx, X[j:j + 1], y[j:j + 1], expected_batch=1)
        for k in tr:
            torch.testing.assert_close(grads[k][j], ref[k], rtol=1e-4, atol=1e-6)
    C = 0.5
    clipped, norms = clip_per_sample(grads, C)
    assert (norms > C).sum() >= 3          # the test really exercises clipping
    after = torch.cat([g.reshape(g.shape[0], -1) for g in clipped.values()], 1).norm(dim=1)
    assert torch.all(after <= C * (1 + 1e-5))
    small = norms <= C
    torch.testing.assert_close(after[small], norms[small])          # small ones untouched
    torch.testing.assert_close(after[~small], torch.full_like(after[~small], C))
    # z = 0: the private gradient is the sum of the clipped gradients over b
    g0 = private_gradient(net, tr, fx, X, y, clip=C, noise_multiplier=0.0, expected_batch=16,
                          generator=np.random.default_rng(0))
    for k in tr:
        torch.testing.assert_close(g0[k], clipped[k].sum(0) / 16)


def test_no_clip_no_noise_equals_nonprivate_gradient():
    torch.manual_seed(1)
    net = MLP(64, 10)
    X, y, tr, fx = _setup(net, n=9, seed=2)
    a = private_gradient(net, tr, fx, X, y, clip=math.inf, noise_multiplier=0.0,
                         expected_batch=16, generator=np.random.default_rng(0))
    b = nonprivate_gradient(net, tr, fx, X, y, expected_batch=16)
    for k in tr:
        torch.testing.assert_close(a[k], b[k], rtol=1e-5, atol=1e-7)


def test_noise_has_the_calibrated_scale():
    # Empty batch: the gradient is pure noise N(0, (zC/b)^2) per coordinate.  With N = 10 * 17,802
    # coordinates the sample variance / true variance is within 5 sd of 1 with false-failure
    # probability < 1e-6 (chi-square, sd = sqrt(2/N) = 0.0034), so a 2% error in the noise std
    # (4% in variance) is caught; the mean within 5 sd of 0 likewise.
    net = MLP(64, 10)
    X, y, tr, fx = _setup(net)
    z, C, b = 1.7, 0.8, 16
    draws = [private_gradient(net, tr, fx, X[:0], y[:0], clip=C, noise_multiplier=z,
                              expected_batch=b, generator=np.random.default_rng(s))
             for s in range(10)]
    v = torch.cat([g.reshape(-1) for d in draws for g in d.values()]).double()
    N, sd = v.numel(), z * C / b
    assert abs(float((v ** 2).mean()) / sd ** 2 - 1) < 5 * math.sqrt(2 / N)
    assert abs(float(v.mean())) < 5 * sd / math.sqrt(N)


def test_local_pruning_masks():
    net = SmallCNN(1, 8, 10)
    wm, bm = ordered_dropout_masks(net, "conv2", 0.5, first=False)
    assert wm[:8, :4].min() == 1 and wm[8:].max() == 0 and wm[:, 4:].max() == 0
    assert bm[:8].min() == 1 and bm[8:].max() == 0
    wm, _ = ordered_dropout_masks(net, "fc1", 0.5, first=False)   # 16 channels x 16 pixels in
    assert wm[0].sum() == 8 * 16 and wm[0, :128].min() == 1
    wm, _ = ordered_dropout_masks(net, "conv1", 0.3, first=True)  # input never pruned
    assert wm[:3].min() == 1 and wm[3:].max() == 0


def test_weighted_aggregation_is_normalized():
    est = FedP3(model=tiny_model, aggregation="weighted", seed=0)
    est.layer_names_ = ("fc1", "ffc")
    W = {"fc1.weight": torch.zeros(2), "ffc.weight": torch.full((2,), 7.0)}
    ups = [(0, ("fc1", "ffc"), {"fc1.weight": torch.ones(2), "ffc.weight": torch.ones(2)}),
           (1, ("fc1", "fc2", "fc3", "ffc"), {"fc1.weight": torch.full((2,), 4.0),
                                              "ffc.weight": torch.full((2,), 4.0)})]
    new = est._aggregate(W, ups)
    # alpha = |L_i| / sum over contributors: 2/6 and 4/6 -> 1/3 + 16/6 = 3.0
    torch.testing.assert_close(new["fc1.weight"], torch.full((2,), 3.0))
    est.aggregation = "simple"
    torch.testing.assert_close(est._aggregate(W, ups)["fc1.weight"], torch.full((2,), 2.5))
    torch.testing.assert_close(est._aggregate(W, ups[:0])["ffc.weight"], W["ffc.weight"])


# -- privacy ---------------------------------------------------------------------------------

def test_epsilon_inf_is_nonprivate(tiny, tmp_path):
    # no clipping and no noise at epsilon = inf: the clip setting cannot change the result
    runs = [FedP3(model=tiny_model, epsilon=math.inf, clip=c, rounds=2, local_steps=2,
                  batch_size=5, local_pruning="uniform", seed=4).fit(tiny, 4) for c in (1e-3, 1e3)]
    for k in runs[0].global_weights_:
        assert torch.equal(runs[0].global_weights_[k], runs[1].global_weights_[k])
    assert runs[0].ledger_ is None and runs[0].epsilon_spent_ == [math.inf] * 3
    priv = FedP3(model=tiny_model, epsilon=50.0, clip=1e-3, rounds=2, local_steps=2,
                 batch_size=5, local_pruning="uniform", seed=4,
                 ledger=tmp_path / "l.jsonl").fit(tiny, 4)
    assert not torch.equal(priv.global_weights_["ffc.weight"], runs[0].global_weights_["ffc.weight"])


def test_calibrated_spend_within_target_per_client(tiny, tmp_path):
    eps, delta = 2.0, 1e-5
    est = FedP3(model=tiny_model, scheme="opr2", epsilon=eps, delta=delta, rounds=3,
                local_steps=2, batch_size=6, ledger=tmp_path / "l.jsonl", seed=2).fit(tiny, 4)
    contents = read_ledger(tmp_path / "l.jsonl")
    assert len(contents.records) == 3 * 3
    for i in range(3):
        # recomputed from the durable ledger, by RDP and independently by PLD
        spent = contents.spend(delta, accountant="rdp", party=f"client-{i}")
        assert spent <= eps and spent > 0.95 * eps        # calibrated: budget used, not exceeded
        assert get_accountant("pld").epsilon(contents.event(party=f"client-{i}"), delta) <= eps
        assert est.epsilon_spent_[i] == pytest.approx(spent)
        assert est.stopped_round_[i] is None
        assert est.sample_rate_[i] == pytest.approx(6 / 30)


def test_paper_closed_form_overspend_stops_training(tiny, tmp_path):
    # eq. (18) with a small c gives too little noise for 4 rounds: the filter refuses a round
    # before its noise is drawn, and the client stops within budget.
    eps, delta = 1.0, 1e-5
    est = FedP3(model=tiny_model, epsilon=eps, delta=delta, rounds=4, local_steps=2,
                batch_size=6, noise="paper", paper_c=0.2, ledger=tmp_path / "l.jsonl", seed=0).fit(tiny, 4)
    z = est.noise_multiplier_[0]
    # z = sqrt(c K log(1/delta)) q / eps, K = all 8 steps (sigma = z C / b)
    assert z == pytest.approx(math.sqrt(0.2 * 8 * math.log(1e5)) * (6 / 30) / eps)
    assert est.implied_c_[0] == pytest.approx(0.2)
    contents = read_ledger(tmp_path / "l.jsonl")
    for i in range(3):
        assert est.stopped_round_[i] is not None and est.stopped_round_[i] < 4
        assert contents.spend(delta, accountant="rdp", party=f"client-{i}") <= eps
        n_rounds = sum(r.party == f"client-{i}" for r in contents.records)
        assert n_rounds == est.stopped_round_[i]
        assert sum(r["client"] == i for r in est.comm_log_) == n_rounds


# -- utility ---------------------------------------------------------------------------------

def test_accuracy_well_above_chance_on_digits(digits):
    clients, k, shape = digits
    est = FedP3(model="mlp", scheme="opu2", rounds=8, local_epochs=2, lr=0.3, seed=0)
    est.fit(clients, k, shape)
    assert est.accuracy_ > 0.6          # chance is 0.1 (10 classes)
    assert len(est.accuracy_history_) == 8 and len(est.client_accuracy_) == 10


# -- command line and imports ------------------------------------------------------------------

def test_cli_run_writes_the_listed_fields(tmp_path, capsys):
    out = tmp_path / "r.json"
    rc = main(["fedp3", "--data", "synthetic", "--clients", "4", "--rounds", "2", "--scheme",
               "lowerb", "--local-pruning", "ordered_dropout", "--keep-ratio", "0.5",
               "--epsilon", "3", "--delta", "1e-5", "--clip", "1", "--batch-size", "20",
               "--local-steps", "2", "--seed", "3", "--json", str(out),
               "--ledger", str(tmp_path / "l.jsonl")])
    assert rc == 0
    d = json.loads(out.read_text())
    for key in ("accuracy", "accuracy_history", "epsilon_spent", "uplink_bytes",
                "uplink_bytes_full", "rounds", "seed"):
        assert key in d
    assert d["rounds"] == 2 and d["seed"] == 3 and len(d["epsilon_spent"]) == 4
    assert all(0 < e <= 3 for e in d["epsilon_spent"])
    assert all(u < f for u, f in zip(d["uplink_bytes"], d["uplink_bytes_full"]))


@pytest.mark.parametrize("argv,needle", [
    (["--epsilon", "-2"], "-2"), (["--scheme", "opu9"], "opu9"), (["--keep-ratio", "1.5"], "1.5"),
    (["--data", "mnist"], "mnist"), (["--noise", "paper", "--epsilon", "1"], "paper_c"),
    (["--batch-size", "5000"], "5000"), (["--model", "cnn", "--data", "synthetic"], "cnn"),
])
def test_cli_bad_input_exits_2_with_one_line(argv, needle, capsys):
    with pytest.raises(SystemExit) if argv[0] == "--epsilon" else _nullctx() as exc:
        rc = main(["fedp3", "--rounds", "1", *argv])
    rc = exc.value.code if argv[0] == "--epsilon" else rc
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and needle in err


class _nullctx:
    def __enter__(self):
        return None

    def __exit__(self, *a):
        return False


def test_importing_vflpriv_does_not_import_torch():
    code = ("import sys, vflpriv, vflpriv.horizontal, vflpriv.horizontal.partition, "
            "vflpriv.horizontal.wire, vflpriv.cli.fedp3; "
            "from vflpriv.cli.main import build_parser; build_parser(); "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_dirichlet_partition_is_a_disjoint_cover():
    from vflpriv.horizontal.partition import dirichlet_partition
    y = np.repeat(np.arange(10), 50)
    parts = dirichlet_partition(y, 7, 0.5, np.random.default_rng(0), min_size=10)
    allidx = np.concatenate(parts)
    assert np.array_equal(np.sort(allidx), np.arange(500))      # every record exactly once
    assert min(len(p) for p in parts) >= 10
    # alpha = 0.5 skews labels: some client's top class holds far more than the IID 10%
    assert max(np.bincount(y[p], minlength=10).max() / len(p) for p in parts) > 0.3


def test_partial_participation_and_opr2_redraws(tiny):
    est = FedP3(model=tiny_model, scheme="opr2", participation=0.67, rounds=6, local_steps=1,
                batch_size=5, seed=5).fit(tiny, 4)
    per_round = [sum(r["round"] == t for r in est.comm_log_) for t in range(6)]
    assert per_round == [2] * 6                                  # round(0.67 * 3) clients a round
    sets = {tuple(r["layers"]) for r in est.comm_log_}
    assert len(sets) > 1 and all(len(s) == 3 and s[-1] == "ffc" for s in sets)


def test_uniform_local_pruning_keep_fraction(tiny):
    # q ~ U[p, 1] and each weight kept with probability q: over many draws the kept fraction has
    # mean (1 + p) / 2.  With 200 masks of 7x8 + 5x7 + 9x5 = 136 weights the standard error is
    # < 0.01, so |mean - 0.8| < 0.05 fails with probability < 1e-6.
    est = FedP3(model=tiny_model, local_pruning="uniform", local_p=0.6, seed=0)
    est.net_ = tiny_model()
    est.layer_names_ = est.net_.layer_names
    est.shapes_ = {k: tuple(v.shape) for k, v in est.net_.named_parameters()}
    rng = np.random.default_rng(0)
    fr = [float(torch.cat([m.reshape(-1) for m in est._local_masks(("fc1", "ffc"), rng).values()])
                .mean()) for _ in range(200)]
    assert abs(np.mean(fr) - 0.8) < 0.05
    assert set(est._local_masks(("fc1", "ffc"), rng)) == {"fc2.weight", "fc3.weight", "fc4.weight"}


def test_cli_plot(tmp_path, capsys):
    import importlib.util
    png = tmp_path / "acc.png"
    rc = main(["fedp3", "--data", "synthetic", "--clients", "3", "--rounds", "1",
               "--local-steps", "1", "--plot", str(png)])
    if importlib.util.find_spec("matplotlib") is None:
        err = capsys.readouterr().err
        assert rc == 2 and "matplotlib" in err and err.count("\n") == 1 and not png.exists()
    else:
        assert rc == 0 and png.stat().st_size > 0


# -- --train-layers: the paper's update trains every layer, uploads L_i --------------------------

def _one_step_setup(train_layers):
    from vflpriv.horizontal.fedp3 import _ClientPlan

    torch.manual_seed(0)
    est = FedP3(model=tiny_model, local_pruning="fixed", lr=0.5, batch_size=30, seed=0,
                train_layers=train_layers)
    est.net_ = tiny_model()
    est.layer_names_ = est.net_.layer_names
    est.shapes_ = {k: tuple(v.shape) for k, v in est.net_.named_parameters()}
    params = {k: v.detach().clone() for k, v in est.net_.named_parameters()}
    params["fc2.weight"][:, :3] = 0.0                  # globally pruned positions (outside L_i)
    return est, params, _ClientPlan(m=30, q=1.0, steps=1)


def test_train_layers_all_is_one_sgd_step_on_every_layer_keeping_pruned_zeros(tiny):
    est, params, plan = _one_step_setup("all")
    L_i = ("fc1", "ffc")
    local, sent = est._train_client(params, L_i, tiny[0], plan, np.random.default_rng(0),
                                    np.random.default_rng(0))
    # reference: plain autograd on a module holding the received weights, full batch (q = 1)
    net = tiny_model()
    with torch.no_grad():
        for k, p in net.named_parameters():
            p.copy_(params[k])
    X, y = torch.from_numpy(tiny[0].X_train), torch.from_numpy(tiny[0].y_train)
    loss = torch.nn.functional.cross_entropy(net(X), y, reduction="sum") / 30
    loss.backward()
    for k, p in net.named_parameters():
        want = params[k] - 0.5 * p.grad * (params[k] != 0 if k == "fc2.weight" else 1)
        assert torch.allclose(local[k], want, atol=1e-6), k
    assert torch.all(local["fc2.weight"][:, :3] == 0)
    assert not torch.equal(local["fc3.weight"], params["fc3.weight"])     # outside L_i: trained
    assert set(sent) == {"fc1.weight", "fc1.bias", "ffc.weight", "ffc.bias"}   # only L_i leaves


def test_train_layers_selected_leaves_the_other_layers_alone(tiny):
    est, params, plan = _one_step_setup("selected")
    local, sent = est._train_client(params, ("fc1", "ffc"), tiny[0], plan,
                                    np.random.default_rng(0), np.random.default_rng(0))
    assert torch.equal(local["fc3.weight"], params["fc3.weight"])
    assert not torch.equal(local["fc1.weight"], params["fc1.weight"])
    assert set(sent) == {"fc1.weight", "fc1.bias", "ffc.weight", "ffc.bias"}


def test_train_layers_bad_value_exits_2_with_one_line(capsys):
    assert main(["fedp3", "--rounds", "1", "--train-layers", "some"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "some" in err and "train layers" in err
