"""A party's block as every path reads it: clipped to the declared bounds (private runs), in
fixed point, and the rows per masked-block frame."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ....errors import InputError
from ...clipshare import warn_if_clipped
from ..mpc.ring import decode, encode


#: rows per MaskedBlock frame (8192 x 500 columns = 32.8 MB).  The products are sums over rows, so
#: the chunking changes neither the words computed nor the mask stream (U_k is read row-major in
#: order); only the number of frames (12 + 12 bytes of header each) depends on it.
CHUNK_ROWS = 8192


def clip_block(A_k, feature_bound, row_clip):
    """A party's block clipped to its declared bounds: entries to [-B_a, B_a], then every row to
    l2 norm <= C (the row clip), as a new CSR matrix."""
    A = sp.csr_matrix(A_k, dtype=np.float64, copy=True)
    np.clip(A.data, -feature_bound, feature_bound, out=A.data)
    norms = np.sqrt(np.asarray(A.multiply(A).sum(axis=1)).ravel())
    scale = np.ones_like(norms)
    # a relative margin far above float rounding, so that no rounding in the norm or the
    # scaling can leave a row above C (truncation to fixed point only shrinks it further)
    target = row_clip * (1.0 - 1e-9)
    big = norms > target
    scale[big] = target / norms[big]
    return sp.csr_matrix(sp.diags(scale) @ A)


@dataclass(frozen=True)
class PreparedBlock:
    """A party's block as the protocol reads it: clipped to the declared bounds (private runs),
    truncated to fixed point, and the float values that fixed point stands for; the labels
    clipped.  Read-only once made, so a host serving many messages for one party may keep it
    (:mod:`.remote`) instead of making it again for each."""
    A_fx: object          # CSR, entries encoded in Z_{2^64} (uint64)
    A_csc: object         # CSC, the decoded (exact) float values
    y: object             # None for a party without the labels
    n: int
    p: int

    @property
    def AT(self):
        return self.A_csc.T.tocsr()      # a view (CSC of A is CSR of A^T): no copy

    @property
    def A_fx_T(self):
        # the transpose view of the CSR A_fx (a CSC matrix, no copy: at n = 1e6 a copy is 0.3 GB
        # per party); its products are the same words over the ring
        return self.A_fx.T


def prepare_block(A_k, y, *, frac, private, feature_bound=None, label_bound=None,
                  row_clip=None, k=None, warn=True) -> PreparedBlock:
    """:class:`PreparedBlock` of party ``k``'s data ``(A_k, y)``; ``warn=False`` when the
    caller already warned about clipping in the user's units (the ssp path's scaled block)."""
    # a party that does not hold the label gets y=None: it only ever sees A_k^T y + noise
    y = None if y is None else np.asarray(y, dtype=np.float64)
    if private and warn:
        warn_if_clipped(k, A_k, y, feature_bound, label_bound)
    A = clip_block(A_k, feature_bound, row_clip) if private else \
        sp.csr_matrix(A_k, dtype=np.float64, copy=True)
    if private and y is not None:
        y = np.clip(y, -label_bound, label_bound)
    # fixed point, truncated toward zero: entries and row norms stay within their bounds
    A_fx = A.copy()
    A_fx.data = encode(A.data, int(frac))
    A.data = decode(A_fx.data, int(frac))
    n, p = A.shape
    return PreparedBlock(A_fx=A_fx, A_csc=A.tocsc(), y=y, n=int(n), p=int(p))


def check_distinct_masks(k, i, triples):
    """The holder's refusal of a request whose peers share a vector mask: one mask for two
    peers would let a peer that helps the other's block unmask the column (``mpc/beaver.py``)."""
    keys = [t.v_key for t in triples.values()]
    if len(set(keys)) != len(keys):
        raise InputError(f"party {k}: the dealer sent one vector mask for two peers of feature "
                         f"{i}; each peer's masked column needs its own")
