"""The base class every algorithm derives from, and what the engine asks of it.

A protocol is instantiated once per trial with the :class:`~netsim.engine.sim.Simulation` and its
validated ``[protocol]`` parameters (frozen). In :meth:`Protocol.start` it subscribes to
message kinds and schedules its clocks through the engine API; it pulls arms through
``sim.bandit``; it may increment ``sim.metrics.rounds`` and end the trial early with
``sim.stop()``. After the run, :meth:`Protocol.results` returns extra columns for
``trials.csv``.

Subclasses declare:

* ``name`` and ``description`` (shown by ``netsim list``);
* ``fields``: the accepted ``[protocol]`` keys (:mod:`netsim.engine.params`);
* ``requires_connected``: every component of the agent graph must be connected;
* ``servers``: number of server nodes the protocol needs (``None``: any);
* ``bandit_kinds``: accepted ``[bandit] kind`` values (``None``: any);
* optionally ``check(scenario)`` for further cross-section checks, and ``work(scenario, ...)``, the
  estimated events and memory of a trial when they are not one action per agent and link per slot;
* ``crash_states``: the ``[faults] state`` values (``"kept"``, ``"lost"``) whose crashes it handles
  (empty: scenarios with node crashes are refused when loaded);
* ``unsupported_faults``: names among ``link_down``, ``crash``, ``duplication``, ``reorder`` it
  refuses (see ``docs/faults.md``);
* ``corruptible``: the message kinds whose payloads carry reward statistics (sums, means, counts,
  theta, votes, Gram matrices), which an ``[adversary]`` corrupts; the protocol gives each its
  rule in :meth:`Protocol.start` (``network.corruptible``, usually through
  :func:`netsim.comm.corruption.rewriting`). Empty: the protocol exchanges no reward statistics, and a
  scenario whose ``[adversary]`` would act is refused when loaded;
* ``sends``: whether its agents send messages at all (``False``: an isolated or centralised
  baseline); a scenario setting a key that only acts on messages (delays, loss, per-link
  overrides, links going down, duplication, reordering) for one that sends none is refused;
* ``relays``: whether agents forward records other agents created (the LOCAL flooding); only then
  does ``adversary.relay`` (byzantine agents also corrupt what they relay) change a run, and a
  scenario setting it for a protocol that relays nothing is refused when loaded;
* ``agent_links``: whether agents send to each other over agent-agent links (``False``: every
  message goes through a server, a star); for such a protocol ``network.links`` overrides between
  two agents, and ``network.delay`` once ``network.server_delay`` is set, act on no message and
  are refused when loaded;
* optionally ``check_network(scenario, network)``: checks that need the built network (trial 0's
  graph), e.g. a message life that resolves to no relaying on it;
* optionally ``lockstep_key(scenario)`` and ``lockstep(protocols)``: several trials stepped together
  along an array axis (each numpy call serves them all), with results equal to running each alone
  (``lockstep_scope``: whether trials of different seeds may be grouped);
* ``columns``: the extra ``trials.csv`` columns :meth:`Protocol.results` may return, each with its
  label and unit (``{"sample_complexity": P.column("sample complexity", "rounds", doc=...)}``; a
  tuple of names is accepted, shown by name); a study's figures may plot them, ``netsim explain``
  describes them, and a test checks the declaration against real runs.

A protocol whose algorithm *finishes* (identifies an arm, ends its last epoch) overrides
:meth:`Protocol.unfinished`: a trial that reaches the horizon first gets ``status =
"unfinished"`` and the reason in ``failure``, so that summaries count it instead of averaging
over it.

:class:`Ticking` is a base for protocols whose agents act on a clock: it wires one vectorised
clock (or one jittered clock per agent) that skips crashed agents.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from netsim.engine import params as P

if TYPE_CHECKING:
    from netsim.engine.network import Network
    from netsim.engine.scenario import Scenario
    from netsim.engine.sim import Simulation


class Protocol:
    """Base class of all protocols (see module docstring)."""

    name: ClassVar[str]
    description: ClassVar[str] = ""
    fields: ClassVar[Mapping[str, P.Field]] = {}
    requires_connected: ClassVar[bool] = False
    servers: ClassVar[int | None] = 0
    bandit_kinds: ClassVar[tuple[str, ...] | None] = ("bernoulli", "gaussian", "heterogeneous", "csv")
    crash_states: ClassVar[tuple[str, ...]] = ()
    unsupported_faults: ClassVar[tuple[str, ...]] = ()
    corruptible: ClassVar[tuple[str, ...]] = ()
    sends: ClassVar[bool] = True
    relays: ClassVar[bool] = False
    agent_links: ClassVar[bool] = True
    columns: ClassVar[Mapping[str, P.Field] | tuple[str, ...]] = ()

    def __init__(self, sim: Simulation, params: Mapping[str, Any]):
        self.sim = sim
        self.params = MappingProxyType(dict(params))

    @classmethod
    def check(cls, scenario: Scenario) -> None:
        """Raise :class:`~netsim.engine.errors.InputError` when ``scenario`` cannot run this protocol."""

    @classmethod
    def check_network(cls, scenario: Scenario, network: Network) -> None:
        """Like :meth:`check`, with trial 0's built network (its ``agent_graph``); called when the scenario loads."""

    @classmethod
    def work(cls, scenario: Scenario, *, slots: float, links: float) -> tuple[float, float]:
        """Estimated events and bytes of one trial of ``scenario`` (:mod:`netsim.engine.budget` adds the engine's own).

        The default: every agent acts and every one of the ``links`` may carry a message at each of the
        ``slots`` clock ticks before the horizon, and nothing beyond the engine's arrays is kept. A
        protocol with other drivers (a gossip rate, ``d x d`` statistics per agent, a run that ends by
        itself before the horizon) overrides it.
        """
        return slots * (scenario.network["agents"] + links), 0.0

    @classmethod
    def span(cls, scenario: Scenario) -> float:
        """Simulated time a trial of ``scenario`` lasts, for :mod:`netsim.engine.budget`'s fault processes: the horizon,
        unless the algorithm ends by itself long before it (an identification run) and says so here."""
        return scenario.run["horizon"]

    def start(self) -> None:
        """Subscribe to messages and schedule clocks; called once at time 0."""
        raise NotImplementedError

    @classmethod
    def lockstep_key(cls, scenario: Scenario) -> Any:
        """None (the default): each trial of ``scenario`` runs alone. Otherwise a hashable value: trials
        of scenarios with equal keys may be run together by :meth:`lockstep` (the runner groups them)."""
        return None

    #: which trials with equal :meth:`lockstep_key` the runner puts in one group: ``"trials"`` (any of them,
    #: whatever their seeds: a protocol that steps trials along an array axis) or ``"seed"`` (only the units of
    #: one seed sequence, the variants of one trial of a study: a protocol whose lockstep saves only the draws
    #: those units share; trials of other seeds would step in turn with it and only evict each other's arrays
    #: from the cache)
    lockstep_scope: ClassVar[str] = "trials"

    @classmethod
    def lockstep(cls, protocols: list[Protocol]) -> Callable[[float], None]:
        """Start the trials of ``protocols`` (instead of their :meth:`start`) and return ``advance(when)``,
        which does every trial's work at times before ``when`` and leaves each trial's bandit and
        metrics books as running it alone would (:func:`netsim.engine.sim.run_lockstep`). A lockstep run
        must give each trial exactly the results it gets alone; only protocols with a
        :meth:`lockstep_key` are asked."""
        raise NotImplementedError

    def results(self) -> dict[str, float]:
        """Extra per-trial columns (e.g. ``epsilon_spent``, declared in ``columns``); called after the run."""
        return {}

    def unfinished(self) -> str | None:
        """Why the algorithm had not finished when the trial ended (``None``: it had, or it never ends)."""
        return None


