"""The GIS flood of li2022 (Alg. 2): ADV-REQ-DATA handshakes that carry every agent's record
to every agent (DDP-MAB) or to the sink agents (HDP-MAB's SAC by flooding).

Everything here moves real messages through the engine; the bandit logic lives in
:mod:`protocols.li2022.epochs` and the algorithms in :mod:`protocols.li2022`.

Slot rule (paper mode and realistic mode alike). Agents act only at slot boundaries (the
owner calls :meth:`Flood.tick` once per slot): a record received during slot s is advertised
at the start of slot s + 1, so with per-stage link delays of at most a third of a slot one
ADV -> REQ -> DATA exchange fits in one slot and records travel one hop per slot, exactly like
flooding one hop per slot. With random delays an exchange may span several slots; with loss the
handshake runs in reliable mode (see :mod:`netsim.comm.handshake`) and repeats unanswered stages on
RFC 6298 timers (:mod:`netsim.comm.transport`), one per pair of neighbours.

One shared table (issue 16). Within a round every record is immutable: record j is agent j's
(ybar_j, n_j) as of the round's start. So the round keeps one (M, K) table of records and, per
agent i, the bit set ``have[i]`` of the records it holds (a Python integer, see
:mod:`netsim.comm.handshake`) instead of a copy per agent; a DATA message names its keys (its size
counts them) and the receiver reads the values from the table, which is exactly what the copy it
carries would contain.

Corrupted copies (``[adversary]``). A message carries exactly what its sender released. A DATA
that a byzantine sender or a corrupting link rewrote carries its values explicitly (the sender's
view of the records, some replaced by the lie, :meth:`Flood.rewrite_data`); its receiver keeps
them as its own *forged* copies of those records (``forged[i]``: record -> (means, count)),
uses them whenever it reads those records (:meth:`Flood.view`) and serves them when it forwards
the records, so a corrupted record spreads along the paths it takes; every other agent keeps
reading the shared table. A DATA from a sender holding no forged copy of what it serves still
carries ``None`` (the table's rows are exactly its values).

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
from typing import Any

import numpy as np

from netsim.comm import Handshake, Lie, RetransmitTimer, bits, ids


class Flood:
    """GIS dissemination (Alg. 2) of one record per agent, on top of :class:`~netsim.comm.handshake.Handshake`.

    ``begin(records, counts, participants, groups, sinks)`` starts an exchange epoch in which agent
    j's record is ``records[j]`` with sample count ``counts[j]`` (participants only). Within each
    group (a list of agent ids whose induced graph is connected) records spread by ADV/REQ/DATA
    between neighbours. ``on_group(q)`` fires when group q is complete (module docstring), and
    ``on_complete()`` once every group is complete or abandoned (a SAC group whose sink is down).
    ``have[i]`` is the bit set of the records agent i holds (its own included).
    """

    def __init__(self, sim: Any, prefix: str, *, timer: RetransmitTimer | None, up: np.ndarray,
                 on_complete: Callable[[], None] | None = None, on_group: Callable[[int], None] | None = None):
        network = sim.network
        self.network = network
        self.num_agents = m = network.num_agents
        self.up = up[:m]
        self.handshake = Handshake(sim, prefix, missing=self._missing, fetch=self._fetch, on_data=self._on_data,
                                   timer=timer, up=up)
        self.data_kind = self.handshake.kinds[2]
        self._neighbors = [network.agent_neighbors(i) for i in range(m)]
        self._adjacency: Any = None  # scipy.sparse.csr_matrix, built on first need
        self.on_complete = on_complete
        self.on_group = on_group
        self.active = False
        self.complete_at: float | None = None
        self.have: list[int] = [0] * m
        self.forged: list[dict[int, tuple[np.ndarray, int]]] = [{} for _ in range(m)]
        self._forged_bits = [0] * m
        self.table = np.zeros((0, 0))
        self.counts = np.zeros(0, dtype=np.int64)

    # ------------------------------------------------------------------ epoch
    def begin(self, records: np.ndarray, counts: np.ndarray, participants: np.ndarray,
              groups: Sequence[Sequence[int]], sinks: Sequence[int] | None = None) -> None:
        m = self.num_agents
        self.handshake.reset()
        self.table, self.counts = records, counts
        self.survivor = np.asarray(participants, dtype=bool).copy()
        self._survivors = bits(np.flatnonzero(self.survivor))
        self.have = [(1 << i) if self.survivor[i] else 0 for i in range(m)]
        self.forged = [{} for _ in range(m)]
        self._forged_bits = [0] * m
        self._group_of = [-1] * m
        for q, members in enumerate(groups):
            for i in members:
                self._group_of[i] = q
        self._groups = [np.asarray(g, dtype=np.int64) for g in groups]
        self._sinks = None if sinks is None else list(sinks)
        target = self.survivor.copy() if sinks is None else np.zeros(m, dtype=bool)
        if sinks is not None:
            target[[s for s in sinks if self.survivor[s]]] = True
        self.target = target.tolist()
        self._need = [0] * m  # survivor records of its group a target lacks
        self._open = [0] * len(groups)  # targets of each group still waiting
        self._done = [False] * len(groups)
        for q, members in enumerate(self._groups):
            waiting = int(self.survivor[members].sum()) - 1
            for i in members.tolist():
                if self.target[i]:
                    self._need[i] = waiting
                    self._open[q] += waiting > 0
        self._new: dict[int, int] = {int(i): 1 << int(i) for g in self._groups if len(g) > 1 for i in g
                                     if self.survivor[i]}
        self._readvertise: list[int] = []
        self.disturbed = not self.survivor.all()
        self.active = True
        self.complete_at = None
        for q, members in enumerate(self._groups):
            if self._open[q] == 0:
                self._close(q, complete=any(self.target[i] for i in members.tolist()))
        self._check_saturation()

    def common(self) -> np.ndarray:
        """Indices of the records held by every survivor (what every survivor aggregates)."""
        survivors = np.flatnonzero(self.survivor)
        if not len(survivors):
            return np.zeros(0, dtype=np.int64)
        mask = -1  # every bit set
        for i in survivors.tolist():
            mask &= self.have[i]
        return ids(mask)

    def held(self, node: int, members: Sequence[int]) -> np.ndarray:
        """The records among ``members`` that ``node`` holds (in the order of ``members``)."""
        members = np.asarray(members, dtype=np.int64)
        have = self.have[node]
        return members[[(have >> int(j)) & 1 == 1 for j in members]] if len(members) else members

    def view(self, node: int, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``node``'s values of the records ``keys``: (means (n, K), counts (n,)), its forged copies included."""
        means, counts = self.table[keys], self.counts[keys]
        forged = self.forged[node]
        if forged:
            for row, key in enumerate(keys.tolist()):
                if key in forged:
                    means[row], counts[row] = forged[key]
        return means, counts

    @property
    def forged_anywhere(self) -> bool:
        """Whether some agent holds a forged copy of some record this round."""
        return any(self._forged_bits)

    def tick(self, now: float) -> None:
        """Start of a slot: every up agent advertises the records it got since the last slot."""
        if not self.active:
            return
        up, done, group_of = self.up, self._done, self._group_of
        new, self._new = self._new, {}
        for node in sorted(new):
            if done[group_of[node]]:
                continue
            if not up[node]:  # a crashed agent acts when it is back
                self._new[node] = new[node]
                continue
            self.handshake.advertise(node, self._neighbors[node], new[node])
        back, self._readvertise = self._readvertise, []
        for node in back:
            if not up[node] or done[group_of[node]]:
                continue
            for other in self._neighbors[node]:
                if up[other]:
                    self.handshake.advertise(other, [node], self.have[other])
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
            self._survivors &= ~(1 << node)
            members = self._groups[q].tolist()
            if self.target[node]:
                self.target[node] = False
                if self._need[node] > 0:
                    self._open[q] -= 1
                if self._sinks is not None:  # SAC: the group's sink is gone, its records cannot leave
                    self._close(q, complete=False)
            if not self._done[q]:
                for i in members:
                    if self.target[i] and not (self.have[i] >> node) & 1:
                        self._need[i] -= 1
                        self._open[q] -= self._need[i] == 0
                if self._open[q] == 0:
                    self._close(q, complete=any(self.target[i] for i in members))
        elif self.survivor[node]:
            self.survivor[node] = False
            self._survivors &= ~(1 << node)
        self._check_saturation()

    def restarted(self, node: int, state: str) -> None:
        """Agent ``node`` is back (not a participant of this round); ``lost``: it holds nothing any more."""
        if not self.active:
            return
        if state == "lost":
            self.have[node] = 0
            self.forged[node] = {}
            self._forged_bits[node] = 0
            self._new.pop(node, None)
            self.handshake.lost(node)
        self._readvertise.append(node)

    # ------------------------------------------------------------------ handshake callbacks
    def _missing(self, node: int, keys: int) -> int:
        if self._done[self._group_of[node]]:
            return 0
        return keys & ~self.have[node]

    def _fetch(self, node: int, keys: int) -> tuple[int, Any]:
        served = keys & self.have[node]
        if not served & self._forged_bits[node]:
            return served, None  # the values are the shared table's rows
        return served, self.view(node, ids(served))

    def _on_data(self, node: int, src: int, keys: int, payload: Any) -> None:
        q = self._group_of[node]
        if not self.active or self._done[q]:
            return
        have = self.have[node]
        got = keys & ~have
        if not got:
            return
        self.have[node] = have | got
        self._new[node] = self._new.get(node, 0) | got
        if payload is not None:
            self._keep(node, keys, got, payload)
        if self.target[node] and self._need[node] > 0:
            self._need[node] -= (got & self._survivors).bit_count()
            if self._need[node] == 0:
                self._open[q] -= 1
                if self._open[q] == 0:
                    self._close(q, complete=True)

    def _keep(self, node: int, keys: int, got: int, payload: tuple[np.ndarray, np.ndarray]) -> None:
        """Values carried by a DATA: the new records whose values differ from the table become forged copies."""
        means, counts = payload
        forged = self.forged[node]
        for row, key in enumerate(ids(keys).tolist()):
            if not (got >> key) & 1:
                continue
            if counts[row] != self.counts[key] or not np.array_equal(means[row], self.table[key]):
                forged[key] = (np.array(means[row], dtype=float), counts[row])
                self._forged_bits[node] |= 1 << key

    def rewrite_data(self, payload: tuple, lie: Lie) -> tuple:
        """The corruption rule of DATA (``netsim.comm.corruption.rewriting``): the lie applies to the private
        means of the records the message carries, as its sender holds them (its forged copies
        included); a byzantine sender lies about its own record only unless ``[adversary] relay``
        (``lie.relay``; a corrupting link may touch every record). Sample counts are not touched: the
        schedule S(r) makes them known to every agent in the paper."""
        tag, keys, answers, values = payload
        keys_ids = ids(keys)
        means, counts = values if values is not None else self.view(lie.sender, keys_ids)
        if lie.relay:
            lied = lie(means)
        else:
            own = keys_ids == lie.sender
            if not own.any():
                return payload
            lied = np.array(means, dtype=float)
            lied[own] = lie(means[own])
        return tag, keys, answers, (np.asarray(lied, dtype=float), counts)

    # ------------------------------------------------------------------ completion
    def _close(self, q: int, *, complete: bool) -> None:
        """Group q's communication ends: its members stop advertising and repeating."""
        if self._done[q]:
            return
        self._done[q] = True
        self.handshake.forget(self._groups[q].tolist())
        if complete and self.on_group is not None:
            self.on_group(q)
        if all(self._done):
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
        from scipy.sparse import csr_matrix  # imported on first use (start-up time)
        from scipy.sparse.csgraph import connected_components

        if self._adjacency is None:
            rows = [i for i in range(m) for _ in self._neighbors[i]]
            cols = [j for i in range(m) for j in self._neighbors[i]]
            self._adjacency = csr_matrix((np.ones(len(rows), dtype=np.int8), (rows, cols)), shape=(m, m))
        _, labels = connected_components(self._adjacency[up][:, up], directed=False)
        available: dict[int, int] = {}  # records held per up-component
        component = {}
        for node, label in zip(up.tolist(), labels.tolist()):
            available[label] = available.get(label, 0) | self.have[node]
            component[node] = label
        for q in range(len(self._groups)):
            if self._done[q]:
                continue
            targets = [i for i in self._groups[q].tolist() if self.target[i]]
            if not targets:
                continue
            if not any(i in component and available[component[i]] & ~self.have[i] for i in targets):
                self._close(q, complete=True)
