"""The GIS flood of li2022 (Alg. 2): ADV-REQ-DATA handshakes that carry every agent's record
to every agent (DDP-MAB) or to the sink agents (HDP-MAB's SAC by flooding).

Everything here moves real messages through the engine; the bandit logic lives in
:mod:`protocols.li2022.epochs` and the algorithms in :mod:`protocols.li2022`.

Slot rule (paper mode and realistic mode alike). Agents act only at slot boundaries (the
owner calls :meth:`Flood.tick` once per slot): a record received during slot s is advertised
at the start of slot s + 1, so with per-stage link delays of at most a third of a slot one
ADV -> REQ -> DATA exchange fits in one slot and records travel one hop per slot, exactly like
flooding one hop per slot. With random delays an exchange may span several slots; with loss the
handshake runs in reliable mode (see :mod:`netsim.handshake`) and repeats unanswered stages
after ``timeout``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from netsim.handshake import Handshake


class Flood:
    """GIS dissemination (Alg. 2) of one record per agent, on top of :class:`~netsim.handshake.Handshake`.

    ``begin(records, groups, sinks)`` starts an exchange epoch in which agent j's record is
    ``records[j]`` (a vector). Within each group (a list of agent ids whose induced graph is
    connected) records spread by ADV/REQ/DATA between neighbours. A group is *complete* when
    every member holds every member's record (GIS, ``sinks=None``), or when its sink holds them
    all (the flooding variant of SAC); ``on_group(q)`` fires then, ``on_complete()`` once every
    group is complete. ``received[i, j]`` is the copy of record j that agent i
    got (its own record at j = i), so aggregation at an agent uses only what reached it.
    """

    def __init__(self, network, prefix: str, *, reliable: bool, timeout: float,
                 on_complete: Callable[[], None] | None = None, on_group: Callable[[int], None] | None = None):
        self.network = network
        self.num_agents = network.num_agents
        self.handshake = Handshake(network, prefix, missing=self._missing, fetch=self._fetch,
                                   on_data=self._on_data, reliable=reliable, timeout=timeout)
        self._neighbors = [network.agent_neighbors(i) for i in range(self.num_agents)]
        self.on_complete = on_complete
        self.on_group = on_group
        self.active = False
        self.complete_at: float | None = None
        self.have = np.zeros((0, 0), dtype=bool)
        self.received = np.zeros((0, 0, 0))

    # ------------------------------------------------------------------ epoch
    def begin(self, records: np.ndarray, groups: Sequence[Sequence[int]], sinks: Sequence[int] | None = None) -> None:
        m = self.num_agents
        self.handshake.reset()
        self.have = np.eye(m, dtype=bool)
        self.received = np.zeros((m, m, records.shape[1]))
        self.received[np.arange(m), np.arange(m)] = records
        self._group_of = np.full(m, -1)
        self._size = np.array([len(g) for g in groups])
        for q, members in enumerate(groups):
            self._group_of[list(members)] = q
        self._sinks = None if sinks is None else list(sinks)
        self._count = np.ones(m, dtype=np.int64)
        # per group: members (GIS) or sinks (SAC) still missing a record
        self._group_waiting = [0 if len(g) == 1 else (len(g) if sinks is None else 1) for g in groups]
        self._waiting = sum(1 for w in self._group_waiting if w > 0)
        self._done = [w == 0 for w in self._group_waiting]
        self._groups = [list(g) for g in groups]
        self._new: dict[int, list[int]] = {i: [i] for g in groups if len(g) > 1 for i in g}
        self.active = True
        self.complete_at = None
        for q, waiting in enumerate(self._group_waiting):
            if waiting == 0 and self.on_group is not None:
                self.on_group(q)
        if self._waiting == 0:
            self._finish()

    def tick(self, now: float) -> None:
        """Start of a slot: every agent advertises the records it got since the last slot; retries."""
        if not self.active:
            return
        new, self._new = self._new, {}
        for node in sorted(new):
            if not self._done[self._group_of[node]]:
                self.handshake.advertise(node, self._neighbors[node], new[node])
        self.handshake.retry(now)

    # ------------------------------------------------------------------ handshake callbacks
    def _missing(self, node: int, keys: Sequence[int]) -> list[int]:
        if self._done[self._group_of[node]]:
            return []
        return [k for k in keys if not self.have[node, k]]

    def _fetch(self, node: int, keys: Sequence[int]) -> np.ndarray:
        return self.received[node, list(keys)].copy()

    def _on_data(self, node: int, src: int, keys: Sequence[int], records: np.ndarray) -> None:
        fresh = [idx for idx, k in enumerate(keys) if not self.have[node, k]]
        if not fresh or not self.active or self._done[self._group_of[node]]:
            return
        got = [keys[idx] for idx in fresh]
        self.have[node, got] = True
        self.received[node, got] = records[fresh]
        self._new.setdefault(node, []).extend(got)
        before = self._count[node]
        self._count[node] += len(got)
        q = self._group_of[node]
        target = self._sinks is None or self._sinks[q] == node
        if target and before < self._size[q] <= self._count[node]:
            self._group_waiting[q] -= 1
            if self._group_waiting[q] == 0:
                # the group's communication ends: its members stop advertising and retrying
                self._done[q] = True
                self.handshake.forget(self._groups[q])
                if self.on_group is not None:
                    self.on_group(q)
                self._waiting -= 1
                if self._waiting == 0:
                    self._finish()

    def _finish(self) -> None:
        self.complete_at = self.network.env.now
        self.active = False
        if self.on_complete is not None:
            self.on_complete()
