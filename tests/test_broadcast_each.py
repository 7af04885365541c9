"""``Network.broadcast_each`` is exactly ``broadcast`` called once per sender, in order.

Two networks built alike (graph, delay law, loss, faults, seeds) run the same script: at each
instant a list of senders with their payloads, and a handler that relays the first hop of every
message from two senders at once (so sends made inside the delivery loop are compared too). One
network sends each list with a loop of :meth:`Network.broadcast`, the other with one
:meth:`Network.broadcast_each`. The delivered messages (every field, the clock at each handler
call, the order), the tracer's events, the counters, the link accounting (li2022 Eq. 2), the
sequence counter and the delay stream's position must be the same. Delay blocks of 5 draws make
a call's delays cross blocks often.
"""

from __future__ import annotations

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.engine import delays as D
from netsim.engine.distributions import Distribution
from netsim.engine.errors import ProtocolError
from tests.test_delivery_heap import build as build_network

LAWS = [Distribution("exponential", {"mean": 0.7}), Distribution("constant", {"value": 1.0}),
        Distribution("constant", {"value": 0.0}), Distribution("bernoulli", {"p": 0.5}),
        Distribution("uniform", {"low": 1.0, "high": 1.0})]
FAULTS = [{}, {"duplication": 0.3, "reorder": 0.3}, {"crashes": [{"node": 1, "start": 0.5, "end": 2.5}]}]


def build(graph, law, loss, faults_spec, seed, traced):
    net = build_network(law, loss, faults_spec, seed, graph=graph)
    events = []
    if traced:
        net.tracer = lambda event, m: events.append((event, tuple(m)))
    return net, events


def run(net, script, bulk):
    env, got = net.env, []

    def send(srcs, payloads):
        if bulk:
            net.broadcast_each(srcs, "M", payloads, size=2)
        else:
            for src, payload in zip(srcs, payloads, strict=True):
                net.broadcast(src, "M", payload, size=2)

    def handler(m):
        got.append((env.now, *m))
        if m.payload[1] == 0:  # relay once, from two senders at once, inside the delivery loop
            send([m.dst, m.src], [(m.payload[0], 1), (m.payload[0], 2)])

    net.subscribe("M", handler)

    def clock():
        for i, (when, srcs) in enumerate(script):
            if when > env.now:
                yield env.timeout(when - env.now)
            send(srcs, [(i * 100 + j, 0) for j in range(len(srcs))])

    env.process(clock())
    env.run()
    return got


script = st.lists(st.tuples(st.integers(0, 4), st.lists(st.integers(0, 7), max_size=8)), min_size=1, max_size=6)


@settings(max_examples=80, deadline=None)
@given(script=script, law=st.sampled_from(LAWS), loss=st.sampled_from([0.0, 0.3]), faults=st.sampled_from(FAULTS),
       p=st.floats(0.1, 0.9), graph_seed=st.integers(0, 1000), seed=st.integers(0, 1000), traced=st.booleans(),
       block=st.sampled_from([5, D.BLOCK]))
def test_broadcast_each_is_the_loop_of_broadcasts(script, law, loss, faults, p, graph_seed, seed, traced, block):
    script = sorted(((float(w), srcs) for w, srcs in script), key=lambda s: s[0])
    graph = nx.gnp_random_graph(8, p, seed=graph_seed)
    saved, D.BLOCK = D.BLOCK, block
    try:
        outcomes = []
        for bulk in (False, True):
            net, events = build(graph, law, loss, faults, seed, traced)
            got = run(net, script, bulk)
            m = net.metrics
            counts = m.kind("M")
            delays = [(d.at, d.array.tolist()) for d in net._delays.values()]
            outcomes.append((got, events, counts.sent, counts.delivered, counts.dropped, counts.records,
                             m.node_sent.tolist(), m.node_received.tolist(), m.links_agent_agent,
                             m.node_links.tolist(), next(net._sequence), delays, dict(m.extras), net.in_flight))
    finally:
        D.BLOCK = saved
    assert outcomes[0] == outcomes[1]


def test_broadcast_each_wants_one_payload_per_sender():
    net, _ = build(nx.path_graph(3), LAWS[0], 0.0, {}, 0, False)
    with pytest.raises(ProtocolError, match="one payload per sender"):
        net.broadcast_each([0, 1], "M", [None])
