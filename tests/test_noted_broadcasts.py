"""Noted broadcasts (``Network.broadcast`` on plain links outside the delivery loop) against plain reference models.

A broadcast there is only noted; the broadcasts noted at one instant are made together, as ``broadcast_each``
calls, before anything can see them. The engine must deliver exactly the messages a plain ``(due, sequence)``
heap predicts, at the same times and in the same order, with the counters of the calls made one by one at every
read: broadcasts interleaved with other sends and with reads of ``in_flight``, the sent counts and the links; from
ticks and from handlers; zero, tied and continuous delays; and, where broadcasts are not noted (loss, duplication,
reordering, crashes), the same predictions through the send path.
"""

from __future__ import annotations

import heapq

import networkx as nx
import numpy as np
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.engine.delays import BLOCK
from netsim.engine.distributions import Distribution
from netsim.engine.metrics import Metrics
from netsim.engine.network import Network
from tests.test_delivery_heap import LAWS, NODES, TIED, build, reference

# (loss, faults): plain links (broadcasts noted) half of the time, else the send path under loss and faults
LINKS = [(0.0, {})] * 5 + [(0.3, {}), (0.0, {"duplication": 0.3}), (0.0, {"reorder": 0.4}),
                           (0.0, {"crashes": [{"node": 2, "start": 1.5, "end": 4.0}]}),
                           (0.3, {"crashes": [{"node": 0, "start": 0.0, "end": 3.0}], "duplication": 0.3})]

# (time, sender, to every neighbour (a broadcast) or to some, read the counters after the send)
ops = st.lists(st.tuples(st.integers(0, 6), st.integers(0, NODES - 1), st.booleans(), st.booleans(),
                         st.lists(st.integers(0, NODES - 1), min_size=1, max_size=NODES - 1, unique=True)),
               min_size=1, max_size=25)


@settings(max_examples=80, deadline=None)
@given(plan=ops, law=st.sampled_from(LAWS), links=st.sampled_from(LINKS), seed=st.integers(0, 10_000),
       stop=st.floats(0.5, 12.0))
def test_broadcasts_between_other_sends_and_reads_match_the_reference_model(plan, law, links, seed, stop):
    """Broadcasts from ticks, several per instant, between ``send_many`` calls and reads of ``in_flight``,
    ``node_sent``, ``total`` and the links: the deliveries of the reference heap (``tests.test_delivery_heap``:
    delays from the delays stream in send order, losses, copies, hold-backs and crashes), and at every read the
    sent counts of the calls so far."""
    script, how = [], []
    for i, (when, src, everyone, read, dsts) in enumerate(sorted(plan, key=lambda p: p[0])):
        dsts = [d for d in range(NODES) if d != src] if everyone else \
            [d for d in dsts if d != src] or [(src + 1) % NODES]
        script.append((float(when), src, dsts, i))
        how.append((everyone, read))
    loss, faults = links
    net = build(law, loss, faults, seed)
    env, m, got = net.env, net.metrics, []
    fields = []  # the Message fields the reference does not give: sent at the call's time, due now, size 1
    net.subscribe("M", lambda message: (got.append((env.now, message.src, message.dst, message.payload)),
                                        fields.append((message.kind, message.sent_at, message.due_at, message.size))))
    seen = []

    def ticks():
        sent = [0] * NODES
        for (when, src, dsts, payload), (everyone, read) in zip(script, how, strict=True):
            if when > env.now:
                yield env.timeout(when - env.now)
            if everyone:
                net.broadcast(src, "M", payload)
            else:
                net.send_many(src, dsts, "M", payload)
            sent[src] += len(dsts)
            if read:
                in_flight = net.in_flight
                counts = m.kind("M")
                assert counts.sent == counts.delivered + counts.dropped + in_flight
                assert m.node_sent.tolist() == sent and m.total("sent") - m.extras.get("duplicated", 0) == sum(sent)
                seen.append(m.links_agent_agent)

    env.process(ticks())
    env.run(until=stop)
    in_flight = net.in_flight
    counts = m.kind("M")
    assert counts.sent == counts.delivered + counts.dropped + in_flight  # mid-run invariant
    env.run()
    assert got == reference(script, law, loss, faults, seed)
    assert fields == [("M", script[payload][0], when, 1) for when, _, _, payload in got]
    assert net.in_flight == 0 and counts.sent == counts.delivered + counts.dropped
    links = {(int(when), min(src, d), max(src, d)) for when, src, dsts, _ in script for d in dsts}
    assert m.links_agent_agent == len(links) and all(0 < s <= len(links) for s in seen)


