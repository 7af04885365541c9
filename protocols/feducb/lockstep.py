"""Paper-mode trials of centralized FedUCB stepped on one stacked learner state (issue 25: Fig. 1 at paper scale).

The variants of a FedUCB study that differ in a protocol key (the privacy budgets of Fig. 1(A), the
schedules of Fig. 1(B)) observe the same contexts, and a tick of each is a few dozen NumPy calls on
arrays of M x d x K numbers. :class:`Lockstep` computes the tick of such trials together: their OFUL
states are stacked along the learner axis (:meth:`LinUCBState.stack`; each trial's state becomes a view
of its rows, so its own event handlers, the synchronisation round included, read and write the stack),
and one call of each step of Alg. 1 lines 5-12 (beta, the UCB choice, the rank-one updates, the
trigger) serves them all. Every trial gets exactly the results it gets alone:

* the same floats: beta, the update and the trigger are elementwise per learner (per-trial constants
  repeated over its rows); the UCB's matrix products are broadcast over the trials, each matrix product
  being the one of that learner alone (``tests/test_feducb_lockstep.py`` compares them bit for bit);
* the same draws: each trial still observes its contexts (the draw is made once, :class:`SharedDraws`)
  and reads its rewards' uniforms from its own streams, in the same order;
* the same books and events: the tick is computed when the engine reaches its instant
  (``advance(t)``, before any event at t), but each trial's own tick event at t books the pulls
  (``bandit.book_each``; a checkpoint at t comes before the tick and must not see them) and sends the
  round requests, whose round then runs through the trial's event queue as alone.

Only paper mode takes this path (:func:`instant`): the unit clock without jitter and every message
arriving when it is sent (constant zero delays, no loss, no faults, no adversary), so that nothing can
reach an agent between the engine's arrival at t and its tick at t. Other trials of a group run on
their own events (:meth:`CentralizedFedUCB.lockstep`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from netsim.comm import ProtocolError
from protocols.feducb.linucb import LinUCBState, sync_trigger


def instant(sim: Any) -> bool:
    """Paper mode: ticks at the integer times, one clock, and every message delivered when sent."""
    return (sim.clock_period == 1.0 and sim.clock_jitter == 0.0 and not sim.faults.active
            and sim.network.adversary is None and sim.network.instant)


class Lockstep:
    """Paper-mode FedUCB trials whose ticks are computed on stacked states; :meth:`advance` is the engine's hook."""

    def __init__(self, protocols: list[Any], shared: Any):
        self.protocols, self.shared = protocols, shared
        self.stacks: list[_Stack] | None = None  # formed at the first tick, from who drew alike

    def advance(self, when: float) -> None:
        """The ticks at ``when`` (an integer before the trials' horizons): each trial's tick computed, not booked."""
        self.shared.forget()  # the draws of earlier instants are not asked for again
        if when != int(when):
            return
        live = [p for p in self.protocols if when < p.sim.horizon]
        if not live:
            return
        drawn: dict[int, np.ndarray] = {}
        if self.stacks is None:  # formed from the first tick's contexts
            drawn = {id(p): p.sim.bandit.observe(p.everyone) for p in live}
            self.stacks = _stacks(live, [drawn[id(p)] for p in live])
        for stack in self.stacks:  # later, a stack's contexts are drawn right before its tick (still in the cache)
            if when < stack.protocols[0].sim.horizon:
                stack.tick(when, [drawn[id(p)] if drawn else p.sim.bandit.observe(p.everyone)
                                  for p in stack.protocols])


def _stacks(protocols: list[Any], contexts: list[np.ndarray]) -> list[_Stack]:
    """Trials that drew the very same contexts (one SharedDraws draw) and have the same horizon and matrix
    layout, stacked; they keep drawing alike (same generator state, same arguments)."""
    keyed: dict[tuple, list[Any]] = {}
    for p, x in zip(protocols, contexts, strict=True):
        keyed.setdefault((id(x), p.sim.horizon, p.state.shift_w), []).append(p)
    return [_Stack(members) for members in keyed.values()]


class _Stack:
    """B trials of M agents on one (B M)-learner state."""

    def __init__(self, protocols: list[Any]):
        self.protocols = protocols
        self.m = m = protocols[0].sim.num_agents
        self.state = LinUCBState.stack([p.state for p in protocols])
        self.pending = np.concatenate([p.pending for p in protocols])
        for b, p in enumerate(protocols):
            p.pending = self.pending[b * m:(b + 1) * m]
        self.rows = np.tile(np.arange(m), len(protocols))
        # Prop. 2's beta per learner: the terms of FedUCBCalibration.beta and beta_scale of its trial
        terms = [(p.cal.sigma, *p.cal.beta_terms, p.params["beta_scale"]) for p in protocols]
        self.sigma, self.confidence, self.regulariser, self.bias, self.noise, self.scale = (
            np.repeat(np.array(column, dtype=float), m) for column in zip(*terms, strict=True))
        self.D = np.repeat(np.array([p.D for p in protocols], dtype=float), m)

    def tick(self, t: float, contexts: list[np.ndarray]) -> None:
        """Alg. 1 lines 5-12 of every trial of the stack at tick t; each trial's tick event books it."""
        x = contexts[0]
        if any(other is not x for other in contexts):
            raise ProtocolError("feducb lockstep: trials stacked as drawing alike drew different contexts")
        state, m = self.state, self.m
        radicand = self.confidence + state.logdet_v - self.regulariser
        beta = self.scale * (self.sigma * np.sqrt(np.maximum(radicand, 0.0)) + self.bias + self.noise)
        arms = state.choose(x, beta)
        chosen = x[self.rows, arms]
        rewards = np.concatenate([p.sim.bandit.pull_each(arms[b * m:(b + 1) * m], book=False)
                                  for b, p in enumerate(self.protocols)])
        state.update(chosen, rewards)
        state.dt += 1
        fire = sync_trigger(state.logdet_w, state.logdet_s, state.dt, self.D) & ~self.pending
        for b, p in enumerate(self.protocols):
            p.ahead = (t, arms[b * m:(b + 1) * m], np.flatnonzero(fire[b * m:(b + 1) * m]).tolist())
