"""Run configurations as data (issue #21, part 3): VerticalConfig and SparseConfig are frozen, refuse
bad values on construction with the messages solve()/fit() raise, normalize idempotently, and a run
from a config equals the run from the same keywords bit for bit; the CLI declares its shared option
groups once and checks a run's options before it reads the data."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from vflpriv.data import VerticalData, make_synthetic
from vflpriv.errors import InputError
from vflpriv.sparse.api import fit
from vflpriv.sparse.config import SparseConfig
from vflpriv.vertical import solve
from vflpriv.vertical.config import MAX_EPSILON, VerticalConfig

PRIV = dict(epsilon=2.0, delta=1e-5, feature_bound=1.0, label_bound=1.0)
SPEC = "synthetic-003:alpha=0.5,e=1.1,sparsity=10,seed=0,samples=400"


def _data(n=120, d=20, K=2, seed=1):
    A, y, _ = make_synthetic(n=n, d=d, seed=seed)
    return VerticalData.from_arrays(A, y, parties=K)


def _message(fn):
    with pytest.raises(InputError) as info:
        fn()
    return str(info.value)


# -- VerticalConfig: the same refusals as solve() ------------------------------------------------

BAD_VERTICAL = [
    dict(algorithm="admm"),
    dict(eta=0.0), dict(eta=float("nan")), dict(eta=True),
    dict(iterations=0), dict(iterations=2.5),
    dict(epsilon=-1.0), dict(epsilon="lots"), dict(epsilon=1e308, delta=1e-5),
    dict(epsilon=1.0), dict(epsilon=1.0, delta=1.5),
    dict(seed=-1), dict(seed=1.5),
    dict(rnm="cauchy"), dict(calibration="x"),
    dict(algorithm="bcfw", epsilon=1.0, delta=1e-5),
    dict(loss="hinge"),
    dict(loss="logistic", sketch="gaussian", sketch_dim=5),
    dict(resume=True),
    dict(algorithm="fw", checkpoint="ck.npz"),
    dict(algorithm="bcfw", checkpoint="ck.npz", checkpoint_every=0),
    dict(algorithm="dp-bcfw", checkpoint="ck.npz", **PRIV),
    dict(algorithm="dpfw", label_party=0),
    dict(backend="grpc"),
    dict(algorithm="fw", backend="flower-sim"),
]


@pytest.mark.parametrize("kwargs", BAD_VERTICAL, ids=lambda kw: ",".join(f"{k}={v}" for k, v
                                                                          in kw.items()))
def test_vertical_config_refuses_with_solves_message(kwargs, tmp_path):
    """One InputError, one line, the same text from the config and from solve() (which touches
    no file: the checkpoint path would be in tmp_path)."""
    kwargs = {k: (str(tmp_path / v) if k == "checkpoint" else v) for k, v in kwargs.items()}
    msg = _message(lambda: VerticalConfig(**kwargs))
    assert "\n" not in msg
    assert _message(lambda: solve(_data(), **kwargs)) == msg
    assert list(tmp_path.iterdir()) == []


def _eps_ok(eps, delta):
    """Closed-form reference of the epsilon/delta rule (docs: inf = non-private)."""
    if not eps > 0:
        return False
    return math.isinf(eps) or (eps <= MAX_EPSILON and delta is not None and 0 < delta < 1)


@settings(max_examples=200, deadline=None)
@given(eta=st.floats(allow_nan=True, allow_infinity=True) | st.integers(-3, 3),
       iterations=st.integers(-5, 5),
       epsilon=st.floats(allow_nan=True, allow_infinity=True, min_value=None),
       delta=st.none() | st.floats(-1, 2))
def test_vertical_config_accepts_exactly_the_valid_values(eta, iterations, epsilon, delta):
    """Accepted iff eta > 0 finite, iterations >= 1 and the epsilon/delta rule holds; a refusal
    names the first bad value as the user gave it."""
    ok_eta = eta > 0 and math.isfinite(eta)
    ok = ok_eta and iterations >= 1 and _eps_ok(epsilon, delta)
    kw = dict(algorithm="dp-bcfw", eta=eta, iterations=iterations, epsilon=epsilon, delta=delta)
    if ok:
        cfg = VerticalConfig(**kw)
        assert cfg.epsilon == float(epsilon) and cfg.private == math.isfinite(epsilon)
    else:
        msg = _message(lambda: VerticalConfig(**kw))
        bad = eta if not ok_eta else iterations if iterations < 1 else \
            epsilon if not epsilon > 0 or math.isinf(epsilon) or epsilon > MAX_EPSILON else delta
        assert repr(bad) in msg, msg


def test_vertical_config_normalizes():
    assert VerticalConfig(epsilon=None).epsilon == math.inf
    assert VerticalConfig(epsilon="2", delta=1e-5).epsilon == 2.0
    assert VerticalConfig(algorithm="dpfw").algorithm == "fw"          # DP-FW without noise
    assert VerticalConfig(algorithm="dpfw", **PRIV).algorithm == "dpfw"
    c = VerticalConfig(algorithm="dp-bcfw")
    assert (c.rnm, c.split) == ("laplace", 0.5)
    c = VerticalConfig(algorithm="dp-bcfw-secure")
    assert (c.rnm, c.split) == (None, None)    # the secure rules choose (and report) them
    assert VerticalConfig(rnm="gumbel", split=0.3).rnm == "gumbel"


@settings(max_examples=60, deadline=None)
@given(algorithm=st.sampled_from(["dp-bcfw", "bcfw", "dfw", "fw", "dpfw", "dp-bcfw-secure"]),
       private=st.booleans(), rnm=st.sampled_from([None, "laplace", "gumbel", "exponential"]),
       split=st.none() | st.floats(0.1, 0.9), epsilon_none=st.booleans())
def test_vertical_config_normalizing_twice_changes_nothing(algorithm, private, rnm, split,
                                                           epsilon_none):
    """replace() re-runs the checks on normalized values: the same config comes back, so the
    CLI can add its callback to a checked config."""
    if private and algorithm in ("bcfw", "dfw", "fw"):
        return
    kw = dict(PRIV) if private else {"epsilon": None if epsilon_none else math.inf}
    cfg = VerticalConfig(algorithm=algorithm, rnm=rnm, split=split, **kw)
    assert dataclasses.replace(cfg) == cfg
    assert VerticalConfig(**cfg.options()) == cfg


def test_configs_are_frozen():
    cfg = VerticalConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.epsilon = 1.0
    scfg = SparseConfig("fedht")
    with pytest.raises(dataclasses.FrozenInstanceError):
        scfg.rounds = 3


def test_solve_takes_config_or_keywords_not_both():
    cfg = VerticalConfig(algorithm="bcfw", iterations=2)
    with pytest.raises(TypeError, match="not both"):
        solve(_data(), config=cfg, seed=0)
    with pytest.raises(TypeError, match="iteration"):
        solve(_data(), iteration=3)
    with pytest.raises(TypeError, match="VerticalConfig"):
        solve(_data(), config={"algorithm": "bcfw"})


def _same_solution(a, b):
    assert a.algorithm == b.algorithm
    assert np.array_equal(np.asarray(a.x), np.asarray(b.x))
    assert np.array_equal(np.asarray(a.objective), np.asarray(b.objective))
    assert a.uplink == b.uplink and a.downlink == b.downlink
    assert (a.privacy is None) == (b.privacy is None)
    if a.privacy:
        assert a.privacy["epsilon_spent"] == b.privacy["epsilon_spent"]
        assert a.privacy["releases"] == b.privacy["releases"]


@pytest.mark.parametrize("kw", [
    dict(algorithm="dp-bcfw", iterations=8, seed=3, rnm="gumbel", **PRIV),
    dict(algorithm="dp-bcfw", iterations=6, seed=4, sketch="gaussian", sketch_dim=40,
         sampling="nice:1", **PRIV),
    dict(algorithm="dpfw", iterations=6, seed=5, **PRIV),
    dict(algorithm="dp-bcfw-secure", iterations=5, seed=6, **PRIV),
    dict(algorithm="dfw", iterations=10, seed=0),
], ids=["dp-bcfw", "dp-bcfw-sketch", "dpfw", "dp-bcfw-secure", "dfw"])
def test_solve_from_config_equals_solve_from_keywords(kw):
    """Bit for bit on a seeded run: iterates, objective, bytes and the accountants' spend."""
    data = _data(n=200, d=24, K=3)
    _same_solution(solve(data, config=VerticalConfig(**kw)), solve(data, **kw))


