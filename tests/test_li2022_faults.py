"""CDP-MAB, DDP-MAB and HDP-MAB under duplication, reordering and crashes (issue 15; rules in docs/faults.md)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.comm.handshake import ids
from netsim.engine.sim import Simulation
from netsim.engine.streams import trial_sequence
from protocols.li2022 import epochs as R
from protocols.li2022.play import SlotRuns
from tests.test_li2022 import scenario

ARMS = {"kind": "bernoulli", "arms": 4, "means": [0.9, 0.8, 0.7, 0.6]}
# (protocol, extra scenario arguments): the three algorithms, SAC by flood and by tree
SETTINGS = {
    "cdp": ("cdp-mab", {}),
    "ddp": ("ddp-mab", {"topology": "ring"}),
    "hdp-flood": ("hdp-mab", {"topology": "ring", "network": {"components": [4, 4]}}),
    "hdp-tree": ("hdp-mab", {"topology": "path", "network": {"components": [4, 4]}, "sac_routing": "tree"}),
}


def build(name, *, agents=8, horizon=3000.0, seed=1, faults=None, network=None, **extra):
    protocol, base = SETTINGS[name]
    base = {**base, **extra}
    net = {**base.pop("network", {}), **(network or {})}
    return scenario(protocol, agents=agents, horizon=horizon, seed=seed, bandit=ARMS, network=net, faults=faults,
                    **base)


def simulate(sc, trial=0, probes=()):
    """Run one trial; ``probes`` are times at which the agents' pull counts are recorded (after the
    crashes and restarts of that instant and the protocol's reaction to them)."""
    sim = Simulation(sc, trial_sequence(sc.run["seed"], trial), trial=trial)
    seen = {}
    for t in probes:
        sim.call_at(t, lambda t=t: seen.__setitem__(t, sim.bandit.pulls.copy()))
    row = sim.run().row
    return sim, row, seen


def check_books(sim, row):
    """sent = delivered + dropped + in flight, overall and for every kind; nothing negative."""
    assert row["messages_sent"] == row["messages_delivered"] + row["messages_dropped"] + row["messages_in_flight"]
    assert sum(c.in_flight for c in sim.metrics.messages.values()) == sim.network.in_flight
    assert all(c.in_flight >= 0 for c in sim.metrics.messages.values())


def slot_starts(start, end, horizon):
    """Number of unit slot starts k (integers) with start <= k < end, k < horizon."""
    return len([k for k in range(int(horizon)) if start <= k < end])


# ---------------------------------------------------------------------- duplication
@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_duplicates_change_nothing_in_paper_mode(name):
    """Paper mode (constant delays): a copy arrives with its original and is taken as the same
    message (records are named and immutable; uploads are kept once per sender and round), so
    regret, rounds, t_delay and the identified arm are exactly those of the duplicate-free run."""
    copies = 0
    for seed in (1, 2, 3):
        _, clean, _ = simulate(build(name, seed=seed))
        sim, dup, _ = simulate(build(name, seed=seed, faults={"duplication": 0.2}))
        copies += dup["duplicated"]
        for key in ("group_regret", "rounds_completed", "t_delay_total", "identified_arm", "comm_cost"):
            assert dup[key] == clean[key], (seed, key)
        check_books(sim, dup)
    assert copies > 0


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_duplicates_with_random_delays_change_only_the_timing(name):
    """Exponential delays: a copy drawn with a shorter delay may overtake its original, so a round
    can end a slot earlier; the records aggregated are the same, hence the same elimination in
    every round and the same identified arm. The regret can only move through the exploitation
    slots: by at most M * max gap * 2 * sum_r |t_delay_r(dup) - t_delay_r(clean)| (the extra or missing
    slots of every round, and as many slots shifted past the horizon)."""
    net = {"delay": {"model": "exponential", "mean": 0.3}, "server_delay": {"model": "exponential", "mean": 0.3}}
    gap = max(ARMS["means"]) - min(ARMS["means"])
    copies = 0
    for seed in (1, 2, 3, 4):
        clean_sim, clean, _ = simulate(build(name, seed=seed, network=net))
        sim, dup, _ = simulate(build(name, seed=seed, network=net, faults={"duplication": 0.2}))
        copies += dup["duplicated"]
        check_books(sim, dup)
        assert [h[1].tolist() for h in sim.protocol.history] == [h[1].tolist() for h in clean_sim.protocol.history]
        assert dup["identified_arm"] == clean["identified_arm"]
        moved = sum(abs(a - b) for a, b in zip(sim.protocol.t_delays, clean_sim.protocol.t_delays))
        assert abs(dup["group_regret"] - clean["group_regret"]) <= 8 * gap * 2 * moved + 1e-9
    assert copies > 0


