"""The view audit of the secure paths (``vflpriv audit views``; tests/test_secure_views.py).

A run of a secure path with the view log on (``vflpriv.runtime.views``) records every
message each party and the server decodes, and, at the senders, which masks blind each array
that travels.  :func:`findings` reads the log and checks, for every receiver:

1. every array it receives is known to the log (a masked value whose masks were recorded), or
   belongs to a DP release or a public message (``RELEASES``, ``PUBLIC``);
2. every masked value it receives is blinded by at least one mask whose key it never receives;
3. no such mask blinds two values it receives, unless those values are the two parts of one
   product whose output is addressed to it (the masked vector z_k and its result share, which
   reconstruct A_k^T a_j + noise, its release); the parts of a secure sum (tag ``("sum",
   ...)``, e.g. the ssp path's parts of one cross-block) are checked per sum instead: their
   masks cancel in the whole sum and in no proper subset of it;
4. the server receives releases, public messages, and only the masked values of the ssp
   path's release (its masked blocks and the parts of its cross-blocks, ``ssp/gram.py``: there
   it deals no mask), which rules 1-3 check as for a party.

The keys a participant made itself count as held (``views.made``: a ``KeyMade`` entry).

A finding is a sentence naming the receiver, the message and the mask; an empty list passes.
:func:`run_logged` runs one path with the log on and returns ``(masks, receipts)``.
"""
from __future__ import annotations

import os
import tempfile
from collections import defaultdict

import numpy as np

#: messages that carry DP releases (to the server, or InterceptShare to the label party)
RELEASES = {"SecureIndex", "NoisySums", "GramPart", "Coefficients", "InterceptShare"}
#: public messages and messages that carry only keys (checked by what keys they hand out)
PUBLIC = {"SecureSetup", "Selections", "SelectionsB", "NewFeatures", "TripleToPeer",
          "VectorKey", "MarginKey", "ScoreKey", "GramKey", "KeyMade"}
#: the masked values the server may receive (the ssp path's release, where it deals no mask)
SERVER_MASKED = {"MaskedBlock", "GramShare"}

#: every secure path the views are checked on, by name: the registry's paths (``secure.paths``)
#: and the ssp path with the squared loss (the same protocol on labels in [-1, 1]), which
#: :func:`run_kwargs` runs by ``VARIANTS``
VARIANTS = {"ssp-squared": ("ssp", {"loss": "squared", "squared_path": "ssp"})}
PATHS = ("squares", "ssp", "glm", "ssp-squared")


def findings(masks, receipts):
    """The view checks above over one run's log; a list of sentences (empty: all hold)."""
    out = []
    sums = defaultdict(dict)
    by = defaultdict(list)
    for e in receipts:
        by[e["who"]].append(e)
    for who, es in sorted(by.items(), key=lambda kv: str(kv[0])):
        name = "the server" if who == "server" else f"party {who}"
        held = {k for e in es for k in e["keys"]}
        blinded = defaultdict(set)
        tags = {}
        for e in es:
            if who == "server" and e["type"] not in RELEASES | PUBLIC | SERVER_MASKED:
                out.append(f"{name} received a {e['type']}, which is neither a release nor "
                           "public")
            if e["type"] in RELEASES:
                continue
            for field, h in e["arrays"].items():
                ann = masks.get(h)
                if not ann:
                    out.append(f"{name} received {e['type']}.{field}, a value no sender "
                               "recorded as masked")
                    continue
                tag_set = {tag for _, tag in ann if tag is not None}
                sum_tags = [t for t in tag_set if t[0] == "sum"]
                if sum_tags:
                    # a part of a secure sum: checked as a whole below, sum by sum
                    sums[who].setdefault(sum_tags[0], {})[h] = [
                        m for mm, tg in ann if tg == sum_tags[0] for m in mm]
                    continue
                ms = {m for mm, _ in ann for m in mm}
                free = {m for m in ms if m.split(":")[0] not in held}
                if not free:
                    out.append(f"{name} holds the key of every mask on the {e['type']}.{field} "
                               f"it received ({sorted(ms)[0][:12]}...)")
                for m in free:
                    blinded[m].add(h)
                tags[h] = {tag for _, tag in ann if tag is not None}
        for m, hs in blinded.items():
            if len(hs) < 2:
                continue
            common = set.intersection(*(tags[h] for h in hs))
            if not any(t[0] == "product" and t[-1] == who for t in common):
                out.append(f"{name} received {len(hs)} values blinded by one mask "
                           f"({m[:12]}...) that are not the two parts of its own product: "
                           "their difference would unmask them")
        for parts in sums.get(who, {}).values():
            out += _sum_findings(name, parts, held)
    return out


