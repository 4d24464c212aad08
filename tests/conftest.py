"""Shared helpers for the test suite."""
import concurrent.futures
import functools

import pytest


@functools.lru_cache(maxsize=None)
def _epsilon(accountant: str, event, delta: float) -> float:
    from accounting import get_accountant

    return get_accountant(accountant).epsilon(event, delta)


@pytest.fixture(scope="session")
def eps_of():
    """``eps_of(accountant_name, event, delta)``, memoised for the session.

    Events are frozen dataclasses (hashable).  A PLD evaluation costs 0.05-1.3 s, so tests that
    need the same value (a reference table and an invariant over it) share one evaluation.
    """
    return _epsilon


@pytest.fixture(scope="session")
def one_ray(request):
    """One Ray runtime, and one pool of ClientApp actors, for the in-process ``flower-sim`` runs
    of the session.

    Each run of Flower's simulation starts Ray if none is running (``RayBackend.init_ray``),
    starts its ClientApp actors (a Ray worker process each, which imports flwr and vflpriv on its
    first message) and at the end terminates them and shuts Ray down (``RayBackend.terminate``):
    5-15 s of start-up per run on this machine, most of a flower-sim test.  Here the first run
    starts Ray and its actors as usual (with the backend config vflpriv gives it); a run that ends
    cleanly (every actor back in the pool, none died) leaves its actors idle for the next run with
    the same client resources, as the runtime itself hands one actor message after message of
    different virtual nodes within a run: the ClientApp keeps no state in its process
    (vflpriv.flower.clientapp: each party's state is in its node's context).  A run that does not
    end cleanly has its actors terminated as before.  Ray is shut down after the last test that
    uses it.  Modules whose tests run flower-sim in this process use it through
    ``pytestmark = pytest.mark.usefixtures("one_ray")``; without Flower it does nothing.
    """
    try:
        from flwr.server.superlink.fleet.vce.backend import raybackend
    except ImportError:
        yield
        return
    from ray.exceptions import RayTaskError

    RayBackend = raybackend.RayBackend
    originals = RayBackend.build, RayBackend.process_message, RayBackend.terminate
    idle = {}                           # client resources -> actors a clean run left idle

    def key(backend):
        return tuple(sorted(backend.client_resources.items()))

    def build(self, app_fn):
        self._clean = True
        actors = idle.pop(key(self), None)
        for other in idle.values():         # another size of actor: free its CPUs
            for actor in other:
                actor.terminate.remote()
        idle.clear()
        if actors is None:
            return originals[0](self, app_fn)
        self.pool = raybackend.BasicActorPool(actor_type=raybackend.ClientAppActor,
                                              client_resources=self.client_resources,
                                              actor_kwargs=self.actor_kwargs)
        self.pool.pool, self.pool.num_actors = list(actors), len(actors)
        self.app_fn = app_fn

    def process_message(self, message, context):
        try:
            return originals[1](self, message, context)
        except RayTaskError:                # the ClientApp raised (a lost client): actor fine
            raise
        except BaseException:               # anything else (an actor died): no reuse
            self._clean = False
            raise

    def terminate(self):
        pool = self.pool
        if pool is None:
            return
        if (getattr(self, "_clean", False) and not pool._future_to_actor
                and len(pool.pool) == pool.num_actors > 0):
            idle[key(self)] = list(pool.pool)
        else:
            pool.terminate_all_actors()

    def stop():
        import ray

        for actors in idle.values():
            for actor in actors:
                ray.kill(actor)
        idle.clear()
        if ray.is_initialized():
            ray.shutdown()

    # Ray is stopped right after the session's last test that uses it, so no later test runs
    # (or forks: test_ledger_*) beside a live Ray driver
    users = [it.nodeid for it in request.session.items if "one_ray" in it.fixturenames]
    _ONE_RAY.update(stop=stop, last=users[-1] if users else None)
    RayBackend.build, RayBackend.process_message, RayBackend.terminate = (
        build, process_message, terminate)
    try:
        yield
    finally:
        RayBackend.build, RayBackend.process_message, RayBackend.terminate = originals
        _ONE_RAY.clear()
        stop()


_ONE_RAY = {}


def pytest_runtest_teardown(item, nextitem):
    if _ONE_RAY.get("last") == item.nodeid:
        _ONE_RAY.pop("stop")()


# -- deployments started at the session's start ------------------------------------------------
# A Flower deployment test (a SuperLink and SuperNode processes on 127.0.0.1) spends most of its
# time waiting on Flower: an idle SuperNode polls every 3 s, and a killed one is reported only
# after two missed 30 s heartbeats (fixed in flwr 1.41: no setting shortens them).  Meanwhile the
# test's process is idle, and the serial suite leaves the machine's second core idle too.  So a
# test marked ``@pytest.mark.deployment(prepare=f)`` has ``f(tmp)`` called when the session
# starts (in the main thread, one at a time: the in-process part, e.g. a reference run or writing
# the run's files), and the callable it returns runs on a thread of its own (the deployment: only
# subprocesses, files and waits on their output).  The test takes the result through the
# ``deployment`` fixture, which waits for that thread (an event, not a clock), and makes every
# assertion itself; an exception in prepare or in the thread is raised there.  Two threads run at
# a time.  Only selected tests start; the session waits for every thread before it ends.  The
# marker also runs other long work that needs nothing of this process in a child Python on the
# same threads (test_cli_certify's demo, test_audit_secure's protocol audits, the launch test).
_DEPLOYMENTS = {}


@pytest.fixture(scope="session", autouse=True)
def _start_deployments(request, tmp_path_factory):
    items = [it for it in request.session.items if it.get_closest_marker("deployment")]
    if not items:
        yield
        return
    # two at a time, in the session's order: every deployment starts a dozen Python processes
    # (flwr's imports), and all at once they starved the tests beside them on 2 cores
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="deployment")
    for it in items:
        tmp = tmp_path_factory.mktemp(it.name[:40])
        fut = concurrent.futures.Future()
        try:
            job = it.get_closest_marker("deployment").kwargs["prepare"](tmp)
        except Exception as exc:                # reported by the test, not the session
            fut.set_exception(exc)
        else:
            fut = pool.submit(job)
        _DEPLOYMENTS[it.nodeid] = (tmp, fut)
    try:
        yield
    finally:
        pool.shutdown(wait=True)


@pytest.fixture
def deployment(request):
    """``(tmp, result)`` of this test's ``@pytest.mark.deployment(prepare=f)`` run (see above)."""
    tmp, fut = _DEPLOYMENTS[request.node.nodeid]
    return tmp, fut.result()


@pytest.fixture
def deployments_done():
    """Wait until every deployment thread has ended (for tests that fork this process: a fork
    copies only the forking thread, never another thread's locks mid-use)."""
    for _, fut in list(_DEPLOYMENTS.values()):
        concurrent.futures.wait([fut])