def test_reordered_messages_of_an_older_round_are_ignored():
    """Held-back messages (Exp(mean 30) extra delay) can arrive rounds late: each round has its own
    tag, so a late record never enters a later round; every round still aggregates all M records,
    and the first round (the epoch-1 means, before any exploitation) equals the clean run's."""
    sc = build("ddp", faults={"reorder": 0.3, "reorder_delay": {"model": "exponential", "mean": 30.0}})
    sim = Simulation(sc, trial_sequence(1, 0))
    sizes = []
    synchronised = sim.protocol._synchronised

    def record():
        sizes.append(len(sim.protocol.flood.common()))
        synchronised()

    sim.protocol._synchronised = record
    row = sim.run().row
    clean_sim, clean, _ = simulate(build("ddp"))
    assert row["reordered"] > 0 and row["rounds_completed"] >= 2
    assert sizes == [8] * row["rounds_completed"]
    np.testing.assert_array_equal(sim.protocol.history[0][2], clean_sim.protocol.history[0][2])
    assert sum(sim.protocol.t_delays) > sum(clean_sim.protocol.t_delays)  # the rounds waited for late copies
    check_books(sim, row)


# ---------------------------------------------------------------------- crashes of agents
@pytest.mark.parametrize("state", ["kept", "lost"])
@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_agent_crash_and_restart(name, state):
    """Agent 1 is down during [600, 1500): the trial ends ok, the books balance, agent 1 pulls exactly
    once per slot while up (T minus the 900 slots it was down) and not once while down; the others
    pull every slot. The crash falls in epoch 2's exploration and the restart in epoch 3's: agent 1
    privatises neither, so it ends with the S(1) samples of epoch 1 (kept) or none (lost)."""
    start, end, horizon = 600.0, 1500.0, 3000.0
    faults = {"crashes": [{"node": 1, "start": start, "end": end}], "state": state}
    sim, row, seen = simulate(build(name, faults=faults), probes=(start, end - 0.5))
    assert row["status"] == "ok"
    check_books(sim, row)
    assert seen[start][1] == seen[end - 0.5][1]
    pulls = sim.bandit.pulls
    assert pulls[1] == horizon - slot_starts(start, end, horizon)
    assert (np.delete(pulls, 1) == horizon).all()
    assert row["rounds_completed"] >= 2
    s1 = sim.protocol.schedule.plan(1, 4, 0).samples
    assert sim.protocol.state.counts[1] == (s1 if state == "kept" else 0)


def round_ends(sim):
    """Record the time of every round's end (wraps the protocol's finish_round)."""
    ends = []
    finish = sim.protocol.finish_round

    def record(*args, **kwargs):
        ends.append(sim.now)
        finish(*args, **kwargs)

    sim.protocol.finish_round = record
    return ends


