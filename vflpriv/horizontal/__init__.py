"""Horizontal federated learning: every client holds whole records (rows) of its own.

Modules:

- :mod:`vflpriv.horizontal.partition` -- offline data sets (scikit-learn's digits, a synthetic task),
  Dirichlet non-IID partition across clients, per-client train/test split (numpy only).
- :mod:`vflpriv.horizontal.wire` -- the byte format of the messages that cross the client/server
  boundary, so communication is metered on real serialized bytes (numpy only).
- :mod:`vflpriv.horizontal.fedp3` -- FedP3 and LDP-FedP3 (paper 002) on torch.  Importing it needs
  the ``torch`` extra; importing this package does not import torch.
"""
