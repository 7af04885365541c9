"""The epoch loop shared by CDP-MAB, DDP-MAB and HDP-MAB (li2022 Alg. 1 lines 3-16, Alg. 3, Alg. 5):
exploration, privatisation, a communication round, elimination. The family overview and its
decisions are in :mod:`protocols.li2022`; the crash rules in its "Faults" section.
"""

from __future__ import annotations

import math

import numpy as np

from netsim import params as P
from netsim.errors import InputError
from netsim.protocol import Protocol
from protocols.li2022.epochs import EpochPlan, EpochSchedule, PrivateMeans, eliminate, pooled_mean, pooled_radius
from protocols.li2022.play import SlotRuns
from protocols.privacy.mechanisms import LaplaceMechanism

# The k-th slot boundary of a communication round is taken at k * slot * (1 + TIE) after its start:
# an exchange lasting exactly one slot (three stages of slot/3, summed in floating point) then
# always completes inside its slot, whatever the rounding.
TIE = 1e-9


COMMON_FIELDS = {
    "epsilon": P.real(1.0, low=0.0, low_open=True, allow_inf=True,
                      doc="privacy level eps of the Laplace noise Lap(1/(N eps [S(r)-S(r-1)])) (Alg. 1 line 9)",
                      label="privacy level ε", unit=""),
    "rounds": P.integer(0, low=0, doc="round cap R (Delta_r = Delta^{r/R}, Sec. IV-B); 0 = no cap (Delta_r = 2^-r)",
                        label="round cap R"),
    "timeout": P.real(2.0, low=0.0, low_open=True,
                      doc="slots after which an unanswered message is repeated (lossy links only)",
                      label="retransmission timeout", unit="slots"),
}


