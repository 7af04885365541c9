"""Held deliveries (``netsim.engine.held``, issue 25) against a plain reference model written here.

A deferred kind's ``broadcast_chunks`` flush is one flight (per-link due times as arrays), counted
in windows between SimPy events and handed over at ``collect``. The reference takes the same
script and seeds, draws losses (network stream, per link in link order), delays (``delays``
stream, blocks of BLOCK per law, per link in link order), duplicates and hold-backs (faults
stream) as the engine documents, and keeps every message in a plain list sorted by (due time,
send sequence), less those whose sender is down when sending or whose receiver is down at their
due time. At every tick the reader collects; the collected messages, taken in delivery order (the
stable sort by due time of the list, ``netsim.engine.held``), must be exactly the reference's messages
due by then, with the same rows, and ``sent = delivered + dropped + in flight`` must hold with
exactly the reference's delivered and dropped counts. A per-message kind with its own sends and
relays runs beside it, so that flights interleave with the queue's entries; it must be delivered
exactly as its own reference says. Flights are settled when read (``Network.settle``), so the books
are also read where a lazy settlement could go wrong: from that kind's handler (every message due
by then counted, the instant's own too) and from the crash and restart handlers (only what is due
before the instant: a crash comes before the deliveries of its instant).
"""

from __future__ import annotations

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from netsim.engine.delays import BLOCK
from netsim.engine.distributions import Distribution
from netsim.engine.held import stable_order
from netsim.engine.streams import Streams
from netsim.experiment.testing import MessageSpy
from tests.test_delivery_heap import NODES
from tests.test_delivery_heap import build as heap_network

LAWS = [Distribution("constant", {"value": 1.0}), Distribution("constant", {"value": 0.0}),
        Distribution("exponential", {"mean": 0.8}), Distribution("uniform", {"low": 1.0, "high": 1.0}),
        Distribution("bernoulli", {"p": 0.5}), Distribution("lognormal", {"mean": 1.0, "sigma": 0.7})]
SLOW = Distribution("uniform", {"low": 0.5, "high": 3.0})  # the law of the overridden links
FAULTS = [{}, {"duplication": 0.3}, {"reorder": 0.4}, {"crashes": [{"node": 2, "start": 1.5, "end": 4.0}]},
          {"crashes": [{"node": 0, "start": 0.0, "end": 3.0}, {"node": 3, "start": 2.0, "end": 2.5}]},
          {"crashes": [{"node": 1, "start": 1.0, "end": 5.0}], "duplication": 0.2, "reorder": 0.2}]


def build(law, loss, overrides, faults_spec, seed):
    """The network of ``tests/test_delivery_heap.py`` (complete graph of NODES agents), with two overridden links."""
    links = {(0, 1): (SLOW, 0.5), (2, 4): (Distribution("constant", {"value": 0.5}), 0.0)} if overrides else {}
    return heap_network(law, loss, faults_spec, seed, links), links


