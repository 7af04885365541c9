"""CDP-MAB, DDP-MAB and HDP-MAB on the engine: the paper's exact statements (li2022)."""

import math
from fractions import Fraction
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from netsim.engine import scenario as S
from netsim.engine.errors import InputError
from netsim.engine.sim import Simulation
from netsim.engine.streams import Streams, trial_sequence
from protocols.li2022.epochs import EpochSchedule
from protocols.li2022.sac import sink_agents

PAPER_DELAY = {"model": "constant", "value": 0.25}
ZERO = {"model": "constant", "value": 0.0}


def scenario(protocol, *, agents=6, topology="complete", servers=None, bandit=None, horizon=20000.0, seed=1,
             network=None, checkpoints=10, faults=None, **params):
    servers = {"cdp-mab": 1, "hdp-mab": 1, "ddp-mab": 0}[protocol] if servers is None else servers
    net = {"agents": agents, "topology": topology, "servers": servers, "delay": PAPER_DELAY, "server_delay": ZERO}
    net.update(network or {})
    if not servers:  # no server: no server links to delay
        net.pop("server_delay")
    elif protocol == "cdp-mab":  # agents talk only to the server: server_delay is the one delay that acts
        net.pop("delay")
    doc = {"name": "t", "bandit": bandit or {"kind": "bernoulli", "arms": 6, "means": "uniform"},
           "network": net, "protocol": {"name": protocol, **params},
           "run": {"horizon": horizon, "seed": seed, "checkpoints": checkpoints}}
    if faults is not None:
        doc["faults"] = faults
    return S.from_dict(doc)


def simulate(sc, trial=0):
    sim = Simulation(sc, trial_sequence(sc.run["seed"], trial), trial=trial)
    result = sim.run()
    return sim, result.row


# ---------------------------------------------------------------------- CDP-MAB cost (Theorem 2)
@settings(max_examples=12, deadline=None)
@given(agents=st.integers(2, 12), p=st.sampled_from([0.1, 0.25, 0.3, 0.5, 0.7, 1.0]), rounds=st.integers(1, 4))
@example(agents=10, p=0.7, rounds=2)  # 0.7 * 10 = 7.000000000000001 in floating point; ceil(pM) is 7
def test_cdp_cost_is_c1_ceil_pM_R(agents, p, rounds):
    """Two arms of equal mean and no noise: never eliminated, so exactly R rounds happen."""
    bandit = {"kind": "gaussian", "arms": 2, "means": [0.5, 0.5], "sigma": 1e-9}
    sc = scenario("cdp-mab", agents=agents, bandit=bandit, horizon=1e5, participation=p, rounds=rounds,
                  epsilon=math.inf, network={"cost": {"server_agent": 25.0, "agent_agent": 1.0}})
    _sim, row = simulate(sc)
    n = math.ceil(Fraction(str(p)) * agents)
    assert row["rounds_completed"] == rounds
    assert row["links_server_agent"] == n * rounds
    assert row["comm_cost"] == 25.0 * n * rounds
    assert row["links_agent_agent"] == 0


def test_cdp_cost_per_round_on_a_random_instance():
    sc = scenario("cdp-mab", agents=10, participation=0.4, network={"cost": {"server_agent": 7.0}})
    _sim, row = simulate(sc)
    assert row["rounds_completed"] >= 2
    assert row["comm_cost"] == 7.0 * 4 * row["rounds_completed"]
    assert row["t_delay_total"] == 0  # a centralized round takes no slot of exploitation


# ---------------------------------------------------------------------- Laplace scale and elimination
def _deterministic_run(epsilon):
    # Gaussian arms with negligible noise: x_hat equals the mean to 1e-9
    means = [0.9, 0.85, 0.8, 0.7, 0.5, 0.2]
    bandit = {"kind": "gaussian", "arms": 6, "means": means, "sigma": 1e-12}
    sc = scenario("cdp-mab", agents=4, bandit=bandit, horizon=5e4, epsilon=epsilon, seed=7)
    sim, _row = simulate(sc)
    return sc, sim, np.array(means)


