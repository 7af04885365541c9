"""Tests of netsim.comm.flooding (the LOCAL time-to-live protocol) against networkx and hand counts."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.comm.flooding import Flooding, record_dtype
from netsim.engine import scenario as S
from netsim.engine.distributions import parse_distribution
from netsim.engine.errors import ProtocolError
from netsim.engine.messages import Message
from netsim.engine.sim import Simulation
from netsim.engine.streams import trial_sequence

VALUES = [("x", "f8")]


def make_sim(topology="erdos_renyi", agents=12, seed=1, delay=None, adversary=None, **net):
    network = {"topology": topology, "agents": agents, **net}
    if delay is not None:
        network["delay"] = delay
    doc = {"name": "t", "bandit": {"kind": "bernoulli", "arms": 2}, "network": network,
           "protocol": {"name": "test-carrier"}, "run": {"horizon": 50, "seed": seed}}
    if adversary:
        doc["adversary"] = adversary
    sc = S.from_dict(doc)
    return Simulation(sc, trial_sequence(seed, 0))


class Driver:
    """Publishes for ``who`` at the ticks in ``when`` (all ticks if None) and flushes every tick."""

    def __init__(self, sim, gamma, who=None, when=None, **kw):
        self.sim = sim
        self.arrivals = []  # (time, dst, origin, seq)
        self.flood = Flooding(sim, "flood", gamma, VALUES, on_receive=self.got, **kw)
        self.who = np.arange(sim.num_agents) if who is None else np.asarray(who)
        self.when = when
        self.per_tick = []  # (engine messages, records) sent by each flush
        sim.every(1.0, self.tick)

    def got(self, dst, records):
        for d, r in zip(dst.tolist(), records, strict=False):
            self.arrivals.append((self.sim.now, d, int(r["origin"]), int(r["seq"])))

    def tick(self, now):
        if self.when is None or now in self.when:
            self.flood.publish(self.who, {"x": np.full(len(self.who), now)})
        before = self.flood.records_forwarded
        sent = self.flood.flush()
        self.per_tick.append((sent, self.flood.records_forwarded - before))

    def run(self, until):
        self.sim.env.run(until=until)
        return self


def test_record_dtype_header_and_clash():
    dt = record_dtype([("mean", "f8", (3,)), ("count", "f8", (3,))])
    assert dt.names[:4] == ("origin", "seq", "created", "life")
    with pytest.raises(ValueError, match="clash"):
        record_dtype([("life", "f8")])


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), gamma=st.integers(0, 5))
def test_arrival_time_is_shortest_path_distance_within_gamma(seed, gamma):
    sim = make_sim(agents=14, seed=seed, p=0.25)
    drv = Driver(sim, gamma, when={0.0}).run(12)
    dist = dict(nx.all_pairs_shortest_path_length(sim.network.agent_graph))
    got = {(d, o): t for t, d, o, s in drv.arrivals}
    assert len(got) == len(drv.arrivals)  # each record reported once per receiver
    for m in range(14):
        for o in range(14):
            if m == o:
                continue
            d = dist[o][m]
            if d <= gamma:
                assert got[(m, o)] == d
            else:
                assert (m, o) not in got


def test_latest_table_lags_by_distance_when_everyone_publishes_every_trial():
    sim = make_sim(agents=15, seed=3, p=0.2)
    gamma = 3
    drv = Driver(sim, gamma)
    snapshots = {}
    sim.every(1.0, lambda now: snapshots.setdefault(now, drv.flood.latest_seq.copy()))  # after driver's tick
    drv.run(10)
    dist = dict(nx.all_pairs_shortest_path_length(sim.network.agent_graph))
    t = 8.0
    table = snapshots[t]
    for m in range(15):
        for o in range(15):
            if m == o:
                assert table[m, o] == -1
            elif dist[o][m] <= gamma:
                assert table[m, o] == t - dist[o][m]  # seq = creation trial
            else:
                assert table[m, o] == -1
    # values travel with the record
    assert np.all(drv.flood.latest_values["x"][table >= 0] == drv.flood.latest_created[table >= 0])


@pytest.mark.parametrize("gamma", [1, 2, 3, 4])
def test_single_record_forwarded_once_per_node_within_gamma_minus_one(gamma):
    sim = make_sim(agents=16, seed=5, p=0.2)
    drv = Driver(sim, gamma, who=[0], when={0.0}).run(10)
    graph = sim.network.agent_graph
    dist = nx.single_source_shortest_path_length(graph, 0)
    # every node at distance < gamma forwards the record exactly once to all its neighbours
    expected = sum(graph.degree(v) for v, d in dist.items() if d < gamma)
    assert drv.flood.records_forwarded == expected
    assert sim.metrics.kind("flood").records == expected
    assert sim.metrics.kind("flood").sent == expected  # one record per message here
    reached = sum(1 for v, d in dist.items() if 0 < d <= gamma)
    assert drv.flood.records_received - drv.flood.duplicates == reached
    assert drv.flood.duplicates == expected - reached


def test_messages_per_trial_on_a_path():
    # path 0-1-2-3-4, gamma = 2, everyone publishes every trial. In steady state node v sends
    # one message to each neighbour carrying its own record and those of the nodes at distance 1:
    # |B(v, 1)| = 2, 3, 3, 3, 2 records, degrees 1, 2, 2, 2, 1.
    sim = make_sim(topology="path", agents=5)
    drv = Driver(sim, 2).run(6)
    assert drv.per_tick[0] == (8, 8)  # trial 0: own records only, sum of degrees = 8
    for sent, records in drv.per_tick[1:]:
        assert sent == 8
        assert records == 1 * 2 + 2 * 3 + 2 * 3 + 2 * 3 + 1 * 2  # = 22


@pytest.mark.parametrize("gamma, records", [(1, 2 * 6), (2, 6 * 7 + 2 * 6), (3, 6 * 7 + 6 * 7)])
def test_messages_per_trial_on_a_star(gamma, records):
    # star: centre 0 and 6 leaves. gamma = 1: own records only, 2 * 6 record-hops.
    # gamma = 2: the centre forwards its own + 6 leaf records (7) to 6 leaves; a leaf forwards
    # its own + the centre's (2) to the centre. gamma = 3: a leaf also forwards the 5 other
    # leaves' records (distance 2 < 3), so 7 records each way.
    sim = make_sim(topology="star", agents=7)
    drv = Driver(sim, gamma).run(8)
    for sent, recs in drv.per_tick[gamma:]:
        assert sent == 12
        assert recs == records


def test_gamma_zero_sends_nothing():
    sim = make_sim(topology="path", agents=4)
    drv = Driver(sim, 0).run(5)
    assert sim.metrics.total("sent") == 0 and not drv.arrivals


def test_duplicates_within_a_batch_and_echoes_are_dropped():
    # complete graph K4, gamma = 3: a record from 0 reaches 1, 2, 3 at t=1; each forwards it to
    # the others and back to 0 at t=2: all of those are duplicates or echoes.
    sim = make_sim(topology="complete", agents=4)
    drv = Driver(sim, 3, who=[0], when={0.0}).run(6)
    assert sorted(d for _, d, _, _ in drv.arrivals) == [1, 2, 3]
    assert drv.flood.records_forwarded == 3 + 3 * 3
    assert drv.flood.duplicates == 9


def test_sampled_delays_forward_at_next_flush():
    sim = make_sim(topology="path", agents=4, delay={"model": "uniform", "low": 0.2, "high": 0.8})
    drv = Driver(sim, 3, who=[0], when={0.0}).run(6)
    # every hop waits for the next tick: node d hears at time d - 1 + (delay of last hop)
    times = {d: t for t, d, _, _ in drv.arrivals}
    for d in (1, 2, 3):
        assert d - 1 + 0.2 <= times[d] <= d - 1 + 0.8


def test_on_receipt_relay_forwards_immediately():
    sim = make_sim(topology="path", agents=4, delay={"model": "constant", "value": 0.25})
    drv = Driver(sim, 3, who=[0], when={0.0}, relay="on_receipt").run(3)
    times = {d: t for t, d, _, _ in drv.arrivals}
    assert times == {1: 0.25, 2: 0.5, 3: 0.75}


def test_stale_records_beyond_the_window_are_dropped():
    sim = make_sim(topology="path", agents=2)
    flood = Flooding(sim, "flood", 1, VALUES)

    def fresh(seq):  # one copy of 0's record with this seq delivered to 1: taken as new?
        rec = flood.records([0], {"x": [0.0]})
        rec["seq"] = seq
        before = flood.duplicates
        flood._process([Message("flood", 0, 1, rec, 0.0, 0.0, 1)])
        return flood.duplicates == before

    assert fresh(100)
    assert not fresh(100 - 64)   # 64 behind the newest: stale
    assert fresh(100 - 63)       # inside the window, unseen
    assert not fresh(100 - 63)   # now seen
    assert not fresh(100)


def test_corruptor_same_copy_for_all_links_and_counted():
    adversary = {"agents": [0], "corruption": 1.0, "distribution": {"model": "constant", "value": 7.0}}
    sim = make_sim(topology="star", agents=5, adversary=adversary)
    drv = Driver(sim, 2, when={0.0})
    counted = []
    sim.network.corruptible("flood", drv.flood.corruptor("x", records_corrupted=counted.append))
    drv.run(4)
    values = drv.flood.latest_values["x"]
    seqs = drv.flood.latest_seq
    # centre 0 is byzantine: its own record reaches every leaf as 7; it relays leaves' records honestly
    assert np.all(values[1:, 0] == 7.0)
    leaves = [(m, o) for m in range(1, 5) for o in range(1, 5) if m != o]
    assert all(seqs[m, o] == 0 and values[m, o] == 0.0 for m, o in leaves)
    assert counted == [1]                      # decided once, at the source
    assert sim.metrics.kind("flood").corrupted == 4   # the 4 messages that carried it


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), gamma=st.integers(1, 4),
       delay=st.sampled_from([None, {"model": "uniform", "low": 0.5, "high": 2.5},
                              {"model": "exponential", "mean": 0.7}]))
def test_duplicate_detection_matches_a_set_of_seen_records(seed, gamma, delay):
    """Each receiver reports every (origin, seq) at most once and never its own records, against a set."""
    sim = make_sim(agents=12, seed=seed, p=0.3, delay=delay)
    drv = Driver(sim, gamma).run(10)
    keys = [(d, o, s) for _, d, o, s in drv.arrivals]
    assert len(keys) == len(set(keys))
    assert all(d != o for d, o, _ in keys)
    dist = dict(nx.all_pairs_shortest_path_length(sim.network.agent_graph))
    assert all(dist[o][d] <= gamma for d, o, _ in keys)  # nothing travels beyond gamma hops
    assert drv.flood.records_received == drv.flood.duplicates + len(keys)


def test_forget_starts_a_new_incarnation():
    sim = make_sim(topology="path", agents=3)
    drv = Driver(sim, 2, who=[0]).run(3)
    seen_before = {(d, s) for _, d, o, s in drv.arrivals}
    drv.flood.forget([0])
    assert drv.flood._seq[0] == 1 << 32
    drv.run(6)
    later = [(d, s) for _, d, o, s in drv.arrivals if s >= 1 << 32]
    assert later and not set(later) & seen_before  # the new life's records are news, not duplicates


def test_deferred_handling_gives_the_same_tables_at_ticks():
    runs = []
    for deferred in (False, True):
        sim = make_sim(agents=16, seed=4, p=0.3, delay={"model": "exponential", "mean": 0.7})
        drv = Driver(sim, 2, deferred=deferred)
        tables = []
        sim.every(1.0, lambda now, d=drv, out=tables: out.append(d.flood.latest_seq.copy()))  # after the flush
        drv.run(12)
        drv.flood.process()  # deliveries after the last tick
        runs.append((np.array(tables), drv.flood.records_forwarded, drv.flood.duplicates))
    assert np.array_equal(runs[0][0], runs[1][0])
    assert runs[0][1:] == runs[1][1:]


class SumDriver:
    """Every agent publishes (value, weight) every tick; the receivers keep sums over their latest tables."""

    def __init__(self, sim, gamma, synchronous):
        self.sim = sim
        self.flood = Flooding(sim, "flood", gamma, [("x", "f8", (2,)), ("w", "f8")], deferred=True,
                              synchronous=synchronous, sums={"x": "x", "xw": ("x", "w")})
        self.rng = np.random.default_rng(0)
        self.looks = []
        sim.every(1.0, self.tick)

    def tick(self, now):
        self.flood.process()
        m = self.sim.num_agents
        self.looks.append((self.flood.sums["x"].copy(), self.flood.sums["xw"].copy(), self.flood.latest_seq,
                           self.flood.latest_values["w"], self.flood.records_received, self.flood.duplicates))
        who = np.flatnonzero(self.rng.random(m) < 0.7)  # not every agent publishes every tick
        self.flood.publish(who, {"x": self.rng.random((len(who), 2)), "w": self.rng.random(len(who))})
        self.flood.flush()


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), gamma=st.integers(1, 4))
def test_synchronous_hops_equal_the_message_path(seed, gamma):
    """The sparse-product hops (paper mode) give the message path's tables, counters and engine counts;
    the sums agree up to floating-point summation order (relative 1e-12)."""
    runs = []
    for synchronous in (False, True):
        sim = make_sim(agents=15, seed=seed, p=0.25)
        drv = SumDriver(sim, gamma, synchronous)
        sim.env.run(until=9)
        assert drv.flood._mode == ("sync" if synchronous else "messages")
        m = sim.metrics
        runs.append((drv.looks, drv.flood.records_forwarded, drv.flood.published,
                     (m.kind("flood").sent, m.kind("flood").records, m.kind("flood").delivered, m.links_agent_agent,
                      m.node_sent.tolist(), m.node_received.tolist())))
    (looks_m, *rest_m), (looks_s, *rest_s) = runs
    assert rest_m == rest_s
    for (xm, wm, seq_m, val_m, rec_m, dup_m), (xs, ws, seq_s, val_s, rec_s, dup_s) in zip(looks_m, looks_s,
                                                                                           strict=True):
        assert np.array_equal(seq_m, seq_s) and np.array_equal(val_m, val_s)
        assert (rec_m, dup_m) == (rec_s, dup_s)
        np.testing.assert_allclose(xs, xm, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(ws, wm, rtol=1e-12, atol=1e-12)


class ReceiveDriver:
    """70 % of the agents publish a value every tick; ``on_receive`` collects what arrives, per receiver."""

    def __init__(self, sim, gamma, synchronous, corruptible=False):
        self.sim = sim
        self.flood = Flooding(sim, "flood", gamma, VALUES, on_receive=self.got, latest=False, deferred=True,
                              synchronous=synchronous)
        self.corrupted = []
        if corruptible:
            sim.network.corruptible("flood", self.flood.corruptor("x", records_corrupted=self.corrupted.append))
        self.rng = np.random.default_rng(0)
        self.heard = []  # per arrival: {receiver: [(origin, seq, created, life, x), ...]} in arrival order
        sim.every(1.0, self.tick)

    def got(self, dst, records):
        by_receiver = {}
        for d, r in zip(dst.tolist(), records.tolist(), strict=True):
            by_receiver.setdefault(d, []).append(r)
        self.heard.append((self.sim.now, by_receiver))

    def tick(self, now):
        self.flood.process()
        who = np.flatnonzero(self.rng.random(self.sim.num_agents) < 0.7)
        self.flood.publish(who, {"x": self.rng.random(len(who))})
        self.flood.flush()


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), gamma=st.integers(1, 4), corruption=st.sampled_from([0.0, 0.2, 0.5]))
def test_synchronous_hops_deliver_the_message_paths_records_in_its_order(seed, gamma, corruption):
    """With ``on_receive``, the sparse hops hand each receiver the records the message path hands it, in
    the same order (the order of different receivers' records may interleave differently), with the
    same values, corrupted at the source alike (same draws of the adversary's stream), and the same
    counters."""
    adversary = {"byzantine": 0.5, "corruption": corruption, "distribution": {"model": "uniform", "low": 0, "high": 1}}
    runs = []
    for synchronous in (False, True):
        sim = make_sim(agents=15, seed=seed, p=0.25, adversary=adversary if corruption else None)
        drv = ReceiveDriver(sim, gamma, synchronous, corruptible=bool(corruption))
        sim.env.run(until=10)
        drv.flood.process()
        assert drv.flood._mode == ("sync" if synchronous else "messages")
        m, f = sim.metrics.kind("flood"), drv.flood
        runs.append((drv.heard, drv.corrupted, f.records_forwarded, f.records_received, f.duplicates, f.published,
                     (m.sent, m.records, m.delivered, m.corrupted, sim.metrics.links_agent_agent)))
    assert runs[0] == runs[1]
    assert any(heard for _, heard in runs[0][0])
    assert not corruption or runs[0][1]  # something was corrupted


def test_synchronous_hops_only_with_corruption_at_the_source():
    """Relayed or in-transit corruption changes records on the way: such runs take the message path."""
    for extra, mode in (({}, "sync"), ({"relay": True}, "messages"), ({"link_corruption": 0.1}, "messages")):
        adversary = {"byzantine": 0.5, "corruption": 0.1, "distribution": {"model": "constant", "value": 7.0},
                     **extra}
        sim = make_sim(agents=10, seed=3, p=0.3, adversary=adversary)
        drv = ReceiveDriver(sim, 2, True, corruptible=True)
        sim.env.run(until=3)
        assert drv.flood._mode == mode


def test_synchronous_hops_need_the_deliveries_processed_before_publishing():
    sim = make_sim(agents=6, seed=2, p=0.5)
    flood = Flooding(sim, "flood", 2, VALUES, on_receive=lambda dst, records: None, latest=False, deferred=True,
                     synchronous=True)

    def tick(now):  # publishes before taking in what arrived: own records would lead each chunk
        flood.publish(np.arange(6), {"x": np.zeros(6)})
        flood.flush()

    sim.every(1.0, tick)
    with pytest.raises(ProtocolError, match="process"):
        sim.env.run(until=3)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), sizes=st.lists(st.integers(0, 6), min_size=1, max_size=8),
       probability=st.sampled_from([0.05, 0.3, 1.0]), relay=st.booleans())
def test_corruptor_chunks_make_the_draws_of_one_call_per_chunk(seed, sizes, probability, relay):
    """The vectorised source corruption of many sender chunks equals calling the rule chunk by chunk."""
    sim = make_sim(agents=8)
    rule = Flooding(sim, "flood", 2, VALUES).corruptor("x")
    rng = np.random.default_rng(seed)
    senders = np.sort(rng.choice(8, len(sizes), replace=False))
    bounds = np.concatenate(([0], np.cumsum(sizes)))
    payload = np.zeros(int(bounds[-1]), dtype=record_dtype(VALUES))
    payload["origin"] = rng.integers(0, 8, len(payload))
    payload["x"] = rng.random(len(payload))
    q = parse_distribution({"model": "uniform", "low": 5.0, "high": 6.0}, key="q", models=("uniform",))
    one, many = payload.copy(), payload.copy()
    draws_one, draws_many = np.random.default_rng(seed + 1), np.random.default_rng(seed + 1)
    counts = []
    for c, sender in enumerate(senders.tolist()):
        a, b = bounds[c], bounds[c + 1]
        new, n = rule(one[a:b], sender=sender, rng=draws_one, probability=probability, q=q, relay=relay)
        one[a:b] = new
        counts.append(n)
    got = rule.chunks(many, bounds[:-1], bounds[1:], senders, rng=draws_many, probability=probability, q=q,
                      relay=relay)
    assert got.tolist() == counts
    assert np.array_equal(one, many)
    assert draws_one.random() == draws_many.random()  # the same number of draws