class Reference:
    """The engine's documented draws, one message at a time, in a plain sorted list."""

    def __init__(self, law, loss, links, faults_spec, seed):
        self.law, self.loss, self.links = law, loss, links
        self.net_rng = np.random.default_rng(seed)
        self.delay_rng = np.random.default_rng(seed + 1)
        self.fault_rng = Streams(np.random.SeedSequence(seed + 2)).for_("faults", 0)
        self.blocks: dict[int, list[float]] = {}
        self.crashes = faults_spec.get("crashes", [])
        self.dup, self.reorder = faults_spec.get("duplication", 0.0), faults_spec.get("reorder", 0.0)
        self.messages: list[tuple] = []  # (due, sequence, kind, src, dst, payload)
        self.sequence = 0
        self.dropped_at_send = {"H": 0, "P": 0}
        self.send_drops: list[tuple[float, int]] = []  # (time, H messages dropped at that send)
        self.gone: set[int] = set()  # sequences of the P messages delivered or dropped already

    def down(self, node, t):
        return any(c["node"] == node and c["start"] <= t < c.get("end", np.inf) for c in self.crashes)

    def link(self, u, v):
        return self.links.get((min(u, v), max(u, v)), (self.law, self.loss))

    def delay(self, law):
        if law.is_constant:
            return law.args["value"]
        block = self.blocks.setdefault(id(law), [])
        if not block:
            block.extend(law.sample(self.delay_rng, BLOCK).tolist())
        return block.pop(0)

    def send(self, now, kind, links):
        """``links``: (src, dst, payload) in link order, as one engine call sends them."""
        alive = [(s, d, p) for s, d, p in links if not self.down(s, now)]
        dropped = self.dropped_at_send[kind]
        self.dropped_at_send[kind] += len(links) - len(alive)
        losses = [self.link(s, d)[1] for s, d, _ in alive]
        if any(lo > 0 for lo in losses):
            draws = self.net_rng.random(len(alive)) if kind == "H" else None
            kept = []
            for i, (link, lo) in enumerate(zip(alive, losses, strict=True)):
                lost = (draws[i] if draws is not None else self.net_rng.random(1)[0]) < lo
                self.dropped_at_send[kind] += int(lost)
                if not lost:
                    kept.append(link)
            alive = kept
        if kind == "H":
            self.send_drops.append((now, self.dropped_at_send[kind] - dropped))
        extra = Distribution("exponential", {"mean": 1.0})
        for s, d, p in alive:
            law = self.link(s, d)[0]
            copies = [self.delay(law)]
            if self.dup > 0 and self.fault_rng.random() < self.dup:
                copies.append(float(law.sample(self.fault_rng)))
            for wait in copies:
                if self.reorder > 0 and self.fault_rng.random() < self.reorder:
                    wait += float(extra.sample(self.fault_rng))
                self.messages.append((now + wait, self.sequence, kind, s, d, p))
                self.sequence += 1

    def due_by(self, t, kind, *, before=False):
        """(delivered, dropped at the receiver) messages of ``kind`` due by ``t`` (``before``: due before
        ``t``), in (due, sequence) order."""
        due = sorted(m for m in self.messages if m[2] == kind and (m[0] < t if before else m[0] <= t))
        return [m for m in due if not self.down(m[4], m[0])], [m for m in due if self.down(m[4], m[0])]

    def books(self, t, *, before=False):
        """The held kind's (delivered, dropped) counts at ``t`` with the drops at the sends made so far, or
        (``before``: at a crash, which comes before the deliveries and sends of its instant) at the sends
        before ``t``."""
        delivered, dropped = self.due_by(t, "H", before=before)
        return len(delivered), len(dropped) + sum(n for when, n in self.send_drops if when < t or not before)


def collected(items):
    """(due, src, dst, rows) of collected records, in delivery order (stable sort by due time)."""
    out = []
    for item in items:
        if hasattr(item, "start"):
            due = np.broadcast_to(item.due_at, len(item.dst))
            for d, s, t, a, b in zip(due.tolist(), item.src.tolist(), item.dst.tolist(), item.start.tolist(),
                                     item.stop.tolist(), strict=True):
                out.append((d, s, t, tuple(item.payload[a:b].tolist())))
        else:
            out.append((item.due_at, item.src, item.dst, tuple(item.payload.tolist())))
    return sorted(out, key=lambda m: m[0])


flushes = st.lists(st.tuples(st.integers(0, 7), st.lists(st.integers(0, 3), min_size=NODES, max_size=NODES)),
                   min_size=1, max_size=10)
singles = st.lists(st.tuples(st.integers(0, 7), st.integers(0, NODES - 1), st.integers(0, NODES - 1)), max_size=12)


@settings(max_examples=80, deadline=None)
# two flushes at one tick, over links with a constant override too: equal due times in two flights
@example(plan=[(0, [1] * NODES), (0, [2] * NODES)], others=[], law=Distribution("uniform", {"low": 0.0, "high": 1.0}),
         loss=0.0, overrides=True, faults={}, seed=1, traced=False, deferred=True)
@given(plan=flushes, others=singles, law=st.sampled_from(LAWS), loss=st.sampled_from([0.0, 0.3]),
       overrides=st.booleans(), faults=st.sampled_from(FAULTS), seed=st.integers(0, 10_000), traced=st.booleans(),
       deferred=st.booleans())