def test_checkpointed_run_from_config_equals_keywords(tmp_path):
    """The checkpoint records the same run options either way (a resume compares them)."""
    data = _data()
    outs = []
    for i, how in enumerate(("config", "keywords")):
        kw = dict(algorithm="dp-bcfw", iterations=4, seed=2, ledger=str(tmp_path / f"l{i}"),
                  checkpoint=str(tmp_path / f"c{i}"), checkpoint_every=2, **PRIV)
        outs.append(solve(data, config=VerticalConfig(**kw)) if how == "config"
                    else solve(data, **kw))
    _same_solution(*outs)
    from vflpriv.vertical.checkpoint import read_checkpoint

    metas = [read_checkpoint(tmp_path / f"c{i}")[0] for i in range(2)]
    assert metas[0]["config"] == metas[1]["config"]
    assert metas[0]["config"]["rnm"] == "laplace" and metas[0]["config"]["epsilon"] == 2.0


# -- SparseConfig -----------------------------------------------------------------------------

BAD_SPARSE = [
    (dict(algorithm="admm"), "--algorithm must be one of"),
    (dict(rounds=0), "--rounds must be an integer >= 1, got 0"),
    (dict(algorithm="diht", local_steps=3), "--local-steps must be 1, got 3"),
    (dict(tau=0), "--tau must be an integer >= 1, got 0"),
    (dict(lr=-1.0), "--lr must be a positive finite number, got -1.0"),
    (dict(batch_growth=0.5), "--batch-growth must be a finite number >= 1, got 0.5"),
    (dict(weights="size"), "--weights must be uniform or examples, got 'size'"),
    (dict(loss="hinge"), "--loss must be squared, logistic or softmax, got 'hinge'"),
    (dict(l2=-1.0), "--l2 must be a finite number >= 0, got -1.0"),
    (dict(radius=0.0), "--radius must be a positive finite number, got 0.0"),
    (dict(tol=float("inf")), "--tol must be a positive finite number, got inf"),
    (dict(server_lr=0), "--server-lr must be a positive finite number, got 0"),
    (dict(clients=0), "--clients must be >= 1, got 0"),
    (dict(clients=4, participation="9"), "number of clients (4)"),
    (dict(epsilon=0.0), "--epsilon must be a positive number or inf, got 0.0"),
    (dict(epsilon=1.0, lr=0.1), "--delta must be in (0, 1) with a finite --epsilon, got None"),
    (dict(epsilon=1.0, delta=1e-5), "a private run needs --lr"),
    (dict(epsilon=1.0, delta=1e-5, lr=0.1, clip=0.0), "--clip must be a positive finite"),
    (dict(epsilon=1.0, delta=1e-5, lr=0.1, privacy="person"), "--privacy must be record or "
                                                              "client, got 'person'"),
    (dict(algorithm="fedgradmp", epsilon=1.0, delta=1e-5), "cannot run with --privacy record"),
    (dict(epsilon=1.0, delta=1e-5, lr=0.1, privacy="client", weights="examples"),
     "needs --weights uniform"),
    (dict(loss="softmax", dictionary="gaussian"), "--dictionary needs --loss squared or logistic"),
    (dict(backend="grpc"), "--backend must be one of"),
]


