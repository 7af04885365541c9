"""End-to-end privacy audits: a protocol's own release path, run in the engine on neighbouring inputs.

The targets of :mod:`.targets` and of the families' ``audit`` modules call a mechanism the way a
protocol is *meant* to call it. A protocol that builds its mechanism with the wrong parameters
(ten times its epsilon, a tenth of the noise) passes those audits. The targets here do not build
any mechanism: each trial is one agent of a real :class:`~netsim.sim.Simulation` of the protocol,
built from a scenario whose ``[protocol]`` table holds the claimed parameters; the bandit's
rewards (and contexts) are replaced by the two neighbouring sequences D and D', and the statistic
is read from what the protocol itself releases (the values it publishes, or the messages it
sends). The audited agents never exchange anything that could mix their outputs (isolated agents,
or agents that only talk to a server), so the agents of one simulation are independent trials;
a simulation holds at most :data:`CHUNK` of them.

The statistic is a fixed function of the released values (the privacy-loss variable the *claimed*
calibration would give), so a protocol that releases more, or with less noise, than it claims
separates D from D' more, and the audit's lower bound rises. A result is flagged when the bound
exceeds the claimed epsilon (``VIOLATED``) or the exact loss of the claimed calibration
(``MISCALIBRATED``, :class:`~protocols.privacy.audit.AuditResult`).

Targets: ``e2e-dubey2020a-private`` (Private Multi-Agent UCB run in the engine: the means of one
arm it publishes), ``e2e-cdp-mab`` (CDP-MAB run in the engine: the first upload of every agent) and
``e2e-feducb`` (centralized FedUCB built and started from a scenario: what its release step
uploads). Every trial builds an agent's random streams, so these audits cost
about 0.5-1 ms per trial and input; they run at most :data:`MAX_TRIALS` trials per input and phase
(about a minute each), whatever larger number is asked for. docs/privacy-audit.md has
the method and the measured table.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from protocols.privacy.audit import AuditTarget, gaussian_epsilon, laplace_loss, register
from protocols.privacy.gaussian_tree import FedUCBCalibration
from protocols.privacy.interval import IntervalMechanism

#: agents (trials) per simulation
CHUNK = 2000
#: trials per input and phase at most (``netsim audit`` asks for 100,000 by default)
MAX_TRIALS = 20_000


def _chunks(trials: int, rng: np.random.Generator, one: Callable[[int, int], np.ndarray]) -> np.ndarray:
    """``trials`` statistics from simulations of at most CHUNK agents, each seeded from ``rng``."""
    out, left = [], trials
    while left > 0:
        size = min(CHUNK, left)
        out.append(one(size, int(rng.integers(2**62))))
        left -= size
    return np.concatenate(out)


def _simulation(document: dict[str, Any], seed: int, scenarios: dict[int, Any]):
    """A simulation of ``document`` seeded with ``seed``; ``scenarios`` keeps the validated scenario per
    size (validation builds a network too: once per size is enough, the seed goes to the trial)."""
    from netsim import scenario as S
    from netsim.sim import Simulation
    from netsim.streams import trial_sequence

    agents = document["network"]["agents"]
    if agents not in scenarios:
        scenarios[agents] = S.from_dict(document)
    return Simulation(scenarios[agents], trial_sequence(seed, 0))


# ---------------------------------------------------------------------- dubey2020a-private
def _dubey_document(params: Mapping[str, Any], agents: int, seed: int) -> dict[str, Any]:
    f = IntervalMechanism(epsilon=params["epsilon"], v=params["v"]).interval
    return {
        "name": "audit-dubey2020a-private",
        "bandit": {"kind": "bernoulli", "arms": params["arms"]},
        # during the round robin an agent's published means depend on its own rewards and noise only
        # (the arm of trial t is t mod K whatever it hears), so the agents of a ring are independent trials
        "network": {"topology": "ring", "agents": agents},
        "protocol": {"name": "dubey2020a-private", "epsilon": params["epsilon"], "v": params["v"], "gamma": 1},
        # the claimed round robin: every arm pulled f times, arm 0's first release at count f
        "run": {"horizon": params["arms"] * f, "seed": seed, "checkpoints": 1},
    }


def _dubey(params: Mapping[str, Any], trials: int, rng: np.random.Generator, neighbour: bool) -> np.ndarray:
    """Statistic: the summed privacy loss, under the claimed calibration, of every value the agent published
    for arm 0 (a release is a change of the published mean; its count is arm 0's pull count then)."""
    scale = IntervalMechanism(epsilon=params["epsilon"], v=params["v"]).scale
    scenarios: dict[int, Any] = {}

    def one(agents: int, seed: int) -> np.ndarray:
        sim = _simulation(_dubey_document(params, agents, 0), seed, scenarios)
        first = np.ones(agents, dtype=bool)

        def pull_many(who, arms, n=1):
            # D: every reward 0; D': the first reward of arm 0 is 1, every other 0
            who, arms = np.asarray(who, dtype=np.int64), np.asarray(arms, dtype=np.int64)
            hit = (arms == 0) & first[who]
            first[who[arms == 0]] = False
            return np.where(hit & neighbour, 1.0, 0.0)

        sim.bandit.pull_many = pull_many
        loss = np.zeros(agents)
        seen = np.zeros(agents)
        proto = sim.protocol
        start = proto.start

        def started() -> None:  # the protocol builds its flood in start(): spy on what it publishes
            start()
            publish = proto.flood.publish

            def spy(who, values):  # what leaves the agents: their published records
                who = np.asarray(who, dtype=np.int64)
                mean, count = np.asarray(values["mean"])[:, 0], np.asarray(values["count"])[:, 0]
                changed = (count >= 1) & (mean != seen[who])
                n = np.maximum(count[changed], 1.0)
                loss[who[changed]] += laplace_loss(mean[changed], 0.0, 1.0 / n, scale(n))
                seen[who] = mean
                return publish(who, values)

            proto.flood.publish = spy

        proto.start = started
        sim.run()
        return loss

    return _chunks(trials, rng, one)


def _dubey_claim(params: Mapping[str, Any]) -> tuple[float, float]:
    mechanism = IntervalMechanism(epsilon=params["epsilon"], v=params["v"])
    return float(mechanism.spent(mechanism.point(1))), 0.0


E2E_DUBEY = register(AuditTarget(
    name="e2e-dubey2020a-private",
    description="Private Multi-Agent UCB run in the engine (dubey2020a Alg. 1-2): arm 0's published means during "
                "the round robin",
    neighbours="one agent's reward sequence: D all 0, D' with the first reward of arm 0 equal to 1; the round robin "
               "of the claimed eps (K ceil(1/eps) trials, 2 arms) is observed; claim: the interval mechanism's "
               "first release, (ceil(1/eps))^(-v/2)",
    source="dubey2020a Lemma 3.5 (n^(-v/2) per release), the protocol's own code (protocols/dubey2020a/private.py)",
    sample=_dubey, claim=_dubey_claim, epsilon=0.1, epsilon_range=(0.0, 1.0),
    defaults={"v": 1.1, "arms": 2}, exact=lambda p: _dubey_claim(p)[0], max_trials=MAX_TRIALS))


# ---------------------------------------------------------------------- cdp-mab
def _cdp_document(params: Mapping[str, Any], agents: int) -> dict[str, Any]:
    return {
        "name": "audit-cdp-mab",
        "bandit": {"kind": "bernoulli", "arms": params["arms"]},
        # the agents only talk to the server; the paper's timing: zero server delay, unit slots
        "network": {"topology": "ring", "agents": agents, "servers": 1,
                    "server_delay": {"model": "constant", "value": 0.0}},
        # CDP-MAB is (M eps)-DP (li2022 Thm. 1): with M agents per simulation, eps = claim / M keeps the
        # claim (and the Laplace scale 1 / (M eps [S(r) - S(r-1)])) whatever the size of the simulation
        "protocol": {"name": "cdp-mab", "epsilon": params["epsilon"] / agents},
        "run": {"horizon": params["horizon"], "seed": 0, "checkpoints": 1},
    }


def _cdp(params: Mapping[str, Any], trials: int, rng: np.random.Generator, neighbour: bool) -> np.ndarray:
    """Statistic: the privacy loss, under the claimed calibration (li2022's own epoch schedule for the
    scenario's parameters), of arm 0's entry of the agent's first upload ybar_i(1) (Alg. 1 lines 8-11)."""
    from protocols.li2022.epochs import EpochSchedule

    scenarios: dict[int, Any] = {}

    def one(agents: int, seed: int) -> np.ndarray:
        sim = _simulation(_cdp_document(params, agents), seed, scenarios)
        first = np.ones(agents, dtype=bool)

        def pull_many(who, arms, n=1):
            # D: every reward 0; D': the agent's first reward of arm 0 (in epoch 1's exploration) is 1
            who, arms = np.asarray(who, dtype=np.int64), np.asarray(arms, dtype=np.int64)
            hit = (arms == 0) & first[who]
            first[who[arms == 0]] = False
            return np.where(hit & neighbour, 1.0, 0.0)

        sim.bandit.pull_many = pull_many
        from netsim.testing import MessageSpy

        spy = MessageSpy(kinds=["cdp-upload"]).attach(sim)
        sim.run()
        plan = EpochSchedule(arms=params["arms"], horizon=params["horizon"], participants=agents,
                             epsilon=params["epsilon"] / agents).plan(1, params["arms"], 0)
        released = np.full(agents, np.nan)
        for message in spy.messages("send", "cdp-upload"):
            if np.isnan(released[message.src]):
                released[message.src] = message.payload[1][0][0]
        if np.isnan(released).any():
            raise RuntimeError("an agent uploaded nothing within the horizon; accepted: a longer horizon")
        return laplace_loss(released, 0.0, 1.0 / plan.pulls, plan.noise_scale)

    return _chunks(trials, rng, one)


E2E_CDP = register(AuditTarget(
    name="e2e-cdp-mab",
    description="CDP-MAB run in the engine (li2022 Alg. 1, 2 arms): every agent's first upload",
    neighbours="one agent's rewards: all 0 (D), its first reward of arm 0 equal to 1 (D'); the agent's first "
               "upload ybar_i(1) is observed (later ones are post-processing, see cdp-mab)",
    source="li2022 Thm. 1/2: CDP-MAB is M eps-DP; the protocol's own code (protocols/li2022/cdp.py)",
    sample=_cdp, claim=lambda p: (p["epsilon"], 0.0), epsilon=1.0,
    defaults={"arms": 2, "horizon": 60}, exact=lambda p: p["epsilon"], max_trials=MAX_TRIALS))


# ---------------------------------------------------------------------- feducb
def _feducb_document(params: Mapping[str, Any], agents: int, seed: int) -> dict[str, Any]:
    return {
        "name": "audit-feducb",
        "bandit": {"kind": "linear", "dimension": params["d"], "arms": 2},
        "network": {"topology": "star", "agents": agents, "servers": 1,
                    "delay": {"model": "constant", "value": 0.0}},
        "protocol": {"name": "feducb", "epsilon": params["epsilon"], "delta": params["delta"],
                     "communication": "mt"},
        "run": {"horizon": params["releases"], "seed": seed, "checkpoints": 1},
    }


def _feducb(params: Mapping[str, Any], trials: int, rng: np.random.Generator, neighbour: bool) -> np.ndarray:
    """Statistic: the sum, over the uploads 1, 2, 4, ... (the tree nodes holding round 1 alone), of the
    entry of the uploaded u (x y) that differs between D and D' (linear in the privacy loss).

    The protocol is built from the scenario and started as in a run (its calibration and privatizer
    trees are its own); each round, every agent's observation goes into the protocol's own statistic
    (``state.update``) and the upload is what the protocol's release step (``privatizer_release``, Alg. 1
    line 16, then Alg. 2's split) returns for it. The messages that carry uploads and syncs are left out:
    they copy those arrays and cost about 0.1 ms each.
    """
    d = params["d"]
    scenarios: dict[int, Any] = {}

    def one(agents: int, seed: int) -> np.ndarray:
        proto = _simulation(_feducb_document(params, agents, 0), seed, scenarios).protocol
        proto.start()
        everyone = np.arange(agents)
        statistic = np.zeros(agents)
        for r in range(1, params["releases"] + 1):
            x = np.zeros((agents, d))
            if r == 1:  # D: (x, y) = (e1, 1), D': (-e1, 1); later rounds are empty
                x[:, 0] = -1.0 if neighbour else 1.0
            proto.state.update(x, np.full(agents, 1.0 if r == 1 else 0.0))
            _, upload = proto.privatizer.split(proto.privatizer_release(everyone))
            if r & (r - 1) == 0:
                statistic += upload[:, 0]
        return statistic

    return _chunks(trials, rng, one)


def _feducb_calibration(params: Mapping[str, Any]) -> FedUCBCalibration:
    return FedUCBCalibration(epsilon=params["epsilon"], delta=params["delta"], alpha=0.1, dimension=params["d"],
                             agents=1, releases=params["releases"])


def _feducb_exact(params: Mapping[str, Any]) -> float:
    cal = _feducb_calibration(params)
    nodes = sum(1 for r in range(1, params["releases"] + 1) if r & (r - 1) == 0)
    mu = math.sqrt(nodes) * 2.0 / cal.noise_std   # y x differs by 2 in one entry of every node holding round 1
    return gaussian_epsilon(mu, params["delta"])


E2E_FEDUCB = register(AuditTarget(
    name="e2e-feducb",
    description="centralized FedUCB built and started from a scenario (dubey2020 Alg. 1-2): its release step's uploads",
    neighbours="t-neighbouring sequences (dubey2020 Def. 1): round 1 holds (x, y) = (e1, 1) in D, (-e1, 1) in D', "
               "later rounds nothing; the agent's first 4 uploads are observed (d = 2)",
    source="dubey2020 Alg. 2 and its privacy theorem: (eps, delta); the protocol's own code "
           "(protocols/feducb/centralized.py)",
    sample=_feducb, claim=lambda p: (p["epsilon"], p["delta"]), epsilon=1.0,
    defaults={"delta": 0.1, "d": 2, "releases": 4}, exact=_feducb_exact, max_trials=MAX_TRIALS))
