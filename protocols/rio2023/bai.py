"""Shared state and engine wiring of the rio2023 family: agents, activations, votes to the
coordinator and eliminations back (see :mod:`protocols.rio2023`).

Realistic timelines (docs/faults.md, docs/protocols/rio2023.md):

* Votes, eliminations and ``rejoin`` messages travel on transports (:class:`netsim.comm.transport.Transport`)
  sharing one RFC 6298 timer (keys ``rto_initial``, ``rto_min``, ``rto_max``, in rounds). When a
  message can be lost (:func:`netsim.comm.transport.can_lose`: link loss, outages, crashes) each is
  acknowledged and retransmitted until acknowledged, for at most ``give_up`` transmissions: a vote
  the network drops is *delayed*, not lost (CORRUPTED ELIMINATION's xi is the algorithm's own
  corruption of its votes, Prop. 5.1, and is the only way a vote disappears). Otherwise (paper
  mode, delays, duplication, reordering) they are plain datagrams, exactly what the algorithms send.
* Votes are idempotent: the coordinator counts the voters of each arm, one vote per (agent, arm)
  (Alg. 1 line 12 counts agents), so a duplicated or repeated vote changes nothing, and votes
  commute, so reordering changes nothing. Eliminations are idempotent at the agents (a flag).
* A vote message carries the arm k and the agent's vote lambda^n_k = 1 (Eq. 11: the message is
  the vector of lambda^n_k nu^n_k, one message per arm voted against); the coordinator adds the
  vote to lambda_k (Alg. 1 line 10, Alg. 3 line 9). ``[adversary]`` (``corruptible = ("vote",)``):
  a byzantine agent or a corrupting link replaces the vote w.p. ``corruption`` by a draw of Q
  (:mod:`netsim.comm.corruption`) and the coordinator adds what it reads, unchecked: Q = Bernoulli(0)
  (the default) withholds votes, as xi does but unknown to the threshold; Q = constant c gives one
  agent the weight of c voters.
* Crashes (round-by-round simulation, ``simulation = "rounds"``; the exact-law event mode cannot
  thin a crashed agent's hidden activations and refuses crashes, naming the key). A round whose
  active agent is down passes with no pull (it still counts as a round). What is sent to a down
  node is dropped (and retransmitted). On its restart an agent sends ``rejoin`` to the coordinator,
  which answers with every global elimination so far, and sends again every vote it ever sent
  (the coordinator keeps one per agent and arm): this recovers what was given up while it was
  down. ``state = "lost"``: an agent still in play restarts as a fresh learner (all arms active,
  no samples, first epoch); the votes it sent before stay counted as its votes; an agent that had
  already left stays out with its answer.
* A crashed coordinator stalls the vote count: votes sent to it while down are retransmitted
  (and given up after ``give_up`` transmissions); on its restart it sends ``rejoin`` to every
  agent, and every agent (in play or not) sends its votes again. ``state = "lost"``: the
  coordinator forgets its counts and its global set and rebuilds both from the repeated votes.
  When no agent is left in play, the coordinator decides once every vote has arrived; while it is
  down it decides nothing (it looks again when it restarts).
"""

from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np

from netsim.comm import TIMER_FIELDS, InputError, Lie, Protocol, Transport, can_lose, check_timer, rewriting, timer_from
from netsim.comm import faults as F
from netsim.comm import params as P
from protocols.rio2023.paths import ActivationClock
from protocols.rio2023.rules import agent_weights, se_radius, voting_threshold