def _sum_findings(name, parts, held):
    """The parts of a secure sum one receiver got (``{hash: signed masks}``): their masks must
    cancel in the whole sum (its output) and in no proper subset of the parts (each such
    combination stays blinded), and no mask's key may be held by the receiver.  A lone part
    is the sum itself (one party besides L: the score reveals it anyway)."""
    from collections import Counter
    from itertools import combinations

    if len(parts) < 2:
        return []
    out = []
    signed = list(parts.values())
    if any(m[1:].split(":")[0] in held for ms in signed for m in ms):
        out.append(f"{name} holds the key of a mask on a part of its secure sum")

    def net(group):
        c = Counter()
        for ms in group:
            for m in ms:
                c[m[1:]] += 1 if m[0] == "+" else -1
        return {k for k, v in c.items() if v}

    if net(signed):
        out.append(f"{name}: the masks of its secure sum do not cancel")
    for r in range(1, len(signed)):
        for group in combinations(signed, r):
            if not net(group):
                out.append(f"{name} can add {r} of the {len(signed)} parts of its secure sum "
                           "with every mask cancelled: a partial sum leaks")
                return out
    return out


def classification(n, K, seed, d_per=2, label01=False):
    """A small table: n rows, K blocks of ``d_per`` columns each (or the sizes ``d_per`` as a
    list), entries in [-1, 1], labels +-1 from a planted model (or in [-1, 1] for least
    squares, ``label01=False`` keeps +-1)."""
    from ..data import VerticalData

    sizes = list(d_per) if isinstance(d_per, (list, tuple)) else [int(d_per)] * int(K)
    d = int(sum(sizes))
    rng = np.random.default_rng(seed)
    A = rng.uniform(-1, 1, size=(n, d))
    w = rng.normal(size=d)
    y = np.where(rng.uniform(size=n) < 1 / (1 + np.exp(-A @ w)), 1.0, -1.0)
    ends = np.cumsum([0] + sizes)
    blocks = [list(range(ends[k], ends[k + 1])) for k in range(len(sizes))]
    return VerticalData(A, y, blocks)


def run_kwargs(path, L, seed=0, iterations=3):
    """The ``solve`` options of one private run of ``path`` with the label at party ``L``."""
    kw = dict(algorithm="dp-bcfw-secure", label_party=int(L), epsilon=1.0, delta=1e-6,
              feature_bound=1.0, label_bound=1.0, seed=seed)
    from ..vertical.secure import paths

    name, options = VARIANTS.get(path, (path, None))
    chosen = paths.get(name)
    kw.update(chosen.options if options is None else options)
    if chosen.rounds:
        kw.update(iterations=iterations, eta=1.0)
    return kw


def run_logged(data, path, L, backend="inprocess", seed=0, iterations=3, folder=None):
    """Run ``path`` on ``data`` with the view log on; ``(masks, receipts)``.  ``folder``: where
    the log goes (a fresh temporary folder by default)."""
    import warnings

    from ..vertical import solve
    from ..runtime import views

    folder = folder or tempfile.mkdtemp(prefix="vflpriv-views-")
    old = os.environ.get(views.ENV)
    os.environ[views.ENV] = folder
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            solve(data, backend=backend, **run_kwargs(path, L, seed, iterations))
    finally:
        if old is None:
            os.environ.pop(views.ENV, None)
        else:
            os.environ[views.ENV] = old
    return views.read(folder)