def test_held_flights_match_the_reference_model(plan, others, law, loss, overrides, faults, seed, traced, deferred):
    """Deferred reader (flights) or a record reader called at every delivery instant: the same messages."""
    net, links = build(law, loss, overrides, faults, seed)
    env = net.env
    spy = MessageSpy()
    if traced:  # with a tracer every message goes through the queue: same messages, same order
        spy._env = env
        net.tracer = spy
    records: list = []
    if deferred:
        net.subscribe_deferred("H")
    else:
        net.subscribe_records("H", records.extend)

    def collect():
        if deferred:
            return net.collect("H")
        taken = records[:]
        records.clear()
        return taken

    got_p, at_faults = [], []
    # H travels as flights (else as queue entries, ordered with P's by send sequence within an instant)
    flights = deferred and not traced and not (faults.get("duplication") or faults.get("reorder"))

    def on_p(message):  # a per-message kind beside the flights: its hop-0 messages are relayed at once
        got_p.append((env.now, message.src, message.dst, message.payload, _books(net) if flights else None))
        if message.payload[1] == 0:
            net.send(message.dst, _next(message), "P", (message.payload[0], 1))

    net.subscribe("P", on_p)
    if net.faults is not None:
        net.faults.on_crash(lambda node: at_faults.append((env.now, _books(net))))
        net.faults.on_restart(lambda node, state: at_faults.append((env.now, _books(net))))
    ticks = sorted({when for when, _ in plan} | {when for when, _, _ in others} | {9})
    checks = []

    def flushes_at(tick):
        for i, (when, sizes) in enumerate(plan):
            if when == tick:
                srcs = [a for a in range(NODES) if sizes[a] or a % 2]  # some senders with empty chunks
                bounds = np.concatenate(([0], np.cumsum([sizes[a] for a in srcs]))).astype(np.int64)
                yield np.array(srcs), bounds, np.arange(bounds[-1], dtype=np.int64) + 100 * i

    def script():
        for tick in ticks:
            if tick > env.now:
                yield env.timeout(tick - env.now)
            checks.append((env.now, collected(collect()), _counts(net)))
            for srcs, bounds, payload in flushes_at(tick):
                net.broadcast_chunks("H", srcs, bounds, payload)
            for j, (when, src, dst) in enumerate(others):
                if when == tick and src != dst:
                    net.send(src, dst, "P", (j, 0))

    env.process(script())
    env.run(until=1000.0)  # past every due time (held flights wake nobody: they are settled when read)

    # the reference, in lockstep: at each tick, the P deliveries due by then (relays drawn as they happen),
    # then what the reader has by then, then the tick's sends
    ref = Reference(law, loss, links, faults, seed)
    ref.flights = flights
    expected_p = []
    for tick, (now, items, counts) in zip(ticks, checks, strict=True):
        _deliver_p(ref, tick, expected_p)
        delivered, dropped = ref.due_by(tick, "H")
        assert now == tick and items == [(m[0], m[3], m[4], m[5]) for m in delivered[len(_held_before(checks, now)):]]
        assert counts["H"] == (len(delivered), len(dropped) + ref.dropped_at_send["H"])
        assert counts["in_flight"] == counts["sent"] - counts["delivered"] - counts["dropped"]
        for srcs, bounds, payload in flushes_at(tick):
            ref.send(tick, "H", [(s, d, tuple(payload[bounds[k]:bounds[k + 1]].tolist()))
                                 for k, s in enumerate(srcs.tolist()) for d in net.agent_neighbors(s)])
        for j, (when, src, dst) in enumerate(others):
            if when == tick and src != dst:
                ref.send(tick, "P", [(src, dst, (j, 0))])
    _deliver_p(ref, np.inf, expected_p)
    assert got_p == expected_p
    assert [books for _, books in at_faults] == [ref.books(now, before=True) for now, _ in at_faults]
    assert net.in_flight == 0  # a read settles the held flights, and with them the kind's counters
    held = net.metrics.kind("H")
    assert held.sent == held.delivered + held.dropped
    if traced:  # the tracer saw every delivery in (due, sequence) order
        assert [(m.due_at, m.src, m.dst) for m in spy.delivered()] == \
            [(m[0], m[3], m[4]) for m in sorted(m for m in ref.messages if not ref.down(m[4], m[0]))]


