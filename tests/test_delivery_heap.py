"""The delivery heap (issue 16) against a plain reference model written here.

The reference takes the same script of sends and the same seeds, draws the link delays, losses,
duplicates and reorderings in the order the engine documents (delays from the ``delays`` stream
in blocks, losses per send from the network stream, copies and extra delays from the faults
stream), and predicts every delivery with a plain list sorted by (due time, send sequence),
less the messages whose receiver is down at their due time (or whose sender is down when
sending). The engine must deliver exactly those messages, at exactly those times, in exactly
that order, and keep ``sent = delivered + dropped + in flight`` at every stop.
"""

from __future__ import annotations

import heapq

import networkx as nx
import numpy as np
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.engine import faults as F
from netsim.engine.delays import BLOCK
from netsim.engine.distributions import Distribution
from netsim.engine.metrics import Metrics
from netsim.engine.network import FAULT, Network
from netsim.engine.streams import Streams

LAWS = [Distribution("constant", {"value": 1.0}), Distribution("constant", {"value": 0.0}),
        Distribution("exponential", {"mean": 0.8}), Distribution("uniform", {"low": 0.1, "high": 2.0})]
NODES = 6


def build(law, loss, faults_spec, seed, links=None, graph=None):
    """A network of agents on ``graph`` (default: complete on NODES) with the seeds and faults the reference uses."""
    graph = nx.complete_graph(NODES) if graph is None else graph
    n = graph.number_of_nodes()
    env = simpy.Environment()
    metrics = Metrics(n, n, 1.0, 25.0)
    net = Network(env, graph, num_agents=n, components=[list(range(n))], delay=law, server_delay=law,
                  loss=loss, link_overrides=links or {}, rng=np.random.default_rng(seed), metrics=metrics,
                  delay_rng=np.random.default_rng(seed + 1))
    spec = F.validate(faults_spec, nodes=n)
    if F.kinds(spec):
        net.faults = F.Faults(spec, env=env, edges=list(graph.edges), num_nodes=n, num_agents=n,
                              streams=Streams(np.random.SeedSequence(seed + 2)), extras=metrics.extras)

        def call_at(when, fn):
            event = simpy.events.Event(env)
            event._ok, event._value = True, None
            event.callbacks.append(lambda _e: fn())
            env.schedule(event, FAULT, when - env.now)

        net.faults.start(call_at, 1e9)
    return net


def reference(script, law, loss, faults_spec, seed):
    """Expected (time, src, dst, payload) deliveries, in order, for ``script``."""
    delays = np.random.default_rng(seed + 1)
    block: list[float] = []
    net_rng = np.random.default_rng(seed)
    fault_rng = Streams(np.random.SeedSequence(seed + 2)).for_("faults", 0)
    crashes = faults_spec.get("crashes", [])
    dup, reorder = faults_spec.get("duplication", 0.0), faults_spec.get("reorder", 0.0)
    extra = Distribution("exponential", {"mean": 1.0})

    def down(node, t):
        return any(c["node"] == node and c["start"] <= t < c.get("end", np.inf) for c in crashes)

    def delay():
        nonlocal block
        if law.is_constant:
            return law.args["value"]
        if not block:
            block = law.sample(delays, BLOCK).tolist()
        return block.pop(0)

    expected, sequence = [], 0
    for when, src, dsts, payload in script:
        if down(src, when):
            continue
        if loss > 0:
            lost = net_rng.random(len(dsts)) < loss
            dsts = [d for d, gone in zip(dsts, lost, strict=True) if not gone]
        for d in dsts:
            first = delay()
            copies = [first]
            if dup > 0 and fault_rng.random() < dup:
                copies.append(float(law.sample(fault_rng)))
            for wait in copies:
                if reorder > 0 and fault_rng.random() < reorder:
                    wait += float(extra.sample(fault_rng))
                expected.append((when + wait, sequence, src, d, payload))
                sequence += 1
    expected.sort()
    return [(due, s, d, p) for due, _, s, d, p in expected if not down(d, due)]


sends = st.lists(st.tuples(st.integers(0, 8), st.integers(0, NODES - 1),
                           st.lists(st.integers(0, NODES - 1), min_size=1, max_size=NODES - 1, unique=True)),
                 min_size=1, max_size=25)


@settings(max_examples=60, deadline=None)
@given(plan=sends, law=st.sampled_from(LAWS), loss=st.sampled_from([0.0, 0.3]), seed=st.integers(0, 10_000),
       faults=st.sampled_from([{}, {"duplication": 0.3}, {"reorder": 0.4}, {"duplication": 0.2, "reorder": 0.3},
                               {"crashes": [{"node": 2, "start": 1.5, "end": 4.0}]},
                               {"crashes": [{"node": 0, "start": 0.0, "end": 3.0}], "duplication": 0.3}]),
       batch=st.booleans(), stop=st.floats(0.5, 14.0))
