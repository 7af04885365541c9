"""Fault models of ``[faults]`` (netsim.engine.faults): link outages, crashes, duplication, reordering."""

from __future__ import annotations

import math

import numpy as np
import pytest

from netsim.comm.protocol import Protocol
from netsim.engine import faults as F
from netsim.engine import params as P
from netsim.engine import scenario as S
from netsim.engine.errors import InputError
from netsim.engine.registry import protocols
from netsim.engine.sim import Simulation, run_trial
from netsim.engine.streams import Streams, trial_sequence
from netsim.experiment.results import trials_table
from tests.conftest import scenario_dict


class Pinger(Protocol):
    """Test protocol: every agent pings each neighbour every tick and records what it receives.

    ``mode = "node"``: one clock per agent (paused by crashes); ``"global"``: one clock for all,
    sending from every agent whether it is up or not (the network drops a crashed sender's messages).
    """

    name = "test-fault-pinger"
    servers = None
    crash_states = ("kept", "lost")
    fields = {"mode": P.choice(("node", "global"), "node")}

    def start(self):
        sim = self.sim
        self.received = []  # (src, dst, sent_at, now)
        self.ticks = []
        self.events = []
        sim.network.subscribe("PING", lambda m: self.received.append((m.src, m.dst, m.sent_at, sim.now)))
        sim.faults.on_crash(lambda n: self.events.append(("crash", n, sim.now)))
        sim.faults.on_restart(lambda n, state: self.events.append(("restart", n, sim.now, state)))
        if self.params["mode"] == "node":
            for agent in range(sim.num_agents):
                sim.every(1.0, lambda now, a=agent: self.tick(now, a), node=agent)
        else:
            sim.every(1.0, lambda now: [self.tick(now, a) for a in range(sim.num_agents)])

    def tick(self, now, agent):
        self.ticks.append((now, agent))
        if self.sim.faults.is_up(agent):  # a crashed agent pulls nothing (the engine enforces it)
            self.sim.bandit.pull(agent, 0)
        self.sim.network.broadcast(agent, "PING")


protocols._items.setdefault(Pinger.name, Pinger)


def pinger(faults=None, *, mode="node", topology="path", agents=3, horizon=10, delay=0.5, **network):
    doc = scenario_dict(protocol={"name": Pinger.name, "mode": mode},
                        network={"topology": topology, "agents": agents,
                                 "delay": delay if isinstance(delay, dict) else {"model": "constant", "value": delay},
                                 **network},
                        run={"horizon": horizon, "checkpoints": 2, "seed": 7})
    if faults is not None:
        doc["faults"] = faults
    return S.from_dict(doc)


def simulate(scenario, trial=0):
    sim = Simulation(scenario, trial_sequence(scenario.run["seed"], trial), trial=trial)
    return sim, sim.run()


def check_invariant(sim, row):
    """sent = delivered + dropped + in flight, overall and for every kind (copies included in sent)."""
    m = sim.metrics
    assert row["messages_sent"] == row["messages_delivered"] + row["messages_dropped"] + row["messages_in_flight"]
    assert sum(c.in_flight for c in m.messages.values()) == sim.network.in_flight
    for counts in m.messages.values():
        assert counts.in_flight >= 0


# ---------------------------------------------------------------------- link down intervals
def test_link_down_interval_drops_exactly_the_messages_sent_during_it():
    sc = pinger({"links": [{"u": 0, "v": 1, "start": 3.0, "end": 6.0}]})
    sim, result = simulate(sc)
    row = result.row
    sent = {(a, b, float(t)) for t in range(10) for a, b in ((0, 1), (1, 0), (1, 2), (2, 1))}
    lost = {(a, b, float(t)) for t in (3, 4, 5) for a, b in ((0, 1), (1, 0))}  # [3, 6) on link 0-1
    got = {(s, d, t) for s, d, t, _ in sim.protocol.received}
    assert got == sent - lost
    assert row["dropped_link_down"] == 6 and row["messages_dropped"] == 6
    assert row["dropped_crashed"] == row["duplicated"] == row["reordered"] == 0
    check_invariant(sim, row)
    # the sender still built the link in the slots it tried (li2022 Eq. 2 counts the attempt)
    assert row["links_agent_agent"] == 2 * 10


