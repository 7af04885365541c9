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

One shared table (issue 16). Within a round every record is immutable: record j is agent j's
(ybar_j, n_j) as of the round's start. So the round keeps one (M, K) table of records and an
(M, M) boolean mask ``have[i, j]`` (agent i holds record j) instead of a copy per agent; a DATA
message names its keys (its size counts them) and the receiver reads the values from the table,
which is exactly what the copy it carries would contain.

Crashes (``docs/faults.md``; the rules of DDP-MAB and HDP-MAB). The paper assumes a
synchronisation clock that monitors every agent's status and observation list (Sec. V-A.2):

* the *participants* of a round are the agents up at its start (their records exist); an agent
  down then takes no part; the *survivors* are the participants that have not crashed since;
* a node that is down does not advertise or retry (what it got waits until it is up again, or
  is forgotten if it restarts with ``state = "lost"``); when a node restarts, every up neighbour
  advertises to it again everything it holds (as a neighbour that comes back would be told);
* a group is complete when every *target* (GIS: every survivor of the group; SAC: its sink, if a
  survivor) holds the record of every survivor of the group; after any crash or absence in the
  round, also when no target can receive any more record (every record held by an up agent of
  its up-component is already at the target: the round cannot progress further, e.g. because a
  crashed agent cut the graph);
* :meth:`common` is what every survivor then aggregates: the records held by every survivor, one
  set for all, so the agents still agree on the active set (without crashes: all M records).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from netsim.handshake import Handshake


