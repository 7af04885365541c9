"""Lockstep runs (several trials stepped together by their protocol): the engine's generic pieces.

Each piece is checked against the plain path it replaces: grouped block draws against one call per
draw, bulk link books against per-slot marks, the bandit's lockstep rewards and books against
``pull_each``. The protocol side (zhu2021) is checked in ``tests/test_zhu2021_lockstep.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from netsim.bandits import bandits
from netsim.engine import scenario as S
from netsim.engine.metrics import Metrics
from netsim.engine.streams import GroupedDraws, Streams
from netsim.experiment import runner


def _generators(seed: int, count: int) -> list[np.random.Generator]:
    return [np.random.default_rng([seed, g]) for g in range(count)]


@pytest.mark.parametrize("law", ["random", "laplace"])
def test_grouped_draws_give_each_group_its_one_call_per_draw_values(law):
    draw = (lambda g, k: g.random(k)) if law == "random" else (lambda g, k: g.laplace(0.0, 2.5, k))
    pools = GroupedDraws(_generators(7, 3), draw, block=5)
    reference = _generators(7, 3)
    plan = np.random.default_rng(1)
    total = np.zeros(3, dtype=np.int64)
    for _ in range(60):
        counts = plan.integers(0, 4, size=3)
        if plan.random() < 0.05:
            counts[1] = 13  # more than a block at once
        groups = np.repeat(np.arange(3), counts)
        got = pools.take(groups)
        want = [float(draw(reference[g], 1)[0]) for g in groups]
        assert got.tolist() == want
        total += counts
    assert pools.taken.tolist() == total.tolist()


def test_grouped_rows_are_what_take_gives_each_group():
    """take_rows(groups, count) mixed with take(): each group's next values, in any group order, past block ends,
    with groups in step (one slice) and out of step."""
    draw = lambda g, k: g.standard_normal(k)  # noqa: E731
    pools = GroupedDraws(_generators(5, 4), draw, block=7)
    reference = _generators(5, 4)
    plan = np.random.default_rng(2)
    for step in range(40):
        if step % 5 == 4:
            groups = np.repeat(np.arange(4), plan.integers(0, 3, size=4))
            got = pools.take(groups)
            assert got.tolist() == [float(draw(reference[g], 1)[0]) for g in groups]
            continue
        groups = [np.arange(4), np.array([3, 1]), np.array([2])][step % 3]
        count = int(plan.integers(1, 10))
        got = pools.take_rows(groups, count)
        assert got.shape == (len(groups), count)
        for row, g in zip(got, groups, strict=True):
            assert row.tolist() == draw(reference[g], count).tolist()


def test_edges_built_books_what_per_slot_marks_book():
    u, v = np.array([0, 0, 1, 2]), np.array([1, 2, 2, 3])   # node 3 is a server
    bulk, plain = (Metrics(4, 3, 1.0, 25.0) for _ in range(2))
    for m in (bulk, plain):
        m.set_edges(u, v)
        m.edges_used([1], 0.0)
    bulk.edges_built(np.array([0, 1, 2, 3]), 7)
    for slot in range(1, 8):
        plain.edges_used([0, 1, 2, 3], float(slot))
    assert (bulk.links_agent_agent, bulk.links_server_agent) == (plain.links_agent_agent, plain.links_server_agent)
    assert bulk.node_links.tolist() == plain.node_links.tolist()
    assert bulk.comm_cost == plain.comm_cost == 7 * 3 + 7 * 25 + 1


@pytest.mark.parametrize("kind", ["heterogeneous", "bernoulli"])
def test_each_rewards_and_settle_each_equal_pull_each(kind):
    options = S.load("zhu2021-fig2a-eps1").bandit if kind == "heterogeneous" else S.load("quickstart").bandit
    make = bandits.get(options["kind"], key="bandit.kind")
    lockstep, plain = (make(options, 3, Streams(np.random.SeedSequence(5))) for _ in range(2))
    m = plain.num_arms
    choices = np.random.default_rng(2)
    for steps in (3, 300, 1, 700):          # across the bandit's 256-uniform buffers
        arms = choices.integers(m, size=(steps, 3))
        table = lockstep.each_rewards(steps)
        got = np.take_along_axis(table, arms[:, :, None], axis=2)[:, :, 0]
        want = np.array([plain.pull_each(row) for row in arms])
        lockstep.settle_each(arms)
        assert got.tolist() == want.tolist()
        assert lockstep.regret.tolist() == plain.regret.tolist()
        assert lockstep.pulls.tolist() == plain.pulls.tolist()
    zeros = np.zeros(3, dtype=np.int64)
    assert lockstep.pull_each(zeros).tolist() == plain.pull_each(zeros).tolist()


def test_units_of_protocols_without_lockstep_run_alone():
    scenario = S.load("quickstart")
    units = [runner.Unit(scenario, trial) for trial in range(4)]
    assert runner.lockstep_groups(units, 2) == [[0], [1], [2], [3]]
