"""netsim.comm.handshake: the ADV -> REQ -> DATA exchange used by GIS (li2022 Alg. 2), on its own.

Keys are record ids handled as bit sets; the reliable mode's repeats (RFC 6298 timers, numbered
stages, answers as acknowledgements) are checked message by message against hand-derived times."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.comm.handshake import Handshake, bits, ids
from netsim.comm.transport import RetransmitTimer
from netsim.engine.sim import Simulation
from netsim.engine.streams import trial_sequence
from netsim.experiment.testing import MessageSpy
from tests.test_li2022 import scenario

A, B = 0, 1  # record ids


def network(loss=0.0, delay=0.25, agents=3, faults=None, seed=1):
    sc = scenario("ddp-mab", agents=agents, topology="path", seed=seed, faults=faults,
                  network={"loss": loss, "delay": {"model": "constant", "value": delay} if isinstance(delay, float)
                           else delay})
    sim = Simulation(sc, trial_sequence(seed, 0))
    spy = MessageSpy()
    spy.attach(sim)
    return sim, spy


class Store:
    """Keyed records held by each node (record id -> value); the handshake callbacks."""

    def __init__(self, holdings):
        self.holdings = {node: dict(records) for node, records in holdings.items()}
        self.arrivals = []

    def missing(self, node, keys):
        return keys & ~bits(self.holdings[node])

    def fetch(self, node, keys):
        served = keys & bits(self.holdings[node])
        return served, [self.holdings[node][k] for k in ids(served).tolist()]

    def on_data(self, node, src, keys, records):
        self.arrivals.append((node, src, tuple(ids(keys).tolist())))
        for k, v in zip(ids(keys).tolist(), records):
            self.holdings[node].setdefault(k, v)


def make(sim, store, **kw):
    return Handshake(sim, "t", missing=store.missing, fetch=store.fetch, on_data=store.on_data, **kw)


def sends(spy, kind):
    """(time, src, dst) of every transmission of ``kind``, those dropped at send (link down) included."""
    return [(m.time, m.message.src, m.message.dst) for m in spy.events if m.message.kind == kind and (
        m.event == "send" or (m.event == "drop" and m.message.due_at == m.message.sent_at))]


def test_bits_and_ids_round_trip():
    assert bits([]) == 0 and ids(0).tolist() == []
    assert bits([0, 3, 700]) == 1 | 8 | 1 << 700
    assert ids(bits([5, 0, 63, 64, 999])).tolist() == [0, 5, 63, 64, 999]


def test_three_stages_each_a_message_within_one_slot():
    sim, _ = network()
    store = Store({0: {A: 1.0, B: 2.0}, 1: {B: 2.0}, 2: {}})
    hs = make(sim, store)
    hs.advertise(0, [1], bits([A, B]))
    sim.env.run(until=1.0)
    counts = sim.metrics.messages
    assert (counts["t-adv"].sent, counts["t-req"].sent, counts["t-data"].sent) == (1, 1, 1)
    assert counts["t-adv"].records == 2 and counts["t-data"].records == 1  # only the missing record travels
    assert store.holdings[1] == {A: 1.0, B: 2.0}
    assert store.arrivals == [(1, 0, (A,))]
    assert sim.metrics.links_agent_agent == 1  # one link, one slot


def test_nothing_missing_means_no_request():
    sim, _ = network()
    store = Store({0: {A: 1.0}, 1: {A: 1.0}, 2: {}})
    hs = make(sim, store)
    hs.advertise(0, [1], bits([A]))
    sim.env.run(until=1.0)
    assert "t-req" not in sim.metrics.messages


def test_reset_ignores_stale_messages():
    sim, _ = network()
    store = Store({0: {A: 1.0}, 1: {}, 2: {}})
    hs = make(sim, store)
    hs.advertise(0, [1], bits([A]))
    sim.env.run(until=0.1)
    hs.reset()  # the ADV in flight belongs to the previous epoch
    sim.env.run(until=1.0)
    assert store.holdings[1] == {}


def test_unit_stage_delays_take_three_slots():
    sim, _ = network(delay=1.0)
    store = Store({0: {A: 1.0}, 1: {}, 2: {}})
    hs = make(sim, store)
    hs.advertise(0, [1], bits([A]))
    sim.env.run(until=2.5)
    assert store.holdings[1] == {}
    sim.env.run(until=3.5)
    assert store.holdings[1] == {A: 1.0}
    assert sim.metrics.links_agent_agent == 3  # the pair is used in three slots


# ---------------------------------------------------------------------- reliable mode, by hand
def timer(initial=3.0):
    return RetransmitTimer(initial=initial, minimum=1.0, maximum=64.0)


def test_lost_adv_is_repeated_after_the_initial_rto_then_doubled():
    """Link 0-1 down during [0, 10): ADVs sent at 0, 3, 9 (RTO 3, then 6) are dropped; the one of
    t = 21 (RTO 12) gets through, marked as a repeat. Node 1 lacks A: REQ at 21.25, DATA at 21.5.
    The REQ answers transmission 4, sent at 21: one measurement of 0.5, RTO = 0.5 + max(1, 4 * 0.25)."""
    sim, spy = network(faults={"links": [{"u": 0, "v": 1, "start": 0.0, "end": 10.0}]})
    store = Store({0: {A: 1.0}, 1: {}, 2: {}})
    rto = timer()
    hs = make(sim, store, timer=rto)
    hs.advertise(0, [1], bits([A]))
    sim.env.run(until=40.0)
    assert [t for t, *_ in sends(spy, "t-adv")] == [0.0, 3.0, 9.0, 21.0]
    assert sends(spy, "t-req") == [(21.25, 1, 0)] and sends(spy, "t-data") == [(21.5, 0, 1)]
    assert store.holdings[1] == {A: 1.0}
    assert hs.retries == 3 and hs.open_exchanges == 0
    assert rto.rto((0, 1)) == pytest.approx(1.5) and rto.rto((1, 0)) == pytest.approx(1.5)


def test_repeated_adv_of_held_keys_gets_an_empty_request():
    """Node 1 already holds A and will never advertise it to 0 (it is not told to): the first ADV gets no
    answer (as in paper mode); its repeat at t = 3 (rto_initial) is answered by an empty REQ, which ends
    the exchange."""
    sim, spy = network()
    store = Store({0: {A: 1.0}, 1: {A: 1.0}, 2: {}})
    hs = make(sim, store, timer=timer())
    hs.advertise(0, [1], bits([A]))
    sim.env.run(until=20.0)
    assert [t for t, *_ in sends(spy, "t-adv")] == [0.0, 3.0]
    assert sends(spy, "t-req") == [(3.25, 1, 0)]
    assert [m.payload[1] for m in spy.messages("send", "t-req")] == [0]  # no key wanted
    assert "t-data" not in sim.metrics.messages and hs.open_exchanges == 0


def test_an_adv_of_the_neighbour_answers_implicitly():
    """0 and 1 both hold A and advertise it to each other at t = 0: each ADV tells its receiver that the
    sender holds A, so neither is repeated and no REQ is sent (the paper-mode messages exactly)."""
    sim, spy = network()
    store = Store({0: {A: 1.0}, 1: {A: 1.0}, 2: {}})
    hs = make(sim, store, timer=timer())
    hs.advertise(0, [1], bits([A]))
    hs.advertise(1, [0], bits([A]))
    sim.env.run(until=20.0)
    assert len(sends(spy, "t-adv")) == 2 and "t-req" not in sim.metrics.messages
    assert hs.retries == 0 and hs.open_exchanges == 0


def test_keys_received_from_a_neighbour_are_not_awaited_from_it():
    """1 gets A from 0, then advertises A back to 0 (as a flood does): 0 told 1 about A, so 1 waits for
    no answer from 0 about A; its ADV to 2 is answered by 2's REQ."""
    sim, spy = network()
    store = Store({0: {A: 1.0}, 1: {}, 2: {}})
    hs = make(sim, store, timer=timer())
    hs.advertise(0, [1], bits([A]))
    sim.env.run(until=1.0)
    hs.advertise(1, [0, 2], bits([A]))
    sim.env.run(until=30.0)
    assert store.holdings[2] == {A: 1.0}
    assert hs.retries == 0 and hs.open_exchanges == 0
    assert sends(spy, "t-req") == [(0.25, 1, 0), (1.25, 2, 1)]


