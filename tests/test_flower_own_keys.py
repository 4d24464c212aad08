"""Each party makes its own identity key (issue 49, item 5).

``vflpriv flower spec run|predict`` takes each party's fingerprint (``--fingerprints``, or the
schema a party sends) and never writes a private key: whoever prepares the description (and may
run the server) can pin the parties' keys but cannot sign a key offer as any of them.  Here each
test plays each party on its own "machine" (a folder of its own): the party makes its key there
with ``vflpriv flower identity`` and hands over only the fingerprint printed; it receives its
``node<k>.toml`` (and its data file) and runs from its folder.  Checked: no file of a
description holds private key material; a description without a party's fingerprint is refused
(exit 2, one line naming the party) unless ``--unpinned``, and then every node warns in its log;
a fingerprint that is not the party's key stops the run at the key exchange, naming the party,
before any release (over the in-process LocalLink: the ClientApp's code path), for training
(least squares, both logistic paths, aligned from files) and for scoring."""
import os
import shutil

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("flwr")

from accounting import read_ledger  # noqa: E402

from vflpriv.cli.main import main  # noqa: E402
from vflpriv.flower.spec import load_description, read_node_config  # noqa: E402
from vflpriv.runtime.backends import run_local  # noqa: E402

K = 3
DATA = ["--data", "synthetic:n=120,d=12,density=0.5,seed=0", "--parties", str(K),
        "--algorithm", "dp-bcfw-secure", "--epsilon", "4", "--delta", "1e-5",
        "--feature-bound", "1", "--label-bound", "1", "--iterations", "2", "--seed", "2"]
PATHS = {"squared": ["--loss", "squared"],
         "ssp": ["--loss", "logistic", "--logistic-path", "ssp"],
         "glm": ["--loss", "logistic", "--logistic-path", "glm"]}


def own_keys(tmp_path, capsys, parties=range(K)):
    """Each party, on its own machine, runs ``vflpriv flower identity`` and sends back the
    fingerprint printed: ``{k: (its folder, fingerprint)}``; the preparer gets the hex only."""
    out = {}
    for k in parties:
        home = tmp_path / f"machine{k}"
        home.mkdir(parents=True, exist_ok=True)
        capsys.readouterr()
        assert main(["flower", "identity", "--out", str(home / f"party{k}.key")]) == 0
        fp = capsys.readouterr().out.split()[0]
        assert len(fp) == 64
        out[k] = (home, fp)
    return out


def fingerprints(keys):
    return ["--fingerprints", ",".join(f"{k}={fp}" for k, (_, fp) in sorted(keys.items()))]


def deal(out, keys):
    """Hand each party its node config and data file (copied into its own folder, beside its
    key), and read the config back there as its SuperNode would."""
    cfgs = []
    for k in range(K):
        home = keys[k][0]
        for name in (f"node{k}.toml", f"party{k}.npz"):
            shutil.copy(out / name, home / name)
        cfgs.append(read_node_config(str(home / f"node{k}.toml")))
    return cfgs


def private_key_material(folder):
    """Files under ``folder`` holding a PEM private key (any kind) or a raw key file."""
    from cryptography.hazmat.primitives import serialization as ser

    found = []
    for root, _, files in os.walk(folder):
        for f in files:
            path = os.path.join(root, f)
            with open(path, "rb") as fh:
                body = fh.read()
            if b"PRIVATE KEY" in body or f.endswith(".key"):
                found.append(path)
                continue
            try:
                ser.load_pem_private_key(body, password=None)
                found.append(path)
            except (ValueError, TypeError):
                pass
    return found


def _bad(capsys, argv, *needles, out=None):
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    for n in needles:
        assert n in err, err
    if out is not None:
        assert not os.path.exists(out)
    return err


def _nothing_released(cfgs, out=None):
    for c in cfgs:
        assert not os.path.exists(c["ledger"]) or read_ledger(c["ledger"]).records == []
    if out is not None:
        assert read_ledger(str(out / "server.ledger")).records == []


