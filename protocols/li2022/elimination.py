"""The epoch loop shared by CDP-MAB, DDP-MAB and HDP-MAB (li2022 Alg. 1 lines 3-16, Alg. 3, Alg. 5):
exploration, privatisation, a communication round, elimination. The family overview and its
decisions are in :mod:`protocols.li2022`.
"""

from __future__ import annotations

import math

import numpy as np

from netsim import params as P
from netsim.errors import InputError, ProtocolError
from netsim.protocol import Protocol
from protocols.li2022.epochs import EpochPlan, EpochSchedule, PrivateMeans, eliminate
from protocols.privacy.mechanisms import LaplaceMechanism

# The k-th slot boundary of a communication round is taken at k * slot * (1 + TIE) after its start:
# an exchange lasting exactly one slot (three stages of slot/3, summed in floating point) then
# always completes inside its slot, whatever the rounding.
TIE = 1e-9


COMMON_FIELDS = {
    "epsilon": P.real(1.0, low=0.0, low_open=True, allow_inf=True,
                      doc="privacy level eps of the Laplace noise Lap(1/(N eps [S(r)-S(r-1)])) (Alg. 1 line 9)"),
    "rounds": P.integer(0, low=0, doc="round cap R (Delta_r = Delta^{r/R}, Sec. IV-B); 0 = no cap (Delta_r = 2^-r)"),
    "timeout": P.real(2.0, low=0.0, low_open=True,
                      doc="slots after which an unanswered message is repeated (lossy links only)"),
}


