"""Gather records (``Network.send_each``, many senders to one node) and ``Fanin`` groups against plain references.

On plain links with a constant delay a ``send_each`` call is one queue entry (a gather record); everywhere else it
is ``send`` in a loop. Either way the engine must deliver exactly the messages that a plain ``(due, sequence)`` heap
of one message per sender predicts (``tests.test_delivery_heap.reference``), at the same times and in the same
order, with the counters of the loop, to per-message, batch and record readers, between other sends at the same
instants and from handlers; and ``fanins`` read in order must be the messages in order.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.comm.transport import fanins
from netsim.engine.distributions import Distribution
from netsim.engine.messages import Message, Multicast, _gather, _record, _subset
from tests.test_delivery_heap import LAWS, NODES, build, reference

# (loss, faults): plain links (gather records with constant delays) most of the time, else the loop of sends
LINKS = [(0.0, {})] * 4 + [(0.3, {}), (0.0, {"duplication": 0.3}), (0.0, {"reorder": 0.4}),
                           (0.0, {"crashes": [{"node": 2, "start": 1.5, "end": 4.0}]})]

# (time, gather (send_each) or not (send_many), node, the other nodes, a read of the counters after the send)
ops = st.lists(st.tuples(st.integers(0, 5), st.booleans(), st.integers(0, NODES - 1),
                         st.lists(st.integers(0, NODES - 1), min_size=1, max_size=NODES - 1, unique=True),
                         st.booleans()),
               min_size=1, max_size=20)


def _script(plan):
    """The calls, and the reference's script (one item per sender: ``send_each`` is ``send`` in a loop)."""
    calls, script = [], []
    for i, (when, gather, node, others, read) in enumerate(sorted(plan, key=lambda p: p[0])):
        others = [o for o in others if o != node] or [(node + 1) % NODES]
        if gather:  # every other node sends its own payload to ``node``
            payloads = [(i, j) for j in range(len(others))]
            calls.append((float(when), "each", others, node, payloads, read))
            script += [(float(when), src, [node], payload) for src, payload in zip(others, payloads, strict=True)]
        else:
            calls.append((float(when), "many", node, others, (i, -1), read))
            script.append((float(when), node, others, (i, -1)))
    return calls, script


def _reader(net, how, got):
    env = net.env

    def note(messages):
        got.extend((env.now, m.src, m.dst, m.payload) for m in messages)

    if how == "message":
        net.subscribe("M", lambda m: note([m]))
    elif how == "batch":
        net.subscribe_batch("M", note)
    else:  # records: Multicasts (gather records among them) and single Messages
        net.subscribe_records("M", lambda items: note([m for item in items for m in (
            item.messages() if isinstance(item, Multicast) else [item])]))


@settings(max_examples=80, deadline=None)
@given(plan=ops, law=st.sampled_from(LAWS), links=st.sampled_from(LINKS), seed=st.integers(0, 10_000),
       how=st.sampled_from(["message", "batch", "records"]), stop=st.floats(0.5, 10.0))
def test_send_each_between_other_sends_and_reads_matches_the_reference_model(plan, law, links, seed, how, stop):
    """``send_each`` and ``send_many`` calls at shared instants, counters read between them: the deliveries of the
    reference heap of one message per sender (delays from the delays stream in send order, losses, copies,
    hold-backs, crashes) to every kind of reader, and at every read the counts of the loop of sends so far."""
    calls, script = _script(plan)
    loss, faults = links
    net = build(law, loss, faults, seed)
    env, m, got = net.env, net.metrics, []
    _reader(net, how, got)
    sent, records = [0] * NODES, 0

    def ticks():
        nonlocal records
        for when, call, a, b, payload, read in calls:
            if when > env.now:
                yield env.timeout(when - env.now)
            if call == "each":
                net.send_each(a, b, "M", payload, size=3)
                for src in a:
                    sent[src] += 1
                records += 3 * len(a)
            else:
                net.send_many(a, b, "M", payload, size=3)
                sent[a] += len(b)
                records += 3 * len(b)
            if read:
                counts = m.kind("M")
                assert counts.sent == counts.delivered + counts.dropped + net.in_flight
                copies = m.extras.get("duplicated", 0)  # a link's copy counts as one more message sent
                assert counts.sent - copies == sum(sent) and m.node_sent.tolist() == sent
                assert copies or counts.records == records

    env.process(ticks())
    env.run(until=stop)
    counts = m.kind("M")
    assert counts.sent == counts.delivered + counts.dropped + net.in_flight  # mid-run invariant
    env.run()
    assert got == reference(script, law, loss, faults, seed)
    assert net.in_flight == 0 and counts.sent == counts.delivered + counts.dropped
    assert m.node_received.tolist() == np.bincount([d for _, _, d, _ in got], minlength=NODES).tolist()


@settings(max_examples=60, deadline=None)
@given(plan=st.lists(st.tuples(st.integers(0, 3), st.integers(0, NODES - 1)), min_size=1, max_size=6),
       law=st.sampled_from(LAWS[:2]), how=st.sampled_from(["message", "batch", "records"]))
