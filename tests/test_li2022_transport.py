"""li2022 reliable mode on RFC 6298 timers (issue 24): what loss and outages cost, against hand-derived counts.

The bases are those of docs/reliability.md (benchmarks/reliability.py): CDP-MAB on 5 agents, DDP-MAB on
a 5-agent path, HDP-MAB on two components of 5."""

from __future__ import annotations

import math

import pytest

from netsim.engine import scenario as S
from netsim.engine.registry import protocols
from netsim.engine.sim import Simulation
from netsim.engine.streams import trial_sequence

BASES = {
    "cdp-mab": ("li2022-fig8-homogeneous", {"run.horizon": 3000, "protocol.epsilon": math.inf}),
    "ddp-mab": ("li2022-gis-path5", {"run.horizon": 600}),
    "hdp-mab": ("li2022-fig11-case1", {"network.agents": 10, "network.components": 2, "bandit.arms": 5,
                                       "run.horizon": 1000}),
}
SLOW = {"model": "lognormal", "mean": 20.0, "sigma": 1.0}


def build(protocol: str, **sets) -> S.Scenario:
    base, overrides = BASES[protocol]
    sets = {**overrides, **sets}
    kind = protocols.get(protocol, key="protocol.name")
    if not kind.servers:  # no server links to delay
        sets.pop("network.server_delay", None)
    elif not kind.agent_links:  # agents talk only to the server: server_delay is the one delay that acts
        sets.pop("network.delay", None)
    return S.load(base).with_(**sets)


def run(sc: S.Scenario, trial: int = 0) -> tuple[Simulation, dict]:
    sim = Simulation(sc, trial_sequence(sc.run["seed"], trial), trial=trial)
    return sim, sim.run().row


@pytest.mark.parametrize("protocol", sorted(BASES))
def test_one_percent_loss_on_slow_links_costs_at_most_half_more(protocol):
    """Lognormal delays of mean 20 slots on every link (agent-agent and server-agent), loss 0.01 against
    loss 0, same seeds: the cost over 5 trials is at most 1.5 times the loss-free cost (it was 5-12 times
    with a fixed 2-slot timer: cdp-mab 250 -> 1,833). rto_initial = 120 slots: as RFC 6298's 1 s, a first
    timeout above the round trips of the links (here 40 slots on average).

    Error rates, from 20 trials per protocol: the per-trial ratio has mean 1.19 / 1.12 / 1.06 (cdp / ddp /
    hdp) and standard deviation at most 0.16, so the ratio of 5-trial sums has a standard deviation
    of about 0.07 and 1.5 lies more than 4 of them above each mean: false alarm below 1e-4; a transport
    that doubled the cost (one more message per message, e.g. acknowledged uploads) fails it with
    probability above 0.999."""
    slow = {"network.delay": SLOW, "network.server_delay": SLOW, "protocol.rto_initial": 120.0,
            "protocol.rto_max": 1000.0}
    clean = lossy = 0.0
    for trial in range(5):
        clean += run(build(protocol, **slow), trial)[1]["comm_cost"]
        sim, row = run(build(protocol, **slow, **{"network.loss": 0.01}), trial)
        assert row["status"] != "failed"
        lossy += row["comm_cost"]
    assert lossy <= 1.5 * clean, (lossy, clean)


def _first_round_start(protocol: str, **sets) -> float:
    sim = Simulation(build(protocol, **sets), trial_sequence(1, 0))
    starts = []
    end_exploration = sim.protocol._end_exploration

    def record():
        starts.append(sim.now)
        end_exploration()

    sim.protocol._end_exploration = record
    sim.run()
    return starts[0]


def _recalls_by_hand(outage: float, initial: float, maximum: float) -> int:
    """Recalls sent until one leaves at or after the end of the outage: expiries at the partial sums
    of min(initial * 2^i, maximum) (RFC 6298 (5.5), (2.5))."""
    waited, count = 0.0, 0
    while waited < outage:
        waited += min(initial * 2.0**count, maximum)
        count += 1
    return count


