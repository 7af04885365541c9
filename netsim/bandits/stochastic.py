"""Stochastic multi-armed bandits: Bernoulli, Gaussian and heterogeneous (per-agent means).

Sums of n i.i.d. rewards are drawn from their exact law by inverting its CDF at one uniform:
Binomial(n, mu) for Bernoulli arms, Normal(n mu, n sigma^2) for Gaussian arms.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from netsim.bandits.base import BanditEnvironment, bandits
from netsim.engine import params as P
from netsim.engine.errors import InputError
from netsim.engine.streams import Streams


def _means_field(doc: str, label: str = "", unit: str | None = None) -> P.Field:
    return P.either(P.choice(("uniform",)), P.real_list(low=None, min_len=2), default="uniform", doc=doc, label=label,
                    unit=unit)


COMMON = {
    "arms": P.integer(10, low=2, doc="number of arms K", label="arms K"),
    "means": _means_field("'uniform' (mu_k ~ U[low, high]) or an explicit list of K means", label="arm means", unit=""),
    "low": P.real(0.0, doc="lower end of the uniform means", label="lowest arm mean", unit=""),
    "high": P.real(1.0, doc="upper end of the uniform means", label="highest arm mean", unit=""),
}
SIGMA = {"sigma": P.real(1.0, low=0.0, low_open=True, doc="standard deviation of Gaussian reward noise",
                         label="reward noise sd", unit="")}


def bernoulli_sums(mu: np.ndarray, n: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Sum of n Bernoulli(mu) rewards at quantile u: exactly Binomial(n, mu)."""
    out = (u < mu).astype(float) * (n > 0)
    many = n > 1
    if np.any(many):
        from scipy import stats  # imported on first use: scipy.stats costs ~0.5 s of start-up

        out[many] = stats.binom.ppf(u[many], n[many], mu[many])
    return out


