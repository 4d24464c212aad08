"""Every family's run description is data: written as run.json (+ run.npz) and read back equal,
value for value and bit for bit (what a deployed ServerApp reads, on one machine or across
machines); a description holding anything else is refused, and an unknown type is not read."""
import json
import math

import numpy as np
import pytest

from vflpriv.errors import InputError
from vflpriv.flower.spec import dump_run, load_description


def _same(a, b, path="spec"):
    assert type(a) is type(b) or (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)), path
    if isinstance(a, dict):
        assert set(a) == set(b), path
        for k in a:
            _same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{path}[{i}]")
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and np.array_equal(a, b), path
    elif hasattr(a, "__dataclass_fields__"):
        assert a == b, path
    elif hasattr(a, "blocks"):                   # Sampling
        assert a.kind == b.kind and all(np.array_equal(x, y) for x, y in zip(a.blocks, b.blocks))
    else:
        assert a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b)), path


@pytest.fixture
def captured(monkeypatch):
    """Each family's spec as its driver hands it to the host (runs over the local link)."""
    import vflpriv.runtime.backends as B

    specs = {}
    launch = B.launch

    def keep(backend, spec, cfgs, run_dir, **kw):
        specs.setdefault(spec["family"], spec)
        return launch(backend, spec, cfgs, run_dir, **kw)
    monkeypatch.setattr(B, "launch", keep)
    return specs


def test_every_family_description_round_trips_as_data(tmp_path, captured):
    from vflpriv.data import VerticalData, make_synthetic
    from vflpriv.sparse.api import fit
    from vflpriv.vertical.api import solve

    A, y, _ = make_synthetic(n=40, d=12, density=0.4, seed=0)
    data = VerticalData.from_arrays(A, y, "balanced", parties=3)
    P = dict(epsilon=4.0, delta=1e-5, feature_bound=1.0, label_bound=3.0)
    solve(data, algorithm="dp-bcfw", iterations=2, seed=1, backend="local",
          sampling="nice:2", **P)
    solve(data, algorithm="dp-bcfw-secure", iterations=2, seed=1, backend="local",
          max_features=2, **P)
    fit("synthetic-003:alpha=0.5,e=1.1,sparsity=5,seed=0,d=30,samples=20", "fediterht",
        clients=3, rounds=2, lr=0.01, seed=0, backend="local", epsilon=4.0, delta=1e-5)
    families = ["vertical", "secure", "sparse"]
    try:
        import torch  # noqa: F401

        from vflpriv.horizontal.fedavg import FedAvg
        from vflpriv.horizontal.fedp3 import MLP, FedP3
        from vflpriv.horizontal.partition import load_dataset, load_federated, make_clients
        from vflpriv.horizontal.runtime import run

        run(FedAvg(), load_federated("digits", 3, seed=0), lambda: MLP(64, 10, (8,)), rounds=1,
            seed=1, backend="local")
        X, yy, nc, _ = load_dataset("digits", seed=0)
        FedP3(model=lambda: MLP(64, 10, (8, 8)), rounds=1, seed=1, backend="local").fit(
            make_clients(X, yy, 3, alpha=math.inf, seed=0), nc)
        families += ["horizontal", "fedp3"]
    except ImportError:
        pass
    assert sorted(captured) == sorted(families)
    for fam, spec in captured.items():
        path = dump_run(spec, str(tmp_path / f"{fam}.json"))
        json.load(open(path))                                # plain JSON
        back = load_description(path)
        _same({k: v for k, v in spec.items() if k != "progress_fn"}, back, fam)
    assert (tmp_path / "horizontal.npz").exists() == ("horizontal" in families)


def test_a_description_holds_data_only(tmp_path):
    with pytest.raises(TypeError, match="cannot hold a builtin_function_or_method"):
        dump_run({"family": "x", "f": len}, str(tmp_path / "a.json"))
    (tmp_path / "b.json").write_text(json.dumps({"family": "x", "v": {"__type__": "os.system",
                                                                        "fields": {}}}))
    with pytest.raises(InputError, match="unknown type 'os.system'"):
        load_description(str(tmp_path / "b.json"))


