"""Decentralized (peer-to-peer) FedUCB (Dubey & Pentland, NeurIPS 2020, Sec. 4.2, Thm. 2, Remark 5).

The appendix with the pseudocode is not in the converted text; this module implements what
Sec. 4.2 describes, with the decisions below (each pinned by a test in ``tests/test_feducb_p2p.py``).

* Communication is the LOCAL protocol: a message travels at most gamma hops, one hop per trial
  (unit link delays), duplicates dropped; it is :class:`netsim.flooding.Flooding` (issue 5),
  used twice: kind ``feducb-p2p-request`` and kind ``feducb-p2p-reply``.
* Any delay law (realistic mode). The paper assumes unit delays; with sampled per-hop delays a
  record still travels at most gamma hops (its life), each hop taking the link's sampled delay
  rounded up to the next trial (the LOCAL layer forwards at the trial's flush). Nothing in the
  algorithm waits for a reply: a late reply is stored when it arrives (if it is the newest of its
  origin, see below) and the group statistics are resynchronised at the next trial. The 2 gamma
  trials between two requests for g stay a rate limit, no longer the exact time replies need.
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
* Threshold D: the same modes as the centralized protocol with M = |N_i| replaced by the number
  of agents M in the formulas (``communication`` / ``threshold`` keys), T counted in trials.
"""

from __future__ import annotations

import math
from typing import Any

import networkx as nx
import numpy as np

from netsim import params as P
from netsim.errors import InputError
from netsim.flooding import Flooding
from netsim.protocol import Protocol
from netsim.registry import register_protocol
from protocols.feducb.linucb import (
    FIELDS,
    LinUCBState,
    communication_bound,
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


@register_protocol
class DecentralizedFedUCB(Protocol):
    """Sec. 4.2 (appendix): gamma round-robin estimators, requests and replies over LOCAL."""

    name = "feducb-p2p"
    columns = {
        "threshold_D": P.column("synchronisation threshold D", doc="the log-det threshold D in force"),
        "sync_requests": P.column("synchronisations asked", doc="synchronisation requests sent"),
        "sync_replies": P.column("synchronisation replies", doc="synchronisation replies sent"),
        "tree_depth": P.column("tree depth", doc="depth of the binary-tree counter"),
        "rho_min": P.column("ρ_min", doc="smallest regulariser of the privatized Gram matrix"),
        "rho_max": P.column("ρ_max", doc="largest regulariser of the privatized Gram matrix"),
        "kappa": P.column("κ", doc="the noise bound κ of the calibration"),
        "epsilon_spent": P.column("privacy loss spent ε", doc="the ε the released statistics spent"),
        "mean_neighbourhood": P.column("mean neighbourhood", doc="mean agents within γ hops"),
        "comm_bound_prop1": P.column("communication bound (Prop. 1)", doc="the paper's bound on the synchronisations"),
    }
    description = "decentralized FedUCB (dubey2020 Sec. 4.2): gamma subsampled estimators, LOCAL-protocol sync"
    fields = {**FIELDS, "gamma": P.integer(1, low=1, doc="time-to-live of messages = number of estimators",
                                           label="message life γ", unit="hops")}
    servers = 0
    requires_connected = True
    bandit_kinds = ("linear",)
    crash_states = ("kept", "lost")

    @classmethod
    def check(cls, scenario: Any) -> None:
        if scenario.clock["period"] != 1.0:  # trials are the unit of the round-robin and of T
            raise InputError(f"period = {scenario.clock['period']}; accepted: 1.0 (one hop per trial)",
                             key="clock.period")

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
        self.dirty = np.zeros((M, gamma), dtype=bool)
        self.pending_until = np.full((M, gamma), -np.inf)  # no new request for g before this time
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
        self._up = sim.faults.up[:M] if sim.faults.has_crashes else None
        if self._up is not None:
            sim.faults.on_restart(self._restarted)
        sim.every(sim.clock_period, self.step)

    def _restarted(self, node: int, state: str) -> None:
        """A crashed agent is back; with ``state = "lost"`` it starts as a fresh learner (module docstring)."""
        if node >= self.M or state != "lost":
            return
        gamma, cal = self.gamma, self.cal
        rows = node * gamma + np.arange(gamma)
        group = self.beta_group[rows]
        fresh = LinUCBState(gamma, self.d, s0=group * cal.rho_min, shift_w=group * (cal.rho_max - cal.rho_min))
        for name in ("S", "s", "U", "u", "Q", "u_tilde", "v_inv", "logdet_s", "logdet_v", "w_inv", "logdet_w",
                     "dt"):
            getattr(self.state, name)[rows] = getattr(fresh, name)
        self.privatizer.restart(rows)
        self.table_has[node] = False
        self.table_seq[node] = -1
        self.table_gram[node] = 0.0
        self.table_vec[node] = 0.0
        self.dirty[node] = False
        self.pending_until[node] = -np.inf
        self.asked[node] = -np.inf
        self.released_at[node] = -np.inf
        self.req_flood.forget([node])
        self.rep_flood.forget([node])

    # -- message handlers (run at delivery instants, before the tick) -------------
    def _on_request(self, dst: np.ndarray, records: np.ndarray) -> None:
        np.maximum.at(self.asked, (dst, records["g"].astype(np.int64)), records["created"])

    def _on_reply(self, dst: np.ndarray, records: np.ndarray) -> None:
        self._store(dst, records["origin"].astype(np.int64), records["g"].astype(np.int64), records["seq"],
                    records["gram"], records["vec"])

    def _store(self, dst, origin, g, seq, gram, vec) -> None:
        order = np.argsort(seq, kind="stable")  # newest last, so it wins
        for k in order:
            if seq[k] <= self.table_seq[dst[k], origin[k], g[k]]:
                continue  # a reordered older reply never overwrites a newer one
            self.table_seq[dst[k], origin[k], g[k]] = seq[k]
            self.table_gram[dst[k], origin[k], g[k]] = gram[k]
            self.table_vec[dst[k], origin[k], g[k]] = vec[k]
            self.table_has[dst[k], origin[k], g[k]] = True
            self.dirty[dst[k], g[k]] = True

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
            self._store(agents[pick], agents[pick], np.full(pick.sum(), g), recs["seq"], gram[pick], vec[pick])
        self.replies += len(agents)

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
        fire &= now >= self.pending_until[active, g]
        askers = active[np.flatnonzero(fire)]
        if len(askers):
            self.pending_until[askers, g] = now + 2 * self.gamma
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
