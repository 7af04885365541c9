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

import networkx as nx
import numpy as np
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim import faults as F
from netsim.distributions import Distribution
from netsim.metrics import Metrics
from netsim.network import BLOCK, FAULT, Network
from netsim.streams import Streams

LAWS = [Distribution("constant", {"value": 1.0}), Distribution("constant", {"value": 0.0}),
        Distribution("exponential", {"mean": 0.8}), Distribution("uniform", {"low": 0.1, "high": 2.0})]
NODES = 6


def build(law, loss, faults_spec, seed):
    graph = nx.complete_graph(NODES)
    env = simpy.Environment()
    metrics = Metrics(NODES, NODES, 1.0, 25.0)
    net = Network(env, graph, num_agents=NODES, components=[list(range(NODES))], delay=law, server_delay=law,
                  loss=loss, link_overrides={}, rng=np.random.default_rng(seed), metrics=metrics,
                  delay_rng=np.random.default_rng(seed + 1))
    spec = F.validate(faults_spec, nodes=NODES)
    if F.kinds(spec):
        net.faults = F.Faults(spec, env=env, edges=list(graph.edges), num_nodes=NODES, num_agents=NODES,
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
