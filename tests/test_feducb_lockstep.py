"""FedUCB trials run in lockstep (CentralizedFedUCB.lockstep through netsim.engine.sim.run_trials and the
runner's lockstep groups) give exactly the results of the same trials run alone; the context draws they
share (netsim.engine.streams.SharedDraws) are exact."""

from __future__ import annotations

import numpy as np
import pytest

from netsim.engine import scenario as S
from netsim.engine.sim import run_trial, run_trials
from netsim.engine.streams import SharedDraws, Streams, trial_sequence
from netsim.experiment import runner


def _same(a, b) -> None:
    assert a.row == b.row
    assert a.info == b.info
    for part in ("agents", "timeseries"):
        left, right = getattr(a, part), getattr(b, part)
        assert left.keys() == right.keys()
        for key in left:
            assert np.array_equal(left[key], right[key]), (part, key)


def _variants() -> list[S.Scenario]:
    """FedUCB variants of one seed: three budgets at M = 3 (they share every context draw), one at M = 4
    (other draws), a non-private one, one synchronising every trial (Fig. 1(B)'s O(MT): a round of 4 M
    messages each tick, requests and uploads sent with send_each) and one with delays and jittered clocks
    (other instants)."""
    base = {"run.horizon": 60, "run.checkpoints": 4, "bandit.arms": 9, "bandit.dimension": 3}
    sets = [{"protocol.epsilon": e} for e in (100.0, 1000.0, 10000.0)]
    sets += [{"network.agents": 4}, {"protocol.epsilon": float("inf")}, {"protocol.communication": "mt",
                                                                          "protocol.threshold": "auto"},
             {"network.delay": {"model": "exponential", "mean": 0.3}, "clock.jitter": 0.5}]
    return [S.load("dubey2020b-fig1a-sync", {**base, "network.agents": 3, **extra}) for extra in sets]


def test_lockstep_equals_each_trial_alone(monkeypatch):
    made: list[SharedDraws] = []

    class Recorded(SharedDraws):
        def __init__(self):
            super().__init__()
            made.append(self)

    monkeypatch.setattr("protocols.feducb.centralized.SharedDraws", Recorded)
    scenarios = _variants()
    for trial in (0, 1):
        alone = [run_trial(sc, trial_sequence(7, trial), trial) for sc in scenarios]
        together = run_trials([(sc, trial_sequence(7, trial), trial) for sc in scenarios])
        # of the five one-clock variants at M = 3 (three budgets, eps = inf, O(MT)), four took every context draw
        # of the 60 ticks from the first; M = 4 and the jittered clocks (one agent a draw) drew their own
        assert made[-1].hits == 4 * 60
        for a, b in zip(alone, together, strict=True):
            _same(a, b)
    # the private variants really differ (so the equality above is not vacuous)
    assert len({r.row["mean_agent_regret"] for r in alone[:3]}) == 3
    assert alone[5].row["rounds"] == 60  # the O(MT) variant synchronised every trial


def test_shared_draw_is_the_draw_and_moves_the_generator():
    shared = SharedDraws()
    def normals(rng, n):
        return rng.normal(size=n)
    a, b = (Streams(np.random.SeedSequence(3), shared).for_("x") for _ in range(2))
    first = shared.draw(a, normals, (5,))
    second = shared.draw(b, normals, (5,))
    assert second is first and shared.hits == 1 and not first.flags.writeable
    reference = np.random.Generator(np.random.PCG64(Streams(np.random.SeedSequence(3)).sequence("x")))
    assert np.array_equal(first, reference.normal(size=5))
    assert b.random() == a.random() == reference.random()  # b was moved past the draw it did not make
    other = shared.draw(b, normals, (4,))  # other arguments: drawn anew
    assert shared.misses == 2 and len(other) == 4
    shared.forget()
    c = Streams(np.random.SeedSequence(3), shared).for_("x")
    shared.draw(c, normals, (5,))
    assert shared.misses == 3  # forgotten draws are made again


def test_units_of_one_seed_sequence_are_grouped_side_by_side():
    sc = S.load("dubey2020b-fig1a-sync", {"run.horizon": 10})
    units = [runner.Unit(sc, t, p) for p in ((), (1,)) for t in (0, 1)] + [runner.Unit(sc, 0)]
    assert runner.lockstep_groups(units, 1) == [[0, 4, 1, 2, 3]]
    assert runner.lockstep_groups(units, 2) == [[0, 4, 1], [2, 3]]  # groups of at most 3, a seed kept whole
    sets = [runner.Unit(sc, t) for t in range(4) for _ in range(3)]  # 4 seeds x 3 variants, 2 jobs: whole seeds
    assert runner.lockstep_groups(sets, 2) == [[0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11]]


@pytest.mark.parametrize("jobs", [1, 2])
def test_runner_groups_give_the_results_of_single_units(jobs):
    scenarios = _variants()[:4]
    units = [runner.Unit(sc, t) for sc in scenarios for t in (0, 1)]
    results = dict(runner.iter_results(units, executor="process", jobs=jobs))
    for index, unit in enumerate(units):
        _same(results[index], unit.run())
