"""Accountants: interpreters of privacy events.

=========  ==========================================================  =====================
name       what it computes                                             events it supports
=========  ==========================================================  =====================
basic      sum of epsilons and deltas                                    pure / approx DP
advanced   Dwork-Rothblum-Vadhan advanced composition                    pure / approx DP
optimal    exact: Kairouz-Oh-Viswanath (pure/approx), mu-GDP (Gaussian)  pure / approx DP, or Gaussians only
rdp        Renyi DP with the Balle et al. 2020 conversion                all but approx DP with delta > 0
pld        privacy loss distributions (dp-accounting, pessimistic)       all but zCDP
best       the smallest value among those that support the event         union of the above
=========  ==========================================================  =====================
"""
from .base import Accountant, UnsupportedEventError
from .best import ACCOUNTANT_NAMES, BestAccountant, get_accountant, report
from .composition import AdvancedComposition, BasicComposition
from .optimal import OptimalComposition
from .pld import PLDAccountant
from .rdp import RDPAccountant

__all__ = ["Accountant", "UnsupportedEventError", "BasicComposition", "AdvancedComposition",
           "OptimalComposition", "RDPAccountant", "PLDAccountant", "BestAccountant",
           "get_accountant", "report", "ACCOUNTANT_NAMES"]
