"""Paper-mode Gossip_UCB / Fed_UCB for B trials in lockstep (issue 25: Fig. 2 at paper scale).

A paper-mode tick of zhu2021 is some fifty numpy calls on arrays of 3 to 100 numbers, so its cost is
the calls, not the arithmetic. :class:`Lockstep` steps B trials of one scenario (the runner groups
them, :meth:`GossipUCB.lockstep_key`) along a leading array axis: the state is B x N x M, each call
of a tick serves the B trials, and every trial gets exactly the results it gets alone:

* the same floats: every operation of :meth:`GossipUCB._step` is elementwise or reduces along the
  arm or level axis, and is done here by the very same functions (:func:`confidence_bound`,
  :func:`select_arms`, :func:`gossip_update`, :meth:`BinaryTreeCounter.release`) on the stacked
  arrays, in the same order;
* the same draws: each trial keeps its own streams, read in blocks whose values are those of the
  one-call-per-tick reads: its links 1024 at a time as :func:`netsim.comm.uniform_edge_clock` draws
  them, its rewards as ``bandit.each_rewards`` (the uniforms of its agents' next pulls) and its
  forced-pull uniforms and Laplace noise through :class:`netsim.comm.GroupedDraws`;
* the same books: each trial's bandit settles its agents' pulls (``settle_each``, regret added pull
  by pull), its links are booked with ``sim.agent_links_built`` and its protocol counters are
  written back before every checkpoint, so checkpoints, ``trials.csv`` and ``agents.csv`` are those
  of the trial run alone (``tests/test_zhu2021_lockstep.py`` compares them float for float).

Tick 0 (Alg. 1 / Alg. 4 line 1) is each trial's own :meth:`GossipUCB._initialise`. Paper mode has no
messages, faults or adversary, and the lockstep key asks for the unit tick (``clock.period = 1``), so
ticks fall at the integer times 1 .. T and each is its own slot.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from netsim.comm import GroupedDraws, ProtocolError
from protocols.privacy.tree import BinaryTreeCounter
from protocols.zhu2021.gossip import gossip_update
from protocols.zhu2021.rules import (
    confidence_bound,
    consistency_set,
    neighbour_max,
    propagate_max_counts,
    select_arms,
    update_means,
)

EDGE_DRAWS = 1024  # links drawn at a time per trial: the block of netsim.engine.activation.uniform_edge_clock


class Lockstep:
    """B paper-mode trials of Gossip_UCB / Fed_UCB stepped together; :meth:`advance` is the engine's hook."""

    def __init__(self, protocols: list[Any]):
        self.protocols = protocols
        for p in protocols:
            if getattr(p, "observer", None) is not None:
                raise ProtocolError("zhu2021 lockstep: a trial with an observer runs alone")
            p._setup()
        first = protocols[0]
        self.b, self.n, self.m = len(protocols), first.num_agents, first.num_arms
        self.ticks, self.epsilon, self.hood = first.ticks, first._epsilon, first.hood
        self.horizon = first.sim.horizon
        self.pairs = np.array(sorted(first.sim.network.agent_graph.edges()), dtype=np.int64).reshape(-1, 2)
        self.t = 0   # the next tick, at time t
        self._rows = np.arange(self.b * self.n)                 # flat (trial, agent) rows
        self._trial_of_row = self._rows // self.n
        self._edges = np.zeros((self.b, 0), dtype=np.int64)     # each trial's drawn links, this block
        self._forced = GroupedDraws([p.rng for p in protocols], lambda g, k: g.random(k))
        self._best = np.array([p.best_arm for p in protocols])
        self.counter = BinaryTreeCounter.lockstep([p.counter for p in protocols])
        shape = (self.b, self.n, self.m)
        self.n_, self.ntilde, self.xbar, self.theta, self.initial = (np.zeros(shape) for _ in range(5))
        self._bonus = np.empty(shape)
        self.forced_pulls = np.zeros(self.b, dtype=np.int64)
        self.late_best = np.zeros(self.b, dtype=np.int64)
        self.late_pulls = 0
        self.steps = 0   # ticks >= 1 stepped

    # ------------------------------------------------------------------ the engine's hook
    def advance(self, when: float) -> None:
        """Every trial's ticks at times before ``when`` (and before the horizon); books written back."""
        if self.t == 0 and when > 0:
            for p in self.protocols:    # tick 0: line 1, each trial on its own
                p._initialise()
                p.t = 1
            for name in ("n", "ntilde", "xbar", "theta", "initial"):
                setattr(self, "n_" if name == "n" else name, np.stack([getattr(p, name) for p in self.protocols]))
            self.t = 1
        last = min(self.ticks, int(np.ceil(min(when, self.horizon))) - 1)   # the last tick before `when`
        while self.t <= last:
            if (self.t - 1) % EDGE_DRAWS == 0:
                self._edges = np.stack([p._gossip_rng.integers(len(self.pairs), size=EDGE_DRAWS)
                                        for p in self.protocols])
            stop = min(last + 1, self.t - (self.t - 1) % EDGE_DRAWS + EDGE_DRAWS)
            self._chunk(self.t, stop)
            self.t = stop
        self._write_back()

    def _chunk(self, start: int, stop: int) -> None:
        """Ticks start .. stop - 1 (within one block of links)."""
        steps = stop - start
        rewards = np.stack([p.sim.bandit.each_rewards(steps) for p in self.protocols], axis=1)  # steps x B x N x M
        chosen = np.empty((steps, self.b, self.n), dtype=np.int64)
        offset = (start - 1) % EDGE_DRAWS
        links = self.pairs[self._edges[:, offset:offset + steps]]                              # B x steps x 2
        base = (np.arange(self.b) * self.n)[:, None]
        ends_u, ends_v = (links[:, :, 0] + base).T, (links[:, :, 1] + base).T                 # steps x B rows
        for s in range(steps):
            chosen[s] = self._step(start + s, rewards[s], (ends_u[s], ends_v[s]))
        for b, p in enumerate(self.protocols):
            p.sim.bandit.settle_each(chosen[:, b])
            p.sim.agent_links_built(steps)
        self.steps += steps

    def _step(self, t: int, rewards: np.ndarray, edge: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        """:meth:`GossipUCB._step` at tick t for the B trials (paper mode, every agent active)."""
        n, big_n, m = self.n_, self.n, self.m
        lagging = consistency_set(n, self.ntilde, big_n)                                    # line 6
        heard = neighbour_max(self.ntilde, self.hood)
        self.ntilde = propagate_max_counts(n, self.ntilde, heard)                          # line 5
        bonus = confidence_bound(n, t, big_n, horizon=self.ticks, epsilon=self.epsilon, out=self._bonus)
        if np.count_nonzero(lagging):
            forced = lagging.any(axis=-1)
            arms = select_arms(self.theta, bonus, lagging, self._uniforms, forced=forced)  # lines 7-13
            self.forced_pulls += np.count_nonzero(forced, axis=1)
        else:
            arms = select_arms(self.theta, bonus, None, None)
        pulled = self._rows * m + arms.reshape(-1)                                          # flat (trial, agent, arm)
        got = rewards.reshape(-1)[pulled]                                                   # line 14
        change = update_means(n, self.initial, self.xbar, self.counter, pulled, t, got)     # lines 15-16
        if t > self.ticks // 2:
            self.late_pulls += big_n
            self.late_best += np.count_nonzero(arms == self._best[:, None], axis=1)
        gossip_update(self.theta, pulled, change, edge)                                    # lines 17-22
        return arms

    def _uniforms(self, rows: np.ndarray) -> np.ndarray:
        """M uniforms of each forced agent's trial stream ``protocol``, agents in row order."""
        return self._forced.take(np.repeat(self._trial_of_row[rows], self.m)).reshape(-1, self.m)

    def _write_back(self) -> None:
        """Each trial's protocol counters and state as its own run would have them now."""
        reads = 2 * len(self.pairs)
        self.counter.split([p.counter for p in self.protocols])
        for b, p in enumerate(self.protocols):
            p.t = self.t
            p.forced_pulls = int(self.forced_pulls[b])
            p.gossip_exchanges = self.steps
            p.ntilde_reads = reads * self.steps
            p.late_best, p.late_pulls = int(self.late_best[b]), self.late_pulls
            if self.steps:
                p.n, p.ntilde, p.xbar, p.theta = self.n_[b], self.ntilde[b], self.xbar[b], self.theta[b]
