"""Message delivery, batching, loss, corruption and link accounting (li2022 Eq. 2)."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.engine.distributions import Distribution
from netsim.engine.errors import ProtocolError
from netsim.engine.network import Adversary
from tests.conftest import make_network

DELAYS = {
    "constant": Distribution("constant", {"value": 0.7}),
    "uniform": Distribution("uniform", {"low": 0.2, "high": 2.0}),
    "exponential": Distribution("exponential", {"mean": 1.3}),
    "lognormal": Distribution("lognormal", {"mean": 1.0, "sigma": 0.8}),
}


def _record(network, kind="M"):
    seen = []
    network.subscribe(kind, lambda m: seen.append((network.env.now, m)))
    return seen


def _random_traffic(network, rng, count, horizon=20.0):
    """Schedule ``count`` sends at random times along random edges."""
    edges = list(network.graph.edges())
    for i in range(count):
        u, v = edges[rng.integers(len(edges))]
        if rng.random() < 0.5:
            u, v = v, u
        network.env.process(_send_at(network, float(rng.uniform(0, horizon)), u, v, i))


def _send_at(network, when, u, v, i):
    yield network.env.timeout(when)
    network.send(u, v, "M", i)


@pytest.mark.parametrize("model", sorted(DELAYS))
def test_delivery_never_before_send_plus_delay(model):
    network = make_network(nx.cycle_graph(6), delay=DELAYS[model], seed=4)
    seen = _record(network)
    _random_traffic(network, np.random.default_rng(1), 300)
    network.env.run()
    assert len(seen) == 300
    for now, message in seen:
        assert now == message.due_at  # delivered exactly when due
        assert message.due_at >= message.sent_at
    delays = np.array([m.due_at - m.sent_at for _, m in seen])
    if model == "constant":
        assert np.allclose(delays, 0.7, rtol=0, atol=1e-12)
    else:
        # the sampled delays follow the model: mean within 4 standard errors
        dist = DELAYS[model]
        sample = dist.sample(np.random.default_rng(9), 200_000)
        assert abs(delays.mean() - dist.mean) < 4 * sample.std() / np.sqrt(len(delays))


def test_constant_delay_exact_times_and_send_order():
    network = make_network(nx.path_graph(3), delay=Distribution("constant", {"value": 2.5}))
    seen = _record(network)

    def sender():
        network.send(0, 1, "M", "a")
        network.send(2, 1, "M", "b")
        yield network.env.timeout(1.0)
        network.send(1, 0, "M", "c")

    network.env.process(sender())
    network.env.run()
    assert [(t, m.payload) for t, m in seen] == [(2.5, "a"), (2.5, "b"), (3.5, "c")]


@settings(max_examples=30, deadline=None)
@given(
    loss=st.floats(0.0, 1.0),
    count=st.integers(1, 200),
    stop=st.floats(0.0, 25.0),
    seed=st.integers(0, 2**16),
)
def test_sent_equals_delivered_plus_dropped_plus_in_flight(loss, count, stop, seed):
    network = make_network(nx.complete_graph(5), delay=DELAYS["exponential"], loss=loss, seed=seed)
    _record(network)
    _random_traffic(network, np.random.default_rng(seed), count)
    network.env.run(until=stop) if stop > 0 else None
    counts = network.metrics.kind("M")
    sent_so_far = counts.sent
    assert sent_so_far == counts.delivered + counts.dropped + network.in_flight
    assert counts.in_flight == network.in_flight
    network.env.run()
    assert counts.sent == count and network.in_flight == 0
    assert counts.delivered + counts.dropped == count


def test_loss_rate_matches_probability():
    network = make_network(nx.complete_graph(4), loss=0.3, seed=11)
    _record(network)
    for _ in range(20_000):
        network.send(0, 1, "M")
    counts = network.metrics.kind("M")
    # binomial(20000, 0.3): sd = 64.8; tolerance 4 sd (false alarm 6e-5, power 0.98 against a loss of 0.32)
    assert abs(counts.dropped - 6000) < 4 * np.sqrt(20_000 * 0.3 * 0.7)


def test_same_instant_messages_share_one_event():
    network = make_network(nx.star_graph(50))
    seen = _record(network)
    for leaf in range(1, 51):
        network.send(0, leaf, "M")
    assert len(network.env._queue) == 1  # one wake-up event for the whole instant
    network.env.run()
    assert len(seen) == 50


def test_batch_subscriber_gets_all_messages_of_an_instant():
    network = make_network(nx.star_graph(4))
    batches = []
    network.subscribe_batch("B", lambda msgs: batches.append([m.dst for m in msgs]))
    for leaf in (3, 1, 2):
        network.send(0, leaf, "B")
    network.env.run()
    assert batches == [[3, 1, 2]]


def test_send_to_non_neighbour_is_a_protocol_error():
    network = make_network(nx.path_graph(3))
    with pytest.raises(ProtocolError, match="not a neighbour"):
        network.send(0, 2, "M")


def test_unsubscribed_kind_is_a_protocol_error():
    network = make_network(nx.path_graph(2))
    network.send(0, 1, "X")
    with pytest.raises(ProtocolError, match="nobody subscribed"):
        network.env.run()


def test_per_link_override():
    graph = nx.path_graph(3)
    slow = Distribution("constant", {"value": 5.0})
    network = make_network(graph, overrides={(2, 1): (slow, 0.0)})
    seen = _record(network)
    network.send(0, 1, "M")
    network.send(1, 2, "M")
    network.env.run()
    assert [t for t, _ in seen] == [1.0, 5.0]


# ---------------------------------------------------------------------- link accounting
def _messages_at(network, plan):
    """plan: list of (time, u, v); send one message per entry."""
    _record(network)
    for when, u, v in plan:
        network.env.process(_send_at(network, when, u, v, 0))
    network.env.run()


def test_two_way_link_counts_once_per_slot():
    network = make_network(nx.path_graph(3), cost_agent_agent=2.0)
    # slot 0: 0->1, 1->0, 0->1 (one pair); 1->2 (second pair). slot 1: 1->0 again. slot 3: 2->1.
    _messages_at(network, [(0.0, 0, 1), (0.2, 1, 0), (0.9, 0, 1), (0.5, 1, 2), (1.0, 1, 0), (3.4, 2, 1)])
    m = network.metrics
    assert m.links_agent_agent == 4
    assert m.comm_cost == 8.0
    assert list(m.node_links) == [2, 4, 2]


def test_server_agent_links_cost_c1():
    graph = nx.empty_graph(3)  # three agents, no agent links
    graph.add_edges_from((3, a) for a in range(3))  # server 3
    network = make_network(graph, num_agents=3, cost_agent_agent=1.0, cost_server_agent=25.0)
    # one round: every agent uploads, the server broadcasts back, all in slot 0 -> 3 links, c1 each
    _messages_at(network, [(0.0, a, 3) for a in range(3)] + [(0.5, 3, a) for a in range(3)])
    assert network.metrics.links_server_agent == 3
    assert network.metrics.links_agent_agent == 0
    assert network.metrics.comm_cost == 75.0


def test_gossip_round_on_ring_counts_every_edge_once():
    ring = nx.cycle_graph(5)
    network = make_network(ring)
    # every agent broadcasts to both neighbours at t = 0: each of the 5 edges carries two messages
    _record(network)
    for a in range(5):
        network.broadcast(a, "M")
    network.env.run()
    assert network.metrics.links_agent_agent == 5


def test_activate_without_message_counts_link():
    network = make_network(nx.path_graph(2))
    assert network.activate(0, 1) is True
    assert network.activate(1, 0) is False  # same slot, same pair
    assert network.metrics.links_agent_agent == 1
    with pytest.raises(ProtocolError):
        make_network(nx.path_graph(3)).activate(0, 2)


def test_slot_length_changes_accounting():
    network = make_network(nx.path_graph(2), slot=2.0)
    _messages_at(network, [(0.0, 0, 1), (1.5, 0, 1), (2.0, 0, 1)])
    assert network.metrics.links_agent_agent == 2


# ---------------------------------------------------------------------- corruption
def _flip(payload, *, sender, rng, probability, q, relay):
    values = np.array(payload, dtype=float)
    mask = rng.random(len(values)) < probability
    values[mask] = q.sample(rng, int(mask.sum()))
    return values, int(mask.sum())


def test_byzantine_sender_corrupts_and_is_counted():
    network = make_network(nx.path_graph(3))
    q = Distribution("constant", {"value": -1.0})
    network.adversary = Adversary(frozenset({0}), 1.0, q, False, 0.0)
    network._adversary_rng = np.random.default_rng(0)
    network.corruptible("R", _flip)
    seen = _record(network, "R")
    network.send(0, 1, "R", [0.5, 0.5])
    network.send(2, 1, "R", [0.5, 0.5])
    network.env.run()
    payloads = {m.src: list(m.payload) for _, m in seen}
    assert payloads[0] == [-1.0, -1.0] and payloads[2] == [0.5, 0.5]
    assert network.metrics.kind("R").corrupted == 1


def test_link_corruption_rate():
    network = make_network(nx.path_graph(2))
    q = Distribution("constant", {"value": 0.0})
    network.adversary = Adversary(frozenset(), 0.0, q, False, 0.25)
    network._adversary_rng = np.random.default_rng(5)
    network.corruptible("R", _flip)
    _record(network, "R")
    for _ in range(4000):
        network.send(0, 1, "R", [1.0])
    network.env.run()
    # binomial(4000, 0.25): sd = 27.4; 4 sd: false alarm 6e-5, power 0.999 against a rate of 0.3
    assert abs(network.metrics.kind("R").corrupted - 1000) < 4 * 27.4


@pytest.mark.parametrize(("model", "loss"), [("constant", 0.0), ("constant", 0.3), ("exponential", 0.0),
                                              ("zero", 0.0)])
def test_send_each_is_send_in_a_loop(model, loss):
    """Many senders, one destination: the same messages, times, order, counters and link books as send()
    one at a time (the plain constant-delay pass and the general path)."""
    delay = Distribution("constant", {"value": 0.0}) if model == "zero" else DELAYS[model]

    def run(batched):
        network = make_network(nx.star_graph(6), delay=delay, loss=loss, seed=4)
        seen = []
        network.subscribe_batch("U", lambda ms: seen.extend((network.env.now, m.src, m.dst, m.payload) for m in ms))

        def traffic():
            for t in range(3):
                srcs, payloads = [5, 1, 3, 2], [(t, s) for s in (5, 1, 3, 2)]
                if batched:
                    network.send_each(srcs, 0, "U", payloads, size=4)
                else:
                    for s, p in zip(srcs, payloads, strict=True):
                        network.send(s, 0, "U", p, size=4)
                network.send(0, 4, "U", ("after", t))
                yield network.env.timeout(1.0)

        network.env.process(traffic())
        network.env.run(until=10.0)
        metrics = network.metrics
        counts = metrics.messages["U"]
        return (seen, (counts.sent, counts.records, counts.dropped), metrics.node_sent.tolist(),
                metrics.node_links.tolist(), metrics.node_received.tolist())

    assert run(True) == run(False)
    assert len(run(True)[0]) > 0


def test_send_each_refuses_a_non_neighbour():
    network = make_network(nx.path_graph(3))
    with pytest.raises(ProtocolError, match="not a neighbour"):
        network.send_each([1, 0], 2, "U", ["a", "b"])
