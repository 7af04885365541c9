"""Linear contextual bandit: each trial an agent sees K context vectors and pulls one.

The expected reward of context x is <x, theta>. Before pulling, a protocol calls
:meth:`LinearBandit.observe` to receive the contexts of the current trial; ``pull_many``
then refers to the row index of the chosen context. Regret per pull is
max_k <x_k, theta> - <x_a, theta> for that agent's current contexts.

Contexts (``contexts = "sphere"``): K i.i.d. vectors uniform on the unit sphere, drawn
from the ``("contexts",)`` stream; theta is uniform in the unit ball (``("means",)`` stream).

Contexts ``"gapped"`` (dubey2020 FedUCB, Sec. 4.4): every trial each agent gets K actions,
K - 1 of them with <x, theta> ~ U[band] (default [0.5, 0.6]) and one, at a uniformly random
row, with <x, theta> ~ U[best_band] (default [0.7, 0.8]); ``arms = d * d`` reproduces the
paper's K = d^2. Rewards are Bernoulli(<x, theta>) (``noise = "bernoulli"``, the paper) or
<x, theta> + N(0, sigma^2) (``noise = "gaussian"``, the variant).

Decision for gapped contexts (the paper does not say how ||x|| <= L = 1 is kept): by
Cauchy-Schwarz a value v = <x, theta> needs ||theta|| >= v, so theta is drawn uniform in the
unit ball *conditioned on* ||theta|| >= max(best_band) (rejection sampling on the
``("means",)`` stream; for d = 10 about 11 % of draws are rejected). An action with value v is
x = (v / ||theta||) theta_hat + r w, with theta_hat = theta / ||theta||, w a uniformly random
unit vector orthogonal to theta and r = sqrt(1 - v^2 / ||theta||^2), so every action lies on
the unit sphere (||x|| = L = 1 exactly) and <x, theta> = v exactly. For d = 1 there is no
orthogonal direction and ||x|| = v / |theta| <= 1.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from netsim.bandits.base import BanditEnvironment, bandits
from netsim.engine import params as P
from netsim.engine.errors import InputError
from netsim.engine.streams import Streams


def unit_ball(rng: np.random.Generator, d: int) -> np.ndarray:
    """A point uniform in the d-dimensional unit ball."""
    direction = rng.normal(size=d)
    return direction / np.linalg.norm(direction) * rng.random() ** (1.0 / d)


def gapped_theta(rng: np.random.Generator, d: int, top: float) -> np.ndarray:
    """theta uniform in the unit ball conditioned on ||theta|| >= ``top`` (rejection sampling).

    ``top`` is the largest inner product the actions must realise with ||x|| <= 1.
    """
    if top > 1.0:
        raise ValueError(f"top = {top}; accepted: <= 1")
    while True:
        theta = unit_ball(rng, d)
        if np.linalg.norm(theta) >= top:
            return theta


def gapped_contexts(rng: np.random.Generator, theta: np.ndarray, count: int, arms: int,
                    band: tuple[float, float], best_band: tuple[float, float]) -> np.ndarray:
    """``count`` decision sets of ``arms`` unit vectors with prescribed values <x, theta> (Sec. 4.4).

    Row ``best`` (uniform over the K rows, independently per set) gets a value U[best_band],
    every other row U[band]; see the module docstring for the construction.
    """
    out = np.empty((count, arms, len(theta)))
    for _ in gapped_blocks(rng, theta, count, arms, band, best_band, block=max(count, 1), out=out):
        pass
    return out


def gapped_blocks(rng: np.random.Generator, theta: np.ndarray, count: int, arms: int, band: tuple[float, float],
                  best_band: tuple[float, float], *, block: int, out: np.ndarray) -> Iterator[slice]:
    """:func:`gapped_contexts` written into ``out`` ``block`` decision sets at a time (yields each block's slice).

    The same draws in the same order whatever ``block``: every set's values first, then the normals
    of the orthogonal parts block after block (a generator's normals are one sequence however they
    are split), and the same arithmetic per element, so the contexts are bit-identical. A caller
    that uses each block as it is yielded works on data still in the CPU cache.
    """
    d = len(theta)
    norm = float(np.linalg.norm(theta))
    direction = theta / norm
    values = rng.uniform(band[0], band[1], size=(count, arms))
    best = rng.integers(arms, size=count)
    values[np.arange(count), best] = rng.uniform(best_band[0], best_band[1], size=count)
    along = values / norm
    radial = np.sqrt(np.maximum(1.0 - along**2, 0.0)) if d > 1 else None
    width = min(block, count)
    w_buffer, product = np.empty((width, arms, d)), np.empty((width, arms, d))  # reused by every block
    for start in range(0, count, block):
        part = slice(start, min(start + block, count))
        x = np.multiply(along[part, :, None], direction, out=out[part])
        if radial is not None:
            n = part.stop - start
            w, tmp = w_buffer[:n], product[:n]
            rng.standard_normal(out=w)
            np.subtract(w, np.multiply((w @ direction)[..., None], direction, out=tmp), out=w)
            length = np.sqrt(np.einsum("akd,akd->ak", w, w))
            x += np.multiply((radial[part] / length)[..., None], w, out=tmp)
        yield part


@bandits.register("linear")
class LinearBandit(BanditEnvironment):
    """Linear contextual arms with Bernoulli or Gaussian rewards."""

    kind = "linear"
    description = "linear contextual bandit: K contexts per trial, reward <x, theta> + noise"
    fields = {
        "dimension": P.integer(10, low=1, doc="context dimension d", label="context dimension d"),
        "arms": P.integer(10, low=2, doc="contexts offered per trial K", label="contexts per trial K"),
        "contexts": P.choice(("sphere", "gapped"), "sphere",
                             doc="how the K contexts of a trial are drawn (gapped: dubey2020 Sec. 4.4)",
                             label="context law"),
        "band": P.real_list((0.5, 0.6), low=0.0, high=1.0, min_len=2,
                            doc="gapped: [low, high] of <x, theta> for the K - 1 suboptimal actions",
                            label="suboptimal reward band", unit=""),
        "best_band": P.real_list((0.7, 0.8), low=0.0, high=1.0, min_len=2,
                                 doc="gapped: [low, high] of <x, theta> for the best action",
                                 label="best reward band", unit=""),
        "noise": P.choice(("bernoulli", "gaussian"), "gaussian", doc="reward law around <x, theta>",
                          label="reward law"),
        "sigma": P.real(0.1, low=0.0, doc="Gaussian noise standard deviation", label="reward noise sd", unit=""),
    }

    @classmethod
    def check(cls, options: Mapping[str, Any], source: str | None = None) -> None:
        if options.get("contexts") != "gapped":
            return
        band, best = tuple(options.get("band", (0.5, 0.6))), tuple(options.get("best_band", (0.7, 0.8)))
        for key, pair in (("band", band), ("best_band", best)):
            if len(pair) != 2 or pair[0] > pair[1]:
                raise InputError(f"bandit.{key} = {list(pair)}; accepted: two values [low, high] with low <= high",
                                 source=source, key=f"bandit.{key}")
        if best[0] <= band[1] or best[1] <= 0.0:
            raise InputError(f"bandit.best_band = {list(best)} must lie above bandit.band = {list(band)}; "
                             "accepted: best_band low > band high", source=source, key="bandit.best_band")
        return

    def __init__(self, options: Mapping[str, Any], num_agents: int, streams: Streams):
        super().__init__(options, num_agents, streams)
        self.dimension = options["dimension"]
        if options.get("contexts") == "gapped":
            self.theta = gapped_theta(streams.for_("means"), self.dimension, max(options["best_band"]))
        else:
            self.theta = unit_ball(streams.for_("means"), self.dimension)
        self._context_rng = streams.for_("contexts")
        self._values = np.zeros((num_agents, options["arms"]))
        self._buffer_x = np.empty((0, options["arms"], self.dimension))
        # Placeholder so that num_arms works before the first observation.
        self.local_means = np.zeros((num_agents, options["arms"]))

    def observe(self, agents: np.ndarray) -> np.ndarray:
        """Draw and return the contexts (len(agents) x K x d) of the next trial of ``agents``."""
        agents = np.asarray(agents, dtype=np.int64)
        out = np.empty((len(agents), self.options["arms"], self.dimension))
        for _ in self._fill(agents, out, max(len(agents), 1)):
            pass
        return out

    def observe_blocks(self, agents: np.ndarray, block: int) -> Iterator[tuple[slice, np.ndarray]]:
        """:meth:`observe` of ``agents`` handed over ``block`` agents at a time, as it is drawn.

        Yields ``(part, contexts)``: the slice of ``agents`` and their contexts (a view of a buffer
        reused at the next trial). The draws, hence the contexts, are bit-identical to
        :meth:`observe`'s; a protocol that chooses from each block as it comes reads it from the CPU
        cache (FedUCB's hot path).
        """
        agents = np.asarray(agents, dtype=np.int64)
        if len(self._buffer_x) < len(agents):
            self._buffer_x = np.empty((len(agents), self.options["arms"], self.dimension))
        out = self._buffer_x[: len(agents)]
        for part in self._fill(agents, out, max(block, 1)):
            yield part, out[part]

    def _fill(self, agents: np.ndarray, out: np.ndarray, block: int) -> Iterator[slice]:
        count = len(agents)
        if self.options.get("contexts") == "gapped":
            parts = gapped_blocks(self._context_rng, self.theta, count, self.options["arms"], self.options["band"],
                                  self.options["best_band"], block=block, out=out)
        else:
            parts = self._sphere_blocks(count, block, out)
        for part in parts:
            self._values[agents[part]] = out[part] @ self.theta
            yield part

    def _sphere_blocks(self, count: int, block: int, out: np.ndarray) -> Iterator[slice]:
        for start in range(0, count, block):
            part = slice(start, min(start + block, count))
            x = self._context_rng.normal(size=out[part].shape)
            np.divide(x, np.linalg.norm(x, axis=-1, keepdims=True), out=out[part])
            yield part

    def expected(self, agents: np.ndarray) -> np.ndarray:
        """<x_k, theta> for the current contexts of ``agents``."""
        return self._values[np.asarray(agents, dtype=np.int64)]

    def _pull_gaps(self, agents, arms):
        values = self._values[agents]
        return values.max(axis=1) - values[np.arange(len(agents)), arms]

    def _rewards(self, agents, arms, n, u):
        mean = self._values[agents, arms]
        if self.options["noise"] == "bernoulli":
            return (u < np.clip(mean, 0.0, 1.0)).astype(float)
        from scipy import special  # imported on first use (start-up time)

        return mean + self.options["sigma"] * special.ndtri(u)

    def summary(self) -> dict[str, Any]:
        return {"arms": self.options["arms"], "dimension": self.dimension, "theta": self.theta.round(6).tolist()}
