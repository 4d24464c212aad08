"""dp-bcfw-secure's ssp path as roles: the server role runs the same steps as in process
(:func:`.party.release`, then the fit), each party is a party role (hosted by Flower's
ClientApp, or in process over a :class:`~vflpriv.runtime.link.LocalLink` for
``backend="local"``).

The messages are every path's setup and key offers (``base/roles.py``), ``new_features``, and
the release's own (``gram.py``): ``gram_keys`` (each party makes its keys; the server relays
them sealed end to end to their receivers, ``gram_keys_in``), ``gram_rows`` (rows of the
party's masked block Z_k = B_k + V_k, to the server), ``gram_shares`` (its parts of the
cross-blocks) and ``gram_part`` (its own noisy triangle and sums).  The party role builds a
:class:`~.party.GramParty` from its own data file scaled by the public factor s
(``party.prepare``, as in process), keeps its own ledger and gates every release by it:
``new_features([GRAM_RELEASE])`` charges the one release to that ledger before any noise is
drawn; its rows (in order, each once), its parts and its GramPart are served once while that
charge is open.  At setup the party checks that the release fits its own budget.  The run
has no rounds and no per-column products (those requests are refused), hence no checkpoint.
"""
from __future__ import annotations

import math
import time

from ....errors import InputError
from ....runtime.partydata import party_noise_seed
from ....runtime.roles import Refused
from ...transport import UP
from ..mpc import messages as SM
from . import release as S
from ..block_cache import cached_block
from ..base.roles import _RANGE, LinkParties, ProductPartyRole
from ..mpc.channel import pack_bundle, unpack_bundle

FAMILY = "ssp"

#: prepared blocks kept by this process (a host serving many messages for a party): key -> block
_PREPARED = {}

#: the GramParty's own gates, kept between messages beside the least-squares party's state
def _prepared(cfg, setup, k):
    """Party k's scaled and prepared block for this run (``block_cache.cached_block``)."""
    from .party import prepare

    clips = setup["clips"]
    label = int(setup["label_party"]) == k

    def make(A_k, y):
        if label and y.size != setup["n"]:
            raise Refused(f"party {k} is the label party but its data file holds no labels")
        return prepare(A_k, y if label else None, float(setup["scale"]), k, int(setup["frac"]),
                       bool(setup["private"]), setup["feature_bound"], setup["label_bound"],
                       None if clips is None else clips[k])

    return cached_block(_PREPARED, cfg, setup, k,
                        (int(setup["frac"]), bool(setup["private"]), setup["feature_bound"],
                         setup["label_bound"], None if clips is None else float(clips[k]),
                         float(setup["scale"]), label), make)


def _share(setup):
    """The features' share a of the row norm (``release.features_sq``; None: balanced)."""
    v = setup.get("share")
    return None if v is None else float(v)


def _lattice(setup):
    """The release's ring lattice from the public setup (the fraction bits, the block sizes, the
    label party): the same ``(resolution, coordinates)`` as the server's plan
    (``solve._Plan.lattice``), so the event a party charges equals the one the server charged."""
    return (S.ring_resolution(int(setup["frac"])),
            S.ring_coordinates([int(v) for v in setup["sizes"]], int(setup["label_party"])))


