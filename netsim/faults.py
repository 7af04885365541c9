"""Fault models of the ``[faults]`` scenario section: link outages, node crashes, duplication, reordering.

Every fault is drawn from the trial's own ``("faults", k)`` streams, so adding a fault never
changes the reward, network or protocol draws of a trial (the protocol may of course react to
the fault and then pull other arms). A scenario whose ``[faults]`` section is absent or empty
builds no :class:`Faults` object at all: the network and the clocks take exactly the code path
they took before faults existed (same draws, byte-identical results).

Semantics (see ``docs/faults.md``):

* **Link down intervals** ``[start, end)``: scheduled (``links``) and/or random (each link, agent-agent
  and server-agent, alternates up/down with exponential holding times of rates ``link_down_rate``
  and ``link_up_rate``). A message is dropped when its link is down *at the instant it is sent*;
  a message already in flight when the link goes down is still delivered. Sending still marks
  the link built in that slot (the sender paid for the attempt).
* **Node crashes** ``[start, end)``: scheduled (``crashes``) and/or random (every agent crashes at
  rate ``crash_rate`` and restarts at rate ``restart_rate``; 0 means never). While a node is down,
  every message it sends and every message due to it is dropped, and its own clocks
  (``sim.every(..., node=i)``) skip their ticks. Protocols that keep vectorised state learn of
  crashes through :meth:`Faults.is_up`, :attr:`Faults.up`, :meth:`Faults.on_crash` and
  :meth:`Faults.on_restart`. ``state = "kept" | "lost"`` says whether a restarted node keeps its
  protocol state; a protocol declares the states it honours in ``crash_states`` (empty: it
  rejects crashes with an :class:`~netsim.errors.InputError`).
* **Duplication**: each delivered message is, with probability ``duplication``, delivered a second
  time after an independent draw of the link delay. The copy is counted as one more message sent
  (of the same kind) and in the ``duplicated`` extra, so ``sent = delivered + dropped + in flight``
  keeps holding; ``messages_sent - duplicated`` is what the protocols sent.
* **Reordering**: each message is, with probability ``reorder``, held back by an extra delay drawn
  from ``reorder_delay``, which lets later messages on the same link overtake it (``reordered``).

A protocol that cannot survive one of the message faults lists it in ``unsupported_faults``
(names of :data:`FAULT_KINDS`) and such scenarios are rejected when loaded.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from netsim import params as P
from netsim.distributions import DELAY_MODELS, Distribution, parse_distribution
from netsim.errors import InputError

if TYPE_CHECKING:
    import simpy

    from netsim.network import Message

FAULT_KINDS = ("link_down", "crash", "duplication", "reorder")
STATES = ("kept", "lost")
EXTRAS = ("dropped_link_down", "dropped_crashed", "duplicated", "reordered")

FAULTS = {
    "links": P.Field("a list of tables { u, v, start, end }", lambda v: v if isinstance(v, list) else None, [],
                     doc="scheduled link down intervals [start, end) of the link between u and v"),
    "link_down_rate": P.real(0.0, low=0.0, doc="rate at which each up link goes down (per unit time; 0 = never)"),
    "link_up_rate": P.real(1.0, low=0.0, low_open=True, doc="rate at which a down link comes back (mean outage "
                                                              "1 / link_up_rate)"),
    "crashes": P.Field("a list of tables { node, start, end }", lambda v: v if isinstance(v, list) else None, [],
                       doc="scheduled node crashes [start, end); end = inf: the node never restarts"),
    "crash_rate": P.real(0.0, low=0.0, doc="rate at which each agent crashes (per unit time; 0 = never)"),
    "restart_rate": P.real(0.0, low=0.0, doc="rate at which a crashed agent restarts (0 = never)"),
    "state": P.choice(STATES, "kept", doc="whether a restarted node keeps its protocol state"),
    "duplication": P.probability(0.0, doc="probability that a message is delivered twice"),
    "reorder": P.probability(0.0, doc="probability that a message gets the extra delay reorder_delay"),
    "reorder_delay": P.Field("a delay table { model = ... }", lambda v: v, {"model": "exponential", "mean": 1.0},
                             doc="law of the extra delay of reordered messages: " + ", ".join(DELAY_MODELS)),
}
LINK_DOWN = {
    "u": P.integer(low=0),
    "v": P.integer(low=0),
    "start": P.real(low=0.0),
    "end": P.real(low=0.0, allow_inf=True),
}
CRASH = {
    "node": P.integer(low=0),
    "start": P.real(low=0.0),
    "end": P.real(math.inf, low=0.0, allow_inf=True),
}


def validate(raw: Mapping[str, Any], *, nodes: int, source: str | None = None) -> dict[str, Any]:
    """The validated ``[faults]`` section (defaults filled in) of a scenario with ``nodes`` nodes."""
    spec = P.validate(raw, FAULTS, where="faults", source=source)
    spec["reorder_delay"] = parse_distribution(spec["reorder_delay"], key="faults.reorder_delay",
                                               models=DELAY_MODELS, source=source).as_table()
    for key, schema, ids in (("links", LINK_DOWN, ("u", "v")), ("crashes", CRASH, ("node",))):
        items = []
        for i, item in enumerate(spec[key]):
            where = f"faults.{key}[{i}]"
            if not isinstance(item, Mapping):
                raise InputError(f"expected {FAULTS[key].accepts[2:]}", source=source, key=where)
            item = P.validate(item, schema, where=where, source=source)
            for name in ids:
                if item[name] >= nodes:
                    raise InputError(f"node {item[name]} does not exist; accepted: ids 0..{nodes - 1}",
                                     source=source, key=f"{where}.{name}")
            if item["end"] <= item["start"]:
                raise InputError(f"end = {item['end']:g} is not after start = {item['start']:g}; accepted: "
                                 "end > start", source=source, key=f"{where}.end")
            items.append(item)
        spec[key] = items
    return spec


def kinds(spec: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The fault kinds a validated ``[faults]`` section turns on (empty: no faults)."""
    if not spec:
        return ()
    on = {
        "link_down": bool(spec["links"]) or spec["link_down_rate"] > 0,
        "crash": bool(spec["crashes"]) or spec["crash_rate"] > 0,
        "duplication": spec["duplication"] > 0,
        "reorder": spec["reorder"] > 0,
    }
    return tuple(k for k in FAULT_KINDS if on[k])


