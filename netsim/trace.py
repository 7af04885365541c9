"""Message-level traces for teaching: every send, delivery, drop and corruption of one trial.

Tracing hooks into :class:`~netsim.network.Network` through its ``tracer`` attribute, which is
``None`` in normal runs (one attribute test per message, nothing else). A trace is a list of
events, written as JSON lines with the fields

``event`` (send | deliver | drop | corrupt), ``time``, ``kind``, ``src``, ``dst``, ``sent_at``,
``due_at``, ``hop`` (when the payload carries one), ``size`` and ``payload`` (a short summary).

:func:`draw` turns a trace into a sequence diagram (agents as lifelines, one arrow per message
from its send to its delivery, drops marked with a cross, corruptions in red) beside a drawing of
the graph with the number of link-slots built on each edge (li2022 Eq. 2).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from netsim.network import Message
from netsim.params import Frozen
from netsim.scenario import Scenario
from netsim.sim import Simulation
from netsim.streams import trial_sequence


def summarise(payload: Any, limit: int = 60) -> str:
    """A short, JSON-friendly description of a payload."""
    if payload is None:
        return ""
    if isinstance(payload, np.ndarray):
        return f"array(shape={payload.shape}, dtype={payload.dtype})"
    text = repr(payload)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _hop(payload: Any) -> Any:
    if isinstance(payload, Mapping) and "hop" in payload:
        return payload["hop"]
    return getattr(payload, "hop", None)


class Tracer:
    """Collects network events, optionally only those touching ``agents`` or of ``kinds``."""

    def __init__(self, agents: Iterable[int] | None = None, kinds: Iterable[str] | None = None):
        self.agents = None if agents is None else set(agents)
        self.kinds = None if kinds is None else set(kinds)
        self.events: list[dict[str, Any]] = []
        self.now = 0.0

    def __call__(self, event: str, message: Message) -> None:
        if self.kinds is not None and message.kind not in self.kinds:
            return
        if self.agents is not None and message.src not in self.agents and message.dst not in self.agents:
            return
        time = message.sent_at if event in ("send", "drop", "corrupt") else message.due_at
        hop = _hop(message.payload)
        self.events.append({
            "event": event, "time": time, "kind": message.kind, "src": message.src, "dst": message.dst,
            "sent_at": message.sent_at, "due_at": message.due_at, "hop": hop, "size": message.size,
            "payload": summarise(message.payload),
        })


def record(scenario: Scenario, *, trial: int = 0, until: float | None = None, agents: Iterable[int] | None = None,
           kinds: Iterable[str] | None = None) -> tuple[list[dict[str, Any]], Simulation]:
    """Run trial ``trial`` of ``scenario`` (up to ``until``) with tracing on."""
    if until is not None:
        run = dict(scenario.run)
        run["horizon"] = min(float(until), run["horizon"])
        scenario = replace(scenario, run=Frozen(run))
    sim = Simulation(scenario, trial_sequence(scenario.run["seed"], trial), trial=trial)
    tracer = Tracer(agents, kinds)
    sim.network.tracer = tracer
    sim.run()
    return tracer.events, sim


def to_json_lines(events: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(e, default=str) + "\n" for e in events).encode()


def links_per_edge(events: list[dict[str, Any]], slot: float) -> dict[tuple[int, int], int]:
    """Link-slots built per edge, from the send and drop events (li2022 Eq. 2)."""
    used: set[tuple[int, int, float]] = set()
    for e in events:
        if e["event"] in ("send", "drop"):
            u, v = sorted((e["src"], e["dst"]))
            used.add((u, v, math.floor(e["sent_at"] / slot)))
    counts: dict[tuple[int, int], int] = {}
    for u, v, _ in used:
        counts[(u, v)] = counts.get((u, v), 0) + 1
    return counts


def draw(events: list[dict[str, Any]], sim: Simulation, title: str = "", max_arrows: int = 2000) -> bytes:
    """PNG bytes: the sequence diagram and the graph with link-built counts."""
    import networkx as nx
    import seaborn as sns

    from netsim.plots import draw as draw_figure

    nodes = sorted({e["src"] for e in events} | {e["dst"] for e in events}) or list(range(sim.network.num_nodes))
    column = {n: i for i, n in enumerate(nodes)}
    kinds = sorted({e["kind"] for e in events})
    palette = dict(zip(kinds, sns.color_palette("tab10", max(len(kinds), 1)), strict=False))
    corrupted = {(e["src"], e["dst"], e["sent_at"]) for e in events if e["event"] == "corrupt"}

    def paint(figure) -> None:
        seq, net = figure.subplots(1, 2, gridspec_kw={"width_ratios": [3, 2]})
        for n in nodes:
            seq.axvline(column[n], color="0.85", lw=1, zorder=0)
        shown = 0
        for e in events:
            if e["event"] not in ("deliver", "drop") or shown >= max_arrows:
                continue
            shown += 1
            x0, x1 = column[e["src"]], column[e["dst"]]
            y0 = e["sent_at"]
            if e["event"] == "drop":
                seq.annotate("", xy=((x0 + x1) / 2, y0 + 0.3), xytext=(x0, y0),
                             arrowprops={"arrowstyle": "-", "color": palette[e["kind"]], "ls": "--"})
                seq.plot((x0 + x1) / 2, y0 + 0.3, "x", color="k", ms=7)
                continue
            bad = (e["src"], e["dst"], e["sent_at"]) in corrupted
            seq.annotate("", xy=(x1, e["due_at"]), xytext=(x0, y0),
                         arrowprops={"arrowstyle": "->", "color": "red" if bad else palette[e["kind"]],
                                     "lw": 2.0 if bad else 1.0})
        for kind in kinds:
            seq.plot([], [], color=palette[kind], label=kind)
        if corrupted:
            seq.plot([], [], color="red", lw=2, label="corrupted")
        seq.plot([], [], "kx", ls="none", label="dropped")
        seq.set_xticks(range(len(nodes)), [("S" if sim.network.is_server(n) else "") + str(n) for n in nodes])
        seq.set_xlabel("node (lifelines)")
        seq.set_ylabel("time")
        times = [e["sent_at"] for e in events] + [e["due_at"] for e in events] or [0.0, 1.0]
        pad = 0.05 * max(max(times) - min(times), 1.0)
        seq.set_xlim(-0.5, len(nodes) - 0.5)
        seq.set_ylim(max(times) + pad, min(times) - pad)  # time runs downward
        seq.legend(fontsize=8, loc="lower right")
        seq.set_title(f"{title}: messages" if title else "messages", fontsize=10)

        graph = sim.network.graph
        counts = links_per_edge(events, sim.scenario.clock["period"])
        pos = nx.kamada_kawai_layout(graph) if graph.number_of_nodes() <= 60 else nx.spring_layout(graph, seed=0)
        colors = ["#f4a261" if sim.network.is_server(n) else "#8ecae6" for n in graph.nodes()]
        nx.draw_networkx(graph, pos, ax=net, node_color=colors, node_size=350, font_size=8, edge_color="0.6")
        labels = {e: counts.get(tuple(sorted(e)), 0) for e in graph.edges()}
        nx.draw_networkx_edge_labels(graph, pos, edge_labels=labels, ax=net, font_size=7)
        net.set_title("links built per edge (link-slots, li2022 Eq. 2)", fontsize=10)
        net.axis("off")

    return draw_figure((13, 6.5), paint, dpi=110)