def test_delivery_heap_matches_the_reference_model(plan, law, loss, seed, faults, batch, stop):
    script = []
    for i, (when, src, dsts) in enumerate(sorted(plan, key=lambda p: p[0])):
        dsts = [d for d in dsts if d != src] or [(src + 1) % NODES]
        script.append((float(when), src, dsts, i))
    net = build(law, loss, faults, seed)
    got = []
    if batch:
        net.subscribe_batch("M", lambda ms: got.extend((net.env.now, m.src, m.dst, m.payload) for m in ms))
    else:
        net.subscribe("M", lambda m: got.append((net.env.now, m.src, m.dst, m.payload)))
    env = net.env

    def sender():
        for when, src, dsts, payload in script:
            if when > env.now:
                yield env.timeout(when - env.now)
            net.send_many(src, dsts, "M", payload)

    env.process(sender())
    env.run(until=stop)
    counts = net.metrics.kind("M")
    assert counts.sent == counts.delivered + counts.dropped + net.in_flight  # mid-run invariant
    env.run()
    assert got == reference(script, law, loss, faults, seed)
    assert net.in_flight == 0 and counts.sent == counts.delivered + counts.dropped


def test_deliveries_come_after_checkpoints_and_crashes_and_before_ticks():
    """Same-instant order: FAULT and earlier priorities, then deliveries, then NORMAL ticks."""
    net = build(Distribution("constant", {"value": 1.0}), 0.0, {}, 0)
    env, order = net.env, []
    net.subscribe("M", lambda m: order.append("deliver"))

    def at(when, priority, label):
        event = simpy.events.Event(env)
        event._ok, event._value = True, None
        event.callbacks.append(lambda _e: order.append(label))
        env.schedule(event, priority, when - env.now)

    net.send(0, 1, "M")           # due at 1, wake-up armed now
    at(1.0, simpy.core.NORMAL, "tick")
    at(1.0, FAULT, "crash")       # scheduled after the wake-up, still runs before the delivery
    env.run()
    assert order == ["crash", "deliver", "tick"]


def test_multicast_record_counts_per_link():
    """A constant-delay send to many is one heap entry; every link is counted as today."""
    net = build(Distribution("constant", {"value": 1.0}), 0.0, {}, 0)
    seen = []
    net.subscribe_records("R", lambda records: seen.extend(records))
    net.send_many(0, [1, 2, 3], "R", np.zeros(2), size=2)
    assert len(net._heap) == 1 and net.in_flight == 3
    net.env.run()
    (record,) = seen
    assert record.dst.tolist() == [1, 2, 3] and (record.stop - record.start).tolist() == [2, 2, 2]
    m = net.metrics
    assert m.kind("R").delivered == 3 and m.kind("R").records == 6 and m.links_agent_agent == 3
    assert m.node_received.tolist() == [0, 1, 1, 1, 0, 0]


# ---------------------------------------------------------------------- the run, the heap and relays
# Sampled delays with ties on purpose: uniform(1, 1) is 1.0 every time, bernoulli(1/2) is 0.0 or 1.0
# (zero-delay messages, delivered at their send instant), uniform(0, 2) is continuous.
TIED = [Distribution("uniform", {"low": 1.0, "high": 1.0}), Distribution("bernoulli", {"p": 0.5}),
        Distribution("uniform", {"low": 0.0, "high": 2.0})]
AGENTS, SERVERS, HOPS = 4, 1, 2


def relay_network(law, servers, seed):
    """Agents 0..3 in a complete graph, plus ``servers`` linked to every agent (constant unit delay)."""
    graph = nx.complete_graph(AGENTS)
    graph.add_edges_from((s, a) for s in range(AGENTS, AGENTS + servers) for a in range(AGENTS))
    nodes = AGENTS + servers
    env = simpy.Environment()
    metrics = Metrics(nodes, AGENTS, 1.0, 25.0)
    return Network(env, graph, num_agents=AGENTS, components=[list(range(AGENTS))], delay=law,
                   server_delay=Distribution("constant", {"value": 1.0}), loss=0.0, link_overrides={},
                   rng=np.random.default_rng(seed), metrics=metrics, delay_rng=np.random.default_rng(seed + 1))


