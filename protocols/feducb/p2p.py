"""Decentralized (peer-to-peer) FedUCB (Dubey & Pentland, NeurIPS 2020, Sec. 4.2, Thm. 2, Remark 5).

The appendix with the pseudocode is not in the converted text; this module implements what
Sec. 4.2 describes, with the decisions below (each pinned by a test in ``tests/test_feducb_p2p.py``).

* Communication is the LOCAL protocol: a message travels at most gamma hops, one hop per trial
  (unit link delays), duplicates dropped; it is :class:`netsim.comm.flooding.Flooding` (issue 5),
  used twice: kind ``feducb-p2p-request`` and kind ``feducb-p2p-reply``.
* Any delay law (realistic mode). The paper assumes unit delays; with sampled per-hop delays a
  record still travels at most gamma hops (its life), each hop taking the link's sampled delay
  rounded up to the next trial (the LOCAL layer forwards at the trial's flush). Nothing in the
  algorithm waits for a reply: a late reply is stored when it arrives (if it is the newest of its
  origin, see below) and the group statistics are resynchronised at the next trial. A reply is the
  origin's tree prefix sum, so a later one carries everything a lost one did.
* Subsampling (Weinberger & Ordentlich 2002): agent i keeps gamma estimators
  (V_{i,g}, u_{i,g}), g = 0..gamma-1, and at trial t (t = 0, 1, ...) uses g = t mod gamma for
  choosing, for its update and for its trigger. So estimator g only ever holds data of the trials
  it was used in, by any agent (all agents share the same round-robin clock).
* Each estimator is Alg. 1's OFUL state with V = S + U (:class:`protocols.feducb.LinUCBState`,
  one learner per (agent, estimator)). The group is the gamma-neighbourhood N_i = N_gamma(i)
  (itself included): S_{i,g} starts at |N_i| rho_min I, beta uses M = |N_i| (Prop. 2 with the
  group that is summed), and the trigger is
  log det(V_{i,g} + x x^T + |N_i| (rho_max - rho_min) I) - log det S_{i,g} > D / (Delta_{i,g} + 1),
  Delta_{i,g} + 1 counting the uses of g since its last synchronisation including this one
  (the same reading as the centralized dt).
* When the trigger fires, agent i floods a request for g. Every agent j that receives it
  (and i itself) privatises the statistic Q_{j,g} gathered since its previous release for g with
  its own tree for (j, g) (Alg. 2; Remark 5: gamma trees of at most T/gamma leaves each, so
  m = 1 + ceil(log2 ceil(T/gamma)) and the union bound runs over M gamma trees), and floods the
  reply (g, U_hat_{j,g}, u_hat_{j,g}) with life gamma. An agent answers requests for g once per
  trial, and not again for requests created before its last release for g.
* Every agent k keeps the latest reply of each origin j (per estimator). Whenever new replies
  for g arrive (its own included), it resynchronises: S_{k,g} = sum over j in N_k of the latest
  U_hat_{j,g} (rho_min I for an agent not heard from yet), s_{k,g} likewise, V = S + U with U
  its own data since its own last release for g, and Delta_{k,g} <- 0. Replies travel at most
  gamma hops, so only agents of N_k are ever heard. After a request for g an agent makes no new
  request for g for 2 gamma trials, the time its neighbourhood's replies need to come back
  (Sec. 4.2: "synchronized ... by the next 2 rounds they will be used again").
* ``rounds`` counts synchronisation requests (one per flooded request).
* Faults (docs/protocols/feducb.md, "Faults"): a crashed agent observes its contexts (the
  environment draws them for everyone) but chooses, pulls, requests and replies nothing, and
  what is sent to it is dropped. Duplicated and reordered records are handled by the LOCAL
  layer (a record is taken once; the reply table keeps the newest ``seq`` per origin). With
  ``state = "lost"`` a restarted agent is a fresh learner: its gamma estimators, its tree
  privatizers, its reply table and its LOCAL memory start afresh (new incarnation), and it
  relearns its group statistics from the replies to the next requests it hears.
* ``[clock] jitter`` is refused: every agent uses estimator t mod gamma of one shared trial
  clock (the subsampling argument needs all agents on the same round robin).
* ``[adversary]``: replies carry the statistics (``corruptible``); a byzantine agent replaces each
  value of its own replies' (U_hat, u_hat) (and, with ``relay``, of the replies it forwards) w.p.
  ``corruption`` by a draw of Q (:mod:`netsim.comm.corruption`, U_hat kept symmetric); a corrupting
  link does so in transit. Nobody checks: a lie enters the group statistics as it is.
* Threshold D: the same modes as the centralized protocol with M = |N_i| replaced by the number
  of agents M in the formulas (``communication`` / ``threshold`` keys), T counted in trials.
"""