@pytest.mark.parametrize("path", sorted(PATHS))
def test_spec_run_pins_each_partys_own_key_and_writes_no_private_key(tmp_path, capsys, path):
    keys = own_keys(tmp_path, capsys)
    out = tmp_path / "desc"
    assert main(["flower", "spec", "run", "--out", str(out), *DATA, *PATHS[path],
                 *fingerprints(keys)]) == 0
    capsys.readouterr()
    assert private_key_material(out) == []
    spec = load_description(str(out / "run.json"))
    written = [read_node_config(str(out / f"node{k}.toml")) for k in range(K)]
    for k, c in enumerate(written):
        assert c["identity-key"] == str(out / f"party{k}.key")      # beside its node config
        assert c["peer-fingerprints"] == ",".join(f"{q}={keys[q][1]}" for q in range(K) if q != k)
        assert "unpinned" not in c
    cfgs = deal(out, keys)
    assert [c["identity-key"] for c in cfgs] == [str(keys[k][0] / f"party{k}.key")
                                                 for k in range(K)]
    res = run_local(spec, cfgs)
    assert res["error"] is None, res["error"]
    assert "WARNING: running unpinned" not in capsys.readouterr().err
    assert all(read_ledger(c["ledger"]).records for c in cfgs)


@pytest.mark.parametrize("path", sorted(PATHS))
def test_a_fingerprint_that_is_not_the_partys_key_is_refused_at_the_key_exchange(
        tmp_path, capsys, path):
    """The description pins, for party 2, the fingerprint of a key party 2 does not hold (the
    preparer's own, say): every peer refuses at the key exchange, naming party 2, before any
    release; no party's ledger and not the server's holds a record."""
    keys = own_keys(tmp_path, capsys)
    other = own_keys(tmp_path / "elsewhere", capsys, parties=[2])
    bad = dict(keys)
    bad[2] = (keys[2][0], other[2][1])
    out = tmp_path / "desc"
    assert main(["flower", "spec", "run", "--out", str(out), *DATA, *PATHS[path],
                 *fingerprints(bad)]) == 0
    cfgs = deal(out, keys)              # party 2 runs with its own key, not the pinned one
    res = run_local(load_description(str(out / "run.json")), cfgs)
    err = res["error"]
    assert err is not None and err["kind"] == "PartyRefused", err
    assert err["round"] == 0 and err["party"] != 2
    assert "party 2's identity key has fingerprint" in err["reason"]
    assert f"pinned {other[2][1][:16]}" in err["reason"]
    _nothing_released(cfgs, out)


def test_spec_run_refuses_a_description_without_every_fingerprint(tmp_path, capsys):
    keys = own_keys(tmp_path, capsys)
    out = str(tmp_path / "desc")
    base = ["flower", "spec", "run", "--out", out, *DATA]
    _bad(capsys, base, "party 0 has no identity fingerprint", "vflpriv flower identity",
         "--unpinned", out=out)
    _bad(capsys, [*base, "--fingerprints", f"0={keys[0][1]},1={keys[1][1]}"],
         "party 2 has no identity fingerprint", out=out)
    _bad(capsys, [*base, "--fingerprints", f"0={keys[0][1]}", "--fingerprints",
                  f"1={keys[1][1]}"], "party 2 has no", out=out)           # repeated
    _bad(capsys, [*base, "--fingerprints", f"0={keys[0][1][:20]}"], "--fingerprints",
         "64 hex digits", out=out)
    _bad(capsys, [*base, *fingerprints(keys), "--fingerprints", f"5={keys[0][1]}"],
         "party 5", "0..2", out=out)
    _bad(capsys, [*base, "--fingerprints", f"0={keys[0][1]},0={keys[1][1]}"], "party 0 twice",
         out=out)
    _bad(capsys, [*base, *fingerprints(keys), "--unpinned"], "--unpinned", out=out)
    plain = [a if a != "dp-bcfw-secure" else "dp-bcfw" for a in base]
    _bad(capsys, [*plain, *fingerprints(keys)], "--fingerprints", "exchanges no keys", out=out)


