"""The one ServerApp and ClientApp that host every family's roles, and the two ways to run them.

``server_app`` and ``client_app`` (module level) are what a deployed SuperLink and SuperNodes
load (the app directory written by :func:`vflpriv.flower.deploy.write_app` names them): the
ServerApp reads its run description from the file ``run_config["spec"]`` (the ``run.json``
of :mod:`.spec`, data only) and writes its result to ``spec["out"]``; each ClientApp reads its party config from its node config.

:func:`simulate` runs the same ServerApp and ClientApp on Flower's simulation runtime in this
process.  The ServerApp gives the server role of ``spec["family"]``
(:mod:`vflpriv.runtime.families`) a :class:`~.link.Link` over its Grid; the ClientApp builds the
party role of ``setup["family"]``.
"""
from __future__ import annotations

import os
import pickle

from .paths import absolute_paths


def build_side(cfg, setup):
    from ..runtime.families import build_party

    return build_party(cfg, setup)


def link_factory(grid, spec):
    """``connect(K)`` for the server role: a :class:`~.link.Link` over ``grid`` with the run's
    timeouts."""
    from .link import Link

    def connect(K):
        link = Link(grid, K, connect_timeout=float(spec.get("connect_timeout", 60.0)),
                    reply_timeout=float(spec.get("reply_timeout", 600.0)))
        if spec.get("progress"):
            link.heartbeat = spec["progress"] + ".alive"
        return link
    return connect


def _progress_writer(path):
    if not path:
        return None

    def write(t):
        tmp = path + ".tmp"
        with open(tmp, "w") as fh:
            fh.write(str(int(t)))
        os.replace(tmp, path)
    return write


def _make_server_app(get_spec, sink):
    from flwr.serverapp import ServerApp

    app = ServerApp()

    @app.main()
    def _main(grid, context):
        from ..runtime.families import roles

        spec = get_spec(context)
        serve, _ = roles(spec["family"])
        out = serve(link_factory(grid, spec), spec, progress=spec.get("progress_fn")
                    or _progress_writer(spec.get("progress")))
        sink(spec, out)

    return app


def _spec_from_run_config(context):
    """The run description named by the run config: a ``run.json`` (:mod:`.spec`), data only."""
    from .spec import load_description

    spec = load_description(str(context.run_config["spec"]))
    if not spec.get("progress") and spec.get("out"):
        # the rounds completed, beside the result (vflpriv flower launch shows them)
        spec["progress"] = os.path.join(os.path.dirname(spec["out"]), "progress")
    return spec


def _write_result(spec, out):
    """The ServerApp's result: ``result.json`` (data for people and scripts, with this run's
    spend: :mod:`.result`) and one line in its log, then ``result.pkl`` (the server role's
    objects, for the launcher of ``--backend flower``; written last: the launcher waits on it)."""
    import sys

    from . import result

    try:
        doc = result.write(spec, out, os.path.join(os.path.dirname(spec["out"]), "result.json"))
        sys.stdout.write(result.log_line(doc) + "\n")
        sys.stdout.flush()
    except Exception as exc:          # the run's own result is kept whatever happens here
        sys.stderr.write(f"vflpriv: result.json not written: {type(exc).__name__}: {exc}\n")
    tmp = spec["out"] + ".tmp"
    with open(tmp, "wb") as fh:
        pickle.dump(out, fh)
    os.replace(tmp, spec["out"])


def __getattr__(name):
    # Built on first use, so importing this module never needs flwr.
    if name == "server_app":
        return _make_server_app(_spec_from_run_config, _write_result)
    if name == "client_app":
        from .clientapp import make_client_app

        return make_client_app(build_side)
    raise AttributeError(name)


def launch(backend, spec, party_configs, run_dir, *, progress=None, quiet=True) -> dict:
    """Run ``spec`` with ``party_configs`` on ``backend`` ("flower-sim": :func:`simulate`;
    "flower": a :class:`~.deploy.LocalDeployment` in ``run_dir``); ``progress(t)`` after each
    completed round.  Returns the ServerApp's result."""
    if backend == "flower-sim":
        return simulate(dict(spec, progress_fn=progress), party_configs, quiet=quiet)
    from .deploy import LocalDeployment

    with LocalDeployment(party_configs, run_dir, quiet=quiet) as dep:
        return dep.run(spec, progress=progress)


def simulate(spec, party_configs, *, clients_per_cpu=1, quiet=True) -> dict:
    """Run ``spec`` on Flower's simulation runtime: one virtual SuperNode per entry of
    ``party_configs`` (its ``partition-id`` selects the entry).  Returns the ServerApp's result."""
    import logging

    from flwr.simulation import run_simulation

    from .clientapp import make_client_app

    result = {}
    progress = spec.get("progress_fn")
    spec = absolute_paths({k: v for k, v in spec.items() if k != "progress_fn"})
    spec["progress_fn"] = progress
    server = _make_server_app(lambda ctx: spec, lambda s, out: result.update(out))
    client = make_client_app(build_side, sim_configs=absolute_paths(list(party_configs)))
    ncpu = os.cpu_count() or 1
    backend = {"client_resources": {"num_cpus": 1.0 / max(1, clients_per_cpu), "num_gpus": 0.0},
               "init_args": {"num_cpus": ncpu, "include_dashboard": False,
                             "logging_level": "ERROR", "log_to_driver": not quiet}}
    flwr_logger = logging.getLogger("flwr")
    level = flwr_logger.level
    if quiet:
        flwr_logger.setLevel(logging.ERROR)
    os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    try:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run_simulation(server, client, num_supernodes=len(party_configs),
                           backend_config=backend, verbose_logging=False)
    finally:
        flwr_logger.setLevel(level)
    if not result:
        raise RuntimeError("the Flower simulation ended without a result from the ServerApp")
    return result
