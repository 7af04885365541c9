"""The dubey2020a studies (scenarios/studies/dubey2020a-fig1*.toml, tradeoff-dubey2020a-*.toml).

Every study is planned at both scales (cheap: each variant's scenario is validated, nothing runs),
and run at its quick scale with 2 trials and a shorter horizon on fewer agents (the whole file
costs about 20 CPU s), then each figure's data (``figure_data``, exactly what the figure plots)
is checked: one curve or point per variant, grid point or x value as the figure asks, finite
means and lo <= mean <= hi. No ordering between protocols is asserted: with 2 short trials none
holds reliably. The few values asserted exactly are deterministic (what an isolated baseline
sends, the resolved message life gamma).
"""

from __future__ import annotations

import pytest

from netsim.experiment import studies
from tests.studycheck import check_figures, run_short

FIGURES = ["dubey2020a-fig1a", "dubey2020a-fig1b", "dubey2020a-fig1c"]
TRADEOFFS = ["tradeoff-dubey2020a-delay", "tradeoff-dubey2020a-loss"]
#: overrides that make a quick-scale run of each study cost a few CPU seconds
SHORT = {"network.agents": 40, "network.p": 0.25, "run.horizon": 120, "run.checkpoints": 12}
TRIALS = 2


# ---------------------------------------------------------------------- planning (both scales)
@pytest.mark.parametrize("name", FIGURES)
def test_paper_scale_is_the_papers_size(name):
    """M = 200 agents, T = 1000 trials, 100 trials on G(200, 0.1), K = 5 (Sec. 5)."""
    plan = studies.plan(studies.load(name), "paper")
    assert plan.trials == 100
    for point in plan.points:
        scenario = point.scenario
        assert scenario.network["agents"] == 200 and scenario.network["p"] == 0.1, point.variant
        assert scenario.run["horizon"] == 1000 and scenario.bandit["arms"] == 5, point.variant


def test_fig1c_sweeps_gamma_for_both_algorithms():
    plan = studies.plan(studies.load("dubey2020a-fig1c"), "paper")
    pairs = {(p.params["protocol.name"], p.params["protocol.gamma"]) for p in plan.points}
    assert pairs == {(name, gamma) for name in ("dubey2020a-private", "dubey2020a-byzantine")
                     for gamma in (1, 2, "diameter")}


def test_tradeoff_grids():
    delay = studies.load("tradeoff-dubey2020a-delay")
    assert delay.grid["network.delay.mean"][0] == 0.01 and max(delay.grid["network.delay.mean"]) == 10.0
    loss = studies.load("tradeoff-dubey2020a-loss")
    assert loss.grid["network.loss"] == (0.0, 0.1, 0.2, 0.3)
    for study in (delay, loss):
        protocols = {p.scenario.protocol["name"] for p in studies.plan(study, "quick").points}
        assert protocols == {"dubey2020a-private", "dubey2020a-byzantine", "dp-ucb-int", "ucb1", "central-ucb"}
        for point in studies.plan(study, "quick").points:
            silent = point.scenario.protocol["name"] in ("dp-ucb-int", "ucb1", "central-ucb")
            # the baselines send nothing: run once, with the default delay (they refuse a sampled one)
            assert point.scenario.network["delay"]["model"] == ("constant" if silent else "exponential")


# ---------------------------------------------------------------------- running (quick scale, shortened)
@pytest.mark.parametrize("name", FIGURES)
def test_figure_study_runs_and_draws(name, tmp_path):
    plan, results = run_short(name, tmp_path, SHORT, TRIALS)
    check_figures(plan, results, TRIALS)
    trials = results.trials
    assert set(trials["variant"]) == {v.name for v in plan.study.variants}
    isolated = trials[trials["protocol"].isin(["ucb1", "dp-ucb-int"])]
    assert (isolated["messages_sent"] == 0).all()
    if name == "dubey2020a-fig1b":  # gamma = 0: no communication at all
        assert (trials.loc[trials["variant"] == "gamma = 0", "messages_sent"] == 0).all()
    if name == "dubey2020a-fig1c":  # the 'diameter' points resolve to the sampled graph's diameter (>= 2 here)
        diameter = trials[trials["variant"].str.endswith("diameter")]
        assert (diameter["gamma"] >= 2).all()


@pytest.mark.parametrize("name", TRADEOFFS)
def test_tradeoff_study_runs_and_draws(name, tmp_path):
    plan, results = run_short(name, tmp_path, {**SHORT, "run.horizon": 60, "run.checkpoints": 6}, TRIALS)
    check_figures(plan, results, TRIALS)
    trials = results.trials
    silent = trials[trials["protocol"].isin(["ucb1", "dp-ucb-int"])]
    assert (silent["comm_cost"] == 0).all() and (silent["messages_sent"] == 0).all()
    # central UCB sends nothing but pays every upload: one server-agent link per agent and slot (li2022 Eq. 2)
    central = trials[trials["protocol"] == "central-ucb"]
    assert (central["messages_sent"] == 0).all() and (central["links_server_agent"] == central["agents"] * 60).all()
    assert (central["comm_cost"] == 25.0 * central["links_server_agent"]).all()
    flooding = trials[trials["protocol"].str.startswith("dubey2020a")]
    assert (flooding["messages_sent"] > 0).all()
    if name.endswith("loss"):
        lossless = flooding[flooding["network_loss"] == 0.0]
        assert (lossless["messages_dropped"] == 0).all()
        lossy = flooding[flooding["network_loss"] == 0.3]
        assert (lossy["messages_dropped"] > 0).all()
