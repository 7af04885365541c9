"""Counters the engine keeps for every trial: links built, messages by kind and fate.

Link accounting follows li2022 Eq. (2): C(T) = sum over rounds r, slots t and links l built
in that slot of c_{r,t,l}. A two-way link between a pair of nodes counts once per slot in
which it carries at least one message (or is explicitly activated); a server-agent link costs
c1 (``server_agent``) and an agent-agent link c2 (``agent_agent``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

FATES = ("sent", "delivered", "dropped", "corrupted")


@dataclass
class MessageCounts:
    """Counts for one message kind. ``records`` is the summed ``size`` of sent messages."""

    sent: int = 0
    delivered: int = 0
    dropped: int = 0
    corrupted: int = 0
    records: int = 0

    @property
    def in_flight(self) -> int:
        return self.sent - self.delivered - self.dropped


@dataclass
class Metrics:
    """Engine-side counters for one trial (protocols may only increment ``rounds`` and set ``extras``)."""

    num_nodes: int
    num_agents: int
    cost_agent_agent: float
    cost_server_agent: float
    slot: float = 1.0
    links_agent_agent: int = 0
    links_server_agent: int = 0
    rounds: int = 0
    messages: dict[str, MessageCounts] = field(default_factory=dict)
    extras: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.node_sent = np.zeros(self.num_nodes, dtype=np.int64)
        self.node_received = np.zeros(self.num_nodes, dtype=np.int64)
        self.node_links = np.zeros(self.num_nodes, dtype=np.int64)
        self._slot_index = -math.inf
        self._slot_pairs: set[tuple[int, int]] = set()

    @property
    def comm_cost(self) -> float:
        """C(T) of li2022 Eq. (2)."""
        return self.links_agent_agent * self.cost_agent_agent + self.links_server_agent * self.cost_server_agent

    def link_used(self, u: int, v: int, now: float) -> bool:
        """Record that the pair (u, v) carries traffic at time ``now``; True if newly built this slot."""
        slot = now // self.slot
        if slot != self._slot_index:
            self._slot_index = slot
            self._slot_pairs.clear()
        pair = (u, v) if u < v else (v, u)
        if pair in self._slot_pairs:
            return False
        self._slot_pairs.add(pair)
        if u >= self.num_agents or v >= self.num_agents:
            self.links_server_agent += 1
        else:
            self.links_agent_agent += 1
        self.node_links[u] += 1
        self.node_links[v] += 1
        return True

    def kind(self, kind: str) -> MessageCounts:
        counts = self.messages.get(kind)
        if counts is None:
            counts = self.messages[kind] = MessageCounts()
        return counts

    def total(self, fate: str) -> int:
        return sum(getattr(c, fate) for c in self.messages.values())