class Ticking(Protocol):
    """A protocol whose agents act at every tick of a clock of period ``[clock] period``.

    Subclasses implement :meth:`step`, called with the ids of the agents acting at that tick:

    * without clock jitter, one vectorised clock calls ``step(agents)`` with every agent that is
      up (crashed agents skip the tick);
    * with ``[clock] jitter > 0``, each agent has its own jittered clock and ``step`` receives
      that one agent (a crashed agent's clock is paused by the engine).

    :meth:`restarted` is called when a crashed node comes back (``state`` is ``"kept"`` or
    ``"lost"``). The default declares both crash states handled; a subclass that keeps state
    across agents overrides :meth:`restarted` to reset a ``"lost"`` agent.
    """

    servers: ClassVar[int | None] = None  # server nodes, if the scenario has any, are simply unused
    crash_states: ClassVar[tuple[str, ...]] = ("kept", "lost")

    def start(self) -> None:
        sim = self.sim
        if sim.faults.has_crashes:
            sim.faults.on_restart(self.restarted)
        if sim.clock_jitter > 0:
            for agent in range(sim.num_agents):
                sim.every(sim.clock_period, lambda now, a=np.array([agent]): self.step(a), node=agent)
        else:
            everyone = np.arange(sim.num_agents)
            if sim.faults.has_crashes:  # crashed agents skip the tick (per-agent clocks pause by themselves)
                up = sim.faults.up[: sim.num_agents]
                sim.every(sim.clock_period, lambda now: self.step(everyone[up]))
            else:
                sim.every(sim.clock_period, lambda now: self.step(everyone))

    def step(self, agents: np.ndarray) -> None:
        """Act for ``agents`` (an array of agent ids) at the current tick."""
        raise NotImplementedError

    def restarted(self, node: int, state: str) -> None:
        """A crashed node is back; ``state == "lost"``: it forgot what it learnt."""