class Elimination(Protocol):
    """Shared epoch loop of the three algorithms; subclasses implement :meth:`communicate`."""

    requires_connected = True

    @classmethod
    def check(cls, scenario) -> None:
        if scenario.clock["jitter"] > 0:
            raise InputError("li2022 protocols run on synchronised slots; accepted: clock.jitter = 0",
                             key="clock.jitter")

    # ------------------------------------------------------------------ set-up
    def participants(self) -> int:
        return self.sim.num_agents

    def start(self) -> None:
        sim = self.sim
        self.slot = sim.clock_period
        self.num_agents = m = sim.num_agents
        self.num_arms = k = sim.bandit.num_arms
        cap = self.params["rounds"] or None
        gaps = sim.bandit.gaps
        positive = gaps[gaps > 0]
        self.schedule = EpochSchedule(arms=k, horizon=sim.horizon / self.slot, participants=self.participants(),
                                      epsilon=self.params["epsilon"], rounds_cap=cap,
                                      min_gap=float(positive.min()) if positive.size else 0.5)
        self.state = PrivateMeans(m, k)
        self.active = np.ones(k, dtype=bool)
        self.r = 1
        self.agents = np.arange(m)
        self.privacy_rngs = [sim.streams.for_("privacy", i) for i in range(m)]
        count = sim.scenario.run["checkpoints"]
        self._checkpoints = [sim.horizon * j / count for j in range(1, count + 1)]
        net = sim.scenario.network
        self.reliable = net["loss"] > 0 or any((link["loss"] or 0) > 0 for link in net["links"])
        self.timeout = self.params["timeout"] * self.slot
        self.t_delays: list[int] = []
        self.history: list[tuple[int, np.ndarray, np.ndarray]] = []  # (r, I^(r), aggregate) per round
        self.final_arm = -1
        self.last_aggregate = np.zeros(k)
        self.setup()
        sim.call_at(0.0, self._begin_epoch)

    def setup(self) -> None:
        """Subscribe message kinds (subclasses)."""

    # ------------------------------------------------------------------ pulls on the timeline
    def _play(self, start: float, n: int, arms: np.ndarray, sums: np.ndarray | None = None) -> None:
        """Agents pull ``arms[i]`` in the n slots from ``start``; drawn as sums, split at checkpoints."""
        horizon = self.sim.horizon
        n = min(n, max(0, math.ceil((horizon - start) / self.slot - 1e-9)))
        t, left = start, n
        for c in self._checkpoints:
            if left <= 0:
                break
            if c <= t:
                continue
            before = math.ceil((c - t) / self.slot - 1e-9)
            if before >= left:
                break
            if before > 0:
                self._schedule_pull(t, before, arms, sums)
                t, left = t + before * self.slot, left - before
        if left > 0:
            self._schedule_pull(t, left, arms, sums)

    def _schedule_pull(self, when: float, n: int, arms: np.ndarray, sums: np.ndarray | None) -> None:
        bandit, agents = self.sim.bandit, self.agents

        def pull() -> None:
            rewards = bandit.pull_many(agents, arms, n)
            if sums is not None:
                sums[agents, arms] += rewards

        self.sim.call_at(when, pull)

    def exploit_slot(self) -> None:
        """One slot of a communication round: every agent pulls its local empirical best active arm."""
        self.sim.bandit.pull_many(self.agents, self.state.local_best(self.active), 1)

    # ------------------------------------------------------------------ epochs
    def _begin_epoch(self) -> None:
        now = self.sim.now
        cap = self.schedule.rounds_cap
        if self.active.sum() == 1 or (cap is not None and self.r > cap):
            values = np.where(self.active, self.last_aggregate, -np.inf)
            self.final_arm = int(np.argmax(values))
            self._play(now, math.ceil((self.sim.horizon - now) / self.slot), np.full(self.num_agents, self.final_arm))
            return
        plan = self.schedule.plan(self.r, int(self.active.sum()), self.state.samples)
        sums = np.zeros((self.num_agents, self.num_arms))
        arms = np.flatnonzero(self.active)
        for j, arm in enumerate(arms):  # line 7: each active arm S(r) - S(r-1) times
            self._play(now + j * plan.pulls * self.slot, plan.pulls, np.full(self.num_agents, arm), sums)
        end = now + len(arms) * plan.pulls * self.slot
        if end < self.sim.horizon:
            self.sim.call_at(end, lambda: self._end_exploration(plan, sums))

    def _end_exploration(self, plan: EpochPlan, sums: np.ndarray) -> None:
        # line 9: a mean of `pulls` rewards in [0, 1] has sensitivity 1/pulls; (N eps)-DP Laplace noise
        # has scale 1 / (N eps [S(r) - S(r-1)]) (Theorem 1's proof). One privacy stream per agent.
        mechanism = LaplaceMechanism(epsilon=self.participants() * self.params["epsilon"], sensitivity=1.0 / plan.pulls)
        assert math.isclose(mechanism.scale, plan.noise_scale)
        noise = np.zeros((self.num_agents, self.num_arms))
        if mechanism.scale > 0:
            for i, rng in enumerate(self.privacy_rngs):
                noise[i] = mechanism.randomise(np.zeros(self.num_arms), rng)
        self.state.update(sums, self.active, plan, noise)  # lines 8-10
        self.plan = plan
        self.round_start = self.sim.now
        self.round_done = False
        self.sim.metrics.rounds += 1
        self._ticks = 0
        self.communicate()
        # first slot of the round: after zero-delay messages sent by communicate() are delivered
        self.sim.call_at(self.sim.now, self._tick)

    def _tick(self) -> None:
        """Slot boundary of a communication round (first one at the round's start)."""
        if self.round_done:
            t_delay = round((self.sim.now - self.round_start) / self.slot)
            self.t_delays.append(t_delay)
            self.active = self.new_active
            self.r += 1
            self._begin_epoch()
            return
        self.exploit_slot()
        self.comm_tick(self.sim.now)
        self._ticks += 1
        self.sim.call_at(self.round_start + self._ticks * self.slot * (1.0 + TIE), self._tick)

    def finish_round(self, aggregate: np.ndarray) -> None:
        """Lines 12-15: eliminate with the aggregated private means (K,), or one row per agent (M, K)."""
        radius = self.plan.radius
        if aggregate.ndim == 2:
            masks = [eliminate(self.active, row, radius) for row in aggregate]
            if any(not np.array_equal(masks[0], mask) for mask in masks[1:]):
                raise ProtocolError("agents disagree on the active set after GIS")
            self.new_active = masks[0]
            aggregate = aggregate[0]
        else:
            self.new_active = eliminate(self.active, aggregate, radius)
        self.last_aggregate = aggregate
        self.history.append((self.r, self.new_active.copy(), aggregate.copy()))
        self.round_done = True

    # ------------------------------------------------------------------ hooks
    def communicate(self) -> None:
        raise NotImplementedError

    def comm_tick(self, now: float) -> None:
        """Per-slot work of the communication protocol (advertise, retry)."""

    def results(self) -> dict[str, float]:
        best = self.sim.bandit.best_arm
        delays = self.t_delays
        return {
            "epsilon_spent": float(self.participants() * self.params["epsilon"]),
            "rounds_completed": len(delays),
            "t_delay_total": float(sum(delays)),
            "t_delay_mean": float(np.mean(delays)) if delays else 0.0,
            "t_delay_max": float(max(delays, default=0)),
            "active_arms": int(self.active.sum()),
            "identified_arm": self.final_arm,
            "correct": float(self.final_arm == best) if self.final_arm >= 0 else float("nan"),
        }
