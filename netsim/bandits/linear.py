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
orthogonal direction and ||x|| = v / |theta| <= 1. The regret books and the reward means use the
values v as drawn.

w is built as F (0, h / ||h||): F is a fixed orthonormal frame whose first column is theta_hat
(a Householder reflection) and h holds d - 1 standard normals; h / ||h|| is uniform on the unit
sphere of R^(d-1), and F maps it onto the unit sphere of the hyperplane orthogonal to theta.
*Change (issue 25):* until then w was the normalised projection of d normals onto that
hyperplane, P g / ||P g|| with g ~ N(0, I_d) and P = F' F'^T the projector (F' the last d - 1
columns of F). P g has the law of F' h, so both give the same law; the new draw takes d - 1
normals instead of d and a few passes over contiguous rows instead of a dozen passes over short
ones, but it changes the draws, hence every table of gapped contexts
(tests/test_feducb.py checks the law with Kolmogorov-Smirnov tests).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from netsim.bandits.base import BanditEnvironment, bandits
from netsim.engine import params as P
from netsim.engine.errors import InputError
from netsim.engine.normals import standard_normal
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


def to_frame(theta: np.ndarray, y: np.ndarray) -> np.ndarray:
    """F y, in place, for the d x n array ``y``: F is the orthonormal frame whose first column is
    theta / ||theta|| and whose other d - 1 columns span the hyperplane orthogonal to theta.

    F = H diag(-s, 1, ..., 1) with H = I - 2 u u^T / (u^T u) the Householder reflection for
    u = theta_hat + s e_1, s the sign of theta_hat_1 (|u|^2 >= 2, no cancellation): H e_1 = -s theta_hat.
    Applied as y - u (2 u^T y / u^T u), one rank-one update (BLAS dger) in place: O(d n), where a
    matrix product would be O(d^2 n).
    """
    from scipy.linalg import blas  # imported on first use (start-up time)

    direction = theta / np.linalg.norm(theta)
    sign = 1.0 if direction[0] >= 0 else -1.0
    u = direction.copy()
    u[0] += sign
    y[0] *= -sign
    weights = u @ y
    weights *= 2.0 / (u @ u)
    updated = blas.dger(-1.0, weights, u, a=y.T, overwrite_a=True)  # y^T -= weights u^T
    if not np.shares_memory(updated, y):  # dger works in place on a contiguous float64 y
        y[...] = updated.T
    return y


def gapped_contexts(rng: np.random.Generator, theta: np.ndarray, count: int, arms: int,
                    band: tuple[float, float], best_band: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
    """``count`` decision sets of ``arms`` unit vectors with prescribed values <x, theta> (Sec. 4.4).

    Returns ``(contexts, values)``: the contexts, count x arms x d (a view of a d x count x arms
    array, so that coordinate j of every action is one contiguous row), and their values <x, theta>
    as drawn (count x arms). Row ``best`` (uniform over the K rows, independently per set) gets a value
    U[best_band], every other row U[band].

    Construction (module docstring): x = F (v / ||theta||, r h / ||h||) with F the frame of :func:`to_frame`
    (first column theta_hat, the others a basis of the hyperplane orthogonal to theta), r = sqrt(1 - v^2 /
    ||theta||^2) and h a vector of d - 1 standard normals, so that F (0, h / ||h||) is uniform on the unit
    sphere of that hyperplane. Draws: the values, the best rows, the best values, then the normals
    (a (d - 1) x count x arms array, coordinate after coordinate). All of it is a few passes over
    contiguous rows.
    """
    d = len(theta)
    norm = float(np.linalg.norm(theta))
    values = rng.uniform(band[0], band[1], size=(count, arms))
    best = rng.integers(arms, size=count)
    values[np.arange(count), best] = rng.uniform(best_band[0], best_band[1], size=count)
    y = np.empty((d, count * arms))  # coordinates in the frame F
    along = np.divide(values.reshape(-1), norm, out=y[0])
    if d > 1:
        h = standard_normal(rng, y[1:])  # rng.standard_normal(out=y[1:]), compiled (netsim.engine.normals)
        scale = np.einsum("ja,ja->a", h, h)  # ||h||^2 of every action
        np.divide(1.0 - np.square(along), scale, out=scale)
        np.sqrt(np.maximum(scale, 0.0, out=scale), out=scale)
        h *= scale
    return to_frame(theta, y).reshape(d, count, arms).transpose(1, 2, 0), values


def draw_contexts(rng: np.random.Generator, law: tuple[str, tuple[float, float], tuple[float, float]],
                  theta: np.ndarray, count: int, arms: int) -> tuple[np.ndarray, np.ndarray]:
    """The contexts (count x arms x d) and their values <x, theta> of one observation: :func:`gapped_contexts`
    for ``law = ("gapped", band, best_band)``, else i.i.d. uniform on the unit sphere. A pure function of the
    generator's state and the arguments (what :meth:`netsim.engine.streams.Streams.draw` shares)."""
    contexts, band, best_band = law
    if contexts == "gapped":
        return gapped_contexts(rng, theta, count, arms, band, best_band)
    x = rng.normal(size=(count, arms, len(theta)))
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    return x, x @ theta


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
        self._law = (options.get("contexts"), tuple(options["band"]), tuple(options["best_band"]))
        self._values = np.zeros((num_agents, options["arms"]))
        # Placeholder so that num_arms works before the first observation.
        self.local_means = np.zeros((num_agents, options["arms"]))

    def observe(self, agents: np.ndarray) -> np.ndarray:
        """Draw and return the contexts (len(agents) x K x d) of the next trial of ``agents``.

        Gapped contexts come as a view of a d x len(agents) x K array (:func:`gapped_contexts`): for each
        agent, ``contexts[a].T`` is a d x K matrix with contiguous rows, which batched matrix products read
        as it is.
        """
        agents = np.asarray(agents, dtype=np.int64)
        x, values = self.streams.draw(self._context_rng, draw_contexts, self._law, self.theta, len(agents),
                                      self.options["arms"])
        self._values[agents] = values
        return x

    def expected(self, agents: np.ndarray) -> np.ndarray:
        """<x_k, theta> for the current contexts of ``agents``."""
        return self._values[np.asarray(agents, dtype=np.int64)]

    def _pull_gaps(self, agents, arms):
        # every agent in order (a tick of one clock, BanditEnvironment.book_each): the values themselves, no copy
        values = self._values if agents is self._each else self._values[agents]
        return values.max(axis=1) - values[np.arange(len(agents)), arms]

    def _rewards(self, agents, arms, n, u):
        mean = self._values[agents, arms]
        if self.options["noise"] == "bernoulli":
            return (u < np.clip(mean, 0.0, 1.0)).astype(float)
        from scipy import special  # imported on first use (start-up time)

        return mean + self.options["sigma"] * special.ndtri(u)

    def summary(self) -> dict[str, Any]:
        return {"arms": self.options["arms"], "dimension": self.dimension, "theta": self.theta.round(6).tolist()}