def test_a_written_horizontal_description_runs_from_its_files_alone(tmp_path):
    """``flower.spec_dir``: the shards, node configs and run.json (+ run.npz) for separate
    machines; read back from the files alone (as the ServerApp and each SuperNode do) and run
    with the roles over the local link, it ends at the in-process model, bit for bit, and each
    client's ledger (beside its node config) holds its rounds."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("flwr")
    from accounting import read_ledger
    from vflpriv.flower.spec import read_node_config
    from vflpriv.horizontal.fedavg import FedAvg
    from vflpriv.horizontal.fedp3 import MLP
    from vflpriv.horizontal.local import LocalConfig
    from vflpriv.horizontal.partition import load_federated
    from vflpriv.horizontal.runtime import run
    from vflpriv.runtime.backends import FlowerOptions, run_local

    data = load_federated("digits", 3, seed=0)
    kw = dict(rounds=2, seed=1, epsilon=3.0, delta=1e-5,
              local=LocalConfig(epochs=1, batch_size=16, lr=0.1))

    def model():
        return MLP(64, 10, (8,))
    out = tmp_path / "desc"
    desc = run(FedAvg(), data, model, backend="flower", flower=FlowerOptions(spec_dir=str(out)),
               **kw)
    assert desc["family"] == "horizontal" and desc["clients"] == 3
    spec = load_description(str(out / "run.json"))
    cfgs = [read_node_config(str(out / f"node{k}.toml")) for k in range(3)]
    assert [c["ledger"] for c in cfgs] == [str(out / f"client{k}.ledger") for k in range(3)]
    # a seeded run's noise entropy is never written for separate machines (issue 32): each
    # client draws its DP noise from its own OS entropy
    assert not any(key in (out / f"node{k}.toml").read_text()
                   for k in range(3) for key in ("noise-entropy", "noise-spawn-key"))
    res = run_local(spec, cfgs)
    assert res["error"] is None, res["error"]
    ref = run(FedAvg(), data, model, ledger=str(tmp_path / "in.ledger"), **kw)
    assert res["theta"].shape == tuple(ref.theta.shape)
    assert not np.array_equal(res["theta"], ref.theta.numpy())     # different noise
    assert len(res["history"]) == len(ref.accuracy_history)
    assert [len(read_ledger(c["ledger"]).records) for c in cfgs] == [2, 2, 2]
    # without noise the files alone give the in-process model bit for bit
    plain = {k: v for k, v in kw.items() if k not in ("epsilon", "delta")}
    out2 = tmp_path / "plain"
    run(FedAvg(), data, model, backend="flower", flower=FlowerOptions(spec_dir=str(out2)),
        **plain)
    res2 = run_local(load_description(str(out2 / "run.json")),
                     [read_node_config(str(out2 / f"node{k}.toml")) for k in range(3)])
    ref2 = run(FedAvg(), data, model, **plain)
    assert torch.equal(torch.from_numpy(res2["theta"]), ref2.theta)
    assert res2["history"] == ref2.accuracy_history


@pytest.mark.parametrize("algorithm", ["scaffold", "fedp3"])
def test_flower_spec_horizontal_writes_a_run_that_equals_the_command_in_process(
        tmp_path, capsys, algorithm):
    """``vflpriv flower spec horizontal``: the description read back from its files alone and
    run with the roles over the local link reports the accuracy history that ``vflpriv
    horizontal`` (in process, same options) prints, bit for bit; each client's ledger is beside
    its node config."""
    pytest.importorskip("torch")
    pytest.importorskip("flwr")
    from accounting import read_ledger
    from vflpriv.cli.main import main
    from vflpriv.flower.spec import read_node_config
    from vflpriv.runtime.backends import run_local

    # non-private: a description carries no noise entropy (issue 32), so only a run without
    # noise can equal the command's bit for bit
    opts = ["--algorithm", algorithm, "--clients", "3", "--rounds", "2", "--participation", "1",
            "--local-epochs", "1", "--batch-size", "16", "--seed", "3", "--hidden", "8,8"]
    out = tmp_path / "desc"
    assert main(["flower", "spec", "horizontal", "--out", str(out), *opts]) == 0
    assert "vflpriv flower node node<i>.toml" in capsys.readouterr().out
    assert (out / "app" / "pyproject.toml").exists()
    spec = load_description(str(out / "run.json"))
    cfgs = [read_node_config(str(out / f"node{k}.toml")) for k in range(3)]
    res = run_local(spec, cfgs)
    assert res["error"] is None, res["error"]
    history = res["history"] if algorithm != "fedp3" else res["fitted"]["accuracy_history_"]
    assert main(["horizontal", *opts, "--json", str(tmp_path / "in.json"),
                 "--ledger", str(tmp_path / "in.ledger"), "-q"]) == 0
    ref = json.load(open(tmp_path / "in.json"))
    assert history == ref["accuracy_history"]


def test_flower_spec_horizontal_refuses_before_writing(tmp_path, capsys):
    from vflpriv.cli.main import main

    for extra, needle in ((["--rounds", "0"], "--rounds"), (["--epsilon", "-1"], "epsilon"),
                          (["--connect-timeout", "0"], "--connect-timeout")):
        out = tmp_path / "d"
        try:
            code = main(["flower", "spec", "horizontal", "--out", str(out), *extra])
        except SystemExit as exc:          # argparse's own refusals
            code = exc.code
        assert code == 2 and not out.exists()
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and needle in err, err


@pytest.mark.parametrize("algorithm,extra", [("dp-bcfw", {}),
                                             ("dp-bcfw-secure", {"max_features": 2})])
def test_a_written_vertical_description_runs_from_its_files_alone(tmp_path, algorithm, extra):
    """``solve(..., backend="flower", flower=FlowerOptions(spec_dir=DIR))`` writes the run for
    separate machines; read back from the files alone and run over the local link it ends at
    the in-process x, bit for bit.  With the labels at party 0 (dp-bcfw-secure), the other
    parties' files hold no labels."""
    pytest.importorskip("flwr")
    from vflpriv.data import VerticalData, make_synthetic
    from vflpriv.flower.spec import read_node_config
    from vflpriv.runtime.backends import FlowerOptions, run_local
    from vflpriv.runtime.partydata import load_party_data
    from vflpriv.vertical.api import solve

    A, y, _ = make_synthetic(n=60, d=24, density=0.3, seed=0)
    data = VerticalData.from_arrays(A, y, "balanced", parties=3)
    kw = dict(algorithm=algorithm, iterations=3, seed=4, epsilon=4.0, delta=1e-5,
              feature_bound=1.0, label_bound=3.0, **extra)
    out = tmp_path / "desc"
    pin = _own_identities(tmp_path, 3)         # each party's own key, made on its machine
    desc = solve(data, backend="flower", flower=FlowerOptions(spec_dir=str(out), pinning=pin),
                 **kw)
    assert desc["clients"] == 3 and (out / "server.ledger").exists()
    spec = load_description(str(out / "run.json"))
    cfgs = [read_node_config(str(out / f"node{k}.toml")) for k in range(3)]
    assert [c["ledger"] for c in cfgs] == [str(out / f"party{k}.ledger") for k in range(3)]
    labels = [load_party_data(c["data"])[1].size for c in cfgs]
    assert labels == ([60, 0, 0] if algorithm == "dp-bcfw-secure" else [60, 60, 60])
    assert not any(key in c for c in cfgs for key in ("noise-entropy", "noise-spawn-key"))
    res = run_local(spec, cfgs)
    assert res["error"] is None, res["error"]
    ref = solve(data, ledger=str(tmp_path / "in.ledger"), **kw)
    assert res["x"].shape == ref.x.shape
    # without noise the files alone end at the in-process x bit for bit
    plain = {k: v for k, v in kw.items() if k not in ("epsilon", "delta")}
    plain["algorithm"] = "bcfw" if algorithm == "dp-bcfw" else algorithm
    out2 = tmp_path / "plain"
    solve(data, backend="flower", flower=FlowerOptions(spec_dir=str(out2), pinning=pin), **plain)
    res2 = run_local(load_description(str(out2 / "run.json")),
                     [read_node_config(str(out2 / f"node{k}.toml")) for k in range(3)])
    assert np.array_equal(res2["x"], solve(data, **plain).x)