@pytest.mark.parametrize("name", ["cdp", "hdp-flood", "hdp-tree"])
@pytest.mark.parametrize("state", ["kept", "lost"])
def test_server_crash_stalls_rounds_until_restart(name, state):
    """The server (node M) is down during [150, 1200), across the end of epoch 1's exploration:
    no round ends while it is down (uploads to it are dropped and repeated), the stalled round ends
    after its restart with every record, and every agent pulls every slot meanwhile."""
    agents, start, end = 8, 150.0, 1200.0
    clean_sim = Simulation(build(name), trial_sequence(1, 0))
    clean_ends = round_ends(clean_sim)
    clean_sim.run()
    assert start < clean_ends[0] < end  # the first round falls in the outage
    faults = {"crashes": [{"node": agents, "start": start, "end": end}], "state": state}
    sim = Simulation(build(name, faults=faults), trial_sequence(1, 0))
    ends = round_ends(sim)
    row = sim.run().row
    assert row["status"] == "ok"
    check_books(sim, row)
    assert (sim.bandit.pulls == 3000).all()
    assert not [t for t in ends if start <= t < end]
    assert ends[0] >= end and row["rounds_completed"] >= 2
    assert sim.metrics.messages[f"{name[:3]}-upload"].dropped > 0
    # the stalled round aggregated the same records as the clean run's first round
    np.testing.assert_array_equal(sim.protocol.history[0][2], clean_sim.protocol.history[0][2])


def test_lost_server_recalls_the_uploads_it_had():
    """CDP, server links of delay 1 except agent 7's (delay 6). Round 1 starts at t0: the uploads of
    agents 0-6 arrive at t0 + 1; the server crashes at t0 + 2 and restarts at t0 + 3 without them; it
    recalls those 7 uploads at once, and agent 7's too, whose wait (rto_initial = 3 slots, no round
    trip measured yet on that pair) expires at t0 + 3, just after the restart; agent 7's first upload
    arrives at t0 + 6, the recalled ones at t0 + 5, and the round ends at t0 + 6 with the same
    aggregate as without the crash."""
    links = [{"u": 7, "v": 8, "delay": {"model": "constant", "value": 6.0}}]
    net = {"server_delay": {"model": "constant", "value": 1.0}, "links": links}
    clean_sim = Simulation(build("cdp", network=net), trial_sequence(1, 0))
    clean_ends = round_ends(clean_sim)
    clean_sim.run()
    t0 = clean_ends[0] - 6.0
    faults = {"crashes": [{"node": 8, "start": t0 + 2, "end": t0 + 3}], "state": "lost"}
    sim = Simulation(build("cdp", network=net, faults=faults), trial_sequence(1, 0))
    ends = round_ends(sim)
    row = sim.run().row
    assert row["status"] == "ok"
    check_books(sim, row)
    assert row["sent_cdp-recall"] == 8
    assert ends[0] == pytest.approx(t0 + 6.0)
    np.testing.assert_array_equal(sim.protocol.history[0][2], clean_sim.protocol.history[0][2])


def test_ddp_crash_that_cuts_a_path():
    """Path 0-1-2-3-4-5: agent 2 crashes during the first GIS round and never comes back. The two
    sides cannot reach each other: the round ends when each side holds what it can get, and every
    survivor aggregates the records all survivors hold (one common set, so one common active set).
    In the later rounds the sides share no record at all: nothing is eliminated any more, so the
    horizon comes before the last epoch and the trial ends ``unfinished`` (not failed: it ran)."""
    plain = Simulation(build("ddp", agents=6, topology="path", horizon=4000.0), trial_sequence(1, 0))
    first = round_ends(plain)
    plain.run()
    t0 = first[0] - plain.protocol.t_delays[0]  # the first round's start
    faults = {"crashes": [{"node": 2, "start": t0 + 1.5, "end": math.inf}]}
    sim = Simulation(build("ddp", agents=6, topology="path", horizon=4000.0, faults=faults), trial_sequence(1, 0))
    common = []
    synchronised = sim.protocol._synchronised  # bound before start(): the flood calls the wrapper

    def record():
        flood = sim.protocol.flood
        held = [set(ids(flood.have[i]).tolist()) for i in (0, 1, 3, 4, 5)]
        common.append(set.intersection(*held))
        assert set(flood.common().tolist()) == common[-1]
        synchronised()

    sim.protocol._synchronised = record
    row = sim.run().row
    assert row["status"] == "unfinished" and "before the last epoch" in row["failure"]
    check_books(sim, row)
    assert row["rounds_completed"] >= 2
    assert 0 < len(common[0]) < 6
    assert all(c == set() for c in common[1:])
    history = sim.protocol.history
    assert all(h[1].tolist() == history[0][1].tolist() for h in history[1:])


