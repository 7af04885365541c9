"""Message traces: every event recorded with its times, filters, drawing, and zero cost when off."""

from __future__ import annotations

import json

from netsim.comm.protocol import Protocol
from netsim.engine import scenario as S
from netsim.engine.registry import protocols
from netsim.experiment import trace as T
from tests.conftest import scenario_dict


class PingPong(Protocol):
    """Test protocol: every tick agent 0 pings each neighbour; a ping is answered with a pong."""

    name = "test-pingpong"
    corruptible = ("PING",)  # test_corruptions_marked_and_counted gives PING a rule

    def start(self):
        net = self.sim.network
        net.subscribe("PING", lambda m: net.send(m.dst, m.src, "PONG", {"hop": 2}))
        net.subscribe("PONG", lambda m: None)
        self.sim.every(1.0, lambda now: net.broadcast(0, "PING", {"hop": 1}))


protocols._items.setdefault(PingPong.name, PingPong)


def pingpong(**network):
    return S.from_dict(scenario_dict(protocol={"name": "test-pingpong"},
                                     network={"topology": "star", "agents": 4, **network},
                                     run={"horizon": 10, "checkpoints": 2}))


def test_trace_records_sends_and_deliveries_at_link_times():
    events, sim = T.record(pingpong(delay={"model": "constant", "value": 0.5}), until=3)
    sends = [e for e in events if e["event"] == "send"]
    delivers = [e for e in events if e["event"] == "deliver"]
    assert len(sends) == sim.metrics.total("sent")
    assert len(delivers) == sim.metrics.total("delivered")
    for e in delivers:
        assert e["time"] == e["due_at"] == e["sent_at"] + 0.5
    pongs = [e for e in sends if e["kind"] == "PONG"]
    assert {e["time"] for e in pongs} == {0.5, 1.5, 2.5} and {e["hop"] for e in pongs} == {2}


def test_filters_and_drops():
    events, sim = T.record(pingpong(loss=0.3), until=6, agents=[2], kinds=["PING"])
    assert events and all(e["kind"] == "PING" and 2 in (e["src"], e["dst"]) for e in events)
    all_events, sim_all = T.record(pingpong(loss=0.3), until=6)
    drops = sum(1 for e in all_events if e["event"] == "drop")
    assert drops == sim_all.metrics.total("dropped") > 0


def test_corruptions_marked_and_counted():
    def corrupt(payload, *, sender, rng, probability, q, relay):
        return ({"hop": -1}, 1) if rng.random() < probability else (payload, 0)

    sc = S.from_dict({**scenario_dict(protocol={"name": "test-pingpong"}, network={"topology": "star", "agents": 4},
                                      run={"horizon": 10, "checkpoints": 2}),
                      "adversary": {"agents": [0], "corruption": 0.5}})
    original = PingPong.start

    def start(self):
        original(self)
        self.sim.network.corruptible("PING", corrupt)

    PingPong.start = start
    try:
        events, sim = T.record(sc, until=8)
    finally:
        PingPong.start = original
    marked = [e for e in events if e["event"] == "corrupt"]
    assert len(marked) == sim.metrics.total("corrupted") > 0
    assert all(e["payload"] == {"hop": -1} for e in marked)
    # each corrupt mark names the message whose send follows it, with the same link and times
    sends = {e["message"]: e for e in events if e["event"] == "send"}
    for e in marked:
        assert {k: sends[e["message"]][k] for k in ("kind", "src", "dst", "sent_at", "due_at")} == \
            {k: e[k] for k in ("kind", "src", "dst", "sent_at", "due_at")}


def test_json_lines_and_picture(tmp_path):
    events, sim = T.record(pingpong(), until=3)
    lines = T.to_json_lines(events).decode().splitlines()
    assert [json.loads(line)["event"] for line in lines] == [e["event"] for e in events]
    png = T.draw(events, sim, title="pingpong")
    assert png.startswith(b"\x89PNG")
    # 3 ticks x 3 star edges, each carrying a ping and a pong in the same slot: 1 link-slot per edge per tick
    assert T.links_per_edge(events, 1.0) == {(0, 1): 3, (0, 2): 3, (0, 3): 3}


def test_tracing_is_off_by_default_and_changes_nothing():
    from netsim.engine.sim import Simulation
    from netsim.engine.streams import trial_sequence

    plain = Simulation(pingpong(loss=0.2), trial_sequence(1, 0))
    assert plain.network.tracer is None
    row = plain.run().row
    events, traced = T.record(pingpong(loss=0.2))
    assert events
    assert traced.run is not None and row["messages_dropped"] == traced.metrics.total("dropped")
    assert row["messages_delivered"] == traced.metrics.total("delivered")