def test_link_is_up_and_random_outage_fraction():
    # long-run fraction of time down = down_rate / (down_rate + up_rate) (alternating renewal process)
    proc = F.Alternating(np.random.default_rng(3), 0.02, 0.2)
    intervals = proc.intervals(1e5)
    down = sum(min(e, 1e5) - s for s, e in intervals)
    # about 4 standard errors (0.003): false alarm below 1e-4, power 0.98 against a fraction 20 % off
    assert down / 1e5 == pytest.approx(0.02 / 0.22, abs=0.012)
    assert all(e > s for s, e in intervals)
    assert all(intervals[i][1] <= intervals[i + 1][0] for i in range(len(intervals) - 1))
    # permanent failure when nothing repairs
    once = F.Alternating(np.random.default_rng(3), 0.5, 0.0).intervals(100.0)
    assert len(once) == 1 and once[0][1] == math.inf


def test_random_link_faults_drop_about_the_down_fraction():
    sc = pinger({"link_down_rate": 0.05, "link_up_rate": 0.2}, topology="ring", agents=6, horizon=2000)
    sim, result = simulate(sc)
    row = result.row
    sent = row["messages_sent"]
    frac = row["dropped_link_down"] / sent
    # 6 links, each down 20 % of the time; per-link outages are correlated in time, so the tolerance is wide:
    # over 30 trials the fraction is 0.203 +- 0.011, so 0.06 is 5.3 sd (false alarm ~1e-7); against a true
    # fraction of 0.1 or 0.3 (half as much or half again) the power is 0.9998
    assert frac == pytest.approx(0.05 / 0.25, abs=0.06)
    check_invariant(sim, row)


# ---------------------------------------------------------------------- crashes
def test_crash_pauses_the_nodes_clock_and_drops_messages_to_it():
    sc = pinger({"crashes": [{"node": 1, "start": 2.5, "end": 5.5}]})
    sim, result = simulate(sc)
    proto, row = sim.protocol, result.row
    assert proto.events == [("crash", 1, 2.5), ("restart", 1, 5.5, "kept")]
    assert [t for t, a in proto.ticks if a == 1] == [0, 1, 2, 6, 7, 8, 9]  # ticks 3, 4, 5 skipped
    assert sim.bandit.pulls[1] == 7
    got = {(s, d, t) for s, d, t, _ in proto.received}
    # sent at 2, 3, 4 to node 1 are due at 2.5, 3.5, 4.5 while it is down; the one due at 5.5 arrives
    for t in (2.0, 3.0, 4.0):
        assert (0, 1, t) not in got and (2, 1, t) not in got
    assert (0, 1, 5.0) in got and (2, 1, 5.0) in got
    assert row["dropped_crashed"] == 6 == row["messages_dropped"]
    check_invariant(sim, row)


def test_crashed_sender_messages_dropped_with_global_clock():
    sc = pinger({"crashes": [{"node": 0, "start": 0.0, "end": math.inf}]}, mode="global", horizon=5)
    sim, result = simulate(sc)
    got = {(s, d) for s, d, _, _ in sim.protocol.received}
    assert (0, 1) not in got and (1, 0) not in got and (1, 2) in got
    # node 0 sends 1 message per tick (dropped at send) and receives 1 per tick (dropped at delivery)
    assert result.row["dropped_crashed"] == 5 + 5  # 0 -> 1 at send, 1 -> 0 at delivery (due 0.5 .. 4.5)
    assert sim.faults.is_up(1) and not sim.faults.is_up(0)
    check_invariant(sim, result.row)