@pytest.mark.parametrize("path", sorted(PATHS))
def test_an_unpinned_description_is_written_and_every_node_warns(tmp_path, capfd, path):
    out = tmp_path / "desc"
    assert main(["flower", "spec", "run", "--out", str(out), *DATA, *PATHS[path],
                 "--unpinned"]) == 0
    assert private_key_material(out) == []
    cfgs = [read_node_config(str(out / f"node{k}.toml")) for k in range(K)]
    for c in cfgs:
        assert c["unpinned"] is True and "identity-key" not in c and "peer-fingerprints" not in c
    capfd.readouterr()
    res = run_local(load_description(str(out / "run.json")), cfgs)
    assert res["error"] is None, res["error"]
    err = capfd.readouterr().err
    for k in range(K):
        assert f"vflpriv party {k}: WARNING: running unpinned" in err, err


# -- from the parties' schemas: training aligned from files, and scoring ------------------------
def party_files(tmp_path, n=160, seed=0):
    """Three CSV files, 3 columns each, ~90% of n IDs each; party 0 also a 0/1 label ``y``."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, 9))
    y = (X[:, [0, 4, 7]] @ [0.8, -0.6, 0.5] > 0).astype(int)
    ids = np.array([f"c{i:04d}" for i in range(n)])
    paths = []
    for k in range(K):
        kept = rng.permutation(np.flatnonzero(rng.random(n) < 0.9))
        df = pd.DataFrame(X[kept][:, 3 * k:3 * k + 3], columns=[f"f{3 * k + j}" for j in range(3)])
        df.insert(0, "cid", ids[kept])
        if k == 0:
            df["y"] = y[kept]
        home = tmp_path / f"machine{k}"
        home.mkdir(exist_ok=True)
        p = home / f"party{k}.csv"
        df.to_csv(p, index=False)
        paths.append(str(p))
    return paths


def schemas(tmp_path, paths, capsys, identity=True, label=True):
    """Each party's schema, written on its machine; with ``identity`` it makes its own key
    there (``--identity-key``) and the schema carries the fingerprint and the key's path."""
    out, fps = [], {}
    for k, p in enumerate(paths):
        home = tmp_path / f"machine{k}"
        home.mkdir(parents=True, exist_ok=True)
        s = home / "schema.json"
        capsys.readouterr()
        assert main(["flower", "schema", "--party-data", p, "--id", "cid", "--json", str(s),
                     *(["--label", "y"] if k == 0 and label else []),
                     *(["--identity-key", str(home / "id.key")] if identity else [])]) == 0
        if identity:
            fps[k] = capsys.readouterr().out.splitlines()[-1].split()[0]
        out += ["--party-schema", f"{k}={s}"]
    return out, fps


TRAIN = ["--label", "y", "--label-party", "0", "--algorithm", "dp-bcfw-secure", "--loss",
         "logistic", "--epsilon", "4", "--delta", "1e-5", "--feature-bound", "1",
         "--label-bound", "1", "--iterations", "2"]


