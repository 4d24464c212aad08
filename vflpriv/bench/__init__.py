"""Benchmarks behind ``vflpriv bench``; one module per target."""
import statistics
import time


def median_time(fn, repeats: int = 5, warmup: int = 1) -> float:
    """Median wall-clock seconds of ``fn()`` over ``repeats`` runs after ``warmup`` runs."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def write_json(path, obj) -> None:
    """Write ``obj`` as JSON to ``path`` atomically (nothing when ``path`` is empty)."""
    if path:
        from ..outputs import write_json_atomic

        write_json_atomic(path, obj)
