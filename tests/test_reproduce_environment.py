"""Seeded runs reproduce across CPU code paths once ``reproduce`` pins the numerics
(vflpriv/reproduce/environment.py), and the output records the versions."""
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")

# A short seeded FedP3 run (12 rounds) in a fresh interpreter; MKL is told to use a different
# instruction set.  Unpinned, on the project's AVX-512 machine the last three accuracies were
# 0.812, 0.861, 0.883 (default) and 0.830, 0.803, 0.916 (MKL_ENABLE_INSTRUCTIONS=AVX2); that is
# CPU-dependent and not asserted.  Pinned they must be bitwise equal.
RUN = """
from vflpriv.reproduce.environment import pin, runtime_settings, describe
if PIN:
    pin()
import json, torch
runtime_settings()
from vflpriv.horizontal.fedp3 import FedP3
from vflpriv.horizontal.partition import load_dataset, make_clients
X, y, k, shape = load_dataset("digits")
est = FedP3(rounds=ROUNDS, seed=0).fit(make_clients(X, y, 10, alpha=0.5, seed=0), k, shape)
print(json.dumps({"acc": [float(a) for a in est.accuracy_history_], "env": describe()}))
"""


def _run(pin, extra_env, rounds=12):
    env = {k: v for k, v in os.environ.items()
           if k not in ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "MKL_ENABLE_INSTRUCTIONS")}
    env.update(extra_env)
    code = f"PIN = {pin}\nROUNDS = {rounds}\n" + RUN
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True, timeout=300)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_pinned_runs_are_bitwise_equal_across_mkl_code_paths():
    a = _run(True, {})
    b = _run(True, {"MKL_ENABLE_INSTRUCTIONS": "SSE4_2"})
    assert a["acc"] == b["acc"]
    env = a["env"]
    assert env["pinned"] is True and env["torch cpu capability"] == "DEFAULT"
    assert env["torch threads"] == 1 and env["onednn enabled"] is False
    assert env["environment"]["MKL_CBWR"] == "COMPATIBLE"
    for key in ("python", "numpy", "torch", "scipy", "scikit-learn"):
        assert env[key]


def test_pin_refuses_once_torch_is_loaded_and_says_why():
    code = ("import torch\nfrom vflpriv.reproduce.environment import pin, describe\n"
            "import json\nprint(json.dumps([pin(), describe()]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    ok, env = json.loads(out.stdout)
    assert ok is False and env["pinned"] is False
    assert "torch was loaded" in env["not pinned because"]
