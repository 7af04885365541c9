"""Gossip_UCB and Fed_UCB: federated bandits over gossip links (zhu2021).

Zhu, Zhu, Liu & Liu, "Federated Bandit: A Gossiping Approach", Proc. ACM Meas. Anal. Comput.
Syst. 5(1), 2021. N agents on a connected graph G face M arms with *heterogeneous* local means
mu_{i,k}; the global mean is mu_k = (1/N) sum_i mu_{i,k} (Sec. 2) and regret is measured
against it. Each agent keeps

* n_{i,k}(t): its own pull counts; ñ_{i,k}(t): its estimate of the largest count of arm k in
  the network, Eq. (1): ñ_{i,k}(t+1) = max{n_{i,k}(t), ñ_{j,k}(t) : j in N_i ∪ {i}};
* X̃_{i,k}(t): its sample mean, Eq. (2); theta_{i,k}(t): its gossiped estimate of mu_k.

Every tick t = 1..T (Alg. 1 / Alg. 4):

1. the local consistency set A_i = {k : n_{i,k}(t) < ñ_{i,k}(t) - N} (line 6);
2. if A_i is empty, pull argmax_k theta_{i,k}(t-1) + C_{i,k}(t) with C from Eq. (11)
   (Gossip_UCB) or Eq. (12) (Fed_UCB); otherwise a uniformly random arm of A_i (line 13);
3. update X̃ for the pulled arm (Fed_UCB: from the binary-tree private prefix sum, Alg. 3);
4. the two endpoints of the activated link do the gossip update
   theta_i(t) = (theta_i(t-1) + theta_j(t-1)) / 2 + X̃_i(t) - X̃_i(t-1) (line 20), everyone
   else the normal update theta_i(t) = theta_i(t-1) + X̃_i(t) - X̃_i(t-1) (line 22).

Fed_UCB is Gossip_UCB whose observation sums go through
:class:`protocols.privacy.tree.BinaryTreeCounter` (one counter per (agent, arm)) and whose
bonus is Eq. (12). Gossip_UCB runs the very same code with eps = inf (no noise, Eq. (11)), so
the two agree draw for draw when Fed_UCB has eps = inf (Sec. 4.1: "Gossip_UCB is a special
case of Fed_UCB when eps is infinity").

Engine wiring (two modes, ``[protocol] mode``):

* ``paper``: one global clock (period = ``[clock] period``) drives all agents, vectorised
  over agents (state arrays N x M). One link per tick is drawn uniformly by
  :func:`netsim.engine.activation.uniform_edge_clock` (Sec. 2.2) and its endpoints exchange theta
  within the tick. The ñ reads of Eq. (1) are instantaneous reads of every neighbour: we
  count them as communication by activating every link of G at every tick (so C(T) = |E| c2
  per tick) and report ``ntilde_reads`` = 2 |E| per tick (each read carries M counts).
* ``realistic``: the same agent clock, but links fire at the rings of Poisson clocks
  (:func:`netsim.engine.activation.poisson_edge_clocks`, total rate ``gossip_rate`` per unit time),
  and theta is averaged by the atomic pairwise exchange of :mod:`protocols.zhu2021.exchange`
  (request ``zhu2021-theta``, reply ``zhu2021-theta-reply``, over the link's delay/loss law; one
  exchange per node at a time, both endpoints apply one average of one pair of values, RFC 6298
  timeouts): with zero delay it is exactly line 20, and it stays bounded for any delay law.
  Agents keep pulling while an exchange is open. Each agent sends its ñ to its neighbours every
  tick as ``zhu2021-ntilde`` messages, merged at the receiver's next tick by Eq. (1)'s max; a max
  is idempotent and monotone, so a duplicated or reordered ñ message changes nothing and needs no
  sequence number. With unit delay the ñ messages reproduce Eq. (1) exactly (Lemma 1 is tested
  in both modes).
* Crashes (realistic mode; paper mode has no messages and refuses them): a crashed agent pulls
  nothing, sends nothing, opens no exchange, and what is sent to it is dropped; an exchange it
  started times out. ``state = "kept"``: it resumes with its counts and estimates.
  ``state = "lost"``: it rejoins as a fresh learner at its next tick: Alg. 1 line 1 again (every
  arm pulled once, n = ñ = 1, theta = X̃ = X(0), a fresh private counter for Fed_UCB), new
  sequence-number incarnation; Eq. (1) and the consistency set A_i then make it catch up with
  its neighbours' counts.

Decisions where the paper is ambiguous (each pinned by a test in ``tests/test_zhu2021.py``):

* Initialisation (line 1) happens at tick 0: each agent pulls every arm once (M pulls in that
  tick, counted in regret), n = ñ = 1, theta = X̃ = X(0). The loop then runs at ticks 1, 2, ...
* Fed_UCB initialises with the clean X(0), exactly as Alg. 4 line 1; the private counter covers
  the stream X(1), ..., X(T), which is the stream Def. 1 protects. X̃(t) = (X(0) + noisy sum of
  X(1..t)) / n. (Privatising X(0) too would put Laplace noise of scale ~ log2(T)/eps on the n = 1
  estimates while Eq. (12)'s privacy term vanishes at n = 1 (log 1 = 0): arms whose first draw
  came out very negative would never be pulled again.)
* Eq. (12)'s ``log n`` is read as ``log max(n, 2)`` (see :func:`confidence_bound`: literally the
  bonus at n = 1 is smaller than at large n and once-pulled arms starve).
* ``log`` in Eq. (11)/(12) is the natural log (Hoeffding steps of Sec. 3.5); the tree's
  eps' uses base 2 (see :mod:`protocols.privacy.tree`). T in Eq. (12) is the number of
  ticks of the run.
* Ties in argmax go to the lowest arm index.
* Eq. (1) includes the agent's own ñ (N_i ∪ {i}); by Lemma 1 this does not change its value.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from netsim.comm import (
    TIMER_FIELDS,
    InputError,
    Message,
    Protocol,
    ProtocolError,
    check_timer,
    faults,
    poisson_edge_clocks,
    register_protocol,
    rewriting,
    timer_from,
    uniform_edge_clock,
)
from netsim.comm import params as P
from protocols.privacy.tree import BinaryTreeCounter
from protocols.zhu2021.exchange import EXCHANGE_COUNTS, REPLY, REQUEST, PairwiseExchange
from protocols.zhu2021.gossip import gossip_lambda2, gossip_update
from protocols.zhu2021.rules import (
    confidence_bound,
    consistency_set,
    neighbour_max,
    neighbourhoods,
    propagate_max_counts,
    select_arms,
    update_means,
)

NTILDE = "zhu2021-ntilde"


@register_protocol
class GossipUCB(Protocol):
    """Gossip_UCB (zhu2021 Alg. 1); Fed_UCB below reuses it with private sums."""

    name = "gossip-ucb"
    description = "Gossip_UCB (zhu2021 Alg. 1): UCB over gossip averaging of heterogeneous local means"
    fields = {
        "mode": P.choice(("paper", "realistic"), "paper",
                         doc="paper: uniform link per tick, instant exchange; realistic: Poisson links, delayed "
                             "theta and ñ messages", label="mode"),
        "gossip_rate": P.real(1.0, low=0.0, low_open=True,
                              doc="realistic mode: link activations per unit time over the whole graph",
                              label="gossip rate", unit="per slot"),
        **TIMER_FIELDS,   # realistic mode: the RFC 6298 timer of the gossip exchanges
    }
    requires_connected = True
    servers = 0
    bandit_kinds = ("bernoulli", "gaussian", "heterogeneous", "csv", "diabetes")
    crash_states = ("kept", "lost")
    corruptible = (REQUEST, REPLY, NTILDE)
    columns = {
        "lambda2": P.column("λ2 of the gossip matrix", doc="second eigenvalue of the expected gossip matrix"),
        "epsilon_spent": P.column("privacy loss spent ε", doc="privacy loss of an agent's stream"),
        "noise_terms": P.column("Laplace draws", doc="noise terms drawn"),
        "gossip_exchanges": P.column("gossip exchanges", doc="completed gossip exchanges"),
        "ntilde_reads": P.column("ñ reads", doc="reads of the neighbours' pull counts ñ"),
        "forced_pulls": P.column("forced pulls", doc="pulls forced by the exploration rule"),
        "late_best_fraction": P.column("late best-arm share", doc="share of the second half's pulls on the best arm"),
        **{f"exchanges_{k}": P.column(f"exchanges {k}", doc=f"gossip exchanges {k} (realistic mode)")
           for k in EXCHANGE_COUNTS},
    }

    @classmethod
    def work(cls, scenario: Any, *, slots: float, links: float) -> tuple[float, float]:
        """The default per slot, plus realistic mode's gossip exchanges (a few messages each) at gossip_rate."""
        events, memory = super().work(scenario, slots=slots, links=links)
        if scenario.protocol["mode"] == "realistic":
            events += 4.0 * scenario.protocol["gossip_rate"] * scenario.run["horizon"]
        return events, memory

    @classmethod
    def check(cls, scenario: Any) -> None:
        if scenario.clock["jitter"] > 0:
            raise InputError("zhu2021 agents share one global clock; accepted: clock.jitter = 0",
                             key="clock.jitter")
        if scenario.network["components"] not in (1, [scenario.network["agents"]]):
            raise InputError("gossip needs one connected graph; accepted: network.components = 1",
                             key="network.components")
        if scenario.network["agents"] < 2:
            raise InputError("gossip needs a link; accepted: network.agents >= 2", key="network.agents")
        message_faults = set(faults.kinds(scenario.faults)) & {"link_down", "crash", "duplication", "reorder"}
        if message_faults and scenario.protocol["mode"] == "paper":
            raise InputError(f"paper mode reads neighbours without messages, so {', '.join(sorted(message_faults))} "
                             "would have no effect; accepted: protocol.mode = 'realistic' with message faults",
                             key="protocol.mode")
        check_timer(scenario.protocol)
        if scenario.protocol["mode"] == "paper":
            for key in ("gossip_rate", *TIMER_FIELDS):
                if scenario.protocol[key] != cls.fields[key].default:
                    raise InputError(f"paper mode activates one link per tick and sends no message, so {key} has no "
                                     "effect; accepted: protocol.mode = 'realistic', or no protocol." + key,
                                     key=f"protocol.{key}")
        adversary = scenario.adversary
        if scenario.protocol["mode"] == "paper" and (adversary["byzantine"] > 0 or adversary["agents"] or
                                                     adversary["link_corruption"] > 0):
            raise InputError("paper mode reads neighbours without messages, so an adversary would corrupt nothing; "
                             "accepted: protocol.mode = 'realistic' with an [adversary] section", key="protocol.mode")

    def epsilon(self) -> float:
        """Privacy level of the observation sums (inf: Gossip_UCB, no noise)."""
        return math.inf

    @classmethod
    def lockstep_key(cls, scenario: Any) -> Any:
        """Paper mode with the unit tick runs trials in lockstep (:mod:`protocols.zhu2021.lockstep`): the
        trials of one scenario (same graph size, arms, horizon and eps), whatever their seeds."""
        if scenario.protocol["mode"] != "paper" or scenario.clock["period"] != 1.0:
            return None
        setup = scenario.as_dict()
        setup["run"] = {k: v for k, v in setup["run"].items() if k not in ("trials", "seed")}
        return repr(setup)

    @classmethod
    def lockstep(cls, protocols: list[Any]) -> Any:
        from protocols.zhu2021.lockstep import Lockstep

        return Lockstep(protocols).advance

    # ------------------------------------------------------------------ setup
    def start(self) -> None:
        self._setup()
        sim, gossip_rng = self.sim, self._gossip_rng
        if self._realistic:
            self.exchange = PairwiseExchange(sim, width=self.num_arms, value=lambda i: self.theta[i], move=self._move,
                                             timer=timer_from(self.params, self.period),
                                             up=sim.faults.up if sim.faults.has_crashes else None)
            self.exchange.corruptible()
            self._initiator = sim.streams.for_("gossip-initiator")
            sim.network.subscribe_deferred(NTILDE)
            sim.network.corruptible(NTILDE, rewriting(lambda counts, lie: lie(counts)))
            poisson_edge_clocks(sim.env, sim.network, gossip_rng, self._gossip_now,
                                rate=self.params["gossip_rate"] / len(self.edges))
        if self._up is not None:
            sim.faults.on_restart(self._restarted)
        if self._realistic:
            sim.every(self.period, self._tick)
        else:
            # One clock: tick 0 initialises, and from tick 1 on the uniform edge clock drives the ticks, each
            # drawing its link before the agents step (Sec. 2.2).
            sim.call_at(0.0, lambda: self._tick(0.0))
            uniform_edge_clock(sim.env, sim.network, gossip_rng, self._edge_tick, period=self.period,
                               start=self.period)

    def _setup(self) -> None:
        """The state of Alg. 1 / Alg. 4 before tick 0 (no clock, no subscription yet)."""
        sim = self.sim
        n_agents, n_arms = sim.num_agents, sim.bandit.num_arms
        graph = sim.network.agent_graph
        self.num_agents, self.num_arms = n_agents, n_arms
        self.period = sim.clock_period
        self.ticks = max(1, math.ceil(sim.horizon / self.period - 1e-9) - 1)   # T: ticks 1..T
        self.lambda2 = gossip_lambda2(graph)
        self.hood = neighbourhoods(graph, n_agents)
        self.edges = np.array(sorted((min(u, v), max(u, v)) for u, v in graph.edges()), dtype=np.int64)
        self.rng = sim.streams.for_("protocol")
        self.best_arm = sim.bandit.best_arm
        # one counter per (agent, arm), at flat index agent * M + arm
        self.counter = BinaryTreeCounter(epsilon=self.epsilon(), horizon=self.ticks, shape=(n_agents * n_arms,),
                                         rng=sim.streams.for_("privacy"))
        self.initial = np.zeros((n_agents, n_arms))   # X(0), Alg. 4 line 1
        self.n = np.zeros((n_agents, n_arms))
        self.ntilde = np.zeros((n_agents, n_arms))
        self.xbar = np.zeros((n_agents, n_arms))
        self.theta = np.zeros((n_agents, n_arms))
        self.t = 0
        self.forced_pulls = 0
        self.gossip_exchanges = 0
        self.ntilde_reads = 0
        self.late_best = 0
        self.late_pulls = 0
        self.observer = getattr(self, "observer", None)
        self.arms = np.zeros(n_agents, dtype=np.int64)
        self.lagging = np.zeros((n_agents, n_arms), dtype=bool)
        self._edge: tuple[float, int, int] | None = None
        self._agents = np.arange(n_agents)
        self._rows = self._agents * n_arms       # flat index of each agent's arm 0
        self._epsilon = self.epsilon()
        self._bonus = np.empty((n_agents, n_arms))
        self._nobody = np.zeros(n_agents, dtype=bool)   # no agent forced (line 6: every A_i empty)
        self._realistic = self.params["mode"] == "realistic"
        self._gossip_rng = sim.streams.for_("gossip")
        self._up = sim.faults.up[:n_agents] if sim.faults.has_crashes else None
        self._fresh: list[int] = []   # agents back from a crash with state "lost", re-initialised next tick

    # ------------------------------------------------------------------ ticks
    def _tick(self, now: float) -> None:
        if self.t == 0:
            self._initialise()
        elif self.t <= self.ticks:
            self._step(now)
        self.t += 1
        if self.observer is not None:
            self.observer(self)

    def _initialise(self, who: np.ndarray | None = None) -> None:
        """Alg. 1 / Alg. 4 line 1: every agent (or the agents ``who``) pulls every arm once."""
        who = self._agents if who is None else who
        n_arms = self.num_arms
        agents = np.repeat(who, n_arms)
        arms = np.tile(np.arange(n_arms), len(who))
        rewards = self.sim.bandit.pull_many(agents, arms).reshape(len(who), n_arms)
        self.n[who] = 1.0
        self.ntilde[who] = 1.0
        self.initial[who] = rewards
        self.xbar[who] = rewards
        self.theta[who] = rewards
        if self._realistic and self.t == 0:
            self._send_ntilde()

    def _restarted(self, node: int, state: str) -> None:
        """A crashed agent is back; with ``state = "lost"`` it starts afresh (module docstring)."""
        if node >= self.num_agents or state != "lost":
            return
        self.counter.restart(slice(node * self.num_arms, (node + 1) * self.num_arms))
        self.exchange.forget(node)
        self._fresh.append(node)

    def _active(self) -> np.ndarray:
        """Agents that take a step this tick: up, and not re-initialising after a lost-state restart."""
        if self._up is None:
            return self._agents
        active = self._up.copy()
        if self._fresh:
            fresh = np.array(sorted(set(self._fresh)), dtype=np.int64)
            self._fresh = []
            fresh = fresh[self._up[fresh]]
            active[fresh] = False
            self._initialise(fresh)
        return self._agents[active]

    def _step(self, now: float) -> None:
        t = self.t
        n, big_n = self.n, self.num_agents
        active = self._active()
        lagging = consistency_set(n, self.ntilde, big_n)                           # line 6, uses ñ(t)
        if self._realistic:
            heard = self._heard()
        else:
            heard = neighbour_max(self.ntilde, self.hood)
            self._count_reads()
        self.ntilde = propagate_max_counts(n, self.ntilde, heard)                  # line 5, ñ(t+1)
        bonus = confidence_bound(n, t, big_n, horizon=self.ticks, epsilon=self._epsilon, out=self._bonus)
        if np.count_nonzero(lagging):
            forced = lagging.any(axis=1)                                           # A_i non-empty
            arms = select_arms(self.theta, bonus, lagging, self.rng, forced=forced)   # lines 7-13
        else:
            forced = self._nobody
            arms = select_arms(self.theta, bonus, None, self.rng)
        self.arms, self.lagging = arms, lagging
        if len(active) < big_n:
            arms, forced = arms[active], forced[active]
            rewards = self.sim.bandit.pull_many(active, arms)                      # line 14
            pulled = active * self.num_arms + arms  # flat (agent, arm) entries of the N x M arrays
        else:
            rewards = self.sim.bandit.pull_each(arms)
            pulled = self._rows + arms
        if forced is not self._nobody:
            self.forced_pulls += int(np.count_nonzero(forced))
        change = update_means(n, self.initial, self.xbar, self.counter, pulled, t, rewards)   # lines 15-16
        if t > self.ticks // 2:
            self.late_pulls += len(active)
            self.late_best += int(np.count_nonzero(arms == self.best_arm))
        if self._realistic:
            gossip_update(self.theta, pulled, change, None)                        # line 22
            self._send_ntilde()
        else:
            edge = self._edge
            if edge is None or edge[0] != now:
                raise ProtocolError("zhu2021: no link activated at this tick (clock order broken)")
            gossip_update(self.theta, pulled, change, (edge[1], edge[2]))         # lines 17-22
            self.gossip_exchanges += 1

    # ------------------------------------------------------------------ paper-mode communication
    def _edge_tick(self, u: int, v: int) -> None:
        """Paper mode: the link (u, v) was drawn for this tick; the agents step."""
        now = self.sim.now
        self._edge = (now, u, v)
        self._tick(now)

    def _count_reads(self) -> None:
        """Eq. (1) reads every neighbour's ñ: each link of G carries them this tick."""
        self.sim.network.activate_agent_links()
        self.ntilde_reads += 2 * len(self.edges)

    # ------------------------------------------------------------------ realistic-mode messages
    def _send_ntilde(self) -> None:
        """Every agent that is up sends its ñ (M counts) to each neighbour: one engine call for all."""
        m = self.num_arms
        senders = self._agents if self._up is None else self._agents[self._up]
        counts = self.ntilde[senders].ravel()
        self.sim.network.broadcast_chunks(NTILDE, senders, np.arange(len(senders) + 1) * m, counts)
        self.ntilde_reads += 2 * len(self.edges)

    def _heard(self) -> np.ndarray:
        """max(0, max_j ñ_j) over the ñ messages each agent received since its last tick (0 where none came).

        The floor 0 changes nothing in Eq. (1), whose other terms are counts (>= 0). The records of one
        tick are slices of a few flights (one per broadcast): the rows of each flight's payload are
        gathered once for all its records, and the maximum per (receiver, arm) cell is one unbuffered
        ``maximum.at`` over the flat cells (the maximum does not depend on the order of the messages).
        """
        m = self.num_arms
        heard = np.zeros(self.num_agents * m)
        records = self.sim.network.collect(NTILDE)
        if records:
            dst, values, flights = [], [], {}
            for record in records:
                if type(record) is Message:  # a message that travelled alone (a record reader may get those)
                    dst.append(np.array([record.dst], dtype=np.int64))
                    values.append(np.asarray(record.payload, dtype=float).reshape(1, m))
                    continue
                flight = flights.get(id(record.payload))
                if flight is None:
                    flights[id(record.payload)] = flight = (record.payload, [], [])
                flight[1].append(record.dst)
                flight[2].append(record.start)
            for payload, receivers, starts in flights.values():
                dst += receivers
                values.append(payload.reshape(-1, m)[np.concatenate(starts) // m])
            cells = (np.concatenate(dst) * m)[:, None] + np.arange(m)
            np.maximum.at(heard, cells.ravel(), np.concatenate(values).ravel())
        return heard.reshape(self.num_agents, m)

    def _gossip_now(self, u: int, v: int) -> None:
        """A link fired: one of its ends, each with probability 1/2, opens a pairwise exchange with the
        other (:mod:`protocols.zhu2021.exchange`)."""
        if self._initiator.random() < 0.5:
            u, v = v, u
        if self.t == 0 or (self._up is not None and not self._up[u]):
            return  # nothing to gossip before initialisation; a crashed agent starts nothing
        self.exchange.begin(u, v)

    def _move(self, i: int, by: np.ndarray) -> None:
        self.theta[i] += by

    # ------------------------------------------------------------------ results
    def results(self) -> dict[str, float]:
        exchanges = ({f"exchanges_{k}": v for k, v in self.exchange.results().items()} if self._realistic else {})
        return {
            "lambda2": self.lambda2,
            "epsilon_spent": self.counter.epsilon_spent,
            "noise_terms": self.counter.noise_terms,
            "gossip_exchanges": self.exchange.counts["completed"] if self._realistic else self.gossip_exchanges,
            **exchanges,
            "ntilde_reads": self.ntilde_reads,
            "forced_pulls": self.forced_pulls,
            "late_best_fraction": self.late_best / self.late_pulls if self.late_pulls else math.nan,
        }


@register_protocol
class FedUCB(GossipUCB):
    """Fed_UCB (zhu2021 Alg. 4): Gossip_UCB on binary-tree private sums with bound Eq. (12)."""

    name = "fed-ucb"
    description = "Fed_UCB (zhu2021 Alg. 4): eps-DP Gossip_UCB via binary-tree Laplace partial sums"
    fields = {
        **GossipUCB.fields,
        "epsilon": P.real(1.0, low=0.0, low_open=True, allow_inf=True,
                          doc="total privacy level eps of each agent's stream (inf: no noise, = Gossip_UCB)",
                          label="privacy level ε", unit=""),
    }

    def epsilon(self) -> float:
        return float(self.params["epsilon"])
