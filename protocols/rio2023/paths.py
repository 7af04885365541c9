"""Exact-law machinery of the rio2023 event simulation: who is active when, and what the
reward sums of an agent look like at the local steps where something can happen.

Activation clock (Assumptions 3.2-3.3)
--------------------------------------
In the paper one agent is active per round, drawn i.i.d. from ``P_N(t)``: ``P_N`` restricted
to the agents still in ``N(t)`` and renormalised. Per-agent counts after t rounds are
Multinomial(t, p) (footnote 1, Eq. 21): a multinomial thinning of the rounds. We embed the
rounds in continuous time ("Poissonisation", DasGupta 2011, Thm. A.2, used by the paper for
Prop. 5.3): agent n is activated at the points of an independent Poisson process of rate
``p_n = P_N(n)`` (sum 1 over all agents). Superposing the processes of the agents in ``N(t)``,
every point is agent n's with probability ``p_n / sum_{m in N(t)} p_m`` independently of the
past: exactly ``P_N(t)``. Agents that leave ``N(t)`` simply stop producing points, so nobody's
law changes when somebody leaves. The sequence of active agents, hence every round-indexed
quantity of the algorithms, has exactly the paper's law; the round count at continuous time
``tau`` is the number of points of active agents in ``[0, tau]``.

Consequences used by the simulator (all exact):

* From an agent's activation at time ``s``, its c-th next activation is at ``s + Gamma(c, 1/p_n)``
  (memorylessness), independently of the other agents. An epoch end (DP-MASE) or the next local
  step where an elimination can happen (successive elimination) is one such event.
* Given that agent n's next scheduled activation is the c-th after ``s`` at ``E``, its c - 1
  intermediate activations are i.i.d. uniform on ``(s, E)`` (order statistics of a Poisson
  process). So the number of them before ``tau`` is Binomial(h, (tau - a) / (E - a)) given h of
  them are still unrevealed in ``(a, E)``, and the first one after ``tau`` is at
  ``tau + (E - tau) Beta(1, h)``. This "bridge" gives the exact round count when the run stops
  and the exact activation at which an agent learns of a global elimination. Once an agent's
  process is revealed up to such an activation ``s``, everything decided so far is a function
  of its process on ``[0, s]``; the rest of the old schedule is discarded and the future after
  ``s`` is a fresh Poisson process (independent increments), so rescheduling from ``s`` is exact.

Engine time is therefore Poissonised round time: the rate of rounds per unit of engine time is
``sum_{n in N(t)} p_n`` (1 while every agent is active). Message delays are in these units.
``sample_complexity`` is the exact number of rounds, not the engine time.

Reward paths of successive elimination
--------------------------------------
An agent running successive elimination (CE appendix Alg. 4) samples every arm of its active
set once per activation and tests the elimination condition at *every* local step, so its
decisions depend on the whole walk ``S_k(1), S_k(2), ...`` of each arm's sum. :class:`RewardPaths`
draws an agent's per-step rewards ahead, in blocks (the first 128 local steps of every agent at
the start, then blocks sized to reach the predicted next crossing), with one
``bandit.pull_walk(agent, arms, steps)`` call per block: the agent's own reward stream consumed in
step order (the rewards ``pull_many`` would give pull by pull), returned as each arm's running
sums, one row per arm. The first local step where the condition holds is found with one
vectorised test over the rows of the active arms. Revealed steps are kept ("banked") as the
agent's future: when the agent later has to stop at an earlier step (a global elimination reaches
it), its sums there are read from the bank, and the banked steps already tested stay tested (the
active set only shrinks, and max - min over fewer arms is no larger, so they still hold no
crossing). Banked steps are fully revealed, so no decision ever conditions the unrevealed part of
a walk, and the block sizes change only which uniforms feed which step, not the law. Only the
timing of the agent's activations, not the rounds of the other agents, is jumped over, so the
Python cost of a run is proportional to the number of events (eliminations, synchronisations)
and blocks, and the numpy cost to the local steps x arms drawn. Rewards drawn ahead of a local
step the agent never reaches (the run stops first, or the arm leaves the active set) are still
recorded by the bandit's pull and regret books.

DP-MASE needs none of this: the rewards of an epoch only enter through their sums, drawn
exactly as ``pull_many(agents, arms, R(e))`` (Binomial) at the epoch end.
"""

from __future__ import annotations

import numpy as np

from protocols.rio2023.rules import se_bound, se_bound_at


