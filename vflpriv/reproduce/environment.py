"""Seeded runs that give the same numbers on every machine with the same software.

Why a seeded run could differ between machines (issue 24: FedP3 "fixed", seed 0, 0.944 here and
0.896 elsewhere, the same commit): torch picks its vectorized kernels by the CPU's instruction set
(ATen's ``ATEN_CPU_CAPABILITY``: default / avx2 / avx512) and MKL picks its own code path by CPU
(``MKL_CBWR``).  Different kernels round float32 sums in a different order; training amplifies the
last-bit differences over the rounds, and a final-round accuracy on a small test set swings by
several points from round to round.  Measured on the project's machine, the same seeded command
(``vflpriv fedp3 --data digits --seed 0 --alpha 0.5 --rounds 30 --local-pruning fixed``) ends at
0.9438 (AVX-512, the default here), 0.9456 (``ATEN_CPU_CAPABILITY=avx2``), 0.9130
(``ATEN_CPU_CAPABILITY=default``), 0.9299 (``MKL_ENABLE_INSTRUCTIONS=AVX2``).

:func:`pin` fixes both before torch loads: ATen's portable (non-vectorized) kernels and MKL's
conditional numerical reproducibility mode ``COMPATIBLE`` (Intel, "Introduction to Conditional
Numerical Reproducibility"); one thread for torch, MKL, OpenMP and OpenBLAS (reduction order);
and at run time oneDNN off (its JIT kernels also dispatch on the CPU).  With these the run above
gives 0.9414 whatever ``MKL_ENABLE_INSTRUCTIONS`` says (AVX-512, AVX2, SSE4.2).  Different
versions of torch, numpy or scikit-learn may still change the numbers: :func:`describe` records them
with every result.
"""
from __future__ import annotations

import os
import sys

PINNED = {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE", "OMP_NUM_THREADS": "1",
          "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}

_state = {"pinned": None, "why": ""}


def pin():
    """Set :data:`PINNED` in the environment (values already set by the user are kept) if torch
    has not been loaded yet; record whether the pin took effect."""
    if "torch" in sys.modules:
        _state.update(pinned=False, why="torch was loaded before `reproduce` started; its kernels "
                      "are the CPU's own")
        return False
    for k, v in PINNED.items():
        os.environ.setdefault(k, v)
    _state.update(pinned=all(os.environ.get(k) == v for k, v in PINNED.items()),
                  why="" if all(os.environ.get(k) == v for k, v in PINNED.items()) else
                  "the environment overrides: " + ", ".join(
                      f"{k}={os.environ[k]}" for k, v in PINNED.items() if os.environ[k] != v))
    return _state["pinned"]


def runtime_settings():
    """At run time: one torch thread, oneDNN off (when torch is installed)."""
    try:
        import torch
    except ImportError:
        return
    torch.set_num_threads(1)
    torch.backends.mkldnn.enabled = False


def describe():
    """The software and numeric settings a result depends on (for the JSON output)."""
    import platform

    import numpy
    import scipy
    import sklearn

    out = {"python": platform.python_version(), "numpy": numpy.__version__,
           "scipy": scipy.__version__, "scikit-learn": sklearn.__version__,
           "machine": platform.machine(), "pinned": _state["pinned"],
           "environment": {k: os.environ.get(k) for k in PINNED}}
    if _state["why"]:
        out["not pinned because"] = _state["why"]
    try:
        import torch
    except ImportError:
        return out
    cfg = torch.__config__.show()
    out.update({"torch": torch.__version__, "torch threads": torch.get_num_threads(),
                "torch cpu capability": torch.backends.cpu.get_cpu_capability(),
                "torch blas": "mkl" if "BLAS_INFO=mkl" in cfg else "other",
                "onednn enabled": bool(torch.backends.mkldnn.enabled)})
    return out