# ---------------------------------------------------------------------- pooled formulas
@settings(max_examples=60, deadline=None)
@given(st.integers(1, 30), st.integers(1, 20), st.integers(1, 10**6), st.integers(0, 2**31))
def test_pooled_mean_of_equal_counts_is_the_plain_mean_bit_for_bit(rows, arms, count, seed):
    values = np.random.default_rng(seed).random((rows, arms))
    np.testing.assert_array_equal(R.pooled_mean(values, np.full(rows, count)), values.mean(axis=0))


def test_pooled_mean_weights_by_sample_counts():
    values = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])
    got = R.pooled_mean(values, np.array([30, 10, 60]))
    np.testing.assert_allclose(got, [(30 + 30) / 100, (10 + 30) / 100])


@pytest.mark.parametrize("epsilon", [0.5, math.inf])
def test_pooled_radius_is_line5_when_every_record_arrived(epsilon):
    r, active, arms, horizon, n, s = 3, 7, 20, 1e4, 5, 40
    full = R.confidence_radius(r, active, arms, horizon, n, epsilon, s)
    assert R.pooled_radius(r, active, arms, horizon, n, epsilon, total=n * s, records=n) == pytest.approx(full)
    # fewer records: a wider radius, by hand
    c = math.sqrt(math.log(8 * active * r * r * horizon) / (2 * 3 * s))
    h = 0.0 if math.isinf(epsilon) else r * math.sqrt(8 * math.log(8 * arms * r * r * horizon)) * math.sqrt(3) / (
        n * epsilon * 3 * s)
    assert R.pooled_radius(r, active, arms, horizon, n, epsilon, total=3 * s, records=3) == pytest.approx(c + h)
    assert c + h > full


def test_eq6_with_own_counts():
    """An agent that missed epoch 2 keeps ybar(1) and n = S(1); in epoch 3 it folds the new mean in
    with weights n / (n + s) and s / (n + s)."""
    state = R.PrivateMeans(2, 1)
    active = np.ones(1, dtype=bool)
    plan1 = R.EpochPlan(1, 0.5, 4.0, 4, 4, 0.1, 0.0)
    plan2 = R.EpochPlan(2, 0.25, 12.0, 12, 8, 0.1, 0.0)
    plan3 = R.EpochPlan(3, 0.125, 40.0, 40, 28, 0.1, 0.0)
    state.update(np.array([[2.0], [1.0]]), active, plan1, np.zeros((2, 1)))
    state.update(np.array([[4.0], [0.0]]), active, plan2, np.zeros((2, 1)), rows=np.array([True, False]),
                 pulled=np.array([[8.0], [3.0]]))
    assert state.counts.tolist() == [12, 4]
    assert state.private[1, 0] == pytest.approx(0.25)
    assert state.own_counts[:, 0].tolist() == [12.0, 7.0]
    state.update(np.array([[14.0], [7.0]]), active, plan3, np.zeros((2, 1)))
    assert state.counts.tolist() == [40, 32]
    assert state.private[0, 0] == pytest.approx((2 + 4 + 14) / 40)
    assert state.private[1, 0] == pytest.approx(4 / 32 * 0.25 + 28 / 32 * 0.25)


# ---------------------------------------------------------------------- runs of pulls
class _Clock:
    """Minimal stand-in of the simulation for SlotRuns: a heap of (time, priority, order, callback)."""

    def __init__(self, agents, horizon):
        import heapq

        self.heapq = heapq
        self.num_agents = agents
        self.horizon = horizon
        self.now = 0.0
        self.events = []
        self.order = 0
        self.pulls = np.zeros(agents, dtype=np.int64)
        self.bandit = self

    def call_at(self, t, fn, priority=1):
        self.order += 1
        self.heapq.heappush(self.events, (t, priority, self.order, fn))

    def pull_many(self, agents, arms, n):
        np.add.at(self.pulls, agents, np.broadcast_to(n, np.shape(agents)))
        return np.zeros(len(agents))

    def run(self):
        while self.events:
            t, _, _, fn = self.heapq.heappop(self.events)
            self.now = t
            fn()


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 5), st.lists(st.tuples(st.integers(0, 4), st.integers(0, 480), st.integers(1, 240)), max_size=6),
       st.lists(st.integers(1, 20), min_size=1, max_size=5))