def check_protocol(spec: Mapping[str, Any] | None, protocol_cls: Any, source: str | None = None) -> None:
    """Reject faults that ``protocol_cls`` declares it cannot survive (one clear line)."""
    active = kinds(spec)
    unsupported = tuple(getattr(protocol_cls, "unsupported_faults", ()))
    for kind in active:
        if kind in unsupported:
            key = {"link_down": "faults.links", "duplication": "faults.duplication",
                   "reorder": "faults.reorder"}.get(kind, "faults")
            ok = [k for k in FAULT_KINDS if k not in unsupported]
            raise InputError(f"protocol {protocol_cls.name!r} does not survive the {kind} fault; accepted: "
                             f"{', '.join(ok) or 'no faults'}", source=source, key=key)
    if "crash" in active:
        states = tuple(getattr(protocol_cls, "crash_states", ()))
        if spec["state"] not in states:
            accepted = f"state = {' or '.join(repr(s) for s in states)}" if states else "no crashes"
            raise InputError(f"protocol {protocol_cls.name!r} does not survive node crashes with state "
                             f"{spec['state']!r}; accepted: {accepted}", source=source,
                             key="faults.state" if states else "faults.crashes")


# ---------------------------------------------------------------------- interval schedules
def alternating(rng: np.random.Generator, fail_rate: float, repair_rate: float, horizon: float) -> np.ndarray:
    """Down intervals ``[[start, end], ...]`` of a two-state process started up at time 0.

    Up times are exponential with rate ``fail_rate``, down times with rate ``repair_rate``
    (0: the first failure is permanent). Only intervals starting before ``horizon`` are kept.
    """
    if fail_rate <= 0:
        return np.empty((0, 2))
    starts: list[np.ndarray] = []
    ends: list[np.ndarray] = []
    t = 0.0
    chunk = int(min(1e6, max(8, 1.2 * horizon * fail_rate + 8)))
    while t < horizon:
        up = rng.exponential(1.0 / fail_rate, chunk)
        down = rng.exponential(1.0 / repair_rate, chunk) if repair_rate > 0 else np.full(chunk, math.inf)
        s = t + np.cumsum(up) + np.concatenate(([0.0], np.cumsum(down)[:-1]))
        e = s + down
        keep = s < horizon
        starts.append(s[keep])
        ends.append(e[keep])
        if not keep.all() or repair_rate <= 0:
            break
        t = float(e[-1])
    if repair_rate <= 0:
        return np.array([[starts[0][0], math.inf]]) if len(starts[0]) else np.empty((0, 2))
    return np.column_stack((np.concatenate(starts), np.concatenate(ends)))


