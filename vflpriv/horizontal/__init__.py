"""Horizontal federated learning: every client holds whole records (rows) of its own.

Torch-free modules (numpy only; the numpy sparse engine may share them):

- :mod:`~vflpriv.horizontal.partition` -- offline data sets (scikit-learn's digits, a synthetic task,
  Fashion-MNIST when its files are installed), FedP3's Dirichlet split with per-client test sets and
  FedDyn's partition with one global test set.
- :mod:`~vflpriv.horizontal.participation` -- which clients take part (FedDyn's Bernoulli sampler,
  fixed-size uniform).
- :mod:`~vflpriv.horizontal.wire` -- the byte format of the messages (dense / bitmap / seeded / COO;
  the smallest chosen per vector), so communication is metered on real serialized bytes.
- :mod:`~vflpriv.horizontal.metering` -- nonzeros, per-element entropy (paper 001) and bytes.
- :mod:`~vflpriv.horizontal.strategy` -- the Strategy base (what is sent, how it is aggregated,
  what state each side keeps); :mod:`~vflpriv.horizontal.fedavg` (FedAvg, FedProx, FedElasticNet
  Alg. 1), :mod:`~vflpriv.horizontal.scaffold` (SCAFFOLD, Alg. 2), :mod:`~vflpriv.horizontal.feddyn`
  (FedDyn, Alg. 3): one short module each.
- :mod:`~vflpriv.horizontal.ldp` -- local DP: noise calibrated by the accountant, per-client budget.
- :mod:`~vflpriv.horizontal.loop` -- the round loop, written once (sampling, budget charge,
  messages, metering, aggregation, evaluation).

Torch modules (the ``torch`` extra; importing this package does not import torch):

- :mod:`~vflpriv.horizontal.models` -- the models (FedP3's and FedDyn's).
- :mod:`~vflpriv.horizontal.dp` -- per-sample gradients, clipping, noise (the DP-SGD step).
- :mod:`~vflpriv.horizontal.local` -- a client's local training (subgradient or prox elastic net).
- :mod:`~vflpriv.horizontal.runtime` -- a Strategy on flat parameter vectors, driven by the loop.
- :mod:`~vflpriv.horizontal.fedp3` (with :mod:`~vflpriv.horizontal.pruning`) -- FedP3 and LDP-FedP3
  (paper 002), driven by the same loop.

The round loop itself, :mod:`~vflpriv.horizontal.loop`, is torch-free: it moves bytes.
"""
