"""Shared checks of the family study tests: run a bundled study at a shortened quick scale and check
every figure's data (``figure_data``: exactly what the figure plots) against the study's plan."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from netsim.experiment import runner, studies
from netsim.experiment.api import run_study
from netsim.experiment.studies.figures import figure_data


def shortened(name: str, overrides: Mapping[str, Any]) -> studies.Study:
    """The bundled study ``name`` with ``overrides`` added to its quick scale's ``set``."""
    study = studies.load(name)
    quick = study.scales["quick"]
    quick = dataclasses.replace(quick, set={**quick.set, **overrides})
    return dataclasses.replace(study, scales={**study.scales, "quick": quick})


def run_short(name: str, folder, overrides: Mapping[str, Any], trials: int):
    """Plan and run the shortened study serially into ``folder / name``."""
    plan = studies.plan(shortened(name, overrides), "quick", trials=trials)
    with runner.SerialExecutor() as pool:
        results = run_study(plan, folder / name, executor=pool, progress=False)
    return plan, results


def value(point: studies.StudyPoint, column: str):
    return point.variant if column == "variant" else point.params[column]


def check_figures(plan: studies.StudyPlan, results, trials: int, statuses: tuple[str, ...] = ("ok",)) -> None:
    """Every figure of the study: the expected curves/points, finite means inside their intervals.

    ``statuses``: the trial statuses the run may hold (``unfinished`` too where the horizon may
    come before an algorithm's last epoch; its trials are plotted like the others).
    """
    tables = results.tables()
    assert tables["study"]["status"].isin(statuses).all()
    for figure in plan.study.figures:
        data = figure_data(figure, tables)
        points = [p for p in plan.points if not figure.variants or p.variant in figure.variants]
        for metric in figure.metrics:
            block = data[data["facet"] == metric] if figure.panels else data
            where = f"{plan.study.name}: figure {figure.name!r}, {metric}"
            if figure.kind == "series":
                curves = {(value(p, figure.facet) if figure.facet else None, value(p, figure.hue)) for p in points}
                assert block.groupby(["facet", "hue"]).ngroups == len(curves), where
                assert set(block["hue"]) == {str(h) for _, h in curves}, where
                times = block.groupby(["facet", "hue"])["time"].nunique()
                assert (times == times.iloc[0]).all() and times.iloc[0] >= 2, where
                columns = [("mean", "lo", "hi")]
            elif figure.kind == "tradeoff":
                # one point per variant and grid point; a reference (grid = false) is copied into every panel
                gridded = [p for p in points if not figure.facet or value(p, figure.facet) is not None]
                panels = max(1, len({value(p, figure.facet) for p in gridded})) if figure.facet else 1
                assert len(block) == len(gridded) + (len(points) - len(gridded)) * panels, where
                assert set(block["point"]) == {p.index for p in points}, where
                columns = [("x_mean", "x_lo", "x_hi"), ("y_mean", "y_lo", "y_hi")]
            else:
                # a variant with grid = false has no value of a grid key: a reference, drawn with x NaN
                expected = {(value(p, figure.facet) if figure.facet else None,
                             value(p, figure.hue) if figure.hue else None,
                             "nan" if value(p, figure.x) is None else str(value(p, figure.x))) for p in points}
                assert len(block) == len(expected), where
                assert {str(x) for x in block["x"]} == {x for _, _, x in expected}, where
                columns = [("mean", "lo", "hi")]
            for mean, lo, hi in columns:
                assert np.isfinite(block[mean]).all(), where
                assert (block[lo] <= block[mean] + 1e-9).all() and (block[mean] <= block[hi] + 1e-9).all(), where
            count = "x_n" if figure.kind == "tradeoff" else "n"
            assert (block[count] >= trials).all(), where
