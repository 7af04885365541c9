"""A message-flow viewer for teaching: one self-contained HTML page that replays a trace.

The page (``netsim trace SCENARIO --out trace.html``) draws the graph and moves each message along
its link from its send to its delivery, coloured by kind (the legend lists the kinds in protocol
order, :func:`netsim.experiment.trace.kind_order`, in its own box beside the drawings); a dropped message
ends in a cross, a corrupted one is drawn in vermillion and dashed. Beside the graph the sequence
diagram grows as time advances (one lifeline per node, time running down). Controls: play /
pause, step one event forward or back, speed (1x: the median link delay per second; idle
stretches with nothing in flight are skipped), a time slider; clicking an arrow shows the
message's payload.

Everything is inline (the data as JSON, the script and the style from ``netsim/assets``): the page
loads nothing, so it works offline and from a file. It is meant for small traces; beyond
:data:`LARGE` messages :func:`page` still writes it, and the command line suggests narrowing the
trace (``--from``, ``--until``, ``--agents``, ``--kinds``).
"""

from __future__ import annotations

import html
import json
from importlib.resources import files
from typing import Any

from netsim.engine.sim import Simulation
from netsim.experiment.trace import CORRUPT_COLOUR, FORMATS, colours, draw, kind_order, layout, to_json_lines

#: above this many messages a page gets slow in a browser
LARGE = 20_000


def data(events: list[dict[str, Any]], sim: Simulation, *, title: str, start: float = 0.0) -> dict[str, Any]:
    """What the page replays: nodes (positions scaled to [0, 1]), edges, kinds in protocol order
    and their colours, messages (one per message id of the trace) and the send / deliver / drop
    events in the order they happened (a corruption is a property of its message)."""
    graph = sim.network.graph
    pos = layout(graph)
    xs, ys = [p[0] for p in pos.values()] or [0.0], [p[1] for p in pos.values()] or [0.0]
    span = max(max(xs) - min(xs), max(ys) - min(ys)) or 1.0

    def scaled(n: int) -> tuple[float, float]:  # keep the aspect ratio; y grows downward on screen
        x, y = pos[n]
        return (round((x - min(xs)) / span, 4), round((max(ys) - y) / span, 4))

    messages: list[dict[str, Any]] = []
    index: dict[int, int] = {}
    replay: list[list[Any]] = []
    for e in events:
        number = index.get(e["message"])
        if number is None:
            number = index[e["message"]] = len(messages)
            messages.append({"kind": e["kind"], "src": e["src"], "dst": e["dst"], "sent": e["sent_at"],
                             "due": e["due_at"], "fate": "flight", "corrupt": False, "hop": e["hop"],
                             "size": e["size"], "payload": e["payload"]})
        if e["event"] == "corrupt":
            messages[number]["corrupt"] = True
            continue
        if e["event"] != "send":
            messages[number]["fate"] = e["event"]
        replay.append([e["time"], e["event"], number])
    kinds = kind_order(events, sim)
    nodes = sorted(int(n) for n in graph.nodes())
    lifelines = sorted({e["src"] for e in events} | {e["dst"] for e in events}) or nodes
    servers = [n for n in nodes if sim.network.is_server(n)]
    fates = {fate: sum(1 for e in events if e["event"] == fate) for fate in ("send", "deliver", "drop", "corrupt")}
    scenario = sim.scenario
    subtitle = (f"{scenario.protocol['name']} on a {scenario.network['topology']} of {scenario.network['agents']} "
                f"agents; trial {sim.trial}, messages sent from t = {start:g} until t = {sim.env.now:g}: "
                + ", ".join(f"{n} {fate}" for fate, n in fates.items()))
    return {"title": title, "subtitle": subtitle, "description": scenario.description,
            "from": float(start), "end": float(sim.env.now),
            "nodes": [{"id": n, "x": scaled(n)[0], "y": scaled(n)[1], "server": sim.network.is_server(n)}
                      for n in nodes],
            "edges": sorted([min(int(u), int(v)), max(int(u), int(v))] for u, v in graph.edges()),
            "servers": servers, "lifelines": lifelines, "kinds": kinds, "colours": colours(kinds),
            "corrupt_colour": CORRUPT_COLOUR, "messages": messages, "events": replay}


def page(events: list[dict[str, Any]], sim: Simulation, *, title: str, start: float = 0.0) -> str:
    """The self-contained HTML page replaying ``events`` (see the module docstring)."""
    assets = files("netsim") / "assets"
    text = json.dumps(data(events, sim, title=title, start=start), allow_nan=False, separators=(",", ":"))
    # inside <script>: no "</script>" or "<!--" can end the JSON early
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    template = (assets / "trace.html").read_text(encoding="utf-8")
    script = (assets / "trace.js").read_text(encoding="utf-8")
    return (template.replace("{{TITLE}}", html.escape(f"{title}: message flow"))
            .replace("{{SCRIPT}}", script).replace("{{DATA}}", text))


def render(suffix: str, events: list[dict[str, Any]], sim: Simulation, *, title: str = "", start: float = 0.0) -> bytes:
    """The trace in the format of ``suffix`` (:data:`FORMATS`): the viewer page
    (:func:`netsim.experiment.viewer.page`), JSON lines (:func:`to_json_lines`) or the PNG of :func:`draw`."""
    if suffix == ".jsonl":
        return to_json_lines(events)
    if suffix == ".png":
        return draw(events, sim, title=title)
    if suffix == ".html":
        return page(events, sim, title=title, start=start).encode()
    raise ValueError(f"trace format {suffix!r}: accepted: {', '.join(FORMATS)}")
