"""End-to-end privacy audits: a protocol's own release path, run in the engine on neighbouring inputs.

The targets of :mod:`.targets` and of the families' ``audit`` modules call a mechanism the way a
protocol is *meant* to call it. A protocol that builds its mechanism with the wrong parameters
(ten times its epsilon, a tenth of the noise) passes those audits. The targets here do not build
any mechanism: each trial is one agent of a real :class:`~netsim.engine.sim.Simulation` of the protocol,
built from a scenario whose ``[protocol]`` table holds the claimed parameters; the bandit's
rewards (and contexts) are replaced by the two neighbouring sequences D and D', and the statistic
is read from what the protocol itself releases (the values it publishes, or the messages it
sends). The audited agents never exchange anything that could mix their outputs (isolated agents,
agents that only talk to a server, or outputs read before anything heard could matter; each
target says why), so the agents of one simulation are independent trials; a simulation holds
at most :data:`CHUNK` of them.

The statistic is a fixed function of the released values (the privacy-loss variable the *claimed*
calibration would give), so a protocol that releases more, or with less noise, than it claims
separates D from D' more, and the audit's lower bound rises. A result is flagged when the bound
exceeds the claimed epsilon (``VIOLATED``) or the exact loss of the claimed calibration
(``MISCALIBRATED``, :class:`~protocols.privacy.audit.AuditResult`).

Targets: ``e2e-dubey2020a-private`` (Private Multi-Agent UCB run in the engine: the means of one
arm it publishes), ``e2e-cdp-mab`` (CDP-MAB run in the engine: the first upload of every agent),
``e2e-feducb`` (centralized FedUCB built and started from a scenario: what its release step
uploads), ``e2e-fed-ucb`` (zhu2021 Fed_UCB run in the engine: every agent's private estimate
X~ of arm 0 after tick 1, one node of its binary tree) and ``e2e-dp-mase`` (rio2023 DP-MASE run
in the engine: every agent's first-epoch vote message). Every trial builds an agent's random
streams; with :data:`CHUNK` agents per simulation these audits cost about 0.1 ms per trial and
input (5-20 s per target at 20,000 trials, measured). They run at most :data:`MAX_TRIALS` trials
per input and phase, whatever larger number is asked for.
docs/privacy-audit.md has the method and the measured table.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from protocols.feducb.audit import first_round_epsilon
from protocols.privacy.audit import AuditTarget, laplace_loss, register
from protocols.privacy.gaussian_tree import FedUCBCalibration
from protocols.privacy.interval import IntervalMechanism
from protocols.privacy.tree import BinaryTreeCounter
from protocols.rio2023.audit import mase_setup
from protocols.rio2023.rules import epoch_length

#: agents (trials) per simulation
CHUNK = 2000
#: trials per input and phase at most (``netsim audit`` asks for 100,000 by default)
MAX_TRIALS = 20_000


def _chunks(trials: int, rng: np.random.Generator, one: Callable[[int, int], np.ndarray],
            chunk: int = CHUNK) -> np.ndarray:
    """``trials`` statistics from simulations of at most ``chunk`` agents, each seeded from ``rng``."""
    out, left = [], trials
    while left > 0:
        size = min(chunk, left)
        out.append(one(size, int(rng.integers(2**62))))
        left -= size
    return np.concatenate(out)


def _simulation(document: dict[str, Any], seed: int, scenarios: dict[int, Any]):
    """A simulation of ``document`` seeded with ``seed``; ``scenarios`` keeps the validated scenario per
    size (validation builds a network too: once per size is enough, the seed goes to the trial)."""
    from netsim.comm import Simulation, trial_sequence
    from netsim.comm import scenario as S

    agents = document["network"]["agents"]
    if agents not in scenarios:
        scenarios[agents] = S.from_dict(document)
    return Simulation(scenarios[agents], trial_sequence(seed, 0))


def _neighbouring_rewards(bandit: Any, agents: int, neighbour: bool, pull: int = 0) -> np.ndarray:
    """Give ``bandit`` the neighbouring reward sequences, through every way a protocol pulls (``pull_many``
    and the lockstep ``pull_each``): in D every reward is 0; in D' the reward of each agent's arm-0 pull
    number ``pull`` (0 = its first) is 1, every other 0. Returns the arm-0 pull counts it sees, for
    :func:`_pulled` (a protocol pulling some other way would make D and D' the same run)."""
    pulls = np.zeros(agents, dtype=np.int64)   # pulls of arm 0 so far, per agent

    def pull_many(who: np.ndarray, arms: np.ndarray, n: int = 1) -> np.ndarray:
        who, arms = np.asarray(who, dtype=np.int64), np.asarray(arms, dtype=np.int64)
        hit = (arms == 0) & (pulls[who] == pull)
        pulls[who[arms == 0]] += 1
        return np.where(hit & neighbour, 1.0, 0.0)

    bandit.pull_many = pull_many
    bandit.pull_each = lambda arms: pull_many(np.arange(agents), arms)
    return pulls


def _pulled(pulls: np.ndarray, pull: int = 0) -> None:
    """Refuse a run in which some agent's audited arm-0 pull never went through the neighbouring rewards."""
    if (pulls <= pull).any():
        raise RuntimeError(f"agents {np.flatnonzero(pulls <= pull)[:5].tolist()} never made arm-0 pull {pull} "
                           "through bandit.pull_many or pull_each; accepted: a protocol that pulls through them")


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
        pulls = _neighbouring_rewards(sim.bandit, agents, neighbour)   # D': the first reward of arm 0 is 1
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
        _pulled(pulls)
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
        # D': the agent's first reward of arm 0 (in epoch 1's exploration) is 1
        pulls = _neighbouring_rewards(sim.bandit, agents, neighbour)
        from netsim.experiment.testing import MessageSpy

        spy = MessageSpy(kinds=["cdp-upload"]).attach(sim)
        sim.run()
        _pulled(pulls)
        plan = EpochSchedule(arms=params["arms"], horizon=params["horizon"], participants=agents,
                             epsilon=params["epsilon"] / agents).plan(1, params["arms"], 0)
        released = np.full(agents, np.nan)
        for message in spy.messages("send", "cdp-upload"):
            if np.isnan(released[message.src]):
                released[message.src] = message.payload[2][0][0]  # (tag, answers, (ybar_i, n_i))
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
    return first_round_epsilon(_feducb_calibration(params), params["delta"])


E2E_FEDUCB = register(AuditTarget(
    name="e2e-feducb",
    description="centralized FedUCB built and started from a scenario (dubey2020 Alg. 1-2): its release step's uploads",
    neighbours="t-neighbouring sequences (dubey2020 Def. 1): round 1 holds (x, y) = (e1, 1) in D, (-e1, 1) in D', "
               "later rounds nothing; the agent's first 4 uploads are observed (d = 2)",
    source="dubey2020 Alg. 2 and its privacy theorem: (eps, delta); the protocol's own code "
           "(protocols/feducb/centralized.py)",
    sample=_feducb, claim=lambda p: (p["epsilon"], p["delta"]), epsilon=1.0,
    defaults={"delta": 0.1, "d": 2, "releases": 4}, exact=_feducb_exact, max_trials=MAX_TRIALS))


# ---------------------------------------------------------------------- fed-ucb (zhu2021)
def _fed_ucb_counter(params: Mapping[str, Any]) -> BinaryTreeCounter:
    """A counter with the claimed calibration: eps' = eps / levels per node, levels = T.bit_length() (zhu2021
    Sec. 4.1, eps' = eps / ceil(log T), base 2 as protocols/privacy/tree.py reads it)."""
    return BinaryTreeCounter(epsilon=params["epsilon"], horizon=params["ticks"], rng=np.random.default_rng(0))


def _fed_ucb_document(params: Mapping[str, Any], agents: int) -> dict[str, Any]:
    return {
        "name": "audit-fed-ucb",
        "bandit": {"kind": "bernoulli", "arms": params["arms"]},
        # paper mode: no messages (the gossip of line 20 is instantaneous), a ring: gossip needs a connected graph
        "network": {"topology": "ring", "agents": agents},
        "protocol": {"name": "fed-ucb", "epsilon": params["epsilon"], "mode": "paper"},
        # T ticks after the initialisation at tick 0 (unit clock period): T = horizon - 1
        "run": {"horizon": params["ticks"] + 1, "seed": 0, "checkpoints": 1},
    }


def _fed_ucb(params: Mapping[str, Any], trials: int, rng: np.random.Generator, neighbour: bool) -> np.ndarray:
    """Statistic: the privacy loss, under the claimed calibration, of the agent's private estimate of arm 0
    after tick 1, X~_{i,0}(1) = (X(0) + X(1) + Lap(levels / eps)) / 2 (Eq. (2) on Alg. 3's release at t = 1).

    X~ is what the protocol privatises and gossips: theta moves by X~_i(t) - X~_i(t-1) (Alg. 1 lines 20/22),
    and the paper's privacy argument (Sec. 4.1) covers theta and the counts as post-processing of X~. It is
    read through the protocol's ``observer`` hook after tick 1, when the run is stopped.

    Why the agents of one ring are independent trials: every reward of the initialisation (tick 0) is 0, so
    every agent has theta = X(0) = 0 and the same bonus Eq. (12) for both arms at tick 1, and pulls arm 0
    (ties go to the lowest index; the consistency set A_i is empty while the counts are below N), whatever
    its neighbours hold. Its X~_{i,0}(1) then depends on its own rewards and its own counter's noise only.
    theta is not read (line 20 averages it with a neighbour's), nor are later ticks: from tick 2 on, which
    arm a reward falls on depends on theta, i.e. on the neighbours.
    """
    scale = _fed_ucb_counter(params).scale
    scenarios: dict[int, Any] = {}

    def one(agents: int, seed: int) -> np.ndarray:
        sim = _simulation(_fed_ucb_document(params, agents), seed, scenarios)
        # D': X(1) of arm 0 (its second pull: the first reward of the stream Def. 1 protects) is 1
        pulls = _neighbouring_rewards(sim.bandit, agents, neighbour, pull=1)
        out = np.full(agents, np.nan)

        def observe(proto: Any) -> None:   # called after every tick, its counter ``t`` already advanced
            if proto.t != 2:
                return
            if (proto.arms != 0).any():
                raise RuntimeError("an agent did not pull arm 0 at tick 1; accepted: zero rewards at tick 0")
            out[:] = laplace_loss(proto.xbar[:, 0], 0.0, 0.5, scale / 2.0)
            proto.sim.stop("audited")

        sim.protocol.observer = observe
        sim.run()
        _pulled(pulls, 1)
        return out

    return _chunks(trials, rng, one)


E2E_FED_UCB = register(AuditTarget(
    name="e2e-fed-ucb",
    description="Fed_UCB run in the engine (zhu2021 Alg. 3-4, paper mode, ring, 2 arms, T = 15): every agent's "
                "private estimate of arm 0 after tick 1",
    neighbours="adjacent streams (zhu2021 Def. 1): X(1) of arm 0 is 0 (D) or 1 (D'), every other reward 0; X~(1) "
               "carries the tree node (0, 1) alone; claim eps, exact eps' = eps / levels (levels = 4 at T = 15)",
    source="zhu2021 Sec. 4.1 (eps' = eps / ceil(log T) per partial sum, Fed_UCB eps-DP); the protocol's own code "
           "(protocols/zhu2021/gossip_ucb.py)",
    sample=_fed_ucb, claim=lambda p: (p["epsilon"], 0.0), epsilon=1.0,
    defaults={"ticks": 15, "arms": 2}, exact=lambda p: _fed_ucb_counter(p).node_epsilon, max_trials=MAX_TRIALS))


# ---------------------------------------------------------------------- dp-mase (rio2023)
def _dp_mase_agents(beta: float) -> int:
    """Agents per simulation: at most CHUNK, and few enough that delta = beta^agents is a normal float."""
    return min(CHUNK, int(math.log(sys.float_info.min) / math.log(beta)))


def _dp_mase_document(params: Mapping[str, Any], agents: int) -> dict[str, Any]:
    eps, beta, arms = params["epsilon"], params["beta"], params["arms"]
    first, second = epoch_length(1, arms, eps, beta), epoch_length(2, arms, eps, beta)
    return {
        "name": "audit-dp-mase",
        "bandit": {"kind": "bernoulli", "arms": arms},
        "network": {"topology": "ring", "agents": agents, "servers": 1,
                    "delay": {"model": "constant", "value": 0.0}},
        # delta only sets the vote threshold M = ceil(log delta / log beta) (Prop. 4.2), not the privacy claim
        # (Prop. 4.1): delta = beta^agents gives M >= agents, so no arm gets the M + 1 votes of a global
        # elimination, the run does not stop before every agent's first epoch has ended, and no agent hears
        # anything from the coordinator
        "protocol": {"name": "dp-mase", "epsilon": eps, "beta": beta, "delta": beta**agents},
        # engine time is Poissonised round time; with P_N uniform an agent's e-th epoch ends after
        # Gamma(R(1) + ... + R(e), agents) (protocols/rio2023/paths.py): every first epoch ends before the
        # horizon, no second one does (both by dozens of standard deviations at the defaults; checked)
        "run": {"horizon": agents * (first + second / 2), "seed": 0, "checkpoints": 1},
    }


def _dp_mase_sums(params: Mapping[str, Any]) -> tuple[int, int]:
    """Epoch-1 reward sums (arm 0 on D, arm 1): arm 1 lies m = floor(2 (h + c) R) above arm 0, so that the
    vote against arm 0 (Alg. 4 line 8: mu~_1 - mu~_0 > 2 (h + c)) needs a difference of Laplace noises above
    a = 2 (h + c) - m / R in [0, 1 / R) on D and above a - 1 / R < 0 on D', where arm 0's sum is one less."""
    length, h, c, _ = mase_setup(params)
    base = length // 2
    return base, base + math.floor(2.0 * (h + c) * length)


def _dp_mase(params: Mapping[str, Any], trials: int, rng: np.random.Generator, neighbour: bool) -> np.ndarray:
    """Statistic: 1 when the agent's first-epoch message is a vote against arm 0 (Alg. 2 line 11), else 0.

    The rewards of an epoch enter DP-MASE through their sums only (``pull_many(agents, arms, R(e))`` at the
    epoch end); the votes are read from the messages the protocol sends (a
    :class:`~netsim.experiment.testing.MessageSpy`).
    The agents only talk to the coordinator, which never eliminates anything here (see the scenario), and an
    agent's first-epoch vote depends on its own epoch-1 sums and Laplace draws only (rio2023 proof of
    Prop. 4.1: K^n is synchronised after the vote), so the agents of one simulation are independent trials.
    A vote against arm 1 (a tail event of probability about 1e-50 at the defaults) counts as no vote.
    """
    from netsim.experiment.testing import MessageSpy

    low, high = _dp_mase_sums(params)
    scenarios: dict[int, Any] = {}

    def one(agents: int, seed: int) -> np.ndarray:
        sim = _simulation(_dp_mase_document(params, agents), seed, scenarios)

        def pull_many(who: np.ndarray, arms: np.ndarray, n: int = 1) -> np.ndarray:
            # D: arm 0's epoch-1 sum is ``low``, D': one of its rewards is 0 instead of 1
            arms = np.asarray(arms, dtype=np.int64)
            return np.where(arms == 0, low - (1.0 if neighbour else 0.0), float(high))

        sim.bandit.pull_many = pull_many
        spy = MessageSpy(kinds=["vote"]).attach(sim)
        sim.run()
        proto = sim.protocol
        if not np.all(np.where(proto.in_play, proto.epoch == 2, proto.epoch == 1)):
            raise RuntimeError("an agent's first epoch did not end, or its second did, within the horizon")
        votes = np.zeros(agents)
        for message in spy.sent("vote"):
            votes[message.src] = 1.0 if message.payload[0] == 0 else 0.0  # a vote is (arm, lambda)
        return votes

    return _chunks(trials, rng, one, _dp_mase_agents(params["beta"]))


def _difference_tail(z: float, scale: float) -> float:
    """P[L1 - L0 > z] for independent L0, L1 ~ Lap(scale): (2 + u) e^(-u) / 4 at u = z / scale >= 0."""
    u = abs(z) / scale
    tail = (2.0 + u) * math.exp(-u) / 4.0
    return tail if z >= 0 else 1.0 - tail


def _dp_mase_exact(params: Mapping[str, Any]) -> float:
    """Exact loss of the vote indicator: max over {vote}, {no vote} of |log P_D / P_D'|, with the claimed
    Laplace scale 1 / (eps R(1)) (appendix Alg. 4 line 6)."""
    length, h, c, scale = mase_setup(params)
    low, high = _dp_mase_sums(params)
    a = 2.0 * (h + c) - (high - low) / length
    p, q = _difference_tail(a, scale), _difference_tail(a - 1.0 / length, scale)
    return max(abs(math.log(q / p)), abs(math.log((1.0 - p) / (1.0 - q))))


E2E_DP_MASE = register(AuditTarget(
    name="e2e-dp-mase",
    description="DP-MASE run in the engine (rio2023 Alg. 2 + appendix Alg. 4, 2 arms, event mode): every agent's "
                "first-epoch vote message",
    neighbours="reward sets differing in one reward (rio2023 Def. 3.6): one epoch-1 reward of arm 0 is 1 (D) or 0 "
               "(D'); arm 1's sum is placed so that the vote against arm 0 turns on a Laplace difference near 0; "
               "claim eps, exact the loss of the vote under Lap(1 / (eps R(1)))",
    source="rio2023 Prop. 4.1 (DP-MASE is eps-DP for communications); the protocol's own code "
           "(protocols/rio2023/dp_mase.py)",
    sample=_dp_mase, claim=lambda p: (p["epsilon"], 0.0), epsilon=1.0,
    defaults={"beta": 0.5, "arms": 2}, exact=_dp_mase_exact, max_trials=MAX_TRIALS))
