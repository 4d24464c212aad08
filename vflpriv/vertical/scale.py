"""The l1 radius from public quantities: ``eta="auto"`` (``--eta auto``, the default).

A row's margin is a^T x + b with |a^T x| <= B_a sum_k ||x_k||_1 <= B_a sum_k eta_k, so the radii
decide how far the linear part of a prediction can reach on the scale of the declared bound B_a.
The rule gives every party the same radius and lets the whole model reach a fixed margin M:

    eta_k = M / (K B_a),   M = 8 (logistic, smoothed hinge: a logit of 8 is a probability of
                                  3.4e-4 / 1 - 3.4e-4),
                           M = 4 B_y (least squares: four times the label bound).

With the intercept's range |b| <= 8 (``vflpriv.optim.intercept``) a logistic margin stays within
|m| <= 16, the range on which dp-bcfw-secure's sigmoid series keeps the sign of m
(``secure/fourier.py``).  B_a and B_y are the declared bounds (``feature_bound``,
``label_bound``); a non-private run that declares none takes max |a_ij| and max |y| of its own
data (nothing is released).  The rule uses no private statistic, so choosing eta by it costs no
privacy.  It was fixed before the held-out tables of ``vflpriv bench peers`` were run; their
results are in docs/peers.md.
"""
from __future__ import annotations

import numpy as np

from ..errors import InputError

#: the margin the whole linear part may reach (logistic and smoothed hinge, in logits)
MARGIN_CLASSIFICATION = 8.0
#: least squares: the reach in units of the label bound
MARGIN_REGRESSION = 4.0


def check_eta(eta):
    """``"auto"`` or a positive finite radius; one line naming a bad value."""
    if isinstance(eta, str):
        if eta.strip().lower() == "auto":
            return "auto"
        try:
            eta = float(eta)
        except ValueError:
            raise InputError(f"eta (per-party l1 radius) must be 'auto' or a positive number, "
                             f"got {eta!r}") from None
    if not (isinstance(eta, (int, float, np.integer, np.floating)) and not isinstance(eta, bool)
            and eta > 0 and np.isfinite(eta)):
        raise InputError(f"eta (per-party l1 radius) must be 'auto' or a positive finite number, "
                         f"got {eta!r}")
    return float(eta)


def _bound(declared, values, name):
    if declared is not None:
        if isinstance(declared, bool) or not isinstance(
                declared, (int, float, np.integer, np.floating)) or not (
                0 < declared < np.inf):
            raise InputError(f"{name} must be a positive finite number, got {declared!r}")
        return float(declared)
    from ..optim._checks import max_abs

    top = max_abs(values)
    return top if top > 0 else 1.0


#: the largest reach K eta B_a of the model's linear part a row's margin may have: beyond, the
#: squared loss of a margin overflows float64 (1e308) and a run ends in NaN (``--eta 1e308``
#: gave objective nan with exit 0)
MAX_REACH = 1e100


def check_reach(eta, K, feature_bound, data=None):
    """Refuse an explicit ``eta`` whose margins could reach beyond :data:`MAX_REACH`: K eta B_a
    with B_a the declared bound, or without one max |a_ij| of the data (a non-private run;
    nothing is released)."""
    B_a = _bound(feature_bound, None if data is None else data.A, "feature_bound")
    reach = float(K) * float(eta) * B_a
    if not reach <= MAX_REACH:
        raise InputError(f"--eta {float(eta):g}: the model's margin could reach K eta B_a = "
                         f"{K} x {float(eta):g} x {B_a:g} = {reach:.3g}, beyond {MAX_REACH:g} "
                         "(where the loss overflows); give a smaller --eta")


def auto_eta(loss_name, K, feature_bound, label_bound, data=None) -> tuple[float, str]:
    """``(eta_k, reason)`` by the rule of the module docstring.  ``data`` (a VerticalData) is
    read only when a bound is not declared (non-private runs)."""
    B_a = _bound(feature_bound, None if data is None else data.A, "feature_bound")
    if loss_name == "squared":
        B_y = _bound(label_bound, None if data is None else data.y, "label_bound")
        M = MARGIN_REGRESSION * B_y
        why = f"4 B_y / (K B_a) with B_y={B_y:g}, B_a={B_a:g}, K={K}"
    else:
        M = MARGIN_CLASSIFICATION
        why = f"8 / (K B_a) with B_a={B_a:g}, K={K}: the model's margin reaches 8 logits"
    return M / (K * B_a), why
