"""Scenario files: parse TOML, apply ``--set`` overrides, validate, fill defaults.

A :class:`Scenario` is plain, frozen data (printable by ``netsim show``); the
:class:`~netsim.engine.sim.Simulation` builds the live objects from it. Every problem is raised as
an :class:`~netsim.engine.errors.InputError` naming the file, the dotted key and what is accepted.
"""

from __future__ import annotations

import copy
import importlib.resources
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import simpy

from netsim.bandits import bandits
from netsim.engine import budget, files
from netsim.engine import faults as F
from netsim.engine import params as P
from netsim.engine.budget import component_sizes
from netsim.engine.distributions import DELAY_MODELS, REPORT_MODELS, distribution_field, parse_distribution
from netsim.engine.errors import InputError
from netsim.engine.metrics import Metrics
from netsim.engine.network import Adversary, Network
from netsim.engine.registry import SCENARIO_GROUP, protocols
from netsim.engine.streams import Streams, trial_sequence
from netsim.engine.topology import topologies

DEFAULT_SCENARIO = "quickstart"

#: Scenario overrides: ``KEY=VALUE`` strings read like ``--set`` (the value as TOML), or a mapping
#: of dotted keys to Python values (``{"network.agents": 20}``; ``__`` may stand for the dots).
Overrides = Mapping[str, Any] | Sequence[str]

TOP = {
    "name": P.text(doc="scenario name (defaults to the file name)", label="scenario"),
    "description": P.text("", doc="one line saying what the scenario shows", label="description"),
    "source": P.text("", doc="paper, section and figure the setup comes from", label="source"),
    "scaled": P.text("", doc="how and why the scenario is scaled down from the paper", label="scaled down"),
    "bandit": P.table(doc="the bandit: kind, arms and their rewards", label="bandit"),
    "network": P.table(doc="the graph, its links, delays, losses and costs", label="network"),
    "protocol": P.table(doc="the algorithm (name) and its parameters", label="protocol"),
    "adversary": P.table({}, doc="byzantine agents and corrupting links", label="adversary"),
    "clock": P.table({}, doc="the agents' clocks", label="clock"),
    "run": P.table({}, doc="horizon, trials, seed and safety limits", label="run"),
    "faults": P.table({}, doc="fault models (netsim.engine.faults, docs/faults.md)", label="faults"),
}

