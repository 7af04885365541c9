"""Broadcasts are noted by their sender alone (``Metrics.pending_sources``) and counted when marked: with numpy
when many share an instant, through the slot's set of edge ids when few. Checked here against a plain model
written from li2022 Eq. (2): a link counts once per slot in which it carries a message, a node's sent count
is the number of messages it sent, a node's link count the links at it counted so.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.engine.distributions import Distribution
from netsim.engine.metrics import Metrics
from netsim.engine.network import Network

TIMES = [0.0, 0.25, 1.0, 1.5, 2.0, 2.75, 4.0]  # instants: several per slot (slot = 1), and slots skipped


def network(agents: int, servers: int, p: float, seed: int, loss: float) -> Network:
    graph = nx.gnp_random_graph(agents, p, seed=seed)
    graph.add_edges_from((s, a) for s in range(agents, agents + servers) for a in range(agents))
    law = Distribution("exponential", {"mean": 1.0})
    metrics = Metrics(agents + servers, agents, 1.0, 25.0)
    net = Network(simpy.Environment(), graph, num_agents=agents, components=[list(range(agents))], delay=law,
                  server_delay=law, loss=loss, link_overrides={}, rng=np.random.default_rng(seed), metrics=metrics)
    net.subscribe("M", lambda message: None)
    return net


step = st.tuples(st.sampled_from(range(len(TIMES))),
                 st.sampled_from(["broadcast", "many", "send", "activate", "read"]),
                 st.integers(0, 10_000))


@settings(max_examples=60, deadline=None)
@given(agents=st.integers(2, 70), servers=st.integers(0, 2), p=st.sampled_from([0.05, 0.2, 0.6]),
       seed=st.integers(0, 1000), loss=st.sampled_from([0.0, 0.5]), plan=st.lists(step, min_size=1, max_size=12))
def test_noted_broadcasts_count_sends_and_links_as_the_plain_model(agents, servers, p, seed, loss, plan):
    """Broadcasts of one sender, of many agents at once (numpy marking when >= Metrics.ARRAY_FROM senders), sends
    to one neighbour and activations, several per instant and per slot, with reads of the counters between
    instants: sent counts (counted before losses) and links built per slot are those of the plain model."""
    net = network(agents, servers, p, seed, loss)
    env, m = net.env, net.metrics
    nodes = agents + servers
    sent = [0] * nodes
    built: set[tuple[int, int, int]] = set()  # (slot, u, v), u < v
    reads = []

    def use(now, u, v):
        built.add((int(now // 1.0), min(u, v), max(u, v)))

    def links_of(slots_up_to):
        mine = [(u, v) for slot, u, v in built if slot <= slots_up_to]
        server = sum(1 for u, v in mine if v >= agents)
        per_node = [0] * nodes
        for u, v in mine:
            per_node[u] += 1
            per_node[v] += 1
        return len(mine) - server, server, per_node

    def script():
        for when, what, pick in sorted(plan, key=lambda s: s[0]):
            now = TIMES[when]
            if now > env.now:
                yield env.timeout(now - env.now)
            src = pick % nodes
            neighbours = net.neighbors(src)
            if what == "broadcast":
                net.broadcast(src, "M", pick)
                sent[src] += len(neighbours)
                for v in neighbours:
                    use(now, src, v)
            elif what == "many":  # about two agents in three, so that some links have one sending end only
                senders = [a for a in range(agents) if (a * 7919 + pick) % 3]
                if pick % 2:
                    net.broadcast_each(senders, "M", senders)
                else:
                    for s in senders:
                        net.broadcast(s, "M", s)
                for s in senders:
                    sent[s] += len(net.neighbors(s))
                    for v in net.neighbors(s):
                        use(now, s, v)
            elif what == "send" and neighbours:
                dst = neighbours[pick % len(neighbours)]
                net.send(src, dst, "M", pick)
                sent[src] += 1
                use(now, src, dst)
            elif what == "activate" and neighbours:
                dst = neighbours[pick % len(neighbours)]
                net.activate(src, dst)
                use(now, src, dst)
            elif what == "read":
                reads.append((now, m.node_sent.tolist(), m.links_agent_agent, m.links_server_agent,
                              m.node_links.tolist(), list(sent), links_of(int(now // 1.0))))

    env.process(script())
    env.run()
    for _, node_sent, agent_agent, server_agent, node_links, expected_sent, expected_links in reads:
        assert node_sent == expected_sent
        assert (agent_agent, server_agent, node_links) == expected_links
    assert m.node_sent.tolist() == sent
    assert (m.links_agent_agent, m.links_server_agent, m.node_links.tolist()) == links_of(len(TIMES))
    assert sum(c.sent for c in m.messages.values()) == sum(sent)


def test_many_senders_at_one_instant_take_the_array_marking():
    """The test above reaches the numpy marking: 48 of 64 agents broadcasting at one instant open the slot with a
    sorted array of distinct edge ids (no Python set), the edges with at least one sending end."""
    net = network(64, 0, 0.2, 3, 0.0)
    m = net.metrics
    senders = [a for a in range(64) if a % 4]
    for s in senders:
        net.broadcast(s, "M", s)
    assert len(net._noted) == 48 and not m.pending_sources  # noted by the network (Network.broadcast)
    net._send_noted()
    assert len(m.pending_sources) == 48 >= Metrics.ARRAY_FROM
    m._mark_pending()
    assert m._slot_array is not None and not m._slot_edges
    edges = sorted(net._edge_of[u][v] for u, v in net.graph.edges if u % 4 or v % 4)
    assert m._slot_array.tolist() == edges and m.links_agent_agent == len(edges) < net.graph.number_of_edges()
    assert m.node_sent.tolist() == [len(net.neighbors(a)) if a % 4 else 0 for a in range(64)]


def test_edge_ids_at_each_node_are_made_from_the_edges_when_not_given():
    """Metrics without the network's lists of edge ids per node makes them from the numbered edges: a few noted
    broadcasts (the set path) count the same sends and links as with the lists given."""
    u, v = np.array([0, 0, 1, 2]), np.array([1, 2, 2, 3])  # a triangle 0-1-2 and the edge 2-3
    results = []
    for incident in (None, [[0, 1], [0, 2], [1, 2, 3], [3]]):
        m = Metrics(4, 4, 1.0, 25.0)
        m.set_edges(u, v, incident=incident)
        m.pending_at = 0.0
        m.pending_sources += [3, 3, 1]
        results.append((m.node_sent.tolist(), m.links_agent_agent, m.node_links.tolist()))
    assert results[0] == results[1] == ([0, 2, 0, 2], 3, [1, 2, 2, 1])
