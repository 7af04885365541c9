"""The engine's fast paths (issue 11 profile fix) give the same counts as the plain definitions.

* ``Metrics.links_used`` with long destination lists goes through a cache of pair sets; the
  links built per slot (li2022 Eq. 2) must equal an independent count of distinct pairs per slot.
* ``Metrics.edges_used`` with edge ids (a broadcast): an array that opens a slot is kept as a
  sorted array of distinct ids (no Python set) until a later use in the slot merges it into the
  slot's set; the count must be the same, mixed with single ``edge_used`` calls and deferred notes.
* ``Network._deliver_plain`` (no tracer, no per-node handler) must deliver in send order, call
  batch handlers once per instant, and count every message as on the general path.
* The deferred link accounting (edge ids noted by sends, marked in bulk with set operations,
  newly built edges summed with numpy when read) must equal an independent count of distinct
  (slot, edge) pairs, whatever the order of notes, direct marks and reads.
* A stretch of one kind (``netsim.engine.delivery``) interrupted by a raising handler counts
  exactly the messages it delivered.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.engine.metrics import Metrics
from tests.conftest import make_network

NODES, AGENTS = 12, 10  # ids 10, 11 play servers


def _reference(sends):
    """Distinct pairs per slot, split agent-agent / server-agent, and per-node link counts."""
    seen, aa, sa, per_node = set(), 0, 0, [0] * NODES
    for u, others, now in sends:
        for v in others:
            key = (int(now // 1.0), min(u, v), max(u, v))
            if key in seen:
                continue
            seen.add(key)
            if max(u, v) >= AGENTS:
                sa += 1
            else:
                aa += 1
            per_node[u] += 1
            per_node[v] += 1
    return aa, sa, per_node


send = st.tuples(st.integers(0, NODES - 1), st.lists(st.integers(0, NODES - 1), max_size=9, unique=True),
                 st.floats(0, 4, allow_nan=False))


@settings(max_examples=150, deadline=None)
@given(st.lists(send, max_size=40))
def test_links_used_matches_distinct_pairs_per_slot(sends):
    sends = [(u, [v for v in others if v != u], now) for u, others, now in sends]
    sends.sort(key=lambda s: s[2])                 # time only moves forward
    metrics = Metrics(NODES, AGENTS, 1.0, 25.0)
    metrics.CACHE_SIZE = 3                          # exercise the cache clearing too
    for u, others, now in sends:
        metrics.links_used(u, others, now)
    aa, sa, per_node = _reference(sends)
    assert (metrics.links_agent_agent, metrics.links_server_agent) == (aa, sa)
    assert metrics.links_by_node == per_node


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.lists(st.integers(0, 65), max_size=120), st.floats(0, 4, allow_nan=False)),
                max_size=12))
def test_edges_used_matches_distinct_pairs_per_slot(batches):
    """Edge ids of the complete graph on 12 nodes (66 edges), in batches small and large."""
    pairs = [(u, v) for u in range(NODES) for v in range(u + 1, NODES)]
    metrics = Metrics(NODES, AGENTS, 1.0, 25.0)
    metrics.set_edges(np.array([u for u, _ in pairs]), np.array([v for _, v in pairs]))
    batches.sort(key=lambda b: b[1])                # time only moves forward
    for edges, now in batches:
        if len(edges) == 1:
            metrics.edge_used(edges[0], now)
        else:
            metrics.edges_used(np.array(edges, dtype=np.int64), now)
    aa, sa, per_node = _reference([(pairs[e][0], [pairs[e][1]], now) for edges, now in batches for e in edges])
    assert (metrics.links_agent_agent, metrics.links_server_agent) == (aa, sa)
    assert metrics.node_links.tolist() == per_node


def test_plain_delivery_order_and_counts():
    net = make_network(nx.complete_graph(5))
    seen, batches = [], []
    net.subscribe("a", lambda m: seen.append(("a", m.src, m.dst)))
    net.subscribe("c", lambda m: seen.append(("c", m.src, m.dst)))
    net.subscribe_batch("b", lambda ms: batches.append([(m.src, m.dst) for m in ms]))

    def clock():
        net.send(0, 1, "a")
        net.broadcast(2, "b")
        net.send(3, 4, "c")
        net.send(4, 3, "a")
        net.send_many(1, [0, 2], "b")
        yield net.env.timeout(5)

    net.env.process(clock())
    net.env.run()
    assert seen == [("a", 0, 1), ("c", 3, 4), ("a", 4, 3)]          # send order across kinds
    assert batches == [[(2, 0), (2, 1), (2, 3), (2, 4), (1, 0), (1, 2)]]  # one call per instant
    m = net.metrics
    assert (m.messages["a"].delivered, m.messages["b"].delivered, m.messages["c"].delivered) == (2, 6, 1)
    assert m.node_received.tolist() == [2, 2, 1, 2, 2]


EDGE_U = [0, 0, 1, 2, 3, 0, 4, 2]   # edges 5..7 touch node 10 or 11, the servers
EDGE_V = [1, 2, 2, 3, 4, 10, 11, 11]
operation = st.tuples(st.sampled_from(["defer", "edge", "edges", "read"]),
                      st.lists(st.integers(0, len(EDGE_U) - 1), max_size=6), st.floats(0, 1.5, allow_nan=False))


@settings(max_examples=150, deadline=None)
@given(st.lists(operation, max_size=40), st.booleans())
def test_deferred_link_accounting_matches_distinct_edges_per_slot(operations, as_array):
    """Edge ids noted for later (as a send does), marked one by one or in lists, read at any point:
    the links built (li2022 Eq. 2), per kind and per node, and every ``edge_used`` answer, equal an
    independent count of distinct (slot, edge) pairs."""
    metrics = Metrics(NODES, AGENTS, 1.0, 25.0)
    metrics.SUM_FROM = 3  # exercise the summing of noted edges too
    metrics.set_edges(np.array(EDGE_U), np.array(EDGE_V))
    built, now = set(), 0.0
    for what, edges, step in operations:
        now += step  # time only moves forward
        if what == "defer":
            if now != metrics.pending_at:
                metrics.defer_from(now)
            metrics.pending_edges.append(edges)
            built |= {(now // 1.0, e) for e in edges}
        elif what == "edge" and edges:
            assert metrics.edge_used(edges[0], now) == ((now // 1.0, edges[0]) not in built)
            built.add((now // 1.0, edges[0]))
        elif what == "edges":
            metrics.edges_used(np.array(edges, dtype=np.int64) if as_array else edges, now)
            built |= {(now // 1.0, e) for e in edges}
        servers = sum(1 for _, e in built if EDGE_V[e] >= AGENTS)
        per_node = [sum((EDGE_U[e] == v) + (EDGE_V[e] == v) for _, e in built) for v in range(NODES)]
        if what == "read" or what == "edge":
            assert (metrics.links_agent_agent, metrics.links_server_agent) == (len(built) - servers, servers)
            assert metrics.node_links.tolist() == per_node
    servers = sum(1 for _, e in built if EDGE_V[e] >= AGENTS)
    assert metrics.comm_cost == (len(built) - servers) * 1.0 + servers * 25.0


def test_a_handler_that_raises_inside_a_stretch_leaves_exact_counts():
    """A run of one kind with a per-message handler is delivered as one stretch; a handler that
    raises after k messages must leave exactly those k counted as delivered (per kind and per
    receiver) and the rest in flight, and the rest must still arrive, in due order, afterwards."""
    from netsim.engine.distributions import Distribution

    net = make_network(nx.cycle_graph(6), delay=Distribution("exponential", {"mean": 1.0}), seed=3)
    seen = []

    def handler(message):
        seen.append(message)
        if len(seen) == 5:
            raise RuntimeError("stop")

    net.subscribe("m", handler)
    for src in range(6):
        net.broadcast(src, "m", src)
    try:
        net.env.run()
    except RuntimeError:
        pass
    counts = net.metrics.messages["m"]
    assert (counts.sent, counts.delivered, net.in_flight) == (12, 5, 7)
    assert net.metrics.node_received.tolist() == np.bincount([m.dst for m in seen], minlength=6).tolist()
    net.env.run()
    assert (counts.delivered, net.in_flight, len(seen)) == (12, 0, 12)
    dues = [m.due_at for m in seen]
    assert dues == sorted(dues) and len({(m.src, m.dst) for m in seen}) == 12
    assert net.metrics.node_received.tolist() == [2] * 6


def test_receivers_noted_by_stretches_are_counted_exactly():
    """A stretch notes its receivers (``Metrics.received_ids``) instead of counting them one by one; they
    are counted when ``node_received`` is read and whenever SUM_FROM are waiting. At every stop the
    per-node counts equal an independent count of what the handler saw."""
    from netsim.engine.distributions import Distribution

    net = make_network(nx.cycle_graph(7), delay=Distribution("exponential", {"mean": 1.0}), seed=5)
    net.metrics.SUM_FROM = 5  # small: the fold inside the delivery loop runs many times
    seen, longest = [], [0]

    def handler(message):
        seen.append(message.dst)
        longest[0] = max(longest[0], sum(map(len, net.metrics.received_ids)))

    net.subscribe("m", handler)

    def clock():
        for _ in range(6):
            for src in range(7):
                net.broadcast(src, "m", src)
            yield net.env.timeout(1.0)

    net.env.process(clock())
    for stop in (1.5, 3.2, 4.0, 20.0):
        net.env.run(until=stop)
        assert net.metrics.node_received.tolist() == np.bincount(seen, minlength=7).tolist()
        assert net.metrics.messages["m"].delivered == len(seen) and not net.metrics.received_ids
    assert len(seen) == 6 * 14 and longest[0] < 5 + 14  # folded during the run, not only when read


def test_the_run_keeps_the_objects_sent():
    """The run holds its messages as arrays (``netsim.engine.messages._Columns``): handlers still get the very
    objects sent. An int time stays an int: the send time at time 0 of a broadcast with sampled delays, and the
    due time of a send over an int constant delay made at an int time (such an entry waits on the heap); a
    tuple payload stays one tuple."""
    from netsim.engine.distributions import Distribution

    got = []
    sampled = make_network(nx.complete_graph(3), delay=Distribution("uniform", {"low": 1.0, "high": 2.0}))
    sampled.subscribe("m", lambda message: got.append(message))

    def later():  # a second call at a float time, while the first call's messages are in flight
        yield sampled.env.timeout(0.5)
        sampled.broadcast_each([2], "m", [[5]])

    sampled.broadcast_each([0, 1], "m", [(1, 2), (3, 4)])
    sampled.env.process(later())
    sampled.env.run()
    assert sorted((m.src, m.dst, m.payload, m.sent_at) for m in got) == [
        (0, 1, (1, 2), 0), (0, 2, (1, 2), 0), (1, 0, (3, 4), 0), (1, 2, (3, 4), 0), (2, 0, [5], 0.5), (2, 1, [5], 0.5)]
    assert [type(m.sent_at) for m in got if m.src < 2] == [int] * 4
    assert all(type(m.due_at) is float and m.size == 1 for m in got)
    got.clear()
    constant = make_network(nx.path_graph(2), delay=Distribution("constant", {"value": 1}))
    constant.subscribe("m", lambda message: got.append((message, constant.env.now)))
    constant.send(0, 1, "m", "x")
    constant.env.run()
    ((message, now),) = got
    assert (type(message.sent_at), type(message.due_at), type(now)) == (int, int, int) and message.due_at == 1