@pytest.mark.parametrize("kwargs, needle", BAD_SPARSE, ids=[str(i) for i in range(len(BAD_SPARSE))])
def test_sparse_config_refuses_with_fits_message(kwargs, needle):
    kw = {"algorithm": "fedht", **kwargs}
    msg = _message(lambda: SparseConfig(**kw))
    assert needle in msg and "\n" not in msg
    algorithm = kw.pop("algorithm")
    assert _message(lambda: fit(SPEC, algorithm, **kw)) == msg


@settings(max_examples=150, deadline=None)
@given(rounds=st.integers(-2, 3), lr=st.none() | st.floats(allow_nan=True, allow_infinity=True),
       clip=st.floats(allow_nan=True, allow_infinity=True),
       delta=st.none() | st.floats(-0.5, 1.5))
def test_sparse_config_accepts_exactly_the_valid_values(rounds, lr, clip, delta):
    """Private record-level fedht: accepted iff rounds >= 1, lr > 0 finite (required), clip > 0
    finite and 0 < delta < 1 (the rules of vflpriv.sparse.privacy)."""
    ok = (rounds >= 1 and lr is not None and lr > 0 and math.isfinite(lr) and clip > 0
          and math.isfinite(clip) and delta is not None and 0 < delta < 1)
    kw = dict(rounds=rounds, lr=lr, clip=clip, delta=delta, epsilon=1.0)
    if ok:
        assert SparseConfig("fedht", **kw).private
    else:
        with pytest.raises(InputError):
            SparseConfig("fedht", **kw)