def _own_identities(tmp_path, K):
    """Issue 49: each party makes its own identity key in its own folder (``vflpriv flower
    identity``) and sends its fingerprint and where it keeps the key; no description writes a
    private key.  Returns the :class:`~vflpriv.runtime.keys.Pinning` the preparer builds."""
    from vflpriv.runtime.keys import Pinning, new_identity

    fps, keys = {}, {}
    for k in range(K):
        home = tmp_path / f"machine{k}"
        home.mkdir(exist_ok=True)
        keys[k] = str(home / f"party{k}.key")
        fps[k] = new_identity(keys[k])
    return Pinning(fps, keys)


def test_flower_spec_run_writes_the_files_and_refuses_before_writing(tmp_path, capsys):
    pytest.importorskip("flwr")
    from vflpriv.cli.main import main
    from vflpriv.flower.spec import read_node_config
    from vflpriv.runtime.backends import run_local

    pin = _own_identities(tmp_path, 3)        # each party's own key; only its fingerprint sent
    opts = ["--data", "synthetic:n=120,d=24,density=0.3,seed=0", "--parties", "3",
            "--algorithm", "dp-bcfw-secure", "--epsilon", "4", "--delta", "1e-5",
            "--feature-bound", "1", "--label-bound", "3", "--iterations", "3", "--seed", "2",
            "--fingerprints", ",".join(f"{k}={fp}" for k, fp in pin.fingerprints.items())]
    out = tmp_path / "desc"
    assert main(["flower", "spec", "run", "--out", str(out), *opts]) == 0
    assert "vflpriv flower node node<i>.toml" in capsys.readouterr().out
    # each party sets identity-key to where it keeps its own key (default party<k>.key beside
    # its node config)
    cfgs = [dict(read_node_config(str(out / f"node{k}.toml")), **{"identity-key": pin.keys[k]})
            for k in range(3)]
    res = run_local(load_description(str(out / "run.json")), cfgs)
    assert res["error"] is None and res["t"] == 3
    for bad, needle in ((["--algorithm", "fw"], "fw"), (["--ledger", "x.ledger"], "--ledger")):
        d = tmp_path / "bad"
        try:
            code = main(["flower", "spec", "run", "--out", str(d), *opts, *bad])
        except SystemExit as exc:
            code = exc.code
        err = capsys.readouterr().err.strip()
        assert code == 2 and not d.exists() and needle in err, err