COMMON = {
    # delta enters only through log(delta) (the vote threshold, the SE radius): any positive normal double is
    # honoured (a subnormal one, down to 5e-324, overflowed K t^2 / p)
    "delta": P.real(0.05, low=sys.float_info.min, high=1.0, high_open=True,
                    doc="global failure probability delta (Sec. 6: 0.05)", label="failure probability δ", unit=""),
    "agent_distribution": P.choice(("uniform", "zipf"), "uniform",
                                   doc="P_N: uniform, or zipf P(n) ∝ (n + offset)^-exponent (appendix C.4)",
                                   label="agents per arm law P_N"),
    "zipf_exponent": P.real(0.8, low=0.0, low_open=True, doc="gamma of the zipf P_N (appendix C.4: 0.8)",
                            label="zipf exponent", unit=""),
    "zipf_offset": P.real(0.0, low=0.0, doc="alpha of the zipf P_N (appendix C.4)", label="zipf offset", unit=""),
    "simulation": P.choice(("events", "rounds"), "events",
                           doc="'events': exact-law epoch/elimination events; 'rounds': round by round",
                           label="simulation"),
    "tolerance": P.real(0.0, low=0.0, doc="epsilon of 'epsilon-optimal' used for the `correct` column",
                        label="optimality tolerance", unit=""),
}
#: the keys of the protocols that vote: COMMON and the transport's
VOTING = {
    **COMMON,
    **TIMER_FIELDS,
    "give_up": P.integer(15, low=1, doc="transmissions of a vote, elimination or rejoin before it is given up "
                                        "(when messages can be lost; 15: Linux TCP's tcp_retries2)",
                         label="transmissions before giving up", unit=""),
}


def lie_vote(payload: tuple[int, float], lie: Lie) -> tuple[int, float]:
    """Where a vote (arm, lambda) carries statistics: the vote lambda."""
    arm, vote = payload
    return arm, lie(vote)


def check_probability_open(value: float, key: str) -> None:
    if not 0.0 < value < 1.0:
        raise InputError(f"got {value!r}; expected a number > 0 and < 1", key=key)


