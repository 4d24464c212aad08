"""Pick the compiled helpers when built, the pure-Python reference otherwise.

Set ``VFLPRIV_FORCE_REFERENCE=1`` to force the reference (tests use it to compare the two).
"""
import os

from . import _reference

compiled = False
if os.environ.get("VFLPRIV_FORCE_REFERENCE", "") not in ("1", "true", "yes"):
    try:
        from . import _kernels as _impl  # type: ignore[attr-defined]
        compiled = True
    except ImportError:  # extension not built: stay correct, only slower
        _impl = _reference
else:
    _impl = _reference

log_a_subsampled_gaussian = _impl.log_a_subsampled_gaussian
kov_delta_pure = _impl.kov_delta_pure
kov_log_delta_pure = _impl.kov_log_delta_pure
