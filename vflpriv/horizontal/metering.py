"""What crosses the wire, counted three ways (numpy only; shared by every horizontal method).

Paper 001 (FedElasticNet) counts (notes A.8):

1. nonzeros: the number of nonzero transmitted values, summed over rounds and participating clients
   (uplink only, positions not counted; SCAFFOLD counts Delta and Delta c).  A dense method sends d
   values per client per round, so its count is d x sum_t |P_t|.
2. entropy: "Shannon entropy of transmitted bits" with values discretized at bin size 0.01,
   "cumulative".  The magnitudes in Tables 3-4 (about 2.9 per round) fit the per-element entropy
   H = -sum_b p_b log2 p_b (bits per value) of one round's transmitted values, pooled over the
   round's clients, summed over rounds (notes A.8 [I]).  That is ``pooling="pooled"``,
   ``binning="round"`` (bins centred on multiples of 0.01).  The unstated choices are selectable:
   ``pooling="mean"`` averages the per-client entropies of the round instead, ``binning="floor"``
   uses bins [k w, (k + 1) w).
   FedDyn's paper sends theta_k (the local model), paper 001's variants send the update Delta_k;
   its Table 3 gives FedDyn both ways ("theta sent (Delta sent)").  The methods here send Delta;
   :meth:`Meter.uplink` also meters, when given, what the client would send if it sent its model
   instead (theta^{t-1} + Delta_k, the same information for the server), in ``entropy_model``.
3. bytes: the length of the real serialized message (:mod:`vflpriv.horizontal.wire`), each vector in
   the smallest of the dense / COO / bitmap encodings, uplink and downlink.
"""
from __future__ import annotations

import numpy as np

POOLINGS = ("pooled", "mean")
BINNINGS = ("round", "floor")


def nonzeros(values) -> int:
    """Number of nonzero entries."""
    return int(np.count_nonzero(np.asarray(values)))


def entropy_bits(values, bin_width: float = 0.01, binning: str = "round") -> float:
    """Per-element Shannon entropy (bits per value) of ``values`` discretized at ``bin_width``."""
    v = np.asarray(values, dtype=np.float64).ravel()
    if v.size == 0:
        return 0.0
    if binning == "round":
        bins = np.floor(v / bin_width + 0.5)
    elif binning == "floor":
        bins = np.floor(v / bin_width)
    else:
        raise ValueError(f"binning must be one of {', '.join(BINNINGS)}, got {binning!r}")
    _, counts = np.unique(bins.astype(np.int64), return_counts=True)
    p = counts / v.size
    return float(-(p * np.log2(p)).sum() + 0.0)


class Meter:
    """Accumulates the three counts round by round.

    Per round: :meth:`uplink` for every participating client's message (its transmitted vectors and
    the serialized bytes), :meth:`downlink` for what the server sends, then :meth:`end_round`.
    ``history`` holds the cumulative counts after every round; the entropy is kept for every
    (pooling, binning) variant, keyed ``"pooled/round"`` etc.; the paper's is ``"pooled/round"``.
    """

    def __init__(self, bin_width: float = 0.01):
        self.bin_width = bin_width
        self.nonzeros = 0
        self.values_sent = 0
        self.uplink_bytes = 0
        self.downlink_bytes = 0
        self.entropy = {f"{p}/{b}": 0.0 for p in POOLINGS for b in BINNINGS}
        self.entropy_model = {}      # the same variants for the model-sent form (when metered)
        self.history = []
        self._round = []
        self._round_model = []

    def uplink(self, vectors, message: bytes, model=None) -> None:
        """Meter one client's reply ``vectors`` (and ``message``, its serialized bytes);
        ``model``: the vectors it would send if it sent its model instead of its update."""
        flat = np.concatenate([np.asarray(v, dtype=np.float64).ravel() for v in vectors])
        self.nonzeros += nonzeros(flat)
        self.values_sent += flat.size
        self.uplink_bytes += len(message)
        self._round.append(flat)
        if model is not None:
            self._round_model.append(
                np.concatenate([np.asarray(v, dtype=np.float64).ravel() for v in model]))

    def downlink(self, message: bytes, copies: int = 1) -> None:
        self.downlink_bytes += len(message) * copies

    def end_round(self) -> None:
        if self._round:
            pooled = np.concatenate(self._round)
            for b in BINNINGS:
                self.entropy[f"pooled/{b}"] += entropy_bits(pooled, self.bin_width, b)
                self.entropy[f"mean/{b}"] += float(np.mean(
                    [entropy_bits(v, self.bin_width, b) for v in self._round]))
        if self._round_model:
            pooled = np.concatenate(self._round_model)
            for b in BINNINGS:
                key = f"pooled/{b}"
                self.entropy_model[key] = self.entropy_model.get(key, 0.0) + entropy_bits(
                    pooled, self.bin_width, b)
        self._round = []
        self._round_model = []
        self.history.append({"uplink_nonzeros": self.nonzeros,
                             "uplink_entropy": self.entropy["pooled/round"],
                             "uplink_bytes": self.uplink_bytes,
                             "downlink_bytes": self.downlink_bytes})
