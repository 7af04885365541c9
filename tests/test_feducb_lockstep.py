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


def test_a_group_is_one_seed_sequence_and_one_bandit():
    """FedUCB trials share only the draws of one seed sequence and one bandit (lockstep_scope "seed"): a group
    holds the units of one seed sequence with the same agents and bandit, never two seed sequences."""
    sc = S.load("dubey2020b-fig1a-sync", {"run.horizon": 10})
    units = [runner.Unit(sc, t, p) for p in ((), (1,)) for t in (0, 1)] + [runner.Unit(sc, 0)]
    for jobs in (1, 2):
        assert runner.lockstep_groups(units, jobs) == [[0, 4], [1], [2], [3]]
    other_d = S.load("dubey2020b-fig1a-sync", {"run.horizon": 10, "bandit.dimension": 4})
    more = S.load("dubey2020b-fig1a-sync", {"run.horizon": 10, "network.agents": 3})
    sets = [runner.Unit(scenario, t) for t in range(3) for scenario in (sc, other_d, sc, more)]
    assert runner.lockstep_groups(sets, 2) == [[0, 2], [1], [3], [4, 6], [5], [7], [8, 10], [9], [11]]


def test_trials_of_other_seeds_share_a_group_when_the_protocol_steps_them_along_an_axis():
    """lockstep_scope "trials" (zhu2021): whole seed sequences are put together up to the group size."""
    sc = S.load("zhu2021-fig2a-eps1")
    sets = [runner.Unit(sc, t) for t in range(4) for _ in range(3)]  # 4 seeds x 3 variants, 2 jobs: whole seeds
    assert runner.lockstep_groups(sets, 2) == [[0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11]]
    units = [runner.Unit(sc, t, p) for p in ((), (1,)) for t in (0, 1)] + [runner.Unit(sc, 0)]
    assert runner.lockstep_groups(units, 1) == [[0, 4, 1, 2, 3]]
    assert runner.lockstep_groups(units, 2) == [[0, 4, 1], [2, 3]]  # groups of at most 3, a seed kept whole


@pytest.mark.parametrize("jobs", [1, 2])
def test_runner_groups_give_the_results_of_single_units(jobs):
    scenarios = _variants()[:4]
    units = [runner.Unit(sc, t) for sc in scenarios for t in (0, 1)]
    results = dict(runner.iter_results(units, executor="process", jobs=jobs))
    for index, unit in enumerate(units):
        _same(results[index], unit.run())


def test_paper_mode_trials_step_on_stacks_equal_to_alone(monkeypatch):
    """The stacked driver (protocols.feducb.lockstep) takes the paper-mode trials that draw alike, by matrix
    layout and horizon: budgets and O(MT) at M = 3 together, eps = inf (no W) and a shorter run apart; M = 4
    has a key of its own and runs alone (no stack); a trial with delays steps on its own events. Each gets its
    results alone, bit for bit."""
    from protocols.feducb import lockstep

    sizes: list[int] = []
    made = lockstep._Stack.__init__

    def spy(self, protocols):
        sizes.append(len(protocols))
        made(self, protocols)

    monkeypatch.setattr(lockstep._Stack, "__init__", spy)
    base = {"run.horizon": 50, "run.checkpoints": 5, "bandit.arms": 9, "bandit.dimension": 3, "network.agents": 3}
    sets = [{"protocol.epsilon": 300.0, "protocol.threshold": 2.0}, {"protocol.epsilon": 3000.0},
            {"protocol.communication": "mt", "protocol.threshold": "auto"},
            {"protocol.epsilon": float("inf")}, {"network.agents": 4}, {"run.horizon": 30, "run.checkpoints": 3},
            {"network.delay": {"model": "constant", "value": 0.5}}]
    scenarios = [S.load("dubey2020b-fig1a-sync", {**base, **extra}) for extra in sets]
    alone = [run_trial(sc, trial_sequence(11, 0), 0) for sc in scenarios]
    together = run_trials([(sc, trial_sequence(11, 0), 0) for sc in scenarios])
    assert sorted(sizes) == [1, 1, 3]
    for a, b in zip(alone, together, strict=True):
        _same(a, b)
    assert alone[2].row["rounds"] == 50 and 1 < alone[0].row["rounds"] < 50  # rounds ran through the stacked states