def relay_reference(script, law, seed):
    """Deliveries (time, src, dst, payload) on a complete graph where every receiver of ``(i, hop)`` with
    ``hop < 2`` broadcasts ``(i, hop + 1)`` from its handler: a plain heap of ``(due, sequence)``, one message
    popped and handled at a time (a relay's sequence is larger than every queued one, so a zero-delay relay
    comes after the messages already due at its instant), the script's broadcasts at ``t`` after the deliveries
    due at ``t``, delays from the delays stream in send order and destination order."""
    rng = np.random.default_rng(seed + 1)
    block: list[float] = []
    heap, delivered, sequence = [], [], 0

    def broadcast(now, src, payload):
        nonlocal sequence, block
        for d in range(NODES):
            if d != src:
                if not block:
                    block = law.sample(rng, BLOCK).tolist()
                heapq.heappush(heap, (now + block.pop(0), sequence, src, d, payload))
                sequence += 1

    for tick in sorted({when for when, _, _ in script}) + [np.inf]:
        while heap and heap[0][0] <= tick:
            due, _, src, dst, payload = heapq.heappop(heap)
            delivered.append((due, src, dst, payload))
            if payload[1] < 2:
                broadcast(due, dst, (payload[0], payload[1] + 1))
        for when, src, payload in script:
            if when == tick:
                broadcast(when, src, payload)
    return delivered


@settings(max_examples=80, deadline=None)
@given(plan=st.lists(st.tuples(st.integers(0, 4), st.integers(0, NODES - 1), st.booleans()), min_size=1, max_size=8),
       law=st.sampled_from(TIED + LAWS), seed=st.integers(0, 10_000))
def test_broadcasts_from_ticks_and_handlers_match_the_reference_model(plan, law, seed):
    """Broadcasts from ticks (noted) and from handlers (sent at once, zero-delay ones seen right after their
    handler's instant-mates), with ``in_flight`` read between a tick's broadcasts: the reference heap's
    deliveries, at its times and in its order."""
    script = [(float(when), src, (i, 0)) for i, (when, src, _) in enumerate(sorted(plan, key=lambda p: p[0]))]
    reads = [read for _, _, read in sorted(plan, key=lambda p: p[0])]
    graph = nx.complete_graph(NODES)
    env = simpy.Environment()
    metrics = Metrics(NODES, NODES, 1.0, 25.0)
    net = Network(env, graph, num_agents=NODES, components=[list(range(NODES))], delay=law, server_delay=law,
                  loss=0.0, link_overrides={}, rng=np.random.default_rng(seed), metrics=metrics,
                  delay_rng=np.random.default_rng(seed + 1))
    got = []

    def handler(message):
        got.append((env.now, message.src, message.dst, message.payload))
        i, hop = message.payload
        if hop < 2:
            net.broadcast(message.dst, "M", (i, hop + 1))

    net.subscribe("M", handler)

    def ticks():
        for (when, src, payload), read in zip(script, reads, strict=True):
            if when > env.now:
                yield env.timeout(when - env.now)
            net.broadcast(src, "M", payload)
            if read:
                assert net.in_flight == net.metrics.kind("M").sent - net.metrics.kind("M").delivered

    env.process(ticks())
    env.run()
    assert got == relay_reference(script, law, seed)


def test_a_broadcast_is_noted_and_made_before_time_moves_on():
    """On plain links a broadcast outside the loop is noted (no entry, no counter yet) and the wake-up is armed at
    its instant; under a tracer or faults it is sent at once."""
    net = build(Distribution("exponential", {"mean": 1.0}), 0.0, {}, 0)
    net.env.run(until=2.5)
    net.broadcast(1, "M", "x")
    assert net._noted == [(1, "M", "x", 1)] and not net._fresh and net._alarm_at == 2.5
    assert "M" not in net.metrics.messages  # its counters wait for the wake-up or a read
    net.subscribe("M", lambda message: None)
    net.env.run()
    assert net.metrics.kind("M").delivered == NODES - 1 and net._noted == []
    lossy = build(Distribution("exponential", {"mean": 1.0}), 0.3, {}, 0)
    lossy.broadcast(1, "M", "x")
    assert lossy._noted is None and lossy.metrics.kind("M").sent == NODES - 1
