"""netsim.comm.transport: RFC 6298 timers derived by hand, and exactly-once delivery under loss, duplication,
reordering and outages, against plain expectations (a set of what was sent)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.comm.corruption import Lie, rewriting
from netsim.comm.protocol import Protocol
from netsim.comm.transport import RetransmitTimer, Transport, fanouts
from netsim.engine import params as P
from netsim.engine import scenario as S
from netsim.engine.distributions import Distribution
from netsim.engine.registry import protocols
from netsim.engine.sim import Simulation
from netsim.engine.streams import trial_sequence
from tests.conftest import scenario_dict


def test_rfc6298_estimator_by_hand():
    timer = RetransmitTimer(initial=3.0, minimum=0.5, maximum=40.0)
    assert timer.rto("k") == 3.0                      # (2.1)
    assert timer.rto("k", 2) == 12.0                  # (5.5) doubled per expiry
    assert timer.rto("k", 9) == 40.0                  # (2.5) capped
    timer.sample("k", 2.0)                            # (2.2): srtt 2, rttvar 1, rto = 2 + 4 * 1
    assert timer.rto("k") == 6.0
    timer.sample("k", 4.0)                            # (2.3): rttvar = .75 + .25 * 2 = 1.25, srtt = 2.25
    assert timer.rto("k") == pytest.approx(2.25 + 4 * 1.25)
    assert timer.srtt("k") == pytest.approx(2.25)
    assert timer.rto("other") == 3.0                  # one estimator per key
    timer.sample("tiny", 0.01)                        # (2.4): never below the minimum, G = minimum
    assert timer.rto("tiny") == pytest.approx(0.51)
    timer.forget("k")
    assert timer.rto("k") == 3.0
    with pytest.raises(ValueError):
        RetransmitTimer(initial=0.1, minimum=0.5, maximum=40.0)


class Sender(Protocol):
    """Test protocol: agent 0 sends ``count`` numbered payloads to agent 1, one per tick (``at``: only those ticks)."""

    name = "test-transport-sender"
    servers = None
    crash_states = ("kept", "lost")
    fields = {"count": P.integer(5, low=0, label="messages"), "attempts": P.integer(0, low=0, label="attempts"),
              "initial": P.real(3.0, low=0.0, label="initial timeout", unit="time"),
              "every": P.real(1.0, low=0.0, low_open=True, label="send period", unit="time"),
              "maximum": P.real(1e6, low=1.0, label="maximum timeout", unit="time")}

    def start(self):
        sim = self.sim
        self.delivered: list[tuple[float, int]] = []
        self.given_up: list[int] = []
        self.timer = RetransmitTimer(initial=self.params["initial"], minimum=0.5, maximum=self.params["maximum"])
        attempts = self.params["attempts"] or None
        self.copies: list[tuple[float, int]] = []
        self.transport = Transport(sim, "data", self._on_data, timer=self.timer, attempts=attempts,
                                   on_give_up=lambda s, d, p: self.given_up.append(p), up=sim.faults.up,
                                   on_duplicate=lambda m: self.copies.append((self.sim.now, m.payload)))
        self.sent = 0
        sim.every(self.params["every"], self._tick)

    def _tick(self, now):
        if self.sent < self.params["count"]:
            self.transport.send(0, 1, self.sent)
            self.sent += 1

    def _on_data(self, messages):
        for m in messages:
            assert m.dst == 1 and m.src == 0
            self.delivered.append((self.sim.now, m.payload))


protocols._items.setdefault(Sender.name, Sender)




def run(protocol=None, faults=None, *, delay=1.0, loss=0.0, horizon=50.0, seed=3, name="test-transport-sender"):
    network = {"topology": "path", "agents": 2, "loss": loss,
               "delay": delay if isinstance(delay, dict) else {"model": "constant", "value": delay}}
    doc = scenario_dict(protocol={"name": name, **(protocol or {})}, network=network,
                        run={"horizon": horizon, "checkpoints": 2, "seed": seed})
    if faults is not None:
        doc["faults"] = faults
    scenario = S.from_dict(doc)
    sim = Simulation(scenario, trial_sequence(seed, 0))
    row = sim.run().row
    return sim.protocol, row


def test_lossless_exchange_takes_one_round_trip_and_measures_it():
    proto, row = run({"count": 3})
    assert proto.delivered == [(1.0, 0), (2.0, 1), (3.0, 2)]   # sent at 0, 1, 2 over unit delays
    t = proto.transport
    assert t.counts["retransmitted"] == 0 and t.counts["acknowledged"] == 3 and t.outstanding() == 0
    assert proto.timer.srtt((0, 1)) == pytest.approx(2.0)       # every round trip is 2
    assert row["sent_data"] == 3 and row["sent_data-ack"] == 3


def test_karn_rule_and_backoff_reset_on_a_new_exchange():
    # the link is down during [0, 1): the first message is lost, retransmitted at t = 3 (initial RTO),
    # acknowledged at 5; no RTT sample from it (Karn). The next exchange starts at 10 with the initial RTO
    # again (not the backed-off 6): the link is down again at [10, 11), so its retransmission is at 13.
    proto, _ = run({"count": 2, "every": 10.0}, {"links": [{"u": 0, "v": 1, "start": 0.0, "end": 0.5},
                                                           {"u": 0, "v": 1, "start": 10.0, "end": 10.5}]})
    assert proto.delivered == [(4.0, 0), (14.0, 1)]
    assert proto.timer.samples == 0
    assert proto.transport.counts["retransmitted"] == 2


@pytest.mark.parametrize("outage", [600.0, 1200.0, 2400.0])
def test_an_outage_costs_logarithmically_many_retransmissions(outage):
    # the link is down for [0, L): exponential backoff retries at 3, 9, 21, ... (3 (2^a - 1)),
    # so the message gets through after ceil(log2(L / 3 + 1)) retransmissions, not O(L)
    proto, _ = run({"count": 1}, {"links": [{"u": 0, "v": 1, "start": 0.0, "end": outage}]},
                   horizon=4 * outage)
    retries = proto.transport.counts["retransmitted"]
    assert retries == math.ceil(math.log2(outage / 3.0 + 1.0))
    assert [p for _, p in proto.delivered] == [0]


@pytest.mark.parametrize("seed", range(4))
def test_exactly_once_under_loss_duplication_and_reordering(seed):
    faults = {"duplication": 0.3, "reorder": 0.3, "reorder_delay": {"model": "exponential", "mean": 3.0}}
    delay = {"model": "lognormal", "mean": 2.0, "sigma": 1.0}
    proto, row = run({"count": 60, "maximum": 50.0}, faults, delay=delay, loss=0.4, horizon=2000.0, seed=seed)
    payloads = [p for _, p in proto.delivered]
    assert sorted(payloads) == list(range(60))                  # every number once, none lost, none twice
    assert proto.transport.counts["duplicates"] > 0             # copies did arrive, and were not handed over
    assert proto.transport.outstanding() == 0
    assert row["messages_sent"] == row["messages_delivered"] + row["messages_dropped"] + row["messages_in_flight"]


def test_attempts_bound_gives_up_and_a_new_incarnation_is_news():
    proto, _ = run({"count": 2, "attempts": 2}, {"links": [{"u": 0, "v": 1, "start": 0.0, "end": 100.0}]})
    assert proto.given_up == [0, 1] and proto.delivered == []
    assert proto.transport.counts["abandoned"] == 2


def test_receiver_memory_follows_the_senders_low_water_mark():
    proto, _ = run({"count": 40}, {"links": [{"u": 0, "v": 1, "start": 5.0, "end": 6.0}]}, horizon=200.0)
    t = proto.transport
    assert sorted(p for _, p in proto.delivered) == list(range(40))
    assert t._floor[(1, 0)] == 40 and not t._above[(1, 0)]


def test_a_copy_of_a_message_already_handed_over_is_reported():
    # the acknowledgement sent at t = 1 is lost (link down [0.9, 1.1)); the message goes again at t = 3
    # (initial RTO) and arrives at 4 as a copy: not handed over again, reported to on_duplicate
    proto, _ = run({"count": 1}, {"links": [{"u": 0, "v": 1, "start": 0.9, "end": 1.1}]})
    assert proto.delivered == [(1.0, 0)] and proto.copies == [(4.0, 0)]
    assert proto.transport.counts["duplicates"] == 1 and proto.transport.outstanding() == 0


def test_resend_is_a_fast_retransmit_without_backoff():
    # the acknowledgement of the message sent at 0 is lost (link down [0.9, 1.1)); resend() at 1.2 sends it
    # again, it arrives at 2.2 as a copy and its acknowledgement at 3.2 ends the exchange before the RTO (5)
    class Resender(Sender):
        name = "test-transport-resender"

        def start(self):
            super().start()
            self.sim.call_at(1.2, lambda: self.resent.append(self.transport.resend(0, 1)))
            self.resent = []

    protocols._items.setdefault(Resender.name, Resender)
    proto, _ = run({"count": 1, "initial": 5.0}, {"links": [{"u": 0, "v": 1, "start": 0.9, "end": 1.1}]},
                   name=Resender.name)
    t = proto.transport
    assert proto.resent == [1] and proto.delivered == [(1.0, 0)]
    assert t.counts["retransmitted"] == 1 and t.counts["duplicates"] == 1 and t.outstanding() == 0
    assert proto.timer.samples == 0                     # Karn: it was sent twice
class Asker(Protocol):
    """Test protocol: agent 0 asks agent 1 ``count`` questions (one per tick) on a transport without
    acknowledgements; agent 1 answers each on a transport of its own; the answer acknowledges the question."""

    name = "test-transport-asker"
    servers = None
    fields = {"count": P.integer(5, low=0, label="questions"), "reliable": P.boolean(True, label="reliable"),
              "sample": P.boolean(True, label="sample round trips")}

    def start(self):
        sim = self.sim
        self.timer = RetransmitTimer(initial=3.0, minimum=0.5, maximum=50.0)
        reliable = self.params["reliable"]
        self.questions = Transport(sim, "question", self._on_question, timer=self.timer, acknowledge=False,
                                   reliable=reliable)
        self.answers = Transport(sim, "answer", self._on_answer, timer=self.timer, reliable=reliable)
        self.asked: dict[int, int] = {}          # question payload -> its sequence number
        self.heard: list[int] = []               # questions agent 1 was handed (each must come once)
        self.answered_at: dict[int, float] = {}
        self.sent = 0
        sim.every(1.0, self._tick)

    def _tick(self, now):
        if self.sent < self.params["count"]:
            self.asked[self.sent] = self.questions.send(0, 1, self.sent)
            self.sent += 1

    def _on_question(self, messages):
        for m in messages:
            self.heard.append(m.payload)
            self.answers.send(1, 0, m.payload)

    def _on_answer(self, messages):
        for m in messages:
            self.answered_at.setdefault(m.payload, self.sim.now)
            self.questions.answered(0, 1, self.asked[m.payload], sample=self.params["sample"])


protocols._items.setdefault(Asker.name, Asker)


def _ask(params, faults=None, *, loss=0.0, delay=1.0, seed=3, horizon=300.0):
    network = {"topology": "path", "agents": 2, "loss": loss,
               "delay": delay if isinstance(delay, dict) else {"model": "constant", "value": delay}}
    doc = scenario_dict(protocol={"name": Asker.name, **params}, network=network,
                        run={"horizon": horizon, "checkpoints": 2, "seed": seed})
    if faults is not None:
        doc["faults"] = faults
    sim = Simulation(S.from_dict(doc), trial_sequence(seed, 0))
    return sim.protocol, sim.run().row


def test_a_question_is_acknowledged_by_its_answer():
    proto, row = _ask({"count": 3})
    # asked at 0, 1, 2 over unit delays, answered two periods later; the answer is the only acknowledgement
    assert proto.answered_at == {0: 2.0, 1: 3.0, 2: 4.0} and proto.heard == [0, 1, 2]
    assert "sent_question-ack" not in row and row["sent_answer-ack"] == 3
    assert proto.timer.srtt((0, 1)) == pytest.approx(2.0) and proto.questions.outstanding() == 0
    assert proto.questions.counts["retransmitted"] == 0


@pytest.mark.parametrize("seed", range(3))
def test_questions_are_repeated_until_answered_and_handed_over_once(seed):
    faults = {"duplication": 0.3, "reorder": 0.2}
    proto, _ = _ask({"count": 40}, faults, loss=0.4, delay={"model": "exponential", "mean": 1.0}, seed=seed,
                    horizon=3000.0)
    assert sorted(proto.heard) == list(range(40))                   # each question reached its owner once
    assert sorted(proto.answered_at) == list(range(40))
    assert proto.questions.outstanding() == 0 and proto.answers.outstanding() == 0
    assert proto.questions.counts["retransmitted"] > 0              # a lost answer made the question repeat


def test_an_answer_that_may_have_been_retransmitted_need_not_measure_the_round_trip():
    proto, _ = _ask({"count": 3, "sample": False})
    assert math.isnan(proto.timer.srtt((0, 1))) and proto.questions.outstanding() == 0
    assert proto.timer.srtt((1, 0)) == pytest.approx(2.0)       # the answers' own acknowledgements still do


def test_datagram_mode_sends_the_owners_payloads_and_nothing_else():
    proto, row = _ask({"count": 3, "reliable": False})
    assert proto.heard == [0, 1, 2] and proto.answered_at == {0: 2.0, 1: 3.0, 2: 4.0}
    assert row["sent_question"] == 3 and row["sent_answer"] == 3 and row["messages_sent"] == 6
    assert proto.asked == {0: -1, 1: -1, 2: -1}                    # no sequence numbers


def test_lie_replaces_values_by_draws_of_q():
    q = Distribution("constant", {"value": 7.0})
    lie = Lie(rng=np.random.default_rng(0), probability=1.0, q=q, sender=0, relay=False)
    assert np.array_equal(lie(np.zeros(3)), [7.0, 7.0, 7.0]) and lie.hits == 3
    never = Lie(rng=np.random.default_rng(0), probability=0.0, q=q, sender=0, relay=False)
    values = np.arange(4.0)
    assert never(values) is values and never.hits == 0
    half = Lie(rng=np.random.default_rng(1), probability=0.5,
               q=Distribution("uniform", {"low": 0.0, "high": 1.0}), sender=0, relay=False)
    gram = np.stack([np.eye(4) * 5, np.ones((4, 4)) * 9])
    out = half(gram, symmetric=True)
    assert np.array_equal(out, np.swapaxes(out, -1, -2))       # a Gram matrix stays symmetric
    assert 0 < half.hits <= 20 and np.count_nonzero(out != gram) >= half.hits


def test_rewriting_corruptor_counts_and_keeps_untouched_payloads():
    corrupt = rewriting(lambda p, lie: (p[0], lie(p[1])))
    q = Distribution("constant", {"value": -1.0})
    payload = ("tag", np.ones(5))
    same, hits = corrupt(payload, sender=0, rng=np.random.default_rng(0), probability=0.0, q=q, relay=False)
    assert same is payload and hits == 0
    new, hits = corrupt(payload, sender=0, rng=np.random.default_rng(0), probability=1.0, q=q, relay=False)
    assert hits == 5 and new[0] == "tag" and np.all(new[1] == -1.0) and np.all(payload[1] == 1.0)


@pytest.mark.parametrize("adversary, key", [
    ({"byzantine": 0.25, "corruption": 0.0}, "adversary.corruption"),      # liars that never lie
    ({"corruption": 0.5}, "adversary.corruption"),                          # lies without liars
    ({"byzantine": 0.01, "corruption": 1.0}, "adversary.byzantine"),        # rounds to no byzantine agent
    ({"agents": [1], "corruption": 1.0}, "adversary.agents"),              # ucb1 exchanges nothing
    ({"link_corruption": 0.5}, "adversary.link_corruption"),
])
def test_an_adversary_that_would_do_nothing_is_refused(adversary, key):
    from netsim.engine.errors import InputError

    doc = scenario_dict(protocol={"name": "ucb1"}, adversary=adversary)
    with pytest.raises(InputError) as info:
        S.from_dict(doc)
    assert info.value.key == key


def test_can_lose_names_what_loses_messages():
    from netsim.comm.transport import can_lose

    def scenario(network=None, faults=None):
        doc = scenario_dict(protocol={"name": "dubey2020a-private"}, network={"agents": 3, **(network or {})})
        if faults:
            doc["faults"] = faults
        return S.from_dict(doc)

    assert not can_lose(scenario())
    assert not can_lose(scenario({"delay": {"model": "exponential", "mean": 2.0}}, {"duplication": 0.3,
                                                                                   "reorder": 0.2}))
    assert can_lose(scenario({"loss": 0.1}))
    assert can_lose(scenario({"links": [{"u": 0, "v": 1, "loss": 0.5}]}))
    assert can_lose(scenario(faults={"link_down_rate": 0.1}))
    assert can_lose(scenario(faults={"crashes": [{"node": 1, "start": 2.0, "end": 3.0}]}))


# ---------------------------------------------------------------------- fan-out delivery
def _expand(groups):
    return [(g.payload, g.src, d) for g in groups for d in g.dst.tolist()]


def _fanout_record(src, dsts, payload, size=1):
    """What the engine hands a record reader for a constant-delay send_many of one payload (netsim.engine.messages)."""
    from netsim.engine.messages import _record

    return _record((2.0, 0, "k", src, list(dsts), payload, 1.0, 2.0, size, len(dsts)))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["message", "fanout", "rows"]), st.integers(0, 2), st.integers(0, 2),
                          st.lists(st.integers(0, 5), min_size=2, max_size=4)), max_size=25))
def test_fanouts_read_in_order_are_the_messages_in_order(items):
    """fanouts against the plain reading of every message: same (payload object, src, dst) in the same order;
    consecutive messages of one sender and one payload object are one group, nothing else is merged."""
    from netsim.engine.messages import Message, Multicast

    payloads = [("p", i) for i in range(3)]  # distinct objects, compared by identity below
    delivered = []
    for how, src, which, dsts in items:
        payload = payloads[which]
        if how == "message":
            delivered.append(Message("k", src, dsts[0], payload, 1.0, 2.0))
        elif how == "fanout":
            delivered.append(_fanout_record(src, dsts, payload))
        else:  # a record of rows: each message its own rows of one array
            rows = np.arange(2.0 * len(dsts)).reshape(len(dsts), 2)
            n = len(dsts)
            delivered.append(Multicast("k", np.full(n, src), np.array(dsts), np.arange(n), np.arange(1, n + 1), rows,
                                       1.0, 2.0))
    plain = [(m.payload, m.src, m.dst) for item in delivered
             for m in (item.messages() if isinstance(item, Multicast) else [item])]
    groups = fanouts(delivered)
    got = _expand(groups)
    assert [(src, dst) for _, src, dst in got] == [(src, dst) for _, src, dst in plain]
    for (mine, _, _), (theirs, _, _) in zip(got, plain, strict=True):
        assert mine is theirs or (isinstance(mine, np.ndarray) and np.array_equal(mine, theirs))
    sizes, last = [], None  # the groups by hand: a record of one payload is one, a Message joins a run of Messages
    for how, src, which, dsts in items:
        if how == "message" and last == (src, which):
            sizes[-1] += 1
        else:
            sizes += [len(dsts)] if how == "fanout" else [1] * (len(dsts) if how == "rows" else 1)
        last = (src, which) if how == "message" else None
    assert [len(g.dst) for g in groups] == sizes


class Caller(Protocol):
    """Test protocol: every tick node 0 multicasts one payload to nodes 1-3, sends one to node 2, and nodes 1-3
    each send their own to node 0, on three kinds at once: one read per message, one read as fan-out groups,
    one read as fan-in groups."""

    name = "test-transport-fanout"
    servers = None
    fields = {"reliable": P.boolean(False, label="reliable")}

    def start(self):
        sim = self.sim
        timer = RetransmitTimer(initial=3.0, minimum=0.5, maximum=50.0)
        self.seen = {"plain": [], "fanout": [], "fanin": []}
        self.links = {how: Transport(sim, f"call-{how}", lambda items, how=how: self._heard(how, items), timer=timer,
                                     reliable=self.params["reliable"], fanout=how == "fanout", fanin=how == "fanin")
                      for how in self.seen}
        sim.every(1.0, self._tick)

    def _tick(self, now):
        for link in self.links.values():
            link.send_many(0, [1, 2, 3], ("call", now))
            link.send(0, 2, ("one", now))
            link.send_each([1, 2, 3], 0, [("up", now, a) for a in (1, 2, 3)])

    def _heard(self, how, items):
        now = self.sim.now
        if how == "plain":
            self.seen[how] += [(now, m.src, m.dst, m.payload) for m in items]
        elif how == "fanin":
            self.seen[how] += [(now, src, g.dst, payload) for g in items
                               for payload, src in zip(g.payload, g.src.tolist(), strict=True)]
        else:
            self.seen[how] += [(now, src, dst, payload) for payload, src, dst in _expand(items)]


protocols._items.setdefault(Caller.name, Caller)


@pytest.mark.parametrize(("reliable", "delay"), [(False, 0.0), (False, 1.0), (True, 1.0)])
def test_fanout_transport_hands_over_the_messages_of_the_plain_one(reliable, delay):
    """Constant delays (paper mode, where a multicast reaches a fan-out reader as one record and a send_each a
    fan-in reader as one record): the fan-out and fan-in kinds deliver exactly the messages of the per-message
    kind, at the same instants and in the same order."""
    network = {"topology": "complete", "agents": 4, "delay": {"model": "constant", "value": delay}}
    doc = scenario_dict(protocol={"name": Caller.name, "reliable": reliable}, network=network,
                        run={"horizon": 6, "checkpoints": 2, "seed": 1})
    sim = Simulation(S.from_dict(doc), trial_sequence(1, 0))
    sim.run()
    seen = sim.protocol.seen
    assert len(seen["plain"]) == 7 * (6 - int(delay)) and seen["fanout"] == seen["plain"] == seen["fanin"]
