"""What a dp-bcfw-secure run asks its participants to trust, stated per run: which party helps
which block (``secure.helpers`` in the run's JSON) and the coalitions the threat model excludes
(docs/sensitivity.md 4.5 and 5.4).  The CLI prints :func:`statement` as the run's ``trust:``
line, so what it says follows from the same routing the protocol uses (``beaver.block_helper``,
``glm.offline_receivers``)."""
from __future__ import annotations


def helpers(K, path, label_party=None, helper_party=None):
    """Entry k: the parties that receive party k's masked block and compute the other share of
    every product with it.  Least squares and the ssp path: h(k) = (k + 1) mod K; the glm path:
    the two holders of the derivative's shares, L and H (but k itself)."""
    K = int(K)
    if path == "glm":
        from .glm import offline_receivers

        return [offline_receivers(k, int(label_party), int(helper_party), K) for k in range(K)]
    from .beaver import block_helper

    return [[block_helper(k, K)] for k in range(K)]


def statement(K, path, label_party=None, helper_party=None):
    """The run's trust line (without the leading ``trust: ``)."""
    K = int(K)
    alone = ("no single party, and not the server alone, learns another party's columns or "
             "the label beyond the DP releases")
    if path == "glm":
        return (f"semi-honest parties and server; the helper party {helper_party} does not "
                f"collude with the label party {label_party}, and no party colludes with the "
                f"server (the dealer); {alone} (docs/sensitivity.md 5.4)")
    pairs = ", ".join(f"{k}->{(k + 1) % K}" for k in range(K))
    if K == 2:
        who = "the dealer (the server) colludes with no party; no coalition of parties is excluded"
    elif K == 3:
        who = (f"the dealer (the server) colludes with no party, and no two parties collude (every "
               f"pair is a block's owner and its helper: {pairs})")
    else:
        who = (f"the dealer (the server) colludes with no party, and no party colludes with its "
               f"block's helper ({pairs})")
    return f"semi-honest parties and server; {who}; {alone} (docs/sensitivity.md 4.5)"
