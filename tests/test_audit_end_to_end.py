"""Issue 18 item 10: the privacy audit catches a protocol that uses its mechanism wrongly.

Two injected miscalibrations: (1) Private Multi-Agent UCB (dubey2020a) builds its interval mechanism
with 10 eps instead of eps; (2) FedUCB's privatizer adds a tenth of its noise (its calibration with
10 eps), which at delta = 0.1 stays below the claimed eps = 1 but far above the exact loss of the
calibrated privatizer (0). The per-mechanism targets cannot see (1), since they build the mechanism
themselves, and used to report (2) as ok. The end-to-end targets (protocols/privacy/end_to_end.py)
run the protocols' own code.

Power and error rates: a flag of a calibrated protocol (eps_lo above its claim or its exact loss) has
probability at most 1 - confidence = 0.05 by the audit's construction (Clopper-Pearson bounds,
protocols/privacy/audit.py). Against the miscalibrations the margins are wide at 2,000 trials per input
and phase (seed 3, measured): dubey2020a with 10 eps gives eps_lo = 2.80 against a claim of 0.28; FedUCB
with a tenth of the noise gives eps_lo = 0.53 against an exact 0 (claim 1), and the per-mechanism
privatizer target 0.74 at 5,000 trials (0.81 at 100,000, exact loss of the miscalibrated privatizer 0.83).
As calibrated: dubey2020a eps_lo = 0.23 (claim and exact 0.28), FedUCB 0 (exact 0), CDP-MAB 0.81 (claim
and exact 1); CDP-MAB drawing a tenth of its noise: eps_lo = 5.85 against 1.

Fed_UCB (zhu2021) and DP-MASE (rio2023) in the engine, same seed and trials: Fed_UCB as calibrated
eps_lo = 0.18 (exact eps' = 0.25, claim 1), with its tree counter built with 10 eps 2.25 (VIOLATED), with
a counter that spends the whole eps on each node 0.88 (MISCALIBRATED); DP-MASE as calibrated 0.49 (exact
0.59, claim 1), with its Laplace mechanism built with 10 eps 5.68 (VIOLATED).
"""

from __future__ import annotations

import pytest

from netsim.engine.registry import audit_targets
from protocols.privacy.audit import run_audit
from protocols.privacy.gaussian_tree import FedUCBCalibration

TRIALS = 2000


def test_end_to_end_targets_are_registered():
    assert {"e2e-dubey2020a-private", "e2e-cdp-mab", "e2e-feducb", "e2e-fed-ucb", "e2e-dp-mase"} <= set(
        audit_targets.names())


def test_cdp_mab_as_calibrated_passes():
    """eps_lo = 0.81 against a claim (and exact loss) of M eps = 1: measured near the claim (power check)."""
    r = run_audit(audit_targets.get("e2e-cdp-mab", key="t"), trials=TRIALS, seed=3)
    assert r.verdict == "ok" and r.exact == r.claimed_epsilon == 1.0
    assert r.epsilon_lo > 0.6, r


def test_cdp_mab_with_a_tenth_of_its_noise_is_violated(monkeypatch):
    """A Laplace mechanism that states the right scale but draws a tenth of it (the protocol's consistency
    check on the scale passes): its first upload is 10 M eps-DP; measured eps_lo = 5.85 against 1."""
    import protocols.li2022.elimination as elimination
    from protocols.privacy.mechanisms import LaplaceMechanism

    class Quiet(LaplaceMechanism):
        def randomise(self, value, rng):
            return value + 0.1 * (super().randomise(value, rng) - value)

    monkeypatch.setattr(elimination, "LaplaceMechanism", Quiet)
    r = run_audit(audit_targets.get("e2e-cdp-mab", key="t"), trials=TRIALS, seed=3)
    assert r.verdict == "VIOLATED" and r.epsilon_lo > 2 * r.claimed_epsilon, r


