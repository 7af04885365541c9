"""netsim.comm.transport.Timers and netsim.comm.exchanges.Exchanges: expiry order and RFC 6298 backoff, by hand."""

from __future__ import annotations

import numpy as np
import pytest

from netsim.comm.exchanges import Exchanges
from netsim.comm.transport import RetransmitTimer, Timers
from netsim.engine import scenario as S
from netsim.engine.sim import Simulation
from netsim.engine.streams import trial_sequence
from tests.conftest import scenario_dict


@pytest.fixture
def sim():
    return Simulation(S.from_dict(scenario_dict(protocol={"name": "ucb1"})), trial_sequence(1, 0))


def test_timers_fire_in_deadline_then_start_order_and_restart_or_stop(sim):
    fired = []
    timers = Timers(sim, lambda key: fired.append((sim.now, key)))
    timers.start("b", 2.0)
    timers.start("a", 2.0)
    timers.start("c", 1.0)
    timers.start("d", 5.0)
    timers.start("d", 3.0)   # restart: only the later start counts
    timers.start("e", 1.5)
    timers.stop("e")
    sim.env.run(until=10.0)
    assert fired == [(1.0, "c"), (2.0, "b"), (2.0, "a"), (3.0, "d")]
    assert not any(timers.running(k) for k in "abcde")


def test_exchanges_back_off_and_measure_the_answered_transmission(sim):
    """Initial RTO 3: the request of t = 0 is repeated at 3, 9 and 21 (RTO doubled per expiry). The answer
    to the transmission of t = 21 arrives at 22: a measurement of 1 (each answer names its transmission),
    so SRTT = 1, RTTVAR = 0.5, RTO = 1 + max(1, 2) = 3; the backoff ends and the exchange, still open,
    expires 3 later and repeats from RTO 3 again."""
    timer = RetransmitTimer(initial=3.0, minimum=1.0, maximum=100.0)
    sent = []

    def repeat(src, dst):
        sent.append((sim.now, ex.transmit(src, dst)))
        return True

    ex = Exchanges(sim, timer, repeat)
    sent.append((0.0, ex.transmit(0, 1)))
    sim.call_at(22.0, lambda: ex.answered(0, 1, sent[3][1], done=False))
    sim.env.run(until=26.0)
    assert [t for t, _ in sent] == [0.0, 3.0, 9.0, 21.0, 25.0]
    assert timer.srtt((0, 1)) == 1.0 and timer.rto((0, 1)) == 3.0
    assert ex.repeats == 4 and ex.transmissions == 5 and ex.is_open(0, 1)
    ex.answered(0, 1, sent[0][1], done=True)  # a late answer to the first transmission: measured (26 s)
    assert timer.samples == 2 and not ex.is_open(0, 1) and len(ex) == 0


def test_exchanges_close_when_nothing_is_wanted_and_wait_while_down(sim):
    """repeat() returning False closes the exchange; a requester that is down repeats nothing and looks
    again one RTO later without backing off."""
    timer = RetransmitTimer(initial=2.0, minimum=1.0, maximum=100.0)
    up = np.ones(3, dtype=bool)
    calls = []

    def repeat(src, dst):
        calls.append(sim.now)
        if sim.now < 9:
            ex.transmit(src, dst)
            return True
        return False

    ex = Exchanges(sim, timer, repeat, up=up)
    ex.transmit(1, 2)
    sim.call_at(1.0, lambda: up.__setitem__(1, False))
    sim.call_at(5.0, lambda: up.__setitem__(1, True))
    sim.env.run(until=40.0)
    # down at 2, 4 (each waits one RTO = 2, no backoff); up at 6: repeat (RTO 4 next); 10: nothing wanted
    assert calls == [6.0, 10.0]
    assert len(ex) == 0
    ex.transmit(1, 2)
    ex.forget([1])
    ex.transmit(0, 2)
    ex.clear()
    assert len(ex) == 0
