"""`netsim trace`'s outputs: JSON payloads, --from, the legend in protocol order (PNG and page), and the
viewer page played in a real browser (Debian's chromium through Playwright)."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest

from netsim.engine import scenario as S
from netsim.experiment import trace as T
from netsim.experiment import viewer as V
from netsim.experiment.cli import main

GIS = ("gis-adv", "gis-req", "gis-data")


@pytest.fixture(scope="module")
def gis():
    """The acceptance trace: li2022's GIS rounds on a 5-agent path, up to t = 250."""
    return T.record(S.load("li2022-gis-path5"), until=250)


# ---------------------------------------------------------------------- payloads as JSON data
class Stamp(NamedTuple):
    hop: int
    value: float


@dataclasses.dataclass
class Report:
    arm: int
    means: np.ndarray


def test_payloads_become_json_data_not_python_text():
    assert T.plain((1, np.array([0]))) == [1, [0]]
    assert T.plain((np.int64(3), np.float32(0.5), None, True)) == [3, 0.5, None, True]
    assert T.plain({"eps": float("inf"), "x": -float("inf"), "y": float("nan")}) == {"eps": "inf", "x": "-inf",
                                                                                      "y": "nan"}
    assert T.plain(Stamp(2, 0.25)) == {"hop": 2, "value": 0.25}
    assert T.plain(Report(1, np.array([[0.5, 1.0]]))) == {"arm": 1, "means": [[0.5, 1.0]]}
    assert T.plain({2: frozenset({3, 1})}) == {"2": [1, 3]}
    big = T.plain(np.arange(T.MAX_ITEMS + 1, dtype=np.int32))
    assert big == {"shape": [T.MAX_ITEMS + 1], "dtype": "int32", "head": list(range(10))}
    assert T.plain(object).startswith("<class")
    for value in (T.plain(Report(1, np.array([np.nan]))), T.plain((1, np.array([0])))):
        json.dumps(value, allow_nan=False)  # strict JSON