def test_dubey2020a_private_as_calibrated_passes():
    r = run_audit(audit_targets.get("e2e-dubey2020a-private", key="t"), trials=TRIALS, seed=3)
    assert r.verdict == "ok" and r.exact == pytest.approx(r.claimed_epsilon)
    assert r.epsilon_lo > 0.5 * r.claimed_epsilon, r  # the statistic sees the release (power check)


def test_dubey2020a_private_with_ten_times_epsilon_inside_is_violated(monkeypatch):
    """eps = 0.1 claimed: one release at count 10, worth 10^(-0.55) = 0.28. With 10 eps the protocol releases
    arm 0's mean at every pull (interval ceil(1/1) = 1), the first at count 1 worth 1 on its own."""
    import protocols.dubey2020a.trials as private  # where the protocol builds its mechanism

    real = private.IntervalMechanism
    monkeypatch.setattr(private, "IntervalMechanism", lambda *, epsilon, v: real(epsilon=min(10 * epsilon, 1.0), v=v))
    r = run_audit(audit_targets.get("e2e-dubey2020a-private", key="t"), trials=TRIALS, seed=3)
    assert r.verdict == "VIOLATED" and r.epsilon_lo > 2 * r.claimed_epsilon, r


def test_feducb_as_calibrated_passes():
    r = run_audit(audit_targets.get("e2e-feducb", key="t"), trials=TRIALS, seed=3)
    assert r.verdict == "ok" and r.exact == 0.0 and r.epsilon_lo == 0.0, r


def tenfold_epsilon(calibration_for):
    def wrong(params, **kwargs):
        right = calibration_for(params, **kwargs)
        return FedUCBCalibration(epsilon=10 * right.epsilon, delta=right.delta, alpha=right.alpha,
                                 dimension=right.dimension, agents=right.agents, releases=right.releases, L=right.L,
                                 S=right.S, sigma=right.sigma, lam=right.lam)
    return wrong


def test_feducb_with_a_tenth_of_the_noise_is_miscalibrated(monkeypatch):
    """A tenth of the noise: the exact loss becomes 0.83 at delta = 0.1 (it is 0 as calibrated); the audit
    measures an eps_lo well above 0, below the claimed 1: MISCALIBRATED (it used to say ok)."""
    import protocols.feducb.centralized as centralized

    monkeypatch.setattr(centralized, "calibration_for", tenfold_epsilon(centralized.calibration_for))
    r = run_audit(audit_targets.get("e2e-feducb", key="t"), trials=TRIALS, seed=3)
    assert r.verdict == "MISCALIBRATED" and 0.2 < r.epsilon_lo < r.claimed_epsilon, r


def test_the_mechanism_target_flags_a_privatizer_with_a_tenth_of_the_noise(monkeypatch):
    """The same miscalibration in the per-mechanism target (feducb-privatizer): ok before, flagged now."""
    import protocols.feducb.audit as feducb_audit

    real = feducb_audit.GaussianTreePrivatizer

    def quiet(calibration, rngs):
        cal = calibration
        return real(FedUCBCalibration(epsilon=10 * cal.epsilon, delta=cal.delta, alpha=cal.alpha,
                                      dimension=cal.dimension, agents=cal.agents, releases=cal.releases), rngs)

    monkeypatch.setattr(feducb_audit, "GaussianTreePrivatizer", quiet)
    r = run_audit(audit_targets.get("feducb-privatizer", key="t"), trials=5000, seed=7)
    assert r.exact == 0.0 and 0.2 < r.epsilon_lo < r.claimed_epsilon, r
    assert r.verdict == "MISCALIBRATED"


def test_fed_ucb_as_calibrated_passes():
    """The first release carries one tree node: exact eps' = eps / 4 = 0.25 at T = 15; measured eps_lo = 0.18
    (power check: the statistic sees the node's noise)."""
    r = run_audit(audit_targets.get("e2e-fed-ucb", key="t"), trials=TRIALS, seed=3)
    assert r.verdict == "ok" and r.claimed_epsilon == 1.0 and r.exact == pytest.approx(0.25)
    assert r.epsilon_lo > 0.1, r


