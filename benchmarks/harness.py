"""Timing harness of ``python -m benchmarks``: warm-up, repeats, median / min / max, peak memory.

A *case* is a callable taking no argument and returning a dict with a ``work`` entry (messages,
agent-steps, rounds, ...: the unit the rate is counted in) and any other information. The harness
runs it once as a warm-up under :mod:`tracemalloc` (that run gives the peak Python + numpy heap of
the case and is not timed, since tracing slows allocation down), then ``repeats`` times untimed by
tracing, recording wall time (``time.perf_counter``) and CPU time of the process
(``time.process_time``). Rates are work per CPU second: on a machine shared with other jobs CPU
time is far steadier than wall time, and every benchmark is single-threaded (BLAS pinned to one
thread), so CPU seconds are the cost. Ratios between a case and its baseline use the medians.
"""

from __future__ import annotations

import gc
import math
import resource
import statistics
import time
import tracemalloc
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

Case = Callable[[], dict]


def summary(values: Sequence[float]) -> dict[str, float]:
    """Median, min and max of ``values`` (rounded to 4 significant digits)."""
    return {"median": _round(statistics.median(values)), "min": _round(min(values)), "max": _round(max(values))}


def _round(value: float) -> float:
    if value == 0 or not math.isfinite(value):
        return float(value)
    return float(f"{value:.4g}")


def maxrss_mib() -> float:
    """Peak resident set size of this process so far (Linux reports KiB)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def run_case(case: Case, *, repeats: int, warmup: bool = True) -> dict[str, Any]:
    """Warm up (under tracemalloc), then time ``repeats`` runs of ``case``; see the module docstring."""
    peak = None
    if warmup:
        tracemalloc.start()
        try:
            case()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    walls, cpus, works = [], [], []
    info: dict = {}
    for _ in range(max(1, repeats)):
        gc.collect()
        wall, cpu = time.perf_counter(), time.process_time()
        out = dict(case())
        cpus.append(max(time.process_time() - cpu, 1e-9))
        walls.append(time.perf_counter() - wall)
        works.append(float(out.pop("work")))
        info = out
    rates = [w / c for w, c in zip(works, cpus, strict=True)]
    return {
        "repeats": len(cpus),
        "work": _round(statistics.median(works)),
        "wall_s": summary(walls),
        "cpu_s": summary(cpus),
        "rate_per_cpu_s": summary(rates),
        "peak_heap_mib": None if peak is None else round(peak / 2**20, 1),
        "maxrss_mib": maxrss_mib(),
        "info": info,
    }


def ratio(numerator: dict, denominator: dict) -> float:
    """Median rate of ``numerator`` over median rate of ``denominator`` (both :func:`run_case` results)."""
    return _round(numerator["rate_per_cpu_s"]["median"] / denominator["rate_per_cpu_s"]["median"])


def loglog_slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of log(y) on log(x): cost ~ x^slope."""
    slope, _ = np.polyfit(np.log(np.asarray(xs, float)), np.log(np.asarray(ys, float)), 1)
    return round(float(slope), 2)
