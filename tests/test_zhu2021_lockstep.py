"""zhu2021 paper mode with trials in lockstep (protocols/zhu2021/lockstep.py) against each trial alone.

The reference is the plain path: each trial run alone by :func:`netsim.engine.sim.run_trial`. A lockstep
group must give every trial exactly that trial's ``trials.csv`` row, agents' rows and time series (``==`` on
every float), for Fed_UCB (private counter, forced pulls) and Gossip_UCB, across the 1024-tick blocks of
link draws, with checkpoints between ticks; and the runner's grouping must not change any table.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from netsim.engine import scenario as S
from netsim.engine.sim import lockstep_key, run_trial, run_trials
from netsim.engine.streams import trial_sequence
from netsim.experiment import runner


def _same(a, b) -> None:
    assert a.row.keys() == b.row.keys()
    for key, value in a.row.items():
        other = b.row[key]
        assert value == other or (isinstance(value, float) and math.isnan(value) and math.isnan(other)), key
    for table in ("agents", "timeseries"):
        left, right = getattr(a, table), getattr(b, table)
        assert left.keys() == right.keys()
        for key in left:
            assert np.array_equal(left[key], right[key]), (table, key)


@pytest.mark.parametrize("name, sets", [
    ("zhu2021-fig2a-eps1", {"run.horizon": 2100.5, "run.checkpoints": 7, "bandit.arms": 3}),
    ("zhu2021-fig2a-epsinf", {"run.horizon": 1500, "run.checkpoints": 3, "bandit.arms": 3}),
    ("zhu2021-fig2b-eps5", {"run.horizon": 1100, "run.checkpoints": 4, "network.agents": 4, "bandit.arms": 3,
                            "bandit.noise": "bernoulli"}),
])
def test_lockstep_trials_equal_each_trial_alone(name, sets):
    scenario = S.load(name, sets)
    units = [(scenario, trial_sequence(scenario.run["seed"], trial), trial) for trial in range(3)]
    together = run_trials(units)
    assert len(together) == 3
    alone = [run_trial(*unit) for unit in units]
    for a, b in zip(alone, together, strict=True):
        _same(a, b)
    assert len({r.row["group_regret"] for r in together}) == 3   # three different trials, not one copied
    if scenario.network["topology"] == "complete":   # (on the short path runs no agent lags by more than N)
        assert all(r.row["forced_pulls"] > 0 for r in together)    # the forced-pull draws were exercised
    assert all((r.row["noise_terms"] > 0) == math.isfinite(scenario.protocol["epsilon"]) for r in together)


def test_only_paper_mode_with_the_unit_tick_runs_in_lockstep():
    paper = S.load("zhu2021-fig2a-eps1")
    assert lockstep_key(paper) is not None
    assert lockstep_key(S.load("zhu2021-fig2a-eps1", {"run.seed": 9})) == lockstep_key(paper)
    assert lockstep_key(S.load("zhu2021-fig2a-eps2")) != lockstep_key(paper)
    assert lockstep_key(S.load("zhu2021-fig2a-eps1", {"clock.period": 0.5})) is None
    assert lockstep_key(S.load("zhu2021-tradeoff-fed-ucb")) is None           # realistic mode
    assert lockstep_key(S.load("zhu2021-fig2a-eps1", {"run.watchdog": 50.0})) is None


def test_runner_groups_give_the_tables_of_single_trials():
    scenario = S.load("zhu2021-fig2a-eps2", {"run.horizon": 400, "run.checkpoints": 4, "run.trials": 5})
    units = [runner.Unit(scenario, trial) for trial in range(5)]
    assert runner.lockstep_groups(units, 2) == [[0, 1, 2], [3, 4]]   # even groups of at most ceil(5 / 2)
    assert runner.lockstep_groups(units, 1) == [[0, 1, 2, 3, 4]]
    grouped = runner.execute(units, executor="process", jobs=2, progress=False)
    for unit, result in zip(units, grouped, strict=True):
        _same(run_trial(unit.scenario, unit.seed_sequence(), unit.trial), result)
