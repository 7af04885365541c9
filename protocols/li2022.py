"""CDP-MAB, DDP-MAB and HDP-MAB: private, communication-efficient federated elimination (Li & Song 2022).

All three run the same epochs (Alg. 1 lines 3-10, :mod:`protocols.li2022_rounds`): in epoch r
every agent pulls each active arm S(r) - S(r-1) times, privatises its per-epoch means with
Laplace noise of scale 1/(N eps [S(r) - S(r-1)]) (line 9) and folds them into its historical
private means ybar_{i,k}(r) (Eq. 6). They differ in the communication round that follows:

* ``cdp-mab`` (Alg. 1, Sec. IV-B): N = ceil(pM) agents drawn at random by the server upload
  ybar_i to the server, which averages (line 12) and eliminates (line 14). Participation rate p
  and round cap R (Delta_r = Delta^{r/R}) are the communication constraints of Sec. IV-B.
* ``ddp-mab`` (Alg. 3): the GIS protocol (Alg. 2) floods every ybar_j to every agent with
  ADV/REQ/DATA handshakes between neighbours; every agent averages all M records (line 9, with
  ybar, see NOTES) and eliminates by itself (line 10).
* ``hdp-mab`` (Alg. 5): inside every component the records are collected at the sink agent of
  Alg. 4 (SAC), the sink averages them (line 9) and uploads to the server, which averages over
  components (line 14), eliminates (line 15) and announces I^(r) (line 16).

While a round is in progress, every agent pulls its local empirical best active arm once per
slot (Alg. 2 line 3, Alg. 5 line 11); that regret counts. The round occupies the slots from its
start to the first slot boundary at or after the arrival of its last needed message; that
number of slots is the measured t_delay. Once one arm remains, or after R rounds under a round
cap (then the arm with the highest aggregated private mean), every agent pulls it until T
(line 17). Time advances on the engine in slots (``[clock] period``); exploration and
exploitation runs are drawn as sums with ``pull(agent, arm, n)``, split at the checkpoints so
the regret curve is exact at every checkpoint.

Decisions (see docs/protocols/li2022.md; each pinned by a test):

* The server's announcement of I^(r) (Alg. 1 after line 15, Alg. 5 line 16) is the paper's
  synchronisation signal: it is not a link of Eq. (2). This is what makes Theorem 2's cost
  c1 ceil(pM) R exact and Theorem 4's c1 Q per round. Uploads (and, on lossy links, their
  acknowledgements) are real messages and build server-agent links.
* GIS t_delay counts slots used (with unit slots and per-stage delays <= slot/3 it is the
  graph's diameter: flooding one hop per slot); Alg. 2's counter n starts at 0 and Theorem 3's
  proof writes d_G - 1 for the same quantity.
* SAC: ``sac_routing = "flood"`` (default) runs the GIS handshake flood inside each component
  and ends when the sink holds all M_q records (t_delay^q = the sink's eccentricity; every used
  link counts, so dense components cost more, as Fig. 11 reports); ``"tree"`` sends every
  record along a shortest-path tree to the sink one hop per slot (the cost counted in the proof
  of Theorem 4).
* Alg. 5 line 14 averages the Q component means without weights (``global_mean = "components"``);
  ``"agents"`` weights them by M_q (the mean over all M agents).
* Lossy links: uploads, SAC hops and GIS handshakes are acknowledged and repeated after
  ``timeout`` slots until they get through, so every round completes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import ClassVar

import numpy as np

from netsim import params as P
from netsim.errors import InputError, ProtocolError
from netsim.protocol import Protocol
from netsim.registry import register_protocol
from protocols.li2022_comm import Flood, SinkTree, Uploads, sink_agents
from protocols.li2022_rounds import EpochPlan, EpochSchedule, PrivateMeans, eliminate
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


class _Elimination(Protocol):
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


@register_protocol
class CDPMAB(_Elimination):
    """Alg. 1 with the communication constraints of Sec. IV-B."""

    name = "cdp-mab"
    description = "centralized private elimination with a server (li2022 Alg. 1, p and R of Sec. IV-B)"
    servers = 1
    requires_connected = False
    fields: ClassVar[Mapping[str, P.Field]] = {
        **COMMON_FIELDS,
        "participation": P.real(1.0, low=0.0, high=1.0, low_open=True,
                                doc="participation rate p: N = ceil(pM) random agents upload per round (Sec. IV-B)"),
    }

    def participants(self) -> int:
        return max(1, math.ceil(self.params["participation"] * self.sim.num_agents - 1e-9))

    def setup(self) -> None:
        self.server = self.sim.num_agents
        self.server_rng = self.sim.streams.for_("protocol", self.server)
        self.uploads = Uploads(self.sim.network, "cdp", reliable=self.reliable, timeout=self.timeout,
                               on_complete=self._collected)

    def communicate(self) -> None:
        n = self.participants()
        if n < self.num_agents:
            senders = np.sort(self.server_rng.choice(self.num_agents, n, replace=False))
        else:
            senders = self.agents
        self.uploads.begin(senders, self.server)
        for agent in senders:  # line 11
            self.uploads.send(int(agent), self.state.private[agent].copy())

    def comm_tick(self, now: float) -> None:
        self.uploads.tick(now)

    def _collected(self, records: dict[int, np.ndarray]) -> None:
        self.finish_round(np.mean([records[a] for a in sorted(records)], axis=0))  # line 12


@register_protocol
class DDPMAB(_Elimination):
    """Alg. 3 with the GIS protocol (Alg. 2)."""

    name = "ddp-mab"
    description = "decentralized private elimination with GIS ADV/REQ/DATA flooding (li2022 Alg. 2-3)"
    servers = 0
    fields: ClassVar[Mapping[str, P.Field]] = dict(COMMON_FIELDS)

    @classmethod
    def check(cls, scenario) -> None:
        super().check(scenario)
        comps = scenario.network["components"]
        if (comps if isinstance(comps, int) else len(comps)) != 1:
            raise InputError("DDP-MAB needs one connected agent graph; accepted: network.components = 1",
                             key="network.components")

    def setup(self) -> None:
        self.flood = Flood(self.sim.network, "gis", reliable=self.reliable, timeout=self.timeout,
                           on_complete=self._synchronised)

    def communicate(self) -> None:
        self.flood.begin(self.state.private.copy(), [list(range(self.num_agents))])

    def comm_tick(self, now: float) -> None:
        self.flood.tick(now)

    def _synchronised(self) -> None:
        self.finish_round(self.flood.received.mean(axis=1))  # line 9 at every agent


@register_protocol
class HDPMAB(_Elimination):
    """Alg. 5 with sink agents (Alg. 4) and SAC collection inside components."""

    name = "hdp-mab"
    description = "hybrid private elimination: sink agents collect, the server aggregates (li2022 Alg. 4-5)"
    servers = 1
    fields: ClassVar[Mapping[str, P.Field]] = {
        **COMMON_FIELDS,
        "sac_routing": P.choice(("flood", "tree"), "flood",
                                doc="SAC inside a component: handshake flood until the sink holds all, or a "
                                    "shortest-path tree to the sink"),
        "global_mean": P.choice(("components", "agents"), "components",
                                doc="server average: over components (Alg. 5 line 14) or weighted by M_q"),
    }

    def setup(self) -> None:
        net = self.sim.network
        self.server = self.sim.num_agents
        self.components = [list(c) for c in net.components]
        self.sinks, self.sink_delays, self.sink_delay = sink_agents(net.agent_graph, self.components)  # Alg. 4
        self.uploads = Uploads(net, "hdp", reliable=self.reliable, timeout=self.timeout, on_complete=self._collected)
        if self.params["sac_routing"] == "flood":
            self.sac = Flood(net, "sac", reliable=self.reliable, timeout=self.timeout, on_group=self._sink_ready)
        else:
            self.sac = SinkTree(net, "sac", graph=net.agent_graph, groups=self.components, sinks=self.sinks,
                                reliable=self.reliable, timeout=self.timeout, on_group=self._sink_ready)

    def communicate(self) -> None:
        self.uploads.begin(self.sinks, self.server)
        self._collected_at_sink = [False] * len(self.components)
        records = self.state.private.copy()
        if isinstance(self.sac, Flood):
            self.sac.begin(records, self.components, self.sinks)
        else:
            self.sac.begin(records)

    def comm_tick(self, now: float) -> None:
        self.sac.tick(now)
        self.uploads.tick(now)

    def _sink_ready(self, q: int) -> None:
        """Lines 9-10: the sink of component q averages its M_q records and uploads the mean."""
        if self._collected_at_sink[q]:
            return
        self._collected_at_sink[q] = True
        sink, members = self.sinks[q], self.components[q]
        if isinstance(self.sac, Flood):
            records = self.sac.received[sink, members]
        else:
            records = self.sac.records_at_sink(q)
        self.uploads.send(sink, records.mean(axis=0))

    def _collected(self, records: dict[int, np.ndarray]) -> None:
        sizes = np.array([len(c) for c in self.components], dtype=float)
        stacked = np.array([records[s] for s in self.sinks])
        if self.params["global_mean"] == "components":
            aggregate = stacked.mean(axis=0)  # line 14
        else:
            aggregate = (sizes[:, None] * stacked).sum(axis=0) / sizes.sum()
        self.finish_round(aggregate)

    def results(self) -> dict[str, float]:
        out = super().results()
        out["sink_t_delay"] = float(self.sink_delay)
        return out
