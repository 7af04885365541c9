"""The synchronous trial clock shared by the dubey2020a protocols, and the own-statistics update
with interval-mechanism releases (Alg. 1 lines 3-12).

Crashes (``[faults]``, see docs/protocols/dubey2020a.md "Faults"). Trial t is the t-th tick of
the one global clock. A crashed agent takes no part in a trial: it chooses nothing, pulls
nothing, publishes nothing, and the records it had queued for forwarding are lost (the engine
drops what is sent to it). With ``state = "kept"`` it comes back with its statistics and its
latest-message table as they were; with ``state = "lost"`` it rejoins as a fresh learner
(:meth:`Trials.reset`): its own statistics are zeroed, it forgets every record it had heard
(its running group estimates lose their contributions) and its LOCAL sequence numbers start a
new incarnation, so its neighbours take its new records as news. The paper's algorithms have
no recovery step from neighbours: each record carries only the sender's own statistics, so a
lost agent relearns from its own pulls and from the records that reach it after the restart.
"""

from __future__ import annotations

import numpy as np

from netsim.comm import InputError, Protocol
from protocols.dubey2020a.rules import resolve_gamma
from protocols.privacy.interval import IntervalMechanism


class Trials(Protocol):
    """One vectorised clock; trial t = tick index + 1."""

    requires_connected = True
    bandit_kinds = ("bernoulli",)  # rewards in [0, 1]: sensitivity 1/n of a mean (Lemma 3.5)
    crash_states = ("kept", "lost")

    @classmethod
    def check(cls, scenario) -> None:
        if scenario.clock["jitter"] > 0:
            raise InputError(f"protocol {cls.name!r} runs synchronous trials; accepted: clock.jitter = 0",
                             key="clock.jitter")

    @classmethod
    def check_network(cls, scenario, network) -> None:
        """A relaying protocol whose message life resolves to gamma < 2 on trial 0's graph forwards nothing.

        Records arrive with life gamma - 1 and only those with life left are forwarded, so with
        gamma <= 1 no agent relays another's record and ``adversary.relay`` would change nothing.
        (A random topology draws a graph per trial; trial 0's decides.)
        """
        if cls.relays and scenario.adversary["relay"]:
            gamma = resolve_gamma(scenario.protocol["gamma"], network.agent_graph)
            if gamma < 2:
                raise InputError(f"protocol {cls.name!r} with gamma = {scenario.protocol['gamma']!r} (= {gamma} on "
                                 "trial 0's graph) forwards no other agent's record, so relay changes nothing; "
                                 "accepted: relay = false, or protocol.gamma >= 2", key="adversary.relay")

    def start(self) -> None:
        sim = self.sim
        self.m, self.k = sim.num_agents, sim.bandit.num_arms
        self.agents = np.arange(self.m)
        self.t = 0
        self.setup()
        self._up = sim.faults.up[: self.m] if sim.faults.has_crashes else None
        if self._up is not None:
            sim.faults.on_restart(self._restarted)
        sim.every(sim.clock_period, self._tick)

    def _tick(self, now: float) -> None:
        self.t += 1
        self.step(self.t)

    def active(self) -> np.ndarray:
        """The agents taking part in the current trial: all of them, less the crashed ones."""
        return self.agents if self._up is None else self.agents[self._up]

    def _restarted(self, node: int, state: str) -> None:
        if node < self.m and state == "lost":
            self.reset(np.array([node]))

    def setup(self) -> None:
        raise NotImplementedError

    def step(self, t: int) -> None:
        raise NotImplementedError

    def reset(self, agents: np.ndarray) -> None:
        """``agents`` restart as fresh learners (crash with ``state = "lost"``)."""
        raise NotImplementedError


def own_update(proto, arms: np.ndarray, rewards: np.ndarray, agents: np.ndarray | None = None) -> None:
    """Alg. 1 lines 3-12: update own sums and counts; release the pulled arm's mean at interval points.

    ``proto.release_counts`` keeps the count at which each mean was released (0: never released).

    ``arms[i]`` and ``rewards[i]`` belong to ``agents[i]`` (default: every agent).
    """
    a = proto.agents if agents is None else agents
    proto.counts[a, arms] += 1
    proto.sums[a, arms] += rewards
    n = proto.counts[a, arms]
    hit = proto.mechanism.is_release(n.astype(np.int64))
    if np.any(hit):
        who, arm = a[hit], arms[hit]
        proto.released[who, arm] = proto.mechanism.release(proto.sums[who, arm], proto.counts[who, arm], proto.rng)
        proto.release_counts[who, arm] = proto.counts[who, arm]
        proto.releases += int(hit.sum())


def forget_own(proto, agents: np.ndarray) -> None:
    """Zero the own statistics of ``agents`` (counts, sums, released means): a fresh learner."""
    proto.counts[agents] = 0
    proto.sums[agents] = 0
    proto.released[agents] = 0
    proto.release_counts[agents] = 0


def init_own(proto) -> None:
    """Own statistics of every agent (Alg. 1 l. 1): counts, sums, released means and counts at release."""
    proto.mechanism = IntervalMechanism(epsilon=proto.params["epsilon"], v=proto.params["v"])
    proto.rng = proto.sim.streams.for_("privacy")
    proto.counts = np.zeros((proto.m, proto.k))
    proto.sums = np.zeros((proto.m, proto.k))
    proto.released = np.zeros((proto.m, proto.k))
    proto.release_counts = np.zeros((proto.m, proto.k))
    proto.releases = 0


def paired_counts(proto, agents: np.ndarray | slice = slice(None)) -> np.ndarray:
    """The count that goes with each released mean (``protocol.record_counts``), 0 before the first release.

    ``"current"``: the agent's pull count now, as Eq. 6 / Alg. 1 l. 13 write the record (the
    released mean may be up to f - 1 pulls older than this count). ``"released"``: the pull count
    at which the mean was released, so each mean is weighted by the number of rewards it averages.
    Either way an arm whose mean was never released carries count 0: it is absent from the record
    (the paper is silent; its released mean would otherwise be the initial 0, weighted as if it
    averaged the current count's rewards), and a receiver's sums get nothing from it.
    """
    released = proto.release_counts[agents]
    if proto.params["record_counts"] == "released":
        return released
    return np.where(released > 0, proto.counts[agents], 0.0)


def check_record_counts(cls, scenario) -> None:
    """Refuse ``record_counts = "released"`` where every pull is released (epsilon = inf): it would equal "current"."""
    protocol = scenario.protocol
    if protocol["record_counts"] == "released" and np.isinf(protocol["epsilon"]):
        raise InputError(f"protocol {cls.name!r} with epsilon = inf releases every pull, so the count at release "
                         "is the current count; accepted: record_counts = 'current', or a finite epsilon",
                         key="protocol.record_counts")
