"""dp-bcfw-secure: vertical DP Frank-Wolfe with cross-party products under secret sharing.

``ring`` (fixed point over Z_{2^64}, shares, AES-CTR PRG), ``beaver`` (the dealer-assisted
matrix-vector product), ``messages`` (wire format), ``privacy`` (sensitivities, calibration),
``protocol`` (parties and their steps), ``loop`` (the server's round loop), ``solve`` (the
``solve()`` branch: least squares, and the dispatch to the logistic paths), ``ssp_run`` (the
logistic default: the expansion's statistics released once), ``glm_solve`` (the logistic loss's
derivatives every round), ``run`` (what the paths share).
See docs/vertical.md ("dp-bcfw-secure") and docs/sensitivity.md (section 4).
"""
from .squares.loop import run_secure
from .squares.party import SecureParty
from .solve import solve_secure

__all__ = ["run_secure", "solve_secure", "SecureParty"]
