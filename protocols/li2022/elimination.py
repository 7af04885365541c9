"""The epoch loop shared by CDP-MAB, DDP-MAB and HDP-MAB (li2022 Alg. 1 lines 3-16, Alg. 3, Alg. 5):
exploration, privatisation, a communication round, elimination. The family overview and its
decisions are in :mod:`protocols.li2022`; the crash rules in its "Faults" section.

Cohorts. The algorithms keep one active set I^(r) for all agents: the server announces it (CDP,
HDP), and in DDP-MAB every agent eliminates by itself (Alg. 3 line 10) from the same M records,
so all agents agree (Theorem 3's proof relies on it). Under an ``[adversary]`` a DDP-MAB agent
may aggregate a corrupted copy of a record that others got clean; agents then disagree. netsim
lets each agent go on with its own set: agents that share an active set and a sample count
S(r-1) form a :class:`Cohort` (one cohort of all agents unless that happens). A cohort plans its
epoch with its own |I| (lines 4-5), explores its own arms, privatises, and eliminates with its
own aggregate; the communication round starts when every cohort has finished exploring (the
synchronisation clock, Sec. V-A.2), a cohort done earlier exploiting its local empirical best
arm meanwhile; a cohort whose set has one arm left (or that reached the round cap) pulls it until
T while the others go on, its agents still forwarding and sending their (last) records.
"""

from __future__ import annotations

import math

import numpy as np

from netsim.comm import TIMER_FIELDS, InputError, Protocol, can_lose, check_timer, timer_from
from netsim.comm import params as P
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
    # The retransmission timer of the reliable mode (on whenever a message can be lost), in slots (the
    # clock period): rto_initial 3, rto_min 1, rto_max 64 (netsim.comm.transport.TIMER_FIELDS, RFC 6298).
    **TIMER_FIELDS,
}