class MultiAgentBAI(Protocol):
    """Shared state and wiring of the rio2023 family (see module docstring)."""

    servers = 1
    agent_links = False
    bandit_kinds = ("bernoulli", "gaussian")
    voting = True
    crash_states = ("kept", "lost")
    corruptible = ("vote",)
    columns = {
        "sample_complexity": P.column("sample complexity", "rounds", doc="rounds until one arm was left"),
        "rounds_simulated": P.column("rounds simulated", doc="rounds the simulation stepped through"),
        "identified_arm": P.column("identified arm", doc="the arm left (NaN when none was)"),
        "correct": P.column("best arm identified", doc="1 when the identified arm is ε-optimal, 0 when not"),
        "votes_sent": P.column("votes sent", doc="elimination votes sent to the server"),
        "votes_corrupted": P.column("votes corrupted (xi)", doc="votes CORRUPTED ELIMINATION's own mask withheld "
                                    "(xi, Alg. 3); the adversary's lies count in messages_corrupted"),
        "local_eliminations": P.column("local eliminations", doc="arms agents eliminated locally"),
        "global_eliminations": P.column("global eliminations", doc="arms the server eliminated"),
        "vote_threshold": P.column("vote threshold", doc="votes the server needs to eliminate an arm"),
        "agents_done": P.column("agents done", doc="agents whose own elimination finished"),
        "agents_correct": P.column("agents correct", doc="fraction of finished agents whose answer is ε-optimal"),
        "deadlock": P.column("deadlock", doc="1 when no arm could be eliminated any more"),
    }

    @classmethod
    def check(cls, scenario: Any) -> None:
        if "crash" in F.kinds(scenario.faults) and scenario.protocol["simulation"] == "events":
            raise InputError("the exact-law event mode cannot skip a crashed agent's activations; accepted: "
                             "simulation = 'rounds' with crashes", key="protocol.simulation")
        clock = scenario.clock
        if clock["jitter"] > 0:
            raise InputError(f"protocol {cls.name!r} has no agent clocks: one agent per round is drawn from P_N "
                             "(Assumptions 3.2-3.3); accepted: clock.jitter = 0", key="clock.jitter")
        if clock["period"] != 1.0:
            raise InputError(f"protocol {cls.name!r} counts time in rounds (one per time unit); accepted: "
                             "clock.period = 1", key="clock.period")
        if cls.voting:
            check_timer(scenario.protocol)

    @classmethod
    def work(cls, scenario: Any, *, slots: float, links: float) -> tuple[float, float]:
        """Events and memory of a trial (netsim.engine.budget). The run ends when one arm is left, long before the
        bundled horizon of 1e12 (:meth:`steps`). Events mode: a few events and the reward paths (K numbers
        per step) per agent; rounds mode: one round per step of each agent. Without explicit means, or with
        the two best equal (elimination never separates them), the horizon bounds the run: one event per
        round (rounds mode) or per agent and slot."""
        N, K = scenario.network["agents"], scenario.bandit.get("arms", 2)
        found = cls.steps(scenario)
        if found is None:
            return slots * (N + links), 8.0 * N * K * 256
        elimination, steps = found
        paths = 8.0 * N * K * elimination  # successive elimination's reward paths (DP-MASE keeps less)
        if scenario.protocol["simulation"] == "rounds":
            return min(N * steps, slots) + 4.0 * N * K, 16.0 * N * K
        return 8.0 * N * K * math.log2(steps + 2.0), paths

    @classmethod
    def steps(cls, scenario: Any) -> tuple[float, float] | None:
        """About how many steps an agent takes before one arm is left: successive elimination's, the first t
        (to a power of 2) with 2 alpha(t) below the gap of the two best global means (Sec. 4.1; failure
        delta / N), and the run's, that times 1 + 1 / (epsilon gap) for DP-MASE's noise; None when no gap
        is known (the horizon bounds the run)."""
        means = scenario.bandit.get("means")
        N, K = scenario.network["agents"], scenario.bandit.get("arms", 2)
        top = sorted(means, reverse=True)[:2] if isinstance(means, (list, tuple)) and len(means) > 1 else None
        gap = top[0] - top[1] if top else 0.0
        if not gap > 0.0:
            return None
        steps = 2.0
        while 2.0 * se_radius(steps, K, scenario.protocol["delta"] / N) > gap and steps < 1e15:
            steps *= 2.0
        epsilon = scenario.protocol.get("epsilon", math.inf)
        return steps, steps * (1.0 + (0.0 if math.isinf(epsilon) else 1.0 / (epsilon * gap)))

    @classmethod
    def span(cls, scenario: Any) -> float:
        """The run ends when one arm is left: about :meth:`steps` clock periods (netsim.engine.budget), with a
        margin."""
        found = cls.steps(scenario)
        horizon = scenario.run["horizon"]
        return horizon if found is None else min(horizon, 4.0 * found[1] * scenario.clock["period"])

    # ---------------------------------------------------------------- per-protocol hooks
    def local_failure(self) -> float:
        raise NotImplementedError

    def threshold(self) -> int:
        return voting_threshold(self.params["delta"], self.local_failure())

    # ---------------------------------------------------------------- setup
    def start(self) -> None:
        sim = self.sim
        self.N = sim.num_agents
        self.K = sim.bandit.num_arms
        self.server = sim.servers[0].id
        self.weights = agent_weights(self.N, self.params["agent_distribution"], self.params["zipf_exponent"],
                                     self.params["zipf_offset"])
        self.M = self.threshold()
        self.failure = self.local_failure()
        self.active = np.ones((self.N, self.K), dtype=bool)       # K^n
        self.told = np.zeros((self.N, self.K), dtype=bool)        # global eliminations delivered to n
        self.in_play = np.ones(self.N, dtype=bool)                # N(t)
        self.answer = np.full(self.N, -1)
        self.global_set = np.ones(self.K, dtype=bool)             # K
        self.votes = np.zeros(self.K)                             # lambda_k (delivered)
        self.voted = np.zeros((self.N, self.K), dtype=bool)       # the coordinator's voters of each arm
        self.sent = np.zeros((self.N, self.K), dtype=bool)        # votes each agent sent
        self.votes_sent = 0
        self.votes_corrupted = 0
        self.local_eliminations = 0
        self.finished = False
        self.deadlock = 0
        self.identified = -1
        self.sample_complexity = -1
        self.timing_rng = sim.streams.for_("sampling")
        self.noise_rng = sim.streams.for_("privacy")
        self.events_mode = self.params["simulation"] == "events"
        if self.voting:
            self._connect()
        self._up = sim.faults.up if sim.faults.has_crashes else None
        if self._up is not None:
            sim.faults.on_restart(self._restarted)
        if self.events_mode:
            self.clock = ActivationClock(self.weights, self.timing_rng)
            self.start_events()
        else:
            self.t_local = np.zeros(self.N, dtype=np.int64)
            self.sums = np.zeros((self.N, self.K))
            self.rounds_done = 0
            self._cum = np.cumsum(self.weights)
            self.start_rounds()
            sim.every(1.0, self._round, start=1.0)

    def _connect(self) -> None:
        """Votes up, eliminations down, rejoins both ways (module docstring)."""
        sim = self.sim
        reliable = can_lose(sim.scenario)
        timer = timer_from(self.params, 1.0) if reliable else None

        def transport(kind: str, handler: Any) -> Transport:
            return Transport(sim, kind, handler, timer=timer, attempts=self.params["give_up"], up=sim.faults.up,
                             reliable=reliable)

        self.vote_link = transport("vote", self._on_votes)
        self.elimination_link = transport("eliminate", self._on_eliminations)
        self.rejoin_link = transport("rejoin", self._on_rejoin)
        if sim.network.adversary is not None:
            self.vote_link.corruptible(rewriting(lie_vote))

    def start_events(self) -> None:
        raise NotImplementedError

    def start_rounds(self) -> None:
        pass

    # ---------------------------------------------------------------- round-by-round reference
    def _draw_active(self) -> int:
        u = self.timing_rng.random() * self._cum[-1]
        return int(min(np.searchsorted(self._cum, u, side="right"), self.N - 1))

    def _round(self, now: float) -> None:
        if self.finished:
            return
        if not self.in_play.any():
            return  # everybody left: the coordinator is settling the last votes
        self.rounds_done += 1
        n = self._draw_active()
        if self._up is not None and not self._up[n]:
            return  # the active agent is down: the round passes with no pull
        arms = np.flatnonzero(self.active[n])
        if len(arms):
            self.sums[n, arms] += self.sim.bandit.pull_many(np.full(len(arms), n), arms, 1)
        self.t_local[n] += 1
        self.round_activation(n, now)

    def round_activation(self, agent: int, now: float) -> None:
        raise NotImplementedError

    def _leave_rounds(self, agent: int) -> None:
        self.in_play[agent] = False
        w = self.weights * self.in_play
        self._cum = np.cumsum(w)

    # ---------------------------------------------------------------- voting and the coordinator
    def cast(self, agent: int, arms: np.ndarray) -> None:
        """Alg. 1-3: agent votes against each arm of ``arms`` (one message per arm)."""
        self.local_eliminations += len(arms)
        if not self.voting:
            return
        keep = self.keep_votes(len(arms))
        self.votes_corrupted += int(len(arms) - keep.sum())
        self.sent[agent, arms[keep]] = True
        for k in arms[keep]:
            self.votes_sent += 1
            self.vote_link.send(agent, self.server, (int(k), 1.0))

    def keep_votes(self, count: int) -> np.ndarray:
        return np.ones(count, dtype=bool)

    def _on_votes(self, messages) -> None:
        for msg in messages:
            if self.finished:
                return
            k, vote = msg.payload
            if self.voted[msg.src, k]:
                continue  # a copy, or a vote sent again after a restart
            self.voted[msg.src, k] = True
            self.votes[k] += vote                                      # Alg. 1 line 10, Alg. 3 line 9
            if self.global_set[k] and self.votes[k] > self.M:          # Alg. 1 line 12, Alg. 2 line 20
                self.global_set[k] = False
                if self.global_set.sum() == 1:
                    self._finish(int(np.flatnonzero(self.global_set)[0]), "identified")
                    return
                for agent in np.flatnonzero(self.in_play):
                    self.elimination_link.send(self.server, int(agent), int(k))

    def _on_eliminations(self, messages) -> None:
        touched = []
        for msg in messages:
            self.told[msg.dst, msg.payload] = True
            touched.append(msg.dst)
        if self.events_mode and not self.finished:
            self.on_told(np.unique(np.array(touched, dtype=np.int64)))

    # ---------------------------------------------------------------- crashes (module docstring)
    def _restarted(self, node: int, state: str) -> None:
        if node == self.server:
            if not self.voting:
                return
            if state == "lost":
                self.votes[:] = 0.0
                self.voted[:] = False
                self.global_set[:] = True
                self._forget(node)
            for agent in range(self.N):
                self.rejoin_link.send(self.server, agent, None)
            if not self.in_play.any():
                self._settle()
        elif node < self.N:
            if state == "lost" and self.in_play[node]:
                self.reset_learner(node)
            if self.voting:  # the baselines send nothing, so they have nothing to recover
                if state == "lost":
                    self._forget(node)
                self.rejoin_link.send(node, self.server, None)
                self._send_votes_again(node)

    def _forget(self, node: int) -> None:
        for link in (self.vote_link, self.elimination_link, self.rejoin_link):
            link.forget(node)

    def reset_learner(self, agent: int) -> None:
        """Round mode: ``agent`` starts afresh (all arms active, no samples)."""
        self.active[agent] = True
        self.told[agent] = False
        self.sums[agent] = 0.0
        self.t_local[agent] = 0
        self.sent[agent] = False

    def _send_votes_again(self, agent: int) -> None:
        for k in np.flatnonzero(self.sent[agent]):
            self.vote_link.send(agent, self.server, (int(k), 1.0))

    def _on_rejoin(self, messages) -> None:
        for msg in messages:
            if msg.dst == self.server:  # an agent is back: tell it every global elimination so far
                for k in np.flatnonzero(~self.global_set):
                    self.elimination_link.send(self.server, msg.src, int(k))
            else:                       # the coordinator is back and asks for the votes again
                self._send_votes_again(msg.dst)

    def on_told(self, agents: np.ndarray) -> None:
        """Event mode: agents just learnt of a global elimination."""

    def leave(self, agent: int, now: float) -> None:
        """Agent is done: it leaves N(t) (Alg. 2 line 13, Alg. 3 line 11)."""
        arms = np.flatnonzero(self.active[agent])
        self.answer[agent] = arms[0] if len(arms) else -1
        if self.events_mode:
            self.in_play[agent] = False
        else:
            self._leave_rounds(agent)
        if not self.in_play.any() and not self.finished:
            self.sim.call_at(now, self._settle)  # after this instant's deliveries (they are URGENT)

    def _settle(self) -> None:
        """No agent is in play: the coordinator decides once the votes in flight have arrived (issue 19,
        bug 2: deciding at once dropped the votes the last agents sent at that instant or in transit);
        it looks again one round later while any message is in flight or any vote is still being
        retransmitted, and not at all while it is down (its restart looks again)."""
        if self.finished:
            return
        if self._up is not None and not self._up[self.server]:
            return
        if self.sim.network.in_flight or (self.voting and self.vote_link.outstanding()):
            self.sim.call_at(self.sim.now + 1.0, self._settle)
            return
        self.all_left(self.sim.now)

    def all_left(self, now: float) -> None:
        left = np.flatnonzero(self.global_set)
        self.deadlock = 1
        self._finish(int(left[np.argmin(self.votes[left])]), "no active agent left")

    def _finish(self, arm: int, reason: str) -> None:
        self.finished = True
        self.identified = arm
        if self.events_mode:
            self.sample_complexity = self.clock.rounds(self.in_play, self.sim.now)
        else:
            self.sample_complexity = self.rounds_done
        self.sim.stop(reason)

    # ---------------------------------------------------------------- results
    def unfinished(self) -> str | None:
        if self.finished:
            return None
        return f"horizon reached with {int(self.global_set.sum())} arms still in the global set"

    def results(self) -> dict[str, Any]:
        means = self.sim.bandit.means
        best = float(means.max())
        ok = self.identified >= 0 and means[self.identified] >= best - self.params["tolerance"] - 1e-12
        answered = self.answer[self.answer >= 0]
        if self.events_mode:
            simulated = self.sample_complexity if self.finished else self.clock.rounds(self.in_play, self.sim.now)
        else:
            simulated = self.rounds_done
        return {
            # undefined (NaN) when the run ended first: status "unfinished" says why
            "sample_complexity": self.sample_complexity if self.finished else float("nan"),
            "rounds_simulated": simulated,
            "identified_arm": self.identified,
            "correct": int(bool(ok)) if self.finished else float("nan"),
            "votes_sent": self.votes_sent,
            "votes_corrupted": self.votes_corrupted,
            "local_eliminations": self.local_eliminations,
            "global_eliminations": int(self.K - self.global_set.sum()),
            "vote_threshold": self.M,
            "agents_done": int((~self.in_play).sum()),
            "agents_correct": float(np.mean(means[answered] >= best - self.params["tolerance"] - 1e-12))
            if len(answered) else float("nan"),
            "deadlock": self.deadlock,
        }
