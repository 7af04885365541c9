"""netsim.handshake: the ADV -> REQ -> DATA exchange used by GIS (li2022 Alg. 2), on its own."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.handshake import Handshake
from netsim.sim import Simulation
from netsim.streams import trial_sequence
from tests.test_li2022 import scenario


def network(loss=0.0, delay=0.25, agents=3):
    sc = scenario("ddp-mab", agents=agents, topology="path",
                  network={"loss": loss, "delay": {"model": "constant", "value": delay}})
    return Simulation(sc, trial_sequence(1, 0))


class Store:
    """Keyed records held by each node; the handshake callbacks."""

    def __init__(self, holdings):
        self.holdings = {node: dict(records) for node, records in holdings.items()}
        self.arrivals = []

    def missing(self, node, keys):
        return [k for k in keys if k not in self.holdings[node]]

    def fetch(self, node, keys):
        served = [k for k in keys if k in self.holdings[node]]
        return served, [self.holdings[node][k] for k in served]

    def on_data(self, node, src, keys, records):
        self.arrivals.append((node, src, tuple(keys)))
        for k, v in zip(keys, records):
            self.holdings[node].setdefault(k, v)


def make(sim, store, **kw):
    return Handshake(sim.network, "t", missing=store.missing, fetch=store.fetch, on_data=store.on_data, **kw)


def test_three_stages_each_a_message_within_one_slot():
    sim = network()
    store = Store({0: {"a": 1.0, "b": 2.0}, 1: {"b": 2.0}, 2: {}})
    hs = make(sim, store)
    hs.advertise(0, [1], ["a", "b"])
    sim.env.run(until=1.0)
    counts = sim.metrics.messages
    assert (counts["t-adv"].sent, counts["t-req"].sent, counts["t-data"].sent) == (1, 1, 1)
    assert counts["t-data"].records == 1  # only the missing record travels
    assert store.holdings[1] == {"a": 1.0, "b": 2.0}
    assert store.arrivals == [(1, 0, ("a",))]
    assert sim.metrics.links_agent_agent == 1  # one link, one slot


def test_nothing_missing_means_no_request():
    sim = network()
    store = Store({0: {"a": 1.0}, 1: {"a": 1.0}, 2: {}})
    hs = make(sim, store)
    hs.advertise(0, [1], ["a"])
    sim.env.run(until=1.0)
    assert "t-req" not in sim.metrics.messages


def test_reset_ignores_stale_messages():
    sim = network()
    store = Store({0: {"a": 1.0}, 1: {}, 2: {}})
    hs = make(sim, store)
    hs.advertise(0, [1], ["a"])
    sim.env.run(until=0.1)
    hs.reset()  # the ADV in flight belongs to the previous epoch
    sim.env.run(until=1.0)
    assert store.holdings[1] == {}


def test_unit_stage_delays_take_three_slots():
    sim = network(delay=1.0)
    store = Store({0: {"a": 1.0}, 1: {}, 2: {}})
    hs = make(sim, store)
    hs.advertise(0, [1], ["a"])
    sim.env.run(until=2.5)
    assert store.holdings[1] == {}
    sim.env.run(until=3.5)
    assert store.holdings[1] == {"a": 1.0}
    assert sim.metrics.links_agent_agent == 3  # the pair is used in three slots


@settings(max_examples=15, deadline=None)
@given(st.floats(0.1, 0.7), st.integers(0, 1000))
def test_lossy_exchange_completes_with_retries(loss, seed):
    sc = scenario("ddp-mab", agents=3, topology="path", seed=seed,
                  network={"loss": loss, "delay": {"model": "exponential", "mean": 0.3}})
    sim = Simulation(sc, trial_sequence(seed, 0))
    store = Store({0: {"a": 1.0, "b": 2.0}, 1: {}, 2: {}})
    hs = make(sim, store, reliable=True, timeout=1.0)
    hs.advertise(0, [1], ["a", "b"])
    sim.every(1.0, hs.retry, start=1.0)
    sim.env.run(until=500.0)
    assert store.holdings[1] == {"a": 1.0, "b": 2.0}
    assert hs.open_exchanges == 0


def test_bad_timeout():
    sim = network()
    store = Store({0: {}, 1: {}, 2: {}})
    with pytest.raises(ValueError, match="timeout"):
        make(sim, store, timeout=0.0)
