"""Fault models of the ``[faults]`` scenario section: link outages, node crashes, duplication, reordering.

Every fault is drawn from the trial's own ``faults*`` streams (see :class:`Faults`), so adding a fault never
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
  rejects crashes with an :class:`~netsim.engine.errors.InputError`).
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

from netsim.engine import params as P
from netsim.engine.distributions import DELAY_MODELS, Distribution, distribution_field, parse_distribution
from netsim.engine.errors import InputError

if TYPE_CHECKING:
    import simpy

FAULT_KINDS = ("link_down", "crash", "duplication", "reorder")
STATES = ("kept", "lost")
#: the trials columns of a scenario with faults (a mapping: name -> its description)
EXTRAS = {
    "dropped_link_down": P.column("messages lost on down links", doc="messages dropped because their link was down"),
    "dropped_crashed": P.column("messages lost at crashed nodes",
                                doc="messages dropped because their receiver was down when they arrived"),
    "duplicated": P.column("messages duplicated", doc="messages delivered a second time (faults.duplication)"),
    "reordered": P.column("messages reordered", doc="messages given the extra delay faults.reorder_delay"),
}

_LIST = {"type": "array", "items": {"type": "object"}}
FAULTS = {
    "links": P.Field("a list of tables { u, v, start, end }", lambda v: v if isinstance(v, list) else None, [],
                     doc="scheduled link down intervals [start, end) of the link between u and v",
                     label="scheduled link outages", unit="", schema=_LIST),
    "link_down_rate": P.real(0.0, low=0.0, doc="rate at which each up link goes down (per unit time; 0 = never)",
                             label="link failure rate", unit="per slot"),
    "link_up_rate": P.real(1.0, low=0.0, low_open=True, doc="rate at which a down link comes back (mean outage "
                                                              "1 / link_up_rate)", label="link repair rate",
                           unit="per slot"),
    "crashes": P.Field("a list of tables { node, start, end }", lambda v: v if isinstance(v, list) else None, [],
                       doc="scheduled node crashes [start, end); end = inf: the node never restarts",
                       label="scheduled crashes", unit="", schema=_LIST),
    "crash_rate": P.real(0.0, low=0.0, doc="rate at which each agent crashes (per unit time; 0 = never)",
                         label="crash rate", unit="per slot"),
    "restart_rate": P.real(0.0, low=0.0, doc="rate at which a crashed agent restarts (0 = never)",
                           label="restart rate", unit="per slot"),
    "state": P.choice(STATES, "kept", doc="whether a restarted node keeps its protocol state",
                      label="state after a restart"),
    "duplication": P.probability(0.0, doc="probability that a message is delivered twice",
                                 label="duplication probability"),
    "reorder": P.probability(0.0, doc="probability that a message gets the extra delay reorder_delay",
                             label="reordering probability"),
    "reorder_delay": distribution_field(DELAY_MODELS, {"model": "exponential", "mean": 1.0},
                                        doc="law of the extra delay of reordered messages",
                                        label="extra delay of reordered messages", unit="slots"),
}
LINK_DOWN = {
    "u": P.integer(low=0, doc="one end of the link (node id)", label="node u"),
    "v": P.integer(low=0, doc="the other end of the link (node id)", label="node v"),
    "start": P.real(low=0.0, doc="when the link goes down", label="outage start", unit="slots"),
    "end": P.real(low=0.0, allow_inf=True, doc="when it comes back (inf: never)", label="outage end", unit="slots"),
}
CRASH = {
    "node": P.integer(low=0, doc="the node that crashes (id)", label="node"),
    "start": P.real(low=0.0, doc="when it crashes", label="crash start", unit="slots"),
    "end": P.real(math.inf, low=0.0, allow_inf=True, doc="when it restarts (inf: never)", label="crash end",
                  unit="slots"),
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


def check_inert(spec: Mapping[str, Any] | None, source: str | None = None) -> None:
    """Refuse a fault key that could not act: a parameter of a fault that is off.

    ``link_up_rate`` without links going down (``link_down_rate = 0``), ``restart_rate`` without
    random crashes (scheduled crashes carry their own end), ``state`` without any crash that ends,
    ``reorder_delay`` with ``reorder = 0``.
    """
    if not spec:
        return
    default_reorder = parse_distribution(FAULTS["reorder_delay"].default, key="faults.reorder_delay",
                                         models=DELAY_MODELS).as_table()
    restarts = spec["restart_rate"] > 0 or any(math.isfinite(c["end"]) for c in spec["crashes"])
    inert = [
        ("faults.link_up_rate", spec["link_up_rate"] != FAULTS["link_up_rate"].default and spec["link_down_rate"] == 0,
         "is the rate at which a link that went down comes back, and none goes down; accepted: link_down_rate > 0"),
        ("faults.restart_rate", spec["restart_rate"] > 0 and spec["crash_rate"] == 0,
         "restarts agents that crashed at random, and crash_rate = 0; accepted: crash_rate > 0"),
        ("faults.state", spec["state"] != FAULTS["state"].default and not (
            (spec["crash_rate"] > 0 or spec["crashes"]) and restarts),
         "is what a restarted node keeps, and no node restarts; accepted: crashes that end, or crash_rate and "
         "restart_rate > 0"),
        ("faults.reorder_delay", spec["reorder"] == 0 and spec["reorder_delay"] != default_reorder,
         "is the extra delay of reordered messages, and reorder = 0; accepted: reorder > 0"),
    ]
    for key, bad, why in inert:
        if bad:
            raise InputError(f"{key.split('.')[1]} {why}", source=source, key=key)


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


class Alternating:
    """A two-state (up/down) process started up at time 0, drawn lazily as time advances.

    Up times are exponential with rate ``fail_rate``, down times with rate ``repair_rate``
    (0: the first failure lasts for ever). :meth:`down_at` must be asked at non-decreasing
    times (simulated time never goes back); the process is drawn only as far as asked, so a
    huge horizon costs nothing, and it has its own generator, so the answers do not depend on
    which other links were asked about.
    """

    __slots__ = ("rng", "fail", "repair", "start", "end")

    def __init__(self, rng: np.random.Generator, fail_rate: float, repair_rate: float):
        self.rng = rng
        self.fail = 1.0 / fail_rate
        self.repair = 1.0 / repair_rate if repair_rate > 0 else math.inf
        self.start = float(rng.exponential(self.fail))
        self.end = self._until(self.start)

    def _until(self, start: float) -> float:
        return start + float(self.rng.exponential(self.repair)) if self.repair < math.inf else math.inf

    def down_at(self, t: float) -> bool:
        while self.end <= t:
            self.start = self.end + float(self.rng.exponential(self.fail))
            self.end = self._until(self.start)
        return self.start <= t

    def intervals(self, horizon: float) -> list[tuple[float, float]]:
        """The down intervals starting before ``horizon`` (for tests; consumes the process)."""
        out = []
        while self.start < horizon:
            out.append((self.start, self.end))
            if self.end == math.inf:
                break
            self.down_at(self.end)
        return out


# ---------------------------------------------------------------------- live state of one trial
class Faults:
    """The faults of one trial: schedules, the live up/down state and the fault counters.

    Built with the network from the validated ``[faults]`` section; the network consults it on
    every send and delivery, the simulation pauses node clocks with it. Protocols use
    :meth:`is_up` / :attr:`up` and the :meth:`on_crash` / :meth:`on_restart` subscriptions.

    Streams: link (u, v) with u < v draws its random outages from ``("faults-link", u * N + v)``
    (N nodes), agent i its random crashes from ``("faults-node", i)``, and duplication and
    reordering come from ``("faults", 0)``.
    """

    active = True

    def __init__(self, spec: Mapping[str, Any], *, env: simpy.Environment, edges: Sequence[tuple[int, int]],
                 num_nodes: int, num_agents: int, streams: Any, extras: dict[str, float]):
        self.spec = spec
        self.env = env
        self.state: str = spec["state"]
        self.kinds = kinds(spec)
        self.extras = extras
        for name in EXTRAS:
            extras[name] = 0
        self.num_nodes = num_nodes
        self.num_agents = num_agents
        self.streams = streams
        self.up = np.ones(num_nodes, dtype=bool)
        #: the node whose crash handlers are running (-1: none); see ``Simulation._guard_pulls``
        self.settling = -1
        self._down_count = [0] * num_nodes
        self._crash_handlers: list[Callable[[int], None]] = []
        self._restart_handlers: list[Callable[[int, str], None]] = []
        self.message_rng: np.random.Generator = streams.for_("faults", 0)
        down: dict[tuple[int, int], list[Sequence[float]]] = {}
        for link in spec["links"]:
            u, v = link["u"], link["v"]
            down.setdefault((min(u, v), max(u, v)), []).append((link["start"], link["end"]))
        self.scheduled_links = {pair: merge(iv) for pair, iv in down.items()}
        self.random_links: dict[tuple[int, int], Alternating] = {}
        self.link_rates = (spec["link_down_rate"], spec["link_up_rate"])
        self.has_link_faults = bool(self.scheduled_links) or spec["link_down_rate"] > 0
        self.has_crashes = bool(spec["crashes"]) or spec["crash_rate"] > 0
        self.duplication: float = spec["duplication"]
        self.reorder: float = spec["reorder"]
        self.reorder_delay: Distribution = parse_distribution(spec["reorder_delay"], key="faults.reorder_delay",
                                                              models=DELAY_MODELS)
        self.perturbs = self.duplication > 0 or self.reorder > 0
        #: set by the network (``Network._before_deliveries``): called with True before a node goes down or
        #: comes back (the held messages due earlier meet the state before the change), False after its handlers
        self.before_change: Callable[[bool], None] | None = None

    # ------------------------------------------------------------------ protocol API
    def is_up(self, node: int) -> bool:
        """Whether ``node`` is running now (not crashed)."""
        return bool(self.up[node])

    def link_is_up(self, u: int, v: int) -> bool:
        """Whether the link (u, v) carries the messages sent now."""
        return not self._link_down(u, v, self.env.now)

    def on_crash(self, handler: Callable[[int], None]) -> None:
        """Call ``handler(node)`` when ``node`` crashes (before any delivery at that instant)."""
        self._crash_handlers.append(handler)

    def on_restart(self, handler: Callable[[int, str], None]) -> None:
        """Call ``handler(node, state)`` when ``node`` restarts; ``state`` is ``"kept"`` or ``"lost"``."""
        self._restart_handlers.append(handler)

    # ------------------------------------------------------------------ engine side
    def start(self, schedule: Callable[[float, Callable[[], None]], None], horizon: float) -> None:
        """Schedule the crash and restart events (called by the simulation before the protocol starts).

        A node is down while at least one scheduled or random crash interval covers it; the
        handlers fire when it goes down and when it comes back.
        """
        self._schedule, self._horizon = schedule, horizon
        for crash in self.spec["crashes"]:
            if crash["start"] < horizon:
                schedule(crash["start"], lambda n=crash["node"]: self._down(n, +1))
            if crash["end"] < horizon:
                schedule(crash["end"], lambda n=crash["node"]: self._down(n, -1))
        rate = self.spec["crash_rate"]
        if rate > 0:
            for agent in range(self.num_agents):
                rng = self.streams.for_("faults-node", agent)
                self._random_crash(agent, rng, float(rng.exponential(1.0 / rate)))

    def _random_crash(self, node: int, rng: np.random.Generator, when: float) -> None:
        if when >= self._horizon:
            return
        restart = self.spec["restart_rate"]

        def crash() -> None:
            self._down(node, +1)
            if restart > 0:
                back = self.env.now + float(rng.exponential(1.0 / restart))
                if back < self._horizon:
                    self._schedule(back, lambda: (self._down(node, -1), self._random_crash(
                        node, rng, self.env.now + float(rng.exponential(1.0 / self.spec["crash_rate"])))))

        self._schedule(when, crash)

    def _down(self, node: int, step: int) -> None:
        before = self._down_count[node]
        self._down_count[node] = after = before + step
        if (before == 0) == (after == 0):
            return  # still up, or still down (overlapping crash intervals)
        if self.before_change is not None:
            self.before_change(True)
        try:
            if after > 0:
                self.up[node] = False
                self.settling = node  # its crash handlers may still settle its pulls of the past
                try:
                    for handler in self._crash_handlers:
                        handler(node)
                finally:
                    self.settling = -1
            else:
                self.up[node] = True
                for handler in self._restart_handlers:
                    handler(node, self.state)
        finally:
            if self.before_change is not None:
                self.before_change(False)

    def _link_down(self, u: int, v: int, now: float) -> bool:
        pair = (u, v) if u < v else (v, u)
        schedule = self.scheduled_links.get(pair)
        if schedule is not None and inside(schedule, now):
            return True
        if self.link_rates[0] <= 0:
            return False
        process = self.random_links.get(pair)
        if process is None:
            rng = self.streams.for_("faults-link", pair[0] * self.num_nodes + pair[1])
            process = self.random_links[pair] = Alternating(rng, *self.link_rates)
        return process.down_at(now)

    def drop_at_send(self, src: int, dsts: Sequence[int], now: float) -> tuple[list[int], list[int]]:
        """Split ``dsts`` into (kept, dropped) at send time, counting the drops by reason."""
        if self.has_crashes and not self.up[src]:
            self.extras["dropped_crashed"] += len(dsts)
            return [], list(dsts)
        if not self.has_link_faults:
            return list(dsts), []
        kept: list[int] = []
        dropped: list[int] = []
        for d in dsts:
            (dropped if self._link_down(src, d, now) else kept).append(d)
        self.extras["dropped_link_down"] += len(dropped)
        return kept, dropped

    def kept_at_send(self, src: np.ndarray, dst: np.ndarray, now: float) -> np.ndarray:
        """Vectorised :meth:`drop_at_send` for links ``(src[i], dst[i])``: which are kept (drops counted)."""
        keep = np.ones(len(src), dtype=bool)
        if self.has_crashes:
            keep &= self.up[src]
            self.extras["dropped_crashed"] += int(len(src) - keep.sum())
        if self.has_link_faults:
            down = np.array([self._link_down(s, d, now) if k else False for s, d, k in
                             zip(src.tolist(), dst.tolist(), keep.tolist(), strict=True)], dtype=bool)
            self.extras["dropped_link_down"] += int(down.sum())
            keep &= ~down
        return keep


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

    def link_is_up(self, u: int, v: int) -> bool:
        return True

    def on_crash(self, handler: Callable[[int], None]) -> None:
        """Never called without faults."""

    def on_restart(self, handler: Callable[[int, str], None]) -> None:
        """Never called without faults."""