def test_aligned_training_pins_the_keys_its_schemas_carry(tmp_path, capfd):
    from vflpriv.runtime.keys import fingerprint, identity_public, load_identity

    paths = party_files(tmp_path)
    ps, fps = schemas(tmp_path, paths, capfd)
    for k in range(K):          # the schema's fingerprint is the key's on the party's machine
        key = tmp_path / f"machine{k}" / "id.key"
        assert fingerprint(identity_public(load_identity(str(key)))) == fps[k]
        assert os.stat(key).st_mode & 0o777 == 0o600
    out = tmp_path / "desc"
    model = tmp_path / "model"
    assert main(["flower", "spec", "run", "--out", str(out), *ps, *TRAIN,
                 "--model-out", str(model)]) == 0
    assert private_key_material(out) == []
    cfgs = [read_node_config(str(out / f"node{k}.toml")) for k in range(K)]
    for k, c in enumerate(cfgs):
        assert c["identity-key"] == str(tmp_path / f"machine{k}" / "id.key")
        assert c["peer-fingerprints"] == ",".join(f"{q}={fps[q]}" for q in range(K) if q != k)
    capfd.readouterr()
    res = run_local(load_description(str(out / "run.json")), cfgs)
    assert res["error"] is None, res["error"]
    assert "running unpinned" not in capfd.readouterr().err

    # a fingerprint given with --fingerprints that is not the schema's: refused, one line
    _bad(capfd, ["flower", "spec", "run", "--out", str(tmp_path / "x"), *ps, *TRAIN,
                  "--fingerprints", f"1={fps[2]}"], "party 1's schema carries another",
         out=str(tmp_path / "x"))
    # schemas without keys: refused unless --unpinned, then every node warns
    ps2, _ = schemas(tmp_path / "bare", paths, capfd, identity=False)
    _bad(capfd, ["flower", "spec", "run", "--out", str(tmp_path / "y"), *ps2, *TRAIN],
         "party 0 has no identity fingerprint", out=str(tmp_path / "y"))
    out2 = tmp_path / "unpinned"
    assert main(["flower", "spec", "run", "--out", str(out2), *ps2, *TRAIN, "--unpinned"]) == 0
    capfd.readouterr()
    res = run_local(load_description(str(out2 / "run.json")),
                    [read_node_config(str(out2 / f"node{k}.toml")) for k in range(K)])
    assert res["error"] is None, res["error"]
    err = capfd.readouterr().err
    assert all(f"vflpriv party {k}: WARNING: running unpinned" in err for k in range(K)), err


def _model(tmp_path):
    from vflpriv.model import write_split_model

    rng = np.random.default_rng(1)
    model = tmp_path / "model"
    write_split_model(str(model), coef=rng.normal(size=9),
                      blocks=[range(3 * k, 3 * k + 3) for k in range(K)],
                      names=[f"f{j}" for j in range(9)], intercept=0.25, label_party=0,
                      loss="logistic")
    return str(model)


def test_scoring_keys_are_pinned_and_a_wrong_one_is_refused_before_any_margin(
        tmp_path, capfd):
    """Scoring (label party 0): parties 1 and 2 sign their mask keys with their own identity
    keys; the run gives the scores.  A description pinning another key for party 2 is refused
    by party 1 at the scoring keys, naming party 2, before any masked margin is sent: the label
    party writes no scores.  Without fingerprints the description is refused unless
    --unpinned, and then every node warns."""
    paths = party_files(tmp_path)
    ps, fps = schemas(tmp_path, paths, capfd, label=False)
    model = _model(tmp_path)
    out = tmp_path / "scoring"
    assert main(["flower", "spec", "predict", "--out", str(out), "--model", model, *ps]) == 0
    assert private_key_material(out) == []
    cfgs = [read_node_config(str(out / f"node{k}.toml")) for k in range(K)]
    assert "identity-key" not in cfgs[0] and "peer-fingerprints" not in cfgs[0]    # L signs nothing
    assert cfgs[1]["peer-fingerprints"] == f"2={fps[2]}"
    assert cfgs[2]["peer-fingerprints"] == f"1={fps[1]}"
    capfd.readouterr()
    res = run_local(load_description(str(out / "run.json")), cfgs)
    assert res["error"] is None, res["error"]
    assert "running unpinned" not in capfd.readouterr().err
    assert os.path.exists(cfgs[0]["scores-file"])
    pinned_keys = res["scoring"]["messages_by_type"]["ScoreKey"]
    assert pinned_keys[0] == 2

    wrong = own_keys(tmp_path / "mallory", capfd, parties=[2])
    out2 = tmp_path / "scoring2"
    assert main(["flower", "spec", "predict", "--out", str(out2), "--model", model, *ps,
                 "--scores", str(tmp_path / "s2.json"),
                 "--fingerprints", f"1={fps[1]},2={wrong[2][1]}"]) == 2      # not the schema's
    capfd.readouterr()
    ps_bare, _ = schemas(tmp_path / "bare", paths, capfd, identity=False, label=False)
    _bad(capfd, ["flower", "spec", "predict", "--out", str(out2), "--model", model, *ps_bare],
         "party 1 has no identity fingerprint", out=str(out2))
    keys = {1: (None, fps[1]), 2: (None, wrong[2][1])}
    assert main(["flower", "spec", "predict", "--out", str(out2), "--model", model, *ps_bare,
                 "--scores", str(tmp_path / "s2.json"),
                 "--fingerprints", ",".join(f"{k}={v[1]}" for k, v in keys.items())]) == 0
    cfgs2 = [read_node_config(str(out2 / f"node{k}.toml")) for k in range(K)]
    for k in (1, 2):          # each party keeps its key where it made it (set in its config)
        cfgs2[k]["identity-key"] = str(tmp_path / f"machine{k}" / "id.key")
    res = run_local(load_description(str(out2 / "run.json")), cfgs2)
    err = res["error"]
    assert err is not None and err["kind"] == "PartyRefused" and err["party"] == 1, err
    assert "party 2's identity key has fingerprint" in err["reason"]
    assert not os.path.exists(tmp_path / "s2.json") and "scores" not in res

    out3 = tmp_path / "scoring3"
    assert main(["flower", "spec", "predict", "--out", str(out3), "--model", model, *ps_bare,
                 "--scores", str(tmp_path / "s3.json"), "--unpinned"]) == 0
    cfgs3 = [read_node_config(str(out3 / f"node{k}.toml")) for k in range(K)]
    assert all(c["unpinned"] is True for c in cfgs3)
    capfd.readouterr()
    res = run_local(load_description(str(out3 / "run.json")), cfgs3)
    assert res["error"] is None, res["error"]
    err = capfd.readouterr().err
    assert all(f"vflpriv party {k}: WARNING: running unpinned" in err for k in range(K)), err
    # the pinned run's scoring keys were signed offers (OFFER_BYTES each), the unpinned bare keys
    from vflpriv.runtime.keys import OFFER_BYTES

    bare = res["scoring"]["messages_by_type"]["ScoreKey"]
    assert pinned_keys[1] - bare[1] == 2 * (OFFER_BYTES - 32)