def test_laplace_noise_scale_is_alg1_line9_and_elimination_is_line14():
    sc, sim, means = _deterministic_run(0.5)
    proto = sim.protocol
    streams = Streams(trial_sequence(sc.run["seed"], 0))
    m, k, horizon = 4, 6, 5e4
    # epoch 1 recomputed by hand from the paper's formulas
    s1 = math.ceil(8 * math.log(8 * k * horizon) / (m * 0.25))
    s1 = max(s1, math.ceil(8 * math.sqrt(2 * math.log(8 * k * horizon)) / (m**1.5 * 0.5 * 0.5)))
    scale = 1.0 / (m * 0.5 * s1)  # line 9
    noise = np.array([streams.for_("privacy", i).laplace(0.0, scale, k) for i in range(m)])
    ybar = means + noise  # Eq. (6) with S(0) = 0
    aggregate = ybar.mean(axis=0)  # line 12
    radius = math.sqrt(math.log(8 * k * horizon) / (2 * m * s1)) + \
        math.sqrt(8 * math.log(8 * k * horizon)) / (m**1.5 * 0.5 * s1)  # line 5
    keep = ~(aggregate.max() - aggregate >= 2 * radius)  # line 14
    r, active, got = proto.history[0]
    assert r == 1
    np.testing.assert_allclose(got, aggregate, atol=1e-8)
    assert active.tolist() == keep.tolist()
    assert 1 < keep.sum() < k  # the instance is chosen so that line 14 removes some arms, not all


def test_laplace_noise_statistics():
    """The noise the agents add has the variance 2 b^2 of Lap(b), b = 1/(M eps S(1)) (seeded, 10% tolerance).

    40 x 50 = 2,000 Laplace draws: the variance's relative standard error is sqrt(5 / 2000) = 5 %, so the
    tolerance is 2 standard errors (false alarm 0.05 for a fresh seed; the seed is fixed). A scale 25 % off
    (variance 56 % off) is 9 standard errors beyond it, and the usual mistakes (M or S(1) left out of b)
    change b by a factor of 40 or more: power 1."""
    bandit = {"kind": "gaussian", "arms": 50, "means": [0.5] * 50, "sigma": 1e-12}
    sc = scenario("cdp-mab", agents=40, bandit=bandit, horizon=3e4, epsilon=0.05, seed=3, rounds=1)
    sim, _ = simulate(sc)
    proto = sim.protocol
    plan = proto.schedule.plan(1, 50, 0)
    noise = proto.state.private - 0.5
    assert noise.var() == pytest.approx(2 * plan.noise_scale**2, rel=0.1)


# ---------------------------------------------------------------------- GIS t_delay = flooding
def flood_reference(graph, sink=None):
    """Independent flooding, one hop per slot, until every node (or only ``sink``) holds every
    record: (slots, links used)."""
    have = {i: {i} for i in graph}
    new = {i: {i} for i in graph}
    waiting = (lambda: len(have[sink]) < len(graph)) if sink is not None else (
        lambda: any(len(h) < len(graph) for h in have.values()))
    slots, links = 0, 0
    while waiting():
        used = set()
        got = {i: set() for i in graph}
        for i in graph:
            if new[i]:
                for j in graph[i]:
                    used.add((min(i, j), max(i, j)))
                    got[j] |= new[i] - have[j]
        for j in graph:
            have[j] |= got[j]
        new = got
        slots += 1
        links += len(used)
    return slots, links


GRAPHS = {
    "path": nx.path_graph(7), "ring": nx.cycle_graph(8), "star": nx.star_graph(6), "complete": nx.complete_graph(7),
}