def test_gis_payloads_in_json_lines_are_lists(gis):
    events, _ = gis
    lines = T.to_json_lines(events).decode().splitlines()
    parsed = [json.loads(line, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}")) for line in lines]
    adv = next(e for e in parsed if e["kind"] == "gis-adv")
    # a GIS ADV carries (tag, keys, number, repeated): the exchange epoch, the advertised record ids as a bit
    # set, the transmission's number and whether it repeats one (netsim.comm.handshake)
    tag, keys, number, repeated = adv["payload"]
    assert adv["payload"] == [1, keys, 0, False] and isinstance(keys, int) and keys > 0
    # one id per message: each delivery answers exactly one earlier send of the same message
    sends = {e["message"]: e for e in parsed if e["event"] == "send"}
    assert len(sends) == sum(e["event"] == "send" for e in parsed)
    for e in (e for e in parsed if e["event"] == "deliver"):
        sent = sends[e["message"]]
        assert (sent["kind"], sent["src"], sent["dst"], sent["sent_at"]) == (e["kind"], e["src"], e["dst"],
                                                                              e["sent_at"])


# ---------------------------------------------------------------------- --from, protocol order
def _message_key(e):
    return (e["event"], e["kind"], e["src"], e["dst"], e["sent_at"], e["due_at"])


def test_from_keeps_the_messages_sent_from_then_on_of_the_same_run(gis):
    events, _ = gis
    start = 232.25  # just after the first ADVs: the window opens on the REQs that answer them
    later, sim = T.record(S.load("li2022-gis-path5"), start=start, until=250)
    assert later and all(e["sent_at"] >= start for e in later)
    assert [_message_key(e) for e in later] == [_message_key(e) for e in events if e["sent_at"] >= start]
    assert later[0]["kind"] == "gis-req"
    # the legend keeps the protocol's order (first sent in the trial), not the window's order of appearance
    assert T.kind_order(later, sim) == list(GIS)


def test_kind_order_follows_first_sends_not_the_alphabet(gis):
    events, sim = gis
    assert sorted(GIS) != list(GIS)  # the alphabet would put gis-data first
    assert T.kind_order(events, sim) == list(GIS)


def test_png_legend_in_protocol_order_outside_the_diagram(gis):
    events, sim = gis
    figure = T.figure(events, sim, title="gis")
    figure.draw_without_rendering()
    seq = figure.axes[0]
    legend = seq.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == [*GIS, "dropped"]
    box, area = legend.get_window_extent(), seq.get_window_extent()
    assert not box.overlaps(area), (box, area)  # below the axes: no arrow can be under it
    lows, highs = seq.get_ylim()
    times = [e["due_at"] for e in events] + [e["sent_at"] for e in events]
    assert highs <= min(times) and lows >= max(times)  # every arrow inside the axes (time runs down)


def test_cli_chooses_the_format_by_suffix(tmp_path, capsys):
    out = tmp_path / "t"
    argv = ["trace", "li2022-gis-path5", "--until", "234", "--from", "233"]
    assert main([*argv, "--out", f"{out}.html", "--out", f"{out}.jsonl", "--out", f"{out}.png"]) == 0
    assert Path(f"{out}.png").read_bytes().startswith(b"\x89PNG")
    lines = Path(f"{out}.jsonl").read_text().splitlines()
    assert lines and all(233 <= json.loads(line)["sent_at"] for line in lines)
    assert Path(f"{out}.html").read_text().startswith("<!DOCTYPE html>")
    capsys.readouterr()
    for bad, needle in ((["--out", f"{out}.txt"], "unknown suffix '.txt'"), (["--from", "-1"], "--from"),
                        (["--until", "232", "--from", "233"], "--until")):
        assert main([*argv[:2], *bad]) == 2
        err = capsys.readouterr().err
        assert needle in err and err.count("\n") == 1


# ---------------------------------------------------------------------- the page, without a browser
def test_page_is_self_contained_and_holds_the_trace(gis):
    events, sim = gis
    text = V.page(events, sim, title="li2022-gis-path5")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text)  # nothing fetched, no CDN
    assert "@import" not in text and "url(http" not in text
    payload = re.search(r'<script type="application/json" id="trace-data">(.*?)</script>', text, re.S).group(1)
    data = json.loads(payload)
    assert data["kinds"] == list(GIS)
    assert len(data["messages"]) == sum(e["event"] == "send" for e in events)
    replayed = [(event, data["messages"][m]["kind"]) for _, event, m in data["events"]]
    assert replayed == [(e["event"], e["kind"]) for e in events if e["event"] != "corrupt"]
    assert sorted(map(tuple, data["edges"])) == [(0, 1), (1, 2), (2, 3), (3, 4)]


def test_every_message_tells_one_story_under_faults_and_the_page_marks_it():
    """Loss, a crash, duplication, reordering and corruption together: the events of each message id
    form one of the allowed sequences (module docstring of netsim.experiment.trace), a corruption mark names its
    send's link and instant, and every drop and corruption is a message of the page."""
    scenario = S.load("dubey2020a-fig1b", [
        "network.agents=10", "network.p=0.4", "run.horizon=12", "run.checkpoints=2", "network.loss=0.05",
        "adversary.corruption=0.1", "faults.duplication=0.2", "faults.reorder=0.2",
        "faults.crashes=[{node=1, start=3, end=8}]"])
    events, sim = T.record(scenario)
    stories: dict[int, list[dict]] = {}
    for e in events:
        stories.setdefault(e["message"], []).append(e)
    allowed = {("send", "deliver"), ("send",), ("drop",), ("send", "drop"), ("corrupt", "send", "deliver"),
               ("corrupt", "send"), ("corrupt", "send", "drop")}
    seen = {tuple(e["event"] for e in story) for story in stories.values()}
    assert seen <= allowed, seen - allowed
    assert {("send", "drop"), ("drop",), ("corrupt", "send", "deliver")} <= seen  # crash, loss, corruption
    for story in stories.values():
        assert len({(e["kind"], e["src"], e["dst"], e["sent_at"]) for e in story}) == 1
    data = V.data(events, sim, title="faults")
    corrupt = {e["message"] for e in events if e["event"] == "corrupt"}
    dropped = {e["message"] for e in events if e["event"] == "drop"}
    assert sum(m["corrupt"] for m in data["messages"]) == len(corrupt)
    assert sum(m["fate"] == "drop" for m in data["messages"]) == len(dropped)
    assert len(data["messages"]) == len(stories)


