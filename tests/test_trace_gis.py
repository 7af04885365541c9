"""`netsim trace` on the GIS protocol (li2022 Alg. 2): ADV, REQ and DATA in order, at link-delay times."""

from __future__ import annotations

import json

import networkx as nx
import pytest

from netsim.experiment.cli import main

DELAY = 0.25  # per-stage delay of the li2022-gis-path5 scenario


@pytest.fixture(scope="module")
def events(tmp_path_factory):
    out = tmp_path_factory.mktemp("trace") / "gis.jsonl"
    assert main(["trace", "li2022-gis-path5", "--until", "250", "--kinds", "gis-adv,gis-req,gis-data",
                 "--out", str(out), "--out", str(out.with_suffix(".png"))]) == 0
    assert out.with_suffix(".png").read_bytes().startswith(b"\x89PNG")
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_only_gis_kinds_and_every_message_takes_one_link_delay(events):
    assert {e["kind"] for e in events} == {"gis-adv", "gis-req", "gis-data"}
    for e in events:
        assert e["due_at"] - e["sent_at"] == pytest.approx(DELAY, abs=1e-6)
        if e["event"] == "deliver":
            assert e["time"] == e["due_at"]
        assert abs(e["src"] - e["dst"]) == 1  # path neighbours only


def test_each_data_answers_a_req_that_answers_an_adv(events):
    delivered = [e for e in events if e["event"] == "deliver"]
    for data in (e for e in delivered if e["kind"] == "gis-data"):
        i, j, sent = data["src"], data["dst"], data["sent_at"]
        req = [e for e in delivered if e["kind"] == "gis-req" and (e["src"], e["dst"]) == (j, i)
               and e["due_at"] == pytest.approx(sent, abs=1e-6)]
        assert req, f"DATA {i}->{j} at {sent} without a REQ delivered just before"
        adv = [e for e in delivered if e["kind"] == "gis-adv" and (e["src"], e["dst"]) == (i, j)
               and e["due_at"] == pytest.approx(req[0]["sent_at"], abs=1e-6)]
        assert adv, f"REQ {j}->{i} at {req[0]['sent_at']} without an ADV delivered just before"


def test_first_round_spans_the_path_diameter_one_hop_per_slot(events):
    sends = [e for e in events if e["event"] == "send"]
    start = min(e["time"] for e in sends if e["kind"] == "gis-adv")
    first_round = [e for e in sends if e["time"] < start + 10]
    last_data = max(e["due_at"] for e in first_round if e["kind"] == "gis-data")
    diameter = nx.diameter(nx.path_graph(5))
    # hop k (k = 0 .. d-1) starts at a slot boundary and its DATA lands 3 stage delays later
    assert last_data - start == pytest.approx(diameter - 1 + 3 * DELAY, abs=1e-6)
    hops = sorted({round(e["time"] - start) for e in first_round if e["kind"] == "gis-adv"})
    assert hops == list(range(diameter))