from __future__ import annotations

import math
from typing import Any

import networkx as nx
import numpy as np

from netsim.comm import Flooding, InputError, Lie, Protocol, check_timer, register_protocol, rewriting, timer_from
from netsim.comm import params as P
from protocols.feducb.linucb import (
    COLUMNS,
    FIELDS,
    LinUCBState,
    communication_bound,
    statistics_bytes,
    sync_trigger,
    threshold_for,
    trials_of,
)
from protocols.privacy.gaussian_tree import FedUCBCalibration, GaussianTreePrivatizer


def neighbourhoods(graph: nx.Graph, gamma: int, agents: int) -> np.ndarray:
    """Boolean (M, M) matrix: entry (i, j) iff d_G(i, j) <= gamma (N_gamma(i), i included)."""
    near = np.zeros((agents, agents), dtype=bool)
    for i in range(agents):
        for j in nx.single_source_shortest_path_length(graph, i, cutoff=gamma):
            near[i, j] = True
    return near


def lie_replies(records: np.ndarray, lie: Lie) -> np.ndarray:
    """Where replies carry statistics: (U_hat, u_hat) of the sender's own records (every record with ``relay``)."""
    mine = np.ones(len(records), dtype=bool) if lie.relay else records["origin"] == lie.sender
    if not mine.any():
        return records
    hits = lie.hits
    gram, vec = lie(records["gram"][mine], symmetric=True), lie(records["vec"][mine])
    if lie.hits == hits:
        return records
    out = records.copy()
    out["gram"][mine], out["vec"][mine] = gram, vec
    return out


