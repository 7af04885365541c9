"""Tree-based Gaussian PRIVATIZER of FedUCB (Dubey & Pentland 2020, Alg. 2, Sec. 4.3, Prop. 4).

Two objects:

* :class:`FedUCBCalibration` holds *every* constant that privacy feeds into the bandit: the tree
  depth m, the per-entry noise variance sigma_N^2, the operator-norm bound Lambda, the spectral
  bounds rho_min, rho_max, the bound kappa, the PSD shift and the exploration radius beta
  (Prop. 2). Nothing else in the code base computes them.
* :class:`GaussianTreePrivatizer` is the binary-tree (continual release) mechanism over
  synchronisation rounds (Alg. 2, with the "least nodes" prefix decomposition of Jain, Kothari &
  Thakurta 2012, Alg. 5 = the binary mechanism of Chan, Shi & Song 2010 / Dwork et al. 2010).
  It privatises the (d+1) x (d+1) statistic Q = sum [x y]^T [x y] of a batch of independent
  streams (one per agent, or per (agent, estimator)) that advance together.

Formulas, written out from Sec. 4.3 and Prop. 4 (symbols were lost in conversion; decisions below):

* m = 1 + ceil(log2 n) with n the number of releases the tree must support (Alg. 2 line 2:
  n when the number of rounds is fixed a priori, else T; Remark 4).
* Each tree node holds N = (Ñ + Ñ^T)/sqrt(2), Ñ_ij ~ N(0, sigma_N^2) i.i.d., with
  sigma_N^2 = 16 m (L^2 + 1)^2 log(2/delta)^2 / epsilon^2 (Alg. 2 line 5, as printed: the
  *square* of the log). So off-diagonal entries of N have variance sigma_N^2 and diagonal
  entries 2 sigma_N^2 (:attr:`GaussianTreePrivatizer.entry_variance`).
* Lambda = 32 m (L^2 + 1) log(4/delta) (4 sqrt(d) + 2 ln(2 n M / alpha)) / epsilon (Sec. 4.3; the
  printed "4 d" is read as 4 sqrt(d), the operator-norm bound of a d x d Gaussian matrix used by
  Shariff & Sheffet 2018, whose radical was lost).
* rho_min = Lambda, rho_max = 3 Lambda (Prop. 4): every released H is shifted by 2 Lambda I so
  that Lambda I <= H + 2 Lambda I <= 3 Lambda I whenever ||H||_op <= Lambda.
* kappa (Prop. 4, printed "(sqrt d + 2 log(2nM/alpha)) / (sqrt ..."): our reading is
  kappa = ||h|| bound / sqrt(rho_min) with ||h|| <= c (sqrt(d) + 2 ln(2nM/alpha)) and
  c = Lambda / (4 sqrt(d) + 2 ln(2nM/alpha)) = 32 m (L^2+1) log(4/delta)/epsilon the scale factor of
  Lambda, i.e. kappa = sqrt(c) (sqrt(d) + 2 ln(2nM/alpha)) / sqrt(4 sqrt(d) + 2 ln(2nM/alpha)).
* beta (Prop. 2) = sigma sqrt(2 log(2/alpha) + log det V - d log(M rho_min)) + S sqrt(M rho_max)
  + M kappa. The printed "d log(det V)" is read as "log det V" (the self-normalised bound of
  Abbasi-Yadkori et al. 2011, Thm. 2, which the paper builds on): log det V - d log(M rho_min) =
  log det(V / (M rho_min)) >= 0 because V >= M rho_min I, whereas the literal d log det V is not
  scale invariant and can make the radicand negative.
* epsilon = inf (non-private switch): no noise, Lambda = kappa = 0 and the regulariser is
  rho_min = rho_max = lam (the OFUL ridge; default 1), applied as the shift lam I.

The shift applied to each released Gram block is (rho_min + rho_max)/2 I: 2 Lambda I in the
private case and lam I in the non-private case, so S = sum_i U_hat_i >= M rho_min I always
agrees with Alg. 1's initialisation S = M rho_min I.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cached_property

import numpy as np

from netsim.comm import GroupedDraws, standard_normal


def _check(name: str, value: float, *, low: float = 0.0, allow_inf: bool = False, high: float | None = None,
           low_open: bool = True) -> float:
    value = float(value)
    bad = math.isnan(value) or (math.isinf(value) and not allow_inf) or value < low or (low_open and value == low)
    if high is not None and value >= high:
        bad = True
    if bad:
        accepted = f"a number {'>' if low_open else '>='} {low:g}" + (f" and < {high:g}" if high is not None else "")
        raise ValueError(f"{name} = {value!r}; accepted: {accepted}" + (" or inf" if allow_inf else ""))
    return value


def tree_depth(releases: int) -> int:
    """m = 1 + ceil(log2 n): depth of a binary tree with n >= 1 leaves (Alg. 2 line 2)."""
    if releases < 1:
        raise ValueError(f"releases = {releases}; accepted: an integer >= 1")
    return 1 + (int(releases) - 1).bit_length()


class FedUCBCalibration:
    """All privacy-dependent constants of FedUCB in one place (Alg. 2, Sec. 4.3, Props. 2 and 4).

    The parameters are fixed at construction; each constant is computed once, on first use (the
    learners read rho_min, rho_max and kappa every trial).

    Parameters
    ----------
    epsilon, delta:
        Privacy budget of each agent's outgoing sequence; ``epsilon = inf`` turns privacy off.
    alpha:
        Failure probability of the confidence bound (Defs. 2 and 3).
    dimension:
        d.
    agents:
        M (number of agents whose released matrices are summed).
    releases:
        n, the number of releases the tree supports (T when not fixed a priori, Remark 4).
    L, S:
        Bounds on ||x|| and ||theta|| (Sec. 3, assumptions (a) and (c)); the paper uses L = S = 1.
    sigma:
        Sub-Gaussian constant of the reward noise (assumption (d)).
    lam:
        Ridge regulariser used as rho_min = rho_max when epsilon = inf.
    estimators:
        gamma, the number of round-robin estimators per agent of decentralized FedUCB (Remark 5):
        the union bound of Lambda and kappa runs over M gamma trees, i.e. ln(2 n M gamma / alpha)
        (the "additional term of log(gamma)"); 1 for the centralized algorithm.
    """

    def __init__(self, *, epsilon: float, delta: float, alpha: float, dimension: int, agents: int,
                 releases: int, L: float = 1.0, S: float = 1.0, sigma: float = 0.5, lam: float = 1.0,
                 estimators: int = 1):
        self.epsilon = _check("epsilon", epsilon, allow_inf=True)
        self.delta = _check("delta", delta, high=1.0)
        self.alpha = _check("alpha", alpha, high=1.0)
        self.L = _check("L", L)
        self.S = _check("S", S, low_open=False)
        self.sigma = _check("sigma", sigma, low_open=False)
        self.lam = _check("lam", lam)
        if int(dimension) < 1 or int(agents) < 1 or int(releases) < 1:
            raise ValueError(f"dimension, agents, releases = {dimension}, {agents}, {releases}; "
                             "accepted: integers >= 1")
        if int(estimators) < 1:
            raise ValueError(f"estimators = {estimators}; accepted: an integer >= 1")
        self.estimators = int(estimators)
        self.dimension = int(dimension)
        self.agents = int(agents)
        self.releases = int(releases)
        self.m = tree_depth(self.releases)

    @cached_property
    def private(self) -> bool:
        return not math.isinf(self.epsilon)

    @cached_property
    def _log_term(self) -> float:
        """2 ln(2 n M gamma / alpha), the union-bound term of Lambda and kappa (gamma = 1: centralized)."""
        return 2.0 * math.log(2.0 * self.releases * self.agents * self.estimators / self.alpha)

    @cached_property
    def noise_variance(self) -> float:
        """sigma_N^2 = 16 m (L^2+1)^2 log(2/delta)^2 / epsilon^2 (Alg. 2 line 5); 0 when epsilon = inf."""
        if not self.private:
            return 0.0
        return 16.0 * self.m * (self.L**2 + 1.0) ** 2 * math.log(2.0 / self.delta) ** 2 / self.epsilon**2

    @cached_property
    def noise_std(self) -> float:
        return math.sqrt(self.noise_variance)

    @cached_property
    def scale(self) -> float:
        """c = 32 m (L^2+1) log(4/delta) / epsilon, the factor of Lambda (Sec. 4.3); 0 when epsilon = inf."""
        if not self.private:
            return 0.0
        return 32.0 * self.m * (self.L**2 + 1.0) * math.log(4.0 / self.delta) / self.epsilon

    @cached_property
    def Lambda(self) -> float:
        """Lambda = c (4 sqrt(d) + 2 ln(2nM/alpha)) (Sec. 4.3)."""
        return self.scale * (4.0 * math.sqrt(self.dimension) + self._log_term)

    @cached_property
    def rho_min(self) -> float:
        """Prop. 4: rho_min = Lambda (lam when epsilon = inf)."""
        return self.Lambda if self.private else self.lam

    @cached_property
    def rho_max(self) -> float:
        """Prop. 4: rho_max = 3 Lambda (lam when epsilon = inf)."""
        return 3.0 * self.Lambda if self.private else self.lam

    @cached_property
    def shift(self) -> float:
        """Multiple of I added to each released Gram block: 2 Lambda (private) or lam."""
        return 0.5 * (self.rho_min + self.rho_max)

    @cached_property
    def kappa(self) -> float:
        """Prop. 4 (our reading): sqrt(c) (sqrt(d) + 2 ln(2nM/alpha)) / sqrt(4 sqrt(d) + 2 ln(2nM/alpha))."""
        if not self.private:
            return 0.0
        d = self.dimension
        return math.sqrt(self.scale) * (math.sqrt(d) + self._log_term) / math.sqrt(4.0 * math.sqrt(d) + self._log_term)

    def beta(self, logdet_v: np.ndarray | float, group: np.ndarray | float | None = None) -> np.ndarray:
        """Prop. 2: sigma sqrt(2 log(2/alpha) + log det V - d log(M rho_min)) + S sqrt(M rho_max) + M kappa.

        ``group`` replaces M by the number of agents whose releases a learner sums (decentralized
        FedUCB: |N_gamma(i)|, the gamma-neighbourhood including i).
        """
        confidence, regulariser, bias, noise = self._beta_terms if group is None else self._terms_of(group)
        radicand = confidence + np.asarray(logdet_v) - regulariser
        return self.sigma * np.sqrt(np.maximum(radicand, 0.0)) + bias + noise

    @property
    def beta_terms(self) -> tuple:
        """The terms of :meth:`beta` that do not depend on V, for the M agents: 2 log(2/alpha), d log(M rho_min),
        S sqrt(M rho_max) and M kappa (a driver that computes beta for several calibrations at once uses them)."""
        return self._beta_terms

    @cached_property
    def _beta_terms(self) -> tuple:
        """The terms of :meth:`beta` that do not depend on V, for the M agents (computed once per calibration)."""
        return self._terms_of(self.agents)

    def _terms_of(self, group: np.ndarray | float) -> tuple:
        """2 log(2/alpha), d log(M rho_min), S sqrt(M rho_max) and M kappa of :meth:`beta`."""
        m_agents = np.asarray(group, dtype=float)
        return (2.0 * math.log(2.0 / self.alpha), self.dimension * np.log(m_agents * self.rho_min),
                self.S * np.sqrt(m_agents * self.rho_max), m_agents * self.kappa)

    def summary(self) -> dict[str, float]:
        return {"tree_depth": self.m, "noise_std": self.noise_std, "Lambda": self.Lambda, "rho_min": self.rho_min,
                "rho_max": self.rho_max, "kappa": self.kappa}


def symmetric_noise(rng: np.random.Generator, size: int, std: float) -> np.ndarray:
    """N = (Ñ + Ñ^T)/sqrt(2) with Ñ_ij ~ N(0, std^2) (Alg. 2 line 6)."""
    return symmetrise(rng.normal(0.0, std, size=(size, size)))


def _normals(rng: np.random.Generator, count: int) -> np.ndarray:
    return standard_normal(rng, np.empty(count))


def symmetrise(raw: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """(Ñ + Ñ^T)/sqrt(2) of a matrix or of a stack of matrices (last two axes); into ``out`` if given."""
    total = np.add(raw, np.swapaxes(raw, -1, -2), out=out)
    return np.divide(total, math.sqrt(2.0), out=total)


class GaussianTreePrivatizer:
    """Binary-tree continual release of prefix sums of (d+1) x (d+1) statistics (Alg. 2).

    One instance holds ``len(rngs)`` independent trees ("streams": one per agent, or per
    (agent, estimator)); stream j draws its node noise from ``rngs[j]`` only and keeps its own
    release counter, so any subset of streams may release at a time. Release r (r = 1, 2, ...)
    of a stream inserts the statistic accumulated since its release r-1 as leaf r and returns
    the prefix sum over leaves 1..r plus the noise of the popcount(r) tree nodes of the dyadic
    decomposition of [1, r] ("least nodes", [26] Alg. 5); popcount(r) <= 1 + floor(log2 r) <= m
    while r <= 2^(m-1). Each node's noise is drawn once, when the node is completed (one new
    noise matrix per release), and reused by every later release that uses the node.

    Parameters
    ----------
    calibration:
        Supplies sigma_N (``noise_std``), the PSD shift and the depth m.
    rngs:
        One injected generator per stream (e.g. ``sim.streams.for_("privacy", agent)``).
    read_ahead:
        Draw each stream's node noise in blocks of 32 nodes (:class:`netsim.comm.GroupedDraws` of standard
        normals, scaled as ``Generator.normal`` scales them): the very values of one ``normal`` call per node,
        with a call per block instead. The generators are then ahead of the noise used, so only an owner
        that draws nothing else from them may ask for it (centralized FedUCB without crashes: a restarted
        agent's new tree draws from its generator).
    """

    def __init__(self, calibration: FedUCBCalibration, rngs: Sequence[np.random.Generator], *,
                 read_ahead: bool = False):
        if len(rngs) < 1:
            raise ValueError("rngs: accepted: at least one generator")
        self.calibration = calibration
        self.rngs = list(rngs)
        self.size = calibration.dimension + 1
        self.rounds = np.zeros(len(self.rngs), dtype=np.int64)
        shape = (len(self.rngs), self.size, self.size)
        # level k of stream j holds the exact and the noise part of the dyadic block of length
        # 2^k that ends at the stream's last release whose bit k is set (Chan, Shi & Song's alpha).
        self._exact: list[np.ndarray] = []
        self._noise: list[np.ndarray] = []
        self._node: list[np.ndarray] = []  # exact + noise of each level's node, summed once when it is completed
        self._shape = shape
        self.noise_drawn = np.zeros(len(self.rngs), dtype=np.int64)
        self._ahead = GroupedDraws(self.rngs, _normals, block=32 * self.size**2) if read_ahead else None

    @property
    def std(self) -> float:
        return self.calibration.noise_std

    @property
    def entry_variance(self) -> np.ndarray:
        """Variance of each entry of one node's noise: sigma_N^2 off the diagonal, 2 sigma_N^2 on it."""
        var = np.full((self.size, self.size), self.calibration.noise_variance)
        var[np.diag_indices(self.size)] *= 2.0
        return var

    @staticmethod
    def nodes_used(r: int) -> int:
        """Number of tree nodes (noise matrices) in release r: popcount(r)."""
        return int(r).bit_count()

    def _level(self, k: int) -> None:
        while len(self._exact) <= k:
            self._exact.append(np.zeros(self._shape))
            self._noise.append(np.zeros(self._shape))
            self._node.append(np.zeros(self._shape))

    def release(self, statistic: np.ndarray, streams: np.ndarray | None = None) -> np.ndarray:
        """Insert ``statistic`` (len(streams) x (d+1) x (d+1), accumulated since each stream's last
        release) and return the noisy prefix sums (without the PSD shift, see :meth:`split`).
        """
        streams = np.arange(len(self.rngs)) if streams is None else np.asarray(streams, dtype=np.int64)
        statistic = np.asarray(statistic, dtype=float)
        if statistic.shape != (len(streams), self.size, self.size):
            raise ValueError(f"statistic shape {statistic.shape}; accepted: {(len(streams), self.size, self.size)}")
        ordered = bool((streams[1:] > streams[:-1]).all())  # increasing: distinct without sorting
        if not ordered and len(np.unique(streams)) != len(streams):
            raise ValueError("streams: accepted: distinct stream indices")
        self.rounds[streams] += 1
        rounds = self.rounds[streams]
        if len(rounds) and rounds[0] == rounds.min() == rounds.max():  # one release number (Alg. 1: a round)
            return self._release_round(int(rounds[0]), streams, statistic)
        out = np.empty_like(statistic)
        for r in np.unique(rounds):
            pick = np.flatnonzero(rounds == r)
            rows = streams[pick]
            out[pick] = self._release_round(int(r), rows, statistic[pick])
        return out

    def _release_round(self, r: int, rows: np.ndarray, statistic: np.ndarray) -> np.ndarray:
        low = (r & -r).bit_length() - 1  # level of the node that leaf r completes
        self._level(r.bit_length())
        every = len(rows) == len(self.rngs) and bool((rows[1:] > rows[:-1]).all())
        # the new node's exact part: the leaf plus the finished lower blocks (block += exact of each lower level, in
        # turn). Every stream in order (all agents at a round): built in place in the level's array; the lower
        # levels are left as they are (a level is written again before any later release reads it).
        if every:
            block = self._exact[low]
            np.copyto(block, statistic)
            for level in range(low):
                block += self._exact[level]
        else:
            block = statistic.copy()
            for level in range(low):
                block += self._exact[level][rows]
            self._exact[low][rows] = block
        if self.calibration.private:
            # symmetric_noise of every stream: its draws from the stream's own generator, symmetrised at once
            if self._ahead is None:
                std, shape = self.std, (self.size, self.size)
                raw = np.stack([rng.normal(0.0, std, size=shape) for rng in self._generators(rows)])
            else:
                raw = self._read_ahead(rows)
            if every:
                symmetrise(raw, out=self._noise[low])
            else:
                self._noise[low][rows] = symmetrise(raw)
            self.noise_drawn[slice(None) if every else rows] += 1
        if every:  # the new node's exact + noise (the older ones' kept)
            np.add(block, self._noise[low], out=self._node[low])
            nodes = self._node
        else:
            self._node[low][rows] = block + self._noise[low][rows]
            nodes = [node[rows] for node in self._node]
        levels = [level for level in range(r.bit_length()) if r >> level & 1]
        noisy = np.add(0.0, nodes[levels[0]])  # 0 + node + node + ...: the sum from zero, level by level
        for level in levels[1:]:
            noisy += nodes[level]
        return noisy

    def _read_ahead(self, rows: np.ndarray) -> np.ndarray:
        """One node's noise for each of ``rows`` from the blocks read ahead: ``normal(0, std)`` is 0 + std z
        for the generator's next standard normals z (NumPy's ``loc + scale * gauss``)."""
        z = self._ahead.take_rows(rows, self.size * self.size).reshape(len(rows), self.size, self.size)
        np.multiply(self.std, z, out=z)  # z is a fresh array: scaled in place, the same floats
        return np.add(0.0, z, out=z)

    def _generators(self, rows: np.ndarray | slice) -> list[np.random.Generator]:
        return self.rngs if isinstance(rows, slice) else [self.rngs[j] for j in rows]

    def restart(self, streams: np.ndarray) -> None:
        """Start ``streams`` afresh (their owner lost its state): empty trees, next release is release 1."""
        streams = np.asarray(streams, dtype=np.int64)
        self.rounds[streams] = 0
        for exact, noise, node in zip(self._exact, self._noise, self._node, strict=True):
            exact[streams] = 0.0
            noise[streams] = 0.0
            node[streams] = 0.0

    def noise_in_release(self, streams: np.ndarray | None = None) -> np.ndarray:
        """Total noise in the latest release of ``streams`` (for tests and audits)."""
        streams = np.arange(len(self.rngs)) if streams is None else np.asarray(streams, dtype=np.int64)
        total = np.zeros((len(streams), self.size, self.size))
        for j, row in enumerate(streams):
            r = int(self.rounds[row])
            for level in range(r.bit_length()):
                if r >> level & 1:
                    total[j] += self._noise[level][row]
        return total

    def split(self, released: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(U_hat, u_hat): top-left d x d block + shift I, and the first d entries of the last column.

        Alg. 2 lines 12-13.
        """
        d = self.calibration.dimension
        gram = released[:, :d, :d] + self._shift_eye
        return gram, released[:, :d, d].copy()

    @cached_property
    def _shift_eye(self) -> np.ndarray:
        """The PSD shift times I (d x d), computed once."""
        return self.calibration.shift * np.eye(self.calibration.dimension)