def _next(message):
    """Where node ``message.dst`` relays a hop-0 message (a fixed rule, the same in the reference)."""
    nxt = (message.dst + 1 + message.payload[0] % (NODES - 1)) % NODES
    return nxt if nxt != message.dst else (nxt + 1) % NODES


def _held_before(checks, now):
    """Everything collected before the check at ``now``."""
    return [m for t, items, _ in checks if t < now for m in items]


def _deliver_p(ref, until, out):
    """Deliver the reference's P messages due by ``until`` in (due, sequence) order; relays are sent as they go."""
    while True:
        pending = sorted(m for m in ref.messages if m[2] == "P" and m[0] <= until and m[1] not in ref.gone)
        if not pending:
            return
        due, sequence, _, src, dst, payload = pending[0]
        ref.gone.add(sequence)
        if ref.down(dst, due):
            continue
        out.append((due, src, dst, payload, ref.books(due) if ref.flights else None))
        if payload[1] == 0:
            message = type("M", (), {"dst": dst, "payload": payload})
            ref.send(due, "P", [(dst, _next(message), (payload[0], 1))])


def _books(net):
    """The held kind's (delivered, dropped) counts, read as a protocol may: after ``in_flight`` (which settles)."""
    assert net.in_flight >= 0
    h = net.metrics.messages.get("H")
    return (h.delivered, h.dropped) if h else (0, 0)


def _counts(net):
    net.settle()  # the metrics' counters of held kinds are brought up to date by a settlement
    m = net.metrics.messages
    h = m.get("H")
    return {"H": (h.delivered, h.dropped) if h else (0, 0), "in_flight": net.in_flight,
            "sent": sum(c.sent for c in m.values()), "delivered": sum(c.delivered for c in m.values()),
            "dropped": sum(c.dropped for c in m.values())}


def test_a_flight_is_one_queue_object_with_per_link_due_times():
    """A deferred kind's flush with sampled delays: one flight (arrays), not one entry per link."""
    net, _ = build(Distribution("exponential", {"mean": 1.0}), 0.0, False, {}, 3)
    net.subscribe_deferred("H")
    payload = np.arange(12)
    net.broadcast_chunks("H", np.arange(NODES), np.arange(0, 13, 2), payload)
    assert len(net._holding.flights) == 1 and not net._heap and not net._fresh
    (flight,) = [f for _, _, f in net._holding.flights]
    assert len(flight.due) == NODES * (NODES - 1) and np.all(np.diff(flight.due) >= 0)
    assert net.in_flight == NODES * (NODES - 1)
    net.env.run(until=100)
    items = net.collect("H")
    assert sum(len(i.dst) for i in items) == NODES * (NODES - 1) and net.in_flight == 0
    assert net.metrics.kind("H").delivered == NODES * (NODES - 1)
    assert net.metrics.node_received.tolist() == [NODES - 1] * NODES


@settings(max_examples=200, deadline=None)
@given(values=st.one_of(
    st.lists(st.sampled_from([0.0, -0.0, 1.0, 1.5, 2.0, 1e-300, 5e-324, 3.0, 1e300, np.inf, 500.25]), max_size=60),
    st.lists(st.floats(min_value=-10.0, max_value=1e6, allow_nan=False), max_size=60),
    st.lists(st.floats(min_value=500.0, max_value=516.0), max_size=300),  # due times late in a trial: packed keys
    st.lists(st.integers(0, 2**62), max_size=60),
    st.lists(st.integers(0, 20), max_size=300),
    st.lists(st.integers(-5, 5), max_size=60)))
def test_stable_order_is_numpys_stable_argsort(values):
    """``stable_order`` (integer keys packed with positions where they fit, non-negative float64 by their bit
    patterns) against ``np.argsort(kind="stable")``: ties in list order, -0.0 equal to 0.0 (float path
    refused), spans too wide to pack (unstable sort redone stably on ties)."""
    values = np.asarray(values, dtype=np.int64 if values and isinstance(values[0], int) else np.float64)
    assert np.array_equal(stable_order(values), np.argsort(values, kind="stable"))
