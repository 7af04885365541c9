"""The base class every algorithm derives from, and what the engine asks of it.

A protocol is instantiated once per trial with the :class:`~netsim.sim.Simulation` and its
validated ``[protocol]`` parameters (frozen). In :meth:`Protocol.start` it subscribes to
message kinds and schedules its clocks through the engine API; it pulls arms through
``sim.bandit``; it may increment ``sim.metrics.rounds`` and end the trial early with
``sim.stop()``. After the run, :meth:`Protocol.results` returns extra columns for
``trials.csv``.

Subclasses declare:

* ``name`` and ``description`` (shown by ``netsim list``);
* ``fields``: the accepted ``[protocol]`` keys (:mod:`netsim.params`);
* ``requires_connected``: every component of the agent graph must be connected;
* ``servers``: number of server nodes the protocol needs (``None``: any);
* ``bandit_kinds``: accepted ``[bandit] kind`` values (``None``: any);
* optionally ``check(scenario)`` for further cross-section checks.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar

from netsim import params as P

if TYPE_CHECKING:
    from netsim.scenario import Scenario
    from netsim.sim import Simulation


class Protocol:
    """Base class of all protocols (see module docstring)."""

    name: ClassVar[str]
    description: ClassVar[str] = ""
    fields: ClassVar[Mapping[str, P.Field]] = {}
    requires_connected: ClassVar[bool] = False
    servers: ClassVar[int | None] = 0
    bandit_kinds: ClassVar[tuple[str, ...] | None] = ("bernoulli", "gaussian", "heterogeneous", "csv")

    def __init__(self, sim: Simulation, params: Mapping[str, Any]):
        self.sim = sim
        self.params = MappingProxyType(dict(params))

    @classmethod
    def check(cls, scenario: Scenario) -> None:
        """Raise :class:`~netsim.errors.InputError` when ``scenario`` cannot run this protocol."""

    def start(self) -> None:
        """Subscribe to messages and schedule clocks; called once at time 0."""
        raise NotImplementedError

    def results(self) -> dict[str, float]:
        """Extra per-trial columns (e.g. ``epsilon_spent``); called after the run."""
        return {}
