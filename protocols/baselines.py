"""Reference protocols: isolated UCB1 per agent and centralized UCB over pooled rewards.

UCB1 (Auer, Cesa-Bianchi & Fischer 2002): pull every arm once, then the arm maximising
mu_hat_k + sqrt(2 ln t / n_k), where t counts the pulls whose rewards the learner has seen.

* ``ucb1``: every agent runs its own UCB1 and never communicates (the upper reference).
* ``central-ucb``: every reward is pooled instantly into one UCB1 learner on the server node;
  within a tick the agents choose one after another, each seeing the rewards of those before it,
  so M agents over T ticks behave as one UCB1 learner over M T pulls (the lower-bound reference).

Cost of ``central-ucb`` (li2022 Eq. 2). The pooling is an oracle of the transport: every reward
reaches the learner at once, without delay or loss, and no message is sent. The links are paid
for: in every slot, each agent that pulls uploads its reward and receives its next arm over its
two-way link to the server, so that link is built once in the slot and costs c1
(``network.cost.server_agent``). C(T) = c1 times the number of pulls, c1 M T without crashes, and
``links_server_agent`` counts the same pulls. A scenario therefore needs one server node (the
default of ``network.servers`` under this protocol). A study draws the protocol as an oracle
(``oracle = true`` on its variant: kept off the Pareto front), since no real network pools for free
in time.

Faults (``docs/faults.md``): neither protocol sends (``sends = False``; the oracle's pooling ignores
the network), so a scenario setting a key that only acts on messages (delays, loss, per-link
overrides, links going down, duplication, reordering) is refused when it loads, rather than run
unchanged. A crashed agent does not pull, nor pay for an upload, until it restarts (its regret stops
growing; the others go on). With ``state = "lost"`` a restarted ``ucb1`` agent starts UCB1 afresh
(its counts and sums are zeroed); ``central-ucb`` keeps its one learner outside the agents, so a
restart loses nothing: it accepts only ``state = "kept"`` ("lost" would run the same). ``ucb1``
refuses ``clock.jitter``: an agent alone pulls the same arms whenever its clock ticks, so jitter
would change nothing.
"""

from __future__ import annotations

import numpy as np

from netsim.comm import InputError, Ticking, register_protocol
from protocols.ucb import ucb_index


def ucb1_index(sums: np.ndarray, counts: np.ndarray, t: np.ndarray | float) -> np.ndarray:
    """UCB1 indices of reward ``sums`` and pull ``counts`` (:func:`protocols.ucb.ucb_index`, c = 2)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        means = sums / counts
    return ucb_index(means, counts, t)


@register_protocol
class IsolatedUCB1(Ticking):
    """Each agent runs UCB1 alone."""

    name = "ucb1"
    description = "isolated UCB1 on every agent, no communication (baseline)"
    sends = False

    @classmethod
    def check(cls, scenario) -> None:
        if scenario.clock["jitter"] > 0:
            raise InputError("ucb1 agents learn alone: a jittered clock changes when they pull, not what they pull "
                             "or earn; accepted: clock.jitter = 0", key="clock.jitter")

    def start(self) -> None:
        m, k = self.sim.num_agents, self.sim.bandit.num_arms
        self.counts = np.zeros((m, k))
        self.sums = np.zeros((m, k))
        super().start()

    def step(self, agents: np.ndarray) -> None:
        counts, sums = self.counts[agents], self.sums[agents]
        arms = np.argmax(ucb1_index(sums, counts, counts.sum(axis=1, keepdims=True)), axis=1)
        rewards = self.sim.bandit.pull_many(agents, arms)
        self.counts[agents, arms] += 1
        self.sums[agents, arms] += rewards

    def restarted(self, node: int, state: str) -> None:
        if state == "lost" and node < self.sim.num_agents:
            self.counts[node] = 0.0
            self.sums[node] = 0.0


@register_protocol
class CentralizedUCB(Ticking):
    """One UCB1 learner fed by every agent's reward as soon as it is observed."""

    name = "central-ucb"
    description = "centralized UCB1 on instantly pooled rewards, c1 per upload (lower-bound reference, an oracle)"
    servers = 1
    sends = False
    crash_states = ("kept",)  # the learner is outside the agents: a "lost" restart would lose nothing

    def start(self) -> None:
        k = self.sim.bandit.num_arms
        self.counts = np.zeros(k)
        self.sums = np.zeros(k)
        self.server = self.sim.servers[0].id
        super().start()

    def step(self, agents: np.ndarray) -> None:
        bandit, network = self.sim.bandit, self.sim.network
        for agent in agents:
            agent = int(agent)
            arm = int(np.argmax(ucb1_index(self.sums, self.counts, self.counts.sum())))
            self.sums[arm] += bandit.pull(agent, arm)
            self.counts[arm] += 1
            network.activate(agent, self.server)  # the reward's upload: one server-agent link this slot (c1)