class Cohort:
    """Agents that share an active set I and a sample count S(r-1) (see the module docstring).

    ``agents`` is ``None`` for the cohort of every agent; ``aggregate`` the last aggregated means it
    eliminated with; ``final_arm`` the arm it pulls until T once identified (-1 before).
    """

    __slots__ = ("agents", "active", "samples", "aggregate", "plan", "final_arm")

    def __init__(self, agents: np.ndarray | None, active: np.ndarray, samples: int, aggregate: np.ndarray):
        self.agents, self.active, self.samples, self.aggregate = agents, active, samples, aggregate
        self.plan: EpochPlan | None = None
        self.final_arm = -1

    def members(self, m: int) -> np.ndarray:
        """The agent ids of the cohort."""
        return np.arange(m) if self.agents is None else self.agents


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
        check_timer(scenario.protocol)
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
        self.cohorts = [Cohort(None, np.ones(k, dtype=bool), 0, np.zeros(k))]
        self.learning = list(self.cohorts)  # the cohorts that explore in the current epoch
        self.r = 1
        self.agents = np.arange(m)
        self.privacy_rngs = [sim.streams.for_("privacy", i) for i in range(m)]
        count = sim.scenario.run["checkpoints"]
        self.up = sim.faults.up  # over all nodes; the server (if any) is node M
        self.runs = SlotRuns(sim, self.slot, [sim.horizon * j / count for j in range(1, count + 1)], self.up)
        # repeat on RFC 6298 timers whenever a message can be lost: link loss, link outages, crashes
        self.reliable = can_lose(sim.scenario)
        self.timer = timer_from(self.params, self.slot) if self.reliable else None
        self.t_delays: list[int] = []
        self.round_regret = 0.0  # pseudo-regret of the pulls made during communication rounds
        # (r, I^(r), aggregate) per round; I (M, K) and aggregate (M, K) per agent when cohorts differ
        self.history: list[tuple[int, np.ndarray, np.ndarray]] = []
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

    @property
    def active(self) -> np.ndarray:
        """I^(r): the active set (K,) when all agents agree, else one row per agent (M, K)."""
        if len(self.cohorts) == 1:
            return self.cohorts[0].active
        rows = np.zeros((self.num_agents, self.num_arms), dtype=bool)
        for c in self.cohorts:
            rows[c.members(self.num_agents)] = c.active
        return rows

    def exploit_slot(self) -> None:
        """One slot of a communication round: every up agent still learning pulls its local empirical
        best active arm (an agent whose cohort identified its arm is pulling that one)."""
        up = self.up[: self.num_agents]
        if len(self.learning) == len(self.cohorts) == 1:
            agents = self.agents if up.all() else np.flatnonzero(up)
        else:
            learning = np.zeros(self.num_agents, dtype=bool)
            for c in self.learning:
                learning[c.members(self.num_agents)] = True
            agents = np.flatnonzero(up & learning)
        books = self.sim.bandit.regret
        before = float(books.sum())
        self.sim.bandit.pull_many(agents, self.state.local_best(self.active)[agents], 1)
        self.round_regret += float(books.sum()) - before

    # ------------------------------------------------------------------ epochs
    def _begin_epoch(self) -> None:
        now, m = self.sim.now, self.num_agents
        cap = self.schedule.rounds_cap
        self.learning = []
        for c in self.cohorts:
            if c.final_arm >= 0:
                continue
            if c.active.sum() == 1 or (cap is not None and self.r > cap):  # line 17
                c.final_arm = int(np.argmax(np.where(c.active, c.aggregate, -np.inf)))
                remaining = math.ceil((self.sim.horizon - now) / self.slot)
                self.runs.play(now, remaining, np.full(m, c.final_arm), agents=c.agents)
            else:
                self.learning.append(c)
        if not self.learning:
            return
        lengths = []
        for c in self.learning:
            c.plan = self.schedule.plan(self.r, int(c.active.sum()), c.samples)
            lengths.append(int(c.active.sum()) * c.plan.pulls)
        epoch = max(lengths)
        self.sums = np.zeros((m, self.num_arms))
        self.pulled = np.zeros((m, self.num_arms))
        self.missed = ~self.up_agents()  # agents that sit out part of this epoch's exploration
        self.exploring = True
        for c, length in zip(self.learning, lengths):
            pulls = c.plan.pulls
            for j, arm in enumerate(np.flatnonzero(c.active)):  # line 7: each active arm S(r) - S(r-1) times
                self.runs.play(now + j * pulls * self.slot, pulls, np.full(m, arm), self.sums, self.pulled,
                               agents=c.agents)
            if length < epoch:  # the cohort waits for the others' exploration, exploiting
                self.runs.play(now + length * self.slot, epoch - length, self.state.local_best(c.active),
                               agents=c.agents)
        end = now + epoch * self.slot
        if end < self.sim.horizon:
            self.sim.call_at(end, self._end_exploration)

    def _end_exploration(self) -> None:
        self.exploring = False
        m = self.num_agents
        # Only agents that pulled every slot of the epoch privatise (an agent that crashed during
        # it keeps its previous ybar and n_i, see the Faults rules); the others keep their pulls.
        rows = self.up_agents() & ~self.missed
        noise = np.zeros((m, self.num_arms))
        for c in self.learning:
            plan = c.plan
            # line 9: a mean of `pulls` rewards in [0, 1] has sensitivity 1/pulls; (N eps)-DP Laplace noise
            # has scale 1 / (N eps [S(r) - S(r-1)]) (Theorem 1's proof). One privacy stream per agent.
            mechanism = LaplaceMechanism(epsilon=self.participants() * self.params["epsilon"],
                                         sensitivity=1.0 / plan.pulls)
            assert math.isclose(mechanism.scale, plan.noise_scale)
            mine = rows if c.agents is None else rows & np.isin(np.arange(m), c.agents)
            if mechanism.scale > 0:
                for i in np.flatnonzero(mine):
                    noise[i] = mechanism.randomise(np.zeros(self.num_arms), self.privacy_rngs[i])
            if c.agents is None:  # lines 8-10
                self.state.update(self.sums, c.active, plan, noise, rows=rows, pulled=self.pulled)
            else:
                own = np.zeros((m, 1))
                own[c.agents] = 1.0
                self.state.update(self.sums * own, c.active, plan, noise, rows=mine, pulled=self.pulled * own)
            c.samples = plan.samples
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
            self.r += 1
            self._begin_epoch()
            return
        self.exploit_slot()
        self.comm_tick(self.sim.now)
        self._ticks += 1
        self.sim.call_at(self.round_start + self._ticks * self.slot * (1.0 + TIE), self._tick)

    def finish_pooled(self, records: np.ndarray, counts: np.ndarray) -> None:
        """Lines 12-15 over the records j (rows of ``records``) with sample counts n_j (``counts``)."""
        self.finish_round(*self._pool(records, counts))

    @staticmethod
    def _pool(records: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray | None, int, int]:
        """Line 12: (pooled mean of the records with samples, their total samples, their number)."""
        keep = counts > 0
        if not keep.any():
            return None, 0, 0
        counts = counts[keep]
        return pooled_mean(records[keep], counts), int(counts.sum()), int(keep.sum())

    def finish_round(self, aggregate: np.ndarray | None, total: int, records: int) -> None:
        """Lines 12-15: every learning cohort eliminates with the aggregated private means (K,) of
        ``records`` records holding ``total`` samples per active arm; ``None`` (no record reached the
        aggregator): no elimination.

        The radius is the plan's C(r) when the N expected records arrived with S(r) samples each,
        else :func:`~protocols.li2022.epochs.pooled_radius` of what arrived.
        """
        if len(self.cohorts) == 1:
            c = self.cohorts[0]
            c.active, c.aggregate = self._eliminate(c, aggregate, total, records)
            self.history.append((self.r, c.active.copy(), c.aggregate.copy()))
            self.round_done = True
            return
        view = (aggregate, total, records)
        self._regroup({i: view for c in self.learning for i in c.members(self.num_agents).tolist()})

    def finish_agents(self, views: dict[int, tuple[np.ndarray, np.ndarray]]) -> None:
        """Lines 9-10 of Alg. 3 at every agent with its own records: ``views[i]`` = (records, counts) that
        agent i aggregates (an agent absent from ``views`` eliminates nothing). Agents that end with
        different active sets split into cohorts."""
        self._regroup({i: self._pool(*view) for i, view in views.items()})

    def _regroup(self, pooled: dict[int, tuple[np.ndarray | None, int, int]]) -> None:
        """Each learning agent i eliminates with ``pooled[i]`` = (aggregate, total, records); then the
        learning agents form one cohort per (I^(r), S(r)) they share."""
        m = self.num_agents
        sets = np.zeros((m, self.num_arms), dtype=bool)
        means = np.zeros((m, self.num_arms))
        samples = np.zeros(m, dtype=np.int64)
        learning = np.zeros(m, dtype=bool)
        for c in self.cohorts:
            members = c.members(m)
            sets[members], means[members], samples[members] = c.active, c.aggregate, c.samples
            if c.final_arm >= 0:
                continue
            learning[members] = True
            for i in members.tolist():
                if i in pooled:
                    sets[i], means[i] = self._eliminate(c, *pooled[i])
        cohorts = [c for c in self.cohorts if c.final_arm >= 0]
        groups: dict[tuple, list[int]] = {}
        for i in np.flatnonzero(learning).tolist():
            groups.setdefault((sets[i].tobytes(), int(samples[i])), []).append(i)
        for members in groups.values():
            i = members[0]
            agents = None if len(members) == m else np.asarray(members, dtype=np.int64)
            cohorts.append(Cohort(agents, sets[i].copy(), int(samples[i]), means[i].copy()))
        cohorts.sort(key=lambda c: int(c.members(m)[0]))
        self.cohorts = cohorts
        self.learning = [c for c in cohorts if c.final_arm < 0]
        if len(cohorts) == 1:
            self.history.append((self.r, cohorts[0].active.copy(), cohorts[0].aggregate.copy()))
        else:
            self.history.append((self.r, sets, means))
        self.round_done = True

    def _eliminate(self, c: Cohort, aggregate: np.ndarray | None, total: int,
                   records: int) -> tuple[np.ndarray, np.ndarray]:
        """(I^(r), aggregate) of cohort ``c`` after lines 13-15 with ``aggregate`` of ``records`` records."""
        if aggregate is None:
            return c.active.copy(), c.aggregate
        plan, n = c.plan, self.participants()
        if records == n and total == n * plan.samples:
            radius = plan.radius
        else:
            radius = pooled_radius(self.r, int(c.active.sum()), self.num_arms, self.schedule.horizon, n,
                                   self.params["epsilon"], total=total, records=records)
        return eliminate(c.active, aggregate, radius), aggregate

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

    @property
    def final_arm(self) -> int:
        """The arm every agent pulls until T (-1 before; with several cohorts, the arm most agents pull)."""
        finals = [(c.final_arm, len(c.members(self.num_agents))) for c in self.cohorts]
        if any(arm < 0 for arm, _ in finals):
            return -1
        votes: dict[int, int] = {}
        for arm, size in finals:
            votes[arm] = votes.get(arm, 0) + size
        return max(sorted(votes), key=lambda arm: votes[arm])

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
            "active_arms": int(self.active.sum()) if len(self.cohorts) == 1 else float(self.active.sum(axis=1).mean()),
            "identified_arm": self.final_arm,
            # the share of agents that pull the best arm until T
            "correct": self._correct(best) if self.final_arm >= 0 else float("nan"),
            # the local-exploitation term of Theorems 3-4 (M (d_G - 1) per round at most): the part of
            # group_regret that the communication structure changes (exploration is the same for all)
            "round_regret": self.round_regret,
        }

    def _correct(self, best: int) -> float:
        m = self.num_agents
        return float(sum(len(c.members(m)) for c in self.cohorts if c.final_arm == best) / m)

    def retransmissions(self) -> int:
        """Messages sent again because a retransmission timer expired (0 unless messages can be lost)."""
        return 0