NETWORK = {
    "topology": P.text("complete", doc="graph family of each component (netsim list shows them)", label="topology"),
    "agents": P.integer(10, low=1, high=1_000_000, doc="number of agents M", label="agents M"),
    "servers": P.integer(0, low=0, doc="server nodes, each linked to every agent (default: as many as the "
                                       "protocol needs, 0 for most)", label="servers"),
    "components": P.either(P.integer(low=1), P.integer_list(low=1), default=1,
                           doc="number of equal components, or their sizes (hybrid structures)",
                           label="components", unit=""),
    "delay": distribution_field(DELAY_MODELS, {"model": "constant", "value": 1.0},
                                doc="per-hop delay of agent-agent links, in slots (a bare number: constant)",
                                label="per-hop delay", unit="slots"),
    "server_delay": distribution_field(DELAY_MODELS, None,
                                       doc="per-hop delay of server-agent links (defaults to delay)",
                                       label="server-link delay", unit="slots"),
    "loss": P.probability(0.0, doc="probability that a message is lost", label="loss probability"),
    "links": P.Field("a list of tables { u, v, delay, loss }", lambda v: v if isinstance(v, list) else None, [],
                     doc="per-link overrides of delay and loss", label="per-link overrides", unit="",
                     schema={"type": "array", "items": {"type": "object"}}),
    "cost": P.table({}, doc="link costs of li2022 Eq. (2)", label="link costs"),
}
COST = {
    "agent_agent": P.real(1.0, low=0.0, doc="c2: cost of an agent-agent link per slot in which it is used",
                          label="agent-agent link cost c2", unit="cost units"),
    "server_agent": P.real(25.0, low=0.0, doc="c1: cost of a server-agent link per slot in which it is used",
                           label="server-agent link cost c1", unit="cost units"),
}
LINK = {
    "u": P.integer(low=0, doc="one end of the link (node id)", label="node u"),
    "v": P.integer(low=0, doc="the other end of the link (node id)", label="node v"),
    "delay": distribution_field(DELAY_MODELS, None, doc="this link's per-hop delay (default: network.delay)",
                                label="link delay", unit="slots"),
    "loss": P.probability(None, doc="this link's loss probability (default: network.loss)", label="link loss"),
}
ADVERSARY = {
    "byzantine": P.probability(0.0, doc="fraction of agents that are byzantine (chosen at random)",
                               label="byzantine fraction"),
    "agents": P.integer_list((), low=0, min_len=0, doc="explicit byzantine agent ids (instead of a fraction)",
                             label="byzantine agents"),
    "corruption": P.probability(0.0, doc="probability that a byzantine agent replaces a reported value",
                                label="corruption probability"),
    "distribution": distribution_field(REPORT_MODELS, {"model": "bernoulli", "p": 0.0},
                                       doc="the fixed law Q of corrupted reports",
                                       label="corrupted report Q", unit=""),
    "relay": P.boolean(False, doc="byzantine agents also corrupt records they relay", label="corrupt relayed"),
    "link_corruption": P.probability(0.0, doc="probability that a link corrupts a record in transit",
                                     label="link corruption probability"),
}
CLOCK = {
    "period": P.real(1.0, low=0.0, low_open=True, doc="length of a tick (slot)", label="tick length",
                     unit="time units"),
    "jitter": P.real(0.0, low=0.0, high=1.0, high_open=True,
                     doc="node clock jitter as a fraction of the period (0 = paper mode)", label="clock jitter",
                     unit="periods"),
}
RUN = {
    "horizon": P.real(1000.0, low=0.0, low_open=True, doc="simulated time T", label="horizon T", unit="slots"),
    "trials": P.integer(1, low=1, high=budget.MAX_TRIALS, doc="independent repetitions", label="trials"),
    "seed": P.integer(1, low=0, high=2**63 - 1, doc="root of the run's SeedSequence", label="seed"),
    "checkpoints": P.integer(100, low=1, doc="points of the regret time series", label="checkpoints"),
    "watchdog": P.real(0.0, low=0.0, allow_inf=True,
                       doc="end a trial as failed after this much simulated time without a pull or a delivery "
                           "(0 or inf = off)", label="watchdog", unit="slots"),
    "wall_budget": P.real(0.0, low=0.0, allow_inf=True,
                          doc="end a trial as failed after this many wall-clock seconds (0 or inf = off)",
                          label="wall-clock budget", unit="s"),
    "max_events": P.real(budget.MAX_EVENTS, low=1.0, high=math.inf, allow_inf=True,
                         doc="refuse the scenario when a trial's estimated events exceed this (netsim.engine.budget; "
                             "inf = no limit)", label="event limit", unit="events"),
    "max_memory": P.real(budget.MAX_MEMORY, low=1.0, high=math.inf, allow_inf=True,
                         doc="refuse the scenario when a trial's estimated memory in bytes exceeds this (inf = no "
                             "limit)", label="memory limit", unit="bytes"),
}
# Keys added after the first release: written by as_dict only when set, so that the resolved form
# (and the sweep unit ids hashed from it) of older scenarios does not change.
OPTIONAL_RUN = {"watchdog": 0.0, "wall_budget": 0.0, "max_events": budget.MAX_EVENTS,
                "max_memory": budget.MAX_MEMORY}