def test_lost_data_repeats_the_request_for_what_is_still_missing():
    """Link 0-1 down during [0.4, 0.6): the DATA of t = 0.5 is dropped. 1's REQ (t = 0.25, RTO 3) is
    repeated at 3.25; the DATA comes at 3.75 and measures 0.5."""
    sim, spy = network(faults={"links": [{"u": 0, "v": 1, "start": 0.4, "end": 0.6}]})
    store = Store({0: {A: 1.0, B: 2.0}, 1: {}, 2: {}})
    rto = timer()
    hs = make(sim, store, timer=rto)
    hs.advertise(0, [1], bits([A, B]))
    sim.env.run(until=20.0)
    assert sends(spy, "t-req") == [(0.25, 1, 0), (3.25, 1, 0)]
    assert sends(spy, "t-data") == [(0.5, 0, 1), (3.5, 0, 1)]
    assert store.holdings[1] == {A: 1.0, B: 2.0}
    assert rto.srtt((1, 0)) == pytest.approx(0.5) and hs.open_exchanges == 0


def test_a_crashed_advertiser_repeats_nothing_until_it_is_back():
    """0 is down during [1, 30) (its ``up`` flag) and the link 0-1 during [0, 1): the ADV of t = 0 is
    lost; the expiries at 3, 6, ... find 0 down and wait one RTO (3) each without backing off; the first
    after the restart (t = 30) repeats."""
    sim, spy = network(faults={"links": [{"u": 0, "v": 1, "start": 0.0, "end": 1.0}]})
    up = np.ones(3, dtype=bool)
    sim.call_at(1.0, lambda: up.__setitem__(0, False))
    sim.call_at(29.5, lambda: up.__setitem__(0, True))
    store = Store({0: {A: 1.0}, 1: {}, 2: {}})
    hs = make(sim, store, timer=timer(), up=up)
    hs.advertise(0, [1], bits([A]))
    sim.env.run(until=40.0)
    assert [t for t, *_ in sends(spy, "t-adv")] == [0.0, 30.0]
    assert store.holdings[1] == {A: 1.0}


@settings(max_examples=15, deadline=None)
@given(st.floats(0.1, 0.7), st.integers(0, 1000))
def test_lossy_exchange_completes_with_repeats(loss, seed):
    sim, _ = network(loss=loss, delay={"model": "exponential", "mean": 0.3}, seed=seed)
    store = Store({0: {A: 1.0, B: 2.0}, 1: {}, 2: {}})
    hs = make(sim, store, timer=timer(), up=sim.faults.up)
    hs.advertise(0, [1], bits([A, B]))
    sim.env.run(until=5000.0)
    assert store.holdings[1] == {A: 1.0, B: 2.0}
    assert hs.open_exchanges == 0
