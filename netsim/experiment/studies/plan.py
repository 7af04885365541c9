"""A study at one scale: every (variant, grid point) validated, and its units.

Seeds: unit (variant, grid point, trial) runs with
``SeedSequence(study.seed, spawn_key=(*point_key(grid point), trial))``; the seed does **not**
depend on the variant, so trial ``i`` of every variant at one grid point sees the same reward
draws wherever the scenarios share a bandit (common random numbers: the comparison between
variants is paired, and its spread is not inflated by independent reward noise). With
``paired = "all"`` the grid point is left out of the key too: trial ``i`` has one seed across
the whole study (curves along a grid axis are then paired as well). A variant with
``grid = false`` runs once, with no grid assignment (its grid columns are empty).

Units are stored and reused like a sweep's (:mod:`netsim.experiment.sweeps.store`): a unit's identity is a
hash of its resolved scenario, its grid point and its trial.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from netsim.engine import scenario as S
from netsim.engine.errors import InputError
from netsim.experiment import runner
from netsim.experiment.studies.metrics import SERIES, produced
from netsim.experiment.studies.spec import MAX_UNITS, Scale, Study, Variant
from netsim.experiment.sweeps.grid import toml_value
from netsim.experiment.sweeps.store import point_key, unit_ids

_MISSING = object()


def resolved(scenario: S.Scenario, key: str) -> Any:
    """The value of dotted ``key`` in the resolved scenario (``_MISSING`` when it has none)."""
    node: Any = scenario.as_dict()
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return _MISSING
        node = node[part]
    return node


@dataclass(frozen=True)
class StudyPoint:
    """One variant at one grid point: its validated scenario and its parameter values."""

    index: int
    variant: str
    assignments: Mapping[str, Any]
    params: Mapping[str, Any]
    scenario: S.Scenario
    paired: str = "variants"

    @property
    def key(self) -> tuple[int, int]:
        """Spawn-key prefix of the unit seeds: the grid point's (shared by every variant), or one for all."""
        return point_key({} if self.paired == "all" else self.assignments)

    def label(self) -> str:
        """``variant`` or ``variant (key=value, ...)`` for a grid point."""
        if not self.assignments:
            return self.variant
        return f"{self.variant} ({', '.join(f'{k}={toml_value(v)}' for k, v in self.assignments.items())})"


@dataclass(frozen=True)
class StudyUnit:
    """One (point, trial) unit of a study (what a sweep calls a unit)."""

    id: str
    point: StudyPoint
    trial: int

    def unit(self) -> runner.Unit:
        return runner.Unit(self.point.scenario, self.trial, self.point.key)


@dataclass(frozen=True)
class StudyPlan:
    """A study at one scale, ready to run."""

    study: Study
    scale: Scale
    trials: int
    points: tuple[StudyPoint, ...]

    def units(self) -> list[StudyUnit]:
        """Every (point, trial) unit, point-major."""
        return [StudyUnit(uid, p, t) for p in self.points
                for t, uid in enumerate(unit_ids(p.scenario, p.assignments, range(self.trials)))]

    def describe(self) -> dict[str, Any]:
        return {"study": self.study.name, "file": self.study.path, "scale": self.scale.name, "trials": self.trials,
                "seed": self.study.seed, "paired": self.study.paired,
                "grid": {k: list(v) for k, v in self.study.grid.items()},
                "variants": [v.name for v in self.study.variants], "points": len(self.points)}


def variant_overrides(variant: Variant, scale: Scale) -> dict[str, Any]:
    """The overrides of ``variant`` at ``scale``: its own, then the scale's, then its own at that scale."""
    return {**variant.set, **scale.set, **variant.scale.get(scale.name, {})}


def plan(study: Study, scale: str = "quick", *, trials: int | None = None,
         overrides: Mapping[str, Any] | None = None) -> StudyPlan:
    """Validate the scenario of every variant at every grid point, and the figures, before anything runs.

    ``overrides`` (dotted keys, as ``netsim study --set``) apply to every variant after the study's
    own. Errors name the study file, the variant and the key.
    """
    if scale not in study.scales:
        raise InputError(f"--scale {scale!r}: accepted: {', '.join(study.scales)}", source=study.path)
    chosen = study.scales[scale]
    if chosen.grid:  # this scale's values of some grid keys
        study = replace(study, grid={key: chosen.grid.get(key, values) for key, values in study.grid.items()})
    trials = chosen.trials if trials is None else trials
    if not 1 <= trials <= 100_000:
        raise InputError(f"--trials {trials}: accepted: 1 .. 100000")
    combos = list(itertools.product(*study.grid.values()))
    units = sum(len(combos) if v.grid else 1 for v in study.variants) * trials
    if units > MAX_UNITS:
        raise InputError(f"{len(study.variants)} variants x {len(combos)} grid points x {trials} trials make "
                         f"{units:,} units; accepted: at most {MAX_UNITS:,}", source=study.path)
    keys = study.parameters()
    points: list[StudyPoint] = []
    for variant in study.variants:
        base = {**variant_overrides(variant, chosen), **(overrides or {})}
        for combo in combos if variant.grid else [()]:
            assignments = dict(zip(study.grid, combo))
            at = ", ".join(f"{k}={toml_value(v)}" for k, v in assignments.items())
            where = f"variant {variant.name!r}" + (f" at {at}" if at else "")
            try:
                scenario = S.load(variant.scenario, {**base, **assignments, "run.trials": trials,
                                                     "run.seed": study.seed})
            except InputError as exc:
                raise InputError(f"{where}: {exc}", source=study.path) from None
            params = {}
            for key in keys:
                if key in study.grid and not variant.grid:
                    params[key] = None  # run once: no grid value (a reference in the figures)
                    continue
                value = resolved(scenario, key)
                if value is _MISSING:
                    raise InputError(f"{where}: its scenario has no key {key!r} (used by a figure or the grid); "
                                     "accepted: keys every drawn variant has (see netsim show "
                                     f"{variant.scenario})", source=study.path)
                params[key] = value
            points.append(StudyPoint(len(points), variant.name, assignments, params, scenario, study.paired))
    result = StudyPlan(study, chosen, trials, tuple(points))
    check_figures(result)
    return result


def check_figures(plan: StudyPlan) -> None:
    """Refuse a figure whose metric no drawn variant produces (one line: file, figure, key)."""
    study = plan.study
    for figure in study.figures:
        drawn = [p for p in plan.points if not figure.variants or p.variant in figure.variants]
        metrics = list(figure.metrics) + ([figure.x] if figure.kind == "tradeoff" else [])
        for metric in metrics:
            if figure.kind == "series":
                ok, accepted = metric in SERIES, ", ".join(SERIES)
            else:
                ok = any(metric in produced(p.scenario) for p in drawn)
                accepted = ", ".join(sorted(set().union(*(produced(p.scenario) for p in drawn))))
            if not ok:
                variants = ", ".join(dict.fromkeys(p.variant for p in drawn))
                raise InputError(f"figure {figure.name!r}: metric {metric!r} is produced by none of its variants "
                                 f"({variants}); accepted: {accepted}", source=study.path)
