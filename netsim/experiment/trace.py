"""Message-level traces for teaching: every send, delivery, drop and corruption of one trial.

Tracing hooks into :class:`~netsim.engine.network.Network` through its ``tracer`` attribute, which is
``None`` in normal runs (one attribute test per message, nothing else). A trace is a list of
events, written as JSON lines (:func:`to_json_lines`) with the fields

``event`` (send | deliver | drop | corrupt), ``time`` (when it happened: the send time for send
and corrupt, the due time for deliver and drop), ``message`` (one id per message, shared by its
events), ``kind``, ``src``, ``dst``, ``sent_at``, ``due_at``, ``hop`` (when the payload carries
one), ``size`` and ``payload`` (the payload as JSON data, :func:`plain`).

A message has a ``send`` and then a ``deliver``, or a ``drop`` (its receiver was down when it
arrived), or nothing more (the trial ended first); a message lost on its link or refused by a
link that is down has a ``drop`` at its send time and no ``send``; a ``corrupt`` event, just
before the ``send``, marks a message whose payload the adversary rewrote.

:func:`draw` turns a trace into a sequence diagram (agents as lifelines, one arrow per message
from its send to its delivery, drops marked with a cross, corruptions in red) beside a drawing of
the graph with the number of link-slots built on each edge (li2022 Eq. 2); :mod:`netsim.experiment.viewer`
turns it into a page that replays it.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from netsim.engine.network import Message
from netsim.engine.params import Frozen
from netsim.engine.scenario import Scenario
from netsim.engine.sim import Simulation
from netsim.engine.streams import trial_sequence

if TYPE_CHECKING:
    import networkx as nx
    from matplotlib.figure import Figure

#: what :func:`netsim.experiment.viewer.render` (``netsim trace --out FILE``) writes, by the suffix of FILE
FORMATS = {".html": "viewer page", ".jsonl": "JSON lines", ".png": "sequence diagram"}
#: arrays with more elements than this are stored as their shape, dtype and first values
MAX_ITEMS = 1000
#: the colour of a corrupted message (Okabe-Ito vermillion), kept out of the kinds' palette
CORRUPT_COLOUR = "#D55E00"
#: colours of the message kinds, in protocol order: Okabe-Ito (colour-blind safe) without vermillion
KIND_COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#000000", "#F0E442", "#999999")


def plain(payload: Any, depth: int = 0) -> Any:
    """``payload`` as JSON data: numbers, strings, booleans, ``None``, lists and objects.

    Tuples and numpy arrays become lists, numpy scalars numbers, mappings, dataclasses and named
    tuples objects (a named tuple as ``{"field": value, ...}``); a non-finite float becomes the
    string ``"inf"``, ``"-inf"`` or ``"nan"`` (JSON has no such numbers); an array of more than
    :data:`MAX_ITEMS` elements becomes ``{"shape", "dtype", "head"}`` (its first ten values);
    any other object its ``repr``.
    """
    if payload is None or isinstance(payload, (bool, str)):
        return payload
    if isinstance(payload, np.generic):
        payload = payload.item()
    if isinstance(payload, int):
        return payload
    if isinstance(payload, float):
        return payload if math.isfinite(payload) else str(payload)
    if depth > 20:
        return repr(payload)
    if isinstance(payload, np.ndarray):
        if payload.size > MAX_ITEMS:
            return {"shape": list(payload.shape), "dtype": str(payload.dtype),
                    "head": plain(payload.ravel()[:10], depth + 1)}
        return plain(payload.tolist(), depth + 1)
    if isinstance(payload, tuple) and hasattr(payload, "_fields"):
        return {name: plain(value, depth + 1) for name, value in zip(payload._fields, payload, strict=True)}
    if dataclasses.is_dataclass(payload) and not isinstance(payload, type):
        return {f.name: plain(getattr(payload, f.name), depth + 1) for f in dataclasses.fields(payload)}
    if isinstance(payload, Mapping):
        return {str(key): plain(value, depth + 1) for key, value in payload.items()}
    if isinstance(payload, (list, tuple, set, frozenset)):
        items = sorted(payload, key=repr) if isinstance(payload, (set, frozenset)) else payload
        return [plain(item, depth + 1) for item in items]
    return repr(payload)


def _hop(payload: Any) -> Any:
    if isinstance(payload, Mapping) and "hop" in payload:
        return plain(payload["hop"])
    return plain(getattr(payload, "hop", None))


class Tracer:
    """Collects network events: those of messages sent at or after ``start``, touching ``agents``
    (from or to one of them) and of ``kinds`` (each ``None``: all)."""

    def __init__(self, agents: Iterable[int] | None = None, kinds: Iterable[str] | None = None, start: float = 0.0):
        self.agents = None if agents is None else set(agents)
        self.kinds = None if kinds is None else set(kinds)
        self.start = float(start)
        self.events: list[dict[str, Any]] = []
        self._ids = 0
        self._corrupted: dict[tuple, deque[int]] = {}  # corrupt seen, send to come
        self._flying: dict[tuple, deque[int]] = {}  # sent, not delivered or dropped yet

    def _new_id(self) -> int:
        self._ids += 1
        return self._ids - 1

    def _identify(self, event: str, key: tuple) -> int:
        """The id of the message ``key`` names (same-key messages are interchangeable: first in, first out).

        A corruption is matched to the next send on its link at its instant, whatever its due
        time (a reordering fault may delay the message after the corruption is marked)."""
        if event == "corrupt":
            number = self._new_id()
            self._corrupted.setdefault(key[:4], deque()).append(number)
            return number
        if event == "send":
            waiting = self._corrupted.get(key[:4])
            number = waiting.popleft() if waiting else self._new_id()
            self._flying.setdefault(key, deque()).append(number)
            return number
        flying = self._flying.get(key)
        return flying.popleft() if flying else self._new_id()

    def __call__(self, event: str, message: Message) -> None:
        if self.kinds is not None and message.kind not in self.kinds:
            return
        if self.agents is not None and message.src not in self.agents and message.dst not in self.agents:
            return
        sent, due = float(message.sent_at), float(message.due_at)
        if sent < self.start:
            return
        src, dst = int(message.src), int(message.dst)
        number = self._identify(event, (message.kind, src, dst, sent, due))
        self.events.append({
            "event": event, "time": sent if event in ("send", "corrupt") else due, "message": number,
            "kind": message.kind, "src": src, "dst": dst, "sent_at": sent, "due_at": due,
            "hop": _hop(message.payload), "size": int(message.size), "payload": plain(message.payload),
        })


def record(scenario: Scenario, *, trial: int = 0, start: float = 0.0, until: float | None = None,
           agents: Iterable[int] | None = None,
           kinds: Iterable[str] | None = None) -> tuple[list[dict[str, Any]], Simulation]:
    """Run trial ``trial`` of ``scenario`` up to ``until`` with tracing on.

    The trial always runs from time 0 (so the protocol's state at ``start`` is the true one);
    only the messages sent at or after ``start`` are recorded.
    """
    if until is not None:
        run = dict(scenario.run)
        run["horizon"] = min(float(until), run["horizon"])
        scenario = replace(scenario, run=Frozen(run))
    sim = Simulation(scenario, trial_sequence(scenario.run["seed"], trial), trial=trial)
    tracer = Tracer(agents, kinds, start)
    sim.network.tracer = tracer
    sim.run()
    return tracer.events, sim


def to_json_lines(events: list[dict[str, Any]]) -> bytes:
    """The events as JSON lines (strict JSON: no NaN or Infinity tokens)."""
    return "".join(json.dumps(e, allow_nan=False) + "\n" for e in events).encode()


def kind_order(events: list[dict[str, Any]], sim: Simulation) -> list[str]:
    """The message kinds of ``events`` in protocol order: the order in which the trial first sent
    them (from time 0, whatever the filters), then any other kind in order of appearance."""
    present = dict.fromkeys(e["kind"] for e in events)
    return [kind for kind in sim.metrics.messages if kind in present] + \
        [kind for kind in present if kind not in sim.metrics.messages]


def colours(kinds: list[str]) -> dict[str, str]:
    """A colour per kind, in order (:data:`KIND_COLOURS`, repeated past eight kinds)."""
    return {kind: KIND_COLOURS[i % len(KIND_COLOURS)] for i, kind in enumerate(kinds)}


def layout(graph: nx.Graph) -> dict[int, tuple[float, float]]:
    """Node positions for drawing ``graph`` (Kamada-Kawai up to 60 nodes, else a seeded spring layout)."""
    import networkx as nx

    if graph.number_of_nodes() <= 1:
        return {n: (0.0, 0.0) for n in graph.nodes()}
    pos = nx.kamada_kawai_layout(graph) if graph.number_of_nodes() <= 60 else nx.spring_layout(graph, seed=0)
    return {int(n): (float(x), float(y)) for n, (x, y) in pos.items()}


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


def figure(events: list[dict[str, Any]], sim: Simulation, title: str = "", max_arrows: int = 2000) -> Figure:
    """The sequence diagram and the graph with link-built counts, as a matplotlib figure.

    The legend lists the kinds in protocol order (:func:`kind_order`) below the diagram, outside
    its axes, so that it never covers an arrow.
    """
    import networkx as nx
    from matplotlib.figure import Figure

    from netsim.experiment.plots import style

    nodes = sorted({e["src"] for e in events} | {e["dst"] for e in events}) or list(range(sim.network.num_nodes))
    column = {n: i for i, n in enumerate(nodes)}
    kinds = kind_order(events, sim)
    palette = colours(kinds)
    corrupted = {e["message"] for e in events if e["event"] == "corrupt"}

    with style():
        fig = Figure(figsize=(13, 7))
        seq, net = fig.subplots(1, 2, gridspec_kw={"width_ratios": [3, 2]})
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
                y1 = e["due_at"] if e["due_at"] > y0 else y0 + 0.3
                seq.annotate("", xy=((x0 + x1) / 2, y1), xytext=(x0, y0),
                             arrowprops={"arrowstyle": "-", "color": palette[e["kind"]], "ls": "--"})
                seq.plot((x0 + x1) / 2, y1, "x", color="k", ms=7)
                continue
            bad = e["message"] in corrupted
            seq.annotate("", xy=(x1, e["due_at"]), xytext=(x0, y0),
                         arrowprops={"arrowstyle": "->", "color": CORRUPT_COLOUR if bad else palette[e["kind"]],
                                     "lw": 2.0 if bad else 1.0})
        for kind in kinds:
            seq.plot([], [], color=palette[kind], label=kind)
        if corrupted:
            seq.plot([], [], color=CORRUPT_COLOUR, lw=2, label="corrupted")
        seq.plot([], [], "kx", ls="none", label="dropped")
        seq.set_xticks(range(len(nodes)), [("S" if sim.network.is_server(n) else "") + str(n) for n in nodes])
        seq.set_xlabel("node (lifelines)")
        seq.set_ylabel("time")
        times = [e["sent_at"] for e in events] + [e["due_at"] for e in events] or [0.0, 1.0]
        pad = 0.05 * max(max(times) - min(times), 1.0)
        seq.set_xlim(-0.5, len(nodes) - 0.5)
        seq.set_ylim(max(times) + pad, min(times) - pad)  # time runs downward
        entries = len(kinds) + 1 + bool(corrupted)
        seq.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=min(entries, 5), frameon=False)
        seq.set_title(f"{title}: messages" if title else "messages", fontsize=10)

        graph = sim.network.graph
        counts = links_per_edge(events, sim.scenario.clock["period"])
        pos = layout(graph)
        node_colours = ["#f4a261" if sim.network.is_server(n) else "#8ecae6" for n in graph.nodes()]
        nx.draw_networkx(graph, pos, ax=net, node_color=node_colours, node_size=350, font_size=8, edge_color="0.6")
        labels = {e: counts.get(tuple(sorted(e)), 0) for e in graph.edges()}
        nx.draw_networkx_edge_labels(graph, pos, edge_labels=labels, ax=net, font_size=7)
        net.set_title("links built per edge (link-slots, li2022 Eq. 2)", fontsize=10)
        net.axis("off")
        fig.tight_layout()
    return fig


def draw(events: list[dict[str, Any]], sim: Simulation, title: str = "", max_arrows: int = 2000) -> bytes:
    """PNG bytes of :func:`figure`."""
    from netsim.experiment.plots import png, style

    with style():
        return png(figure(events, sim, title, max_arrows), dpi=110)