def test_slot_runs_match_slot_by_slot_play(agents, crashes, lengths):
    """Against an independent reference: an agent pulls at slot start k iff it is up at k (a crash
    or restart at k happens first). Crash intervals [s, s + d) may overlap (the node is down while
    any covers it). Times are multiples of 1/8: either exactly at a slot start or clearly inside a
    slot (SlotRuns reads an instant within 1e-9 of a slot start as that start, a float tolerance)."""
    crashes = [(a, s / 8, d / 8) for a, s, d in crashes]
    horizon = 70.0
    clock = _Clock(agents, horizon)
    up = np.ones(agents, dtype=bool)
    runs = SlotRuns(clock, 1.0, [25.0, 50.0], up)
    t = 0
    for n in lengths:
        runs.play(float(t), n, np.zeros(agents, dtype=np.int64))
        t += n
    intervals = [(a % agents, s, s + d) for a, s, d in crashes]
    down = np.zeros(agents, dtype=np.int64)
    for agent, s, e in intervals:  # crash/restart events before the pulls of their instant (priority 0)
        def go(agent=agent, step=+1):
            down[agent] += step
            if step > 0 and down[agent] == 1:
                up[agent] = False
                runs.crashed(agent)
            elif step < 0 and down[agent] == 0:
                up[agent] = True
                runs.restarted(agent)
        clock.call_at(s, go, priority=0)
        clock.call_at(e, lambda agent=agent: go(agent, -1), priority=0)
    clock.run()
    for agent in range(agents):
        expect = 0
        for k in range(min(t, int(horizon))):
            if not any(a == agent and s <= k < e for a, s, e in intervals):
                expect += 1
        assert clock.pulls[agent] == expect



def test_a_round_with_a_missing_record_pools_what_arrived():
    """CDP: agent 1 is down during [100, 150), inside epoch 1's exploration, so it does not
    privatise epoch 1: round 1 aggregates the 7 other records (their plain mean) and eliminates
    with C(1) recomputed for 7 records of S(1) samples; in round 2 agent 1's record holds only
    epoch 2's samples and the aggregate is the pooled mean weighted by the sample counts."""
    faults = {"crashes": [{"node": 1, "start": 100.0, "end": 150.0}]}
    sim = Simulation(build("cdp", faults=faults), trial_sequence(1, 0))
    records = []
    collected = sim.protocol._collected

    def spy(got):
        records.append({a: (v.copy(), n) for a, (v, n) in got.items()})
        collected(got)

    sim.protocol._collected = spy
    sim.run()
    proto, schedule = sim.protocol, sim.protocol.schedule
    s1 = schedule.plan(1, 4, 0).samples
    first, second = records[0], records[1]
    assert first[1][1] == 0 and all(first[a][1] == s1 for a in first if a != 1)
    others = np.array([first[a][0] for a in sorted(first) if a != 1])
    r1, active1, aggregate1 = proto.history[0]
    np.testing.assert_array_equal(aggregate1, others.mean(axis=0))
    radius = R.pooled_radius(1, 4, 4, schedule.horizon, 8, 1.0, total=7 * s1, records=7)
    assert active1.tolist() == R.eliminate(np.ones(4, dtype=bool), aggregate1, radius).tolist()
    assert radius > schedule.plan(1, 4, 0).radius
    s2 = schedule.plan(2, int(active1.sum()), s1).samples
    assert second[1][1] == s2 - s1 and all(second[a][1] == s2 for a in second if a != 1)
    counts = np.array([second[a][1] for a in sorted(second)])
    values = np.array([second[a][0] for a in sorted(second)])
    np.testing.assert_allclose(proto.history[1][2], (counts[:, None] * values).sum(axis=0) / counts.sum())
