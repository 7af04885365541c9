"""No inert knob (issue 24, item 5): every fault, adversary, delay and clock key, set on every protocol,
either changes the run or is refused when the scenario loads.

For each registered protocol a tiny instance (a few agents, a short horizon, one trial: the
smallest setting in which it communicates) is run once as its baseline; then each key is set to a
value that differs from the default, on top of a *context* (the keys that give it something to act
on: ``link_up_rate`` needs links that go down, ``relay`` needs liars, ...), and the run is compared
with the run of the context alone. Exactly one of these must hold:

* loading is refused with an :class:`~netsim.engine.errors.InputError` whose ``key`` is the walked key (or,
  when the context itself is refused, the context's key: the walked key is then never reached); or
* the tables differ: the trial row (regret, messages, counters, protocol columns) or the per-agent
  regret or pull counts.

A key whose run equals its context run bit for bit is inert: accepted and ignored. That is the
failure this test exists for.
"""

from __future__ import annotations

import math
import tomllib
from typing import Any

import numpy as np
import pytest

from netsim.engine import scenario as S
from netsim.engine.errors import InputError
from netsim.engine.registry import protocols
from netsim.engine.sim import run_trial
from netsim.engine.streams import trial_sequence

# rio2023: an easy 3-armed problem, so that identification (the end of a run) comes after about 2e3 slots
RIO = {"network.agents": 6, "run.checkpoints": 1, "run.horizon": 20000, "bandit.arms": 3,
       "bandit.means": [0.9, 0.5, 0.1]}
# protocol -> (bundled scenario, overrides; None removes a protocol key the base scenario sets)
TINY: dict[str, tuple[str, dict[str, Any]]] = {
    "ucb1": ("quickstart", {"network.agents": 4, "run.horizon": 60}),
    "central-ucb": ("quickstart", {"protocol.name": "central-ucb", "network.servers": 1, "network.agents": 4,
                                   "run.horizon": 60}),
    # li2022: close means, so that elimination still runs while the walked crashes end (a crash after the
    # best arm is found changes who pulls it, not what a restarted agent kept)
    "cdp-mab": ("li2022-fig8-homogeneous", {"bandit.arms": 3, "bandit.means": [0.5, 0.45, 0.4], "run.horizon": 400,
                                            "protocol.epsilon": math.inf}),
    "ddp-mab": ("li2022-gis-path5", {"network.agents": 4, "run.horizon": 200}),
    "hdp-mab": ("li2022-fig11-case1", {"network.agents": 6, "network.components": 2, "bandit.arms": 3,
                                       "bandit.means": [0.5, 0.45, 0.4], "run.horizon": 300}),
    "dubey2020a-private": ("dubey2020a-fig1a", {"network.topology": "ring", "network.p": None, "network.agents": 6,
                                                "protocol.gamma": 2, "protocol.epsilon": 0.5, "run.horizon": 60}),
    "dubey2020a-byzantine": ("dubey2020a-fig1b", {"network.topology": "ring", "network.p": None,
                                                  "network.agents": 6, "protocol.gamma": 2, "run.horizon": 60}),
    "dp-ucb-int": ("dubey2020a-fig1a-dpucbint", {"network.agents": 6, "network.p": 0.6,
                                                 "protocol.epsilon": 0.5, "run.horizon": 60}),
    "fed-ucb": ("zhu2021-fig2a-eps1", {"protocol.mode": "realistic", "network.agents": 4, "run.horizon": 80}),
    "gossip-ucb": ("zhu2021-fig2a-eps1", {"protocol.name": "gossip-ucb", "protocol.epsilon": None,
                                          "protocol.mode": "realistic", "network.agents": 4, "run.horizon": 80}),
    "feducb": ("dubey2020b-fig1c", {"network.agents": 3, "run.horizon": 60}),
    "feducb-p2p": ("dubey2020b-p2p", {"network.agents": 4, "network.p": 0.8, "run.horizon": 60}),
    "mase": ("rio2023-fig1-left-eps0.1", {"protocol.name": "mase", "protocol.epsilon": None, **RIO}),
    "dp-mase": ("rio2023-fig1-left-eps0.1", RIO),
    "corrupted-elimination": ("rio2023-fig1-right-xi0.05", RIO),
    "feraud2019": ("rio2023-fig1-right-xi0.05", {"protocol.name": "feraud2019", "protocol.xi": None, **RIO}),
    "central-se": ("rio2023-fig1-central", RIO),
    "independent-se": ("rio2023-fig1-independent", RIO),
}

