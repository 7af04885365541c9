"""The li2022 studies (scenarios/studies/li2022-fig*.toml and tradeoff-li2022-*.toml).

Every study is planned at both scales (every variant's scenario validated, every figure checked
against its variants), then run once with 2 trials at a shortened horizon where its quick scale
would cost more than a few seconds here (the quick scale itself is measured in
docs/protocols/li2022.md), and each figure's data is checked: one curve or point per variant (or
per hue value) as the paper's figure has, the paper's x values, finite means and intervals that
hold their means. No ordering between variants is asserted here: at 2 trials none has the power
(the orderings, with their intervals at paper scale, are in each study's notes).
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import replace
from functools import cache
from pathlib import Path

import numpy as np
import pytest

import netsim.experiment.studies as studies
from netsim.experiment.api import run_study
from netsim.experiment.runner import SerialExecutor
from netsim.experiment.studies.figures import figure_data

FIG4 = ["eps = 0.1", "eps = 0.3", "eps = 0.5", "eps = 1", "eps = 0.03", "eps = 0.01", "eps = inf (no privacy)"]
FIG8 = ["CDP-MAB, homogeneous", "CDP-MAB, heterogeneous", "elimination alone (M = 1), homogeneous",
        "isolated UCB1 (single agent), homogeneous", "isolated UCB1 (single agent), heterogeneous"]
FIG10 = ["complete", "star", "random", "ring"]
FIG11 = ["case 1: 5 x 20 complete", "case 2: 53/24/10/6/7 complete", "case 3: 1 x 100 complete",
         "case 4: 5 x 20 random", "case 5: 5 x 20 star", "case 6: 100 x 1 (centralized)"]
FIG12 = [f"{p}-MAB, {kind}" for kind in ("heterogeneous", "homogeneous") for p in ("CDP", "DDP", "HDP")]
FAMILY = ["CDP-MAB", "DDP-MAB", "HDP-MAB"]
TRADEOFF = [*FAMILY, "isolated UCB1", "central UCB"]
DELAYS = [0.01, 1.0, 2.0, 5.0, 10.0]
LOSSES = [0.0, 0.1, 0.2, 0.3]

#: study -> (variants, {figure: (hue values, x values or None)}, CI overrides of the quick scale)
EXPECTED = {
    "li2022-fig4": (FIG4, {
        "fig4-regret": (["eps = 0.1", "eps = 0.3", "eps = 0.5", "eps = 1", "eps = inf (no privacy)"], None),
        "fig4-final-by-epsilon": (["cdp-mab"], [0.01, 0.03, 0.1, 0.3, 0.5, 1.0]),
    }, {}),
    "li2022-fig5": ([f"p = {p}" for p in ("0.2", "0.4", "0.6", "0.8", "1")], {
        "fig5-regret": ([f"p = {p}" for p in ("0.2", "0.4", "0.6", "0.8", "1")], None),
        "fig5-final-by-p": (["cdp-mab"], [0.2, 0.4, 0.6, 0.8, 1.0]),
    }, {}),
    "li2022-fig6": ([f"R = {r}" for r in range(2, 6)], {
        "fig6-regret": ([f"R = {r}" for r in range(2, 6)], None),
        "fig6-final-by-R": (["cdp-mab"], [2, 3, 4, 5]),
    }, {}),
    "li2022-fig7": ([f"p = {p}, R = {r}" for p in ("0.2", "0.6", "1") for r in (3, 5)], {
        "fig7-final": (["3", "5"], [0.2, 0.6, 1.0]),
        "fig7-tradeoff": ([f"p = {p}, R = {r}" for p in ("0.2", "0.6", "1") for r in (3, 5)], None),
    }, {}),
    "li2022-fig8": (FIG8, {
        "fig8-regret": (FIG8, None),
        "fig8-final": (["(all)"], FIG8),
    }, {"run.horizon": 5000}),
    "li2022-fig10": (FIG10, {
        "fig10-regret": (FIG10, None),
        "fig10-final": (["(all)"], FIG10),
        "fig10-tradeoff": (FIG10, None),
    }, {"run.horizon": 5000}),
    "li2022-fig11": (FIG11, {
        "fig11-final": (["(all)"], FIG11),
        "fig11-regret": (FIG11, None),
        "fig11-rounds": (["(all)"], FIG11),
    }, {"run.horizon": 5000}),
    "li2022-fig12": (FIG12, {
        "fig12-regret": (["cdp-mab", "ddp-mab", "hdp-mab"], None),
        "fig12-final": (["heterogeneous", "bernoulli"], ["cdp-mab", "ddp-mab", "hdp-mab"]),
    }, {"run.horizon": 5000}),
    "tradeoff-li2022-delay": (TRADEOFF, {
        "final-by-delay": (TRADEOFF, DELAYS),
        "rounds-by-delay": (FAMILY, DELAYS),
        "tradeoff": (TRADEOFF, None),
    }, {"run.horizon": 300}),
    "tradeoff-li2022-loss": (TRADEOFF, {
        "final-by-loss": (TRADEOFF, LOSSES),
        "rounds-by-loss": (FAMILY, LOSSES),
        "tradeoff": (TRADEOFF, None),
    }, {"run.horizon": 300}),
}
NAMES = sorted(EXPECTED)


def test_every_li2022_study_is_bundled():
    bundled = {name for name in studies.bundled() if "li2022" in name}
    assert bundled == set(EXPECTED)


@pytest.mark.parametrize("scale", ["quick", "paper"])
@pytest.mark.parametrize("name", NAMES)
def test_plans_at_both_scales(name, scale):
    study = studies.load(name)
    variants, figures, _ = EXPECTED[name]
    plan = studies.plan(study, scale)
    assert [v.name for v in study.variants] == variants
    assert {f.name for f in study.figures} == set(figures)
    points = math.prod(len(values) for values in study.grid.values())
    # a variant with grid = false (a baseline that sends nothing) runs once
    assert len(plan.points) == sum(points if v.grid else 1 for v in study.variants)
    assert len(plan.units()) == len(plan.points) * study.scales[scale].trials
    assert study.scales[scale].note and study.source.startswith(("Li & Song 2022", "li2022"))
    assert "PAPER_NOTES" not in study.notes and len(study.notes) > 200
    if scale == "paper" and name.startswith("li2022-fig"):  # the paper's T, agents and arms
        for point in plan.points:
            assert point.scenario.run["horizon"] == 100_000


@cache
def ci_run(name: str):
    """The study at its quick scale with 2 trials (and the CI overrides): its plan and tables."""
    study = studies.load(name)
    quick = study.scales["quick"]
    overrides = EXPECTED[name][2]
    study = replace(study, scales={**study.scales, "quick": replace(quick, set={**quick.set, **overrides})})
    plan = studies.plan(study, "quick", trials=2)
    with tempfile.TemporaryDirectory(prefix="netsim-li2022-") as folder:
        results = run_study(plan, Path(folder), executor=SerialExecutor(), progress=False)
        return study, results.tables()


def _numbers(values) -> list:
    return [float(v) if isinstance(v, (int, float, np.number)) else str(v) for v in values]


@pytest.mark.parametrize("name", NAMES)
def test_figures_hold_one_curve_per_variant(name):
    study, tables = ci_run(name)
    trials = tables["study"]
    assert (trials["status"] != "failed").all()
    assert set(trials["variant"]) == set(EXPECTED[name][0])
    for figure in study.figures:
        hues, xs = EXPECTED[name][1][figure.name]
        data = figure_data(figure, tables)
        assert sorted(dict.fromkeys(data["hue"])) == sorted(hues), figure.name
        prefixes = ["x_", "y_"] if figure.kind == "tradeoff" else [""]
        for prefix in prefixes:
            mean, lo, hi = (data[f"{prefix}{c}"].to_numpy(dtype=float) for c in ("mean", "lo", "hi"))
            assert np.isfinite(mean).all() and np.isfinite(lo).all() and np.isfinite(hi).all(), figure.name
            assert (lo <= mean + 1e-9).all() and (mean <= hi + 1e-9).all(), figure.name
            assert (data[f"{prefix}n"] == 2).all(), figure.name
        facets = list(dict.fromkeys(data["facet"]))
        if figure.kind == "series":
            for _, curve in data.groupby(["facet", "hue"], sort=False):
                assert len(curve) >= 5 and curve["time"].is_monotonic_increasing
            if figure.facet:
                assert facets == ["heterogeneous", "bernoulli"]
        elif figure.kind == "final":  # every line has the paper's x values, in order
            assert facets == (list(figure.metrics) if figure.panels else ["(all)"]), figure.name
            for (_, hue), line in data.groupby(["facet", "hue"], sort=False):
                reference = len(line) == 1 and line["x"].isna().all()  # a baseline run once (grid = false)
                assert reference or _numbers(line["x"]) == _numbers(xs), (figure.name, hue)
        else:  # tradeoff: one point per variant and grid point, one per reference
            grid = math.prod(len(v) for v in study.grid.values())
            assert len(data) == sum(grid if v.grid else 1 for v in study.variants)