def test_fit_from_config_equals_fit_from_keywords():
    kw = dict(clients=8, rounds=3, local_steps=2, tau=10, batch_size=20, seed=0, lr=0.05,
              epsilon=4.0, delta=1e-5)
    a = fit(SPEC, "fediterht", **kw)
    b = fit(SPEC, config=SparseConfig("fediterht", **kw))
    assert np.array_equal(a.x, b.x) and a.objective == b.objective
    assert a.uplink_bytes == b.uplink_bytes and a.privacy["epsilon_spent"] == \
        b.privacy["epsilon_spent"]
    with pytest.raises(TypeError, match="not both"):
        fit(SPEC, "fediterht", config=SparseConfig("fediterht", **kw))


# -- the command line -----------------------------------------------------------------------

GROUPS = {"privacy": ("--epsilon", "--delta", "--accountant"), "ledger": ("--ledger",),
          "backend": ("--connect-timeout", "--on-client-loss"), "outputs": ("--json",)}


@pytest.mark.parametrize("command", [["run"], ["sparse"], ["horizontal"], ["fedp3"],
                                     ["flower", "spec", "sparse"]])
def test_shared_option_groups_are_declared_once(command):
    """Every federated command has the shared groups under the same titles, with the same
    option strings and destinations (declared in vflpriv.cli.options)."""
    from vflpriv.cli.main import build_parser

    p = build_parser()
    for name in command:
        p = next(a for a in p._actions if hasattr(a, "choices") and isinstance(a.choices, dict)
                 ).choices[name]
    titles = {g.title: g for g in p._action_groups}
    for title, opts in GROUPS.items():
        if title == "outputs" and command[0] == "flower":
            continue
        got = {s for a in titles[title]._group_actions for s in a.option_strings}
        assert set(opts) <= got, (title, got)
    assert "-q" in p._option_string_actions


def test_run_checks_its_options_before_reading_the_data(tmp_path, capsys):
    """A bad option is named before the (missing) data file is opened: the config is built
    first, so the message is the option's, not the file's."""
    from vflpriv.cli.main import main

    missing = str(tmp_path / "absent.csv")
    with pytest.raises(SystemExit) as exc:     # refused by argparse, as it parses --eta
        main(["run", "--data", missing, "--label", "y", "--algorithm", "bcfw", "--eta", "-1"])
    code = exc.value.code
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--eta" in err[0], err
    code = main(["run", "--data", missing, "--label", "y", "--algorithm", "bcfw"])
    err = capsys.readouterr().err
    assert code == 2 and "absent.csv" in err, err


# -- HorizontalConfig (the horizontal runtime) -------------------------------------------------