class SspPartyRole(ProductPartyRole):
    """Party k of an ssp run: its :class:`~.party.GramParty` (noise sigma / sqrt 2 on its
    products, sigma on its own diagonal), its own ledger and channel keys; the key exchange,
    the offline phase, the products and the clean-up are every path's
    (:class:`~..base.roles.ProductPartyRole`); setup checks the one release fits its ledger,
    new_features charges it."""

    STATE = ProductPartyRole.STATE + ("_gram_owed", "_gram_done", "kappa", "rho", "_rows_next",
                                      "_shares_done")

    def __init__(self, cfg, setup):
        from .party import GramParty

        self.k = k = int(cfg["party"])
        self.setup, self.cfg = setup, cfg
        private = bool(setup["private"])
        sigma = float(setup["sigma"])
        self.event = (S.release_event(sigma, float(setup["label_bound"]), _lattice(setup),
                                      _share(setup)) if private else None)
        self.party = p = GramParty(k, None, None, frac=int(setup["frac"]), private=private,
                                   sigma=sigma / math.sqrt(2.0),
                                   noise_seed=party_noise_seed(cfg, k),
                                   prepared=_prepared(cfg, setup, k), gram_event=self.event,
                                   gram_sigma=sigma)
        p.setup(SM.decode(bytes.fromhex(setup["setup_frame"]))[0])
        p.gated = private           # its gates answer to its own ledger, open or not
        self._link_state()

    def check_own_plan(self, t0):
        """The run's one release must fit this party's own budget (every row it holds is in M)."""
        bf = self.party.budget
        bf.check_plan(self.event, party=self.k, exclude=getattr(bf, "pending", ()))

    def _z_receivers(self, i):
        """A_k^T y goes to every other party, this party's columns to the parties below it
        (each cross-block once, ``ssp_party.release``)."""
        if i == SM.LABEL_INDEX:
            return super()._z_receivers(i)
        return list(range(self.k))

    def handle(self, kind, frame, t):
        if kind in ("select", "sums", "save", "offline", "holder", "helper", "peer"):
            raise Refused(f"party {self.k}: the ssp path is one release without rounds or "
                          f"per-column products; it has no {kind!r} step")
        p = self.party
        sizes = [int(v) for v in self.setup["sizes"]]
        L = int(self.setup["label_party"])
        if kind == "gram_keys":        # its keys, each sealed for its receiver
            ch = self._channel()
            out = [(q, ch.seal(q, "GramKey", t, SM.encode(m, self.k, t)))
                   for q, msgs in sorted(p.gram_keys(sizes, L).items()) for m in msgs]
            return "bundle", pack_bundle(out)
        if kind == "gram_keys_in":     # the keys its peers made for it, relayed sealed
            ch = self._channel()
            for src, blob in unpack_bundle(frame):
                p.take_gram_key(src, SM.decode(ch.open(src, "GramKey", t, blob))[0], sizes, L)
            return "ok", b""
        if kind == "gram_rows":
            start, stop = _RANGE.unpack_from(frame)
            return "rows", SM.encode(p.gram_rows(start, stop, sizes, L), self.k, t)
        if kind == "gram_shares":
            return "bundle", pack_bundle([(self.k, SM.encode(m, self.k, t))
                                          for m in p.gram_shares(sizes, L)])
        if kind == "gram_part":
            return "gram", SM.encode(p.gram_part(sizes, L), self.k, t)
        return super().handle(kind, frame, t)


# -- server side --------------------------------------------------------------------------------
class LinkSspParties(LinkParties):
    """The server's side of the ssp release over a runtime link: the setup, charge and close of
    every path (:class:`~..base.roles.LinkParties`) and the release's own steps, as
    :class:`~.party.LocalGram` takes them in process: keys relayed sealed party to party,
    masked blocks and parts party to server."""

    def _up(self, k, frame, t, name):
        """Party k's frame decoded as a ``name`` message (refused otherwise), metered."""
        msg = SM.decode(frame)[0]
        if type(msg).__name__ != name:
            raise InputError(f"party {k} answered a {type(msg).__name__}, not a {name}")
        self.meter.record(k, UP, t, len(frame), name)
        return msg

    def gram_keys(self, t=0):
        replies = self.link.exchange([(k, b"", "gram_keys") for k in range(self.K)], t)
        inbox = {k: [] for k in range(self.K)}
        for src, b in enumerate(replies):
            for dst, blob in unpack_bundle(b):
                if not 0 <= dst < self.K or dst == src:
                    raise InputError(f"party {src} addressed a key to party {dst}")
                self._peer(src, dst, t, blob, "GramKey")
                inbox[dst].append((src, blob))
        self.link.exchange([(k, pack_bundle(inbox[k]), "gram_keys_in")
                            for k in range(self.K)], t)

    def gram_rows(self, start, stop, t=0):
        span = _RANGE.pack(int(start), int(stop))
        replies = self.link.exchange([(k, span, "gram_rows") for k in range(self.K)], t)
        return [self._up(k, f, t, "MaskedBlock") for k, f in enumerate(replies)]

    def gram_shares(self, t=0):
        replies = self.link.exchange([(k, b"", "gram_shares") for k in range(self.K)], t)
        return [[self._up(k, f, t, "GramShare") for _, f in unpack_bundle(b)]
                for k, b in enumerate(replies)]

    def gram_parts(self, t=0):
        """Every party's :class:`~.messages.GramPart` (each sends it once, after its own ledger
        charged the release)."""
        replies = self.link.exchange([(k, b"", "gram_part") for k in range(self.K)], t)
        return [self._up(k, f, t, "GramPart") for k, f in enumerate(replies)]