@pytest.mark.parametrize("topology", sorted(GRAPHS))
@pytest.mark.parametrize("delay", [0.25, 1 / 3])
def test_gis_t_delay_is_flooding_one_hop_per_slot(topology, delay):
    graph = GRAPHS[topology]
    sc = scenario("ddp-mab", agents=graph.number_of_nodes(), topology=topology,
                  network={"delay": {"model": "constant", "value": delay}})
    sim, row = simulate(sc)
    slots, links = flood_reference(graph)
    assert slots == nx.diameter(graph)
    assert row["rounds_completed"] >= 2
    assert sim.protocol.t_delays == [slots] * row["rounds_completed"]
    # Eq. (2) links: what flooding uses, every round (ADV, REQ and DATA share the slot's link)
    assert row["links_agent_agent"] == links * row["rounds_completed"]
    # exploitation: every agent pulls once per slot of every round
    assert row["t_delay_total"] == slots * row["rounds_completed"]


@settings(max_examples=8, deadline=None)
@given(st.integers(0, 10**6))
def test_gis_on_random_graphs(seed):
    sc = scenario("ddp-mab", agents=9, topology="erdos_renyi", network={"p": 0.3}, seed=seed, horizon=6000.0)
    sim, row = simulate(sc)
    graph = sim.network.agent_graph
    assert set(sim.protocol.t_delays) <= {nx.diameter(graph)}
    assert row["rounds_completed"] >= 1


def test_gis_exploitation_regret_counts():
    """Every slot of a GIS round every agent pulls once: pulls = T * M in total."""
    sc = scenario("ddp-mab", agents=8, topology="ring", horizon=9000.0)
    sim, _row = simulate(sc)
    assert sim.bandit.pulls.sum() == 9000 * 8


# ---------------------------------------------------------------------- sinks (Alg. 4)
@settings(max_examples=30, deadline=None)
@given(st.integers(2, 14), st.floats(0.15, 0.9), st.integers(0, 10**6))
def test_sink_is_graph_center_and_delay_its_eccentricity(n, p, seed):
    graph = nx.gnp_random_graph(n, p, seed=seed)
    components = [sorted(c) for c in nx.connected_components(graph)]
    sinks, delays, worst = sink_agents(graph, components)
    for members, sink, delay in zip(components, sinks, delays):
        sub = graph.subgraph(members)
        if len(members) == 1:
            assert (sink, delay) == (members[0], 0)
            continue
        assert sink in nx.center(sub)
        assert delay == nx.eccentricity(sub, sink) == nx.radius(sub)
    assert worst == max(delays)


@pytest.mark.parametrize("routing", ["flood", "tree"])
@pytest.mark.parametrize("topology,sizes", [("path", [5, 3, 1]), ("star", [4, 4]), ("ring", [7, 5]),
                                            ("complete", [3, 3, 2])])
def test_hdp_round_delay_is_slowest_sink_eccentricity(routing, topology, sizes):
    sc = scenario("hdp-mab", agents=sum(sizes), topology=topology, network={"components": sizes},
                  sac_routing=routing)
    sim, row = simulate(sc)
    graph = sim.network.agent_graph
    expect = max(nx.radius(graph.subgraph(c)) if len(c) > 1 else 0 for c in sim.network.components)
    assert row["rounds_completed"] >= 2
    assert sim.protocol.t_delays == [expect] * row["rounds_completed"]
    # global communication: one server link per component per round (c1 Q)
    assert row["links_server_agent"] == len(sizes) * row["rounds_completed"]


def test_hdp_tree_cost_is_theorem4_sum_of_distances_on_stars():
    """On stars (sink = centre) every leaf sends once to the sink: c2 sum_i sd(i, SA_q) + c1 Q per round."""
    sc = scenario("hdp-mab", agents=8, topology="star", network={"components": [5, 3]}, sac_routing="tree")
    _sim, row = simulate(sc)
    assert row["links_agent_agent"] == (4 + 2) * row["rounds_completed"]


def test_hdp_single_agent_components_is_centralized():
    """Table II case 6: every component one agent, directly linked to the server: no delay."""
    sc = scenario("hdp-mab", agents=6, network={"components": 6})
    sim, row = simulate(sc)
    assert sim.protocol.t_delays and set(sim.protocol.t_delays) == {0}
    assert row["links_agent_agent"] == 0
    assert row["links_server_agent"] == 6 * row["rounds_completed"]