BAD_HORIZONTAL = [
    (["--rounds", "0"], dict(rounds=0), "--rounds must be a positive integer, got 0"),
    (["--participation", "1.5"], dict(participation=1.5), "--participation must be in (0, 1]"),
    (["--epsilon", "0"], dict(epsilon=0.0), "--epsilon must be > 0 (inf = non-private), got 0.0"),
    (["--delta", "1"], dict(delta=1.0), "--delta must be in (0, 1), got 1.0"),
    (["--clip", "nan"], dict(clip=float("nan")), "--clip must be > 0, got nan"),
    (["--accountant", "optimal"], dict(accountant="optimal"),
     "--accountant must be rdp, pld or best, got 'optimal'"),
    (["--seed", "-2"], dict(seed=-2), "--seed must be >= 0, got -2"),
    (["--local-epochs", "0"], dict(local=dict(epochs=0.0)), "--local-epochs must be > 0, got 0.0"),
    (["--batch-size", "0"], dict(local=dict(batch_size=0)),
     "--batch-size must be a positive integer, got 0"),
    (["--lr", "inf"], dict(local=dict(lr=math.inf)), "--lr must be > 0, got inf"),
    (["--weight-decay", "-1"], dict(local=dict(weight_decay=-1.0)),
     "--weight-decay must be >= 0, got -1.0"),
    (["--grad-clip", "0"], dict(local=dict(grad_clip=0.0)), "--grad-clip must be > 0 (inf = off)"),
    (["--step", "newton"], dict(local=dict(step="newton")),
     "--step must be subgradient or prox, got 'newton'"),
]


@pytest.mark.parametrize("argv, kwargs, needle", BAD_HORIZONTAL,
                         ids=[c[0][0] for c in BAD_HORIZONTAL])
def test_horizontal_config_refuses_with_the_commands_message(argv, kwargs, needle, capsys):
    """The runtime's config and vflpriv horizontal say the same line (exit 2, before torch
    trains or any data are read)."""
    from vflpriv.cli.main import main
    from vflpriv.horizontal.config import HorizontalConfig, LocalConfig

    def build():
        kw = dict(kwargs)
        if "local" in kw:
            LocalConfig(**kw.pop("local"))
        return HorizontalConfig(**{"rounds": 3, **kw})

    msg = _message(build)
    assert needle in msg and "\n" not in msg
    assert main(["horizontal", "--data", "synthetic"] + argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"vflpriv horizontal: error: {msg}"], err


def test_horizontal_run_from_config_equals_keywords():
    """Bit for bit on a seeded private FedProx run (softmax regression on three clients)."""
    torch = pytest.importorskip("torch")
    from vflpriv.horizontal.config import HorizontalConfig, LocalConfig
    from vflpriv.horizontal.fedavg import FedProx
    from vflpriv.horizontal.models import MLP
    from vflpriv.horizontal.partition import FederatedData
    from vflpriv.horizontal.runtime import run

    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    W = rng.normal(size=(5, 3))
    clients = []
    for n in (12, 20, 16):
        X = rng.normal(size=(n, 5)).astype(np.float32)
        clients.append((X, (X @ W).argmax(1).astype(np.int64)))
    Xt = rng.normal(size=(30, 5)).astype(np.float32)
    data = FederatedData(clients, Xt, (Xt @ W).argmax(1).astype(np.int64), 3, None)
    kw = dict(rounds=3, participation=1.0, seed=7, epsilon=4.0, delta=1e-5, clip=1.0,
              local=LocalConfig(epochs=1, batch_size=4, lr=0.1))
    model = lambda: MLP(5, 3, hidden=())  # noqa: E731
    a = run(FedProx(0.0, 1e-2, 0.0), data, model, **kw)
    b = run(FedProx(0.0, 1e-2, 0.0), data, model, config=HorizontalConfig(**kw))
    assert torch.equal(a.theta, b.theta) and a.accuracy_history == b.accuracy_history
    assert a.epsilon_spent == b.epsilon_spent and a.epsilon_spent[0] is not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        kw["local"].lr = 1.0


def test_config_modules_do_not_import_torch_or_flower():
    """The configs and the option groups are data: importing them loads neither torch nor flwr."""
    import subprocess
    import sys

    code = ("import sys, vflpriv.horizontal.config, vflpriv.vertical.config, "
            "vflpriv.sparse.config, vflpriv.cli.options; "
            "vflpriv.horizontal.config.HorizontalConfig(rounds=1); "
            "bad = [m for m in ('torch', 'flwr') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)
