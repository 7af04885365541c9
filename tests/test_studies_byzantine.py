"""The byzantine trade-off study (scenarios/studies/tradeoff-byzantine.toml, issue 24 item 4).

Planned at both scales (each variant's scenario validated, nothing runs): every cooperative
protocol of the five families is attacked at every fraction of liars with corruption = 1 and
Q = U[0, 1], has a clean twin that differs from it only by the missing ``[adversary]``, and its
family has an isolated floor that sends nothing, on the same bandit and agents. Then the study runs
with 2 trials at its quick scale, the costly families shortened (about 15 CPU s), and each figure's
data is checked (``check_figures``). What is asserted on the results holds by construction, not by
the seed: with corruption = 1 every corruptible message a liar sends is changed, and in every
family each agent sends such a message within these horizons (dubey2020a floods its reward every
step, zhu2021 gossips every tick, li2022 and FedUCB upload at every round or synchronisation,
rio2023 agents vote before leaving), so every attacked trial counts corrupted messages; the clean
runs and the floors count none, and the floors send nothing. No ordering of regrets is asserted:
with 2 short trials none holds reliably (the study's notes give the quick-scale numbers).
"""

from __future__ import annotations

import dataclasses

import pytest

from netsim.experiment import runner, studies
from netsim.experiment.api import run_study
from tests.studycheck import check_figures

NAME = "tradeoff-byzantine"
#: the cooperative protocols of the five families, each attacked by the study (the list of
#: tests/test_no_inert_knob.py::test_byzantine_agents_corrupt_every_family)
ATTACKED = {"dubey2020a": {"dubey2020a-private", "dubey2020a-byzantine"},
            "zhu2021": {"gossip-ucb", "fed-ucb"},
            "li2022": {"cdp-mab", "ddp-mab", "hdp-mab"},
            "dubey2020b": {"feducb", "feducb-p2p"},
            "rio2023": {"mase", "dp-mase", "corrupted-elimination", "feraud2019"}}
#: quick-scale overrides per family for the run below (rio2023 keeps the study's own N = 64)
SHORT = {"dubey2020a": {"network.agents": 10, "network.p": 0.5, "run.horizon": 80},
         "zhu2021": {"run.horizon": 150},
         "li2022": {"run.horizon": 400},
         "dubey2020b": {"run.horizon": 100},
         "rio2023": {}}
TRIALS = 2


def family(point: studies.StudyPoint) -> str:
    return point.scenario.name.split("-")[0]


def setting(point: studies.StudyPoint) -> dict:
    """The resolved scenario without its name, texts and adversary."""
    keep = ("bandit", "network", "protocol", "clock", "run")
    return {k: v for k, v in point.scenario.as_dict().items() if k in keep}


def arms(point: studies.StudyPoint) -> dict:
    """The bandit section, without the range of drawn means when the means are listed."""
    bandit = dict(point.scenario.bandit)
    if isinstance(bandit.get("means"), (list, tuple)):
        bandit.pop("low", None), bandit.pop("high", None)
    return bandit


# ---------------------------------------------------------------------- planning (both scales)
@pytest.mark.parametrize("scale", ["quick", "paper"])
def test_every_family_is_attacked_next_to_its_clean_run_and_floor(scale):
    plan = studies.plan(studies.load(NAME), scale)
    assert plan.trials == {"quick": 2, "paper": 10}[scale]
    gridded = [p for p in plan.points if p.params.get("adversary.byzantine") is not None]
    assert {p.params["adversary.byzantine"] for p in gridded} == {0.1, 0.2, 0.3}
    attacked = {}
    for point in gridded:
        adversary = point.scenario.adversary
        assert adversary["corruption"] == 1.0, point.variant
        assert adversary["distribution"] == {"model": "uniform", "low": 0.0, "high": 1.0}, point.variant
        attacked.setdefault(family(point), set()).add(point.scenario.protocol["name"])
    assert attacked == ATTACKED
    by_name = {p.variant: p for p in plan.points}
    for point in gridded:  # the clean twin: the same run without liars
        clean = by_name[point.variant + ", clean"]
        assert clean.scenario.adversary["byzantine"] == 0 and clean.scenario.adversary["corruption"] == 0
        assert setting(clean) == setting(point), point.variant
    floors = {family(p): p for p in plan.points if p.variant.startswith(("isolated", "INDEPENDENT"))}
    assert set(floors) == set(ATTACKED)
    for point in gridded:  # the floor learns the same bandit with as many agents
        floor = floors[family(point)]
        assert arms(floor) == arms(point), point.variant
        assert floor.scenario.network["agents"] == point.scenario.network["agents"], point.variant
    assert len(plan.points) == len(gridded) + len(gridded) // 3 + len(floors)


def test_paper_scale_is_each_familys_setting():
    agents = {"dubey2020a": 60, "zhu2021": 10, "li2022": 20, "dubey2020b": 20, "rio2023": 256}
    horizon = {"dubey2020a": 1000, "zhu2021": 20000, "li2022": 10000, "dubey2020b": 2000}
    for point in studies.plan(studies.load(NAME), "paper").points:
        scenario = point.scenario
        assert scenario.network["agents"] == agents[family(point)], point.variant
        if family(point) in horizon:  # rio2023 runs until one arm is left
            assert scenario.run["horizon"] == horizon[family(point)], point.variant


# ---------------------------------------------------------------------- running (quick scale, shortened)
def test_liars_corrupt_messages_in_every_family(tmp_path):
    study = studies.load(NAME)
    shortened = tuple(dataclasses.replace(v, scale={**v.scale, "quick": {**v.scale.get("quick", {}),
                                                                       **SHORT[v.scenario.split("-")[0]]}})
                      for v in study.variants)
    plan = studies.plan(dataclasses.replace(study, variants=shortened), "quick", trials=TRIALS)
    with runner.SerialExecutor() as pool:
        results = run_study(plan, tmp_path / NAME, executor=pool, progress=False)
    check_figures(plan, results, TRIALS, statuses=("ok", "unfinished"))  # li2022 at T = 400
    trials = results.trials
    assert set(trials["variant"]) == {v.name for v in study.variants}
    liars = trials["adversary_byzantine"].notna()
    assert set(trials.loc[liars, "protocol"]) == set().union(*ATTACKED.values())
    assert (trials.loc[liars, "messages_corrupted"] > 0).all()
    assert (trials.loc[~liars, "messages_corrupted"] == 0).all()
    floors = trials["variant"].str.startswith(("isolated", "INDEPENDENT"))
    assert (trials.loc[floors, "messages_sent"] == 0).all() and (trials.loc[floors, "comm_cost"] == 0).all()
    assert (trials.loc[~floors, "messages_sent"] > 0).all()
