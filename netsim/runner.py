"""Run the trials of a scenario on an executor and collect their results.

Trial ``i`` of a run seeded with ``seed`` always uses ``SeedSequence(seed, spawn_key=(i,))``
(see :func:`netsim.streams.trial_sequence`), so results do not depend on the executor, the
number of jobs or the order in which trials finish: they are sorted by trial before writing.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace

from netsim.errors import InputError
from netsim.params import Frozen
from netsim.scenario import Scenario
from netsim.sim import TrialResult, run_trial
from netsim.streams import trial_sequence

EXECUTORS = ("serial", "process")


@dataclass(frozen=True)
class Unit:
    """One trial of one scenario: everything a worker needs (picklable)."""

    scenario: Scenario
    trial: int

    def run(self) -> TrialResult:
        return run_trial(self.scenario, trial_sequence(self.scenario.run["seed"], self.trial), self.trial)


def _run_unit(unit: Unit) -> TrialResult:
    return unit.run()


def with_run_options(scenario: Scenario, *, trials: int | None = None, seed: int | None = None) -> Scenario:
    """``scenario`` with ``run.trials`` / ``run.seed`` replaced (command-line flags win over the file)."""
    run = dict(scenario.run)
    if trials is not None:
        if trials < 1:
            raise InputError(f"--trials {trials}: accepted: an integer >= 1")
        run["trials"] = trials
    if seed is not None:
        if seed < 0:
            raise InputError(f"--seed {seed}: accepted: an integer >= 0")
        run["seed"] = seed
    return replace(scenario, run=Frozen(run))


def execute(
    units: list[Unit], *, executor: str = "serial", jobs: int = 1, progress: bool | None = None,
    on_result: Callable[[TrialResult], None] | None = None,
) -> list[TrialResult]:
    """Run ``units`` and return their results in unit order.

    ``progress=None`` shows a bar on stderr only when it is a terminal.
    """
    if executor not in EXECUTORS:
        raise InputError(f"--executor {executor!r}: accepted: {', '.join(EXECUTORS)}")
    if jobs < 1:
        raise InputError(f"--jobs {jobs}: accepted: an integer >= 1")
    results: dict[int, TrialResult] = {}
    for index, result in _progress(_iterate(units, executor, jobs), len(units), progress):
        results[index] = result
        if on_result is not None:
            on_result(result)
    return [results[i] for i in range(len(units))]


def _iterate(units: list[Unit], executor: str, jobs: int) -> Iterator[tuple[int, TrialResult]]:
    if executor == "serial" or jobs == 1 or len(units) == 1:
        for index, unit in enumerate(units):
            yield index, unit.run()
        return
    with ProcessPoolExecutor(max_workers=min(jobs, len(units))) as pool:
        futures = {pool.submit(_run_unit, unit): index for index, unit in enumerate(units)}
        try:
            for future in as_completed(futures):
                yield futures[future], future.result()
        except BaseException:
            for future in futures:
                future.cancel()
            raise


def _progress(iterable, total: int, progress: bool | None):
    show = sys.stderr.isatty() if progress is None else progress
    if not show or os.environ.get("NETSIM_NO_PROGRESS"):
        return iterable
    from tqdm import tqdm

    return tqdm(iterable, total=total, unit="trial", file=sys.stderr, dynamic_ncols=True)


def run_scenario(scenario: Scenario, *, executor: str = "serial", jobs: int = 1,
                 progress: bool | None = None) -> list[TrialResult]:
    """All ``run.trials`` trials of ``scenario``."""
    units = [Unit(scenario, trial) for trial in range(scenario.run["trials"])]
    return execute(units, executor=executor, jobs=jobs, progress=progress)