@dataclass(frozen=True)
class Scenario:
    """A validated scenario: every section with its defaults filled in.

    ``document`` is the scenario as it was given (the TOML document with its overrides applied,
    file paths made absolute), before defaults: :meth:`with_` applies further overrides to it
    and validates again, exactly as if they had been given with ``--set``.

    Examples
    --------
    >>> s = Scenario.load("quickstart").with_(**{"network.agents": 4}, run__horizon=50)
    >>> s.network["agents"], s.run["horizon"]
    (4, 50.0)
    """

    name: str
    description: str
    source: str
    scaled: str
    bandit: Mapping[str, Any]
    network: Mapping[str, Any]
    protocol: Mapping[str, Any]
    adversary: Mapping[str, Any]
    clock: Mapping[str, Any]
    run: Mapping[str, Any]
    path: str = ""
    faults: Mapping[str, Any] = field(default_factory=lambda: P.Frozen())
    document: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def load(cls, name_or_path: str | Path | None = None, set: Overrides | None = None) -> Scenario:
        """Read, override and validate a scenario file or bundled scenario (see :func:`load`)."""
        return load(name_or_path, set)

    def with_(self, **overrides: Any) -> Scenario:
        """This scenario with dotted keys replaced, validated again.

        Parameters
        ----------
        **overrides:
            Dotted keys and Python values: ``with_(**{"protocol.epsilon": 0.5})``, or with ``__``
            for the dots, ``with_(protocol__epsilon=0.5)``. A table value replaces the whole
            table: ``with_(protocol={"name": "ucb1"})`` switches protocol without carrying over
            the old protocol's keys.

        Raises
        ------
        InputError
            A key that is not accepted or a value out of range (naming the key and the file).
        """
        return load(self, overrides)

    def as_dict(self) -> dict[str, Any]:
        """The resolved scenario as a TOML-ready nested dict."""
        out: dict[str, Any] = {"name": self.name, "description": self.description, "source": self.source}
        if self.scaled:
            out["scaled"] = self.scaled
        for section in ("bandit", "network", "protocol", "adversary", "clock", "run"):
            out[section] = _plain(getattr(self, section))
        out["run"] = {k: v for k, v in out["run"].items() if not (k in OPTIONAL_RUN and v == OPTIONAL_RUN[k])}
        if F.kinds(self.faults):  # a section without any fault is the same scenario as none
            out["faults"] = _plain(self.faults)
        return out


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


# ---------------------------------------------------------------------- finding files
def bundled_dirs() -> list[Path]:
    """Folders of bundled scenarios announced by plug-ins (``netsim.scenarios`` entry points)."""
    dirs = []
    for ep in entry_points(group=SCENARIO_GROUP):
        dirs.append(Path(str(importlib.resources.files(ep.value))))
    return dirs


def bundled() -> dict[str, Path]:
    """Bundled scenario name → file."""
    found: dict[str, Path] = {}
    for folder in bundled_dirs():
        for path in sorted(folder.glob("*.toml")):
            found.setdefault(path.stem, path)
    return found