def test_a_secure_description_pins_each_partys_own_key(tmp_path):
    """Issues 32 and 49: each party makes its own identity key and sends its fingerprint; the
    dp-bcfw-secure description pins every peer's fingerprint and writes no key file; the
    pinned run over the local link completes, and a party that swapped its key for another
    is refused by its peers at the key exchange."""
    pytest.importorskip("flwr")
    import os

    from vflpriv.data import VerticalData, make_synthetic
    from vflpriv.flower.spec import read_node_config
    from vflpriv.runtime.backends import FlowerOptions, run_local
    from vflpriv.runtime.keys import new_identity
    from vflpriv.vertical.api import solve

    A, y, _ = make_synthetic(n=60, d=24, density=0.3, seed=0)
    data = VerticalData.from_arrays(A, y, "balanced", parties=3)
    out = tmp_path / "desc"
    pin = _own_identities(tmp_path, 3)
    solve(data, backend="flower", flower=FlowerOptions(spec_dir=str(out), pinning=pin),
          algorithm="dp-bcfw-secure", iterations=2, seed=4)
    assert not any(f.endswith(".key") for f in os.listdir(out))
    cfgs = [read_node_config(str(out / f"node{k}.toml")) for k in range(3)]
    fps = pin.fingerprints
    for k, c in enumerate(cfgs):
        assert c["identity-key"] == pin.keys[k]
        assert c["peer-fingerprints"] == ",".join(f"{q}={fps[q]}" for q in range(3) if q != k)
    spec = load_description(str(out / "run.json"))
    res = run_local(spec, cfgs)
    assert res["error"] is None, res["error"]
    os.remove(cfgs[2]["identity-key"])
    new_identity(cfgs[2]["identity-key"])            # party 2's key swapped for another
    res = run_local(spec, cfgs)
    assert res["error"] is not None and "party 2's identity key has fingerprint" in \
        str(res["error"])
