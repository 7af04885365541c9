"""Centralized FedUCB: differentially private federated linear UCB (Dubey & Pentland, NeurIPS 2020).

Paper: "Differentially-Private Federated Linear Bandits", Alg. 1 (CENTRALIZED FEDUCB), Alg. 2
(PRIVATIZER, :mod:`protocols.privacy.gaussian_tree`), Props. 1, 2, 4, Thm. 1, Remark 1, Sec. 4.4.

Each agent i runs OFUL (Abbasi-Yadkori et al. 2011) on V_i = S_i + U_i and u~_i = s_i + u_i
(Alg. 1 line 4), where (S, s) is the privatised group statistic of the last synchronisation
and (U_i, u_i) the agent's own data since then. It plays
argmax_x <x, theta_hat> + beta ||x||_{V^-1} with theta_hat = V^-1 u~ (Alg. 1 lines 6-8, Eq. 3)
and beta from Prop. 2 (:meth:`FedUCBCalibration.beta`).

Synchronisation (Alg. 1 lines 12-21): after its update, agent i asks for a synchronisation when

    log det(V_i + x x^T + M (rho_max - rho_min) I) - log det(S_i) > D / dt_i        (line 12)

Then every agent privatises its statistic Q_i (Alg. 1 line 11) with its own tree (Alg. 2),
uploads (U_hat_i, u_hat_i) to the controller, which returns S = sum_i U_hat_i, s = sum_i
u_hat_i to all (lines 16-20); U_i, u_i, Q_i and dt_i are reset (lines 21, 24).

Decisions where the text is garbled or silent (each pinned by a test):

* dt_i counts the trials since the last synchronisation *including the current one* (it is
  incremented before the test; Wang et al. 2019 write (t - t_last) log det ratio > D). With the
  literal order (increment after the test) D / 0 would forbid synchronising two trials in a
  row, and the O(MT) mode (D = 0, synchronise every trial) would be impossible.
* The test is strict (>). With D = 0 it fires whenever the left side is positive, which it is
  after every non-zero action, so D = 0 synchronises every trial.
* One synchronisation is a real round trip through the server node (``servers = 1``): each
  triggering agent sends ``feducb-request``; the controller (ignoring requests while a round is
  open) sends ``feducb-call`` to every agent; each agent privatises and sends ``feducb-upload``;
  when all M uploads are in, the controller sends ``feducb-sync`` (S, s) to every agent and the
  round is counted in ``rounds``. With zero server delay (the paper's setting) all of it
  happens within the trial that triggered it. With delays, agents keep playing meanwhile:
  data observed after an agent's upload stay in its local (U, u) when (S, s) arrives.
* Communication modes of Experiment 2 (``communication``; T = horizon in trials):
  ``"mlogt"``  D = 2 T d / (log(rho_max/rho_min + T L^2/(d rho_min)) + 1)  (Thm. 1, O(M log T));
  ``"m1.5"``   D = T log(M T) / (d M)  (the DisLinUCB threshold of Wang et al. 2019, ref. [48],
  which Remark 1 follows for O(M^1.5 d^3) communication);
  ``"mt"``     D = 0 (synchronise every trial, O(M T)).
  ``threshold`` (a number >= 0) overrides D.
* The tree depth uses n = T releases (Remark 4: the number of rounds is not fixed a priori).
* Ties in the UCB argmax go to the lowest row index (numpy argmax).
* ``beta_scale`` multiplies beta (default 1 = Prop. 2 exactly). The bundled scenarios use 0.1
  and say why in ``scaled`` (docs/protocols/feducb.md, "Scaling").
* Private runs: right after a synchronisation the trigger's left side already holds about
  d log(1 + M (rho_max - rho_min) / lambda(S)) ~ d log 2 from the shift alone, so with the large
  Thm. 1 threshold (``mlogt``) a private run synchronises rarely; this is the rule as printed.

Realistic timelines (docs/faults.md, docs/protocols/feducb.md "Faults"). The four kinds travel
on transports (:class:`netsim.comm.transport.Transport`) sharing one RFC 6298
:class:`~netsim.comm.transport.RetransmitTimer`
(keys ``rto_initial``, ``rto_min``, ``rto_max``). When no message can be lost
(:func:`netsim.comm.transport.can_lose`: no link loss, outages or crashes; paper mode) they are plain
datagrams, so the run sends exactly what Alg. 1 sends; otherwise:

* requests, uploads and syncs are acknowledged and retransmitted until acknowledged (a lost one
  is late, never lost); a newer sync to an agent replaces one still outstanding (``cancel``);
* a call is a request whose answer is the agent's upload (``acknowledge=False``): it is
  retransmitted on the timer until the upload arrives, and after ``give_up`` transmissions without
  one the controller stops waiting for that agent in this round (a crashed agent) and *suspects*
  it: later rounds still call it but do not wait for it, until it is heard from again (a request
  or an upload). This is the only failure detector; there is no fixed deadline.

Every message also carries a sequence number so that a copy or a late message never acts twice
or overwrites newer state, transport or not (duplication and reordering lose nothing, so they run
on datagrams): requests carry the sender's own number (``netsim.comm.sequencing``; a copy is dropped at
the controller) and the last round r_i the sender applied; calls, uploads and syncs carry the round
number r (the controller's sequence): an agent answers the call of a round at most once (a copy of
a call would otherwise privatise and upload again), the controller keeps one upload per agent and
round, and an agent applies a sync only if its round is newer than the last it applied.

* A round closes when every agent it waits for has uploaded; the agents not heard from count with
  their last upload (uploads are the tree's prefix sums, so the next one carries everything), rho_min
  I if never heard. An upload that arrives after its round closed is kept as the agent's last upload
  if it is newer than the one held.
* A request whose r_i is behind the controller's round count is answered with the last (S, s)
  (a catch-up sync) instead of opening a round; a request never opens a second round while one
  is open (the open round's sync answers it).
* Crashes: a crashed agent plays no trial and answers nothing (its call is given up). When it
  restarts it asks for a catch-up, which opens no round (``kept``: it keeps its statistics and
  what it had outstanding; ``lost``: it starts afresh as at line 1, its tree restarts for a new
  incarnation, its transports forget it, and it recovers S, s from the controller, which keeps
  the data of its former incarnation). A crashed controller stalls synchronisation: what is sent
  to it is retransmitted until it is back (``kept``: the open round goes on); a controller that
  restarts ``lost`` forgets the open round and the uploads, numbers its rounds above every number
  used before (a new incarnation) and opens a round at once, rebuilding S from its uploads (agents
  not heard from count as fresh).
* ``[clock] jitter > 0``: every agent plays on its own clock (tick k at k + U[0, jitter) periods,
  drawn from its ``("clock", agent)`` stream), drawing only its own contexts; otherwise one clock
  plays every agent at once.
* ``[adversary]``: uploads (U_hat, u_hat) and syncs (S, s) carry the statistics
  (``corruptible``); a byzantine agent or a corrupting link replaces each value of them w.p.
  ``corruption`` by a draw of Q (:mod:`netsim.comm.corruption`, the Gram matrices kept symmetric). The
  controller has no defence: a lie enters S as it is.

Linear algebra: V^-1 is kept by Sherman-Morrison rank-one updates and log det V by the
matrix-determinant lemma (log det(V + x x^T) = log det V + log(1 + x^T V^-1 x)), batched over
agents. When rho_max > rho_min the trigger's W = V + M(rho_max - rho_min) I is tracked the same
way. At each synchronisation V and W are rebuilt from S (one batched inverse / slogdet). With one
clock, every agent's contexts are drawn at once and the UCB runs as batched products over agents
(:meth:`LinUCBState.choose`).
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from netsim.comm import (
    INCARNATION,
    Fanin,
    Fanout,
    Lie,
    Protocol,
    ProtocolError,
    ReplayWindow,
    Sequencer,
    SharedDraws,
    Transport,
    can_lose,
    check_timer,
    register_protocol,
    rewriting,
    timer_from,
)
from netsim.comm import params as P
from protocols.feducb.linucb import (
    COLUMNS,
    FIELDS,
    LinUCBState,
    calibration_for,
    communication_bound,
    statistics_bytes,
    sync_trigger,
    threshold_for,
    trials_of,
)
from protocols.feducb.lockstep import Lockstep, instant
from protocols.privacy.gaussian_tree import GaussianTreePrivatizer


def lie_upload(payload: tuple, lie: Lie) -> tuple:
    """Where an upload (r, incarnation, U_hat, u_hat) carries statistics: U_hat (symmetric) and u_hat."""
    r, incarnation, gram, vec = payload
    return r, incarnation, lie(gram, symmetric=True), lie(vec)


def lie_sync(payload: tuple, lie: Lie) -> tuple:
    """Where a sync (r, S, s) carries statistics: S (symmetric) and s."""
    r, gram, vec = payload
    return r, lie(gram, symmetric=True), lie(vec)


def _total(terms: list[np.ndarray]) -> np.ndarray | int:
    """``sum(terms)`` as Python adds it (0 + t_1 + t_2 + ..., term after term), in one NumPy reduction (0 for none)."""
    return np.add.reduce(np.array(terms, dtype=float), axis=0, initial=0.0) if terms else 0


@register_protocol
class CentralizedFedUCB(Protocol):
    """Alg. 1 with a controller node; see the module docstring."""

    name = "feducb"
    columns = COLUMNS
    description = "centralized FedUCB (dubey2020 Alg. 1): private federated OFUL with log-det synchronisation"
    fields: ClassVar[Mapping[str, P.Field]] = FIELDS
    servers = 1
    agent_links = False
    bandit_kinds = ("linear",)
    crash_states = ("kept", "lost")
    corruptible = ("feducb-upload", "feducb-sync")

    @classmethod
    def check(cls, scenario: Any) -> None:
        check_timer(scenario.protocol)

    lockstep_scope = "seed"  # only trials of one seed sequence can share a draw

    @classmethod
    def lockstep_key(cls, scenario: Any) -> Any:
        """Trials that may observe the same contexts run together: one seed sequence (``lockstep_scope``), the
        same agents and the same bandit (the contexts depend on nothing else). Fig. 1(C)'s variants differ in d
        and share nothing: each runs alone (stepping them in turn only evicted each other's arrays from the
        cache: 15.3 against 13.2 CPU s, medians of nine runs of its trial-0 group at T / 4)."""
        return scenario.run["seed"], scenario.network["agents"], repr(scenario.bandit)

    @classmethod
    def lockstep(cls, protocols: list[CentralizedFedUCB]) -> Any:
        """Run trials side by side, each on its own events, making their common context draws once.

        Trials of one seed sequence that differ in a protocol key (the privacy budgets of Fig. 1(A),
        the threshold modes of Fig. 1(B)) observe the same contexts: the contexts do not depend on the
        agents' choices, only on the stream and the number of agents. Each trial starts as alone and
        processes its own events; the bandits share a :class:`~netsim.comm.SharedDraws`, so a context
        draw that another trial already made from the same stream state is taken from it (read-only)
        instead of drawn again. In paper mode (:func:`protocols.feducb.lockstep.instant`) the ticks of the
        trials that draw alike are computed on one stacked learner state (:mod:`protocols.feducb.lockstep`);
        every other trial steps on its own events. Every trial's results are those it gets alone
        (tests/test_feducb_lockstep.py).
        """
        shared = SharedDraws()
        for protocol in protocols:
            protocol.sim.streams.shared = shared
            protocol.start()
        return Lockstep([p for p in protocols if instant(p.sim)], shared).advance

    @classmethod
    def work(cls, scenario: Any, *, slots: float, links: float) -> tuple[float, float]:
        """The default per slot; memory: every agent's OFUL statistics and tree sums (netsim.engine.budget)."""
        events, _ = super().work(scenario, slots=slots, links=links)
        return events, statistics_bytes(scenario, learners=scenario.network["agents"] + 1, slots=slots)

    def start(self) -> None:
        sim = self.sim
        M = sim.num_agents
        self.d = d = sim.bandit.dimension
        self.T = trials_of(sim)
        self.cal = calibration_for(self.params, dimension=d, agents=M, releases=self.T)
        cal = self.cal
        self.D = (threshold_for(self.params["communication"], horizon=self.T, dimension=d, agents=M,
                                rho_min=cal.rho_min, rho_max=cal.rho_max, L=self.params["L"])
                  if self.params["threshold"] == "auto" else float(self.params["threshold"]))
        # Alg. 1 line 1: S = M rho_min I; trigger shift M (rho_max - rho_min).
        self.state = LinUCBState(M, d, s0=M * cal.rho_min, shift_w=M * (cal.rho_max - cal.rho_min))
        self.privacy_rngs = [sim.streams.for_("privacy", i) for i in range(M)]
        # noise read ahead in blocks unless a crash could give a restarted agent a new tree on its generator
        self.privatizer = GaussianTreePrivatizer(cal, self.privacy_rngs, read_ahead=not sim.faults.has_crashes)
        self.reborn: dict[int, GaussianTreePrivatizer] = {}  # trees of agents that restarted without state
        self.ahead: tuple[float, np.ndarray, list[int]] | None = None  # a tick computed by a lockstep driver
        self.server = sim.servers[0].id
        self.everyone = np.arange(M)
        self.everyone_list = self.everyone.tolist()
        self.up = sim.faults.up
        # agents
        self.pending = np.zeros(M, dtype=bool)  # request sent or call answered, sync not yet received
        self.synced = np.zeros(M, dtype=np.int64)  # last round applied
        self.incarnation = np.zeros(M, dtype=np.int64)
        self.request_numbers = Sequencer()
        self.calls_seen, self.syncs_seen = ReplayWindow(), ReplayWindow()
        self.requests = 0
        # controller
        self.completed = 0
        self.round_open = False
        self.open_round = 0
        self.uploads: dict[int, tuple[int, int, np.ndarray, np.ndarray]] = {}  # agent -> its upload (r, inc., U, u)
        # the uploads of the last call answered by every agent at once (paper mode), and the stacked statistics whose
        # rows they carry: when exactly these arrive as one group, the round sums the stacks (_on_upload)
        self.answered_round: tuple[list[tuple], np.ndarray, np.ndarray] | None = None
        self.stacked: tuple[np.ndarray, np.ndarray] | None = None  # the open round's uploads as stacks, if so held
        self.waiting: set[int] = set()  # agents the open round waits for
        self.call_numbers: dict[int, int] = {}  # transport number of the open round's call to each agent
        self.suspected = np.zeros(M, dtype=bool)  # given up in a round, not heard from since
        self.latest: dict[int, tuple[int, int, np.ndarray, np.ndarray]] = {}  # (round, incarnation, U, u) per agent
        self.former: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # data of former incarnations
        self.last_sync: tuple[int, np.ndarray, np.ndarray] | None = None
        self.requests_seen = ReplayWindow()
        reliable = can_lose(sim.scenario)
        timer = timer_from(self.params, sim.clock_period) if reliable else None

        def transport(kind: str, handler: Any, **how: Any) -> Transport:
            return Transport(sim, kind, handler, timer=timer, up=self.up, reliable=reliable, **how)

        self.request_link = transport("feducb-request", self._on_request, fanin=True)
        self.calls = transport("feducb-call", self._on_call, acknowledge=False, attempts=self.params["give_up"],
                               on_give_up=self._gave_up, fanout=True)
        self.upload_link = transport("feducb-upload", self._on_upload, fanin=True)
        self.syncs = transport("feducb-sync", self._on_sync, fanout=True)
        self.links = (self.request_link, self.calls, self.upload_link, self.syncs)
        if sim.network.adversary is not None:
            self.upload_link.corruptible(rewriting(lie_upload))
            self.syncs.corruptible(rewriting(lie_sync))
        if sim.faults.has_crashes:
            sim.faults.on_restart(self._restarted)
        if sim.clock_jitter > 0:  # every agent on its own jittered clock (paused while it is down)
            for agent in range(M):
                sim.every(sim.clock_period, lambda now, a=np.array([agent]): self.step(now, a), node=agent)
        else:
            sim.every(sim.clock_period, self.step)

    # -- agents ---------------------------------------------------------------
    def step(self, now: float, agents: np.ndarray | None = None) -> None:
        """One trial (Alg. 1 lines 5-14) of every agent that is up (one clock), or of ``agents`` (own clocks)."""
        if self.ahead is not None:  # computed by the lockstep driver (protocols.feducb.lockstep): book and send
            self._step_ahead(now)
            return
        state, bandit = self.state, self.sim.bandit
        beta_scale = self.params["beta_scale"]
        if agents is None:
            up = self.up[: len(self.everyone)]
            if up.all():
                agents, rows = self.everyone, None
            else:  # crashed agents play no trial
                agents = rows = np.flatnonzero(up)
                if not len(agents):
                    return
            arms, x = self._choose_everyone(beta_scale * self.cal.beta(state.logdet_v))
            if rows is not None:
                arms, x = arms[rows], x[rows]
        else:
            rows = agents
            contexts = bandit.observe(agents)
            arms = state.choose(contexts, beta_scale * self.cal.beta(state.logdet_v[rows]), rows)
            x = contexts[np.arange(len(agents)), arms]
        if rows is None:  # every agent, one pull each (the floats of pull_many, without its sorting)
            rewards = bandit.pull_each(arms)
            state.update(x, rewards)
            state.dt += 1
            fire = sync_trigger(state.logdet_w, state.logdet_s, state.dt, self.D) & ~self.pending
        else:
            rewards = bandit.pull_many(agents, arms)
            state.update(x, rewards, rows)
            state.dt[agents] += 1
            fire = sync_trigger(state.logdet_w[agents], state.logdet_s[agents], state.dt[agents], self.D) \
                & ~self.pending[agents]
        fired = agents[fire].tolist()
        if fired:
            self.requests += len(fired)
            self._request_rounds(fired)

    def _step_ahead(self, now: float) -> None:
        """The tick at ``now`` that the lockstep driver computed: its pulls booked, its round requests sent."""
        when, arms, fired = self.ahead
        if when != now:
            raise ProtocolError(f"feducb lockstep: the tick at {now:g} was computed for {when:g}")
        self.ahead = None
        self.sim.bandit.book_each(arms)
        if fired:
            self.requests += len(fired)
            self._request_rounds(fired)

    def _choose_everyone(self, beta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every agent's contexts (one shared stream, so a crash leaves the others' draws alone) and choice."""
        contexts = self.sim.bandit.observe(self.everyone)
        arms = self.state.choose(contexts, beta)
        return arms, contexts[self.everyone, arms]

    def _request_rounds(self, agents: list[int]) -> None:
        """:meth:`_request` of a round by each of ``agents`` (in this order), sent as one batch."""
        self.pending[agents] = True
        numbers = self.request_numbers.next_each(agents)
        payloads = list(zip(numbers, self.synced[agents].tolist(), [True] * len(agents), strict=True))
        self.request_link.send_each(agents, self.server, payloads)

    def _request(self, agent: int, *, want: bool) -> None:
        """Ask for a round (``want``; the agent then waits for a sync) or only for a catch-up."""
        if want:
            self.pending[agent] = True
        payload = (self.request_numbers.next(agent), int(self.synced[agent]), want)
        self.request_link.send(agent, self.server, payload)

    def _on_call(self, calls: list[Fanout]) -> None:
        agents, rounds = [], []
        for r, _, dsts in calls:  # a copy of a call, or an older round's, is not answered
            fresh = self.calls_seen.newest_each(dsts.tolist(), self.server, r)
            agents += fresh
            rounds += [r] * len(fresh)
        if not agents:
            return
        every = agents == self.everyone_list  # a round's call, in order: whole arrays and slices, not gathered rows
        self.pending[slice(None) if every else agents] = True
        gram, vec = self.privatizer.split(self.privatizer_release(self.everyone if every else
                                                                  np.array(agents, dtype=np.int64), every=every))
        incarnations = self.incarnation.tolist() if every else self.incarnation[agents].tolist()
        payloads = list(zip(rounds, incarnations, gram, vec, strict=True))
        self.upload_link.send_each(agents, self.server, payloads, size=(self.d + 1) ** 2)
        self.answered_round = (payloads, gram, vec) if every and len(calls) == 1 else None  # one round's call

    def privatizer_release(self, agents: np.ndarray, *, every: bool = False) -> np.ndarray:
        """Alg. 1 line 16: privatise Q of ``agents`` (all agents release together in Alg. 1); ``every``: ``agents``
        are every agent in order (their learners' rows are then read as one slice)."""
        statistic = self.state.take_statistic(slice(None) if every else agents)
        if not self.reborn:
            return self.privatizer.release(statistic, agents)
        out = np.empty_like(statistic)
        plain = np.array([a not in self.reborn for a in agents])
        if plain.any():
            out[plain] = self.privatizer.release(statistic[plain], agents[plain])
        for j in np.flatnonzero(~plain):
            out[j] = self.reborn[int(agents[j])].release(statistic[j: j + 1])[0]
        return out

    def _on_sync(self, syncs: list[Fanout]) -> None:
        everyone = self.everyone_list
        for (r, S, s), _, dsts in syncs:  # a copy, or a sync older than the last applied, is ignored
            fresh = self.syncs_seen.newest_each(dsts.tolist(), self.server, r)
            if not fresh:
                continue
            # every agent in order (a round's sync): views of the learners' rows, not gathered copies
            agents = slice(None) if fresh == everyone else np.array(fresh, dtype=np.int64)
            self.state.synchronise(agents, S, s)
            self.synced[agents] = r
            self.pending[agents] = False

    def _restarted(self, node: int, state: str) -> None:
        if node == self.server:
            self._controller_restarted(state)
            return
        if state == "lost":  # a fresh learner with a new privatizer tree (a new incarnation)
            self.state.reset(np.array([node]))
            self.incarnation[node] += 1
            self.reborn[node] = GaussianTreePrivatizer(self.cal, [self.privacy_rngs[node]])
            self.synced[node] = 0
            self.pending[node] = False
            self.request_numbers.restart(node)
            self.calls_seen.forget(node)
            self.syncs_seen.forget(node)
            for link in self.links:
                link.forget(node)
        self._request(node, want=False)  # catch up on the rounds it missed

    # -- controller -----------------------------------------------------------
    def _on_request(self, requests: list[Fanin]) -> None:
        want_round = False
        completed = self.completed
        for payloads, srcs, _ in requests:
            self.suspected[srcs] = False  # heard from
            senders = srcs.tolist()
            first = self.requests_seen.accept_each(self.server, senders, [payload[0] for payload in payloads])
            for src, (_, synced, want), new in zip(senders, payloads, first, strict=True):
                if not new:
                    continue  # a copy
                if synced < completed and self.last_sync is not None:
                    self._send_sync(src, self.last_sync)
                elif want:
                    want_round = True
        if want_round and not self.round_open:
            self._open_round()

    def _open_round(self) -> None:
        self.round_open = True
        self.open_round = r = self.completed + 1
        self.uploads, self.stacked = {}, None
        self.waiting = set(np.flatnonzero(~self.suspected).tolist() if self.suspected.any() else self.everyone_list)
        numbers = self.calls.send_many(self.server, self.everyone_list, r)
        # the transport's number of each agent's call (datagrams have none: the reliable path reads them)
        self.call_numbers = dict(zip(self.everyone_list, numbers, strict=True)) if self.calls.reliable else {}

    def _on_upload(self, uploads: list[Fanin]) -> None:
        if self._hold_stacked(uploads):
            self._close_if_complete()
            return
        reliable, held = self.calls.reliable, self.uploads
        for payloads, srcs, _ in uploads:
            self.suspected[srcs] = False  # heard from
            for agent, payload in zip(srcs.tolist(), payloads, strict=True):
                r, incarnation, gram, vec = payload
                if self.round_open and r == self.open_round:
                    if reliable:  # the upload answers the call
                        self.calls.answered(self.server, agent, self.call_numbers[agent])
                    if agent not in held:  # one per agent and round
                        held[agent] = payload
                else:  # late: its round closed without it; still the agent's newest data if newer than held
                    self._keep(agent, r, incarnation, gram, vec)
        self._close_if_complete()

    def _hold_stacked(self, uploads: list[Fanin]) -> bool:
        """Paper mode's shortcut of :meth:`_on_upload`: the open round's first uploads are one group from every agent
        in order, the very payloads of one round's call (:attr:`answered_round`, all of round r): held as the loop
        would hold them (every agent heard from, each upload new), with the stacks they are rows of, which
        :meth:`_close_round` sums as they are. Anything else (datagrams only) takes the loop."""
        sent = self.answered_round
        if sent is None or len(uploads) != 1 or self.uploads or not self.round_open or self.calls.reliable:
            return False
        payloads, srcs, _ = uploads[0]
        if len(payloads) != len(sent[0]) or payloads[0][0] != self.open_round \
                or not all(map(operator.is_, payloads, sent[0])) or not np.array_equal(srcs, self.everyone):
            return False
        self.suspected[srcs] = False  # heard from
        self.uploads = dict(zip(srcs.tolist(), payloads, strict=True))
        self.stacked = sent[1:]
        return True

    def _gave_up(self, src: int, agent: int, r: int) -> None:
        """``give_up`` calls of round ``r`` to ``agent`` went unanswered: stop waiting for it."""
        if self.round_open and r == self.open_round:
            self.suspected[agent] = True
            self.waiting.discard(agent)
            self._close_if_complete()

    def _close_if_complete(self) -> None:
        if self.round_open and self.waiting <= self.uploads.keys():
            self._close_round()

    def _keep(self, agent: int, r: int, incarnation: int, gram: np.ndarray, vec: np.ndarray) -> None:
        """Hold (U_hat, u_hat) as ``agent``'s last upload, keeping a former incarnation's data apart."""
        before = self.latest.get(agent)
        if before is not None and (before[1], before[0]) >= (incarnation, r):
            return  # not newer than what is held
        if before is not None and before[1] < incarnation:  # keep the former incarnation's data
            old = self.former.get(agent, (0.0, 0.0))
            self.former[agent] = (old[0] + before[2] - self.cal.shift * np.eye(self.d), old[1] + before[3])
        self.latest[agent] = (r, incarnation, gram, vec)

    def _close_round(self) -> None:
        self.calls.cancel(self.server)
        r = self.open_round
        latest = self.latest
        if not self.reborn:  # one incarnation: every held upload (round r) is newer than the agent's latest
            latest.update(self.uploads)
        else:
            for agent, (_, incarnation, gram, vec) in self.uploads.items():
                before = latest.get(agent)
                if before is None or (before[1] == incarnation and before[0] < r):  # newer, same incarnation: held
                    latest[agent] = (r, incarnation, gram, vec)
                else:
                    self._keep(agent, r, incarnation, gram, vec)
        # Alg. 1 line 18: the sum of every agent's latest release (this round's, in arrival order, first)
        if self.stacked is not None and not self.former:  # every agent's, in agent order: the stacks, summed alike
            S, s = (np.add.reduce(stack, axis=0, initial=0.0) for stack in self.stacked)  # the floats of _total
            self.stacked = None
            self._sync_round(r, S, s)
            return
        shift = self.cal.shift * np.eye(self.d)
        grams = [g for _, _, g, _ in self.uploads.values()]
        vecs = [v for _, _, _, v in self.uploads.values()]
        if len(self.uploads) < self.sim.num_agents or self.former:
            for agent in range(self.sim.num_agents):
                if agent not in self.uploads:
                    if agent in self.latest:
                        grams.append(self.latest[agent][2])
                        vecs.append(self.latest[agent][3])
                    else:
                        grams.append(shift)
                if agent in self.former:
                    grams.append(self.former[agent][0])
                    vecs.append(self.former[agent][1])
        self._sync_round(r, _total(grams), _total(vecs))

    def _sync_round(self, r: int, S: np.ndarray, s: np.ndarray) -> None:
        """Round ``r`` closes with (S, s): counted, and sent to every agent (Alg. 1 lines 18-20)."""
        self.sim.metrics.rounds += 1
        self.round_open = False
        self.completed = r
        self.last_sync = (self.completed, S, s)
        self.syncs.cancel(self.server)  # the new sync replaces every one still outstanding
        self.syncs.send_many(self.server, self.everyone_list, self.last_sync, size=self.d * (self.d + 1))

    def _send_sync(self, agent: int, sync: tuple[int, np.ndarray, np.ndarray]) -> None:
        self.syncs.cancel(self.server, agent)  # a newer sync replaces one still outstanding
        self.syncs.send(self.server, agent, sync, size=self.d * (self.d + 1))

    def _controller_restarted(self, state: str) -> None:
        if state != "lost":
            return  # kept: the open round goes on; what was sent to it while down is retransmitted
        self.round_open = False
        self.uploads, self.latest, self.former = {}, {}, {}
        # round numbers go on above every number used before (a new incarnation, as netsim.comm.sequencing)
        self.completed = (self.completed // INCARNATION + 1) * INCARNATION
        self.last_sync = None
        self.requests_seen = ReplayWindow()
        self.suspected[:] = False
        for link in self.links:
            link.forget(self.server)
        self._open_round()  # rebuild S from every agent's upload (prefix sums) at once

    def results(self) -> dict[str, float]:
        cal = self.cal
        return {"threshold_D": self.D, "sync_requests": self.requests, "tree_depth": cal.m,
                "rho_min": cal.rho_min, "rho_max": cal.rho_max, "kappa": cal.kappa,
                "epsilon_spent": cal.epsilon,
                "comm_bound_prop1": communication_bound(self.D, horizon=self.T, dimension=self.d,
                                                        rho_min=cal.rho_min, rho_max=cal.rho_max,
                                                        L=self.params["L"])}