def unmasked(receipts):
    """The attack of the audit: for every masked vector or block a receiver got and every key it
    holds, x - PRG(key) or x + PRG(key) (the stream entered where x's words start) must not be
    fixed-point data (all words below 2^56 in absolute value; a masked word is uniform).  Returns
    the sentences of what it unmasked."""
    from ..vertical.secure.mpc.ring import Prg

    lim = np.uint64(1 << 56)

    def small(w):
        return bool(np.all((w < lim) | (w > np.uint64(2 ** 64 - 2 ** 56))))

    held = defaultdict(set)
    for e in receipts:
        held[e["who"]].update(e["keys"])
    out = []
    for e in receipts:
        for field, words in e.get("data", {}).items():
            x = np.array([int(w) for w in words], dtype=np.uint64)
            starts = {0} | ({int(e["row"]) * int(e["shapes"][field][1])}
                            if e["type"] == "MaskedBlock" else set())
            if small(x):
                out.append(f"party {e['who']} received {e['type']}.{field} in the clear")
            for key in held[e["who"]]:
                for s in starts:
                    u = Prg(bytes.fromhex(key), s).uint64(x.size)
                    if small(x - u) or small(x + u):
                        out.append(f"party {e['who']} unmasks {e['type']}.{field} with a key "
                                   "it holds")
    return out


def scoring_logged(K, L, n=24, seed=0, folder=None):
    """Score ``n`` rows of a random split model with the label at ``L`` (the secure sum of
    ``vflpriv predict``, ``model.scoring.secure_scores``) with the view log on; ``(masks,
    receipts, scores, expected)``."""
    from ..model.files import SplitModel
    from ..model.scoring import secure_scores
    from ..runtime import views

    rng = np.random.default_rng(seed)
    sizes = [2] * int(K)
    blocks = [rng.uniform(-1, 1, size=(n, p)) for p in sizes]
    coef = [rng.normal(size=p) for p in sizes]
    model = SplitModel(loss="logistic", label_party=int(L),
                       columns=[[f"c{k}_{i}" for i in range(p)] for k, p in enumerate(sizes)],
                       coef=coef, intercept=0.25, manifest={})
    folder = folder or tempfile.mkdtemp(prefix="vflpriv-views-")
    old = os.environ.get(views.ENV)
    os.environ[views.ENV] = folder
    try:
        scores, _ = secure_scores(blocks, model)
    finally:
        if old is None:
            os.environ.pop(views.ENV, None)
        else:
            os.environ[views.ENV] = old
    expected = sum(b @ c for b, c in zip(blocks, coef)) + 0.25
    return (*views.read(folder), scores, expected)


def audit_views(Ks=(3, 4), paths=PATHS, n=24, progress=None) -> dict:
    """``vflpriv audit``'s ``views`` entry: every path, each K in ``Ks``, every label party, in
    process; ``{"name": "views", "ok", "runs", "findings"}``."""
    runs, found = 0, []
    for K in Ks:
        data = classification(n, K, seed=K)
        for path in paths:
            for L in range(K):
                masks, recs = run_logged(data, path, L, iterations=2)
                runs += 1
                for f in findings(masks, recs) + unmasked(recs):
                    found.append(f"{path}, K={K}, label at {L}: {f}")
        for L in range(K):                   # the secure sum of vflpriv predict
            masks, recs, _, _ = scoring_logged(K, L, n)
            runs += 1
            for f in findings(masks, recs) + unmasked(recs):
                found.append(f"predict, K={K}, label at {L}: {f}")
    if progress is not None:
        progress(1)
    return {"name": "views", "ok": not found and runs > 0, "runs": runs, "findings": found,
            "paths": list(paths) + ["predict"], "K": list(Ks)}
