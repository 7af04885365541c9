"""Shared fixtures: small networks and scenarios built in code."""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # as the CLI does
    os.environ.setdefault(_var, "1")

import networkx as nx  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import simpy  # noqa: E402

from netsim.comm.protocol import Protocol  # noqa: E402
from netsim.engine.distributions import Distribution  # noqa: E402
from netsim.engine.metrics import Metrics  # noqa: E402
from netsim.engine.network import Network  # noqa: E402
from netsim.engine.registry import protocols  # noqa: E402


class Carrier(Protocol):
    """Test protocol that sends (``sends = True``) and does nothing itself: engine tests that build
    flooding, clocks or delays by hand run on it, since a baseline that sends nothing refuses
    network keys (delays, loss, faults on messages). ``"flood"`` records (the flooding tests' kind) carry
    statistics an ``[adversary]`` may corrupt; the tests give the rule."""

    name = "test-carrier"
    corruptible = ("flood",)
    relays = True  # the flooding tests forward records with gamma >= 2

    def start(self) -> None:
        pass


protocols._items.setdefault(Carrier.name, Carrier)

os.environ.setdefault("NETSIM_NO_PROGRESS", "1")


def make_network(
    graph: nx.Graph,
    *,
    num_agents: int | None = None,
    delay: Distribution | None = None,
    loss: float = 0.0,
    seed: int = 0,
    cost_agent_agent: float = 1.0,
    cost_server_agent: float = 25.0,
    slot: float = 1.0,
    overrides=None,
) -> Network:
    """A bare :class:`Network` on ``graph`` with its own environment and counters."""
    env = simpy.Environment()
    agents = graph.number_of_nodes() if num_agents is None else num_agents
    metrics = Metrics(graph.number_of_nodes(), agents, cost_agent_agent, cost_server_agent, slot=slot)
    delay = delay or Distribution("constant", {"value": 1.0})
    return Network(env, graph, num_agents=agents, components=[list(range(agents))], delay=delay,
                   server_delay=delay, loss=loss, link_overrides=overrides or {},
                   rng=np.random.default_rng(seed), metrics=metrics)


@pytest.fixture
def network_factory():
    return make_network


def scenario_dict(**sections) -> dict:
    """A minimal valid scenario document, sections overridden by keyword."""
    doc = {
        "name": "t",
        "bandit": {"kind": "bernoulli", "arms": 3, "means": [0.9, 0.5, 0.1]},
        "network": {"topology": "ring", "agents": 4},
        "protocol": {"name": "ucb1"},
        "run": {"horizon": 50, "trials": 1, "seed": 3, "checkpoints": 5},
    }
    for key, value in sections.items():
        doc[key] = value
    return doc


@pytest.fixture
def isolated_plugins(monkeypatch):
    """Plug-in files loaded by the test are forgotten after it (the registries are process-wide)."""
    from netsim.engine import registry

    registry.load_plugins()
    for table in registry._REGISTRIES:
        monkeypatch.setattr(table, "_items", dict(table._items))
    monkeypatch.setattr(registry, "_files", dict(registry._files))
    return registry
