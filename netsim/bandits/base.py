"""The bandit environment a protocol pulls from; it keeps the pseudo-regret books.

Randomness: agent i has its own stream ``("rewards", i)``. Every single pull consumes
exactly one uniform u from it, and the reward is obtained by inverting the reward law's CDF
at u. A pull of n (the sum of n i.i.d. rewards, used where an algorithm only needs the sum)
also consumes one uniform and inverts the exact law of the sum (Binomial for Bernoulli,
Normal(n mu, n sigma^2) for Gaussian). Hence agent i's j-th pull sees the same u_{i,j} in
every protocol run with the same seed: common random numbers across protocols.

Regret: each pull of arm k by agent i adds n * (mu* - mu_k) to agent i's pseudo-regret,
where mu are the *global* means (the average of the agents' local means in heterogeneous
environments, zhu2021 Sec. 2.1 and li2022 Sec. VI-C). Protocols cannot misreport regret.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from netsim.engine import params as P
from netsim.engine.registry import PLUGIN_HINT, Registry
from netsim.engine.streams import Streams

#: the bandit kinds, by name (``[bandit] kind``): the bundled ones register when
#: :mod:`netsim.bandits` is imported, a plug-in's with ``@bandits.register(name)``
bandits = Registry("bandit kind", hint=PLUGIN_HINT)

_HALF_ULP = 2.0**-54


class BanditEnvironment:
    """Base class: arms, true means, the uniform streams and the regret books.

    Subclasses set ``local_means`` (agents x arms) in ``__init__`` and implement
    :meth:`_rewards`. ``fields`` declares the keys of the ``[bandit]`` section.
    """

    kind: ClassVar[str]
    description: ClassVar[str] = ""
    fields: ClassVar[Mapping[str, P.Field]] = {}
    uniforms_per_pull: ClassVar[int] = 1

    @classmethod
    def check(cls, options: Mapping[str, Any], source: str | None = None) -> None:
        """Refuse, with an :class:`~netsim.engine.errors.InputError`, options this kind cannot run (called when the
        scenario is loaded, after each key was validated on its own). The default accepts them."""

    @classmethod
    def check_agents(cls, options: Mapping[str, Any], num_agents: int, source: str | None = None) -> None:
        """Refuse options that cannot serve ``num_agents`` agents (a data file holding another number), when
        the scenario is loaded, before any trial. The default accepts them."""

    def __init__(self, options: Mapping[str, Any], num_agents: int, streams: Streams):
        self.options = dict(options)
        self.num_agents = num_agents
        self.streams = streams
        self._generators = streams.many("rewards", num_agents)
        self._block = 256
        self._buffer = np.empty((num_agents, self._block))
        self._cursor = np.full(num_agents, self._block, dtype=np.int64)
        self.regret = np.zeros(num_agents)
        self.pulls = np.zeros(num_agents, dtype=np.int64)
        self.local_means = np.zeros((num_agents, 0))
        self._gaps_of: np.ndarray | None = None
        self._gaps = np.zeros(0)
        self._each: np.ndarray | None = None  # pull_each's agent ids
        self._each_left = 0  # pull_each calls that need no refill (0: look; every other pull resets it)

    # ------------------------------------------------------------------ true means
    @property
    def num_arms(self) -> int:
        return self.local_means.shape[1]

    @property
    def means(self) -> np.ndarray:
        """Global means mu_k = (1/M) sum_i mu_{i,k}."""
        return self.local_means.mean(axis=0)

    @property
    def best_arm(self) -> int:
        return int(np.argmax(self.means))

    @property
    def gaps(self) -> np.ndarray:
        """Suboptimality gaps Delta_k = mu* - mu_k of the global means."""
        means = self.means
        return means.max() - means

    # ------------------------------------------------------------------ pulls
    def pull(self, agent: int, arm: int, n: int = 1) -> float:
        """Sum of ``n`` i.i.d. rewards of ``arm`` for ``agent``; records pseudo-regret."""
        return float(self.pull_many(np.array([agent]), np.array([arm]), n)[0])

    def pull_many(self, agents: np.ndarray, arms: np.ndarray, n: int | np.ndarray = 1) -> np.ndarray:
        """Vectorised :meth:`pull`: element j is the sum of ``n[j]`` rewards of ``arms[j]`` for ``agents[j]``.

        An agent may appear several times; its pulls consume its uniforms in array order.
        """
        self._each_left = 0
        agents = np.asarray(agents, dtype=np.int64)
        arms = np.asarray(arms, dtype=np.int64)
        n = np.broadcast_to(np.asarray(n, dtype=np.int64), agents.shape)
        if np.any(n < 0):
            raise ValueError("number of pulls must be >= 0")
        if len(agents) == 1:  # one pull (pull(), sequential learners): no counting, sorting or scattering
            agent = int(agents[0])
            if self._cursor[agent] >= self._block:
                self._refill(agent)
            u = self._buffer[agent, self._cursor[agent]: self._cursor[agent] + 1]
            self._cursor[agent] += 1
            rewards = self._rewards(agents, arms, n, u)
            self.regret[agent] += n[0] * self._pull_gaps(agents, arms)[0]  # the float addition np.add.at makes
            self.pulls[agent] += n[0]
            return rewards
        u = self._uniforms(agents)
        rewards = self._rewards(agents, arms, n, u)
        self._record(agents, arms, n)
        return rewards

    def pull_each(self, arms: np.ndarray, *, book: bool = True) -> np.ndarray:
        """One pull by every agent, agent i pulling ``arms[i]``: the rewards and books of
        ``pull_many(np.arange(num_agents), arms)`` (the same uniforms, rewards and float additions),
        without the general path's counting and sorting (each agent reads the next uniform of its stream).
        For learners that step all agents in lockstep (one pull each per tick).

        ``book=False`` reads the uniforms and returns the rewards but leaves the regret and pull counts
        to :meth:`book_each` (a driver that computes a tick ahead books it at the tick's own instant).
        """
        cursor = self._cursor
        if self._each_left <= 0:  # some agent may be at the end of its buffer: look
            for agent in np.flatnonzero(cursor >= self._block):
                self._refill(int(agent))
            self._each_left = self._block - int(cursor.max())
            if self._each is None:
                self._each = np.arange(self.num_agents)
        self._each_left -= 1
        agents = self._each
        u = self._buffer[agents, cursor]
        cursor += 1
        rewards = self._single_rewards(agents, arms, u)
        if book:
            self.book_each(arms)
        return rewards

    def book_each(self, arms: np.ndarray) -> None:
        """The books of one :meth:`pull_each` of ``arms`` (regret and pull counts; the means of that pull)."""
        if self._each is None:
            self._each = np.arange(self.num_agents)
        self.regret += self._pull_gaps(self._each, arms)  # distinct agents: the additions np.add.at makes
        self.pulls += 1

    def each_rewards(self, steps: int) -> np.ndarray:
        """For a driver that steps several trials in lockstep: the rewards of the next ``steps`` rounds of
        :meth:`pull_each` for every choice of arms, a steps x agents x arms array whose ``[s, i, k]`` is what
        agent i gets from arm k at its s-th next pull (its uniforms are read now, as those pulls would read
        them). The pulls are booked by :meth:`settle_each` with the arms the agents chose.
        """
        self._each_left = 0
        u = np.stack([self._stream(agent, steps) for agent in range(self.num_agents)], axis=1)   # steps x agents
        return self._every_arm(u)

    def _every_arm(self, u: np.ndarray) -> np.ndarray:
        """:meth:`_single_rewards` of every arm for each agent at its quantiles ``u`` (steps x agents): a
        steps x agents x arms array (kinds may give the same floats with fewer operations)."""
        steps, n = u.shape
        m = self.num_arms
        agents = np.broadcast_to(np.arange(n)[None, :, None], (steps, n, m)).ravel()
        arms = np.broadcast_to(np.arange(m), (steps, n, m)).ravel()
        return self._single_rewards(agents, arms, np.repeat(u.ravel(), m)).reshape(steps, n, m)

    def settle_each(self, arms: np.ndarray) -> None:
        """Book ``len(arms)`` rounds of :meth:`pull_each` whose rewards :meth:`each_rewards` gave: row s of
        ``arms`` (steps x agents) holds the arm of every agent at round s. Regret is added one round at a
        time, in round order (the float additions of :meth:`pull_each`)."""
        arms = np.asarray(arms, dtype=np.int64)
        steps, n = arms.shape
        if steps:
            gaps = self._pull_gaps(np.tile(np.arange(n), steps), arms.ravel()).reshape(steps, n)
            self.regret[:] = np.cumsum(np.concatenate((self.regret[None, :], gaps)), axis=0)[-1]
            self.pulls += steps

    def pull_walk(self, agent: int, arms: np.ndarray, steps: int) -> np.ndarray:
        """``steps`` successive single pulls of every arm of ``arms`` by ``agent`` (step by step, each
        step pulling the arms in order), returned as their running sums: a len(arms) x steps array whose
        ``[j, s]`` is the sum of the first s + 1 rewards of ``arms[j]``. The rewards and books are those of
        ``pull_many(np.full(steps * len(arms), agent), np.tile(arms, steps), 1)``: one agent's pulls read a
        contiguous run of its stream, so nothing is sorted or gathered per element.
        """
        return self.pull_walks(np.array([agent], dtype=np.int64), arms, steps)[0]

    def pull_walks(self, agents: np.ndarray, arms: np.ndarray, steps: int) -> np.ndarray:
        """:meth:`pull_walk` for each of ``agents`` (distinct) in turn, all with the same ``arms`` and
        ``steps``: a len(agents) x len(arms) x steps array whose ``[i]`` is ``pull_walk(agents[i], arms,
        steps)``, with the same rewards and books, in one call (e.g. the first blocks of every agent).
        """
        self._each_left = 0
        agents = np.asarray(agents, dtype=np.int64)
        arms = np.asarray(arms, dtype=np.int64)
        n, k = len(agents), len(arms)
        if n > 1 and len(np.unique(agents)) < n:
            raise ValueError(f"pull_walks: agents {agents.tolist()[:10]} repeat one; accepted: distinct agents")
        u = np.empty((n, steps * k))
        for row, agent in zip(u, agents.tolist()):
            self._stream(agent, steps * k, out=row)
        walks = self._walk(agents, arms, u.reshape(n, steps, k).transpose(0, 2, 1))
        # added one pull at a time, in pull order, as np.add.at does in pull_many (same rounding)
        books = np.empty((n, steps * k + 1))
        books[:, 0] = self.regret[agents]
        books[:, 1:].reshape(n, steps, k)[...] = self._walk_gaps(agents, arms)[:, None, :]  # a view: rows split
        self.regret[agents] = np.add.accumulate(books, axis=1, out=books)[:, -1]
        self.pulls[agents] += steps * k
        return walks

    def _walk(self, agents: np.ndarray, arms: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Running sums of each agent's single rewards at quantiles ``u`` (agents x arms x steps, ``[i, j]``
        for ``agents[i]`` and ``arms[j]``), as a C-ordered array."""
        n, k, steps = u.shape
        rewards = self._rewards(np.repeat(agents, k * steps), np.tile(np.repeat(arms, steps), n),
                                np.ones(u.size, dtype=np.int64), u.ravel()).reshape(u.shape)
        return np.cumsum(rewards, axis=2)

    def _record(self, agents: np.ndarray, arms: np.ndarray, n: np.ndarray) -> None:
        np.add.at(self.regret, agents, n * self._pull_gaps(agents, arms))
        np.add.at(self.pulls, agents, n)

    def _pull_gaps(self, agents: np.ndarray, arms: np.ndarray) -> np.ndarray:
        """Expected regret of one pull of ``arms[j]`` by ``agents[j]``: the gaps of the global means,
        computed once per ``local_means`` array (no kind changes it in place)."""
        if self._gaps_of is not self.local_means:
            self._gaps_of, self._gaps = self.local_means, self.gaps
        return self._gaps[arms]

    def _walk_gaps(self, agents: np.ndarray, arms: np.ndarray) -> np.ndarray:
        """:meth:`_pull_gaps` of each agent's pulls of ``arms`` (:meth:`pull_walks`), agents x arms. Unless
        a kind overrides :meth:`_pull_gaps` (gaps that depend on the agent's state), these are the gaps of the
        global means, computed once per ``local_means`` array (no kind changes it in place)."""
        return self._pull_gaps(np.repeat(agents, len(arms)), np.tile(arms, len(agents))).reshape(len(agents), -1)

    def _rewards(self, agents: np.ndarray, arms: np.ndarray, n: np.ndarray, u: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _single_rewards(self, agents: np.ndarray, arms: np.ndarray, u: np.ndarray) -> np.ndarray:
        """:meth:`_rewards` with every n = 1 (kinds may give the same floats with fewer operations)."""
        return self._rewards(agents, arms, np.ones(len(agents), dtype=np.int64), u)

    # ------------------------------------------------------------------ uniform streams
    def _uniforms(self, agents: np.ndarray) -> np.ndarray:
        """The next uniform in (0, 1) of each listed agent's stream, in array order."""
        counts = np.bincount(agents, minlength=self.num_agents)
        if counts.max(initial=0) > self._block:
            self._grow(int(counts.max()))
        for agent in np.flatnonzero(self._cursor + counts > self._block):
            self._refill(int(agent))
        if len(agents) == 0 or counts.max() == 1:
            offsets = self._cursor[agents]
        else:
            order = np.argsort(agents, kind="stable")
            sorted_agents = agents[order]
            starts = np.searchsorted(sorted_agents, sorted_agents, side="left")
            rank = np.empty_like(agents)
            rank[order] = np.arange(len(agents)) - starts
            offsets = self._cursor[agents] + rank
        u = self._buffer[agents, offsets]
        self._cursor += counts
        return u

    def _stream(self, agent: int, count: int, out: np.ndarray | None = None) -> np.ndarray:
        """The next ``count`` uniforms of ``agent``'s stream (written to ``out`` if given): what is left in
        its buffer, then fresh ones straight from its generator (the buffer is left empty; generators give
        the same numbers whatever the chunks they are asked for)."""
        start = int(self._cursor[agent])
        buffered = min(self._block - start, count)
        u = np.empty(count) if out is None else out
        u[:buffered] = self._buffer[agent, start:start + buffered]
        self._cursor[agent] = start + buffered
        if count > buffered:
            fresh = self._generators[agent].random(out=u[buffered:])
            fresh += _HALF_ULP
        return u

    def _refill(self, agent: int) -> None:
        tail = self._buffer[agent, self._cursor[agent]:].copy()
        fresh = self._generators[agent].random(self._block - len(tail)) + _HALF_ULP
        self._buffer[agent, : len(tail)] = tail
        self._buffer[agent, len(tail):] = fresh
        self._cursor[agent] = 0

    def _grow(self, need: int) -> None:
        block = 1 << (need - 1).bit_length()
        buffer = np.empty((self.num_agents, block))
        for agent in range(self.num_agents):
            left = self._block - self._cursor[agent]
            buffer[agent, :left] = self._buffer[agent, self._cursor[agent]:]
            self._cursor[agent] = block - left
            buffer[agent, self._cursor[agent]:] = buffer[agent, :left].copy()
        self._buffer, self._block = buffer, block

    def summary(self) -> dict[str, Any]:
        """Facts about the instance written to ``meta.json``."""
        return {"arms": self.num_arms, "best_arm": self.best_arm, "means": self.means.round(6).tolist()}
