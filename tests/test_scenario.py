"""Scenario loading: defaults, overrides and one clear line for every kind of bad input."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import simpy

from netsim.engine import scenario as S
from netsim.engine.errors import InputError
from netsim.engine.streams import Streams
from tests.conftest import scenario_dict


def write(tmp_path, text, name="s.toml"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


BASE = """
name = "t"
[bandit]
kind = "bernoulli"
arms = 3
[network]
topology = "ring"
agents = 4
[protocol]
name = "ucb1"
[run]
horizon = 100
"""


def test_defaults_filled_in(tmp_path):
    sc = S.load(write(tmp_path, BASE))
    assert sc.network["delay"] == {"model": "constant", "value": 1.0}
    assert sc.network["cost"] == {"agent_agent": 1.0, "server_agent": 25.0}
    assert sc.run["trials"] == 1 and sc.clock["jitter"] == 0.0
    assert sc.bandit["means"] == "uniform"


def test_overrides_are_typed(tmp_path):
    sc = S.load(write(tmp_path, BASE), ["network.agents=7", "network.delay={model='uniform',low=0,high=2}",
                                        "bandit.means=[0.1,0.2,0.9]", "description=hello world",
                                        "protocol.name='test-carrier'"])  # ucb1 sends nothing: refuses delays
    assert sc.network["agents"] == 7
    assert sc.network["delay"]["model"] == "uniform"
    assert sc.bandit["means"] == (0.1, 0.2, 0.9)
    assert sc.description == "hello world"


def test_show_round_trips(tmp_path):
    sc = S.load(write(tmp_path, BASE), ["protocol.name=central-ucb"])
    again = S.load(write(tmp_path, S.resolved_toml(sc), "again.toml"))
    assert again.as_dict() == sc.as_dict()


BAD = [
    # (override or text edit, expected key in message, expected fragment)
    (["network.agnets=3"], "network.agnets", "did you mean 'agents'"),
    (["bandit.arms=1"], "bandit.arms", "an integer >= 2"),
    (["network.agents=0"], "network.agents", "an integer >= 1"),
    (["run.horizon=0"], "run.horizon", "a number > 0"),
    (["run.horizon=-5"], "run.horizon", "a number > 0"),
    (["network.loss=1.5"], "network.loss", "<= 1"),
    (["adversary.corruption=-0.1"], "adversary.corruption", ">= 0"),
    (["bandit.arms='ten'"], "bandit.arms", "an integer"),
    (["protocol.name='ucb2'"], "protocol.name", "did you mean 'ucb1'"),
    (["network.topology='rign'"], "network.topology", "did you mean 'ring'"),
    (["bandit.kind='bernouli'"], "bandit.kind", "did you mean 'bernoulli'"),
    (["bandit.means=[0.2, 1.4, 0.5]"], "bandit.means", "[0, 1]"),
    (["bandit.means=[0.2, 0.5]"], "bandit.means", "one mean per arm"),
    (["network.delay={model='gamma'}"], "network.delay.model", "constant, uniform, exponential, lognormal"),
    (["network.delay={model='uniform', low=3, high=1}"], "network.delay.low", "must not exceed"),
    (["network.components=[1, 2]"], "network.components", "sum to network.agents"),
    (["adversary.agents=[9]"], "adversary.agents", "0..3"),
    (["network.topology='edgelist'", "network.file='missing.txt'"], "network.file", "not found"),
    (["network.topology='erdos_renyi'", "network.p=0.0", "network.tries=3"], "network.p", "larger p"),
    (["network.topology='random_regular'", "network.agents=5", "network.degree=3"], "network.degree", "even"),
    (["clock.jitter=1.0"], "clock.jitter", "< 1"),
]


@pytest.mark.parametrize("overrides,key,fragment", BAD)
def test_bad_input_names_file_key_and_accepted_values(tmp_path, overrides, key, fragment):
    path = write(tmp_path, BASE)
    with pytest.raises(InputError) as info:
        S.load(path, overrides)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(path)
    assert key in message
    assert fragment in message


def test_toml_syntax_error_names_file(tmp_path):
    path = write(tmp_path, "name = \n[bandit")
    with pytest.raises(InputError, match="TOML syntax error") as info:
        S.load(path)
    assert str(info.value).startswith(path)


def test_missing_file_and_unknown_bundled_name():
    with pytest.raises(InputError, match="not found"):
        S.load("does/not/exist.toml")
    with pytest.raises(InputError, match="did you mean 'quickstart'"):
        S.load("quickstrt")


def test_bad_set_syntax():
    with pytest.raises(InputError, match="KEY=VALUE"):
        S.load(None, ["network.agents"])


def test_disconnected_graph_rejected_when_protocol_needs_connectivity(tmp_path):
    from netsim.comm.protocol import Protocol
    from netsim.engine.registry import protocols

    class NeedsConnected(Protocol):
        name = "test-needs-connected"
        requires_connected = True

    protocols._items.setdefault(NeedsConnected.name, NeedsConnected)
    edges = tmp_path / "edges.txt"
    edges.write_text("0 1\n2 3\n")
    text = BASE.replace('topology = "ring"', f'topology = "edgelist"\nfile = "{edges.name}"').replace(
        'name = "ucb1"', 'name = "test-needs-connected"')
    path = write(tmp_path, text)
    with pytest.raises(InputError, match="disconnected") as info:
        S.load(path)
    assert "network.topology" in str(info.value)
    # the same graph is fine for a protocol that does not communicate
    assert S.load(path, ["protocol.name='ucb1'"]).network["topology"] == "edgelist"


def test_components_and_servers_build_expected_graph():
    sc = S.from_dict(scenario_dict(network={"topology": "complete", "agents": 7, "components": [3, 4],
                                            "servers": 1}))
    net = S.build_network(sc, simpy.Environment(), Streams(np.random.SeedSequence(0)))
    assert net.components == [[0, 1, 2], [3, 4, 5, 6]]
    assert net.servers == [7]
    agent_graph = net.agent_graph
    assert nx.number_connected_components(agent_graph) == 2
    assert agent_graph.number_of_edges() == 3 + 6
    assert sorted(net.neighbors(7)) == list(range(7))


@pytest.mark.parametrize("topology,extra,edges", [
    ("complete", {}, 15), ("star", {}, 5), ("ring", {}, 6), ("path", {}, 5), ("grid", {"rows": 2}, 7),
    ("random_regular", {"degree": 2}, 6), ("barabasi_albert", {"m": 2}, 8), ("watts_strogatz", {"k": 2}, 6),
])
def test_topology_edge_counts(topology, extra, edges):
    sc = S.from_dict(scenario_dict(network={"topology": topology, "agents": 6, **extra}))
    net = S.build_network(sc, simpy.Environment(), Streams(np.random.SeedSequence(1)))
    assert net.graph.number_of_edges() == edges


def test_erdos_renyi_resampled_until_connected():
    sc = S.from_dict(scenario_dict(network={"topology": "erdos_renyi", "agents": 30, "p": 0.12}))
    for seed in range(5):
        net = S.build_network(sc, simpy.Environment(), Streams(np.random.SeedSequence(seed)))
        assert nx.is_connected(net.graph)


def test_edgelist_relative_to_scenario(tmp_path):
    (tmp_path / "g.txt").write_text("# a triangle and a tail\n0 1\n1 2\n2 0\n2 3\n")
    text = BASE.replace('topology = "ring"', 'topology = "edgelist"\nfile = "g.txt"')
    sc = S.load(write(tmp_path, text))
    net = S.build_network(sc, simpy.Environment(), Streams(np.random.SeedSequence(0)))
    assert sorted(net.graph.edges()) == [(0, 1), (0, 2), (1, 2), (2, 3)]


def test_negative_zero_is_read_as_zero(tmp_path):
    """high = -0.0 with low = 0.0 passes 'low must not exceed high' (-0.0 == 0.0) but numpy refused
    uniform(0.0, -0.0) with a traceback (found by test_input_fuzz); a real is now read with -0.0 as 0.0."""
    import math

    import netsim

    sc = S.load(write(tmp_path, BASE), ["bandit.high=-0.0"])
    assert sc.bandit["high"] == 0.0 and math.copysign(1.0, sc.bandit["high"]) == 1.0
    assert (netsim.run(sc).trials["group_regret"] == 0.0).all()   # every arm's mean is 0: no regret
