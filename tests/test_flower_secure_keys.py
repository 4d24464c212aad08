"""Pinned peer keys for dp-bcfw-secure on Flower (issue 23, part 3; vflpriv/flower/keys.py).

A server that relays the parties' key offers must not be able to substitute one: with every
party's node config pinning its peers' identity fingerprints, an offer signed by another identity,
an ephemeral key swapped under a valid identity, an offer replayed from another run or relayed
for another party, and an unsigned offer are each refused, naming the peer.  The fingerprint is
checked against SHA-256 computed independently (``cryptography``'s hash, not hashlib).  The
flower-sim runs check that pinning changes nothing in a run (same x as in process) and that a
wrong pin stops the run at the key exchange, before any release."""
import os

import numpy as np
import pytest

from vflpriv.runtime.keys import (KeyRefused, accept_offers, fingerprint, identity_public,
                                  load_identity, make_offer, new_identity, parse_pins)
from vflpriv.vertical.secure.mpc.channel import new_key_pair


def _sha256(data):
    from cryptography.hazmat.primitives import hashes

    h = hashes.Hash(hashes.SHA256())
    h.update(data)
    return h.finalize().hex()


@pytest.fixture
def parties(tmp_path):
    ids, fps = [], []
    for k in range(3):
        fps.append(new_identity(str(tmp_path / f"p{k}.key")))
        ids.append(load_identity(str(tmp_path / f"p{k}.key")))
    eph = [new_key_pair() for _ in range(3)]
    return ids, fps, eph


def _offers(ids, eph, run="run-1"):
    return [(k, make_offer(eph[k][1], ids[k], run, k)) for k in range(3)]


def test_fingerprint_is_sha256_of_the_raw_public_key(parties, tmp_path):
    ids, fps, _ = parties
    for key, fp in zip(ids, fps):
        assert fp == fingerprint(identity_public(key)) == _sha256(identity_public(key))
    assert oct(os.stat(tmp_path / "p0.key").st_mode & 0o777) == "0o600"
    with pytest.raises(FileExistsError):
        new_identity(str(tmp_path / "p0.key"))                  # never overwritten


def test_pinned_offers_accepted_and_every_substitution_refused(parties, tmp_path):
    ids, fps, eph = parties
    pins = {1: fps[1], 2: fps[2]}
    offers = _offers(ids, eph)
    peers = accept_offers(offers, 0, eph[0][1], "run-1", pins)
    assert peers == {k: eph[k][1] for k in range(3)}
    # no pins: the server is trusted (bare and signed offers both accepted, as before)
    assert accept_offers([(k, eph[k][1]) for k in range(3)], 0, eph[0][1], "r", {}) == peers

    new_identity(str(tmp_path / "m.key"))
    mallory = load_identity(str(tmp_path / "m.key"))
    m_eph = new_key_pair()
    cases = {
        "another identity": (2, make_offer(m_eph[1], mallory, "run-1", 2), "fingerprint"),
        "swapped ephemeral": (2, offers[2][1][:3] + m_eph[1] + offers[2][1][35:],
                              "not signed by its pinned identity"),
        "replayed from another run": (2, make_offer(eph[2][1], ids[2], "run-0", 2),
                                      "not signed by its pinned identity"),
        "party 1's offer as party 2's": (2, offers[1][1], "fingerprint"),
        "unsigned": (2, eph[2][1], "not signed by an identity key"),
    }
    for name, (q, bad, needle) in cases.items():
        tampered = [(k, bad if k == q else o) for k, o in offers]
        with pytest.raises(KeyRefused, match=needle) as info:
            accept_offers(tampered, 0, eph[0][1], "run-1", pins)
        assert "party 2" in str(info.value), name
    with pytest.raises(KeyRefused, match="no pinned fingerprint for party 2"):
        accept_offers(offers, 0, eph[0][1], "run-1", {1: fps[1]})
    with pytest.raises(KeyRefused, match="does not hold its own key"):
        accept_offers(offers, 0, new_key_pair()[1], "run-1", pins)
    with pytest.raises(KeyRefused, match="no key offer from pinned party"):
        accept_offers(offers[:2], 0, eph[0][1], "run-1", pins)


@pytest.mark.parametrize("text", ["1=abc", "x=" + "0" * 64, "1:" + "0" * 64, "1=" + "g" * 64])
def test_bad_pins_are_refused(text):
    with pytest.raises(KeyRefused, match="PARTY=<64 hex digits>"):
        parse_pins(text)


@pytest.mark.slow
@pytest.mark.usefixtures("one_ray")                  # conftest: one Ray for all runs
def test_secure_run_with_pinned_keys_same_as_inprocess_and_a_wrong_pin_stops_it(
        tmp_path, monkeypatch):
    pytest.importorskip("flwr")
    pytest.importorskip("ray")
    from accounting import read_ledger

    from vflpriv.data import VerticalData, make_synthetic
    from vflpriv.vertical import remote as FV
    from vflpriv.flower.link import PartyRefused
    from vflpriv.vertical.api import solve

    A, y, _ = make_synthetic(n=50, d=18, density=0.3, seed=0)
    data = VerticalData.from_arrays(A, y, "balanced", parties=3)
    kw = dict(algorithm="dp-bcfw-secure", epsilon=4.0, delta=1e-5, feature_bound=1.0,
              label_bound=3.0, iterations=3, seed=4, max_features=2)
    fps = [new_identity(str(tmp_path / f"id{k}.key")) for k in range(3)]
    configs = FV.party_configs
    wrong = {}

    def pinned(data, run_dir, **kw):       # each party's node config: its key and its pins
        cfgs = configs(data, run_dir, **kw)
        for c in cfgs:
            k = int(c["party"])
            c["identity-key"] = str(tmp_path / f"id{k}.key")
            c["peer-fingerprints"] = ",".join(f"{q}={wrong.get((k, q), fps[q])}"
                                              for q in range(3) if q != k)
        return cfgs
    monkeypatch.setattr(FV, "party_configs", pinned)

    ref = solve(data, ledger=str(tmp_path / "a.ledger"), **kw)
    sol = solve(data, ledger=str(tmp_path / "b.ledger"), backend="flower-sim", **kw)
    assert np.array_equal(ref.x, sol.x) and ref.objective == sol.objective

    wrong[(1, 2)] = "0" * 64                # party 1 pins a key party 2 does not have
    with pytest.raises(PartyRefused) as info:
        solve(data, ledger=str(tmp_path / "c.ledger"), backend="flower-sim", **kw)
    assert info.value.party == 1 and "party 2's identity key has fingerprint" in \
        info.value.reason
    for k in range(3):                      # refused at the key exchange: nothing released
        path = tmp_path / f"c.ledger.party{k}"
        assert not path.exists() or read_ledger(str(path)).records == []