# (protocol, key) pairs still inert (issue 24): the test fails on any other inert key, and on a
# listed pair that became valid (remove it then).
PENDING: dict[str, set[str]] = {}

LIARS = {"adversary.byzantine": 0.34, "adversary.corruption": 1.0}
SLOW = {"model": "exponential", "mean": 2.0}


def walk(scenario: S.Scenario, edge: tuple[int, int], span: float) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(key, its setting, context) for every fault, adversary, delay and clock key.

    rio2023's exact-law event mode refuses crashes (it cannot skip a crashed agent's activations):
    its crash keys are walked in the round-by-round simulation (the context). ``span``: the end
    time of the protocol's baseline run (faults are placed and timed within it).
    """
    u, v = edge
    early, late = 0.2 * span, 0.6 * span
    downs = {"faults.link_down_rate": 0.1}
    rounds = {"protocol.simulation": "rounds"} if scenario.protocol.get("simulation") == "events" else {}
    crash = {"faults.crashes": [{"node": 1, "start": early, "end": late}]}
    return [
        ("network.delay", {"network.delay": SLOW}, {}),
        ("network.server_delay", {"network.server_delay": SLOW}, {}),
        ("network.loss", {"network.loss": 0.3}, {}),
        ("network.links", {"network.links": [{"u": u, "v": v, "delay": {"model": "constant", "value": 4.0}}]}, {}),
        ("faults.links", {"faults.links": [{"u": u, "v": v, "start": early, "end": late}]}, {}),
        ("faults.link_down_rate", downs, {}),
        ("faults.link_up_rate", {"faults.link_up_rate": 0.05}, downs),
        ("faults.crashes", crash, rounds),
        ("faults.crash_rate", {"faults.crash_rate": 1.0 / span}, rounds),
        ("faults.restart_rate", {"faults.restart_rate": 10.0 / span}, {"faults.crash_rate": 1.0 / span, **rounds}),
        ("faults.state", {"faults.state": "lost"}, {**crash, **rounds}),
        ("faults.duplication", {"faults.duplication": 0.3}, {}),
        ("faults.reorder", {"faults.reorder": 0.5}, {}),
        ("faults.reorder_delay", {"faults.reorder_delay": {"model": "constant", "value": 7.0}},
         {"faults.reorder": 0.5}),
        ("adversary.byzantine", LIARS, {}),
        ("adversary.agents", {"adversary.agents": [0], "adversary.corruption": 1.0}, {}),
        ("adversary.corruption", {"adversary.corruption": 0.5}, LIARS),
        # a blatant lie: a small one (0.5 against the default Q's 0) can leave a run unchanged by the algorithm's
        # own doing (gossip's n~ is a maximum, so a count lied below the truth is never taken)
        ("adversary.distribution", {"adversary.distribution": {"model": "constant", "value": 100.0}}, LIARS),
        ("adversary.relay", {"adversary.relay": True}, LIARS),
        ("adversary.link_corruption", {"adversary.link_corruption": 0.5}, {}),
        ("clock.period", {"clock.period": 2.0}, {}),
        ("clock.jitter", {"clock.jitter": 0.3}, {}),
    ]


def load(name: str, sets: dict[str, Any]) -> S.Scenario:
    base, tiny = TINY[name]
    path = S.locate(base)
    document = tomllib.loads(path.read_text())
    for key, value in {**tiny, **sets}.items():
        section, _, rest = key.partition(".")
        table = document.setdefault(section, {})
        if value is None:
            table.pop(rest, None)
        else:
            table[rest] = value
    document.setdefault("name", path.stem)
    document.setdefault("run", {})["trials"] = 1
    return S.from_dict(document, base_dir=path.parent, path=str(path))


def tables(scenario: S.Scenario) -> tuple:
    result = run_trial(scenario, trial_sequence(scenario.run["seed"], 0), 0)
    row = {k: v for k, v in result.row.items() if k not in ("wall_s", "scenario")}
    # pulls too: a crash after the best arm is found changes who pulls, not the pseudo-regret
    return row, np.asarray(result.agents["regret"]).round(9).tolist(), np.asarray(result.agents["pulls"]).tolist()


def outcome(name: str, key: str, setting: dict[str, Any], context: dict[str, Any], cache: dict) -> str:
    """'changed', 'refused', or why the key failed the walk (``cache``: tables by settings, per protocol)."""
    try:
        context_run = load(name, context)
    except InputError as exc:
        return "refused" if exc.key in context else f"context refused on {exc.key}: {exc.detail}"
    try:
        walked = load(name, {**context, **setting})
    except InputError as exc:
        # refused on the walked key, or on a key it conflicts with, naming it
        return "refused" if exc.key == key or key in exc.detail else f"refused on another key {exc.key}: {exc.detail}"
    for sets, scenario in ((context, context_run), ({**context, **setting}, walked)):
        if repr(sorted(sets.items())) not in cache:
            cache[repr(sorted(sets.items()))] = tables(scenario)
    same = cache[repr(sorted(context.items()))] == cache[repr(sorted({**context, **setting}.items()))]
    return "inert" if same else "changed"


def _edge(name: str) -> tuple[int, int]:
    import simpy

    from netsim.engine.streams import Streams

    scenario = load(name, {})
    network = S.build_network(scenario, simpy.Environment(), Streams(trial_sequence(scenario.run["seed"], 0)))
    return min(tuple(sorted(e)) for e in network.agent_graph.edges) if network.agent_graph.number_of_edges() else (0, 1)


def test_every_registered_protocol_has_a_tiny_instance():
    registered = {n for n in protocols.names() if not n.startswith("test-")}
    assert registered <= set(TINY), f"add a tiny instance for {sorted(registered - set(TINY))}"


@pytest.mark.parametrize("name", sorted(TINY))
def test_every_key_changes_the_run_or_is_refused(name):
    scenario = load(name, {})
    failures = []
    cache: dict = {}
    span = tables(scenario)[0]["end_time"]
    inert = set()
    for key, setting, context in walk(scenario, _edge(name), span):
        got = outcome(name, key, setting, context, cache)
        if got == "inert":
            inert.add(key)
        elif got != "changed" and got != "refused":
            failures.append(f"{key}: {got}")
    pending = PENDING.get(name, set())
    assert not failures, f"{name}: " + "; ".join(failures)
    assert not inert - pending, f"{name}: accepted and ignored: {sorted(inert - pending)}"
    assert not pending - inert, f"{name}: {sorted(pending - inert)} now change the run or are refused: unlist them"


# ---------------------------------------------------------------------- the refusals, one by one
@pytest.mark.parametrize("sets, key", [
    ({"faults.link_up_rate": 0.5}, "faults.link_up_rate"),
    ({"faults.restart_rate": 0.5}, "faults.restart_rate"),
    ({"faults.restart_rate": 0.5, "faults.crashes": [{"node": 1, "start": 5, "end": 9}]}, "faults.restart_rate"),
    ({"faults.state": "lost"}, "faults.state"),
    ({"faults.state": "lost", "faults.crashes": [{"node": 1, "start": 5}]}, "faults.state"),  # never restarts
    ({"faults.reorder_delay": {"model": "constant", "value": 3.0}}, "faults.reorder_delay"),
    ({"network.server_delay": {"model": "constant", "value": 3.0}}, "network.server_delay"),
    ({"adversary.distribution": {"model": "constant", "value": 0.5}}, "adversary.distribution"),
    ({"adversary.relay": True}, "adversary.relay"),
])
def test_a_parameter_of_something_that_is_off_is_refused(sets, key):
    with pytest.raises(InputError) as info:
        load("dubey2020a-private", sets)
    assert info.value.key == key


@pytest.mark.parametrize("sets", [
    {"faults.restart_rate": 0.5, "faults.crash_rate": 0.01},
    {"faults.state": "lost", "faults.crashes": [{"node": 1, "start": 5, "end": 9}]},
    {"faults.state": "lost", "faults.crash_rate": 0.01, "faults.restart_rate": 0.1},
    {"faults.link_up_rate": 0.5, "faults.link_down_rate": 0.1},
    {"faults.reorder_delay": {"model": "constant", "value": 3.0}, "faults.reorder": 0.1},
])
def test_the_same_parameters_with_their_fault_on_are_accepted(sets):
    load("dubey2020a-private", sets)


@pytest.mark.parametrize("key, value", [
    ("network.delay", {"model": "exponential", "mean": 2.0}), ("network.loss", 0.1),
    ("network.links", [{"u": 0, "v": 1, "loss": 0.5}]), ("faults.link_down_rate", 0.1),
    ("faults.links", [{"u": 0, "v": 1, "start": 1, "end": 5}]), ("faults.duplication", 0.1), ("faults.reorder", 0.1),
])
@pytest.mark.parametrize("name", ["ucb1", "central-ucb", "dp-ucb-int"])
def test_a_protocol_that_sends_nothing_refuses_message_keys(name, key, value):
    with pytest.raises(InputError) as info:
        load(name, {key: value, "network.topology": "complete", "network.p": None})
    assert info.value.key == key and "sends no message" in info.value.detail


def test_relay_is_refused_for_a_protocol_that_forwards_nothing():
    from netsim.comm.protocol import Protocol

    class Direct(Protocol):  # corruptible, but every message goes from its author to its reader
        name = "test-direct"
        corruptible = ("X",)

    scenario = load("dubey2020a-private", {})
    liars = scenario.with_(**{"adversary.byzantine": 0.34, "adversary.corruption": 1.0})
    S.check_adversary(liars, Direct)
    with pytest.raises(InputError) as info:
        S.check_adversary(liars.with_(**{"adversary.relay": True}), Direct)
    assert info.value.key == "adversary.relay" and "test-direct" in info.value.detail


def test_the_summary_shows_corrupted_messages(capsys):
    from netsim.experiment.cli import main

    assert main(["run", "dubey2020a-fig1a", "--set", "network.agents=6", "--set", "network.p=0.6",
                 "--set", "run.horizon=30", "--set", "adversary.agents=[0]", "--set", "adversary.corruption=1",
                 "--trials", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    header = next(s.split() for s in out if s.split()[:1] == ["trials"])
    cells = next(s.split() for s in out if "messages_corrupted" in s.split())
    row = cells[cells.index("messages_corrupted") + 1:]
    assert float(row[header.index("mean")].replace(",", "")) > 0


# ---------------------------------------------------------------------- the adversary reaches every family
ATTACKED = ["cdp-mab", "ddp-mab", "hdp-mab", "gossip-ucb", "fed-ucb", "dubey2020a-private", "dubey2020a-byzantine",
            "feducb", "feducb-p2p", "mase", "dp-mase", "corrupted-elimination", "feraud2019"]


@pytest.mark.parametrize("name", ATTACKED)
def test_byzantine_agents_corrupt_every_family(name):
    """Issue 24, item 4: byzantine = 0.3 with corruption = 1 corrupts messages (a count the engine keeps
    per changed payload) and changes the tables against the clean run of the same seed."""
    longer = {"run.horizon": 1000} if name == "ddp-mab" else {}  # its first round ends after slot 200
    clean = tables(load(name, longer))
    attacked = tables(load(name, {**longer, "adversary.byzantine": 0.3, "adversary.corruption": 1.0}))
    assert attacked[0]["messages_corrupted"] > 0
    assert attacked != clean
