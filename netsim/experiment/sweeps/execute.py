"""Running a sweep's missing units and storing each as soon as it finishes (resumable)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from netsim.engine.sim import TrialResult
from netsim.experiment import runner
from netsim.experiment.sweeps.plan import Plan, PlannedUnit, encode_result
from netsim.experiment.sweeps.store import UnitStore, canonical, decode_result, locked


@dataclass
class Outcome:
    total: int
    reused: int
    ran: int
    results: dict[str, TrialResult]


def run(plan_: Plan, out: Path, *, executor: runner.Executor | str | None = "serial", jobs: int = 1,
        scheduler: str | None = None, progress: bool | None = None,
        on_stored: Callable[[PlannedUnit], None] | None = None) -> Outcome:
    """Run the units of ``plan_`` missing from ``out/units`` and store each as it finishes.

    Returns the results of every unit (stored earlier or now). Stored units are never deleted;
    an error or an interruption leaves every unit finished so far in the store.
    """
    store = UnitStore(out / "units")
    units = plan_.units()
    with locked(out):
        store.clean()
        results: dict[str, TrialResult] = {}
        for unit in units:
            record = store.get(unit.id)
            if record is not None:
                results[unit.id] = decode_result(record)
        missing = [unit for unit in units if unit.id not in results]
        reused = len(units) - len(missing)
        if missing:
            pool = executor if isinstance(executor, runner.Executor) else runner.make_executor(
                executor, jobs=jobs, scheduler=scheduler)
            try:
                stream = runner.iter_results([u.unit() for u in missing], executor=pool, progress=progress,
                                             total=len(units), initial=reused)
                for index, result in stream:
                    unit = missing[index]
                    store.put(unit.id, encode_result(unit, result))
                    # What the tables use is what the store holds (JSON round trip), whatever ran it.
                    results[unit.id] = decode_result(json.loads(canonical(encode_result(unit, result))))
                    if on_stored is not None:
                        on_stored(unit)
            finally:
                if pool is not executor:
                    pool.close()
    return Outcome(len(units), reused, len(missing), results)
