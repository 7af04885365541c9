"""The FedUCB studies (scenarios/studies/dubey2020b-*.toml, tradeoff-feducb-*.toml).

Every study is planned at both scales (each variant's scenario validated, nothing runs), and run at
its quick scale with 2 trials and a horizon of 100 trials (the whole file costs about 40 CPU s);
then each figure's data (``figure_data``: exactly what the figure plots) is checked: one curve or
point per variant, grid point or x value as the figure asks, finite means and lo <= mean <= hi.
No ordering between variants is asserted: at T = 100 with 2 trials the regret of these runs is
mostly the exploration before the first synchronisation, and the private runs are bimodal (a run
either locks on the best action or on a decoy), so no ordering holds reliably. What is asserted
exactly is deterministic: a run that synchronises every trial has as many rounds as trials, a run
that never synchronises sends nothing.
"""

from __future__ import annotations

import math

import pytest

from netsim.experiment import studies
from tests.studycheck import check_figures, run_short

FIGURES = ["dubey2020b-fig1a", "dubey2020b-fig1b", "dubey2020b-fig1c", "dubey2020b-p2p"]
TRADEOFFS = ["tradeoff-feducb-delay", "tradeoff-feducb-loss"]
HORIZON = 100
SHORT = {"run.horizon": HORIZON, "run.checkpoints": 10}
TRIALS = 2


# ---------------------------------------------------------------------- planning (both scales)
def test_fig1a_paper_scale_is_the_eps_by_agents_grid():
    """Fig. 1(A): eps = 0.1 .. 10 (x 1000), M = 10 .. 100, 100 trials, ~70 rounds (threshold 170)."""
    plan = studies.plan(studies.load("dubey2020b-fig1a"), "paper")
    assert plan.trials == 100
    pairs = {(p.scenario.network["agents"], p.scenario.protocol["epsilon"]) for p in plan.points}
    assert pairs == {(m, e) for m in (10, 20, 50, 100) for e in (100.0, 300.0, 1000.0, 3000.0, 10000.0)}
    for point in plan.points:
        assert point.scenario.protocol["threshold"] == 170.0 and point.scenario.run["horizon"] == 2000


def test_fig1b_paper_scale_has_three_schedules_private_and_not():
    plan = studies.plan(studies.load("dubey2020b-fig1b"), "paper")
    assert plan.trials == 100
    private = [p for p in plan.points if math.isfinite(p.scenario.protocol["epsilon"])]
    assert len(private) == 3 and len(plan.points) == 6
    for point in plan.points:
        assert point.scenario.network["agents"] == 100 and point.scenario.run["horizon"] == 2000
    every_trial = [p for p in plan.points if p.scenario.protocol["communication"] == "mt"]
    assert len(every_trial) == 2 and all(p.scenario.protocol["threshold"] == "auto" for p in every_trial)


def test_fig1c_thresholds_scale_with_d():
    """Thm. 1's D is linear in d: every variant sets threshold = 8.5 d and K = min(d^2, 256)."""
    plan = studies.plan(studies.load("dubey2020b-fig1c"), "paper")
    dims = []
    for point in plan.points:
        d = point.scenario.bandit["dimension"]
        dims.append(d)
        assert point.scenario.bandit["arms"] == min(d * d, 256)
        assert point.scenario.protocol["threshold"] == pytest.approx(8.5 * d)
    assert dims == [2, 4, 8, 16, 32, 64, 128]
    paper_curves = next(f for f in plan.study.figures if f.name == "fig1c").variants
    assert paper_curves == tuple(f"d = {d}" for d in (8, 16, 32, 64, 128))


def test_tradeoff_grids_and_protocols():
    delay = studies.load("tradeoff-feducb-delay")
    assert delay.grid["network.delay.mean"][0] == 0.01 and max(delay.grid["network.delay.mean"]) == 10.0
    loss = studies.load("tradeoff-feducb-loss")
    assert loss.grid["network.loss"] == (0.0, 0.1, 0.2, 0.3)
    for study in (delay, loss):
        points = studies.plan(study, "paper").points
        assert {p.scenario.protocol["name"] for p in points} == {"feducb", "feducb-p2p"}
        assert {p.scenario.network["agents"] for p in points} == {20}
        assert all(p.scenario.network["delay"]["model"] == "exponential" for p in points)


# ---------------------------------------------------------------------- running (quick scale, shortened)
@pytest.mark.parametrize("name", FIGURES)
def test_figure_study_runs_and_draws(name, tmp_path):
    plan, results = run_short(name, tmp_path, SHORT, TRIALS)
    check_figures(plan, results, TRIALS)
    trials = results.trials
    assert set(trials["variant"]) == {v.name for v in plan.study.variants}
    if name == "dubey2020b-fig1b":  # paper mode, no delay: D = 0 synchronises in every trial
        every = trials[trials["variant"].str.endswith("O(MT)")]
        assert len(every) == 2 * TRIALS and (every["rounds"] == HORIZON).all()
    if name == "dubey2020b-p2p":
        isolated = trials[trials["variant"] == "isolated OFUL"]
        assert (isolated["rounds"] == 0).all() and (isolated["messages_sent"] == 0).all()


@pytest.mark.parametrize("name", TRADEOFFS)
def test_tradeoff_study_runs_and_draws(name, tmp_path):
    plan, results = run_short(name, tmp_path, SHORT, TRIALS)
    check_figures(plan, results, TRIALS)
    trials = results.trials
    isolated = trials[trials["variant"] == "isolated OFUL"]
    assert (isolated["comm_cost"] == 0).all() and (isolated["messages_sent"] == 0).all()
    talking = trials[trials["variant"] != "isolated OFUL"]
    assert (talking["messages_sent"] > 0).all()
    if name.endswith("loss"):
        assert (talking.loc[talking["network_loss"] == 0.0, "messages_dropped"] == 0).all()
        assert (talking.loc[talking["network_loss"] == 0.3, "messages_dropped"] > 0).all()
