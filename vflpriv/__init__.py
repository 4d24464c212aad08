"""vflpriv: differentially private federated sparse learning.

The privacy accountant is the separate package :mod:`accounting`; this package holds the engine
(vertical and horizontal federated algorithms, kernels, metering) and the ``vflpriv`` command.
"""
__version__ = "0.1.0"