# ---------------------------------------------------------------------- the page, in a real browser
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
STEP = re.compile(r"^t=(\S+)\s+(send|deliver|drop) (\S+) (\d+)\u2192(\d+)")


def browser_path() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip("no chromium on this machine: install Debian's chromium package (apt-get install chromium), "
                    "as .ci/run does")
    return path


def count(page) -> int:
    return int(page.inner_text("#drawn"))


def test_browser_plays_and_steps_through_a_gis_handshake(tmp_path):
    out = tmp_path / "t.html"
    assert main(["trace", "li2022-gis-path5", "--until", "250", "--out", str(out), "--out",
                 str(tmp_path / "t.jsonl")]) == 0
    expected = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    expected = [(e["event"], e["kind"], e["src"], e["dst"]) for e in expected if e["event"] != "corrupt"]
    from playwright.sync_api import sync_playwright

    problems: list[str] = []
    requests: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=browser_path(), args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 900})
            page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on("request", lambda r: requests.append(r.url))
            page.goto(out.resolve().as_uri())
            page.wait_for_load_state("load")
            legend = page.eval_on_selector_all("#legend li", "items => items.map(i => i.textContent)")
            boxes = {name: page.locator(name).bounding_box() for name in ("#legend", "#graph", "#seqbox")}

            # play: the count of drawn messages grows while the page plays, and so do the arrows
            assert count(page) == 0
            page.click("#play")
            page.wait_for_function("Number(document.getElementById('drawn').textContent) > 0")
            first = count(page)
            page.wait_for_function(f"Number(document.getElementById('drawn').textContent) > {first}")
            page.click("#play")  # pause
            paused = count(page)
            assert paused > first and page.locator("#sequence .msg").count() == paused

            # step: from the start, one event per step, in the order of the trace
            page.click("#restart")
            assert count(page) == 0
            shown = []
            for _ in expected:
                page.click("#step")
                match = STEP.match(page.inner_text("#event"))
                assert match, page.inner_text("#event")
                shown.append((match[2], match[3], int(match[4]), int(match[5])))
            drawn_at_end = count(page)
            page.click("#back")
            after_back = count(page)
        finally:
            browser.close()
    assert problems == []
    assert requests and all(url.startswith("file:") for url in requests), requests
    assert legend[:3] == list(GIS)
    for name in ("#graph", "#seqbox"):  # the legend has its own box: it covers no drawing
        a, b = boxes["#legend"], boxes[name]
        assert a["x"] + a["width"] <= b["x"] or b["x"] + b["width"] <= a["x"] or \
            a["y"] + a["height"] <= b["y"] or b["y"] + b["height"] <= a["y"], (name, a, b)
    assert shown == expected
    assert drawn_at_end == sum(e == "send" for e, *_ in expected)
    assert after_back == drawn_at_end - (expected[-1][0] == "send")
    # one handshake, step by step (li2022 Alg. 2): ADV 0 -> 1 sent and delivered, then REQ 1 -> 0, then DATA 0 -> 1
    at = 0
    for step in [("send", "gis-adv", 0, 1), ("deliver", "gis-adv", 0, 1), ("send", "gis-req", 1, 0),
                 ("deliver", "gis-req", 1, 0), ("send", "gis-data", 0, 1), ("deliver", "gis-data", 0, 1)]:
        at = shown.index(step, at) + 1