def test_fed_ucb_with_ten_times_epsilon_inside_is_violated(monkeypatch):
    """Fed_UCB builds its binary-tree counter with 10 eps: the node noise is Lap(0.4) instead of Lap(4), a loss
    of 2.5 for the first release; measured eps_lo = 2.25 against the claim 1."""
    import protocols.zhu2021.gossip_ucb as gossip_ucb

    real = gossip_ucb.BinaryTreeCounter
    monkeypatch.setattr(gossip_ucb, "BinaryTreeCounter", lambda *, epsilon, **kw: real(epsilon=10 * epsilon, **kw))
    r = run_audit(audit_targets.get("e2e-fed-ucb", key="t"), trials=TRIALS, seed=3)
    assert r.verdict == "VIOLATED" and r.epsilon_lo > 2 * r.claimed_epsilon, r


def test_fed_ucb_without_the_split_over_levels_is_miscalibrated(monkeypatch):
    """A counter that spends the whole eps on every node (eps' = eps, not eps / levels, zhu2021 Sec. 4.1): the
    first release loses 1, the claim itself, so only the exact 0.25 shows it; measured eps_lo = 0.88."""
    import protocols.zhu2021.gossip_ucb as gossip_ucb

    class Unsplit(gossip_ucb.BinaryTreeCounter):
        def __init__(self, **kw) -> None:
            super().__init__(**kw)
            self.node_epsilon, self.scale = self.epsilon, self.sensitivity / self.epsilon

    monkeypatch.setattr(gossip_ucb, "BinaryTreeCounter", Unsplit)
    r = run_audit(audit_targets.get("e2e-fed-ucb", key="t"), trials=TRIALS, seed=3)
    assert r.verdict == "MISCALIBRATED" and 0.5 < r.epsilon_lo < r.claimed_epsilon, r


def test_dp_mase_as_calibrated_passes():
    """The vote indicator loses 0.59 under Lap(1 / (eps R(1))) (exact); measured eps_lo = 0.49 (power check)."""
    r = run_audit(audit_targets.get("e2e-dp-mase", key="t"), trials=TRIALS, seed=3)
    assert r.verdict == "ok" and r.claimed_epsilon == 1.0 and r.exact == pytest.approx(0.591, abs=1e-3)
    assert r.epsilon_lo > 0.3, r


def test_dp_mase_with_ten_times_epsilon_inside_is_violated(monkeypatch):
    """DP-MASE builds its Laplace mechanism with 10 eps (R(e), h and c keep the claimed eps): on D' the agent
    votes unless a difference of Lap(1 / (10 eps R)) exceeds 0.98 / R (probability 2e-4); measured eps_lo = 5.68
    against the claim 1."""
    import protocols.rio2023.dp_mase as dp_mase

    real = dp_mase.LaplaceMechanism
    monkeypatch.setattr(dp_mase, "LaplaceMechanism",
                        lambda *, epsilon, sensitivity: real(epsilon=10 * epsilon, sensitivity=sensitivity))
    r = run_audit(audit_targets.get("e2e-dp-mase", key="t"), trials=TRIALS, seed=3)
    assert r.verdict == "VIOLATED" and r.epsilon_lo > 2 * r.claimed_epsilon, r


def test_an_audit_whose_protocol_bypasses_the_neighbouring_rewards_is_refused(monkeypatch):
    """Paper-mode Fed_UCB pulls through ``pull_each``; an installer that patched only ``pull_many`` made D and
    D' the same run (eps_lo = 0, a vacuous pass). The audit now refuses such a run instead of passing it."""
    import protocols.privacy.end_to_end as e2e

    real = e2e._neighbouring_rewards

    def only_pull_many(bandit, agents, neighbour, pull=0):
        each = bandit.pull_each
        pulls = real(bandit, agents, neighbour, pull)
        bandit.pull_each = each   # the regression: lockstep pulls read the real rewards
        return pulls

    monkeypatch.setattr(e2e, "_neighbouring_rewards", only_pull_many)
    with pytest.raises(RuntimeError, match="never made arm-0 pull 1"):
        run_audit(audit_targets.get("e2e-fed-ucb", key="t"), trials=200, seed=3)