class Elimination(Protocol):
    """Shared epoch loop of the three algorithms; subclasses implement :meth:`communicate`."""

    requires_connected = True
    crash_states = ("kept", "lost")
    columns = {
        "epsilon_spent": P.column("privacy loss spent ε", doc="the ε of the releases an agent made"),
        "rounds_completed": P.column("rounds completed", doc="communication rounds that ended before T"),
        "t_delay_total": P.column("time in rounds", "slots", doc="slots spent in communication rounds, summed"),
        "t_delay_mean": P.column("round length t_delay", "slots", doc="mean slots a communication round lasted"),
        "t_delay_max": P.column("longest round", "slots", doc="slots of the longest communication round"),
        "active_arms": P.column("active arms left", doc="arms not yet eliminated at the end"),
        "identified_arm": P.column("identified arm", doc="the arm left when one was (NaN otherwise)"),
        "correct": P.column("best arm identified", doc="1 when the identified arm is the best, 0 when not"),
        "round_regret": P.column("regret during rounds",
                                 doc="pseudo-regret of the pulls made while rounds last (Theorems 3-4's local term)"),
    }

    @classmethod
    def check(cls, scenario) -> None:
        if scenario.clock["jitter"] > 0:
            raise InputError("li2022 protocols run on synchronised slots; accepted: clock.jitter = 0",
                             key="clock.jitter")
        # T of Alg. 1 is the horizon in slots; log(8 K r^2 T) of lines 4-5 needs at least one slot.
        slots = scenario.run["horizon"] / scenario.clock["period"]
        if not slots >= 1.0:
            raise InputError(f"a slot of {scenario.clock['period']:g} time units does not fit in run.horizon = "
                             f"{scenario.run['horizon']:g}; accepted: clock.period <= run.horizon (T is counted "
                             "in slots)", key="clock.period")

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
        self.up = sim.faults.up  # over all nodes; the server (if any) is node M
        self.runs = SlotRuns(sim, self.slot, [sim.horizon * j / count for j in range(1, count + 1)], self.up)
        net = sim.scenario.network
        lossy = net["loss"] > 0 or any((link["loss"] or 0) > 0 for link in net["links"])
        # acknowledge and repeat whenever a message can be lost: link loss, link outages, crashes
        self.reliable = lossy or bool({"link_down", "crash"} & set(sim.faults.kinds))
        self.timeout = self.params["timeout"] * self.slot
        self.t_delays: list[int] = []
        self.round_regret = 0.0  # pseudo-regret of the pulls made during communication rounds
        self.history: list[tuple[int, np.ndarray, np.ndarray]] = []  # (r, I^(r), aggregate) per round
        self.final_arm = -1
        self.last_aggregate = np.zeros(k)
        self.exploring = False
        self.setup()
        if sim.faults.has_crashes:
            sim.faults.on_crash(self._crashed)
            sim.faults.on_restart(self._restarted)
        sim.call_at(0.0, self._begin_epoch)

    def setup(self) -> None:
        """Subscribe message kinds (subclasses)."""

    def up_agents(self) -> np.ndarray:
        """Boolean mask of the agents up now (a copy)."""
        return self.up[: self.num_agents].copy()

    def exploit_slot(self) -> None:
        """One slot of a communication round: every up agent pulls its local empirical best active arm."""
        up = self.up[: self.num_agents]
        agents = self.agents if up.all() else np.flatnonzero(up)
        books = self.sim.bandit.regret
        before = float(books.sum())
        self.sim.bandit.pull_many(agents, self.state.local_best(self.active)[agents], 1)
        self.round_regret += float(books.sum()) - before

    # ------------------------------------------------------------------ epochs
    def _begin_epoch(self) -> None:
        now = self.sim.now
        cap = self.schedule.rounds_cap
        if self.active.sum() == 1 or (cap is not None and self.r > cap):
            values = np.where(self.active, self.last_aggregate, -np.inf)
            self.final_arm = int(np.argmax(values))
            remaining = math.ceil((self.sim.horizon - now) / self.slot)
            self.runs.play(now, remaining, np.full(self.num_agents, self.final_arm))
            return
        plan = self.schedule.plan(self.r, int(self.active.sum()), self.state.samples)
        self.sums = np.zeros((self.num_agents, self.num_arms))
        self.pulled = np.zeros((self.num_agents, self.num_arms))
        self.missed = ~self.up_agents()  # agents that sit out part of this epoch's exploration
        self.exploring = True
        arms = np.flatnonzero(self.active)
        for j, arm in enumerate(arms):  # line 7: each active arm S(r) - S(r-1) times
            self.runs.play(now + j * plan.pulls * self.slot, plan.pulls, np.full(self.num_agents, arm), self.sums,
                           self.pulled)
        end = now + len(arms) * plan.pulls * self.slot
        if end < self.sim.horizon:
            self.sim.call_at(end, lambda: self._end_exploration(plan))

    def _end_exploration(self, plan: EpochPlan) -> None:
        self.exploring = False
        # Only agents that pulled every slot of the epoch privatise (an agent that crashed during
        # it keeps its previous ybar and n_i, see the Faults rules); the others keep their pulls.
        rows = self.up_agents() & ~self.missed
        # line 9: a mean of `pulls` rewards in [0, 1] has sensitivity 1/pulls; (N eps)-DP Laplace noise
        # has scale 1 / (N eps [S(r) - S(r-1)]) (Theorem 1's proof). One privacy stream per agent.
        mechanism = LaplaceMechanism(epsilon=self.participants() * self.params["epsilon"], sensitivity=1.0 / plan.pulls)
        assert math.isclose(mechanism.scale, plan.noise_scale)
        noise = np.zeros((self.num_agents, self.num_arms))
        if mechanism.scale > 0:
            for i in np.flatnonzero(rows):
                noise[i] = mechanism.randomise(np.zeros(self.num_arms), self.privacy_rngs[i])
        self.state.update(self.sums, self.active, plan, noise, rows=rows, pulled=self.pulled)  # lines 8-10
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

    def finish_pooled(self, records: np.ndarray, counts: np.ndarray) -> None:
        """Lines 12-15 over the records j (rows of ``records``) with sample counts n_j (``counts``)."""
        keep = counts > 0
        if not keep.any():
            self.finish_round(None, total=0, records=0)
            return
        counts = counts[keep]
        self.finish_round(pooled_mean(records[keep], counts), total=int(counts.sum()), records=int(keep.sum()))

    def finish_round(self, aggregate: np.ndarray | None, *, total: int, records: int) -> None:
        """Lines 12-15: eliminate with the aggregated private means (K,) of ``records`` records holding
        ``total`` samples per active arm; ``None`` (no record reached the aggregator): no elimination.

        The radius is the plan's C(r) when the N expected records arrived with S(r) samples each,
        else :func:`~protocols.li2022.epochs.pooled_radius` of what arrived.
        """
        plan = self.plan
        if aggregate is None:
            self.new_active = self.active.copy()
            aggregate = self.last_aggregate
        else:
            n = self.participants()
            if records == n and total == n * plan.samples:
                radius = plan.radius
            else:
                radius = pooled_radius(self.r, int(self.active.sum()), self.num_arms, self.schedule.horizon, n,
                                       self.params["epsilon"], total=total, records=records)
            self.new_active = eliminate(self.active, aggregate, radius)
        self.last_aggregate = aggregate
        self.history.append((self.r, self.new_active.copy(), aggregate.copy()))
        self.round_done = True

    # ------------------------------------------------------------------ crashes
    def _crashed(self, node: int) -> None:
        if node < self.num_agents:
            self.runs.crashed(node)
            if self.exploring:
                self.missed[node] = True
            self.agent_crashed(node)
        else:
            self.server_crashed()

    def _restarted(self, node: int, state: str) -> None:
        if node < self.num_agents:
            if state == "lost":  # a fresh learner; r, I^(r-1) and the slot come with the synchronisation signal
                self.state.forget(node)
                if self.exploring:
                    self.sums[node] = 0.0
                    self.pulled[node] = 0.0
            self.runs.restarted(node)
            self.agent_restarted(node, state)
        else:
            self.server_restarted(state)

    # ------------------------------------------------------------------ hooks
    def communicate(self) -> None:
        raise NotImplementedError

    def comm_tick(self, now: float) -> None:
        """Per-slot work of the communication protocol (advertise, retry)."""

    def agent_crashed(self, agent: int) -> None:
        """``agent`` crashed (the communication protocol stops waiting for it)."""

    def agent_restarted(self, agent: int, state: str) -> None:
        """``agent`` is back (``state``: kept or lost)."""

    def server_crashed(self) -> None:
        """The server crashed (protocols with a server)."""

    def server_restarted(self, state: str) -> None:
        """The server is back (protocols with a server)."""

    def unfinished(self) -> str | None:
        if self.final_arm >= 0:
            return None
        return f"horizon reached in epoch {len(self.t_delays) + 1} before the last epoch identified an arm"

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
            # the local-exploitation term of Theorems 3-4 (M (d_G - 1) per round at most): the part of
            # group_regret that the communication structure changes (exploration is the same for all)
            "round_regret": self.round_regret,
        }