def locate(name_or_path: str | None) -> Path:
    """A scenario file from a path or a bundled name (``None``: the quickstart)."""
    name = name_or_path or DEFAULT_SCENARIO
    files.check_path(name, where="scenario")
    path = Path(name)
    if path.suffix == ".toml" or path.exists():
        if not path.is_file():
            raise InputError(f"scenario file {P.bounded_repr(name, 200)} not found", key=None)
        return path
    known = bundled()
    if name in known:
        return known[name]
    import difflib

    close = difflib.get_close_matches(name, list(known), n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    raise InputError(f"no scenario file or bundled scenario named {P.bounded_repr(name, 200)}{hint}; see 'netsim list'")


# ---------------------------------------------------------------------- overrides
def parse_override(text: str) -> tuple[list[str], Any]:
    """``a.b=value`` → (["a", "b"], value), the value read as a TOML value when it is one."""
    if "=" not in text:
        raise InputError(f"--set {text!r}: expected KEY=VALUE with a dotted KEY, e.g. network.agents=20")
    key, raw = text.split("=", 1)
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise InputError(f"--set {text!r}: expected KEY=VALUE with a dotted KEY, e.g. network.agents=20")
    try:
        value = files.parse_toml(f"v = {raw}")["v"]
    except InputError as exc:  # not a TOML value: the text itself, unless it nests too deep to read
        if "nested" in exc.detail:
            raise InputError(f"--set {key}: {exc.detail}") from None
        value = raw
    return key.split("."), value


def plain_value(value: Any) -> Any:
    """``value`` as TOML-like data: tuples and numpy arrays become lists, numpy scalars numbers."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Mapping):
        return {key: plain_value(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_value(item) for item in value]
    return value


def _assignments(overrides: Overrides) -> Iterator[tuple[list[str], Any, str]]:
    """``(keys, value, how the user wrote it)`` for each override, in order."""
    if isinstance(overrides, Mapping):
        for key, value in overrides.items():
            keys = str(key).replace("__", ".").split(".")
            if any(not part for part in keys):
                raise InputError(f"override {key!r}: expected a dotted KEY, e.g. network.agents")
            yield keys, plain_value(value), f"override {key!r}"
    elif isinstance(overrides, str):  # one KEY=VALUE string
        yield *parse_override(overrides), f"--set {overrides!r}"
    else:
        for text in overrides:
            keys, value = parse_override(text)
            yield keys, value, f"--set {text!r}"


def _default_table(document: Mapping[str, Any], keys: tuple[str, ...], fresh: set[tuple[str, ...]]) -> dict:
    """What ``--set`` edits when the document leaves the table ``keys`` to its default.

    Overrides apply on top of the resolved defaults (as ``netsim show`` prints them): the default
    delay table of ``[network]``, and for ``server_delay`` the agent links' delay, which it
    defaults to. A table whose ``model`` the same overrides set starts empty (another law has
    other keys).
    """
    if len(keys) != 2 or keys[0] != "network" or keys in fresh:
        return {}
    if keys[1] == "server_delay":
        return copy.deepcopy(document.get("network", {}).get("delay") or NETWORK["delay"].default)
    field = NETWORK.get(keys[1])
    return copy.deepcopy(field.default) if field is not None and isinstance(field.default, dict) else {}


#: per-agent arrays of a bandit hold agents x arms numbers (several of them, 8 bytes each): at most this many
MAX_AGENT_ARMS = 20_000_000


def _check_bandit_size(bandit: Mapping[str, Any], agents: int, source: str | None) -> None:
    """Refuse an arm count this machine cannot hold for every agent (before anything is built)."""
    arms = bandit.get("arms")
    if isinstance(arms, int) and arms * agents > MAX_AGENT_ARMS:
        raise InputError(f"{arms:,} arms for {agents:,} agents make {arms * agents:,} per-agent entries; accepted: "
                         f"agents x arms at most {MAX_AGENT_ARMS:,}", source=source, key="bandit.arms")


def apply_overrides(document: dict[str, Any], overrides: Overrides) -> dict[str, Any]:
    """Apply overrides (:data:`Overrides`) to a raw (unvalidated) scenario document."""
    assignments = list(_assignments(overrides))
    fresh = {tuple(keys[:-1]) for keys, _, _ in assignments if keys[-1] == "model"}
    for keys, value, label in assignments:
        target = document
        for depth, part in enumerate(keys[:-1]):
            if part not in target:
                target[part] = _default_table(document, tuple(keys[:depth + 1]), fresh)
            nxt = target[part]
            if not isinstance(nxt, dict):
                raise InputError(f"{label}: {part!r} is not a table", key=".".join(keys))
            target = nxt
        target[keys[-1]] = copy.deepcopy(value)  # the caller's lists and tables are never shared
    return document


# ---------------------------------------------------------------------- validation
def load(name_or_path: str | Path | Scenario | None = None, overrides: Overrides | None = None) -> Scenario:
    """Read, override and validate a scenario; errors name the file.

    Parameters
    ----------
    name_or_path:
        A scenario file, the name of a bundled scenario (``None``: the quickstart), or a
        :class:`Scenario`, whose ``document`` the overrides then apply to.
    overrides:
        ``KEY=VALUE`` strings (as ``--set``) or a mapping of dotted keys to values.
    """
    if isinstance(name_or_path, Scenario):
        base = name_or_path
        document = apply_overrides(copy.deepcopy(dict(base.document)), overrides or [])
        try:
            return from_dict(document, base_dir=Path(base.path).parent if base.path else None, path=base.path)
        except InputError as exc:
            raise exc.located(base.path) if base.path else exc from None
    path = locate(None if name_or_path is None else str(name_or_path))
    document = files.read_toml(path, what="scenario file")
    try:
        document = apply_overrides(document, overrides or [])
        document.setdefault("name", path.stem)
        return from_dict(document, base_dir=path.parent, path=str(path))
    except InputError as exc:
        raise exc.located(str(path)) from None


def from_dict(document: Mapping[str, Any], *, base_dir: Path | None = None, path: str = "") -> Scenario:
    """Validate a scenario given as a nested dict (as parsed from TOML)."""
    source = path or None
    doc = P.validate(document, TOP, source=source)
    if not doc["name"].isprintable():  # it names the default results folder and every table row
        raise InputError(f"got {P.bounded_repr(doc['name'])}; expected printable text (no control character)",
                         source=source, key="name")
    base = base_dir or Path.cwd()

    bandit_kind = doc["bandit"].get("kind", "bernoulli")
    bandit_cls = bandits.get(bandit_kind, key="bandit.kind", source=source)
    bandit = P.validate({k: v for k, v in doc["bandit"].items() if k != "kind"}, bandit_cls.fields,
                        where="bandit", source=source)
    if "file" in bandit:
        bandit["file"] = str(files.absolute(base, bandit["file"], where="bandit.file"))
    bandit_cls.check(bandit, source)
    bandit = {"kind": bandit_kind, **bandit}

    name = doc["protocol"].get("name")
    if name is None:
        raise InputError(f"missing; accepted: {', '.join(protocols.names())}", source=source, key="protocol.name")
    protocol_cls = protocols.get(name, key="protocol.name", source=source)
    raw_network = doc["network"]
    if "servers" not in raw_network and protocol_cls.servers:  # the default: as many as the protocol needs
        raw_network = {**raw_network, "servers": protocol_cls.servers}
    network = _validate_network(raw_network, base, source)
    _check_bandit_size(bandit, agents=network["agents"], source=source)
    bandit_cls.check_agents(bandit, network["agents"], source)  # data files are read and checked now

    protocol = P.validate({k: v for k, v in doc["protocol"].items() if k != "name"}, protocol_cls.fields,
                          where="protocol", source=source)
    protocol = {"name": name, **protocol}

    adversary = P.validate(doc["adversary"], ADVERSARY, where="adversary", source=source)
    parse_distribution(adversary["distribution"], key="adversary.distribution", models=REPORT_MODELS, source=source)
    bad = [a for a in adversary["agents"] if a >= network["agents"]]
    if bad:
        raise InputError(f"agent {bad[0]} does not exist; accepted: ids 0..{network['agents'] - 1}",
                         source=source, key="adversary.agents")

    given = copy.deepcopy(dict(document))
    for section, table in (("bandit", bandit), ("network", network)):
        if "file" in table:  # absolute, so that the document validates the same from any folder
            given[section] = {**given[section], "file": table["file"]}
    scenario = Scenario(
        name=doc["name"], description=doc["description"], source=doc["source"], scaled=doc["scaled"],
        bandit=P.Frozen(bandit), network=P.Frozen(network),
        protocol=P.Frozen(protocol), adversary=P.Frozen(adversary),
        clock=P.Frozen(P.validate(doc["clock"], CLOCK, where="clock", source=source)),
        run=P.Frozen(P.validate(doc["run"], RUN, where="run", source=source)),
        path=path,
        faults=P.Frozen(F.validate(doc["faults"], nodes=network["agents"] + network["servers"], source=source)),
        document=given,
    )
    _check_protocol_fit(scenario, protocol_cls, source)
    return scenario


def _validate_network(raw: Mapping[str, Any], base: Path, source: str | None) -> dict[str, Any]:
    topology = topologies.get(raw.get("topology", "complete"), key="network.topology", source=source)
    fields = {**NETWORK, **topology.fields}
    network = P.validate(raw, fields, where="network", source=source)
    if "file" in network:
        network["file"] = str(files.absolute(base, network["file"], where="network.file"))
    network["cost"] = P.validate(network["cost"], COST, where="network.cost", source=source)
    network["delay"] = parse_distribution(network["delay"], key="network.delay", models=DELAY_MODELS,
                                          source=source).as_table()
    if network["server_delay"] is not None:
        network["server_delay"] = parse_distribution(network["server_delay"], key="network.server_delay",
                                                     models=DELAY_MODELS, source=source).as_table()
    links = []
    for i, link in enumerate(network["links"]):
        where = f"network.links[{i}]"
        if not isinstance(link, Mapping):
            raise InputError("expected a table { u, v, delay, loss }", source=source, key=where)
        link = P.validate(link, LINK, where=where, source=source)
        if link["delay"] is not None:
            link["delay"] = parse_distribution(link["delay"], key=f"{where}.delay", models=DELAY_MODELS,
                                               source=source).as_table()
        links.append(link)
    network["links"] = links
    components = network["components"]
    agents = network["agents"]
    if isinstance(components, int):
        if components > agents:
            raise InputError(f"{components} components for {agents} agents; accepted: at most {agents}",
                             source=source, key="network.components")
    elif sum(components) != agents:
        raise InputError(f"component sizes sum to {sum(components)} but agents = {agents}; "
                         "accepted: sizes that sum to network.agents", source=source, key="network.components")
    from netsim.engine.topology import check_size  # noqa: PLC0415 (topology imports networkx builders lazily)

    check_size(network["topology"], component_sizes(network), network, source=source)
    return network


def _check_protocol_fit(scenario: Scenario, protocol_cls: Any, source: str | None) -> None:
    kinds = protocol_cls.bandit_kinds
    if kinds is not None and scenario.bandit["kind"] not in kinds:
        raise InputError(f"protocol {protocol_cls.name!r} cannot use bandit kind {scenario.bandit['kind']!r}; "
                         f"accepted: {', '.join(kinds)}", source=source, key="bandit.kind")
    need = protocol_cls.servers
    if need is not None and scenario.network["servers"] != need:
        raise InputError(f"protocol {protocol_cls.name!r} needs {need} server node(s), got "
                         f"{scenario.network['servers']}; accepted: servers = {need}", source=source,
                         key="network.servers")
    if scenario.run["checkpoints"] > 10**6:
        raise InputError("too many checkpoints; accepted: at most 1000000", source=source, key="run.checkpoints")
    try:
        F.check_inert(scenario.faults)
        F.check_protocol(scenario.faults, protocol_cls)
        check_network_keys(scenario, protocol_cls)
        check_adversary(scenario, protocol_cls)
        protocol_cls.check(scenario)
        budget.check(scenario, protocol_cls)  # before anything is built: a graph or a trial it cannot afford
        # A dry build of trial 0's network catches disconnected graphs and bad topology keys now.
        network = build_network(scenario, simpy.Environment(), Streams(trial_sequence(scenario.run["seed"], 0)))
        protocol_cls.check_network(scenario, network)
        # A random topology draws another graph for every trial: check each of them too.
        check_trial_graphs(scenario, range(1, scenario.run["trials"]))
    except InputError as exc:
        raise exc.located(source) if source else exc from None


def check_trial_graphs(scenario: Scenario, trials: Iterator[int] | Sequence[int], point: tuple[int, ...] = ()) -> None:
    """Build the graph of every trial in ``trials`` (of sweep point ``point``) and check it as a run would.

    Only a random topology draws a different graph per trial; for the others trial 0's check holds for
    all. The graph of a trial comes from its own ``topology`` stream, so this builds exactly the graph
    the trial will run on: connectivity, ``network.links`` and ``faults.links`` are checked on it, and
    an error names the trial (``netsim show`` and the first trial would otherwise pass and a later
    trial fail in the middle of a run or sweep). Graphs are built only when a check can fail: named
    links, or a protocol that needs a connected graph on a topology that may draw a disconnected one
    (Erdos-Renyi graphs are drawn again until connected, the same way in every trial).
    """
    topology = topologies.get(scenario.network["topology"], key="network.topology")
    if not topology.random:
        return
    protocol_cls = protocols.get(scenario.protocol["name"], key="protocol.name")
    named = scenario.network["links"] or (F.kinds(scenario.faults) and scenario.faults["links"])
    if not named and not (protocol_cls.requires_connected and topology.may_disconnect):
        return
    budget.check_graphs(scenario)
    for trial in trials:
        streams = Streams(trial_sequence(scenario.run["seed"], trial, point))
        try:
            trial_graph(scenario, streams)
        except InputError as exc:
            raise InputError(f"in the {scenario.network['topology']} graph of trial {trial} (a random topology draws a "
                             f"new graph for every trial): {exc.detail}", key=exc.key) from None


# ---------------------------------------------------------------------- building
def trial_graph(scenario: Scenario, streams: Streams) -> tuple[nx.Graph, list[list[int]]]:
    """The graph of one trial (agents, then server nodes linked to every agent) and the agents of each
    component, checked: connected where the protocol needs it, every ``network.links`` and
    ``faults.links`` pair an edge of it."""
    spec = scenario.network
    topology = topologies.get(spec["topology"], key="network.topology")
    options = {k: spec[k] for k in topology.fields}
    sizes = component_sizes(spec)
    protocol_cls = protocols.get(scenario.protocol["name"], key="protocol.name")
    rng = streams.for_("topology")
    from netsim.engine.topology import build_components

    graph, members = build_components(topology, sizes, options, rng)
    if protocol_cls.requires_connected:
        for q, member in enumerate(members):
            if len(member) > 1 and not nx.is_connected(graph.subgraph(member)):
                where = f"component {q} of " if len(members) > 1 else ""
                raise InputError(f"{where}the {spec['topology']} graph is disconnected but protocol "
                                 f"{protocol_cls.name!r} needs a connected graph; accepted: a connected topology",
                                 key="network.topology")
    agents = spec["agents"]
    for s in range(spec["servers"]):
        graph.add_node(agents + s)
        graph.add_edges_from((agents + s, a) for a in range(agents))
    for i, link in enumerate(spec["links"]):
        u, v = link["u"], link["v"]
        if not graph.has_edge(u, v):
            raise InputError(f"there is no link between {u} and {v}", key=f"network.links[{i}]")
    if F.kinds(scenario.faults):
        for i, link in enumerate(scenario.faults["links"]):
            if not graph.has_edge(link["u"], link["v"]):
                raise InputError(f"there is no link between {link['u']} and {link['v']}; accepted: a pair of "
                                 "linked nodes", key=f"faults.links[{i}]")
    return graph, members


def build_network(scenario: Scenario, env: simpy.Environment, streams: Streams) -> Network:
    """The live :class:`~netsim.engine.network.Network` of one trial."""
    spec = scenario.network
    graph, members = trial_graph(scenario, streams)
    agents = spec["agents"]
    delay = parse_distribution(spec["delay"], key="network.delay", models=DELAY_MODELS)
    server_delay = delay if spec["server_delay"] is None else parse_distribution(
        spec["server_delay"], key="network.server_delay", models=DELAY_MODELS)
    overrides = {}
    for link in spec["links"]:
        u, v = link["u"], link["v"]
        law_delay = delay if link["delay"] is None else parse_distribution(link["delay"], key="delay",
                                                                           models=DELAY_MODELS)
        overrides[(u, v)] = (law_delay, spec["loss"] if link["loss"] is None else link["loss"])
    cost = spec["cost"]
    metrics = Metrics(graph.number_of_nodes(), agents, cost["agent_agent"], cost["server_agent"],
                      slot=scenario.clock["period"])
    network = Network(env, graph, num_agents=agents, components=members, delay=delay, server_delay=server_delay,
                      loss=spec["loss"], link_overrides=overrides, rng=streams.for_("network"), metrics=metrics,
                      delay_rng=streams.for_("delays"),
                      adversary=_adversary(scenario, streams), adversary_rng=streams.for_("adversary"))
    if F.kinds(scenario.faults):
        network.faults = F.Faults(scenario.faults, env=env, edges=list(graph.edges), num_nodes=graph.number_of_nodes(),
                                  num_agents=agents, streams=streams, extras=metrics.extras)
    return network


def byzantine_count(adversary: Mapping[str, Any], agents: int) -> int:
    """How many agents ``[adversary]`` makes byzantine: the listed ones, or ``byzantine`` x agents rounded."""
    if adversary["agents"]:
        return len(set(adversary["agents"]))
    return int(math.floor(adversary["byzantine"] * agents + 0.5))


def check_network_keys(scenario: Scenario, protocol_cls: Any) -> None:
    """Refuse a network or link-fault key that cannot act on this scenario.

    ``server_delay`` without server nodes; for a protocol whose agents talk only to servers
    (``Protocol.agent_links = False``), links between two agents and a ``delay`` that the set
    ``server_delay`` leaves on no link; and for a protocol that sends no message
    (``Protocol.sends = False``: isolated or centralised baselines), every key that only acts on
    messages: delays, loss, per-link overrides, links going down, duplication, reordering.
    """
    net, faults = scenario.network, scenario.faults
    if net["server_delay"] is not None and net["servers"] == 0:
        raise InputError("server_delay is the delay of server-agent links, and there is no server; accepted: "
                         "network.servers > 0, or no server_delay", key="network.server_delay")
    if protocol_cls.sends and not protocol_cls.agent_links:
        agents = net["agents"]
        if any(link["u"] < agents and link["v"] < agents for link in net["links"]):
            raise InputError(f"protocol {protocol_cls.name!r} sends only between agents and servers, so a link between "
                             f"two agents carries nothing; accepted: links with one end a server (node >= {agents})",
                             key="network.links")
        if net["server_delay"] is not None and net["delay"] != NETWORK["delay"].default:
            raise InputError(f"protocol {protocol_cls.name!r} sends only between agents and servers, so with "
                             "network.server_delay set, network.delay acts on no link; accepted: one of network.delay "
                             "and network.server_delay",
                             key="network.delay")
    if protocol_cls.sends:
        return
    acting = [
        ("network.delay", net["delay"] != NETWORK["delay"].default),
        ("network.server_delay", net["server_delay"] is not None),
        ("network.loss", net["loss"] > 0),
        ("network.links", bool(net["links"])),
        ("faults.links", bool(faults["links"])),
        ("faults.link_down_rate", faults["link_down_rate"] > 0),
        ("faults.duplication", faults["duplication"] > 0),
        ("faults.reorder", faults["reorder"] > 0),
    ]
    for key, on in acting:
        if on:
            raise InputError(f"protocol {protocol_cls.name!r} sends no message, so {key} changes nothing; accepted: "
                             f"the default {key} (its agents learn alone or from a central pool)", key=key)


def check_adversary(scenario: Scenario, protocol_cls: Any) -> None:
    """Refuse an ``[adversary]`` section that would do nothing, or that the protocol gives nothing to corrupt.

    Byzantine agents lie with probability ``corruption``: byzantine agents with ``corruption = 0``
    never lie, and ``corruption > 0`` without byzantine agents has nobody to lie. A protocol whose
    ``corruptible`` kinds are empty exchanges no reward statistics (ucb1, central-ucb): an adversary
    there is meaningless, and refused rather than silently ignored.
    """
    spec = scenario.adversary
    liars = byzantine_count(spec, scenario.network["agents"])
    named = "adversary.agents" if spec["agents"] else "adversary.byzantine"
    if (spec["byzantine"] > 0 or spec["agents"]) and liars == 0:
        raise InputError(f"byzantine = {spec['byzantine']:g} of {scenario.network['agents']} agents rounds to no "
                         f"byzantine agent; accepted: byzantine >= {0.5 / scenario.network['agents']:.3g}",
                         key=named)
    if liars and spec["corruption"] == 0:
        raise InputError(f"{liars} byzantine agent(s) with corruption = 0 never lie; accepted: adversary.corruption "
                         "> 0 (the probability that a byzantine agent replaces a reported value)",
                         key="adversary.corruption")
    if spec["corruption"] > 0 and not liars:
        raise InputError("corruption is the probability that a byzantine agent lies, and there is none; accepted: "
                         "adversary.byzantine > 0 or adversary.agents", key="adversary.corruption")
    if (liars or spec["link_corruption"] > 0) and not protocol_cls.corruptible:
        raise InputError(f"protocol {protocol_cls.name!r} exchanges no reward statistics, so an adversary has "
                         "nothing to corrupt; accepted: no [adversary] section (byzantine = 0, link_corruption = 0)",
                         key=named if liars else "adversary.link_corruption")
    if not liars and spec["link_corruption"] == 0 and spec["distribution"] != ADVERSARY["distribution"].default:
        raise InputError("distribution is the law Q of corrupted values, and nobody corrupts; accepted: "
                         "adversary.byzantine > 0 (with corruption > 0) or adversary.link_corruption > 0",
                         key="adversary.distribution")
    if spec["relay"] and not liars:
        raise InputError("relay makes byzantine agents also corrupt what they forward, and there is none; "
                         "accepted: relay = false, or adversary.byzantine > 0", key="adversary.relay")
    if spec["relay"] and not protocol_cls.relays:
        raise InputError(f"protocol {protocol_cls.name!r} forwards no record another agent created, so relay "
                         "changes nothing; accepted: relay = false", key="adversary.relay")


def _adversary(scenario: Scenario, streams: Streams) -> Adversary | None:
    spec = scenario.adversary
    agents = scenario.network["agents"]
    if spec["agents"]:
        byzantine = frozenset(spec["agents"])
    elif spec["byzantine"] > 0:
        count = byzantine_count(spec, agents)
        byzantine = frozenset(int(a) for a in streams.for_("byzantine").choice(agents, count, replace=False))
    else:
        byzantine = frozenset()
    if not byzantine and spec["link_corruption"] == 0:
        return None
    q = parse_distribution(spec["distribution"], key="adversary.distribution", models=REPORT_MODELS)
    return Adversary(byzantine, spec["corruption"], q, spec["relay"], spec["link_corruption"])


def resolved_toml(scenario: Scenario) -> str:
    """The resolved scenario as TOML text."""
    import tomli_w

    return tomli_w.dumps(_toml_safe(scenario.as_dict()))


def _toml_safe(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _toml_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_toml_safe(v) for v in value]
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    return value