def _inf(v):
    return math.inf if v is None else float(v)


def serve(connect, spec, progress=None) -> dict:
    """The server role of one ssp run (``spec`` from :func:`make_spec`): the release through
    the parties' roles, then the fit from the noisy M (post-processing); its result's ``x`` is
    the model on the data (global column order, unscaled) and ``intercept`` its b."""
    from ..base.roles import serve_run
    from .party import fit_model, model, piece_rows, release

    s = spec["ssp"]
    sizes = [len(b) for b in spec["blocks"]]
    K, n, L = len(sizes), int(spec["n"]), int(s["label_party"])
    private = bool(spec["private"])

    def loop(remote, on_round, budget):
        t0 = time.perf_counter()
        public = {"K": K, "n": n, "sizes": sizes, "frac": int(s["frac"]), "private": private,
                  "feature_bound": s["feature_bound"], "label_bound": s["label_bound"],
                  "clips": s["clips"], "label_party": L, "scale": float(s["scale"]),
                  "sigma": float(s["sigma"]), "share": s.get("share")}
        link = remote(public)
        event = (S.release_event(float(s["sigma"]), float(s["label_bound"]),
                                 _lattice({"frac": s["frac"], "sizes": sizes, "label_party": L}),
                                 _share(s)) if private else None)
        M = release(link, sizes, L, n, int(s["frac"]), budget, event,
                    piece_rows(sizes, L, spec.get("offline_frame_bytes")))
        link.close()
        seconds = time.perf_counter() - t0
        x_s, b, iters = fit_model(M, sizes, dict(
            lam=float(s["lam"]), radius=_inf(s["radius"]), b_bound=_inf(s["b_bound"]),
            labels_scale=float(s.get("labels_scale", 2.0)), margins=bool(s.get("margins", True))))
        # the model on the data: unscaled, in the data's global column order
        x, b = model(x_s, b, float(s["scale"]), spec["blocks"], sum(sizes),
                     bool(s["fit_intercept"]))
        return dict(x=x, intercept=b, fit_iterations=iters, meter=link.meter,
                    peer_bytes=link.peer_bytes, setup_seconds=seconds)

    return serve_run(connect, spec, progress, LinkSspParties, FAMILY, loop)


def make_spec(data, *, ssp_kwargs, private, ledger=None, budget=None, accountant="rdp",
              run_id=None, connect_timeout=60.0, reply_timeout=600.0) -> dict:
    """The server's run description (data only: ``ssp_kwargs`` holds numbers and lists; an
    infinite radius or intercept bound as None)."""
    return {"family": FAMILY, "n": int(data.n),
            "blocks": [[int(v) for v in b] for b in data.blocks], "iterations": 1,
            "ssp": dict(ssp_kwargs), "private": bool(private), "ledger": ledger,
            "budget": budget, "accountant": accountant, "run_id": run_id,
            "connect_timeout": float(connect_timeout), "reply_timeout": float(reply_timeout),
            "checkpoint": None, "resume": False}


