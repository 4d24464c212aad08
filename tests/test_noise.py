"""The DP noise generator (vflpriv.noise): ChaCha20 from a library, checked against another
library's ChaCha20; seeded streams reproducible; states round-trip through JSON."""
import json

import numpy as np
import pytest

from vflpriv import noise
from vflpriv.errors import InputError


def test_the_stream_is_rfc_8439_chacha20():
    """randomgen's ChaCha (20 rounds, key K, counter 0) is the ChaCha20 keystream of K with a
    zero nonce, word for word, as the ``cryptography`` package (OpenSSL) computes it."""
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms
    from randomgen import ChaCha

    key = int.from_bytes(bytes(range(32)), "little")
    raw = ChaCha(key=key, counter=0, rounds=noise.ROUNDS).random_raw(64)
    ks = Cipher(algorithms.ChaCha20(key.to_bytes(32, "little"), bytes(16)), None) \
        .encryptor().update(bytes(8 * 64))
    assert np.array_equal(raw, np.frombuffer(ks, dtype="<u8"))


def test_generator_is_chacha20_and_seeded_streams_repeat():
    g = noise.generator(5)
    assert noise.is_secure(g) and not noise.is_secure(np.random.default_rng(5))
    assert np.array_equal(g.normal(size=10), noise.generator(5).normal(size=10))
    ss = np.random.SeedSequence(5)
    assert np.array_equal(noise.generator(ss).normal(size=10), noise.generator(5).normal(size=10))
    assert not np.array_equal(noise.generator([5, 1]).normal(size=10),
                              noise.generator(5).normal(size=10))


def test_unseeded_generators_differ():
    a, b = noise.generator(), noise.generator()
    assert noise.is_secure(a)
    assert not np.array_equal(a.integers(0, 2 ** 63, 4), b.integers(0, 2 ** 63, 4))


@pytest.mark.parametrize("draws", [0, 1, 3, 17])
def test_state_round_trips_through_json(draws):
    """Mid-stream (after 64- and 32-bit draws), a state written as JSON and restored into a fresh
    generator continues exactly where the original does."""
    g = noise.generator(11)
    for _ in range(draws):
        g.normal(size=3)
        g.integers(0, 7, size=5, dtype=np.int32)
        g.random(dtype=np.float32)
    st = json.loads(json.dumps(noise.state(g)))
    h = noise.generator(99)
    noise.restore(h, st)
    assert np.array_equal(h.normal(size=50), g.normal(size=50))
    assert np.array_equal(h.integers(0, 2 ** 31, 9, dtype=np.int32),
                          g.integers(0, 2 ** 31, 9, dtype=np.int32))
    assert noise.state(None) is None


def test_a_pcg64_state_is_refused():
    with pytest.raises(InputError, match="PCG64"):
        noise.restore(noise.generator(1), np.random.default_rng(1).bit_generator.state)


def test_the_kernels_accept_the_generator():
    from vflpriv import kernels

    s = np.array([0.0, 10.0, 0.0])
    assert kernels.noisy_argmax(s, "gumbel", 1e-3, noise.generator(0)) == 1