@pytest.mark.parametrize("maximum", [10000.0, 64.0])
def test_an_outage_of_the_server_link_costs_logarithmically_many_recalls(maximum):
    """CDP-MAB, zero server delay. The link between agent 2 and the server is down from the start until
    L slots after round 1 starts: agent 2's upload is dropped, and the server, which measured nothing on
    that pair yet, recalls it after rto_initial = 3 slots, then after 6, 12, ...: the recall that gets
    through is the first sent at or after the outage's end. With rto_max above the outage that is
    ceil(log2(L / 3 + 1)) recalls, one more per doubling of L (6, 7, 8, 9 for L = 100 ... 800); with
    the default rto_max = 64 the tail is one per 64 slots. (The fixed 2-slot timer sent L / 2.)"""
    t0 = _first_round_start("cdp-mab")
    counts = []
    for outage in (100.0, 200.0, 400.0, 800.0):
        faults = {"links": [{"u": 2, "v": 5, "start": 0.0, "end": t0 + outage}]}
        sim, row = run(build("cdp-mab", faults=faults, **{"protocol.rto_max": maximum}))
        assert row["status"] != "failed"
        counts.append(sim.protocol.retransmissions())
        assert counts[-1] == _recalls_by_hand(outage, 3.0, maximum)
    if maximum > 800:
        assert counts == [6, 7, 8, 9]


@pytest.mark.parametrize("protocol", ["cdp-mab", "hdp-mab"])
def test_a_server_outage_costs_one_recall_per_missing_upload_whatever_its_length(protocol):
    """The server is down during [t0 - 1, t0 + L), round 1 starting at t0: the uploads are dropped at the
    down server, whose timers wait without backing off while it is down; the first expiry after its
    restart (at most one RTO later) recalls each missing upload once. The recalls are the same for every L
    (the fixed 2-slot timer sent one upload per agent every 2 slots: costs of 25k / 63k / 100k for 600 /
    1,200 / 1,800 slots down)."""
    t0 = _first_round_start(protocol)
    agents = build(protocol).network["agents"]
    expected = agents if protocol == "cdp-mab" else 2  # the uploads: every agent's, or the two sinks'
    for outage in (100.0, 200.0, 400.0, 800.0):
        faults = {"crashes": [{"node": agents, "start": t0 - 1.0, "end": t0 + outage}], "state": "kept"}
        sim, row = run(build(protocol, faults=faults))
        assert row["status"] != "failed" and row["rounds_completed"] >= 1
        assert sim.protocol.retransmissions() == expected
        assert row["dropped_crashed"] == expected  # the first uploads, at the down server
        assert outage <= sim.protocol.t_delays[0] <= outage + 4  # the round waits for the restart, not longer


def test_a_cut_path_costs_logarithmically_many_repeats():
    """DDP-MAB on the 5-agent path: the middle link 1-2 is down from the start until L slots after round 1
    starts. Agents 1 and 2 advertise their records to each other at t0; both ADVs are lost and each pair
    (1, 2), (2, 1) repeats on its own timer, after 3, 6, 12, ... slots (later ADVs across the cut join
    the pending keys of the running timer): ceil(log2(L / 3 + 1)) repeats per direction, two more per
    doubling of L. The round then waits for the last backed-off repeat, up to about L more slots
    (bounded by rto_max)."""
    longer = {"run.horizon": 2000}
    t0 = _first_round_start("ddp-mab", **longer)
    counts = []
    for outage in (50.0, 100.0, 200.0, 400.0):
        faults = {"links": [{"u": 1, "v": 2, "start": 0.0, "end": t0 + outage}]}
        sim, row = run(build("ddp-mab", faults=faults, **{"protocol.rto_max": 10000.0}, **longer))
        assert row["rounds_completed"] >= 1 and outage <= sim.protocol.t_delays[0]
        counts.append(sim.protocol.retransmissions())
    assert counts == [2 * _recalls_by_hand(outage, 3.0, 10000.0) for outage in (50.0, 100.0, 200.0, 400.0)]
    assert counts == [10, 12, 14, 16]
