"""A party's own clipping share, and a local warning when it is large.

A private vertical run clips every party's feature values to the declared ``--feature-bound``
B_a (and the labels to ``--label-bound`` B_y): the sensitivity, hence the noise, is computed from
the declared bounds, never from the data.  Clipping keeps the guarantee whatever the data, but a
bound far below the data's scale silently fits the model to a different table (the shipped
diabetes set, unscaled, lost 86% of its feature values and every label to ``--feature-bound 3``).

Each party counts how many of its own values the bound changes and warns when the share is
above :data:`THRESHOLD`.  The count is computed where the data live (the party's own process on
Flower), from the party's own values only, and is printed there: nothing is sent, so nothing
leaks and no budget is spent.
"""
from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp

from ..errors import ClippingWarning

__all__ = ["THRESHOLD", "ClippingWarning", "clipped_share", "warn_if_clipped"]

#: warn when more than this share of a party's values lie outside the declared bound
THRESHOLD = 0.05


def clipped_share(values, bound) -> tuple[int, int]:
    """``(clipped, total)``: how many of ``values`` have |v| > ``bound``, among how many.

    For a sparse matrix ``total`` counts the stored (nonzero) values: a zero is never clipped,
    and counting the zeros of a sparse table would hide a bound that clips all of its signal."""
    if sp.issparse(values):
        data = values.data
    else:
        data = np.asarray(values, dtype=np.float64).ravel()
    return int(np.count_nonzero(np.abs(data) > bound)), int(data.size)


def warn_if_clipped(k, A_k, y, feature_bound, label_bound, threshold=THRESHOLD):
    """Warn (:class:`ClippingWarning`) when party ``k``'s bounds clip more than ``threshold`` of
    its feature values, or of its labels (``y`` None: the party does not hold them)."""
    checks = [("feature values", A_k, feature_bound, "--feature-bound")]
    if y is not None and label_bound is not None:
        checks.append(("labels", y, label_bound, "--label-bound"))
    for what, values, bound, option in checks:
        if bound is None:
            continue
        clipped, total = clipped_share(values, float(bound))
        if total and clipped > threshold * total:
            warnings.warn(
                f"{'this party' if k is None else f'party {k}'}: {option} {float(bound):g} clips "
                f"{100.0 * clipped / total:.0f}% of its {what} ({clipped} of {total}"
                f"{' nonzero' if sp.issparse(values) else ''}); still private, but the model "
                f"fits the clipped values (checked on this party's own data; nothing is sent)",
                ClippingWarning, stacklevel=3)