# ---------------------------------------------------------------------- realistic mode
@pytest.mark.parametrize("protocol,extra", [
    ("ddp-mab", {"topology": "ring"}),
    ("hdp-mab", {"topology": "ring", "network": {"components": [5, 4]}, "sac_routing": "flood"}),
    ("hdp-mab", {"topology": "path", "network": {"components": [5, 4]}, "sac_routing": "tree"}),
    ("cdp-mab", {}),
])
def test_lossy_runs_complete(protocol, extra):
    """Loss 0.3 with exponential delays: the reliable mode repeats every message until it is acknowledged,
    so each round aggregates the very records of the lossless run (the reward and privacy draws have their
    own streams): same rounds, same surviving arms, same answer; only time and links grow."""
    extra = dict(extra)
    net = {"loss": 0.3, "delay": {"model": "exponential", "mean": 0.3}, "server_delay": {"model": "exponential",
                                                                                           "mean": 0.3}}
    net.update(extra.pop("network", {}))
    lossless = dict(net, loss=0.0)
    sc = scenario(protocol, agents=9, network=net, horizon=20000.0, **extra)
    _sim, row = simulate(sc)
    _, clean = simulate(scenario(protocol, agents=9, network=lossless, horizon=20000.0, **extra))
    assert row["messages_dropped"] > 0
    assert row["rounds_completed"] == clean["rounds_completed"] >= 2
    assert (row["identified_arm"], row["active_arms"]) == (clean["identified_arm"], clean["active_arms"])
    # the same rounds complete; retries cost time and links
    assert row["t_delay_total"] >= clean["t_delay_total"]
    assert row["comm_cost"] >= clean["comm_cost"] * 0.999


# ---------------------------------------------------------------------- input errors
@pytest.mark.parametrize("key,value", [("epsilon", 0.0), ("epsilon", -1.0), ("participation", 0.0),
                                       ("participation", 1.5), ("rounds", -1), ("timeout", 0.0)])
def test_bad_parameters_are_input_errors(key, value):
    with pytest.raises(InputError, match=f"protocol.{key}"):
        scenario("cdp-mab", **{key: value})


def test_ddp_rejects_components_and_jitter():
    with pytest.raises(InputError, match="network.components"):
        scenario("ddp-mab", network={"components": 2})
    doc = {"name": "t", "bandit": {"kind": "bernoulli", "arms": 3}, "network": {"agents": 3},
           "protocol": {"name": "ddp-mab"}, "clock": {"jitter": 0.1}}
    with pytest.raises(InputError, match="clock.jitter"):
        S.from_dict(doc)
    with pytest.raises(InputError, match="network.servers"):
        scenario("cdp-mab", servers=0)


def test_ddp_round_cap_cost_is_corollary1():
    """Corollary 1: C_D^R = c2 d_G R sum_i d_i / 2, met with equality on a ring (every edge used every slot)."""
    bandit = {"kind": "gaussian", "arms": 2, "means": [0.5, 0.5], "sigma": 1e-9}
    sc = scenario("ddp-mab", agents=9, topology="ring", bandit=bandit, horizon=5e4, rounds=3, epsilon=math.inf,
                  network={"cost": {"agent_agent": 2.0}})
    _sim, row = simulate(sc)
    assert row["rounds_completed"] == 3
    assert row["comm_cost"] == 2.0 * 4 * 3 * 9


def test_slot_length_other_than_one():
    """With [clock] period 2 and stage delays of period/4, GIS still moves one hop per slot."""
    doc = {"name": "t", "bandit": {"kind": "bernoulli", "arms": 4, "means": "uniform"},
           "network": {"agents": 8, "topology": "ring", "delay": {"model": "constant", "value": 0.5}},
           "protocol": {"name": "ddp-mab"}, "clock": {"period": 2.0}, "run": {"horizon": 20000.0, "seed": 2}}
    sim, row = simulate(S.from_dict(doc))
    assert row["rounds_completed"] >= 1
    assert set(sim.protocol.t_delays) == {4}
    assert sim.bandit.pulls.sum() == 8 * 10000  # one pull per agent per slot