class ActivationClock:
    """Poissonised activation schedule of N agents (see module docstring).

    Per agent: ``last_step`` (local activations processed), ``event_time`` / ``event_step`` of
    the next scheduled activation, and the bridge state ``reveal_time``, ``revealed`` (activations
    in (last event, reveal_time]) and ``hidden`` (activations in (reveal_time, event_time)).
    """

    def __init__(self, rates: np.ndarray, rng: np.random.Generator):
        n = len(rates)
        self.rates = np.asarray(rates, dtype=float)
        self.rng = rng
        self.last_step = np.zeros(n, dtype=np.int64)
        self.event_step = np.zeros(n, dtype=np.int64)
        self.event_time = np.full(n, np.inf)
        self.reveal_time = np.zeros(n)
        self.revealed = np.zeros(n, dtype=np.int64)
        self.hidden = np.zeros(n, dtype=np.int64)
        self.version = np.zeros(n, dtype=np.int64)

    def schedule(self, agent: int, now: float, steps: int) -> float:
        """Agent was active at ``now`` (its ``last_step``-th activation); its ``steps``-th next
        activation is the next event. Returns the event time."""
        when = now + self.rng.gamma(steps, 1.0 / self.rates[agent])
        self.event_step[agent] = self.last_step[agent] + steps
        self.event_time[agent] = when
        self.reveal_time[agent] = now
        self.revealed[agent] = 0
        self.hidden[agent] = steps - 1
        self.version[agent] += 1
        return when

    def reveal(self, agents: np.ndarray, now: float) -> None:
        """Reveal how many hidden activations of ``agents`` happened in (reveal_time, now]."""
        if len(agents) == 0:
            return
        span = self.event_time[agents] - self.reveal_time[agents]
        frac = np.clip((now - self.reveal_time[agents]) / span, 0.0, 1.0)
        got = self.rng.binomial(self.hidden[agents], frac)
        self.revealed[agents] += got
        self.hidden[agents] -= got
        self.reveal_time[agents] = now

    def interrupt(self, agents: np.ndarray, now: float) -> np.ndarray:
        """Move each agent's next event to its first activation after ``now`` (Beta(1, h) bridge).
        Returns the agents whose event moved (the others' next activation is the event itself)."""
        self.reveal(agents, now)
        moved = agents[self.hidden[agents] > 0]
        if len(moved) == 0:
            return moved
        h = self.hidden[moved]
        when = now + (self.event_time[moved] - now) * self.rng.beta(1.0, h)
        self.event_step[moved] = self.last_step[moved] + self.revealed[moved] + 1
        self.event_time[moved] = when
        self.reveal_time[moved] = now
        self.revealed[moved] = 0
        self.hidden[moved] = 0
        self.version[moved] += 1
        return moved

    def rounds(self, in_play: np.ndarray, now: float) -> int:
        """Exact number of rounds (activations of anybody) in [0, now].

        An agent in play has made ``last_step`` activations up to its last event, then ``revealed``
        more since; after :meth:`interrupt` those are folded into ``event_step`` instead (its next
        event is its first activation after the interruption), so it has made ``event_step - 1``
        (issue 19, bug 1: counting only ``last_step + revealed`` dropped them when the run ended
        before that next event). Both are ``event_step - 1 - hidden`` once revealed up to ``now``,
        except for an agent whose event is being processed (``last_step = event_step``).
        """
        agents = np.flatnonzero(in_play)
        self.reveal(agents, now)
        made = self.last_step.copy()
        made[agents] = np.maximum(self.last_step[agents] + self.revealed[agents],
                                  self.event_step[agents] - 1 - self.hidden[agents])
        return int(made.sum())