def test_a_node_whose_own_key_is_missing_says_how_to_make_it(tmp_path, capsys):
    """The node config names ``party<k>.key`` beside it; a party that has not made it there is
    told to run ``vflpriv flower identity`` (``vflpriv flower node`` before starting, the role
    at the key exchange), and nothing is released."""
    keys = own_keys(tmp_path, capsys)
    out = tmp_path / "desc"
    assert main(["flower", "spec", "run", "--out", str(out), *DATA, *fingerprints(keys)]) == 0
    capsys.readouterr()
    node = str(out / "node1.toml")
    _bad(capsys, ["flower", "node", node, "--superlink", "127.0.0.1:9092", "--insecure",
                  "--print"], "party1.key", "does not exist", "vflpriv flower identity")
    cfgs = deal(out, keys)
    os.remove(cfgs[1]["identity-key"])
    res = run_local(load_description(str(out / "run.json")), cfgs)
    err = res["error"]
    assert err is not None and err["party"] == 1 and "vflpriv flower identity" in err["reason"]
    _nothing_released(cfgs, out)


def test_an_offer_signed_for_one_purpose_is_refused_for_the_other(tmp_path):
    """The purpose is signed: a scoring key offer relayed as a dp-bcfw-secure channel key (or
    the reverse) does not verify, even under the right identity and run."""
    from vflpriv.runtime.keys import KeyRefused, accept_offer, load_identity, make_offer, \
        new_identity
    from vflpriv.vertical.secure.mpc.channel import new_key_pair

    fp = new_identity(str(tmp_path / "p2.key"))
    ident = load_identity(str(tmp_path / "p2.key"))
    eph = new_key_pair()[1]
    pins = {2: fp}
    for made, taken in (("scoring", "dp-bcfw-secure"), ("dp-bcfw-secure", "scoring")):
        offer = make_offer(eph, ident, "run-1", 2, purpose=made)
        assert accept_offer(offer, 1, 2, "run-1", pins, purpose=made) == eph
        with pytest.raises(KeyRefused, match="party 2's key offer is not signed by its pinned"):
            accept_offer(offer, 1, 2, "run-1", pins, purpose=taken)