def test_hdp_tree_cost_on_a_path_is_sum_of_distances():
    """Path 0-1-2-3-4, sink 2: sum_i sd(i, 2) = 1 + 2 + 1 + 2 = 6 links per round (one record per link-slot)."""
    sc = scenario("hdp-mab", agents=5, topology="path", network={"components": 1}, sac_routing="tree")
    sim, row = simulate(sc)
    assert sim.protocol.sinks == [2]
    assert row["links_agent_agent"] == 6 * row["rounds_completed"]


@pytest.mark.parametrize("topology,sizes", [("path", [7, 3]), ("erdos_renyi", [9, 6, 4])])
def test_hdp_flood_stops_in_each_component_when_its_sink_is_complete(topology, sizes):
    extra = {"p": 0.5} if topology == "erdos_renyi" else {}
    sc = scenario("hdp-mab", agents=sum(sizes), topology=topology, network={"components": sizes, **extra}, seed=3)
    sim, row = simulate(sc)
    graph = sim.network.agent_graph
    per_round = 0
    for sink, members in zip(sim.protocol.sinks, sim.network.components):
        sub = nx.convert_node_labels_to_integers(graph.subgraph(members), label_attribute="old")
        new_sink = next(n for n, d in sub.nodes(data=True) if d["old"] == sink)
        per_round += flood_reference(sub, new_sink)[1]
    assert row["rounds_completed"] >= 1
    assert row["links_agent_agent"] == per_round * row["rounds_completed"]


BUNDLED = sorted(p.stem for p in (Path(__file__).resolve().parents[1] / "scenarios").glob("li2022-*.toml"))


def test_every_figure_has_bundled_scenarios():
    for prefix in ("fig4-", "fig5-", "fig6-", "fig7-", "fig8-", "fig10-ring", "fig10-star", "fig10-complete",
                   "fig10-random", "fig12-cdp", "fig12-ddp", "fig12-hdp"):
        assert any(name.startswith(f"li2022-{prefix}") for name in BUNDLED), prefix
    assert {f"li2022-fig11-case{c}" for c in range(1, 7)} <= set(BUNDLED)


@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_scenario_runs(name):
    sc = S.load(name, ["run.horizon=2500", "run.checkpoints=5"])
    assert sc.source.startswith("li2022") and sc.description
    sim, row = simulate(sc)
    assert row["end_time"] == 2500.0
    assert sim.bandit.pulls.sum() == 2500 * row["agents"]


def test_regret_curve_is_exact_at_every_checkpoint():
    """Exploration pulls are drawn as sums but split at checkpoints: the curve matches slot-by-slot play."""
    bandit = {"kind": "gaussian", "arms": 3, "means": [0.9, 0.5, 0.6], "sigma": 1e-12}
    sc = scenario("cdp-mab", agents=2, bandit=bandit, horizon=1000.0, checkpoints=40, epsilon=math.inf)
    result = Simulation(sc, trial_sequence(1, 0)).run()
    n1 = EpochSchedule(arms=3, horizon=1000.0, participants=2, epsilon=math.inf).plan(1, 3, 0).pulls
    gaps = np.array([0.0, 0.4, 0.3])

    def regret_before(t):  # slot-by-slot: arm j is pulled in slots [j n1, (j+1) n1) of epoch 1
        total = sum(gaps[j] * min(max(t - j * n1, 0), n1) for j in range(3))
        return 2 * total

    times, curve = result.timeseries["time"], result.timeseries["group_regret"]
    assert 3 * n1 < 1000 and n1 > 30
    for t, value in zip(times, curve):
        if t <= 3 * n1:
            assert value == pytest.approx(regret_before(t), abs=1e-9)