@register_protocol
class DecentralizedFedUCB(Protocol):
    """Sec. 4.2 (appendix): gamma round-robin estimators, requests and replies over LOCAL."""

    name = "feducb-p2p"
    columns = {**COLUMNS,
               "sync_replies": P.column("synchronisation replies", doc="synchronisation replies sent"),
               "mean_neighbourhood": P.column("mean neighbourhood", doc="mean agents within γ hops")}
    description = "decentralized FedUCB (dubey2020 Sec. 4.2): gamma subsampled estimators, LOCAL-protocol sync"
    fields = {**FIELDS, "gamma": P.integer(1, low=1, doc="time-to-live of messages = number of estimators",
                                           label="message life γ", unit="hops")}
    servers = 0
    requires_connected = True
    bandit_kinds = ("linear",)
    crash_states = ("kept", "lost")
    corruptible = ("feducb-p2p-reply",)
    relays = True  # LOCAL forwarding: adversary.relay (liars corrupt what they forward) acts

    @classmethod
    def work(cls, scenario: Any, *, slots: float, links: float) -> tuple[float, float]:
        """The default per slot; memory: gamma learners per agent and every agent's table of the gamma
        estimators of every other agent (M x M x gamma d x d matrices, netsim.engine.budget)."""
        events, _ = super().work(scenario, slots=slots, links=links)
        M, gamma, d = scenario.network["agents"], scenario.protocol["gamma"], scenario.bandit["dimension"]
        return events, statistics_bytes(scenario, learners=M * gamma, slots=slots) + 8.0 * M * M * gamma * d * (d + 1)

    @classmethod
    def check(cls, scenario: Any) -> None:
        if scenario.clock["period"] != 1.0:  # trials are the unit of the round-robin and of T
            raise InputError(f"period = {scenario.clock['period']}; accepted: 1.0 (one hop per trial)",
                             key="clock.period")
        if scenario.clock["jitter"] > 0:
            raise InputError(f"protocol {cls.name!r} runs every agent on one round-robin trial clock (estimator "
                             "t mod gamma, Sec. 4.2); accepted: clock.jitter = 0", key="clock.jitter")
        if scenario.network["server_delay"] is not None:  # no server node: the key would change nothing
            raise InputError(f"protocol {cls.name!r} has no server node, so no server-agent link; accepted: no "
                             "network.server_delay (network.delay sets the agents' links)", key="network.server_delay")
        check_timer(scenario.protocol)

    def start(self) -> None:
        sim = self.sim
        M, gamma = sim.num_agents, self.params["gamma"]
        self.M, self.gamma = M, gamma
        self.d = d = sim.bandit.dimension
        self.T = trials_of(sim)
        releases = max(1, math.ceil(self.T / gamma))
        self.cal = cal = FedUCBCalibration(
            epsilon=self.params["epsilon"], delta=self.params["delta"], alpha=self.params["alpha"], dimension=d,
            agents=M, releases=releases, L=self.params["L"], S=self.params["S"], sigma=self.params["sigma"],
            lam=self.params["lam"], estimators=gamma)
        self.near = neighbourhoods(sim.network.agent_graph, gamma, M)
        self.group = self.near.sum(axis=1).astype(float)  # |N_i|
        self.D = (threshold_for(self.params["communication"], horizon=self.T, dimension=d, agents=M,
                                rho_min=cal.rho_min, rho_max=cal.rho_max, L=self.params["L"])
                  if self.params["threshold"] == "auto" else float(self.params["threshold"]))
        group_rows = np.repeat(self.group, gamma)  # learner row = agent * gamma + g
        self.state = LinUCBState(M * gamma, d, s0=group_rows * cal.rho_min,
                                 shift_w=group_rows * (cal.rho_max - cal.rho_min))
        self.beta_group = group_rows
        self.privatizer = GaussianTreePrivatizer(cal, [sim.streams.for_("privacy", row) for row in range(M * gamma)])
        self.table_gram = np.zeros((M, M, gamma, d, d))
        self.table_vec = np.zeros((M, M, gamma, d))
        self.table_has = np.zeros((M, M, gamma), dtype=bool)
        self.table_seq = np.full((M, M, gamma), -1, dtype=np.int64)  # seq of the reply held
        self.table_created = np.full((M, M, gamma), -np.inf)  # creation time of the reply held
        self.dirty = np.zeros((M, gamma), dtype=bool)
        # exchanges (module docstring): the asker's last request, its exchange's first, open or not, requests
        self.requested_at = np.full((M, gamma), -np.inf)
        self.opened_at = np.full((M, gamma), -np.inf)
        self.open = np.zeros((M, gamma), dtype=bool)
        self.transmissions = np.zeros((M, gamma), dtype=np.int64)
        self.suspected = np.zeros((M, M), dtype=bool)  # (asker, member): silent through a whole exchange
        self.timer = timer_from(self.params, sim.clock_period)
        self.asked = np.full((M, gamma), -np.inf)        # newest request creation time heard
        self.released_at = np.full((M, gamma), -np.inf)  # time of the agent's last release for g
        self.trial = 0
        self.requests = 0
        self.replies = 0
        self.everyone = np.arange(M)
        self.req_flood = Flooding(sim, "feducb-p2p-request", gamma, [("g", "i4")], on_receive=self._on_request,
                                  latest=False)
        self.rep_flood = Flooding(sim, "feducb-p2p-reply", gamma,
                                  [("g", "i4"), ("gram", "f8", (d, d)), ("vec", "f8", (d,))],
                                  on_receive=self._on_reply, latest=False)
        if sim.network.adversary is not None:
            sim.network.corruptible("feducb-p2p-reply", rewriting(lie_replies))
        self._up = sim.faults.up[:M] if sim.faults.has_crashes else None
        if self._up is not None:
            sim.faults.on_restart(self._restarted)
        sim.every(sim.clock_period, self.step)

    def _restarted(self, node: int, state: str) -> None:
        """A crashed agent is back; with ``state = "lost"`` it starts as a fresh learner (module docstring)."""
        if node >= self.M or state != "lost":
            return
        rows = node * self.gamma + np.arange(self.gamma)
        self.state.reset(rows)
        self.privatizer.restart(rows)
        self.table_has[node] = False
        self.table_seq[node] = -1
        self.table_gram[node] = 0.0
        self.table_vec[node] = 0.0
        self.table_created[node] = -np.inf
        self.dirty[node] = False
        self.requested_at[node] = self.opened_at[node] = -np.inf
        self.open[node] = False
        self.transmissions[node] = 0
        self.suspected[node] = False
        self.timer.forget(node)
        self.asked[node] = -np.inf
        self.released_at[node] = -np.inf
        self.req_flood.forget([node])
        self.rep_flood.forget([node])

    # -- message handlers (run at delivery instants, before the tick) -------------
    def _on_request(self, dst: np.ndarray, records: np.ndarray) -> None:
        np.maximum.at(self.asked, (dst, records["g"].astype(np.int64)), records["created"])

    def _on_reply(self, dst: np.ndarray, records: np.ndarray) -> None:
        self._store(dst, records["origin"].astype(np.int64), records["g"].astype(np.int64), records["seq"],
                    records["created"], records["gram"], records["vec"])

    def _store(self, dst, origin, g, seq, created, gram, vec) -> None:
        order = np.argsort(seq, kind="stable")  # newest last, so it wins
        for k in order:
            if seq[k] <= self.table_seq[dst[k], origin[k], g[k]]:
                continue  # a reordered older reply never overwrites a newer one
            self.table_seq[dst[k], origin[k], g[k]] = seq[k]
            self.table_gram[dst[k], origin[k], g[k]] = gram[k]
            self.table_vec[dst[k], origin[k], g[k]] = vec[k]
            self.table_created[dst[k], origin[k], g[k]] = created[k]
            self.table_has[dst[k], origin[k], g[k]] = True
            self.dirty[dst[k], g[k]] = True
        self.suspected[dst, origin] = False  # heard from again
        self._complete(dst, g)

    def _complete(self, dst: np.ndarray, g: np.ndarray) -> None:
        """Close the open exchanges of (dst, g) that every member not suspected has answered since they opened."""
        agents, gs = dst[self.open[dst, g]], g[self.open[dst, g]]
        if not len(agents):
            return
        pairs = np.unique(agents * self.gamma + gs)
        agents, gs = pairs // self.gamma, pairs % self.gamma
        answered = (self.table_created[agents, :, gs] >= self.opened_at[agents, gs][:, None]) \
            | self.suspected[agents] | ~self.near[agents]
        done = answered.all(axis=1)
        now = self.sim.now
        for i, k in zip(agents[done].tolist(), gs[done].tolist(), strict=True):
            if self.transmissions[i, k] == 1:  # Karn's rule: only an exchange never repeated is measured
                self.timer.sample(i, now - self.opened_at[i, k])
            self.open[i, k] = False

    # -- the trial ------------------------------------------------------------------
    def _resynchronise(self) -> None:
        agents, gs = np.nonzero(self.dirty)
        if not len(agents):
            return
        self.dirty[:] = False
        cal, d = self.cal, self.d
        has = self.table_has[agents, :, gs] & self.near[agents]            # (n, M)
        gram = np.einsum("nj,njab->nab", has, self.table_gram[agents, :, gs])
        missing = self.near[agents].sum(axis=1) - has.sum(axis=1)
        S = gram + (missing * cal.rho_min)[:, None, None] * np.eye(d)
        s = np.einsum("nj,nja->na", has, self.table_vec[agents, :, gs])
        rows = agents * self.gamma + gs
        self.state.synchronise(rows, S, s)

    def _reply(self) -> None:
        """Agents that heard a request for g after their last release for g release and flood."""
        pending = self.asked > self.released_at
        if self._up is not None:
            pending &= self._up[:, None]  # a crashed agent answers nothing
        agents, gs = np.nonzero(pending)
        if not len(agents):
            return
        now = self.sim.now
        rows = agents * self.gamma + gs
        released = self.privatizer.release(self.state.take_statistic(rows), rows)
        gram, vec = self.privatizer.split(released)
        self.released_at[agents, gs] = now
        # an agent publishes at most one record per call: one call per estimator
        for g in np.unique(gs):
            pick = gs == g
            recs = self.rep_flood.publish(agents[pick], {"g": np.full(pick.sum(), g), "gram": gram[pick],
                                                         "vec": vec[pick]})
            self._store(agents[pick], agents[pick], np.full(pick.sum(), g), recs["seq"], recs["created"], gram[pick],
                        vec[pick])
        self.replies += len(agents)

    def _may_ask(self, agents: np.ndarray, g: int, now: float) -> np.ndarray:
        """2 gamma trials since the last request for g, and the exchange complete or its RTO expired."""
        last = self.requested_at[agents, g]
        ok = now >= last + 2 * self.gamma
        for j in np.flatnonzero(ok & self.open[agents, g]):
            i = int(agents[j])
            ok[j] = now >= last[j] + self.timer.rto(i, int(self.transmissions[i, g]) - 1)
        return ok

    def _asking(self, askers: np.ndarray, g: int, now: float) -> None:
        """``askers`` request g now: a new exchange, or a repeat of an open one (after ``give_up`` requests of
        one exchange, its silent members are suspected and a new exchange starts)."""
        for i in askers[self.open[askers, g]].tolist():
            if self.transmissions[i, g] >= self.params["give_up"]:
                silent = self.near[i] & (self.table_created[i, :, g] < self.opened_at[i, g])
                self.suspected[i, silent] = True
                self.open[i, g] = False
        fresh = askers[~self.open[askers, g]]
        self.opened_at[fresh, g] = now
        self.transmissions[fresh, g] = 0
        self.open[askers, g] = True
        self.transmissions[askers, g] += 1
        self.requested_at[askers, g] = now

    def step(self, now: float) -> None:
        self._resynchronise()
        g = self.trial % self.gamma
        self.trial += 1
        state, bandit = self.state, self.sim.bandit
        contexts = bandit.observe(self.everyone)
        active = self.everyone if self._up is None else self.everyone[self._up]
        if len(active) < self.M:
            contexts = contexts[active]
        rows = active * self.gamma + g
        beta = self.params["beta_scale"] * self.cal.beta(state.logdet_v[rows], self.beta_group[rows])
        arms = state.choose(contexts, beta, rows)
        rewards = bandit.pull_many(active, arms)
        state.update(contexts[np.arange(len(active)), arms], rewards, rows)
        state.dt[rows] += 1
        fire = sync_trigger(state.logdet_w[rows], state.logdet_s[rows], state.dt[rows], self.D)
        fire &= self._may_ask(active, g, now)
        askers = active[np.flatnonzero(fire)]
        if len(askers):
            self._asking(askers, g, now)
            self.req_flood.publish(askers, {"g": np.full(len(askers), g)})
            self.asked[askers, g] = now  # the asker answers its own request too
            self.requests += len(askers)
            self.sim.metrics.rounds += len(askers)
        self._reply()
        self._resynchronise()  # own replies count at once
        self.req_flood.flush()
        self.rep_flood.flush()

    def results(self) -> dict[str, float]:
        cal = self.cal
        return {"threshold_D": self.D, "sync_requests": self.requests, "sync_replies": self.replies,
                "tree_depth": cal.m, "rho_min": cal.rho_min, "rho_max": cal.rho_max, "kappa": cal.kappa,
                "epsilon_spent": cal.epsilon, "mean_neighbourhood": float(self.group.mean()),
                "comm_bound_prop1": communication_bound(self.D, horizon=self.T, dimension=self.d, rho_min=cal.rho_min,
                                                        rho_max=cal.rho_max, L=self.params["L"])}
