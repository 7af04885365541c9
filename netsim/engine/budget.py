"""The work of a trial, estimated from its scenario before anything runs, and its limits.

A scenario can pass every per-key check and still ask for more than a machine can give: a horizon
of 10^12 slots, a clock period of 10^-300, fault or gossip rates of 10^300, a FedUCB dimension of
30,000 (a d x d matrix per agent). :func:`estimate` adds up, for one trial:

* **events**: what the protocol does per unit of simulated time (:meth:`netsim.comm.protocol.Protocol.work`;
  by default every agent acts, and every link may carry a message, at every slot: ``slots x (agents
  + links)``, ``slots = horizon / clock.period``; for a protocol whose agents talk only to servers,
  ``Protocol.agent_links = False``, the server links alone), plus the fault processes (crashes and restarts of
  every node, outages of every link, at their rates over the horizon, or over ``Protocol.span`` for
  a run that ends by itself, such as rio2023's identification runs);
* **memory**: the bandit's per-agent arrays (``agents x arms``), the graph (about
  :data:`BYTES_PER_LINK` per link) and what the protocol keeps (its ``work``: FedUCB's ``d x d``
  statistics per learner).

:func:`check` refuses a scenario whose estimate is above ``run.max_events`` or ``run.max_memory``
(defaults :data:`MAX_EVENTS`, :data:`MAX_MEMORY`; a scenario or ``--set`` raises them, ``inf``
lifts them), with the estimate in the message; ``netsim show`` prints it. The estimate is an order
of magnitude, not a prediction of run time: it exists so that a typo or a fuzzed value is refused
in one line instead of running for days or exhausting memory. The defaults let every bundled study
run at its paper scale (``tests/test_budget.py`` checks each).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from netsim.engine import faults as F
from netsim.engine.errors import InputError

#: default ``run.max_events``: estimated events of one trial
MAX_EVENTS = 1e10
#: default ``run.max_memory``: estimated bytes one trial holds (below the 4 GB a 2-job run on a small machine has)
MAX_MEMORY = 2e9
#: most trials of one run, one sweep point or one study variant and point (run.trials, --trials)
MAX_TRIALS = 100_000
#: networkx and the engine keep about this many bytes per link of the graph
BYTES_PER_LINK = 600
#: a random topology with named links builds every trial's graph when loaded: at most this many nodes and links
MAX_GRAPH_CHECKS = 5_000_000


@dataclass(frozen=True)
class Estimate:
    """The estimated work of one trial (see the module docstring)."""

    events: float
    memory: float
    slots: float
    links: float

    def describe(self) -> str:
        """``"about 2.0e+06 events and 12 MB per trial (2,000 slots, 45 links)"``."""
        return (f"about {self.events:.2g} events and {_bytes(self.memory)} per trial ({self.slots:,.0f} slot(s) "
                f"of the clock, {self.links:,.0f} link(s))")


def _bytes(value: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if value >= size:
            return f"{value / size:.3g} {unit}"
    return f"{value:.0f} bytes"


def links(scenario: Any) -> float:
    """Expected links of the scenario's graph: agent-agent links of every component, then server links."""
    from netsim.engine.topology import expected_links

    network = scenario.network
    agent_links = sum(expected_links(network["topology"], n, network) for n in component_sizes(network))
    return agent_links + network["servers"] * network["agents"]


def estimate(scenario: Any, protocol_cls: Any) -> Estimate:
    """The work of one trial of ``scenario`` run by ``protocol_cls`` (see the module docstring)."""
    network, run = scenario.network, scenario.run
    horizon = run["horizon"]
    slots = horizon / scenario.clock["period"]
    edges = links(scenario)
    nodes = network["agents"] + network["servers"]
    # a protocol whose agents talk only to servers (agent_links = False) sends on server links alone
    carrying = edges if protocol_cls.agent_links else network["servers"] * network["agents"]
    events, memory = protocol_cls.work(scenario, slots=slots, links=carrying)
    faults = scenario.faults
    if F.kinds(faults):
        span = min(horizon, protocol_cls.span(scenario))  # a run that ends by itself stops its faults too
        events += (faults["crash_rate"] + faults["restart_rate"]) * span * nodes
        events += 2 * faults["link_down_rate"] * span * edges
        events += 2 * (len(faults["links"]) + len(faults["crashes"]))
    arms, dimension = scenario.bandit.get("arms", 0), scenario.bandit.get("dimension", 1)
    memory += 8 * 8 * network["agents"] * (arms if isinstance(arms, int) else 0) * dimension
    memory += BYTES_PER_LINK * edges + 8 * 4 * run["checkpoints"]
    return Estimate(float(events), float(memory), float(slots), float(edges))


def check(scenario: Any, protocol_cls: Any, source: str | None = None) -> Estimate:
    """Refuse ``scenario`` when its estimate is above its limits; return the estimate."""
    work = estimate(scenario, protocol_cls)
    limits = (("events", work.events, scenario.run["max_events"], "run.max_events", "a shorter run.horizon, a "
               "longer clock.period, lower rates or fewer agents"),
              ("memory", work.memory, scenario.run["max_memory"], "run.max_memory", "fewer agents, arms, links or "
               "a smaller dimension"))
    for what, value, limit, key, fix in limits:
        if not value <= limit:  # a nan estimate is refused too
            shown = f"{limit:.3g}" if what == "events" else _bytes(limit)
            raise InputError(f"this scenario needs {work.describe()}, over the limit {key} = {shown}; accepted: "
                             f"{fix}, or raise {key} (inf: no limit) if this machine can take it", source=source,
                             key=key)
    return work


def check_graphs(scenario: Any, source: str | None = None) -> None:
    """Refuse a random topology whose every trial's graph would take too long to check when the scenario loads."""
    work = scenario.run["trials"] * (links(scenario) + scenario.network["agents"])
    if work > MAX_GRAPH_CHECKS:
        raise InputError(f"a random topology with named links builds the graph of each of the "
                         f"{scenario.run['trials']:,} trials when the scenario loads: about {work:,.0f} nodes and "
                         f"links; accepted: at most {MAX_GRAPH_CHECKS:,} (fewer trials or agents, or a fixed "
                         "topology)", source=source, key="run.trials")


def component_sizes(network: Mapping[str, Any]) -> tuple[int, ...]:
    """Agents per component: ``components`` near-equal parts of ``agents`` (the first ones one larger),
    or the listed sizes."""
    components, agents = network["components"], network["agents"]
    if isinstance(components, int):
        base, extra = divmod(agents, components)
        return tuple(base + (1 if i < extra else 0) for i in range(components))
    return tuple(components)