class RewardPaths:
    """Per-agent reward-sum walks of successive elimination, revealed in blocks (module docstring).

    ``t[n]`` is agent n's current local step and ``sums[n]`` its arm sums there (NaN for arms
    that left its active set). The steps drawn ahead, ``t[n] + 1 .. end[n]``, are banked in
    ``bank[n]``, a list of blocks ``(first, arms, walk)``: ``walk[j, s]`` is the sum of arm
    ``arms[j]`` (the arms sampled when the block was drawn) at local step ``first + s``, one row per
    arm, so a test over the few arms still active reads whole rows. Steps
    ``t[n] + 1 .. t[n] + checked[n]`` are known not to meet the elimination condition for any
    subset of the arms ``tested[n]``.
    """

    def __init__(self, bandit, num_agents: int, num_arms: int, failure: float, *, block: int = 128,
                 max_block: int = 4096, max_draws: int = 4096, reward_stream=None):
        self.bandit = bandit
        self.num_arms = num_arms
        self.failure = failure
        self.block = block
        self.max_block = max_block
        self.max_draws = max_draws
        self.t = np.zeros(num_agents, dtype=np.int64)
        self.end = np.zeros(num_agents, dtype=np.int64)
        self.sums = np.zeros((num_agents, num_arms))
        self.bank: list[list[tuple[int, np.ndarray, np.ndarray]]] = [[] for _ in range(num_agents)]
        self.checked = np.zeros(num_agents, dtype=np.int64)
        self.tested = np.ones((num_agents, num_arms), dtype=bool)
        self._stream = reward_stream or (lambda n: n)
        self._bound = np.zeros(0)

    def _last(self, agent: int, arms: np.ndarray) -> np.ndarray:
        """The sums of ``arms`` (a subset of the arms last drawn) at the last banked step."""
        if not self.bank[agent]:
            return self.sums[agent, arms]
        _, drawn, walk = self.bank[agent][-1]
        return walk[np.searchsorted(drawn, arms), -1]

    def _block_size(self, agent: int, active: np.ndarray) -> int:
        """How many steps to draw next: enough to reach the step where the widest current gap
        would cross the threshold if the empirical gap per step held (x 1.25, + 64), clipped to
        [block, max_block]. Any size gives the same law; this only trades calls for overdraw."""
        t = int(self.end[agent])
        arms = np.flatnonzero(active)
        if t == 0 or len(arms) < 2:
            return min(self.block, max(self.max_draws // max(len(arms), 1), 1))
        last = self._last(agent, arms)
        drift = float(np.maximum.reduce(last) - np.minimum.reduce(last)) / t
        if drift <= 0:
            return self.max_block
        target = float(t)
        for _ in range(4):                                   # fixed point of drift * t = B(t)
            target = se_bound_at(target, self.num_arms, self.failure) / drift
        want = int(1.25 * target) - t + 64
        # at most max_draws uniforms per call: bounds what an interruption or the end of the run leaves unused
        cap = max(self.max_draws // len(arms), 1)
        return int(min(max(want, self.block), self.max_block, cap))

    def _bounds(self, first: int, stop: int) -> np.ndarray:
        """The elimination threshold on sums (:func:`se_bound`) at local steps ``first .. stop - 1``,
        read from a table of steps 1, 2, ... grown by doubling."""
        if stop - 1 > len(self._bound):
            size = max(stop - 1, 2 * len(self._bound))
            self._bound = se_bound(np.arange(1, size + 1), self.num_arms, self.failure)
        return self._bound[first - 1:stop - 1]

    def _draw(self, agent: int, arms: np.ndarray, size: int, start: np.ndarray) -> None:
        """Bank ``size`` more steps of ``arms``, whose sums at the last banked step are ``start``."""
        walk = self.bandit.pull_walk(self._stream(agent), arms, size)
        walk += start[:, None]
        self.bank[agent].append((int(self.end[agent]) + 1, arms, walk))
        self.end[agent] += size

    def _extend(self, agent: int, active: np.ndarray) -> None:
        arms = np.flatnonzero(active)
        self._draw(agent, arms, self._block_size(agent, active), self._last(agent, arms))

    def prefill(self, agents: np.ndarray, size: int) -> None:
        """Draw the first ``size`` local steps of every arm for every agent in ``agents`` (distinct, empty
        banks, sums 0), in one ``pull_walks`` call."""
        arms = np.arange(self.num_arms)
        walks = self.bandit.pull_walks(np.array([self._stream(int(a)) for a in agents], dtype=np.int64), arms, size)
        for a, walk in zip(agents.tolist(), walks):
            self.bank[a].append((1, arms, walk))
            self.end[a] = size

    def next_crossing(self, agent: int, active: np.ndarray) -> int:
        """First local step > t[agent] where an arm of ``active`` meets the elimination
        condition of CE appendix Alg. 4 (``active`` held fixed until then)."""
        if np.logical_or.reduce(active > self.tested[agent]):
            self.checked[agent] = 0            # an arm the checked steps were not tested with
        self.tested[agent] = active
        t = int(self.t[agent])
        while True:
            step = t + 1 + int(self.checked[agent])                     # first step not checked
            for first, arms, walk in self.bank[agent]:
                stop = first + walk.shape[1]
                if stop <= step:
                    continue
                keep = active[arms]
                rows = walk[:, step - first:] if np.logical_and.reduce(keep) else walk[keep, step - first:]
                # some arm k has max_l S_l - S_k >= B(t)  <=>  max - min >= B(t)  (CE Alg. 4 line 5)
                hit = np.maximum.reduce(rows) - np.minimum.reduce(rows) >= self._bounds(step, stop)
                first_hit = int(hit.argmax())                              # the first True, if any
                if hit[first_hit]:
                    self.checked[agent] = step + first_hit - t - 1
                    return step + first_hit
                step = stop
            self.checked[agent] = step - t - 1
            self._extend(agent, active)

    def move_to(self, agent: int, step: int, active: np.ndarray) -> np.ndarray:
        """Advance agent to local ``step`` (drawing rewards if needed); returns its sums there.

        Steps checked before stay checked: the active set only shrinks, and a step where no arm of a
        set meets the condition has none in a subset (max - min over fewer arms is no larger)."""
        ahead = step - int(self.t[agent])
        if ahead > 0:
            while self.end[agent] < step:
                self._extend(agent, active)
            bank = self.bank[agent]
            while bank[0][0] + bank[0][2].shape[1] <= step:             # blocks that end before step
                bank.pop(0)
            first, arms, walk = bank[0]
            row = np.full(self.num_arms, np.nan)
            row[arms] = walk[:, step - first]
            row[~active] = np.nan
            if first + walk.shape[1] == step + 1:
                bank.pop(0)
            self.sums[agent] = row
            self.t[agent] = step
            self.checked[agent] = max(int(self.checked[agent]) - ahead, 0)
        return self.sums[agent]
