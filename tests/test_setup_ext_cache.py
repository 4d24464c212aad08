"""setup.py's extension cache (issue 54, item 7): an editable install builds in fresh temporary
directories, so setup.py keeps each compiled kernel under build/ext-cache/<key>/ and copies it
when nothing it depends on changed.  The key changes with the .pyx source and every version it
names; a hit copies without compiling, a miss compiles and stores."""
import importlib.util
import os
import sys
import types

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def setup_module(monkeypatch, tmp_path):
    pytest.importorskip("setuptools")
    spec = importlib.util.spec_from_file_location("vflpriv_setup", os.path.join(ROOT, "setup.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)                 # not __main__: setup() is not called
    monkeypatch.setattr(mod, "CACHE", str(tmp_path / "cache"))
    # Cython is a build requirement only: the runtime environment need not have it
    monkeypatch.setitem(sys.modules, "Cython", types.SimpleNamespace(__version__="3.0.11"))
    return mod


def _ext(mod, name="vflpriv.kernels._sketch"):
    from setuptools import Extension

    return Extension(name, ["_ext/sketch.c"], extra_compile_args=["-O3"])


def test_the_key_follows_the_source_and_the_versions(setup_module, tmp_path, monkeypatch):
    mod, ext = setup_module, _ext(setup_module)
    key = mod.ext_key(ext, "2.2.0", "3.0.11")
    assert key == mod.ext_key(_ext(mod), "2.2.0", "3.0.11")          # same inputs, same key
    assert key != mod.ext_key(ext, "2.3.0", "3.0.11")                 # numpy's headers
    assert key != mod.ext_key(ext, "2.2.0", "3.1.0")                  # Cython's output
    assert key != mod.ext_key(_ext(mod, "vflpriv.kernels._noisy_argmax"), "2.2.0", "3.0.11")
    src = tmp_path / "sketch.pyx"
    with open(os.path.join(ROOT, "_ext", "sketch.pyx"), "rb") as fh:
        src.write_bytes(fh.read())
    monkeypatch.setitem(mod.EXTENSIONS, ext.name, str(src))
    assert mod.ext_key(ext, "2.2.0", "3.0.11") == key                 # the bytes, not the path
    src.write_bytes(src.read_bytes() + b"\n# changed\n")
    assert mod.ext_key(ext, "2.2.0", "3.0.11") != key


def _command(mod, tmp_path):
    from setuptools import Distribution

    cmd = mod.CachedBuildExt(Distribution({"name": "vflpriv"}))
    cmd.initialize_options()
    cmd.build_lib = str(tmp_path / "lib")
    cmd.build_temp = str(tmp_path / "temp")
    cmd.finalize_options()
    return cmd


def test_a_hit_copies_without_compiling_and_a_miss_compiles_and_stores(setup_module, tmp_path,
                                                                       monkeypatch):
    import numpy
    from setuptools.command.build_ext import build_ext

    mod, ext = setup_module, _ext(setup_module)
    cmd = _command(mod, tmp_path)
    target = cmd.get_ext_fullpath(ext.name)
    compiled = []

    def compile_(self, e):
        compiled.append(e.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as fh:
            fh.write(b"compiled")

    monkeypatch.setattr(build_ext, "build_extension", compile_)
    cmd.build_extension(ext)                          # miss: compiled, then stored
    assert compiled == [ext.name]
    key = mod.ext_key(ext, numpy.__version__, "3.0.11")
    cached = os.path.join(mod.CACHE, key, os.path.basename(target))
    with open(cached, "rb") as fh:
        assert fh.read() == b"compiled"
    os.remove(target)
    cmd.build_extension(ext)                          # hit: copied, not compiled
    assert compiled == [ext.name]
    with open(target, "rb") as fh:
        assert fh.read() == b"compiled"
    monkeypatch.setenv("VFLPRIV_NO_EXT_CACHE", "1")   # the opt-out compiles every time
    cmd.build_extension(ext)
    assert compiled == [ext.name, ext.name]