def test_send_each_from_handlers_matches_a_plain_heap(plan, law, how):
    """Every receiver of a message ``(i, 0)`` from a tick makes all other nodes answer it with ``(i, 1, src)`` by
    one ``send_each`` from its handler (constant delays, zero ones included: delivered right after the instant's
    earlier messages): the deliveries of a plain heap of one message per sender, in ``(due, sequence)`` order."""
    import heapq

    net = build(law, 0.0, {}, 0)
    env, got = net.env, []
    delay = law.args["value"]
    script = [(float(when), node, (i, 0)) for i, (when, node) in enumerate(sorted(plan))]

    def answer(message):
        if message.payload[1] == 0:
            others = [n for n in range(NODES) if n != message.dst]
            net.send_each(others, message.dst, "M", [(message.payload[0], 1, n) for n in others])

    def note(messages):
        for message in messages:
            got.append((env.now, message.src, message.dst, message.payload))
            answer(message)

    if how == "message":
        net.subscribe("M", lambda message: note([message]))
    elif how == "batch":
        net.subscribe_batch("M", note)
    else:
        net.subscribe_records("M", lambda items: note([m for item in items for m in (
            item.messages() if isinstance(item, Multicast) else [item])]))

    def ticks():
        for when, node, payload in script:
            if when > env.now:
                yield env.timeout(when - env.now)
            net.send(node, (node + 1) % NODES, "M", payload)

    env.process(ticks())
    env.run()
    # the reference: a heap of single messages in (due, sequence) order; ticks come after the deliveries due at
    # their instant; a per-message handler answers each message as it is delivered, a batch or record reader the
    # instant's messages queued when its batch is handed over (answers due at once form the next batch)
    heap, sequence, expected, ticks_left = [], 0, [], list(script)
    while heap or ticks_left:
        if ticks_left and (not heap or ticks_left[0][0] < heap[0][0]):  # the ticks of one instant send in turn
            instant = ticks_left[0][0]
            while ticks_left and ticks_left[0][0] == instant:
                when, node, payload = ticks_left.pop(0)
                heapq.heappush(heap, (when + delay, sequence, node, (node + 1) % NODES, payload))
                sequence += 1
            continue
        due = heap[0][0]
        instant = []
        while heap and heap[0][0] == due and (how != "message" or not instant):
            instant.append(heapq.heappop(heap))
        for _, _, src, dst, payload in instant:
            expected.append((due, src, dst, payload))
            if payload[1] == 0:
                for n in range(NODES):
                    if n != dst:
                        heapq.heappush(heap, (due + delay, sequence, n, dst, (payload[0], 1, n)))
                        sequence += 1
    assert got == expected


def _gather_record(srcs, dst, payloads, size=1):
    return _gather("k", srcs, dst, payloads, size, 1.0, 2.0)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["message", "fanout", "rows", "gather", "gather-subset"]),
                          st.integers(0, 2), st.lists(st.integers(0, 5), min_size=2, max_size=4)), max_size=25))
def test_fanins_read_in_order_are_the_messages_in_order(items):
    """fanins against the plain reading of every message: the same (payload, src, dst) in the same order, and
    the groups are the maximal runs of messages to one receiver."""
    delivered = []
    for n, (how, node, others) in enumerate(items):
        if how == "message":
            delivered.append(Message("k", node, others[0], ("m", n), 1.0, 2.0))
        elif how == "fanout":
            delivered.append(_record((2.0, 0, "k", node, list(others), ("f", n), 1.0, 2.0, 1, len(others))))
        elif how == "rows":
            rows = np.arange(2.0 * len(others)).reshape(len(others), 2)
            k = len(others)
            delivered.append(Multicast("k", np.array(others), np.full(k, node), np.arange(k), np.arange(1, k + 1),
                                       rows, 1.0, 2.0))
        else:  # many senders to ``node``, or what is left of such a record once some receivers were dropped
            record = _gather_record(others, node, [("g", n, j) for j in range(len(others))], size=3)
            if how == "gather-subset":
                record = _subset(record, np.arange(len(others)) % 2 == 0)
            delivered.append(record)
    plain = [(m.payload, m.src, m.dst) for item in delivered
             for m in (item.messages() if isinstance(item, Multicast) else [item])]
    groups = fanins(delivered)
    got = [(payload, src, g.dst) for g in groups for payload, src in zip(g.payload, g.src.tolist(), strict=True)]
    assert len(got) == len(plain)
    for (mine, src, dst), (theirs, src2, dst2) in zip(got, plain, strict=True):
        assert (src, dst) == (src2, dst2)
        assert mine is theirs or (isinstance(mine, np.ndarray) and np.array_equal(mine, theirs))
    runs = []  # the maximal runs of one receiver, by hand
    for _, _, dst in plain:
        if runs and runs[-1][0] == dst:
            runs[-1][1] += 1
        else:
            runs.append([dst, 1])
    assert [(g.dst, len(g.payload)) for g in groups] == [tuple(r) for r in runs]
    assert all(g.src.dtype == np.int64 for g in groups)


def test_a_gather_record_is_one_entry_counted_per_message():
    """A constant-delay ``send_each`` is one heap entry whose messages carry their own payload objects and
    ``size`` records each; every link and receiver is counted as for the loop."""
    net = build(Distribution("constant", {"value": 1.0}), 0.0, {}, 0)
    seen = []
    net.subscribe_records("R", lambda records: seen.extend(records))
    payloads = [("a",), ("b",), ("c",)]
    net.send_each([1, 2, 3], 0, "R", payloads, size=2)
    assert len(net._heap) == 1 and not net._fresh and net.in_flight == 3
    net.env.run()
    (record,) = seen
    assert record.src.tolist() == [1, 2, 3] and record.dst.tolist() == [0, 0, 0]
    assert all(a is b for a, b in zip(record.payloads(), payloads, strict=True))
    assert [(m.src, m.dst, m.payload, m.size, m.due_at) for m in record.messages()] == \
        [(1, 0, ("a",), 2, 1.0), (2, 0, ("b",), 2, 1.0), (3, 0, ("c",), 2, 1.0)]
    m = net.metrics
    assert m.kind("R").delivered == 3 and m.kind("R").records == 6 and m.links_agent_agent == 3
    assert m.node_received.tolist() == [3, 0, 0, 0, 0, 0] and m.node_sent.tolist() == [0, 1, 1, 1, 0, 0]