def merge(intervals: Sequence[Sequence[float]]) -> tuple[list[float], list[float]]:
    """Sorted, disjoint ``(starts, ends)`` covering the union of ``[start, end)`` intervals."""
    starts: list[float] = []
    ends: list[float] = []
    for s, e in sorted((float(s), float(e)) for s, e in intervals):
        if starts and s <= ends[-1]:
            ends[-1] = max(ends[-1], e)
        else:
            starts.append(s)
            ends.append(e)
    return starts, ends


def inside(schedule: tuple[list[float], list[float]], t: float) -> bool:
    """Whether ``t`` falls in one of the merged ``[start, end)`` intervals."""
    starts, ends = schedule
    i = bisect_right(starts, t) - 1
    return i >= 0 and t < ends[i]


# ---------------------------------------------------------------------- live state of one trial
class Faults:
    """The faults of one trial: schedules, the live up/down state and the fault counters.

    Built by the simulation from the validated ``[faults]`` section; the network consults it on
    every send and delivery, the simulation pauses node clocks with it. Protocols use
    :meth:`is_up` / :attr:`up` and the :meth:`on_crash` / :meth:`on_restart` subscriptions.
    """

    active = True

    def __init__(self, spec: Mapping[str, Any], *, env: simpy.Environment, edges: Sequence[tuple[int, int]],
                 num_nodes: int, num_agents: int, horizon: float, streams: Any, extras: dict[str, float]):
        self.spec = spec
        self.env = env
        self.state: str = spec["state"]
        self.kinds = kinds(spec)
        self.extras = extras
        for name in EXTRAS:
            extras[name] = 0
        self.up = np.ones(num_nodes, dtype=bool)
        self._crash_handlers: list[Callable[[int], None]] = []
        self._restart_handlers: list[Callable[[int, str], None]] = []
        # links: each (u < v) pair with an outage gets its merged schedule
        link_rng, node_rng = streams.for_("faults", 0), streams.for_("faults", 1)
        self.message_rng: np.random.Generator = streams.for_("faults", 2)
        down: dict[tuple[int, int], list[Sequence[float]]] = {}
        for link in spec["links"]:
            u, v = link["u"], link["v"]
            down.setdefault((min(u, v), max(u, v)), []).append((link["start"], link["end"]))
        if spec["link_down_rate"] > 0:
            for u, v in sorted((min(a, b), max(a, b)) for a, b in edges):
                found = alternating(link_rng, spec["link_down_rate"], spec["link_up_rate"], horizon)
                if len(found):
                    down.setdefault((u, v), []).extend(found.tolist())
        self.links = {pair: merge(iv) for pair, iv in down.items()}
        crashed: dict[int, list[Sequence[float]]] = {}
        for crash in spec["crashes"]:
            crashed.setdefault(crash["node"], []).append((crash["start"], crash["end"]))
        if spec["crash_rate"] > 0:
            for agent in range(num_agents):
                found = alternating(node_rng, spec["crash_rate"], spec["restart_rate"], horizon)
                if len(found):
                    crashed.setdefault(agent, []).extend(found.tolist())
        self.crashes = {node: merge(iv) for node, iv in sorted(crashed.items())}
        self.has_crashes = bool(self.crashes)
        self.has_link_faults = bool(self.links)
        self.duplication: float = spec["duplication"]
        self.reorder: float = spec["reorder"]
        self.reorder_delay: Distribution = parse_distribution(spec["reorder_delay"], key="faults.reorder_delay",
                                                              models=DELAY_MODELS)
        self.perturbs = self.duplication > 0 or self.reorder > 0

    # ------------------------------------------------------------------ protocol API
    def is_up(self, node: int) -> bool:
        """Whether ``node`` is running now (not crashed)."""
        return bool(self.up[node])

    def link_is_up(self, u: int, v: int, t: float | None = None) -> bool:
        """Whether the link (u, v) carries messages sent at ``t`` (default: now)."""
        schedule = self.links.get((u, v) if u < v else (v, u))
        return schedule is None or not inside(schedule, self.env.now if t is None else t)

    def on_crash(self, handler: Callable[[int], None]) -> None:
        """Call ``handler(node)`` when ``node`` crashes (before any delivery at that instant)."""
        self._crash_handlers.append(handler)

    def on_restart(self, handler: Callable[[int, str], None]) -> None:
        """Call ``handler(node, state)`` when ``node`` restarts; ``state`` is ``"kept"`` or ``"lost"``."""
        self._restart_handlers.append(handler)

    # ------------------------------------------------------------------ engine side
    def start(self, schedule: Callable[[float, Callable[[], None]], None], horizon: float) -> None:
        """Schedule the crash and restart events (called by the simulation before the protocol starts)."""
        for node, (starts, ends) in self.crashes.items():
            for s, e in zip(starts, ends, strict=True):
                if s < horizon:
                    schedule(s, lambda n=node: self._crash(n))
                if e < horizon:
                    schedule(e, lambda n=node: self._restart(n))

    def _crash(self, node: int) -> None:
        self.up[node] = False
        for handler in self._crash_handlers:
            handler(node)

    def _restart(self, node: int) -> None:
        self.up[node] = True
        for handler in self._restart_handlers:
            handler(node, self.state)

    def drop_at_send(self, src: int, dsts: Sequence[int], now: float) -> tuple[list[int], list[int], int, int]:
        """Split ``dsts`` into kept and dropped at send time: (kept, dropped, crashed, link_down)."""
        if self.has_crashes and not self.up[src]:
            self.extras["dropped_crashed"] += len(dsts)
            return [], list(dsts), len(dsts), 0
        if not self.has_link_faults:
            return list(dsts), [], 0, 0
        kept: list[int] = []
        dropped: list[int] = []
        links = self.links
        for d in dsts:
            schedule = links.get((src, d) if src < d else (d, src))
            if schedule is not None and inside(schedule, now):
                dropped.append(d)
            else:
                kept.append(d)
        self.extras["dropped_link_down"] += len(dropped)
        return kept, dropped, 0, len(dropped)

    def delivered(self, message: Message) -> bool:
        """False (and counted) when the message's destination is down at its due time."""
        if self.up[message.dst]:
            return True
        self.extras["dropped_crashed"] += 1
        return False


class NoFaults:
    """What ``sim.faults`` is when the scenario has no faults: every node always up, no events."""

    active = False
    has_crashes = False
    kinds: tuple[str, ...] = ()
    state = "kept"

    def __init__(self, num_nodes: int):
        self.up = np.ones(num_nodes, dtype=bool)

    def is_up(self, node: int) -> bool:
        return True

    def link_is_up(self, u: int, v: int, t: float | None = None) -> bool:
        return True

    def on_crash(self, handler: Callable[[int], None]) -> None:
        """Never called without faults."""

    def on_restart(self, handler: Callable[[int, str], None]) -> None:
        """Never called without faults."""