def gaussian_sums(mu: np.ndarray, sigma: float, n: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Sum of n Normal(mu, sigma^2) rewards at quantile u: exactly Normal(n mu, n sigma^2)."""
    from scipy import special

    return n * mu + sigma * np.sqrt(n) * special.ndtri(u)


def gaussian_singles(mu: np.ndarray, sigma: float, u: np.ndarray) -> np.ndarray:
    """One Normal(mu, sigma^2) reward at quantile u: :func:`gaussian_sums` at n = 1, the same floats
    (1 * mu is mu and sigma * sqrt(1) is sigma exactly), with three array operations instead of six."""
    from scipy import special

    return mu + sigma * special.ndtri(u)


def gaussian_every_arm(means: np.ndarray, sigma: float, u: np.ndarray) -> np.ndarray:
    """:func:`gaussian_singles` of every arm at once: ``[s, i, k]`` is agent i's reward from arm k at its
    quantile ``u[s, i]`` (``means``: agents x arms), the same floats with one ``ndtri`` per quantile."""
    from scipy import special

    return means + (sigma * special.ndtri(u))[:, :, None]


def _global_means(options: Mapping[str, Any], rng: np.random.Generator) -> np.ndarray:
    if options["means"] == "uniform":
        return rng.uniform(options["low"], options["high"], options["arms"])
    return np.array(options["means"], dtype=float)


def check_means(options: Mapping[str, Any], *, bounded: bool, source: str | None = None) -> None:
    """Scenario-time checks shared by the stochastic kinds."""
    if options["low"] > options["high"]:
        raise InputError("low must not exceed high", source=source, key="bandit.low")
    if options["means"] != "uniform" and len(options["means"]) != options["arms"]:
        raise InputError(f"{len(options['means'])} means for {options['arms']} arms; accepted: one mean per arm",
                         source=source, key="bandit.means")
    values = [options["low"], options["high"]] if options["means"] == "uniform" else list(options["means"])
    if bounded and (min(values) < 0 or max(values) > 1):
        raise InputError("Bernoulli means must lie in [0, 1]", source=source, key="bandit.means")


@bandits.register("bernoulli")
class BernoulliBandit(BanditEnvironment):
    """Every agent faces the same Bernoulli arms."""

    kind = "bernoulli"
    description = "K Bernoulli arms shared by all agents"
    fields = COMMON

    @classmethod
    def check(cls, options: Mapping[str, Any], source: str | None = None) -> None:
        check_means(options, bounded=True, source=source)

    def __init__(self, options: Mapping[str, Any], num_agents: int, streams: Streams):
        super().__init__(options, num_agents, streams)
        self.local_means = np.tile(_global_means(options, streams.for_("means")), (num_agents, 1))

    def _rewards(self, agents, arms, n, u):
        return bernoulli_sums(self.local_means[agents, arms], n, u)

    def _walk(self, agents, arms, u):
        # a running count of successes (integer sums, exact in float)
        hits = np.less(u, self.local_means[agents[:, None], arms][:, :, None], out=np.empty(u.shape, dtype=bool))
        return np.cumsum(hits, axis=2, dtype=np.int64).astype(float)


@bandits.register("gaussian")
class GaussianBandit(BanditEnvironment):
    """Every agent faces the same Gaussian arms N(mu_k, sigma^2)."""

    kind = "gaussian"
    description = "K Gaussian arms shared by all agents"
    fields = {**COMMON, **SIGMA}

    @classmethod
    def check(cls, options: Mapping[str, Any], source: str | None = None) -> None:
        check_means(options, bounded=False, source=source)

    def __init__(self, options: Mapping[str, Any], num_agents: int, streams: Streams):
        super().__init__(options, num_agents, streams)
        self.local_means = np.tile(_global_means(options, streams.for_("means")), (num_agents, 1))

    def _rewards(self, agents, arms, n, u):
        return gaussian_sums(self.local_means[agents, arms], self.options["sigma"], n, u)

    def _single_rewards(self, agents, arms, u):
        return gaussian_singles(self.local_means[agents, arms], self.options["sigma"], u)

    def _every_arm(self, u):
        return gaussian_every_arm(self.local_means, self.options["sigma"], u)


@bandits.register("heterogeneous")
class HeterogeneousBandit(BanditEnvironment):
    """Agent i's arm k has its own mean mu_{i,k}; the global mean is their average.

    ``local_means = "uniform"`` draws every mu_{i,k} ~ U[low, high] independently
    (zhu2021 Sec. 5); an explicit agents x arms matrix may be given instead. Regret is
    measured against the global means (li2022 Sec. VI-C).
    """

    kind = "heterogeneous"
    description = "per-agent means mu_{i,k}; regret against their average"
    fields = {
        "arms": COMMON["arms"],
        "local_means": P.either(
            P.choice(("uniform",)),
            P.Field("a list of per-agent lists of means", lambda v: v if isinstance(v, list) and v
                    and all(isinstance(r, list) for r in v) else None),
            default="uniform", doc="'uniform' (mu_{i,k} ~ U[low, high]) or an agents x arms matrix",
                                label="per-agent arm means", unit=""),
        "low": COMMON["low"],
        "high": COMMON["high"],
        "noise": P.choice(("bernoulli", "gaussian"), "bernoulli", doc="reward law around mu_{i,k}", label="reward law"),
        **SIGMA,
    }

    @classmethod
    def check(cls, options: Mapping[str, Any], source: str | None = None) -> None:
        if options["low"] > options["high"]:
            raise InputError("low must not exceed high", source=source, key="bandit.low")
        matrix = options["local_means"]
        if matrix != "uniform":
            try:
                arr = np.array(matrix, dtype=float)
            except (TypeError, ValueError):
                arr = np.zeros((0, 0))
            if arr.ndim != 2 or arr.shape[1] != options["arms"]:
                raise InputError(f"expected an agents x {options['arms']} matrix of numbers",
                                 source=source, key="bandit.local_means")
        bounded = options["noise"] == "bernoulli"
        values = [options["low"], options["high"]] if matrix == "uniform" else np.ravel(matrix).tolist()
        if bounded and (min(values) < 0 or max(values) > 1):
            raise InputError("Bernoulli means must lie in [0, 1]", source=source, key="bandit.local_means")

    def __init__(self, options: Mapping[str, Any], num_agents: int, streams: Streams):
        super().__init__(options, num_agents, streams)
        if options["local_means"] == "uniform":
            rng = streams.for_("means")
            self.local_means = rng.uniform(options["low"], options["high"], (num_agents, options["arms"]))
        else:
            self.local_means = np.array(options["local_means"], dtype=float)
            if self.local_means.shape[0] != num_agents:
                raise InputError(f"{self.local_means.shape[0]} rows of local means for {num_agents} agents",
                                 key="bandit.local_means")

    def _rewards(self, agents, arms, n, u):
        mu = self.local_means[agents, arms]
        if self.options["noise"] == "bernoulli":
            return bernoulli_sums(mu, n, u)
        return gaussian_sums(mu, self.options["sigma"], n, u)

    def _single_rewards(self, agents, arms, u):
        if self.options["noise"] == "bernoulli":
            return super()._single_rewards(agents, arms, u)
        return gaussian_singles(self.local_means[agents, arms], self.options["sigma"], u)

    def _every_arm(self, u):
        if self.options["noise"] == "bernoulli":
            return super()._every_arm(u)
        return gaussian_every_arm(self.local_means, self.options["sigma"], u)
