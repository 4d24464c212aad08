"""accounting: privacy events, accountants, calibration, a durable ledger.

Importable on its own (it never imports ``vflpriv`` or torch; scipy and dp-accounting are loaded
only when an accountant needs them, so ``import accounting`` stays cheap).

>>> from accounting import PoissonSubsampledGaussian, SelfComposed, get_accountant
>>> step = PoissonSubsampledGaussian(noise_multiplier=1.1, sample_rate=256 / 60000)
>>> round(get_accountant("rdp").epsilon(SelfComposed(step, 14100), delta=1e-5), 6)
2.600343
"""
from .events import (ADD_REMOVE, REPLACE_ONE, ApproxDP, Composed, DpEvent, Exponential,
                     DiscreteGaussian, DistributedDiscreteGaussian, Gaussian, Laplace, PoissonSubsampledGaussian,
                     PrivateSelection, PureDP, ReportNoisyMax, SelfComposed, ZCDP,
                     event_from_dict, flatten)
from .accountants import (ACCOUNTANT_NAMES, Accountant, AdvancedComposition, BasicComposition,
                          BestAccountant, OptimalComposition, PLDAccountant, RDPAccountant,
                          UnsupportedEventError, get_accountant, report)
from .calibration import CalibrationResult, calibrate
from .ledger import Ledger, LedgerBusy, LedgerCorrupt, MemoryLedger, read_ledger
from .budget import BudgetExceeded, BudgetFilter

__all__ = [
    "ADD_REMOVE", "REPLACE_ONE", "DpEvent", "Laplace", "Gaussian", "DiscreteGaussian",
    "DistributedDiscreteGaussian", "PoissonSubsampledGaussian", "PrivateSelection",
    "ReportNoisyMax", "Exponential", "PureDP", "ApproxDP", "ZCDP", "SelfComposed", "Composed",
    "event_from_dict", "flatten", "Accountant", "BasicComposition", "AdvancedComposition",
    "OptimalComposition", "RDPAccountant", "PLDAccountant", "BestAccountant",
    "UnsupportedEventError", "get_accountant", "report", "ACCOUNTANT_NAMES", "calibrate",
    "CalibrationResult", "Ledger", "BudgetFilter", "BudgetExceeded", "LedgerCorrupt",
    "LedgerBusy", "MemoryLedger", "read_ledger",
]