class Flood:
    """GIS dissemination (Alg. 2) of one record per agent, on top of :class:`~netsim.handshake.Handshake`.

    ``begin(records, counts, participants, groups, sinks)`` starts an exchange epoch in which agent
    j's record is ``records[j]`` with sample count ``counts[j]`` (participants only). Within each
    group (a list of agent ids whose induced graph is connected) records spread by ADV/REQ/DATA
    between neighbours. ``on_group(q)`` fires when group q is complete (module docstring), and
    ``on_complete()`` once every group is complete or abandoned (a SAC group whose sink is down).
    ``have[i, j]`` says whether agent i holds record j (its own at j = i).
    """

    def __init__(self, network, prefix: str, *, reliable: bool, timeout: float, up: np.ndarray,
                 on_complete: Callable[[], None] | None = None, on_group: Callable[[int], None] | None = None):
        self.network = network
        self.num_agents = m = network.num_agents
        self.up = up[:m]
        self.handshake = Handshake(network, prefix, missing=self._missing, fetch=self._fetch,
                                   on_data=self._on_data, reliable=reliable, timeout=timeout, up=up)
        self._neighbors = [network.agent_neighbors(i) for i in range(m)]
        self._adjacency: csr_matrix | None = None
        self.on_complete = on_complete
        self.on_group = on_group
        self.active = False
        self.complete_at: float | None = None
        self.have = np.zeros((0, 0), dtype=bool)
        self.table = np.zeros((0, 0))
        self.counts = np.zeros(0, dtype=np.int64)

    # ------------------------------------------------------------------ epoch
    def begin(self, records: np.ndarray, counts: np.ndarray, participants: np.ndarray,
              groups: Sequence[Sequence[int]], sinks: Sequence[int] | None = None) -> None:
        m = self.num_agents
        self.handshake.reset()
        self.table, self.counts = records, counts
        self.survivor = np.asarray(participants, dtype=bool).copy()
        self.have = np.zeros((m, m), dtype=bool)
        own = np.flatnonzero(self.survivor)
        self.have[own, own] = True
        self._group_of = np.full(m, -1)
        for q, members in enumerate(groups):
            self._group_of[list(members)] = q
        self._groups = [np.asarray(g, dtype=np.int64) for g in groups]
        self._sinks = None if sinks is None else list(sinks)
        self.target = self.survivor.copy() if sinks is None else np.zeros(m, dtype=bool)
        if sinks is not None:
            self.target[[s for s in sinks if self.survivor[s]]] = True
        self._need = np.zeros(m, dtype=np.int64)  # survivor records of its group a target lacks
        self._open = np.zeros(len(groups), dtype=np.int64)  # targets of each group still waiting
        self._done = np.zeros(len(groups), dtype=bool)
        for q, members in enumerate(self._groups):
            targets = members[self.target[members]]
            self._need[targets] = self.survivor[members].sum() - 1
            self._open[q] = np.count_nonzero(self._need[targets])
        self._new: dict[int, list] = {int(i): [int(i)] for g in self._groups if len(g) > 1 for i in g
                                      if self.survivor[i]}
        self._readvertise: list[int] = []
        self.disturbed = not self.survivor.all()
        self.active = True
        self.complete_at = None
        for q, members in enumerate(self._groups):
            if self._open[q] == 0:
                self._close(q, complete=bool(self.target[members].any()))
        self._check_saturation()

    def common(self) -> np.ndarray:
        """Indices of the records held by every survivor (what every survivor aggregates)."""
        if not self.survivor.any():
            return np.zeros(0, dtype=np.int64)
        return np.flatnonzero(self.have[self.survivor].all(axis=0))

    def held(self, node: int, members: Sequence[int]) -> np.ndarray:
        """The records among ``members`` that ``node`` holds."""
        members = np.asarray(members, dtype=np.int64)
        return members[self.have[node, members]]

    def tick(self, now: float) -> None:
        """Start of a slot: every up agent advertises the records it got since the last slot; retries."""
        if not self.active:
            return
        up = self.up
        new, self._new = self._new, {}
        for node in sorted(new):
            if self._done[self._group_of[node]]:
                continue
            if not up[node]:  # a crashed agent acts when it is back
                self._new[node] = new[node]
                continue
            self.handshake.advertise(node, self._neighbors[node], np.asarray(new[node], dtype=np.int64))
        back, self._readvertise = self._readvertise, []
        for node in back:
            if not up[node] or self._done[self._group_of[node]]:
                continue
            for other in self._neighbors[node]:
                if up[other]:
                    self.handshake.advertise(other, [node], np.flatnonzero(self.have[other]))
        self.handshake.retry(now)
        self._check_saturation()

    # ------------------------------------------------------------------ crashes
    def crashed(self, node: int) -> None:
        """Agent ``node`` crashed: it leaves the round (if a survivor) and the others stop waiting for it."""
        if not self.active:
            return
        self.disturbed = True
        q = self._group_of[node]
        if self.survivor[node] and not self._done[q]:
            self.survivor[node] = False
            members = self._groups[q]
            if self.target[node]:
                self.target[node] = False
                if self._need[node] > 0:
                    self._open[q] -= 1
                if self._sinks is not None:  # SAC: the group's sink is gone, its records cannot leave
                    self._close(q, complete=False)
            if not self._done[q]:
                lacking = members[self.target[members] & ~self.have[members, node]]
                self._need[lacking] -= 1
                self._open[q] -= np.count_nonzero(self._need[lacking] == 0)
                if self._open[q] == 0:
                    self._close(q, complete=bool(self.target[members].any()))
        elif self.survivor[node]:
            self.survivor[node] = False
        self._check_saturation()

    def restarted(self, node: int, state: str) -> None:
        """Agent ``node`` is back (not a participant of this round); ``lost``: it holds nothing any more."""
        if not self.active:
            return
        if state == "lost":
            self.have[node] = False
            self._new.pop(node, None)
            self.handshake.lost(node)
        self._readvertise.append(node)

    # ------------------------------------------------------------------ handshake callbacks
    def _missing(self, node: int, keys) -> np.ndarray:
        keys = np.asarray(keys, dtype=np.int64)
        if self._done[self._group_of[node]]:
            return keys[:0]
        return keys[~self.have[node, keys]]

    def _fetch(self, node: int, keys) -> tuple[np.ndarray, None]:
        keys = np.asarray(keys, dtype=np.int64)
        return keys[self.have[node, keys]], None  # the values are the shared table's rows

    def _on_data(self, node: int, src: int, keys, payload) -> None:
        q = self._group_of[node]
        if not self.active or self._done[q]:
            return
        keys = np.asarray(keys, dtype=np.int64)
        got = keys[~self.have[node, keys]]
        if not len(got):
            return
        self.have[node, got] = True
        self._new.setdefault(node, []).extend(got.tolist())
        if self.target[node] and self._need[node] > 0:
            self._need[node] -= np.count_nonzero(self.survivor[got])
            if self._need[node] == 0:
                self._open[q] -= 1
                if self._open[q] == 0:
                    self._close(q, complete=True)

    # ------------------------------------------------------------------ completion
    def _close(self, q: int, *, complete: bool) -> None:
        """Group q's communication ends: its members stop advertising and retrying."""
        if self._done[q]:
            return
        self._done[q] = True
        self.handshake.forget(self._groups[q].tolist())
        if complete and self.on_group is not None:
            self.on_group(q)
        if self._done.all():
            self.complete_at = self.network.env.now
            self.active = False
            if self.on_complete is not None:
                self.on_complete()

    def _check_saturation(self) -> None:
        """After a crash or an absence: close every group whose targets can receive nothing more."""
        if not (self.active and self.disturbed):
            return
        m = self.num_agents
        up = np.flatnonzero(self.up)
        if not len(up):
            return
        if self._adjacency is None:
            rows = [i for i in range(m) for _ in self._neighbors[i]]
            cols = [j for i in range(m) for j in self._neighbors[i]]
            self._adjacency = csr_matrix((np.ones(len(rows), dtype=np.int8), (rows, cols)), shape=(m, m))
        _, labels = connected_components(self._adjacency[up][:, up], directed=False)
        order = np.argsort(labels, kind="stable")
        starts = np.flatnonzero(np.r_[True, np.diff(labels[order]) != 0])
        available = np.logical_or.reduceat(self.have[up[order]], starts, axis=0)  # records per up-component
        component = np.full(m, -1)
        component[up[order]] = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(order)]))
        for q in np.flatnonzero(~self._done):
            members = self._groups[q]
            targets = members[self.target[members]]
            if not len(targets):
                continue
            if not (available[component[targets]] & ~self.have[targets]).any():
                self._close(int(q), complete=True)
