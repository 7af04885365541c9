"""Runs of pulls on the slot grid, drawn as sums, that crashed agents sit out (li2022 Alg. 1 line 7, line 17).

The li2022 algorithms pull the same arm for many consecutive slots (each active arm S(r) - S(r-1)
times in a row during exploration, the final arm until T). :class:`SlotRuns` draws such a run of
n slots as one sum per agent with ``bandit.pull_many(agents, arms, n)`` instead of n single pulls.

Crash-aware settlement. A run of n slots starting at t0 covers the slot starts t0, t0 + slot,
..., t0 + (n - 1) slot; an agent pulls at a slot start if it is up then (a crash or restart at
an instant happens before the pulls of that instant, ``docs/faults.md``). The run is *settled*
(drawn) at its last slot start for every agent that is up, from the slot where it joined the
run; an agent that crashes during the run is settled at its crash for the slots before it; an
agent that restarts during the run joins at the next slot start. So a crashed agent's pull count
never grows while it is down, and without crashes every agent is drawn once per run, exactly as
n pulls made slot by slot (the reward streams are consumed in the same order). Runs never
straddle a checkpoint (the caller splits them), so the regret time series is exact.

A run covers every agent, or the agents of a cohort (``agents``: the agents that share an active
set, see :mod:`protocols.li2022.elimination`); the runs of one agent never overlap, and runs are
given in time order by :meth:`play`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

EPS = 1e-9  # slack when converting times to slot indices (slot boundaries are sums of floats)


class SlotRuns:
    """Schedules and settles runs of pulls (see the module docstring).

    Parameters
    ----------
    sim:
        The simulation (``call_at``, ``bandit``, ``horizon``).
    slot:
        Slot length (``[clock] period``).
    checkpoints:
        Times at which the regret series is recorded: runs are split there.
    up:
        Boolean array over nodes (``sim.faults.up``), read when a run opens and settles.
    """

    def __init__(self, sim, slot: float, checkpoints: Sequence[float], up: np.ndarray):
        self.sim = sim
        self.slot = slot
        self.checkpoints = list(checkpoints)
        self.num_agents = sim.num_agents
        self.agents = np.arange(self.num_agents)
        self.up = up[: self.num_agents]
        self._open: list[_Run] = []

    def play(self, start: float, n: int, arms: np.ndarray, sums: np.ndarray | None = None,
             pulled: np.ndarray | None = None, agents: np.ndarray | None = None) -> None:
        """Agent i pulls ``arms[i]`` in the n slots from ``start`` (cut at the horizon, split at checkpoints).

        Rewards are added to ``sums[i, arms[i]]`` and pull counts to ``pulled[i, arms[i]]`` when given.
        ``agents``: only these agents take part (default: every agent).
        """
        n = min(n, max(0, math.ceil((self.sim.horizon - start) / self.slot - EPS)))
        t, left = start, n
        for c in self.checkpoints:
            if left <= 0:
                break
            if c <= t:
                continue
            before = math.ceil((c - t) / self.slot - EPS)
            if before >= left:
                break
            if before > 0:
                self._schedule(t, before, arms, sums, pulled, agents)
                t, left = t + before * self.slot, left - before
        if left > 0:
            self._schedule(t, left, arms, sums, pulled, agents)

    def _schedule(self, start: float, n: int, arms: np.ndarray, sums, pulled, agents) -> None:
        member = None
        if agents is not None:
            member = np.zeros(self.num_agents, dtype=bool)
            member[agents] = True
        run = _Run(start, n, arms, sums, pulled, member)
        self.sim.call_at(start, lambda: self._begin(run))
        self.sim.call_at(start + (n - 1) * self.slot, lambda: self._settle(run))

    def _begin(self, run: _Run) -> None:
        self._open.append(run)
        up = self.up if run.member is None else self.up & run.member
        run.first = np.where(up, 0, -1)  # first slot each agent pulls in (-1: not in the run)

    def _settle(self, run: _Run) -> None:
        first = run.first
        if not first.any():  # every agent pulled every slot: one draw of n per agent
            self._draw(self.agents, run.n, run)
        else:
            agents = np.flatnonzero(first >= 0)
            self._draw(agents, run.n - first[agents], run)
        self._open.remove(run)

    def crashed(self, agent: int) -> None:
        """``agent`` crashed now: draw its slots of its open run before now; it pulls no more."""
        for run in self._open:
            if run.first[agent] < 0:
                continue
            done = min(run.n, math.ceil((self.sim.now - run.start) / self.slot - EPS))
            if done > run.first[agent]:
                self._draw(np.array([agent]), done - run.first[agent], run)
            run.first[agent] = -1

    def restarted(self, agent: int) -> None:
        """``agent`` is up again now: it pulls the remaining slots of its open run from the next slot start."""
        for run in self._open:
            if run.member is not None and not run.member[agent]:
                continue
            k = math.ceil((self.sim.now - run.start) / self.slot - EPS)
            run.first[agent] = k if k < run.n else -1

    def _draw(self, agents: np.ndarray, n: int | np.ndarray, run: _Run) -> None:
        if len(agents) == 0:
            return
        arms = run.arms[agents]
        rewards = self.sim.bandit.pull_many(agents, arms, n)
        if run.sums is not None:
            run.sums[agents, arms] += rewards
        if run.pulled is not None:
            run.pulled[agents, arms] += n


class _Run:
    __slots__ = ("start", "n", "arms", "sums", "pulled", "member", "first")

    def __init__(self, start: float, n: int, arms: np.ndarray, sums, pulled, member: np.ndarray | None):
        self.start, self.n, self.arms, self.sums, self.pulled, self.member = start, n, arms, sums, pulled, member
        self.first = np.zeros(0, dtype=np.int64)

