"""Privacy audit (issue 10): estimator, every registered mechanism, a broken control, the CLI."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from netsim.engine.registry import audit_targets
from netsim.experiment import cli
from protocols.privacy import audit as audits
from protocols.privacy.audit import AuditTarget, cp_lower, cp_upper, epsilon_lower, epsilon_point, run_audit
from protocols.privacy.mechanisms import LaplaceMechanism

TRIALS = 20_000   # per input and phase; the CLI default is 100 000
SEED = 7

EXPECTED = {"laplace", "binary-tree", "interval", "cdp-mab", "dp-mase", "feducb-privatizer", "feducb-sync"}
MEETS_CLAIM = sorted(EXPECTED - {"feducb-sync"})


# ---------------------------------------------------------------------- estimator pieces
def test_clopper_pearson_bounds_match_beta_quantiles():
    # k = 30 of n = 100 at level 0.975: the exact beta quantiles of the CP interval
    assert cp_lower(30, 100, 0.975) == pytest.approx(stats.beta.ppf(0.025, 30, 71))
    assert cp_upper(30, 100, 0.975) == pytest.approx(stats.beta.ppf(0.975, 31, 70))
    assert cp_lower(0, 100, 0.975) == 0.0 and cp_upper(100, 100, 0.975) == 1.0
    # k = 0: the upper bound is 1 - (1 - level)^(1/n)
    assert cp_upper(0, 100, 0.975) == pytest.approx(1 - 0.025 ** (1 / 100))


def test_epsilon_bounds_account_for_delta():
    # counts 600 / 100 of 1000: point log(0.6 / 0.1); with delta 0.2: log(0.4 / 0.1)
    assert epsilon_point(600, 100, 1000, 0.0) == pytest.approx(math.log(6))
    assert epsilon_point(600, 100, 1000, 0.2) == pytest.approx(math.log(4))
    assert epsilon_point(600, 0, 1000, 0.0) == math.inf
    assert epsilon_point(100, 0, 1000, 0.2) == 0.0          # P - delta <= 0: no evidence
    lo = epsilon_lower(np.array([600]), np.array([100]), 1000, 0.2, 0.975)[0]
    expected = math.log((stats.beta.ppf(0.025, 600, 401) - 0.2) / stats.beta.ppf(0.975, 101, 900))
    assert lo == pytest.approx(expected)


def test_coverage_of_the_lower_bound_on_an_exact_mechanism():
    """Laplace at eps = 1: over 40 independent audits, eps_lo exceeds 1 in at most 5 (95% nominal: ~2 expected)."""
    target = audit_targets.get("laplace", key="t")
    over = sum(run_audit(target, trials=2_000, seed=s).epsilon_lo > 1.0 for s in range(40))
    assert over <= 5   # P[Binomial(40, 0.05) > 5] < 0.05


# ---------------------------------------------------------------------- registry
def test_every_mechanism_is_registered():
    assert EXPECTED <= set(audit_targets.names())
    for name in EXPECTED:
        target = audit_targets.get(name, key="t")
        assert target.neighbours and target.source and target.description


def test_bad_epsilon_is_rejected():
    with pytest.raises(ValueError, match="accepted"):
        audit_targets.get("interval", key="t").params(2.0)      # the interval mechanism takes eps in (0, 1]
    with pytest.raises(ValueError, match="accepted"):
        audit_targets.get("laplace", key="t").params(-1.0)


# ---------------------------------------------------------------------- mechanisms that meet their claim
@pytest.fixture(scope="module")
def results():
    return {name: run_audit(audit_targets.get(name, key="t"), trials=TRIALS, seed=SEED) for name in EXPECTED}


@pytest.mark.parametrize("name", MEETS_CLAIM)
def test_mechanism_meets_its_claim(results, name):
    r = results[name]
    assert r.epsilon_lo <= r.claimed_epsilon, r
    assert r.verdict == "ok"


@pytest.mark.parametrize("name", ["laplace", "binary-tree", "interval", "cdp-mab"])
def test_tight_mechanisms_are_measured_near_their_claim(results, name):
    """Pure-eps Laplace-type mechanisms whose claim is attained: the audit finds most of it (power check)."""
    r = results[name]
    assert r.epsilon_lo >= 0.75 * r.claimed_epsilon, r
    assert r.exact == pytest.approx(r.claimed_epsilon)


def test_dp_mase_votes_are_post_processing(results):
    """The vote is a post-processing of eps-DP means: measured loss in (0.4 eps, eps]."""
    r = results["dp-mase"]
    assert 0.4 < r.epsilon_lo <= 1.0


def test_feducb_privatizer_on_a_fixed_schedule_is_far_below_its_claim(results):
    r = results["feducb-privatizer"]
    assert r.exact == 0.0                         # closed form: (0, 0.1)-DP for this pair
    assert r.epsilon_lo == 0.0 and r.epsilon_hat < 0.2


def test_feducb_sync_trigger_leaks(results):
    """The first synchronisation round is a deterministic function of the data: P = 1 vs 0."""
    r = results["feducb-sync"]
    assert r.counts == (TRIALS, 0)
    assert r.epsilon_hat == math.inf
    assert r.epsilon_lo > 5 * r.claimed_epsilon
    assert r.verdict == "VIOLATED"


def test_feducb_sync_pair_differs_exactly_at_t0():
    target = audit_targets.get("feducb-sync", key="t")
    p = target.params()
    rng = np.random.default_rng(0)
    d_rounds = set(target.sample(p, 5, rng, False))
    n_rounds = set(target.sample(p, 5, rng, True))
    assert d_rounds == {p["t0"]} and n_rounds == {p["t0"] + 1}


def test_privatizer_exact_loss_matches_its_gaussian_formula():
    # eps = 0 already gives delta(0) = 2 Phi(mu/2) - 1: 0.080 <= 0.1 for mu = 0.2, 0.197 > 0.1 for mu = 0.5
    assert audits.gaussian_epsilon(0.2, 0.1) == 0.0
    assert audits.gaussian_epsilon(0.5, 0.1) > 0.0
    eps = audits.gaussian_epsilon(2.0, 1e-3)
    mu = 2.0
    delta = stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)
    assert delta == pytest.approx(1e-3)


# ---------------------------------------------------------------------- a broken mechanism is flagged
def _half_scale(params, trials, rng, neighbour):
    """Laplace with half the required scale (sensitivity 1, eps claimed, scale 1 / (2 eps)): really 2 eps-DP."""
    mechanism = LaplaceMechanism(epsilon=2 * params["epsilon"], sensitivity=1.0)
    return mechanism.randomise(np.full(trials, 1.0 if neighbour else 0.0), rng)


BROKEN = AuditTarget(name="laplace-half-scale", description="broken", neighbours="0 vs 1", source="test",
                     sample=_half_scale, claim=lambda p: (p["epsilon"], 0.0))


@pytest.mark.parametrize("epsilon", [0.5, 1.0])
def test_broken_laplace_is_flagged(epsilon):
    """Power: the broken mechanism's loss is 2 eps. Over seeds 0-7 at 20,000 trials the audit measured
    eps_lo = 1.80-1.96 eps and eps_hat = 1.94-2.04 eps, so the flag (eps_lo > eps) has a margin of 0.8 eps
    against a spread of about 0.05 eps: it fails with probability far below 1e-6. The eps_hat check allows
    10 % around 2 eps, twice the largest deviation seen."""
    r = run_audit(BROKEN, epsilon=epsilon, trials=TRIALS, seed=SEED)
    assert r.epsilon_lo > epsilon and r.verdict == "VIOLATED"
    assert r.epsilon_hat == pytest.approx(2 * epsilon, rel=0.1)


def test_broken_gaussian_delta_accounting_is_flagged():
    """An (eps, delta) claim with delta too small for a sigma = 1 Gaussian (true eps(1e-2) ~ 3.6)."""
    def sample(params, trials, rng, neighbour):
        return rng.normal(2.0 if neighbour else 0.0, 1.0, trials)
    target = AuditTarget(name="gauss", description="", neighbours="", source="", sample=sample,
                         claim=lambda p: (p["epsilon"], 1e-2))
    r = run_audit(target, epsilon=1.0, trials=TRIALS, seed=SEED)
    assert r.epsilon_lo > 1.0
    assert r.epsilon_lo < audits.gaussian_epsilon(2.0, 1e-2)


# ---------------------------------------------------------------------- CLI
def test_cli_audit_prints_the_measured_figures(capsys):
    assert cli.main(["audit", "laplace", "--epsilon", "0.5", "--trials", "5000", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith("laplace"))
    claimed, delta, eps_hat, eps_lo, exact, trials, verdict = line.split()[1:]
    assert float(claimed) == 0.5 and verdict == "ok" and trials == "5,000"
    assert 0.0 <= float(eps_lo) <= float(eps_hat) and float(exact) == 0.5


def test_cli_audit_all_lists_every_mechanism(capsys):
    assert cli.main(["audit", "--all", "--trials", "400"]) == 0
    out = capsys.readouterr().out
    for name in EXPECTED:
        assert any(line.split()[0] == name for line in out.splitlines() if line.strip())
    assert "VIOLATED" in next(line for line in out.splitlines() if line.startswith("feducb-sync"))


@pytest.mark.parametrize("argv", [["audit"], ["audit", "laplace", "--all"], ["audit", "lapalce"],
                                  ["audit", "interval", "--epsilon", "2"], ["audit", "laplace", "--trials", "3"]])
def test_cli_audit_bad_input_exits_2(argv, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "accepted" in err