def relay_reference(script, law, servers, seed):
    """Deliveries (time, kind, src, dst, payload) and link-slots of ``script`` with relays, from a plain heap.

    Every delivery of a payload ``(i, hop)`` with ``hop < HOPS`` makes its receiver send ``(i, hop + 1)``
    at once to one neighbour (kind ``A`` from an agent, ``S`` from a server). ``A`` has a per-message
    handler and ``S`` a batch handler: the messages due at one instant (those queued when the instant
    starts; zero-delay relays come after them) go to the per-message handler one by one, in send order,
    then to the batch handler together. The script's sends at time ``t`` come after the deliveries due
    at ``t`` (deliveries before ticks).
    """
    server_law = Distribution("constant", {"value": 1.0})
    graph = nx.complete_graph(AGENTS)
    graph.add_edges_from((s, a) for s in range(AGENTS, AGENTS + servers) for a in range(AGENTS))
    rng = np.random.default_rng(seed + 1)
    block: list[float] = []  # the law's delays, drawn lazily in blocks from the delays stream

    def delay(u, v):
        if max(u, v) >= AGENTS:
            return server_law.args["value"]
        if not block:
            block.extend(law.sample(rng, BLOCK).tolist())
        return block.pop(0)

    heap, sequence, delivered, links = [], 0, [], set()

    def send(now, kind, src, dsts, payload):
        nonlocal sequence
        for d in dsts:
            links.add((int(now // 1.0), min(src, d), max(src, d)))
            heapq.heappush(heap, (now + delay(src, d), sequence, kind, src, d, payload))
            sequence += 1

    def receive(due, kind, src, dst, payload):
        delivered.append((due, kind, src, dst, payload))
        if payload[1] < HOPS:
            nxt = sorted(graph.neighbors(dst))[(payload[0] + payload[1]) % graph.degree(dst)]
            send(due, "S" if dst >= AGENTS else "A", dst, [nxt], (payload[0], payload[1] + 1))

    ticks = sorted({when for when, *_ in script})
    for tick in ticks + [np.inf]:
        while heap and heap[0][0] <= tick:
            due = heap[0][0]
            batch = []
            while heap and heap[0][0] == due:
                batch.append(heapq.heappop(heap))
            for _, _, kind, src, dst, payload in batch:
                if kind == "A":
                    receive(due, kind, src, dst, payload)
            for _, _, kind, src, dst, payload in batch:
                if kind == "S":
                    receive(due, kind, src, dst, payload)
        for when, kind, src, dsts, payload in script:
            if when == tick:
                send(when, kind, src, dsts, payload)
    return delivered, links


relay_sends = st.lists(st.tuples(st.integers(0, 3), st.integers(0, AGENTS + SERVERS - 1), st.booleans(),
                                 st.sampled_from(["A", "S"])), min_size=2, max_size=30)


@settings(max_examples=150, deadline=None)
@given(plan=relay_sends, law=st.sampled_from(TIED), servers=st.integers(0, SERVERS), seed=st.integers(0, 10_000),
       stop=st.floats(0.5, 9.0))
def test_run_heap_and_relays_match_the_reference_model(plan, law, servers, seed, stop):
    """Sends from ticks (sorted into the run), sends from handlers (the heap), multicasts to and from a
    server (the heap), ties between all of them, a per-message and a batch kind: the engine delivers
    exactly the messages of a plain (due, sequence) heap, at the same times and in the same order, and
    counts them and their links (li2022 Eq. 2, deferred and marked in bulk) exactly; counters hold
    mid-run too."""
    nodes = AGENTS + servers
    script = []
    for i, (when, src, everyone, kind) in enumerate(sorted(plan, key=lambda p: p[0])):
        src %= nodes
        neighbours = [v for v in range(nodes) if v != src and (v < AGENTS or src < AGENTS)]
        script.append((float(when), kind, src, neighbours if everyone else neighbours[:1], (i, 0)))
    net = relay_network(law, servers, seed)
    env, got = net.env, []

    def handler(message):
        got.append((env.now, message.kind, message.src, message.dst, message.payload))
        assert env.now == message.due_at
        i, hop = message.payload
        if hop < HOPS:
            nxt = net.neighbors(message.dst)[(i + hop) % len(net.neighbors(message.dst))]
            net.send(message.dst, nxt, "S" if message.dst >= AGENTS else "A", (i, hop + 1))

    net.subscribe("A", handler)
    net.subscribe_batch("S", lambda messages: [handler(message) for message in messages])

    def ticks():
        for when, kind, src, dsts, payload in script:
            if when > env.now:
                yield env.timeout(when - env.now)
            if len(dsts) == len(net.neighbors(src)):
                net.broadcast(src, kind, payload)
            else:
                net.send_many(src, dsts, kind, payload)

    env.process(ticks())
    env.run(until=stop)
    m = net.metrics
    assert sum(c.sent for c in m.messages.values()) == sum(c.delivered for c in m.messages.values()) + net.in_flight
    assert int(m.node_received.sum()) == sum(c.delivered for c in m.messages.values())
    env.run()
    expected, links = relay_reference(script, law, servers, seed)
    assert got == expected
    assert net.in_flight == 0 and all(c.sent == c.delivered for c in m.messages.values())
    assert m.node_received.tolist() == [sum(1 for e in expected if e[3] == v) for v in range(nodes)]
    server_links = sum(1 for _, u, v in links if v >= AGENTS)
    assert (m.links_agent_agent, m.links_server_agent) == (len(links) - server_links, server_links)
