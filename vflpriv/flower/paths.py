"""File paths in run descriptions and party configs: made absolute before they reach another
process (a deployed ServerApp or ClientApp runs in another working directory)."""
from __future__ import annotations

import os


#: keys whose values are file paths: made absolute before they reach another process (a deployed
#: ServerApp or ClientApp runs in another working directory)
PATH_KEYS = ("data", "ledger", "out", "progress", "identity-key", "spill-dir",
             "model-file", "scores-file", "model_out")


def absolute_paths(obj):
    """A copy of ``obj`` (dicts and lists, nested) with every PATH_KEYS string made absolute."""
    if isinstance(obj, dict):
        return {k: (os.path.abspath(v) if k in PATH_KEYS and isinstance(v, str) and v
                    else absolute_paths(v)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [absolute_paths(v) for v in obj]
    return obj