def test_random_crashes_restart_and_handlers_alternate():
    sc = pinger({"crash_rate": 0.05, "restart_rate": 0.2, "state": "lost"}, topology="ring", agents=5, horizon=500)
    sim, result = simulate(sc)
    events = sim.protocol.events
    assert events, "some crash expected at rate 0.05 over 500 time units"
    for node in range(5):
        mine = [e[0] for e in events if e[1] == node]
        assert mine == ["crash", "restart"] * (len(mine) // 2) + ["crash"] * (len(mine) % 2)
    assert all(e[3] == "lost" for e in events if e[0] == "restart")
    check_invariant(sim, result.row)


def test_ucb1_crash_state_lost_forgets_and_kept_remembers():
    def run(state):
        sc = S.from_dict(scenario_dict(faults={"crashes": [{"node": 1, "start": 10, "end": 20}], "state": state},
                                       run={"horizon": 50, "checkpoints": 2, "seed": 1}))
        sim, _ = simulate(sc)
        return sim

    kept, lost = run("kept"), run("lost")
    assert kept.bandit.pulls[1] == lost.bandit.pulls[1] == 40  # no pulls while down (ticks 10..19)
    assert kept.protocol.counts[1].sum() == 40
    assert lost.protocol.counts[1].sum() == 30  # zeroed at the restart at 20
    assert kept.bandit.pulls[0] == 50


class Rigid(Pinger):
    """Test protocol that declares no crash support and refuses duplication."""

    name = "test-fault-rigid"
    crash_states = ()
    unsupported_faults = ("duplication",)


protocols._items.setdefault(Rigid.name, Rigid)


def test_protocols_without_crash_support_reject_crashes():
    def load(faults):
        return S.from_dict(scenario_dict(protocol={"name": Rigid.name}, faults=faults))

    with pytest.raises(InputError, match=r"faults\.crashes.*test-fault-rigid.*accepted: no crashes"):
        load({"crashes": [{"node": 1, "start": 1, "end": 2}]})
    with pytest.raises(InputError, match=r"faults\.duplication.*test-fault-rigid.*duplication.*accepted: link_down, "
                                         r"crash, reorder"):
        load({"duplication": 0.1})


def test_scenario_errors_name_the_key():
    cases = [
        ({"links": [{"u": 0, "v": 1, "start": 3, "end": 3}]}, r"faults\.links\[0\]\.end.*end > start"),
        ({"links": [{"u": 0, "v": 9, "start": 0, "end": 1}]}, r"faults\.links\[0\]\.v.*ids 0\.\.2"),
        ({"links": [{"u": 0, "v": 2, "start": 0, "end": 1}]}, r"faults\.links\[0\].*no link between 0 and 2"),
        ({"crashes": [{"node": 5, "start": 0}]}, r"faults\.crashes\[0\]\.node"),
        ({"duplication": 1.5}, r"faults\.duplication"),
        ({"dupliction": 0.1}, r"did you mean 'duplication'"),
        ({"state": "gone"}, r"faults\.state.*kept.*lost"),
        ({"reorder_delay": {"model": "bernoulli", "p": 0.5}}, r"faults\.reorder_delay"),
    ]
    for faults, pattern in cases:
        with pytest.raises(InputError, match=pattern):
            pinger(faults)


# ---------------------------------------------------------------------- duplication and reordering
def test_duplication_rate_and_accounting():
    sc = pinger({"duplication": 0.2}, topology="ring", agents=4, horizon=500)
    sim, result = simulate(sc)
    row = result.row
    originals = 4 * 2 * 500
    dup = row["duplicated"]
    sd = math.sqrt(originals * 0.2 * 0.8)
    assert abs(dup - 0.2 * originals) < 4 * sd
    assert row["messages_sent"] == originals + dup  # a copy counts as one more message sent
    assert int(sim.metrics.node_sent.sum()) == originals  # but not as sent by the protocol's node
    assert len(sim.protocol.received) == row["messages_delivered"]
    check_invariant(sim, row)


def test_reordering_rate_extra_delay_and_overtaking():
    sc = pinger({"reorder": 0.3, "reorder_delay": {"model": "exponential", "mean": 2.0}},
                topology="ring", agents=4, horizon=500, delay=0.5)
    sim, result = simulate(sc)
    row = result.row
    n = 4 * 2 * 500
    # 4 binomial sd: false alarm 6e-5, power 0.99998 against a rate of 0.36 (20 % off)
    assert abs(row["reordered"] - 0.3 * n) < 4 * math.sqrt(n * 0.3 * 0.7)
    extra = np.array([now - sent - 0.5 for _, _, sent, now in sim.protocol.received])
    late = extra[extra > 1e-9]
    assert late.mean() == pytest.approx(2.0, abs=4 * 2.0 / math.sqrt(len(late)))
    # some later message overtakes an earlier one on the same directed link
    by_link = {}
    for src, dst, sent, _ in sim.protocol.received:  # in delivery order
        by_link.setdefault((src, dst), []).append(sent)
    assert any(np.any(np.diff(v) < 0) for v in by_link.values())
    check_invariant(sim, row)
    # without the fault, constant delays keep every link in FIFO order
    plain_sim, _ = simulate(pinger(None, topology="ring", agents=4, horizon=50))
    by_link = {}
    for src, dst, sent, _ in plain_sim.protocol.received:
        by_link.setdefault((src, dst), []).append(sent)
    assert all(np.all(np.diff(v) >= 0) for v in by_link.values())


def test_invariant_with_every_fault_at_once():
    sc = pinger({"link_down_rate": 0.1, "link_up_rate": 0.5, "crash_rate": 0.02, "restart_rate": 0.1,
                 "duplication": 0.1, "reorder": 0.2}, topology="ring", agents=6, horizon=300,
                loss=0.1, delay={"model": "exponential", "mean": 0.7})
    for trial in range(3):
        sim, result = simulate(sc, trial)
        check_invariant(sim, result.row)
        assert result.row["dropped_link_down"] > 0 and result.row["duplicated"] > 0


# ---------------------------------------------------------------------- zero-cost path
def _csv(scenario, trials=2):
    results = [run_trial(scenario, trial_sequence(scenario.run["seed"], t), t) for t in range(trials)]
    return trials_table(results).to_csv(index=False)


@pytest.mark.parametrize("name,sets", [("li2022-gis-path5", ["run.horizon=200"]),
                                       ("quickstart", ["run.horizon=200"])])
def test_empty_faults_section_gives_identical_results(name, sets):
    plain = _csv(S.load(name, sets))
    assert _csv(S.load(name, [*sets, "faults={}"])) == plain
    # a section that turns no fault on (zero rates) is no fault at all; a state without crashes is refused
    assert _csv(S.load(name, [*sets, "faults.duplication=0.0", "faults.crash_rate=0.0"])) == plain
    with pytest.raises(InputError, match="no node restarts"):
        S.load(name, [*sets, "faults.state='lost'"])
    assert "faults" not in S.load(name, [*sets, "faults={}"]).as_dict()


def test_faults_do_not_change_reward_draws():
    """The pinger pulls arm 0 at every tick whatever it hears: with network faults it draws exactly the
    rewards of the fault-free run (the faults' streams are their own)."""
    def rewards(faults):
        sim = Simulation(pinger(faults, topology="ring", agents=4, horizon=60), trial_sequence(1, 0))
        drawn, pull = [], sim.bandit.pull
        sim.bandit.pull = lambda agent, arm: drawn.append((agent, pull(agent, arm))) or drawn[-1][1]
        row = sim.run().row
        return drawn, row

    plain, row = rewards(None)
    faulty, faulty_row = rewards({"link_down_rate": 0.5, "duplication": 0.5})
    assert faulty == plain and faulty_row["group_regret"] == row["group_regret"]
    assert faulty_row["messages_sent"] != row["messages_sent"]  # the faults did act on the messages


def test_link_process_stream_does_not_depend_on_query_order():
    import simpy

    def build():
        return F.Faults(F.validate({"link_down_rate": 0.3}, nodes=4), env=simpy.Environment(),
                        edges=[(0, 1), (1, 2), (2, 3)], num_nodes=4, num_agents=4,
                        streams=Streams(trial_sequence(5, 0)), extras={})

    times = np.linspace(0, 50, 200)
    alone = build()
    first = [alone._link_down(0, 1, t) for t in times]
    mixed = build()
    second = []
    for t in times:  # another link asked first, and the pair named the other way round
        mixed._link_down(2, 3, t)
        second.append(mixed._link_down(1, 0, t))
    assert second == first and any(first) and not all(first)


def test_pulling_for_a_crashed_agent_is_a_protocol_error():
    sc = pinger({"crashes": [{"node": 1, "start": 2.5, "end": 5.0}]}, mode="global")
    sim = Simulation(sc, trial_sequence(sc.run["seed"], 0))
    sim.protocol.tick = lambda now, agent: sim.bandit.pull(agent, 0)  # ignores crashes
    from netsim.engine.errors import ProtocolError
    with pytest.raises(ProtocolError, match=r"crashed agent\(s\) \[1\] at t = 3"):
        sim.run()


def test_walking_for_a_crashed_agent_is_a_protocol_error():
    sc = pinger({"crashes": [{"node": 1, "start": 2.5, "end": 5.0}]}, mode="global")
    sim = Simulation(sc, trial_sequence(sc.run["seed"], 0))
    sim.protocol.tick = lambda now, agent: sim.bandit.pull_walk(agent, np.array([0]), 3)  # ignores crashes
    from netsim.engine.errors import ProtocolError
    with pytest.raises(ProtocolError, match=r"crashed agent\(s\) \[1\] at t = 3"):
        sim.run()


def test_walking_many_with_a_crashed_agent_is_a_protocol_error():
    sc = pinger({"crashes": [{"node": 1, "start": 2.5, "end": 5.0}]}, mode="global")
    sim = Simulation(sc, trial_sequence(sc.run["seed"], 0))
    sim.protocol.tick = lambda now, agent: sim.bandit.pull_walks(np.array([0, 1]), np.array([0]), 3)
    from netsim.engine.errors import ProtocolError
    with pytest.raises(ProtocolError, match=r"crashed agent\(s\) \[1\] at t = 3"):
        sim.run()