def run(backend, data, *, ssp_kwargs, private, run_dir, ledger=None, budget=None,
        accountant="rdp", run_id=None, party_ledgers=None, party_budget=None, noise_root=None,
        connect_timeout=60.0, reply_timeout=600.0, progress=None, quiet=True, spec_dir=None,
        pinning=None):
    """Run the ssp path on ``backend``; ``(out, info)`` as :func:`.remote.run` (``out`` the
    server role's result), or with ``spec_dir`` ``(None, what was written)``, its keys pinned
    by ``pinning`` (:func:`.remote.pin_identities`)."""
    from ....runtime.backends import describe, launch
    from ....runtime.partydata import noise_entropy_of
    from ...remote import party_configs, run_info
    from ..base.roles import pin_identities

    spec = make_spec(data, ssp_kwargs=ssp_kwargs, private=private, ledger=ledger, budget=budget,
                     accountant=accountant, run_id=run_id, connect_timeout=connect_timeout,
                     reply_timeout=reply_timeout)
    # each party's file holds its block as given (not scaled: the role scales it by s)
    cfgs = party_configs(data, run_dir, private=private, budget=party_budget or budget,
                         accountant=accountant, ledgers=party_ledgers,
                         noise_entropy=None if noise_root is None else noise_entropy_of(noise_root),
                         label_party=ssp_kwargs["label_party"],
                         bounds=(ssp_kwargs["bounds"] if private else None))
    if spec_dir:
        pin_identities(run_dir, cfgs, pinning)
        return None, describe(run_dir, spec, cfgs)
    out = launch(backend, spec, cfgs, run_dir, progress=progress, quiet=quiet)
    return out, run_info(backend, out, cfgs, private)


class _Got:
    """The server role's result as ``run_hosted`` expects a result (it sets ``seconds``)."""

    def __init__(self, out):
        self.out, self.seconds = out, 0.0


def ssp_kwargs(srun, plan, frac, fit, K) -> dict:
    """The ``ssp`` section of a run description (numbers and lists only; an infinite radius or
    intercept bound as None), from the settled run, its plan (``ssp_run._Plan``), the ring's
    fraction bits and the fit's options."""
    from .party import public_bounds

    cfg = srun.cfg
    Ba_s, By, clips = public_bounds(plan, srun.private, K)
    return {"frac": int(frac), "feature_bound": Ba_s, "label_bound": By, "clips": clips,
            "scale": float(plan.s), "sigma": float(plan.sigma),
            "label_party": int(srun.label_party), "lam": float(fit["lam"]),
            "radius": None if math.isinf(fit["radius"]) else float(fit["radius"]),
            "b_bound": None if math.isinf(fit["b_bound"]) else float(fit["b_bound"]),
            "fit_intercept": bool(cfg.fit_intercept),
            "share": plan.share, "labels_scale": float(fit["labels_scale"]),
            "margins": bool(fit["margins"]),
            # the declared bounds, unscaled, for the warnings on the parties' own data
            "bounds": [cfg.feature_bound, cfg.label_bound]}


def on_flower(data, srun, plan, frac, fit, led, budget, run_dir, noise_root):
    """The ssp path on ``srun.cfg.backend`` (not in process): ``(the server role's result or
    None when a description was written, flower info)``.  ``fit``: the fit's lam, radius and
    intercept bound; ``noise_root``: the in-process noise root of a seeded run (each party's
    stream is its spawn, as in process), else None."""
    from ...hosted import run_hosted

    cfg = srun.cfg
    kw = ssp_kwargs(srun, plan, frac, fit, data.K)

    def runner(**k):
        out, info = run(cfg.backend, data, ssp_kwargs=kw, **k)
        if out is None or "x" not in out:          # a description written, or no result
            return None, info
        return _Got(out), info

    got, info = run_hosted(cfg.backend, cfg.flower, run_dir, data, None, 1.0, 1, srun.private,
                           None, led, budget, cfg.accountant, cfg.epsilon, cfg.delta, noise_root,
                           cfg.callback, runner=runner)
    return (None if got is None else got.out), info
