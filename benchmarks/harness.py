"""Timing harness of ``python -m benchmarks``: warm-up, repeats, median / min / max, peak memory.

A *case* is a callable taking no argument and returning a dict with a ``work`` entry (messages,
agent-steps, rounds, ...: the unit the rate is counted in) and any other information. The harness
runs it once as a warm-up under :mod:`tracemalloc` (that run gives the peak Python + numpy heap of
the case and is not timed, since tracing slows allocation down), then ``repeats`` times untimed by
tracing, recording wall time (``time.perf_counter``) and CPU time of the process
(``time.process_time``). Rates are work per CPU second: on a machine shared with other jobs CPU
time is far steadier than wall time, and every benchmark is single-threaded (BLAS pinned to one
thread), so CPU seconds are the cost. Cases compared with each other run interleaved
(:func:`run_cases`, one run of each per round) and their ratio is the median of the per-round
ratios (:func:`paired_ratio`), so a load change between rounds cancels out of it.
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
    return run_cases({"case": case}, repeats=repeats, warmup=warmup)["case"]


def run_cases(cases: dict[str, Case], *, repeats: int, warmup: bool = True) -> dict[str, dict[str, Any]]:
    """:func:`run_case` for several cases whose repeats are interleaved: round ``i`` runs every case once,
    in an order rotated per round, so the ``i``-th repeats of two cases ran under the same load and
    :func:`paired_ratio` can compare them round by round. Each result keeps its per-round ``rates``."""
    peaks: dict[str, int | None] = {}
    for name, case in cases.items():
        peaks[name] = None
        if warmup:
            tracemalloc.start()
            try:
                case()
                peaks[name] = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
    names = list(cases)
    walls: dict[str, list[float]] = {n: [] for n in names}
    cpus: dict[str, list[float]] = {n: [] for n in names}
    works: dict[str, list[float]] = {n: [] for n in names}
    infos: dict[str, dict] = {n: {} for n in names}
    for i in range(max(1, repeats)):
        for name in names[i % len(names):] + names[:i % len(names)]:
            gc.collect()
            wall, cpu = time.perf_counter(), time.process_time()
            out = dict(cases[name]())
            cpus[name].append(max(time.process_time() - cpu, 1e-9))
            walls[name].append(time.perf_counter() - wall)
            works[name].append(float(out.pop("work")))
            infos[name] = out
    results = {}
    for name in names:
        rates = [w / c for w, c in zip(works[name], cpus[name], strict=True)]
        results[name] = {
            "repeats": len(rates),
            "work": _round(statistics.median(works[name])),
            "wall_s": summary(walls[name]),
            "cpu_s": summary(cpus[name]),
            "rate_per_cpu_s": summary(rates),
            "rates": [_round(r) for r in rates],
            "peak_heap_mib": None if peaks[name] is None else round(peaks[name] / 2**20, 1),
            "maxrss_mib": maxrss_mib(),
            "info": infos[name],
        }
    return results


def paired_ratio(numerator: dict, denominator: dict) -> dict[str, float]:
    """Median, min and max over the rounds of the rate ratio within a round (two :func:`run_cases` results)."""
    return summary([a / b for a, b in zip(numerator["rates"], denominator["rates"], strict=True)])


def loglog_slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of log(y) on log(x): cost ~ x^slope."""
    slope, _ = np.polyfit(np.log(np.asarray(xs, float)), np.log(np.asarray(ys, float)), 1)
    return round(float(slope), 2)