def test_only_paper_mode_is_instant():
    from netsim.engine.sim import Simulation
    from protocols.feducb.lockstep import instant

    base = {"run.horizon": 5, "bandit.arms": 4, "bandit.dimension": 2, "network.agents": 2}

    def sim(**extra):
        return Simulation(S.load("dubey2020b-fig1a-sync", {**base, **extra}), trial_sequence(1, 0))

    assert instant(sim())
    assert not instant(sim(**{"network.delay": {"model": "exponential", "mean": 0.1}}))
    assert not instant(sim(**{"network.delay": {"model": "constant", "value": 1.0}}))
    assert not instant(sim(**{"network.loss": 0.1}))
    assert not instant(sim(**{"faults.duplication": 0.1}))
    assert not instant(sim(**{"clock.jitter": 0.2}))
    assert not instant(sim(**{"clock.period": 0.5}))


def test_stacked_choice_and_update_are_each_trials():
    """LinUCBState.stack + choose on shared contexts against every trial's own state, bit for bit."""
    from protocols.feducb.linucb import LinUCBState

    rng = np.random.default_rng(8)
    m, d, k, trials = 4, 3, 7, 3
    own = [LinUCBState(m, d, s0=1.0 + b, shift_w=2.0) for b in range(trials)]
    for st in own:
        for _ in range(5):
            st.update(rng.normal(size=(m, d)), rng.random(m))
    plain = [LinUCBState(m, d, s0=1.0, shift_w=2.0) for _ in range(trials)]
    for p, st in zip(plain, own, strict=True):
        for name in ("S", "s", "Q", "u_tilde", "logdet_s", "dt", "inv", "logdet"):
            setattr(p, name, getattr(st, name).copy())
    group = LinUCBState.stack(own)
    contexts = rng.normal(size=(d, m, k)).transpose(1, 2, 0)  # as the gapped contexts come
    beta = rng.random(trials * m) * 3
    arms = group.choose(contexts, beta)
    for b, p in enumerate(plain):
        assert np.array_equal(arms[b * m:(b + 1) * m], p.choose(contexts, beta[b * m:(b + 1) * m]))
    x, y = rng.normal(size=(trials * m, d)), rng.random(trials * m)
    group.update(x, y)
    for b, (p, st) in enumerate(zip(plain, own, strict=True)):
        p.update(x[b * m:(b + 1) * m], y[b * m:(b + 1) * m])
        for name in ("Q", "u_tilde", "inv", "logdet"):
            assert np.array_equal(getattr(p, name), getattr(st, name)), name  # the trial's view of the stack
    own[1].synchronise(np.arange(m), own[1].S[0] * 2, own[1].s[0])  # a trial's own handler writes the stack
    assert np.array_equal(group.S[m:2 * m], own[1].S) and not np.array_equal(group.S[:m], own[1].S)


def test_pull_each_booked_later_is_pull_each():
    from netsim.bandits.linear import LinearBandit
    from netsim.engine.streams import Streams

    options = S.load("dubey2020b-fig1a-sync").bandit

    def bandit():
        b = LinearBandit(options, 5, Streams(np.random.SeedSequence(4)))
        b.observe(np.arange(5))
        return b

    now, later = bandit(), bandit()
    arms = np.array([0, 3, 1, 99, 7])
    got = later.pull_each(arms, book=False)
    assert not later.regret.any() and not later.pulls.any()
    later.book_each(arms)
    assert np.array_equal(now.pull_each(arms), got)
    assert np.array_equal(now.regret, later.regret) and np.array_equal(now.pulls, later.pulls)
