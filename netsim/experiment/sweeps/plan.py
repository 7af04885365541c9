"""A sweep's plan: the grid's points, each a validated scenario, and their units.

Every grid point is validated up front (an unknown key or a bad value fails before anything
runs, naming the point).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from netsim.engine import scenario as S
from netsim.engine.errors import InputError
from netsim.engine.sim import TrialResult
from netsim.experiment import runner
from netsim.experiment.sweeps.grid import Axis, parse_grid, toml_value
from netsim.experiment.sweeps.store import STORE_FORMAT, encode_trial, point_key, unit_id, unit_ids


def _resolved_value(scenario: S.Scenario, key: str, raw: Any) -> Any:
    """The value of dotted ``key`` after validation (so ``1`` and ``1.0`` are one point)."""
    node: Any = scenario.as_dict()
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return raw
        node = node[part]
    return node


@dataclass(frozen=True)
class Point:
    """One grid point: its index in the grid, ``key → value`` pairs and validated scenario."""

    index: int
    assignments: Mapping[str, Any]
    scenario: S.Scenario

    @property
    def key(self) -> tuple[int, int]:
        return point_key(self.assignments)

    def label(self) -> str:
        return ", ".join(f"{k}={toml_value(v)}" for k, v in self.assignments.items())


@dataclass(frozen=True)
class PlannedUnit:
    id: str
    point: Point
    trial: int

    def unit(self) -> runner.Unit:
        return runner.Unit(self.point.scenario, self.trial, self.point.key)


@dataclass(frozen=True)
class Plan:
    scenario: str
    overrides: tuple[str, ...]
    axes: tuple[Axis, ...]
    trials: int
    seed: int
    points: tuple[Point, ...]

    @property
    def keys(self) -> list[str]:
        return [axis.key for axis in self.axes]

    def units(self) -> list[PlannedUnit]:
        """Every (point, trial) unit, point-major."""
        return [PlannedUnit(uid, p, t) for p in self.points
                for t, uid in enumerate(unit_ids(p.scenario, p.assignments, range(self.trials)))]

    def describe(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "overrides": list(self.overrides),
                "grid": {axis.key: list(axis.values) for axis in self.axes},
                "trials": self.trials, "seed": self.seed, "points": len(self.points)}


def plan(scenario: str | S.Scenario | None, grid: Sequence[str], *, overrides: Sequence[str] = (),
         trials: int | None = None, seed: int | None = None) -> Plan:
    """Parse the grid and validate the scenario of every point (errors name the point).

    ``scenario`` is a file, a bundled name or a :class:`~netsim.engine.scenario.Scenario`; ``grid``
    holds ``KEY=V1,V2,...`` strings and ``overrides`` ``KEY=VALUE`` strings, as on the command line.
    """
    axes = parse_grid(grid)
    base = runner.with_run_options(S.load(scenario, list(overrides)), trials=trials, seed=seed)
    sweeps_seed = any(axis.key == "run.seed" for axis in axes)
    if sweeps_seed and seed is not None:
        raise InputError("--seed and --grid run.seed=... both given; accepted: one of them")
    run_flags = [f"run.trials={base.run['trials']}"] + ([] if sweeps_seed else [f"run.seed={base.run['seed']}"])
    points, seen = [], {}
    grid_keys = {axis.key for axis in axes}
    for index, combo in enumerate(itertools.product(*(axis.values for axis in axes))):
        sets = [f"{axis.key}={toml_value(value)}" for axis, value in zip(axes, combo)]
        try:
            point_scenario = S.load(scenario, [*overrides, *run_flags, *sets])
        except InputError as exc:
            hint = ("; protocols whose keys differ are compared side by side in a study (netsim study, "
                    "docs/studies.md: one variant per protocol)") if "protocol.name" in grid_keys else ""
            raise InputError(f"--grid point {', '.join(sets)}: {exc}{hint}") from None
        assignments = {axis.key: _resolved_value(point_scenario, axis.key, value) for axis, value in zip(axes, combo)}
        try:  # the units of a point draw their own random graphs (their seeds include the point)
            S.check_trial_graphs(point_scenario, range(base.run["trials"]), point=point_key(assignments))
        except InputError as exc:
            raise InputError(f"--grid point {', '.join(sets)}: {exc}") from None
        identity = unit_id(point_scenario, assignments, 0)
        if identity in seen:
            raise InputError(f"--grid points {seen[identity]} and {', '.join(sets)} are the same scenario; "
                             "accepted: distinct values for each key")
        seen[identity] = ", ".join(sets)
        points.append(Point(index, assignments, point_scenario))
    label = scenario.name if isinstance(scenario, S.Scenario) else str(scenario or S.DEFAULT_SCENARIO)
    return Plan(label, tuple(overrides), tuple(axes), base.run["trials"],
                base.run["seed"], tuple(points))


def encode_result(unit: PlannedUnit, result: TrialResult) -> dict[str, Any]:
    """The stored record of ``unit``: its identity and :func:`encode_trial` of its result."""
    return {"format": STORE_FORMAT, "unit": unit.id, "point": [[k, v] for k, v in unit.point.assignments.items()],
            "trial": unit.trial, **encode_trial(result)}
